"""A local Sphinx extension: the book's PDF, linked from every page of the website.

`make pdf` builds the whole book as _build/latex/attention-computed.pdf, and `make publish` copies it to
the site's root (tools/publish.py), where GitHub Pages serves it beside the pages. This extension

* adds "Whole book (PDF)" to the download menu of every page (the theme's own ".pdf" entry prints
  the page alone), as a link relative to the page, so it works offline and on GitHub Pages;
* copies the PDF into the site when one is already built (`make pdf` before `make book`), so that a
  local site links to a real file.

A site built before any PDF links to a file that only `make publish` adds: the link check of
tests/site/test_built_site.py accepts that one missing file (``PDF_NAME``) and no other, and
tests/test_publication.py checks that `make publish` builds the PDF and puts it there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tools.build_pdf import pdf_path

PDF_NAME = pdf_path().name  # attention-computed.pdf, from latex.latex_documents.targetname in _config.yml


def copy_pdf_into_site(pdf: Path, html: Path) -> Path:
    """Copy the built PDF to the root of the site in `html`; refuse a missing file or one that is no PDF."""
    if not pdf.is_file():
        raise FileNotFoundError(f"{pdf} is not built: run `make pdf`")
    with pdf.open("rb") as handle:
        if handle.read(5) != b"%PDF-":
            raise ValueError(f"{pdf} is not a PDF")
    return Path(shutil.copy2(pdf, html / PDF_NAME))


def add_pdf_download_entry(app, pagename, templatename, context, doctree) -> None:
    groups = [b for b in context.get("header_buttons", []) if b.get("label") == "download-buttons"]
    if not groups:
        return
    groups[0]["buttons"].append({
        "type": "link",
        "text": "Whole book (PDF)",
        "tooltip": "Download the whole book as one PDF",
        "icon": "fas fa-book",
        "url": context["pathto"](PDF_NAME, 1),
        "label": "download-book-pdf-button",
    })


def copy_built_pdf(app, exception) -> None:
    pdf = pdf_path(app.config.language)  # the zh-Hant site links the zh-Hant PDF
    if exception is None and app.builder.format == "html" and pdf.is_file():
        copy_pdf_into_site(pdf, Path(app.outdir))


def setup(app):
    app.connect("html-page-context", add_pdf_download_entry, priority=600)  # after the theme's (501)
    app.connect("build-finished", copy_built_pdf)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
