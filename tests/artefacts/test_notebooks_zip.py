"""The notebooks zip, used as its README says: unzip it in a fresh folder, install, run every chapter.

tests/site/test_built_site.py checks that the zip holds every chapter notebook and the package; these
tests use it. The `reader` fixture (conftest.py) downloads it through the introduction's link, unzips it
and runs the README's install commands; here the environment they made must hold the zip's `attnbook`
and nothing of this repository, the README's run command must be installed, and every chapter notebook
must run top to bottom in it, within a bound, with no cell printing to stderr. The zh-Hant site's zip holds the
same package and code cells, its Markdown and pictures in zh-Hant: its chapters run once too, in the same environment.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import shutil
import time
import tomllib
import zipfile
from pathlib import Path, PurePosixPath

import pytest

from tools import ROOT

NOTEBOOKS = sorted(path.name for path in (ROOT / "chapters").glob("*.ipynb"))
CELL_TIMEOUT_S = 120  # as the build's (_config.yml execute.timeout) and nbval's (the Makefile's NBVAL_ARGS)
NOTEBOOK_TIMEOUT_S = 600
RUNNER = Path(__file__).with_name("run_notebook.py")
# what no one should download: caches, build metadata, editor state
JUNK = re.compile(r"(^|/)(__pycache__|\.ipynb_checkpoints|[^/]+\.egg-info)(/|$)|\.pyc$")


def test_the_zip_is_sound_and_unpacks_inside_its_folder(notebooks_zip):
    with zipfile.ZipFile(io.BytesIO(notebooks_zip)) as archive:
        assert archive.testzip() is None, "a member of the zip is corrupt"
        names = archive.namelist()
    outside = [name for name in names if name.startswith("/") or ".." in PurePosixPath(name).parts]
    assert outside == [], f"members that unpack outside the folder: {outside}"
    assert [name for name in names if JUNK.search(name)] == []
    assert len(names) == len(set(names)), "the zip holds a file twice"


def test_every_file_the_readme_names_is_in_the_folder(unzipped):
    """Paths the README quotes (`requirements.txt`, `chapters/`, the licences) are there to be found."""
    quoted = re.findall(r"`([A-Za-z0-9_.\-/]+)`", unzipped.readme)
    paths = [q for q in quoted if ("/" in q or "." in q or q.isupper()) and not q.startswith(".")]
    assert {"requirements.txt", "chapters/"} <= set(paths), paths
    assert [path for path in paths if not (unzipped.folder / path).exists()] == []


def test_the_environment_holds_the_zips_attnbook_and_nothing_of_the_repository(reader):
    probe = ("import json, sys, attnbook, ipywidgets, matplotlib, numpy; "
             "print(json.dumps({'file': attnbook.__file__, 'version': attnbook.__version__, 'path': sys.path}))")
    result = reader.run([str(reader.python), "-c", probe], timeout=60, what="importing attnbook")
    assert result.returncode == 0, f"the notebooks' imports fail in the reader's environment:\n{result.stderr}"
    found = json.loads(result.stdout)
    assert Path(found["file"]).is_relative_to(reader.folder / "code" / "src"), (
        f"attnbook is imported from {found['file']}, not from the zip's code/ folder")
    pyproject = tomllib.loads((reader.folder / "code" / "pyproject.toml").read_text(encoding="utf-8"))
    assert found["version"] == pyproject["project"]["version"]
    leaks = [entry for entry in found["path"] if entry and Path(entry).resolve().is_relative_to(ROOT)]
    assert leaks == [], f"the reader's Python sees the repository: {leaks}"


def test_the_environment_holds_no_build_tool(reader):
    """requirements.txt is the reader's kernel, not the book's tool-chain (requirements-build.txt): no Sphinx,
    Jupyter Book, myst-nb or JupyterLite (whose JupyterLab extension fails on every page load of a local Jupyter)."""
    probe = ("import importlib.metadata, json; print(json.dumps(sorted("
             "distribution.metadata['Name'].lower() for distribution in importlib.metadata.distributions())))")
    result = reader.run([str(reader.python), "-c", probe], timeout=60, what="listing the installed distributions")
    assert result.returncode == 0, result.stderr
    installed = set(json.loads(result.stdout))
    build = {"sphinx", "jupyter-book", "myst-nb", "jupyterlite-core", "jupyterlite-pyodide-kernel", "jupytext", "nbval"}
    assert installed & build == set()


def test_the_readme_run_command_is_installed(reader):
    """`jupyter lab chapters`: the program and its subcommand answer, and the folder it opens exists."""
    commands = [line for line in reader.commands("Run").splitlines() if line.strip()]
    assert commands, "the README's Run section gives no command"
    for line in commands:
        words = shlex.split(line)
        program = shutil.which(words[0], path=str(reader.python.parent))
        assert program, f"`{line}`: {words[0]} is not in the environment the README installs"
        subcommand = [w for w in words[1:2] if not w.startswith("-")]
        result = reader.run([program, *subcommand, "--version"], timeout=120, what=f"`{line}` --version")
        assert result.returncode == 0, f"`{line}` does not run in the reader's environment:\n{result.stderr[-2000:]}"
        opened = [w for w in words[2:] if not w.startswith("-")]
        assert all((reader.folder / w).exists() for w in opened), f"`{line}` opens a folder the zip lacks"


def run_top_to_bottom(reader, path: Path, what: str, timings: list[str]) -> None:
    """Run the notebook at ``path`` in the reader's environment; fail naming ``what`` if a cell fails or prints to stderr."""
    assert path.is_file(), f"{what} is not in the zip"
    start = time.perf_counter()
    result = reader.run([str(reader.python), str(RUNNER), str(path), str(CELL_TIMEOUT_S)],
                        timeout=NOTEBOOK_TIMEOUT_S, what=f"{what}, run top to bottom,", cwd=path.parent)
    timings.append(f"{what} ran in {time.perf_counter() - start:.0f} s")
    if result.returncode != 0:  # the runner names the cell and the error; the kernel's own log if it had none
        pytest.fail(f"{what} fails in the environment the zip's README installs:\n"
                    f"{result.stdout[-4000:] or result.stderr[-4000:]}", pytrace=False)
    stderr = [line for line in result.stdout.splitlines() if line.startswith("STDERR ")]
    assert stderr == [], f"cells of {what} print to stderr (a warning box in Jupyter): {stderr}"


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_chapter_notebook_runs_top_to_bottom_in_the_readers_environment(reader, timings, notebook):
    run_top_to_bottom(reader, reader.folder / "chapters" / notebook, notebook, timings)


@pytest.fixture(scope="session")
def zh_hant_folder(site_url, unzipped, notebooks_zip, tmp_path_factory) -> Path:
    """The zh-Hant site's notebooks zip, downloaded through its introduction's link and unzipped; its package
    is the English zip's, byte for byte, so the reader's environment the English README installed runs it."""
    from tests.artefacts.conftest import download, page_links
    from tools.extensions.notebooks_zip import NOTEBOOKS_ZIP

    page = "zh-Hant/chapters/intro.html"
    links = [href for href in page_links(page) if href.endswith(NOTEBOOKS_ZIP)]
    assert links, f"{page} does not link {NOTEBOOKS_ZIP}"
    folder = tmp_path_factory.mktemp("reader-zh-Hant")
    with zipfile.ZipFile(io.BytesIO(download(site_url, page, links[0]))) as translated, \
            zipfile.ZipFile(io.BytesIO(notebooks_zip)) as english:
        package = sorted(n for n in english.namelist() if not n.endswith(".ipynb") and n != "README.md")
        assert sorted(n for n in translated.namelist() if not n.endswith(".ipynb") and n != "README.md") == package
        differ = [n for n in package if translated.read(n) != english.read(n)]
        assert differ == [], f"the zh-Hant zip's files differ from the English zip's: {differ[:5]}"
        translated.extractall(folder)
    return folder


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_zh_hant_chapter_notebook_runs_top_to_bottom_in_the_readers_environment(reader, zh_hant_folder, timings,
                                                                                    notebook):
    run_top_to_bottom(reader, zh_hant_folder / "chapters" / notebook, f"zh-Hant {notebook}", timings)
