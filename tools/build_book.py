"""Build the book into _build/html with warnings as errors, and say where it is and how long it took.

jupyter-cache keys its executed outputs on the notebooks' code cells only, so a change in the
attnbook package would leave stale outputs in the site. This script hashes the package sources
and clears the execution cache whenever that hash changes.

It sets ATTNBOOK_STATIC_FIGURES=1 for the build's kernels: the interactive figures then also draw
the states the website shows without a kernel (attnbook.book.static_widgets). Outside these builds (a
reader's kernel, nbval, tools/execute_notebooks.py) they do not spend the time.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tools import ROOT

BUILD = ROOT / "_build"
CACHE = BUILD / ".jupyter_cache"
STAMP = BUILD / ".package-hash"


def package_hash() -> str:
    digest = hashlib.sha256()
    package_files = [p for p in (ROOT / "code" / "src").rglob("*") if p.suffix in (".py", ".json")]
    for path in sorted(package_files) + [ROOT / "requirements.txt"]:
        digest.update(path.relative_to(ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def clear_stale_execution_cache() -> str:
    """Clear the execution cache if the package changed since it was filled; return the package hash.

    After a successful build, write the returned hash to STAMP (the cache then matches the package).
    """
    current = package_hash()
    if CACHE.exists() and (not STAMP.exists() or STAMP.read_text() != current):
        print("the attnbook package changed since the last build: clearing the execution cache")
        shutil.rmtree(CACHE)
    return current


def build(options: list[str], product: Path, what: str, after: str) -> int:
    """Run `jupyter-book build` with `options` and warnings as errors (a stale cache cleared first).

    `product` is the file the build must leave, `what` names it in the messages, `after` is the line
    printed under a successful build. On success the package hash is written to STAMP.
    """
    current = clear_stale_execution_cache()
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    command = [str(jupyter_book), "build", str(ROOT), *options, "-W", "-n", "--keep-going"]
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, env={**os.environ, "ATTNBOOK_STATIC_FIGURES": "1"})
    seconds = time.perf_counter() - start
    if result.returncode != 0 or not product.exists():
        print(f"\nthe {what} build FAILED after {seconds:.1f} s (warnings count as errors)", file=sys.stderr)
        return result.returncode or 1
    STAMP.write_text(current)
    print(f"\nThe {what} is built: {product}")
    print(f"Build time: {seconds:.1f} s. {after}")
    return 0


def main() -> int:
    return build([], BUILD / "html" / "index.html", "book",
                 "Serve it offline with `make serve` (http://127.0.0.1:8000).")


if __name__ == "__main__":
    raise SystemExit(main())
