"""The built book in a real browser (Debian's Chromium through Playwright), with no internet.

Run after `make book`; `make test` does both.
"""

from __future__ import annotations

import pytest

from site_support import HTML, toc_pages

CHAPTER = "chapters/scaled_dot_product_attention.html"


PAGES = toc_pages()


@pytest.mark.parametrize("path", PAGES)
def test_page_loads_offline_without_errors(page_report, path):
    report = page_report(path)
    assert report.external_requests == [], "the page asked the internet for something"
    assert report.failed_requests == [], "some local requests failed"
    assert report.console_errors == [], "the browser console logged errors"


@pytest.mark.parametrize("path", PAGES)
def test_page_images_load_and_have_alt_text(page_report, path):
    for image in page_report(path).images:
        assert image["loaded"], f"image {image['src']} did not load"
        assert image["alt"].strip(), f"image {image['src']} has no alt text"


@pytest.mark.parametrize("path", PAGES)
def test_page_formulas_are_all_typeset(page_report, path):
    formulas = page_report(path).formulas
    assert formulas["raw"] == [], f"{len(formulas['raw'])} of {formulas['math']} formulas left as raw TeX"
    assert formulas["errors"] == [], "MathJax reported TeX errors"


@pytest.mark.parametrize("path", PAGES)
def test_page_saved_widgets_all_render(page_report, path):
    report = page_report(path)
    assert report.unrendered_widgets == [], (
        f"{len(report.unrendered_widgets)} of {report.widget_views} saved widget views did not render"
    )


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
@pytest.mark.parametrize("path", PAGES)
def test_page_has_no_serious_accessibility_violation(page_report, path, color_scheme):
    violations = page_report(path, color_scheme).serious_accessibility_violations
    assert violations == [], f"axe-core ({color_scheme} theme): {violations}"


def test_pages_with_saved_widgets_are_checked():
    """The widget check above is not vacuous: the chapters do save widget views."""
    pages = [p for p in PAGES if "widget-view+json" in (HTML / p).read_text(encoding="utf-8")]
    assert len(pages) >= 10, pages


def test_chapter_formulas_are_typeset_by_the_vendored_mathjax(visit):
    page = visit(CHAPTER).page
    source = page.evaluate("() => document.querySelector('script[src*=\"mathjax\"]').src")
    assert "/_static/mathjax/" in source
    typeset = page.eval_on_selector_all("mjx-container", "els => els.length")
    raw = page.eval_on_selector_all("span.math, div.math", "els => els.length")
    assert raw > 10 and typeset >= raw, f"{typeset} typeset formulas for {raw} math elements"
    leftover = page.evaluate(
        "() => [...document.querySelectorAll('span.math, div.math')]"
        ".filter(e => !e.querySelector('mjx-container')).map(e => e.textContent).slice(0, 3)"
    )
    assert leftover == [], f"formulas left as raw TeX: {leftover}"
    assert page.eval_on_selector_all("mjx-merror", "els => els.length") == 0, "MathJax reported TeX errors"


def test_chapter_heatmap_is_shown_with_alt_text(visit):
    page = visit(CHAPTER).page
    heatmaps = page.eval_on_selector_all(
        "article img",
        "els => els.filter(e => /heatmap/i.test(e.alt))"
        ".map(e => ({alt: e.alt, w: e.naturalWidth, shown: e.getBoundingClientRect().width}))",
    )
    assert heatmaps, "no image whose alt text describes a heatmap"
    assert all(h["w"] > 100 and h["shown"] > 100 for h in heatmaps), heatmaps


def test_chapter_widget_renders_from_saved_state(visit):
    page = visit(CHAPTER).page
    page.wait_for_selector(".jupyter-widgets .widget-slider, .jupyter-widgets.widget-slider", timeout=20_000)
    sliders = page.eval_on_selector_all(".widget-slider", "els => els.length")
    assert sliders >= 2, "the key-vector sliders did not render"
    assert page.eval_on_selector_all(
        "script[type='application/vnd.jupyter.widget-state+json']", "els => els.length"
    ) == 1


def test_offline_search_finds_softmax_on_the_model_chapter(visit):
    page = visit("search.html?q=softmax").page
    page.wait_for_selector("#search-results ul.search li a, ul.search li a", timeout=20_000)
    targets = page.eval_on_selector_all("ul.search li a", "els => els.map(e => e.getAttribute('href'))")
    assert any("scaled_dot_product_attention.html" in t for t in targets), targets


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
def test_logo_is_shown_with_alt_text_naming_the_book(visit, color_scheme):
    page = visit("chapters/intro.html", color_scheme).page
    logos = page.eval_on_selector_all(
        "img.logo__image",
        "els => els.map(e => ({alt: e.alt, w: e.naturalWidth, shown: e.getBoundingClientRect().width > 0}))",
    )
    shown = [logo for logo in logos if logo["shown"]]
    assert len(shown) == 1, logos  # one image per theme, the other hidden
    assert shown[0]["w"] > 0 and "Attention, computed" in shown[0]["alt"], shown
