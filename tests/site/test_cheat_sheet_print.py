"""The cheat sheet prints from the website on one A4 page, landscape, every row on it (web/src/book.css).

Chromium prints the built page as a reader's "Print" does (the print media, the page size the stylesheet
asks for); poppler's pdfinfo counts the pages and pdftotext reads them. Every row of the cheat sheet's tables
must be on that one page: the rows are read from chapters/cheat_sheet.md, not written down here.
"""

from __future__ import annotations

import re
import subprocess

from tools.built_site import SETTLE_PAGE, cheat_sheet_labels


def test_cheat_sheet_prints_on_one_a4_landscape_page_with_every_row(visit, tmp_path):
    page = visit("chapters/cheat_sheet.html").page
    page.evaluate(SETTLE_PAGE)
    page.emulate_media(media="print")
    printed = tmp_path / "cheat_sheet.pdf"
    printed.write_bytes(page.pdf(prefer_css_page_size=True, print_background=True))
    info = subprocess.run(["pdfinfo", str(printed)], check=True, capture_output=True, text=True).stdout
    assert "Pages:           1\n" in info, f"the cheat sheet prints on more than one page:\n{info}"
    width, height = (float(v) for v in info.split("Page size:", 1)[1].split("pts")[0].split(" x "))
    assert (round(width), round(height)) == (842, 595), f"not A4 landscape: {width} x {height} pt"
    # each word of each row's first cell (a narrow cell wraps and hyphenates them, and pdftotext interleaves
    # neighbouring cells' lines and joins hyphenated ones: so the words, in the page's letters run together)
    letters = re.sub(r"[^A-Za-z0-9]", "", subprocess.run(["pdftotext", str(printed), "-"], check=True,
                                                         capture_output=True, text=True).stdout)
    missing = [label for label in cheat_sheet_labels() if not all(w in letters for w in re.findall(r"[A-Za-z0-9]+", label))]
    assert missing == [], f"rows missing from the printed page: {missing}"
    assert "Cheatsheet" in letters and "Previous" not in letters, "the title is missing, or the site's navigation printed"
