"""Copy the browser assets the site needs from web/node_modules into web/vendor (served as _static).

The book must work with no internet: MathJax 3 is installed from npm (web/package.json +
package-lock.json, `npm ci`) and only the files the pages load are copied, so the site stays small.
The interactive figures need no widget manager on the website (attnbook.book.static_widgets): their few
lines of JavaScript, web/src/static-widgets.js, are copied with the book's CSS. Run by `make assets`.
"""

from __future__ import annotations

import shutil
import sys
from tools import ROOT

WEB = ROOT / "web"
MODULES = WEB / "node_modules"
VENDOR = WEB / "vendor"

# (source inside node_modules, destination inside vendor)
COPIES = [
    ("mathjax/es5/tex-chtml.js", "mathjax/tex-chtml.js"),
    ("mathjax/es5/output/chtml/fonts/woff-v2", "mathjax/output/chtml/fonts/woff-v2"),
    ("mathjax/es5/input/tex/extensions", "mathjax/input/tex/extensions"),
    ("mathjax/es5/ui", "mathjax/ui"),
    ("mathjax/es5/a11y", "mathjax/a11y"),
    ("mathjax/es5/sre", "mathjax/sre"),
]
# the book's own files, from web/src
OWN_FILES = ["static-widgets.js", "book.css"]


def main() -> int:
    if not MODULES.is_dir():
        print("web/node_modules is missing: run `npm ci --prefix web` first", file=sys.stderr)
        return 1
    if VENDOR.exists():
        shutil.rmtree(VENDOR)
    for source, destination in COPIES:
        src, dst = MODULES / source, VENDOR / destination
        if not src.exists():
            print(f"missing npm file {src}", file=sys.stderr)
            return 1
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.map"))
        else:
            shutil.copy2(src, dst)
    for name in OWN_FILES:
        shutil.copy2(WEB / "src" / name, VENDOR / name)
    size = sum(p.stat().st_size for p in VENDOR.rglob("*") if p.is_file())
    print(f"vendored browser assets into {VENDOR.relative_to(WEB.parent)} ({size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
