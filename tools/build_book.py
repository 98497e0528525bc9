"""Build the book into _build/html with warnings as errors, and say where it is and how long it took.

jupyter-cache keys its executed outputs on the notebooks' code cells only, so a change in the
attnbook package would leave stale outputs in the site: the cache is cleared whenever the hash of the
package sources changes (tools/execution.py, :func:`~tools.execution.open_cache`).

Before Sphinx starts, every notebook the cache lacks is executed into it (tools/execution.py), one kernel
per core, with ATTNBOOK_STATIC_FIGURES=1: the interactive figures then also draw the states the website
shows without a kernel (attnbook.book.static_widgets). A fresh clone's first build executes every notebook
(the repository keeps no rendered output, only nbval's reference text); later builds execute a notebook
again only when its code or the package changed. Sphinx then finds every notebook in the cache, and the
website and the PDF share it. Outside these runs (a reader's kernel, nbval) the figures
do not spend the time.

Each build prints its phases' times and records them in _build/build-times.json (``make build-times``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tools import ROOT
from tools.execution import STATIC_ENV, cached_sources, fill_cache

BUILD = ROOT / "_build"
TIMES = BUILD / "build-times.json"


def build(options: list[str], product: Path, what: str, after: str) -> int:
    """Run `jupyter-book build` with `options` and warnings as errors, every notebook executed first.

    `product` is the file the build must leave, `what` names it in the messages, `after` is the line
    printed under a successful build.
    """
    start = time.perf_counter()
    try:
        executed, execute_seconds = fill_cache()
    except RuntimeError as failure:
        print(f"\nthe {what} build FAILED: a notebook failed to execute\n{failure}", file=sys.stderr)
        return 1
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    command = [str(jupyter_book), "build", str(ROOT), *options, "-W", "-n", "--keep-going"]
    sphinx_start = time.perf_counter()
    before = cached_sources()
    result = subprocess.run(command, cwd=ROOT, env={**os.environ, STATIC_ENV: "1"})
    sphinx_seconds = time.perf_counter() - sphinx_start
    seconds = time.perf_counter() - start
    if result.returncode != 0 or not product.exists():
        print(f"\nthe {what} build FAILED after {seconds:.1f} s (warnings count as errors)", file=sys.stderr)
        return result.returncode or 1
    again = cached_sources() - before
    if again:  # myst-nb did not find them under the key tools/execution.py stored them by
        print(f"\nthe {what} build FAILED: Sphinx executed {len(again)} notebook(s) again that tools/execution.py "
              f"had executed (their cache keys differ): {', '.join(sorted(uri for _, uri in again))}", file=sys.stderr)
        return 1
    record_times(what, {"total_s": seconds, "notebooks_executed": executed, "execute_s": execute_seconds,
                        "sphinx_s": sphinx_seconds})
    print(f"\nThe {what} is built: {product}")
    print(f"Build time: {seconds:.1f} s ({executed} notebook(s) executed in {execute_seconds:.1f} s, "
          f"then Sphinx {sphinx_seconds:.1f} s). {after}")
    return 0


def record_times(what: str, times: dict) -> None:
    """Keep the latest build's phase times in TIMES, with the machine's load when it finished."""
    recorded = json.loads(TIMES.read_text(encoding="utf-8")) if TIMES.exists() else {}
    recorded[what] = {**{k: round(v, 1) if isinstance(v, float) else v for k, v in times.items()},
                      "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()}
    TIMES.write_text(json.dumps(recorded, indent=1) + "\n", encoding="utf-8")


def main() -> int:
    return build([], BUILD / "html" / "index.html", "book",
                 "Serve it offline with `make serve` (http://127.0.0.1:8000).")


if __name__ == "__main__":
    raise SystemExit(main())
