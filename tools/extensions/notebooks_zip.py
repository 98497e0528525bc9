"""A local Sphinx extension: put a zip of every executed notebook, with the package, at the site's root.

Readers who want to run the book without git download `attention-computed-notebooks.zip` (linked
from the introduction), unzip it and `pip install -r requirements.txt`. The zip has fixed
timestamps, so the same files always give the same archive.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

NOTEBOOKS_ZIP = "attention-computed-notebooks.zip"


def zip_members(root: Path) -> list[Path]:
    files = sorted(root.glob("chapters/*.ipynb"))  # not exercises/: instructor notebooks hold hidden tests
    files += [root / "requirements.txt", root / "code" / "pyproject.toml", root / "code" / "README.md"]
    return files + sorted((root / "code" / "src").rglob("*.py"))


def write_notebooks_zip(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    root = Path(app.srcdir)
    with zipfile.ZipFile(Path(app.outdir) / NOTEBOOKS_ZIP, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in zip_members(root):
            info = zipfile.ZipInfo(path.relative_to(root).as_posix(), date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())


def setup(app):
    app.connect("build-finished", write_notebooks_zip)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
