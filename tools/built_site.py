"""The built website in a browser: where it is, its pages, a local server and what pages run once loaded.

The site tests (tests/site, tests/pdf) and the page-weight benchmark (benchmarks/site_size.py, `make
site-size`) share these: Debian's chromium with its flags, and the scripts that wait for a page to settle.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import threading
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

from tools import ROOT
from tools.build_book import BUILD

HTML = BUILD / "html"
# axe-core, the accessibility engine the browser test injects into every page (web/package.json devDependency)
AXE = ROOT / "web" / "node_modules" / "axe-core" / "axe.min.js"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# axe-core's findings that the book must not have: impact "serious" or "critical" (tools/axe_run.js, which runs
# the two costly rules, color-contrast and link-in-text-block, on one element of each kind). Its CSSOM preload
# (used by one rule, css-orientation-lock) re-fetches the theme's `@import "../basic.css"` relative to
# the page instead of the stylesheet, a 404 the browser itself never makes, so it is switched off.
# The dark theme changes colours only: the page, its elements and their names are the light theme's, but for
# the logo, which each theme shows as its own picture. So every rule runs in the light theme, and in the dark
# one the rules whose outcome colours or that picture can change.
DARK_THEME_RULES = ["color-contrast", "link-in-text-block", "image-alt"]
AXE_RUN = (Path(__file__).with_name("axe_run.js")).read_text(encoding="utf-8")

# run in a page after its "load" event: resolves once MathJax 3 (when the page has it) has typeset, the
# fonts it asked for have loaded and every CSS transition under way has ended. Waiting for this, rather
# than for Playwright's "networkidle", is deterministic: on a busy machine "networkidle" can take tens of
# seconds with no request pending. The transitions matter to axe-core: the theme script sets the dark
# theme after the page has parsed, and a button whose colours are still fading from light to dark
# (the theme's .btn transition, 0.15 s) has a contrast that is neither theme's.
SETTLE_PAGE = (
    "async () => { if (window.MathJax && MathJax.startup && MathJax.startup.promise)"
    " { await MathJax.startup.promise; } await document.fonts.ready;"
    " await Promise.all(document.getAnimations().filter(a => a instanceof CSSTransition)"
    ".map(a => a.finished.catch(() => null))); }"
)

# the pages' pictures load lazily (tools/extensions/sphinx_fixes.py): ask for all of them now, and wait until each
# has loaded or failed, at most 30 s (the check of the images then names any that did not load)
LOAD_LAZY_IMAGES = """async () => { const images = [...document.querySelectorAll('article img')];
  images.forEach(image => { image.loading = 'eager'; });
  const settled = images.map(image => image.complete ? null : new Promise(done => {
    image.addEventListener('load', done, {once: true}); image.addEventListener('error', done, {once: true}); }));
  await Promise.race([Promise.all(settled), new Promise(done => setTimeout(done, 30000))]); }"""

# the interactive figures of a page (attnbook.book.static_widgets, web/src/static-widgets.js): each one's id,
# whether its script has set it up, and each of its controls with the accessible name the page gives it
STATIC_FIGURES = """() => [...document.querySelectorAll('.attn-static-widget')].map(f => ({
  id: f.id, ready: f.dataset.ready === 'true',
  controls: [...f.querySelectorAll('input, select')].map(c => ({
    id: c.id, kind: c.tagName === 'SELECT' ? 'select' : c.type,
    label: [...(c.labels || [])].map(l => l.textContent.trim()).join(' '),
    count: c.tagName === 'SELECT' ? c.options.length
           : c.type === 'checkbox' ? 2 : Number(c.max) + 1,
    index: c.tagName === 'SELECT' ? c.selectedIndex : c.type === 'checkbox' ? Number(c.checked)
           : Number(c.value)}))}))"""

# what a figure shows now: the picture (address, alt text, loaded?) and the readout with its live region
FIGURE_SHOWS = """id => { const f = document.getElementById(id), img = f.querySelector('img.attn-static-picture'),
  live = f.querySelector('[aria-live]');
  return {src: img.getAttribute('src'), alt: img.alt, loaded: img.complete && img.naturalWidth > 0,
          readout: live ? live.textContent : null, live: live ? live.getAttribute('aria-live') : null}; }"""

# record what the figure's aria-live region says from now on (what a screen reader is told)
LISTEN_TO_LIVE_REGION = """id => { const live = document.getElementById(id).querySelector('[aria-live]');
  window.__announced = [];
  if (window.__liveObserver) window.__liveObserver.disconnect();
  window.__liveObserver = new MutationObserver(() => window.__announced.push(live.textContent));
  window.__liveObserver.observe(live, {childList: true, characterData: true, subtree: true}); }"""


def cheat_sheet_labels() -> list[str]:
    """The first cell of every row of the cheat sheet's tables (chapters/cheat_sheet.md) that is plain words: what a
    printed cheat sheet must show, row by row (tests/site/test_cheat_sheet_print.py, tests/pdf/test_pdf.py)."""
    source = (ROOT / "chapters" / "cheat_sheet.md").read_text(encoding="utf-8")
    cells = [line.split("|")[1].strip() for line in source.splitlines() if line.startswith("| ") and "---" not in line]
    return [cell for cell in cells if cell not in ("what", "step") and not re.search(r"[$`{\\]", cell)]


def toc_pages() -> list[str]:
    """Every page of _toc.yml, as paths relative to the site root (e.g. chapters/intro.html)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                pages.append(entry["file"])
            walk(entry.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return [f"{page}.html" for page in pages]


class PageLinks(HTMLParser):
    """The href targets of a page's links and the ids of its elements (the link checks of tests/site)."""

    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if attributes.get("id"):
            self.ids.add(attributes["id"])
        if tag == "a" and attributes.get("href"):
            self.hrefs.append(attributes["href"])

    @classmethod
    def of(cls, text: str) -> "PageLinks":
        parser = cls()
        parser.feed(text)
        return parser


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature
        pass


class _LocalServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """A browser that closes a page while a file is still being sent is not an error of the site."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextlib.contextmanager
def serve_site(directory: Path = HTML):
    """Serve `directory` over HTTP on 127.0.0.1 (a free port) while the block runs; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = _LocalServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
