"""The zh-Hant site, _build/html/zh-Hant, beside the English one (issue #28; tools/build_book.py, locales/).

Every page of the book exists in both languages under the same name. Checked here: each zh-Hant page says its
language, carries the English page's glued numbers, links its other-language pages (``hreflang``) and offers
a switcher to the same page and section there and back; the theme's words on it are Traditional Chinese; its
search index segments Traditional Chinese, so 注意力 and 位置編碼 find their chapters, in the browser too.
Each zh-Hant page loads offline in Chromium with no console error, its images described and its formulas
typeset, and axe-core finds no serious violation (light theme; the colours are the English site's, which
tests/site/test_browser.py checks in both themes).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from html.parser import HTMLParser

from pathlib import Path

import nbformat
import pytest

from tools import ROOT
from tools.built_site import HTML, toc_pages
from tools.translations import simplified_characters

FOLDER = "zh-Hant"
PAGES = toc_pages()
SITE = HTML / FOLDER
BASE = "https://attention-computed.github.io/attention-computed/"


def read(path) -> str:
    return path.read_text(encoding="utf-8")


def article(html: str) -> str:
    found = re.search(r"<article\b.*?</article>", html, flags=re.S)
    assert found, "the page has no <article>"
    return found[0]


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)))


@pytest.mark.parametrize("page", PAGES)
def test_every_page_has_its_zh_hant_page_in_traditional_chinese(page):
    html = read(SITE / page)
    assert re.search(r'<html lang="zh-TW"', html), f"{FOLDER}/{page} does not say it is zh-TW"
    # the prose: not the code, nor the references (authors and titles stay as published)
    prose = re.sub(r'<pre\b.*?</pre>|<div role="list" class="citation-list">.*?</div>\s*</div>\s*</section>', " ",
                   article(html), flags=re.S)
    words = text(prose)
    cjk = len(re.findall(r"[\u4e00-\u9fff]", words))
    assert cjk > 0.3 * len(re.findall(r"[A-Za-z]+", words)), f"{FOLDER}/{page} reads mostly English: {words[:200]}"


@pytest.mark.parametrize("page", PAGES)
def test_zh_hant_page_shows_the_english_pages_glued_numbers(page):
    pasted = re.compile(r'<span class="pasted-text">(.*?)</span>', flags=re.S)
    english = Counter(pasted.findall(read(HTML / page)))
    translated = Counter(pasted.findall(read(SITE / page)))
    assert translated == english, (f"glued values only in English: {english - translated}; "
                                   f"only in zh-Hant: {translated - english}")


@pytest.mark.parametrize("page", PAGES)
def test_both_languages_link_each_other_by_hreflang_and_a_switcher_to_the_same_page(page):
    for prefix, other, html in (("", f"{FOLDER}/", read(HTML / page)), (f"{FOLDER}/", "", read(SITE / page))):
        alternates = dict(re.findall(r'<link rel="alternate" hreflang="([^"]+)" href="([^"]+)"', html))
        assert alternates == {"en": BASE + page, "zh-Hant": BASE + f"{FOLDER}/{page}", "x-default": BASE + page}
        targets = re.findall(r"window\.location\.assign\('([^']+)' \+ window\.location\.hash\)", html)
        assert len(targets) == 1, f"{prefix}{page}: {len(targets)} language switchers"
        opened = ((HTML / prefix / page).parent / targets[0]).resolve()
        assert opened == (HTML / other / page).resolve(), f"{prefix}{page}: the switcher opens {targets[0]}"


class _Alts(HTMLParser):
    """The alt texts of the images a page's code cells drew (not the interactive figures' states, whose
    pictures are the English ones)."""

    def __init__(self):
        super().__init__()
        self.alts, self._open, self._static = [], [], 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img" and not self._static and attrs.get("alt"):
            self.alts.append(attrs["alt"])
        if tag == "div":
            static = "attn-static-widget" in (attrs.get("class") or "")
            self._open.append(static)
            self._static += static

    def handle_endtag(self, tag):
        if tag == "div" and self._open:
            self._static -= self._open.pop()


@pytest.mark.parametrize("page", [p for p in PAGES if p.startswith("chapters/")])
def test_zh_hant_page_describes_its_figures_in_chinese(page):
    english, translated = _Alts(), _Alts()
    english.feed(article(read(HTML / page)))
    translated.feed(article(read(SITE / page)))
    assert len(translated.alts) == len(english.alts), f"{page}: {len(english.alts)} figures, {len(translated.alts)} alt texts"
    untranslated = [alt[:80] for alt in translated.alts if not re.search(r"[\u4e00-\u9fff]", alt)]
    assert untranslated == [], f"{FOLDER}/{page}: alt texts still in English: {untranslated}"


def _markdown(notebook) -> str:
    return "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")


@pytest.mark.parametrize("page", [p for p in PAGES if p.startswith("chapters/") and (ROOT / p).with_suffix(".ipynb").exists()])
def test_zh_hant_page_hands_out_its_notebook_in_zh_hant_download_and_jupyterlite(page):
    from tools.extensions.reader_notebooks import notebook_raw_myst

    html = read(SITE / page)
    name = Path(page).stem
    download = SITE / "_sources" / Path(page).with_suffix(".ipynb")
    lite = HTML / "lite" / "files" / f"{name}.zh-Hant.ipynb"
    assert f"lite/notebooks/index.html?path={name}.zh-Hant.ipynb" in html, "no JupyterLite button for the zh-Hant notebook"
    english = nbformat.reads(read((HTML / "_sources" / page).with_suffix(".ipynb")), as_version=4)
    for path in (download, lite):
        notebook = nbformat.reads(read(path), as_version=4)
        assert len(re.findall(r"[\u4e00-\u9fff]", _markdown(notebook))) > 200, f"{path}: its Markdown is not zh-Hant"
        assert notebook_raw_myst(notebook) == [], f"{path} shows raw MyST"
        code = [c["source"] for c in notebook["cells"] if c["cell_type"] == "code"]
        assert code == [c["source"] for c in english["cells"] if c["cell_type"] == "code"], f"{path}: other code"


@pytest.mark.parametrize("page", ["chapters/masks.html", "search.html", "genindex.html"])
def test_the_themes_words_on_a_zh_hant_page_are_traditional_chinese(page):
    html = read(SITE / page)
    chrome = re.sub(r"<article\b.*?</article>", " ", html, flags=re.S)
    words = " ".join(re.findall(r"[\u3400-\u9fff]+", text(chrome) + " ".join(re.findall(r'(?:title|aria-label|placeholder)="([^"]*)"', chrome))))
    assert words, f"{page}: no Chinese outside the article (the theme's words stayed English)"
    assert simplified_characters(words) == [], f"{page}: Simplified characters in the theme's words: {words}"
    for english in ("Back to top", "previous page", "next page", "On this page", "Skip to main content"):
        assert english not in text(chrome), f"{page}: the theme's '{english}' is not translated"


def _search_index(folder) -> dict:
    script = read(folder / "searchindex.js")
    return json.loads(script[script.index("(") + 1: script.rindex(")")])


@pytest.mark.parametrize("query, page", [("注意力", "chapters/scaled_dot_product_attention"),
                                         ("位置編碼", "chapters/positional_encoding"),
                                         ("遮罩", "chapters/masks")])
def test_zh_hant_search_index_finds_a_chinese_term_on_its_chapter(query, page):
    index = _search_index(SITE)
    docs = set()
    for kind in ("terms", "titleterms"):  # Sphinx keeps a page's title words apart from its text's
        found = index[kind].get(query, [])
        docs |= set(found if isinstance(found, list) else [found])
    assert docs, f"the zh-Hant search index has no term {query}"
    assert index["docnames"].index(page) in docs, f"{query} does not find {page}"


def test_offline_zh_hant_search_finds_positional_encoding(visit):
    page = visit(f"{FOLDER}/search.html?q=位置編碼").page
    page.wait_for_selector("ul.search li a", timeout=20_000)
    targets = page.eval_on_selector_all("ul.search li a", "els => els.map(e => e.getAttribute('href'))")
    assert any("positional_encoding.html" in t for t in targets), targets


def test_zh_hant_code_copy_buttons_say_copy_in_chinese(visit):
    page = visit(f"{FOLDER}/chapters/masks.html").page
    button = page.wait_for_selector("button.copybtn", state="attached", timeout=20_000)
    assert button.get_attribute("data-tooltip") == "複製", "sphinx-copybutton's tooltip is not in zh-Hant"


def test_switcher_keeps_the_readers_section_both_ways(visit):
    section = "formal-theory"
    visited = visit(f"chapters/masks.html#{section}")
    page = visited.page
    page.click("button.btn-language-zh-Hant-button")
    page.wait_for_url(f"**/{FOLDER}/chapters/masks.html#{section}", timeout=10_000)
    page.click("button.btn-language-en-button")
    page.wait_for_url(f"**/chapters/masks.html#{section}", timeout=10_000)
    assert f"/{FOLDER}/" not in page.url


@pytest.mark.parametrize("path", PAGES)
def test_zh_hant_page_loads_offline_described_typeset_and_accessible(light_report, path):
    report = light_report(f"{FOLDER}/{path}")
    assert report.external_requests == [], "the page asked the internet for something"
    assert report.failed_requests == [], "some local requests failed"
    assert report.console_errors == [], "the browser console logged errors"
    for image in report.images:
        assert image["loaded"] and image["alt"].strip(), f"image {image['src']}: not loaded or no alt text"
    assert report.formulas["raw"] == [] and report.formulas["errors"] == [], report.formulas
    assert report.serious_accessibility_violations == [], report.serious_accessibility_violations



def test_zh_hant_notebooks_zip_holds_every_chapter_in_zh_hant_with_the_english_code():
    # the English zip's notebooks run top to bottom in a reader's environment (tests/artefacts); the zh-Hant ones
    # hold the same code cells, so they are not run again, only read
    import zipfile

    from tools.extensions.notebooks_zip import NOTEBOOKS_ZIP

    english, translated = (zipfile.ZipFile(folder / NOTEBOOKS_ZIP) for folder in (HTML, SITE))
    names = sorted(n for n in english.namelist() if n.endswith(".ipynb"))
    assert sorted(n for n in translated.namelist() if n.endswith(".ipynb")) == names
    for name in names:
        zh = nbformat.reads(translated.read(name).decode("utf-8"), as_version=4)
        en = nbformat.reads(english.read(name).decode("utf-8"), as_version=4)
        assert len(re.findall(r"[\u4e00-\u9fff]", _markdown(zh))) > 200, f"{name}: its Markdown is not zh-Hant"
        assert [c.source for c in zh.cells if c.cell_type == "code"] == [c.source for c in en.cells if c.cell_type == "code"]
    assert set(translated.namelist()) - set(names) == set(english.namelist()) - set(names), "other files than the English zip"
    readme = translated.read("README.md").decode("utf-8")
    assert len(re.findall(r"[\u4e00-\u9fff]", readme)) > 200 and simplified_characters(readme) == [], "README not zh-Hant"
    assert f"<{BASE}{FOLDER}/>" in readme, "the zh-Hant README does not link the zh-Hant site"
