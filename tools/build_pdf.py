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
from tools.build_book import BUILD, build, translated_config, translation_output

LATEX = BUILD / "latex"


def pdf_path(language: str | None = None) -> Path:
    """Where the book's PDF in ``language`` is written: _build/latex/<targetname of _config.yml, .tex -> .pdf>
    for English, the same name in the language's build (tools.build_book.translation_output) for another."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    name = Path(config["latex"]["latex_documents"]["targetname"]).with_suffix(".pdf").name
    if language in (None, "", "en"):
        return LATEX / name
    return translation_output(language) / "_build" / "latex" / name


def main() -> int:
    from tools.translations import LANGUAGES

    result = build(["--builder", "pdflatex"], pdf_path(), "PDF", f"The LaTeX sources and logs are in {LATEX}.")
    for language, folder in LANGUAGES.items():
        result = result or build(["--config", str(translated_config(language)), "--path-output",
                                  str(translation_output(language)), "--builder", "pdflatex"], pdf_path(language),
                                 f"{folder} PDF", f"The LaTeX sources and logs are in {pdf_path(language).parent}.")
    return result


if __name__ == "__main__":
    raise SystemExit(main())
