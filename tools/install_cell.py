"""The install cell: the first code cell of every notebook, so a bare kernel (Colab) can run the book.

    python -m tools.install_cell           # write or refresh the cell in every chapters/ and exercises/ source
    python -m tools.install_cell --check   # list the sources and paired notebooks whose cell is missing or stale

The cell installs the `attnbook` package when the kernel lacks it (the notebooks import nothing else
that Colab lacks: requirements.txt); where it is installed (Binder, the notebooks zip, `make venv`, the
book build) it does nothing. The package comes from the repository named in `_config.yml`
(`repository.url` at `repository.branch`), so the address lives in one place: this script renders the
cell from it and the launch test checks every notebook against the rendering. The environment variable
ATTNBOOK_INSTALL_FROM replaces the address (the test points it at the local checkout).

The cell is plain Python (no `%pip`): the pairing test and nbval see it like any other cell. It is
tagged `remove-cell` (kept out of the website) and `setup` (the homework role of cells that every
version of a homework runs, students' included). After changing this script or `_config.yml`, run it
and then `make notebooks`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jupytext
import yaml

from tools import ROOT
from tools.execution import notebook_sources

INSTALL_TAGS = ["remove-cell", "setup"]
FIRST_LINE = "# Install the book's package when this kernel lacks it (Colab): from the book's repository."
OVERRIDE_VARIABLE = "ATTNBOOK_INSTALL_FROM"
PACKAGE_DIR = "code"  # the package's folder in the repository (pyproject.toml)
CELL_TEMPLATE = '''{first_line}
import importlib
import importlib.util
import os
import subprocess
import sys

# (JupyterLite needs nothing: its Pyodide kernel loads attnbook on import)
if importlib.util.find_spec("attnbook") is None and sys.platform != "emscripten":
    source = os.environ.get("{variable}", "{default_source}")
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", f"attnbook @ {{source}}"])
    importlib.invalidate_caches()'''


def default_source(config_path: Path = ROOT / "_config.yml") -> str:
    """The pip address of the package in the repository that _config.yml names, at its branch."""
    repository = yaml.safe_load(config_path.read_text(encoding="utf-8"))["repository"]
    return f"git+{repository['url']}@{repository['branch']}#subdirectory={PACKAGE_DIR}"


def install_cell_source(source: str | None = None) -> str:
    """The code of the install cell, installing from `source` (default: the configured repository)."""
    return CELL_TEMPLATE.format(first_line=FIRST_LINE, variable=OVERRIDE_VARIABLE,
                                default_source=source or default_source())


def myst_block(code: str) -> str:
    """The install cell as it is written in a MyST Markdown notebook."""
    return f"```{{code-cell}} ipython3\n:tags: [{', '.join(INSTALL_TAGS)}]\n\n{code}\n```\n\n"


def with_install_cell(text: str, code: str) -> str:
    """A MyST notebook's text with the install cell as its first code cell (replaced if present)."""
    start = text.index("```{code-cell}")
    first_end = text.index("\n```\n", start) + len("\n```\n")
    if FIRST_LINE in text[start:first_end]:
        rest = text[first_end:].lstrip("\n")
        return text[:start] + myst_block(code) + rest
    return text[:start] + myst_block(code) + text[start:]


def first_code_cell(path: Path):
    """The first code cell of a notebook (.md or .ipynb), or None."""
    return next((c for c in jupytext.read(path).cells if c.cell_type == "code"), None)


def stale(sources: list[Path] | None = None) -> list[str]:
    """Every source or paired .ipynb whose first code cell is not exactly the current install cell."""
    code, found = install_cell_source(), []
    for source in sources or notebook_sources():
        for path in (source, source.with_suffix(".ipynb")):
            cell = first_code_cell(path) if path.exists() else None
            if cell is None or cell.source.strip() != code or sorted(cell.metadata.get("tags", [])) != INSTALL_TAGS:
                found.append(path.relative_to(ROOT).as_posix())
    return found


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        found = stale()
        for name in found:
            print(f"{name}: the install cell is missing or stale: run python -m tools.install_cell, then make notebooks")
        return 1 if found else 0
    code = install_cell_source()
    for source in notebook_sources():
        text = source.read_text(encoding="utf-8")
        updated = with_install_cell(text, code)
        if updated != text:
            source.write_text(updated, encoding="utf-8")
            print(f"wrote the install cell into {source.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
