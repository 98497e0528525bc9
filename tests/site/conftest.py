"""Fixtures for tests of the built site: a local HTTP server and a Playwright-driven Chromium.

The site is served from _build/html on 127.0.0.1 (a free port). Chromium is Debian's
(/usr/bin/chromium, override with $CHROMIUM); Playwright from PyPI drives it. Every request
that does not go to the local server is recorded and aborted, so a test can assert that the
site needs no internet.
"""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest

from site_support import CHROMIUM, CHROMIUM_FLAGS, HTML


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature
        pass


@pytest.fixture(scope="session")
def site_url():
    if not (HTML / "index.html").exists():
        pytest.fail("the site is not built: run `make book` first")
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


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
        self.page.wait_for_load_state("networkidle")
        # MathJax 3 typesets asynchronously: wait for its startup promise when the page loads it
        self.page.evaluate(
            "async () => { if (window.MathJax && MathJax.startup && MathJax.startup.promise)"
            " { await MathJax.startup.promise; } }"
        )

    def close(self):
        self.context.close()


@pytest.fixture
def visit(browser, site_url):
    opened: list[PageVisit] = []

    def open_page(path: str, color_scheme: str = "light", **options) -> PageVisit:
        page_visit = PageVisit(browser, site_url, path, color_scheme, **options)
        opened.append(page_visit)
        return page_visit

    yield open_page
    for page_visit in opened:
        page_visit.close()
