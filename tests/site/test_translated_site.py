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
from tools.execution import figure_catalogs
from tools.translations import LOCALES, read_catalog, simplified_characters

FOLDER = "zh-Hant"
PAGES = toc_pages()
SITE = HTML / FOLDER
BASE = "https://attention-computed.github.io/attention-computed/"
FIGURE_CATALOG = figure_catalogs()["zh_TW"]


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
    """The alt texts of the images a page's code cells drew, the interactive figures' first states included."""

    def __init__(self):
        super().__init__()
        self.alts = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img" and attrs.get("alt"):
            self.alts.append(attrs["alt"])


@pytest.mark.parametrize("page", [p for p in PAGES if p.startswith("chapters/")])
def test_zh_hant_page_describes_its_figures_in_chinese(page):
    english, translated = _Alts(), _Alts()
    english.feed(article(read(HTML / page)))
    translated.feed(article(read(SITE / page)))
    assert len(translated.alts) == len(english.alts), f"{page}: {len(english.alts)} figures, {len(translated.alts)} alt texts"
    untranslated = [alt[:80] for alt in translated.alts if not re.search(r"[\u4e00-\u9fff]", alt)]
    assert untranslated == [], f"{FOLDER}/{page}: alt texts still in English: {untranslated}"


def _pictures(data: dict) -> list[bytes]:
    """The PNG pictures of one output's data: its image, or every state of its static page."""
    import base64

    from tools.extensions.static_figures import DATA_URL

    if "image/png" in data:
        return [base64.b64decode(data["image/png"])]
    page = data.get("text/html", "")
    return [base64.b64decode(found) for found in DATA_URL.findall("".join(page) if isinstance(page, list) else page)]


def _picture_name(png: bytes, static: bool) -> str:
    """The file name the site gives a picture: myst-nb names an output's image by its sha256; an interactive
    figure's state, tools/extensions/static_figures.py."""
    import hashlib

    from tools.extensions.static_figures import state_file_name

    return state_file_name(png) if static else hashlib.sha256(png).hexdigest() + ".png"


@pytest.mark.parametrize("page", [p for p in PAGES if p.startswith("chapters/") and (ROOT / p).with_suffix(".ipynb").exists()])
def test_zh_hant_page_shows_its_figures_drawn_in_chinese(page):
    # every picture of the English page that was drawn with words has its zh-Hant drawing on the zh-Hant page,
    # and the English drawing is not there; the words came from a translated catalog (tests/test_translations.py)
    # and no glyph was missing from the font
    from tools.execution import executed_from_cache
    from tools.site_outputs import TRANSLATIONS

    executed = executed_from_cache((ROOT / page).with_suffix(".md"))
    english, translated = read(HTML / page), read(SITE / page)
    drawn = 0
    for output in (o for cell in executed.cells for o in cell.get("outputs", [])):
        entry = output.get("data", {}).get(TRANSLATIONS)
        if entry is None:
            continue
        assert "missing_glyphs" not in entry, f"{page}: glyphs missing from the zh-Hant font: {entry['missing_glyphs']}"
        zh = entry["languages"]["zh_TW"]
        if "image/svg+xml" in zh or "application/pdf" in zh:  # a diagram: its SVG is in the page
            title = re.search(r"<title[^>]*>(.*?)</title>", zh["text/html"])[1]
            assert title in translated and re.search(r"[\u4e00-\u9fff]", title), f"{page}: diagram {title!r}"
            drawn += 1
            continue
        static = "image/png" not in zh
        for en_png, zh_png in zip(_pictures(output["data"]), _pictures(zh), strict=True):
            en_name, zh_name = _picture_name(en_png, static), _picture_name(zh_png, static)
            if en_name not in english:
                continue  # not shown (a removed output)
            assert zh_name in translated, f"{FOLDER}/{page} lacks the zh-Hant drawing of {en_name}"
            if entry["messages"] and zh_name != en_name:
                assert en_name not in translated, f"{FOLDER}/{page} shows the English drawing {en_name}"
            drawn += 1
    figures = len(re.findall(r'<img\b|class="attn-diagram"', article(english)))
    assert drawn or not figures, f"{page}: {figures} figures on the English page, none drawn in zh-Hant"


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


@pytest.mark.parametrize("page", ["chapters/intro.html", "chapters/masks.html", "exercises/hw_masks.html"])
def test_zh_hant_navigation_names_the_books_parts_in_chinese(page):
    # the part captions of the sidebar, in the root page's catalog (tools/extensions/translation_fixes.py)
    import yaml

    root = yaml.safe_load(read(ROOT / "_toc.yml"))["root"]
    catalog = {m.id: m.string for m in read_catalog(LOCALES / "zh_TW" / "LC_MESSAGES" / f"{root}.po") if m.id}
    caption = re.compile(r'class="caption" role="heading"><span class="caption-text">([^<]*)</span>')
    english = caption.findall(read(HTML / page))
    assert english, f"{page}: the English navigation names no part"
    assert caption.findall(read(SITE / page)) == [catalog[part] for part in english], f"{FOLDER}/{page}: parts in English"


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
    # tests/artefacts runs each of its notebooks once, in the environment the English zip's README installs
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


@pytest.mark.parametrize("path", [p for p in PAGES if 'class="attn-static-widget"' in read(HTML / p)])
def test_zh_hant_interactive_figure_answers_its_controls_in_chinese(visit, path):
    # the first control of every interactive figure moved once: a zh-Hant state's picture, alt text and readout
    from tests.site.test_browser import _move, _wait_for
    from tools.built_site import FIGURE_SHOWS, STATIC_FIGURES

    translated = {m.string for m in read_catalog(FIGURE_CATALOG) if m.id}
    page = visit(f"{FOLDER}/{path}").page
    figures = page.evaluate(STATIC_FIGURES)
    assert figures, f"{FOLDER}/{path} shows no interactive figure"
    for figure in figures:
        control = figure["controls"][0]
        label = control["label"]  # a symbol (p, T, ||W_h||) is not a word to translate
        assert label in translated or not re.search(r"[A-Za-z]{2}", label), (
            f"{FOLDER}/{path}: control {label!r} is not named from figures.po")
        before = page.evaluate(f"({FIGURE_SHOWS})", figure["id"])
        page.locator(f"#{figure['id']} img.attn-static-picture").scroll_into_view_if_needed()
        _move(page, control, (control["index"] + 1) % control["count"])
        where = f"{FOLDER}/{path}, figure {figure['id']}"
        _wait_for(page, f"id => ({FIGURE_SHOWS})(id).src !== {before['src']!r}", figure["id"],
                  f"{where}: the picture did not change")
        _wait_for(page, f"id => ({FIGURE_SHOWS})(id).loaded", figure["id"], f"{where}: the new picture did not load")
        after = page.evaluate(f"({FIGURE_SHOWS})", figure["id"])
        for said in ("alt", "readout"):
            assert re.search(r"[\u4e00-\u9fff]", after[said]), f"{where}: the {said} is not in Chinese: {after[said][:80]}"
