"""A local Sphinx extension: the book's JupyterLite site ("run in your browser", no server).

jupyterlite-sphinx builds a JupyterLite site into ``_build/html/lite/`` at the end of the HTML build,
with every chapter notebook (``jupyterlite_contents`` in _config.yml). This extension runs after it and

* builds the ``attnbook`` wheel from ./code, and the wheel of web/lite/shims (a ``myst_nb.glue`` for
  the browser, where myst-nb cannot be installed), offline (no build isolation, no index; fixed
  timestamps, so the same sources give the same wheel);
* hosts Pyodide itself (``PYODIDE_DIR``; web/lite/jupyter-lite.json points the kernel's ``pyodideUrl``
  at it), so that the lite site computes with no internet at all: the verified distribution of
  tools/pyodide_dist.py (npm's Pyodide core, and the packages the kernel and the chapters load, each
  checked against npm's lock), whose lock gets entries for those two wheels and the ones listed in
  web/lite/kernel-wheels.txt (ipywidgets, comm), which sit beside it. The Pyodide kernel calls
  ``loadPackagesFromImports`` before every cell, so ``import attnbook`` (or ``import ipywidgets``)
  loads the wheel and its dependencies (numpy, matplotlib) with no install cell;
* adds a "JupyterLite" entry to the launch dropdown of every page whose notebook is in the lite site,
  as a link relative to the page (it works offline and on GitHub Pages);
* drops the stylesheet and script jupyterlite-sphinx adds to every page for its directives, which the
  book does not use: one of them is a web font from the internet, which an offline page must not load.
"""

from __future__ import annotations

import email.parser
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tools import pyodide_dist

LITE_DIR = "lite"  # jupyterlite-sphinx's output folder inside the HTML output
PYODIDE_DIR = "static/pyodide"  # inside LITE_DIR: Pyodide and its lock; see web/lite/jupyter-lite.json
DOIT_DB = ".jupyterlite.doit.db"  # where `jupyter lite build` (run in the source folder) records its steps
LITE_APP = "notebooks/index.html"  # the Jupyter Notebook interface of the lite site
KERNEL_WHEELS = Path(".venv/lite-wheels")  # downloaded by `make book` from web/lite/kernel-wheels.txt
KERNEL_WHEEL_LIST = Path("web/lite/kernel-wheels.txt")
# built into wheels for the lite lock: the book's package, and stand-ins for what Pyodide cannot install
LOCAL_PROJECTS = [Path("code"), Path("web/lite/shims")]
SHIMS = "attnbook-lite-shims"  # the distribution name of web/lite/shims
SOURCE_DATE_EPOCH = "1767225600"  # 2026-01-01: wheel member timestamps
# what jupyterlite-sphinx adds to every page, for its directives (notebooklite, try_examples, ...)
UNUSED_PAGE_ASSETS = ("https://fonts.googleapis.com/css?family=Vibur", "jupyterlite_sphinx.css", "jupyterlite_sphinx.js")


def build_wheel(project: Path, out_dir: Path) -> Path:
    """Build the wheel of a local project from a copy of it (so no build/ folder is left in the sources)."""
    with tempfile.TemporaryDirectory() as tmp:
        source, built = Path(tmp) / "project", Path(tmp) / "wheel"
        shutil.copytree(project, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                   "--no-index", "--wheel-dir", str(built), str(source)]
        subprocess.run(command, check=True, env={**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH})
        (wheel,) = built.glob("*.whl")
        return Path(shutil.copy2(wheel, out_dir))


def _dist_info(wheel: Path, name: str) -> str | None:
    with zipfile.ZipFile(wheel) as archive:
        found = [n for n in archive.namelist() if n.endswith(f".dist-info/{name}")]
        return archive.read(found[0]).decode("utf-8") if found else None


def wheel_imports(wheel: Path) -> list[str]:
    """The top-level modules a wheel installs (top_level.txt when it has one, else its distribution name)."""
    top_level = _dist_info(wheel, "top_level.txt")
    return top_level.split() if top_level else [wheel.name.split("-")[0]]


def wheel_requirements(wheel: Path) -> list[str]:
    """The canonical names of a wheel's requirements outside extras (its Requires-Dist lines)."""
    fields = email.parser.Parser().parsestr(_dist_info(wheel, "METADATA"))
    requirements = [Requirement(line) for line in fields.get_all("Requires-Dist") or []]
    return [canonicalize_name(r.name) for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})]


def wheel_entry(wheel: Path, known: set[str]) -> dict:
    """A Pyodide lock entry for a pure-Python wheel lying beside the lock (relative file name).

    Its dependencies are the wheel's requirements that the lock can load (`known`); the others are
    front-end packages the lite site already holds (ipywidgets' jupyterlab_widgets, widgetsnbextension).
    """
    name, version = wheel.name.split("-")[:2]
    return {
        "name": canonicalize_name(name),
        "version": version,
        "file_name": wheel.name,
        "install_dir": "site",
        "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "package_type": "package",
        "imports": wheel_imports(wheel),
        "depends": [dependency for dependency in wheel_requirements(wheel) if dependency in known],
        "unvendored_tests": False,
    }


def lite_lock(pyodide_lock: dict, wheels: list[Path]) -> dict:
    """The hosted Pyodide's lock, plus one entry per local wheel (beside it)."""
    lock = json.loads(json.dumps(pyodide_lock))
    known = set(lock["packages"]) | {canonicalize_name(wheel.name.split("-")[0]) for wheel in wheels}
    for wheel in wheels:
        entry = wheel_entry(wheel, known)
        lock["packages"][entry["name"]] = entry
    # attnbook.book.prose imports myst_nb inside glue_number, where the kernel's loadPackagesFromImports
    # (which reads only a cell's own imports) does not see it: loading attnbook loads the stand-in too
    if {"attnbook", SHIMS} <= set(lock["packages"]):
        lock["packages"]["attnbook"]["depends"].append(SHIMS)
    return lock


def hosts_the_lite_site(app) -> bool:
    """Whether this build makes the lite site: the English one; another language's chapters are in it too
    (``jupyterlite_contents``), so Pyodide is hosted once."""
    from tools.extensions.languages import site_folder

    return site_folder(app) == ""


def write_lite_pyodide(app, exception) -> None:
    if exception is not None or app.builder.format != "html" or not hosts_the_lite_site(app):
        return
    root = Path(app.srcdir)
    folder = Path(app.outdir) / LITE_DIR / PYODIDE_DIR
    if not folder.parent.is_dir():
        raise RuntimeError(f"the JupyterLite site was not built into {folder.parents[1]}")
    pyodide_lock = pyodide_dist.assemble(folder)  # refuses any file that npm's lock does not vouch for
    wheels = [build_wheel(root / project, folder) for project in LOCAL_PROJECTS]
    for wheel in sorted((root / KERNEL_WHEELS).glob("*.whl")):
        wheels.append(Path(shutil.copy2(wheel, folder)))
    listed = [Requirement(line).name for line in (root / KERNEL_WHEEL_LIST).read_text(encoding="utf-8").splitlines()
              if line.strip() and not line.startswith("#")]
    missing = {canonicalize_name(name) for name in listed} - {canonicalize_name(w.name.split("-")[0]) for w in wheels}
    if missing:
        raise RuntimeError(f"wheels of {sorted(missing)} are missing from {KERNEL_WHEELS}: run `make book`")
    lock = lite_lock(pyodide_lock, wheels)
    (folder / pyodide_dist.LOCK).write_text(json.dumps(lock, indent=1, sort_keys=True), encoding="utf-8")


def lite_notebook(app, pagename: str) -> str | None:
    """The path of the page's notebook inside the lite site (its reader notebook), if the lite site holds it."""
    from tools.extensions.reader_notebooks import LITE_PAGES, is_notebook_page, lite_name

    from tools.extensions.languages import site_folder

    if pagename.startswith(LITE_PAGES) and is_notebook_page(app, pagename):
        return lite_name(pagename, site_folder(app))  # jupyterlite-sphinx puts every file at the lite root
    return None


def add_lite_launch_button(app, pagename, templatename, context, doctree) -> None:
    notebook = lite_notebook(app, pagename)
    groups = [b for b in context.get("header_buttons", []) if b.get("label") == "launch-buttons"]
    if notebook is None or not groups:
        return
    from tools.extensions.languages import to_english_root

    # another language's site is a folder of the English one, which hosts the lite site
    url = f"{context['pathto'](f'{to_english_root(app)}{LITE_DIR}/{LITE_APP}', 1)}?path={notebook}"
    groups[0]["buttons"].append({
        "type": "link",
        "text": "JupyterLite",
        "tooltip": "Run in your browser with JupyterLite (no server, no install)",
        "icon": "_static/images/logo_jupyterlite.svg",
        "url": url,
        "label": "launch-jupyterlite-button",
    })


def _is_unused_lite_asset(asset) -> bool:
    filename = str(getattr(asset, "filename", asset) or "")  # "_static/x.css", a URL, or "" (inline)
    return filename in UNUSED_PAGE_ASSETS or filename.rsplit("/", 1)[-1] in UNUSED_PAGE_ASSETS


def drop_unused_lite_assets(app, pagename, templatename, context, doctree) -> None:
    for key in ("css_files", "script_files"):
        if context.get(key):
            context[key] = [asset for asset in context[key] if not _is_unused_lite_asset(asset)]


def start_lite_build_afresh(app) -> None:
    """Remove what an earlier lite build left: `jupyter lite build` (doit) records in DOIT_DB which of its
    steps are done, and skips them next time even when their output is gone (after `make clean`, the
    lite site then lacked the settings of web/lite/jupyter-lite.json); and it lists in the site every
    extension folder it finds in its output, stale ones included."""
    if app.builder.format != "html" or not hosts_the_lite_site(app):
        return
    (Path(app.srcdir) / DOIT_DB).unlink(missing_ok=True)
    shutil.rmtree(Path(app.outdir) / LITE_DIR, ignore_errors=True)


def setup(app):
    app.connect("builder-inited", start_lite_build_afresh)
    app.connect("html-page-context", drop_unused_lite_assets, priority=600)
    app.connect("html-page-context", add_lite_launch_button, priority=600)  # after the theme's (501)
    app.connect("build-finished", write_lite_pyodide, priority=600)  # after jupyterlite-sphinx's (500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
