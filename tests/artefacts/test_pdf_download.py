"""The whole book's PDF as a reader gets it: through the link of a page's download menu, from the site.

tests/pdf checks the PDF `make pdf` leaves in _build/latex (every chapter title, theorem, exercise, figure
and Chinese term; the page count against the sources). Here the file the site serves must be that very
PDF, byte for byte, so that all of it holds for what readers download, and it must open as a reader's
viewer opens it: unencrypted, with the book's title on its first page and in its metadata, a page count
that fits the length of the website, and the title of every chapter the website shows.
"""

from __future__ import annotations

import html
import re
import subprocess
import unicodedata

import pytest
import yaml

from tools import ROOT
from tools.build_pdf import pdf_path
from tools.built_site import HTML, toc_pages
from tools.extensions.book_pdf import PDF_NAME

TITLE = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["title"]
MENU_ENTRY = re.compile(r'<a href="([^"]+)"[^>]*btn-download-book-pdf-button')


def flat(text: str) -> str:
    """Text with ligatures folded (NFKC) and every run of white space one space."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def poppler(*command: str) -> str:
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "Error" not in result.stderr, f"{command[0]} cannot read the PDF: {result.stderr}"
    return result.stdout


def site_text(page: str) -> str:
    """The visible text of a built page's article (tags and scripts stripped)."""
    page_html = (HTML / page).read_text(encoding="utf-8")
    article = page_html[page_html.index("<article"):page_html.index("</article>")]
    article = re.sub(r"<(script|style)\b.*?</\1>", " ", article, flags=re.DOTALL)
    return flat(html.unescape(re.sub(r"<[^>]+>", " ", article)))


def page_title(page: str) -> str:
    heading = re.search(r"<h1\b[^>]*>(.*?)</h1>", (HTML / page).read_text(encoding="utf-8"), re.DOTALL)
    assert heading, f"{page} has no <h1>"
    text = re.sub(r'<a class="headerlink".*?</a>', "", heading.group(1), flags=re.DOTALL)
    return flat(html.unescape(re.sub(r"<[^>]+>", "", text)))


@pytest.fixture(scope="module")
def downloaded_pdf(fetch, tmp_path_factory):
    if not (HTML / PDF_NAME).is_file():
        pytest.fail(f"the site offers no {PDF_NAME}: every page's download menu links a missing file. "
                    "Run `make pdf` before `make book` (`make test` does)")
    links = MENU_ENTRY.findall((HTML / "chapters" / "intro.html").read_text(encoding="utf-8"))
    assert len(links) == 1, f"the introduction's download menu has {len(links)} whole-book PDF entries"
    path = tmp_path_factory.mktemp("pdf") / PDF_NAME
    path.write_bytes(fetch("chapters/intro.html", links[0]))
    return path


def test_the_site_serves_the_pdf_that_make_pdf_built(downloaded_pdf):
    assert downloaded_pdf.read_bytes()[:5] == b"%PDF-", "the site's PDF link downloads no PDF"
    built = pdf_path()
    assert built.is_file(), f"{built} is gone: the site's PDF cannot be checked against what tests/pdf reads"
    assert downloaded_pdf.read_bytes() == built.read_bytes(), (
        "the site serves a PDF other than the last `make pdf`: run `make book` after `make pdf`")


def test_the_pdf_opens_with_the_books_title_and_a_length_that_fits_the_website(downloaded_pdf):
    info = dict(re.findall(r"^([^:\n]+):\s*(.*)$", poppler("pdfinfo", str(downloaded_pdf)), re.MULTILINE))
    assert info["Encrypted"].startswith("no")
    assert info.get("Title") == TITLE, f"the PDF's metadata names it {info.get('Title')!r}"
    first_page = flat(poppler("pdftotext", "-f", "1", "-l", "1", str(downloaded_pdf), "-"))
    assert TITLE in first_page, f"the first page does not show the title: {first_page[:200]!r}"
    pages = int(info["Pages"])
    words = sum(len(site_text(page).split()) for page in toc_pages())
    # a printed page holds a few hundred of the website's words (prose, code, the figures' alt text): about
    # 490 when this was written; a PDF that lost or repeated chapters falls outside
    assert words / 800 <= pages <= words / 200, f"{pages} pages for {words} words of the website"


def test_every_chapter_title_the_website_shows_is_in_the_pdf(downloaded_pdf):
    text = flat(poppler("pdftotext", str(downloaded_pdf), "-"))
    missing = [title for title in map(page_title, toc_pages()) if title not in text]
    assert missing == [], f"chapters of the website missing from the PDF: {missing}"
