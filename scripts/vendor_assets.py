"""Copy the browser assets the site needs from web/node_modules into web/vendor (served as _static).

The book must work with no internet: MathJax 3, require.js and the ipywidgets HTML manager are
installed from npm (web/package.json + package-lock.json, `npm ci`) and only the files the pages
load are copied, so the site stays small. Run by `make assets`.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

WEB = Path(__file__).resolve().parent.parent / "web"
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
    ("requirejs/require.js", "require.min.js"),
    ("@jupyter-widgets/html-manager/dist/embed-amd.js", "html-manager/embed-amd.js"),
]
# the widget manager's icon fonts (Font Awesome), requested by embed-amd.js next to itself
FONT_SUFFIXES = (".woff2", ".woff", ".ttf", ".eot", ".svg")
FONT_DIR = "@jupyter-widgets/html-manager/dist"


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
    for font in sorted((MODULES / FONT_DIR).iterdir()):
        if font.suffix in FONT_SUFFIXES:
            shutil.copy2(font, VENDOR / "html-manager" / font.name)
    shutil.copy2(WEB / "src" / "widgets-setup.js", VENDOR / "html-manager" / "widgets-setup.js")
    shutil.copy2(WEB / "src" / "book.css", VENDOR / "book.css")
    size = sum(p.stat().st_size for p in VENDOR.rglob("*") if p.is_file())
    print(f"vendored browser assets into {VENDOR.relative_to(WEB.parent)} ({size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
