"""Each chapter page's download menu, followed as a reader does: the page's notebook and its MyST source.

The menu's .ipynb is the page's reader notebook (tools/extensions/reader_notebooks.py), the zip's notebook
but for its links (the website's addresses where the zip's are relative): it must be a valid notebook with
the zip's code cells and Markdown, executed top to bottom (its execution counts rising: the book-internal
cells it leaves out ran in between) with no error, and the kernel the zip's notebook asks for. The zip's notebook runs in the reader's environment (test_notebooks_zip.py), so the download,
holding the same code for the same kernel, runs there too. The menu's .md is the MyST source: opened with
jupytext (the book's pinned version, as JupyterLab's "Open With > Jupytext Notebook" does; the reader's
environment holds no build tool, test_notebooks_zip.py) it must hold the
same code cells, and the book-internal ones the notebook leaves out. That the links resolve is tests/site/test_built_site.py's and test_reader_notebooks.py's.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from tools import ROOT
from tools.built_site import HTML
from tools.extensions.reader_notebooks import cells_left_out

CHAPTERS = sorted(path.stem for path in (ROOT / "chapters").glob("*.ipynb"))
MENU = re.compile(r'<div class="dropdown dropdown-download-buttons">(.*?)</ul>', re.DOTALL)
ENTRY = re.compile(r'<a href="([^"]+)"[^>]*>.*?<span class="btn__text-container">([^<]+)</span>', re.DOTALL)


def download_menu(page: str) -> dict[str, str]:
    """The entries of a built page's download menu: their text (".ipynb", ".md", ...) and address."""
    menu = MENU.search((HTML / page).read_text(encoding="utf-8"))
    assert menu, f"{page} has no download menu"
    return {text.strip(): href for href, text in ENTRY.findall(menu.group(1))}


LINK_TARGET = re.compile(r"\]\([^)\s]+\)")


def cells(notebook) -> list[tuple[str, str]]:
    """The notebook's cells, each link's target left out (the zip's are relative, the download's absolute)."""
    return [(cell.cell_type, LINK_TARGET.sub("]()", cell.source)) for cell in notebook.cells]


def code_cells(cells: list[tuple[str, str]]) -> list[str]:
    return [source for cell_type, source in cells if cell_type == "code"]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_notebook_download_is_the_zips_notebook_executed_top_to_bottom(fetch, unzipped, chapter):
    page = f"chapters/{chapter}.html"
    menu = download_menu(page)
    assert ".ipynb" in menu, f"the download menu of {page} offers no notebook: {sorted(menu)}"
    data = fetch(page, menu[".ipynb"])
    zipped_path = unzipped.folder / "chapters" / f"{chapter}.ipynb"
    if data == zipped_path.read_bytes():
        return  # byte for byte the zip's notebook
    downloaded = nbformat.reads(data.decode("utf-8"), as_version=4)
    nbformat.validate(downloaded)
    zipped = nbformat.read(zipped_path, as_version=4)
    assert cells(downloaded) == cells(zipped), f"the .ipynb of {page} is not the zip's {chapter}.ipynb"
    assert downloaded.metadata.kernelspec == zipped.metadata.kernelspec
    code = [cell for cell in downloaded.cells if cell.cell_type == "code"]
    counts = [cell.execution_count for cell in code]  # the cells it leaves out ran in between
    assert counts[0] == 1 and all(a < b for a, b in zip(counts, counts[1:])), (
        f"the .ipynb of {page} was not executed top to bottom in one run")
    errors = [index for index, cell in enumerate(downloaded.cells)
              if any(output.output_type == "error" for output in cell.get("outputs", []))]
    assert errors == [], f"cells of the .ipynb of {page} show errors: {errors}"


@pytest.fixture(scope="module")
def sources_as_notebooks(fetch, tmp_path_factory) -> dict[str, list[tuple[str, str, list[str]]]]:
    """Each chapter page's .md download, read by jupytext (requirements-build.txt's pin)."""
    import jupytext

    folder = tmp_path_factory.mktemp("sources")
    read_cells = {}
    for chapter in CHAPTERS:
        page = f"chapters/{chapter}.html"
        menu = download_menu(page)
        assert ".md" in menu, f"the download menu of {page} offers no source: {sorted(menu)}"
        path = folder / f"{chapter}.md"
        path.write_bytes(fetch(page, menu[".md"]))
        read_cells[chapter] = [(cell.cell_type, cell.source, cell.metadata.get("tags", []))
                               for cell in jupytext.read(path).cells]
    return read_cells


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_source_download_opens_in_jupytext_as_the_same_notebook(sources_as_notebooks, unzipped, chapter):
    zipped = nbformat.read(unzipped.folder / "chapters" / f"{chapter}.ipynb", as_version=4)
    code = {index: nbformat.v4.new_code_cell(source, metadata={"tags": tags})
            for index, (cell_type, source, tags) in enumerate(sources_as_notebooks[chapter]) if cell_type == "code"}
    left_out, _ = cells_left_out(code)  # the book-internal cells the notebook leaves out
    assert [cell.source for index, cell in code.items() if index not in left_out] == code_cells(cells(zipped)), (
        f"the .md of chapters/{chapter}.html opens with code cells other than the zip's {chapter}.ipynb")
