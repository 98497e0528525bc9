"""The built book in a real browser (Debian's Chromium through Playwright), with no internet.

Run after `make book`; `make test` does both.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tools import ROOT
from tools.built_site import (AXE, AXE_RUN, DARK_THEME_RULES, FIGURE_SHOWS, HTML, LISTEN_TO_LIVE_REGION,
                              LOAD_LAZY_IMAGES, STATIC_FIGURES, toc_pages)

CHAPTER = "chapters/scaled_dot_product_attention.html"


PAGES = toc_pages()


def shows_an_interactive_figure(page: str) -> bool:
    """Whether the built page holds an interactive figure's static form (attnbook.book.static_widgets)."""
    built = HTML / page
    return not built.exists() or 'class="attn-static-widget"' in built.read_text(encoding="utf-8")


FIGURE_PAGES = [page for page in PAGES if shows_an_interactive_figure(page)]  # all of them before a build


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
def test_page_figures_are_set_up_with_named_controls(page_report, path):
    for figure in page_report(path).static_figures:
        assert figure["ready"], f"static-widgets.js did not set up figure {figure['id']}"
        assert figure["controls"], f"figure {figure['id']} has no control"
        for control in figure["controls"]:
            assert control["label"], f"control {control['id']} of {figure['id']} has no label"
            assert control["count"] >= 2, f"control {control['id']} ({control['label']}) offers one value"


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
@pytest.mark.parametrize("path", PAGES)
def test_page_diagrams_are_shown_described_and_readable(page_report, path, color_scheme):
    for diagram in page_report(path, color_scheme).diagrams:
        assert diagram["width"] > 200 and diagram["height"] > 50, f"a diagram is too small to see: {diagram}"
        assert diagram["title"].strip() and len(diagram["alt"]) > 40, f"a diagram without its words: {diagram}"
        faint = [t for t in diagram["texts"] if t["contrast"] < 4.5]
        assert faint == [], f"{diagram['title']}: text below 4.5:1 in the {color_scheme} theme: {faint}"


def test_every_chapter_that_draws_a_diagram_shows_it(page_report):
    """The diagram test above is not vacuous: each chapter whose source draws a Diagram shows one."""
    drawing = [page for page in PAGES if page.startswith("chapters/")
               and "Diagram(" in (ROOT / page.replace(".html", ".md")).read_text(encoding="utf-8")]
    assert "chapters/scaled_dot_product_attention.html" in drawing
    assert [page for page in drawing if not page_report(page).diagrams] == []


def _wait_for(page, expression, argument, message, timeout=10_000):
    try:
        page.wait_for_function(expression, arg=argument, timeout=timeout)
    except PlaywrightTimeout:
        pytest.fail(f"{message} (waited {timeout / 1000:.0f} s)")


def _move(page, control, index):
    """Set `control` to its value number `index` as a reader does: keyboard on a slider, menu, click."""
    element = page.locator(f"#{control['id']}")
    if control["kind"] == "select":
        element.select_option(index=index)
    elif control["kind"] == "checkbox":
        element.click()
    else:  # a range input: arrow keys from where it is
        element.focus()
        current = int(element.evaluate("e => Number(e.value)"))
        key = "ArrowRight" if index > current else "ArrowLeft"
        for _ in range(abs(index - current)):
            page.keyboard.press(key)


def test_every_page_whose_chapter_draws_an_interactive_figure_shows_it():
    """The pages the control test visits are those whose source displays a figure with its static form."""
    drawing = {f"{source.relative_to(ROOT).with_suffix('.html').as_posix()}" for source in (ROOT / "chapters").glob("*.md")
               if "with_static_page(" in source.read_text(encoding="utf-8")}
    assert drawing and set(FIGURE_PAGES) == drawing


@pytest.mark.parametrize("path", FIGURE_PAGES)
def test_page_figures_respond_to_every_control(visit, path):
    """Every value of every control shows its own state: picture, alt text and readout change, the new
    picture loads, and the live region announces the new readout."""
    page = visit(path).page
    figures = page.evaluate(STATIC_FIGURES)
    for figure in figures:
        for control in figure["controls"]:
            order = [i for i in range(control["count"]) if i != control["index"]] + [control["index"]]
            for index in order:  # every other value, then back to the start
                before = page.evaluate(f"({FIGURE_SHOWS})", figure["id"])
                assert before["live"] in ("polite", "assertive"), f"{figure['id']}: readout is not a live region"
                page.evaluate(f"({LISTEN_TO_LIVE_REGION})", figure["id"])
                # the reader looks at the picture while moving the control (pictures load lazily)
                page.locator(f"#{figure['id']} img.attn-static-picture").scroll_into_view_if_needed()
                _move(page, control, index)
                where = f"{path}, figure {figure['id']}, {control['label']!r} set to value number {index}"
                _wait_for(page, f"id => ({FIGURE_SHOWS})(id).src !== {before['src']!r}", figure["id"],
                          f"{where}: the picture did not change")
                _wait_for(page, f"id => ({FIGURE_SHOWS})(id).loaded", figure["id"],
                          f"{where}: the new picture did not load")
                after = page.evaluate(f"({FIGURE_SHOWS})", figure["id"])
                assert after["alt"].strip() and after["alt"] != before["alt"], f"{where}: alt text unchanged"
                assert after["readout"].strip() and after["readout"] != before["readout"], (
                    f"{where}: readout unchanged")
                announced = page.evaluate("() => window.__announced")
                assert announced and announced[-1] == after["readout"], (
                    f"{where}: the live region did not announce the new readout")
                if control["kind"] == "range":
                    valuetext = page.locator(f"#{control['id']}").get_attribute("aria-valuetext")
                    shown = page.locator(f"output[for='{control['id']}']").text_content()
                    assert valuetext and valuetext == shown, f"{where}: slider value not said in words"


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
@pytest.mark.parametrize("path", PAGES)
def test_page_has_no_serious_accessibility_violation(page_report, path, color_scheme):
    violations = page_report(path, color_scheme).serious_accessibility_violations
    assert violations == [], f"axe-core ({color_scheme} theme): {violations}"


# what a reader would no longer make out: (what is spoiled, the CSS that spoils it, the rule that must find it).
# Not links: made the colour of their text without an underline, axe-core reports them as undecided on these pages
# ("element overlap"), checked on every element or one per kind alike (benchmarks/axe_sampling.py compares both).
SPOILED = {
    "code keywords": (".highlight .k", "color: {background} !important;", "color-contrast"),
    "emphasis in the prose": ("article p em", "color: {background} !important;", "color-contrast"),
}


@pytest.mark.parametrize("spoiled", SPOILED)
def test_the_colour_checks_find_a_kind_made_unreadable(visit, spoiled):
    """Contrast and link distinction are checked on one element of each kind (tools/axe_run.js): a kind made
    unreadable on the page is found, and the element named belongs to it."""
    selector, css, rule = SPOILED[spoiled]
    page = visit(CHAPTER, "dark").page
    page.add_script_tag(path=str(AXE))
    assert page.evaluate(AXE_RUN, DARK_THEME_RULES) == [], "the chapter must pass before its colours are spoiled"
    colours = page.evaluate("() => ({background: getComputedStyle(document.querySelector('div.highlight')).backgroundColor})")
    assert page.evaluate("s => document.querySelectorAll(s).length", selector) > 1, f"the chapter has no {spoiled}"
    page.add_style_tag(content=f"{selector} {{ {css.format(**colours)} }}")
    found = page.evaluate(AXE_RUN, DARK_THEME_RULES)
    assert [v["rule"] for v in found] == [rule], found
    assert page.evaluate("([where, s]) => document.querySelector(where).matches(s)", [found[0]["where"][0], selector]), found


def test_pages_with_figures_are_checked():
    """The figure checks above are not vacuous: ten chapters show twelve interactive figures."""
    counts = {p: (HTML / p).read_text(encoding="utf-8").count('class="attn-static-widget"') for p in PAGES}
    assert sum(1 for c in counts.values() if c) >= 10 and sum(counts.values()) >= 12, counts


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
    # screen readers read the hidden MathML (a11y/assistive-mml) of every formula
    assistive = page.eval_on_selector_all("mjx-container mjx-assistive-mml", "els => els.length")
    assert assistive >= typeset, f"{assistive} formulas with MathML for screen readers, of {typeset}"


def test_chapter_heatmap_is_shown_with_alt_text(visit):
    page = visit(CHAPTER).page
    page.evaluate(LOAD_LAZY_IMAGES)
    heatmaps = page.eval_on_selector_all(
        "article img",
        "els => els.filter(e => /heatmap/i.test(e.alt))"
        ".map(e => ({alt: e.alt, w: e.naturalWidth, shown: e.getBoundingClientRect().width}))",
    )
    assert heatmaps, "no image whose alt text describes a heatmap"
    assert all(h["w"] > 100 and h["shown"] > 100 for h in heatmaps), heatmaps


def test_chapter_figure_has_sliders_and_a_menu(visit):
    page = visit(CHAPTER).page
    figures = page.evaluate(STATIC_FIGURES)
    assert len(figures) == 1, figures
    kinds = [(c["kind"], c["label"]) for c in figures[0]["controls"]]
    assert kinds == [("range", "k1, x"), ("range", "k1, y"), ("select", "weights")], kinds


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
