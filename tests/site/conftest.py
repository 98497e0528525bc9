"""Fixtures for tests of the built site: a local HTTP server and a Playwright-driven Chromium.

The site is served from _build/html on 127.0.0.1 (a free port). Chromium is Debian's
(/usr/bin/chromium, override with $CHROMIUM); Playwright from PyPI drives it. Every request
that does not go to the local server is recorded and aborted, so a test can assert that the
site needs no internet.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tools.built_site import (AXE, AXE_RUN, CHROMIUM, CHROMIUM_FLAGS, DARK_THEME_RULES, HTML, LOAD_LAZY_IMAGES,
                              SETTLE_PAGE, STATIC_FIGURES)


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: `make browser` installs Debian's chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


class PageVisit:
    """A page opened in a fresh context, with what it logged and requested."""

    def __init__(self, browser, site_url: str, path: str, color_scheme: str = "light",
                 answer_request=None, **context_options):
        # answer_request(route) -> bool may answer a request itself (the lite test serves Pyodide's CDN
        # from a local core); what it declines goes on as usual: external requests are recorded, aborted
        host = urlparse(site_url).netloc
        self.console_errors: list[str] = []
        self.failed_requests: list[str] = []
        self.external_requests: list[str] = []
        # reduced motion: the theme then switches its colour transitions off (as it does for readers who
        # ask for it), so what axe-core measures is the theme's final colours, not a fade between two
        context_options.setdefault("reduced_motion", "reduce")
        self.context = browser.new_context(color_scheme=color_scheme, **context_options)

        def route(route):
            if answer_request is not None and answer_request(route):
                return
            if urlparse(route.request.url).netloc == host:
                route.continue_()
            else:
                self.external_requests.append(route.request.url)
                route.abort()

        self.context.route("**/*", route)
        self.page = self.context.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.console_errors.append(m.text))
        self.page.on("pageerror", lambda e: self.console_errors.append(str(e)))
        self.page.on(
            "requestfailed",
            lambda r: urlparse(r.url).netloc == host and self.failed_requests.append(r.url),
        )
        self.page.on(
            "response",
            lambda r: r.status >= 400 and self.failed_requests.append(f"{r.status} {r.url}"),
        )
        self.page.goto(f"{site_url}/{path}", wait_until="load")
        self.page.evaluate(SETTLE_PAGE)

    def close(self):
        self.context.close()


@pytest.fixture(scope="session")
def open_page(browser, site_url):
    """open_page(path, color_scheme="light", **options) -> a PageVisit the caller closes (a page kept open
    across tests)."""
    return lambda path, color_scheme="light", **options: PageVisit(browser, site_url, path, color_scheme, **options)


@pytest.fixture
def visit_server(browser):
    """visit_server(base_url, path) -> a PageVisit of a page another server on 127.0.0.1 serves (JupyterLab),
    closed after the test."""
    opened: list[PageVisit] = []

    def open_page(base_url: str, path: str, color_scheme: str = "light", **options) -> PageVisit:
        page_visit = PageVisit(browser, base_url, path, color_scheme, **options)
        opened.append(page_visit)
        return page_visit

    yield open_page
    for page_visit in opened:
        page_visit.close()


@pytest.fixture
def visit(visit_server, site_url):
    return lambda path, color_scheme="light", **options: visit_server(site_url, path, color_scheme, **options)


_FORMULAS = """() => ({
  math: document.querySelectorAll('span.math, div.math').length,
  raw: [...document.querySelectorAll('span.math, div.math')]
         .filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 60)),
  errors: [...document.querySelectorAll('mjx-merror')].map(e => e.textContent.slice(0, 60))})"""

_IMAGES = """els => els.map(e => ({src: e.src, alt: e.alt, loaded: e.complete && e.naturalWidth > 0}))"""

# Every data-flow diagram (attnbook.figures.diagrams) of the page: its size on the page, its title and alt text,
# and the contrast of each of its texts against what is behind it (the box drawn just before the text, a
# hatched box's pattern colour, or the page's background), by WCAG's formula
_DIAGRAMS = """() => {
  const rgb = c => (c.match(/[0-9.]+/g) || [0, 0, 0]).slice(0, 3).map(Number);
  const alpha = c => { const parts = c.match(/[0-9.]+/g) || []; return parts.length > 3 ? Number(parts[3]) : 1; };
  const luminance = c => { const [r, g, b] = rgb(c).map(v => v / 255).map(
      v => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const contrast = (a, b) => { const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
      return (x + 0.05) / (y + 0.05); };
  let page = getComputedStyle(document.body).backgroundColor;
  for (let e = document.querySelector('article'); e && alpha(page) === 0; e = e.parentElement) {
    page = getComputedStyle(e).backgroundColor; }
  if (alpha(page) === 0) page = getComputedStyle(document.documentElement).backgroundColor;
  return [...document.querySelectorAll('article svg.attn-diagram')].map(svg => {
    const box = svg.getBoundingClientRect();
    // what is painted behind a text: the last rect before it in the document whose box holds the text's centre
    const behind = text => {
      const t = text.getBBox(), x = t.x + t.width / 2, y = t.y + t.height / 2;
      let found = page;
      for (const e of svg.querySelectorAll('rect')) {
        if (!(e.compareDocumentPosition(text) & Node.DOCUMENT_POSITION_FOLLOWING) || e.closest('defs')) continue;
        const b = e.getBBox();
        if (x < b.x || x > b.x + b.width || y < b.y || y > b.y + b.height) continue;
        const fill = getComputedStyle(e).fill;
        if (fill.startsWith('url(')) {
          found = getComputedStyle(svg.querySelector(fill.match(/#([^"')]+)/)[0]).querySelector('rect')).fill;
        } else if (fill !== 'none' && alpha(fill) > 0) found = fill;
      }
      return found;
    };
    return {width: box.width, height: box.height,
            title: (svg.querySelector('title') || {}).textContent || '',
            alt: (svg.querySelector('desc') || {}).textContent || '',
            texts: [...svg.querySelectorAll('text')].map(t => ({text: t.textContent,
                contrast: contrast(getComputedStyle(t).fill, behind(t))}))};
  });
}"""


class PageReport:
    """What one visit to a page showed in one colour scheme: requests, console, images, formulas, figures and
    axe-core's findings."""

    def __init__(self, page_visit: PageVisit, axe_rules: list[str] | None = None):
        page = page_visit.page
        page.evaluate(LOAD_LAZY_IMAGES)
        self.images = page.eval_on_selector_all("article img", _IMAGES)
        self.formulas = page.evaluate(_FORMULAS)
        self.static_figures = page.evaluate(STATIC_FIGURES)
        self.diagrams = page.evaluate(_DIAGRAMS)
        page.add_script_tag(path=str(AXE))
        self.serious_accessibility_violations = page.evaluate(AXE_RUN, axe_rules)  # None: every rule
        self.page_visit = page_visit

    def finish(self) -> None:
        """Take what the visit requested and logged so far: after every check, so that theirs is included."""
        self.external_requests = list(self.page_visit.external_requests)
        self.failed_requests = list(self.page_visit.failed_requests)
        self.console_errors = list(self.page_visit.console_errors)
        del self.page_visit


# In the page: whether the theme shows its dark colours (pydata-sphinx-theme follows the reader's system
# preference in its default "auto" mode, and switches when that preference changes)
_DARK_THEME_SHOWN = "() => document.documentElement.dataset.theme === 'dark'"
_BACKGROUND = "() => getComputedStyle(document.body).backgroundColor"


def report_both_themes(browser, site_url: str, path: str) -> dict[str, PageReport]:
    """One visit to ``path``: the light theme's report, then, the reader's system turned to dark while the page
    is open, the dark theme's (the colour rules, DARK_THEME_RULES)."""
    page_visit = PageVisit(browser, site_url, path, "light")
    try:
        light = PageReport(page_visit)
        page = page_visit.page
        light_background = page.evaluate(_BACKGROUND)
        page.emulate_media(color_scheme="dark")
        try:
            page.wait_for_function(_DARK_THEME_SHOWN, timeout=10_000)
        except PlaywrightTimeout:
            pytest.fail(f"{path}: the theme did not turn dark within 10 s of the system's preference turning dark")
        page.evaluate(SETTLE_PAGE)
        assert page.evaluate(_BACKGROUND) != light_background, f"{path}: the dark theme kept the light background"
        dark = PageReport(page_visit, DARK_THEME_RULES)
        light.finish()
        dark.finish()
    finally:
        page_visit.close()
    return {"light": light, "dark": dark}


@pytest.fixture(scope="session")
def light_report(browser, site_url):
    """light_report(path) -> the PageReport of one visit in the light theme (the zh-Hant pages: axe in one theme)."""
    reports: dict[str, PageReport] = {}

    def report(path: str) -> PageReport:
        if path not in reports:
            page_visit = PageVisit(browser, site_url, path, "light")
            try:
                reports[path] = PageReport(page_visit)
                reports[path].finish()
            finally:
                page_visit.close()
        return reports[path]

    return report


@pytest.fixture(scope="session")
def page_report(browser, site_url):
    """page_report(path, color_scheme="light") -> PageReport; each page is visited once for both colour schemes."""
    if not AXE.is_file():
        pytest.fail(f"{AXE} is missing: run `npm ci --prefix web` (make book does)")
    reports: dict[str, dict[str, PageReport]] = {}

    def report(path: str, color_scheme: str = "light") -> PageReport:
        if path not in reports:
            reports[path] = report_both_themes(browser, site_url, path)
        return reports[path][color_scheme]

    return report
