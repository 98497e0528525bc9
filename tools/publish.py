"""`make publish`: put the PDF at the site's root, push the site to the gh-pages branch of origin, and the reader
notebooks to the branch the launch buttons open.

Run after `make book` and `make pdf` (the Makefile's publish target builds both first). The site then
serves the pages, the notebooks zip and attention-computed.pdf, which every page's download menu links.

Colab and Binder open a notebook from a branch of the repository (sphinx-book-theme's launch buttons): the
book's pages point them at ``reader_notebooks_launch_branch`` (_config.yml) (tools/extensions/reader_notebooks.py), not at
``main``, whose paired notebooks are MyST sources. :func:`launch_folder` lays out that branch: every page's
reader notebook where the page's source lies (the site's ``_sources/`` downloads: ``chapters/masks.ipynb``,
``exercises/hw_masks.ipynb``; another language's in its folder, ``zh-Hant/chapters/masks.ipynb``), with what Binder builds the environment from (``runtime.txt``,
``requirements.txt``, which installs the package from ``code/``), the licences and a README.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tools import ROOT
from tools.build_pdf import pdf_path
from tools.built_site import HTML
from tools.extensions.book_pdf import copy_pdf_into_site
from tools.extensions.notebooks_zip import package_files
from tools.extensions.reader_notebooks import book_config, launch_branch

LAUNCH = ROOT / "_build" / "launch"
LAUNCH_README = """# Attention, computed: the notebooks to launch

This branch is written by `make publish` from the book's `{branch}` branch: every page's notebook as a
learner opens it in Colab or Binder (the Markdown as the book's pages show it), `runtime.txt` and
`requirements.txt` for Binder, and the `attnbook` package in `code/`. Do not edit it: edit the MyST
sources on `{branch}`.
"""


def launch_folder(html: Path = HTML, folder: Path = LAUNCH) -> Path:
    """The launch branch's files, from the built site in ``html``, in ``folder`` (emptied first)."""
    shutil.rmtree(folder, ignore_errors=True)
    for language in book_config()["sphinx"]["config"]["book_languages"].values():  # "" for English, "zh-Hant/"
        sources = html / language["folder"] / "_sources"
        for notebook in sorted(sources.rglob("*.ipynb")):
            target = folder / language["folder"] / notebook.relative_to(sources)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(notebook, target)
    for path in [ROOT / "runtime.txt", *package_files(ROOT)]:
        target = folder / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    (folder / "README.md").write_text(LAUNCH_README.format(branch=book_config()["repository"]["branch"]), encoding="utf-8")
    return folder


def main(html: Path = HTML, pdf: Path | None = None) -> int:
    if not (html / "index.html").is_file():
        print(f"the site is not built in {html}: run `make book`", file=sys.stderr)
        return 1
    copied = copy_pdf_into_site(pdf or pdf_path(), html)
    print(f"the PDF is in the site: {copied}")
    pushed = subprocess.run([sys.executable, "-m", "ghp_import", "--no-jekyll", "--push", "--force", str(html)])
    if pushed.returncode != 0:
        return pushed.returncode
    folder = launch_folder(html, html.parent / "launch")
    print(f"the launch branch {launch_branch()}: {folder}")
    return subprocess.run([sys.executable, "-m", "ghp_import", "--push", "--force", "--branch", launch_branch(),
                           "--message", "Reader notebooks for Colab and Binder (make publish)", str(folder)]).returncode


if __name__ == "__main__":
    raise SystemExit(main())
