"""Build the whole book as one PDF through LaTeX (xelatex), and say where it is and how long it took.

Jupyter Book's ``pdflatex`` builder writes the LaTeX sources into _build/latex and runs latexmk
there; the engine (xelatex), the CJK fonts and the file name come from the ``latex`` settings in
_config.yml. Sphinx warnings count as errors, as for the website. The notebooks' outputs come from
the execution cache the website build fills (cleared, as there, when the attnbook package changed).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import yaml

from build_book import BUILD, ROOT, STAMP, clear_stale_execution_cache

LATEX = BUILD / "latex"


def pdf_path() -> Path:
    """Where the book's PDF is written: _build/latex/<targetname of _config.yml, .tex -> .pdf>."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    targetname = config["latex"]["latex_documents"]["targetname"]
    return LATEX / Path(targetname).with_suffix(".pdf").name


def main() -> int:
    current = clear_stale_execution_cache()
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    command = [str(jupyter_book), "build", str(ROOT), "--builder", "pdflatex", "-W", "-n", "--keep-going"]
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT)
    seconds = time.perf_counter() - start
    pdf = pdf_path()
    if result.returncode != 0 or not pdf.exists():
        print(f"\nthe PDF build FAILED after {seconds:.1f} s: see {LATEX}/*.log", file=sys.stderr)
        return result.returncode or 1
    STAMP.write_text(current)
    print(f"\nThe PDF is built: {pdf} ({pdf.stat().st_size / 1e6:.1f} MB)")
    print(f"Build time: {seconds:.1f} s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
