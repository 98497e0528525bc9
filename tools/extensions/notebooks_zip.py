"""A local Sphinx extension: put a zip of every executed notebook, with the package, at the site's root.

Readers who want to run the book without git download `attention-computed-notebooks.zip` (linked
from the introduction) and follow the README at its root (`notebooks_zip_README.md` beside this file):
create a virtual environment, `pip install -r requirements.txt jupyterlab`, `jupyter lab chapters`.
The zip holds the chapters' reader notebooks (tools/extensions/reader_notebooks.py: the Markdown as the
pages show it, links between chapters relative), the `attnbook` package with its data files, the
requirements, the licences and the citation. It has fixed timestamps, so the same files always give the same archive.
tests/artefacts installs and runs it the way the README says.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import nbformat
import yaml

NOTEBOOKS_ZIP = "attention-computed-notebooks.zip"
README = Path(__file__).with_name("notebooks_zip_README.md")
# the Jupyter a reader opens the notebooks in: the README's install line pins it (requirements.txt holds
# only what the kernel needs, and Binder brings its own Jupyter)
JUPYTERLAB_VERSION = "4.6.6"


def package_files(root: Path) -> list[Path]:
    """What a reader needs beside the notebooks to run them: the requirements, the package with its data files,
    the licences and the citation (the zip's, and the launch branch's of tools/publish.py)."""
    files = [root / "requirements.txt", root / "code" / "pyproject.toml", root / "code" / "README.md"]
    files += [root / "LICENSE", *sorted((root / "LICENSES").glob("*")), root / "CITATION.cff"]
    # the package: its modules and its data files (attnbook/data/: the benchmark's figures, the digits)
    package = (root / "code" / "src" / "attnbook").rglob("*")
    return files + sorted(p for p in package if p.is_file() and "__pycache__" not in p.parts)


def readme_text(root: Path, language: str | None = None, base_url: str | None = None) -> str:
    """The README at the zip's root: how to install and run the notebooks, with the book's address
    (``base_url``, by default _config.yml's); in ``language`` (a catalog's name, ``zh_TW``) from
    ``locales/<language>/notebooks_zip_README.md``."""
    from tools.translations import LOCALES

    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    readme = README if language is None else LOCALES / language / README.name
    return (readme.read_text(encoding="utf-8").replace("@BASEURL@", base_url or config["html"]["baseurl"])
            .replace("@JUPYTERLAB@", JUPYTERLAB_VERSION))


def zip_notebooks(app) -> list[tuple[str, bytes]]:
    """The chapters' reader notebooks as the zip holds them (not exercises/: instructor notebooks hold hidden
    tests), each with its links to another chapter made relative."""
    from tools.extensions.reader_notebooks import LITE_PAGES, localised, reader_notebooks

    notebooks = {docname: notebook for docname, notebook in reader_notebooks(app).items()
                 if docname.startswith(LITE_PAGES)}
    placed = {docname: f"{docname}.ipynb" for docname in notebooks}
    base_url = app.config.html_baseurl.rstrip("/") + "/"
    return [(placed[docname], nbformat.writes(localised(notebook, docname, placed, base_url, notebooks)).encode("utf-8"))
            for docname, notebook in sorted(notebooks.items())]


def write_notebooks_zip(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    root = Path(app.srcdir)
    from tools.extensions.translation_fixes import book_language

    members = [("README.md", readme_text(root, book_language(app.config), app.config.html_baseurl).encode("utf-8")), *zip_notebooks(app)]
    members += [(path.relative_to(root).as_posix(), path.read_bytes()) for path in package_files(root)]
    with zipfile.ZipFile(Path(app.outdir) / NOTEBOOKS_ZIP, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)


def setup(app):
    app.connect("build-finished", write_notebooks_zip)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
