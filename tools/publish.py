"""`make publish`: put the PDF at the site's root and push the site to the gh-pages branch of origin.

Run after `make book` and `make pdf` (the Makefile's publish target builds both first). The site then
serves the pages, the notebooks zip and attention-computed.pdf, which every page's download menu links.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tools.build_pdf import pdf_path
from tools.built_site import HTML
from tools.extensions.book_pdf import copy_pdf_into_site


def main(html: Path = HTML, pdf: Path | None = None) -> int:
    if not (html / "index.html").is_file():
        print(f"the site is not built in {html}: run `make book`", file=sys.stderr)
        return 1
    copied = copy_pdf_into_site(pdf or pdf_path(), html)
    print(f"the PDF is in the site: {copied}")
    return subprocess.run([sys.executable, "-m", "ghp_import", "--no-jekyll", "--push", "--force", str(html)]).returncode


if __name__ == "__main__":
    raise SystemExit(main())
