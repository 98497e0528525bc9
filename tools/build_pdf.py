"""Build the whole book as one PDF through LaTeX (xelatex), and say where it is and how long it took.

Jupyter Book's ``pdflatex`` builder writes the LaTeX sources into _build/latex and runs latexmk
there; the engine (xelatex), the CJK fonts and the file name come from the ``latex`` settings in
_config.yml. Sphinx warnings count as errors, as for the website. The notebooks' outputs come from
the execution cache the website build shares (tools/execution.py): a notebook the website build, or
``make notebooks``, executed is not executed again (the cache is cleared when the attnbook package changed).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tools import ROOT
from tools.build_book import BUILD, build

LATEX = BUILD / "latex"


def pdf_path() -> Path:
    """Where the book's PDF is written: _build/latex/<targetname of _config.yml, .tex -> .pdf>."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    targetname = config["latex"]["latex_documents"]["targetname"]
    return LATEX / Path(targetname).with_suffix(".pdf").name


def main() -> int:
    return build(["--builder", "pdflatex"], pdf_path(), "PDF", f"The LaTeX sources and logs are in {LATEX}.")


if __name__ == "__main__":
    raise SystemExit(main())
