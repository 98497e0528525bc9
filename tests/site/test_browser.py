"""The built book in a real browser (Debian's Chromium through Playwright), with no internet.

Run after `make book`; `make test` does both.
"""

from __future__ import annotations

import pytest

from site_support import toc_pages

CHAPTER = "chapters/scaled_dot_product_attention.html"


@pytest.mark.parametrize("path", toc_pages())
def test_page_loads_offline_without_errors(visit, path):
    page_visit = visit(path)
    assert page_visit.external_requests == [], "the page asked the internet for something"
    assert page_visit.failed_requests == [], "some local requests failed"
    assert page_visit.console_errors == [], "the browser console logged errors"
    images = page_visit.page.eval_on_selector_all(
        "article img",
        "els => els.map(e => ({src: e.src, alt: e.alt, loaded: e.complete && e.naturalWidth > 0}))",
    )
    for image in images:
        assert image["loaded"], f"image {image['src']} did not load"
        assert image["alt"].strip(), f"image {image['src']} has no alt text"


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
