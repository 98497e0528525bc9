"""Tests of the book's PDF (`make pdf`): one file, every chapter, its theorems, exercises and CJK terms.

The PDF is read with poppler-utils (Debian; `make texlive` installs it with TeX Live): pdfinfo for
the page count, pdftotext for the text, pdfimages and pdffonts for the figures and the math font.
What the PDF must hold is counted in the sources (_toc.yml and the chapters' MyST Markdown), never
written down here.
"""

from __future__ import annotations

import re
import subprocess
import unicodedata
from pathlib import Path

import pytest

from tools import ROOT
from tools.build_pdf import LATEX, pdf_path
from tools.built_site import cheat_sheet_labels, toc_pages

PDF = pdf_path()
CJK = "\u3400-\u4dbf\u4e00-\u9fff"
CJK_RUN = re.compile(f"[{CJK}]+")
SPACE_BETWEEN_CJK = re.compile(f"(?<=[{CJK}]) (?=[{CJK}])")  # pdftotext spaces out some CJK runs


def poppler(*command: str) -> str:
    """Run a poppler-utils command and return what it prints."""
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


TYPOGRAPHIC_QUOTES = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"'})


def flat(text: str) -> str:
    """Text with ligatures, math letters and typographic quotes folded, white space runs one space, none inside CJK."""
    text = unicodedata.normalize("NFKC", text).translate(TYPOGRAPHIC_QUOTES)  # LaTeX prints ' as ’
    return SPACE_BETWEEN_CJK.sub("", " ".join(text.split()))


def toc_sources() -> list[Path]:
    """The MyST Markdown source of every page in _toc.yml, in order."""
    return [ROOT / (page.removesuffix(".html") + ".md") for page in toc_pages()]


def chapter_title(source: Path) -> str:
    """The text of a source's first level-1 heading, without Markdown markup."""
    for line in source.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return flat(re.sub(r"[`*_$]", "", line[2:]))
    raise AssertionError(f"{source} has no '# ' heading")


def directives(name: str) -> int:
    """How many times a directive (e.g. prf:theorem) is used in the book's sources."""
    pattern = re.compile(r"^(?:```|:::)\{" + re.escape(name) + r"\}", re.MULTILINE)
    return sum(len(pattern.findall(source.read_text(encoding="utf-8"))) for source in toc_sources())


@pytest.fixture(scope="module")
def text() -> str:
    if not PDF.exists():
        pytest.fail(f"the PDF is not built: run `make pdf` first ({PDF})")
    return flat(poppler("pdftotext", str(PDF), "-"))


def test_the_pdf_is_named_after_the_book():
    assert PDF.name == "attention-computed.pdf"
    assert PDF.exists(), "run `make pdf`"


def test_page_count_fits_the_length_of_the_sources():
    pages = int(re.search(r"^Pages:\s+(\d+)", poppler("pdfinfo", str(PDF)), re.MULTILINE)[1])
    words = sum(len(source.read_text(encoding="utf-8").split()) for source in toc_sources())
    # a printed page holds a few hundred words of prose and code, fewer beside figures and formulas
    assert words / 1000 <= pages <= words / 150, f"{pages} pages for {words} words of source"


def test_every_chapter_title_is_in_the_pdf(text):
    missing = [title for title in map(chapter_title, toc_sources()) if title not in text]
    assert not missing, f"chapter titles missing from the PDF: {missing}"


def test_every_theorem_and_proof_is_printed(text):
    theorems = set(re.findall(r"Theorem (\d+(?:\.\d+)+)", text))
    assert directives("prf:theorem") > 0
    assert len(theorems) >= directives("prf:theorem")
    assert text.count("Proof.") >= directives("prf:proof") > 0


def test_every_exercise_and_its_solution_is_printed(text):
    exercises = directives("exercise")
    assert exercises > 0
    assert len(set(re.findall(r"(?<!to )Exercise (\d+(?:\.\d+)+)", text))) >= exercises
    assert len(set(re.findall(r"Solution to Exercise (\d+(?:\.\d+)+)", text))) == exercises


def test_chinese_terms_are_printed_not_dropped(text):
    terms = {run for source in toc_sources() for run in CJK_RUN.findall(source.read_text(encoding="utf-8"))}
    assert terms, "the glossary's Chinese terms are gone from the sources"
    missing = sorted(term for term in terms if flat(term) not in text)
    assert not missing, f"CJK text missing from the PDF: {missing}"


def test_figures_are_embedded():
    tex = (LATEX / PDF.with_suffix(".tex").name).read_text(encoding="utf-8")
    included = tex.count(r"\sphinxincludegraphics")
    images = len(poppler("pdfimages", "-list", str(PDF)).splitlines()) - 2  # two header lines
    assert included > 0 and images >= included


def test_math_is_typeset_with_a_math_font():
    assert re.search(r"Math", poppler("pdffonts", str(PDF))), "no math font in the PDF"


def test_the_latex_run_lost_nothing():
    log = (LATEX / PDF.with_suffix(".log").name).read_text(encoding="utf-8", errors="replace")
    for problem in ("Missing character", "undefined on input line", "LaTeX Error", "Citation `"):
        assert problem not in log, f"the LaTeX log reports: {problem}"


def test_pdf_names_the_website_it_is_printed_from_and_leaves_out_web_only_links(text):
    """The introduction's HTML-only paragraphs (download links, JupyterLite) are replaced by the site's address."""
    import yaml

    base_url = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["html"]["baseurl"]
    intro = text[:text.index("Licence and citation")]
    assert base_url in intro or base_url.rstrip("/") in intro
    assert "download the whole book as a PDF" not in intro  # the website's link to this very file
    assert "Licence and citation" in text and "CC BY 4.0" in text


def test_cheat_sheet_appendix_is_one_landscape_page_with_every_row():
    pages = poppler("pdftotext", str(PDF), "-").split("\f")
    opening = "The formulas, shapes and costs of the book"  # the cheat sheet's first words
    found = [number for number, page in enumerate(pages, start=1) if opening in flat(page)]
    assert len(found) == 1, f"the cheat sheet's opening is on pages {found}"
    page = found[0]
    letters = re.sub(r"[^A-Za-z0-9]", "", pages[page - 1])  # pdftotext joins hyphenated and interleaves cells' lines
    missing = [label for label in cheat_sheet_labels() if not all(w in letters for w in re.findall(r"[A-Za-z0-9]+", label))]
    assert missing == [], f"rows not on the cheat sheet's page {page} (spilled over or lost): {missing}"
    info = poppler("pdfinfo", "-f", str(page), "-l", str(page), str(PDF))
    assert re.search(rf"Page\s+{page} rot:\s+(90|270)", info), f"page {page} is not landscape:\n{info}"


ZH_PDF = pdf_path("zh_TW")


@pytest.fixture(scope="module")
def zh_text() -> str:
    if not ZH_PDF.exists():
        pytest.fail(f"the zh-Hant PDF is not built: run `make pdf` first ({ZH_PDF})")
    return flat(poppler("pdftotext", str(ZH_PDF), "-"))


def test_the_zh_hant_pdf_has_chinese_chapter_heads_for_every_chapter(zh_text):
    numbers = {int(n) for n in re.findall(r"第\s*(\d+)\s*章", zh_text)}
    chapters = len(toc_pages()) - 1  # the intro is front matter
    cheat_sheet = [p.removesuffix(".html") for p in toc_pages()[1:]].index("chapters/cheat_sheet") + 1
    assert numbers == set(range(1, chapters + 1)) - {cheat_sheet}, f"chapter heads 第 n 章: {sorted(numbers)}"
    assert "目錄" in zh_text and "Contents" not in zh_text, "the table of contents is not headed in Chinese"


def test_the_zh_hant_pdf_prints_every_chapter_title_in_chinese_in_traditional_fonts(zh_text):
    from tools.translations import LOCALES, read_catalog

    missing = []
    for source in toc_sources()[1:]:
        page = source.relative_to(ROOT).with_suffix(".po")
        catalog = {m.id: m.string for m in read_catalog(LOCALES / "zh_TW" / "LC_MESSAGES" / page) if m.id}
        english = next(line[2:] for line in source.read_text(encoding="utf-8").splitlines() if line.startswith("# "))
        title = flat(re.sub(r"[`*_$]", "", catalog.get(english, english)))
        if title not in zh_text:
            missing.append(f"{page}: {title}")
    assert missing == [], f"chapter titles not in the zh-Hant PDF: {missing}"
    tex = (ZH_PDF.parent / ZH_PDF.with_suffix(".tex").name).read_text(encoding="utf-8")
    assert r"\setCJKmainfont{Noto Serif CJK TC}" in tex, "the zh-Hant PDF is not set in the Traditional Chinese font"
    fonts = poppler("pdffonts", str(ZH_PDF))
    assert "NotoSerifCJK" in fonts and "NotoSansCJK" in fonts, fonts


def test_the_zh_hant_pdf_heads_the_books_parts_in_chinese():
    # the captions of _toc.yml's parts, from the root page's catalog (tools/extensions/translation_fixes.py)
    import yaml

    from tools.translations import LOCALES, read_catalog

    root = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))["root"]
    catalog = {m.id: m.string for m in read_catalog(LOCALES / "zh_TW" / "LC_MESSAGES" / f"{root}.po") if m.id}
    part = re.compile(r"^\\part\{(.*)\}$", re.M)
    english = part.findall(PDF.with_suffix(".tex").read_text(encoding="utf-8"))
    assert english, "the English PDF has no parts"
    parts = part.findall((ZH_PDF.parent / ZH_PDF.with_suffix(".tex").name).read_text(encoding="utf-8"))
    assert parts == [catalog[caption] for caption in english], f"the zh-Hant PDF's parts: {parts}"


def test_the_zh_hant_pdf_names_theorems_exercises_and_solutions_in_chinese():
    # sphinx-proof's and sphinx-exercise's words from the book's catalogs, even in the first build of a fresh clone
    from tools.translations import LOCALES, read_catalog

    words = {m.id: m.string for name in ("proof", "exercise") for m in read_catalog(LOCALES / "zh_TW" / "LC_MESSAGES" / f"{name}.po") if m.id}
    tex = (ZH_PDF.parent / ZH_PDF.with_suffix(".tex").name).read_text(encoding="utf-8")
    english = sorted(set(re.findall(r"\b(?:Theorem|Definition|Lemma|Exercise|Solution to) \d+\.\d+", tex)))
    assert english == [], f"English names in the zh-Hant PDF: {english[:8]}"
    for name in ("Theorem", "Exercise"):
        assert re.search(rf"{words[name]}\s*1\.1\b", tex), f"no {words[name]} 1.1 in the zh-Hant PDF"
