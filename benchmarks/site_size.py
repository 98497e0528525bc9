"""Print how heavy the built book is: what a browser downloads for each page, and the size of the builds.

`make site-size` (after `make book`) opens every page of _toc.yml in Debian's Chromium, served from
_build/html on 127.0.0.1, adds up the bytes of every response the page needed (HTML, CSS, scripts,
fonts, images; the states of an interactive figure only as far as the page shows them), also as gzipped text (what a host like GitHub Pages sends), and
prints the pages from heaviest to lightest, then the size on disk of the whole site, of its JupyterLite build (_build/html/lite, when built) and of the PDF
(when `make pdf` has made one). A benchmark, not a test: it prints figures and never fails on them.

Example:
    .venv/bin/python benchmarks/site_size.py --top 5
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

from tools import ROOT
from tools.built_site import CHROMIUM, CHROMIUM_FLAGS, HTML, SETTLE_PAGE, serve_site, toc_pages

MIB = 2**20
BINARY = {".png", ".jpg", ".jpeg", ".gif", ".woff", ".woff2", ".ttf", ".eot", ".wasm", ".zip", ".pdf"}  # sent as is


def folder_bytes(folder: Path) -> int:
    """Total size of the files under `folder` (0 when it does not exist)."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) if folder.is_dir() else 0


def gzipped_bytes(file: Path) -> int:
    """Size of `file` compressed as static hosts (GitHub Pages) serve text: gzip, level 6."""
    return len(gzip.compress(file.read_bytes(), compresslevel=6, mtime=0))


def page_weights(paths: list[str]) -> dict[str, tuple[int, int, int]]:
    """{page: (bytes downloaded, the same gzipped, number of responses)} for each page, with an empty cache."""
    from playwright.sync_api import sync_playwright

    weights = {}
    with serve_site(HTML) as base, sync_playwright() as playwright:
        host = urlparse(base).netloc
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        for path in paths:
            context = browser.new_context()  # a fresh context: nothing cached from the previous page
            context.route("**/*", lambda route: route.continue_() if urlparse(route.request.url).netloc == host
                          else route.abort())
            page = context.new_page()
            bodies: list[int] = []
            files: list[Path] = []

            def finished(request, bodies=bodies, files=files):
                bodies.append(request.sizes()["responseBodySize"])
                files.append(HTML / unquote(urlparse(request.url).path).lstrip("/"))

            page.on("requestfinished", finished)
            page.goto(f"{base}/{path}", wait_until="load")
            page.evaluate(SETTLE_PAGE)
            page.wait_for_function("() => [...document.querySelectorAll('.attn-static-widget')]"
                                   ".every(f => f.dataset.ready === 'true')", timeout=60_000)
            compressed = sum(gzipped_bytes(file) if file.suffix not in BINARY else file.stat().st_size
                             for file in files if file.is_file())
            weights[path] = (sum(bodies), compressed, len(bodies))
            context.close()
        browser.close()
    return weights


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=0, help="print only the N heaviest pages (default: all)")
    args = parser.parse_args(argv)
    if not (HTML / "index.html").is_file():
        print("the site is not built: run `make book` first", file=sys.stderr)
        return 1
    weights = page_weights(toc_pages())
    ranked = sorted(weights.items(), key=lambda item: item[1][0], reverse=True)
    print(f"{'page':<50} {'downloaded':>11} {'gzipped':>11} {'requests':>9}")
    for path, (size, compressed, requests) in ranked[: args.top or None]:
        print(f"{path:<50} {size / MIB:>7.2f} MiB {compressed / MIB:>7.2f} MiB {requests:>9}")
    heaviest, (size, compressed, _) = ranked[0]
    print(f"\nheaviest page: {heaviest}, {size / MIB:.2f} MiB uncompressed with an empty cache "
          f"({compressed / MIB:.2f} MiB where the host gzips text, as GitHub Pages does)")
    print(f"site on disk (_build/html): {folder_bytes(HTML) / MIB:.1f} MiB")
    lite = HTML / "lite"
    print(f"JupyterLite build (_build/html/lite): "
          + (f"{folder_bytes(lite) / MIB:.1f} MiB" if lite.is_dir() else "not built"))
    pdfs = sorted((ROOT / "_build").glob("**/*.pdf"))
    for pdf in pdfs:
        print(f"PDF {pdf.relative_to(ROOT)}: {pdf.stat().st_size / MIB:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
