"""Paths and page lists shared by the site tests (imported by their conftest and test modules)."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
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

# every saved widget view (a widget-view+json script) is rendered by the HTML manager into the
# element just before it: a .widget-subarea holding the widget's .jupyter-widgets DOM
UNRENDERED_WIDGETS = """() => [...document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]')]
  .filter(s => { const area = s.previousElementSibling;
                 return !(area && area.classList.contains('widget-subarea')
                          && area.querySelector('.jupyter-widgets')); })
  .map(s => JSON.parse(s.textContent).model_id)"""


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
