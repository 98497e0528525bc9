"""Print how long the book takes to build (and, on request, to test), phase by phase, from a clean build.

`make build-times` removes _build (the state of a fresh clone after `make venv` and `make assets`), then
runs and times each phase as the Makefile does, one after the other:

* ``book``: `python -m tools.build_book`, split into the notebooks' execution and Sphinx. From a clean _build
  (a fresh clone) it executes every notebook, one kernel per core, into the cache the later phases share;
* ``executing``: the same build from a clean _build again, when it is not the first phase: every notebook
  executed, as after a change of the package;
* ``pdf``: `python -m tools.build_pdf` (skipped without xelatex); it finds every notebook in the cache
  the book filled, so it executes none;
* ``nbval``: strict nbval over every paired notebook (`make test-notebooks`), which re-executes each, perturbed,
  and checks its glued values against the build's record (tools/nbval_stability.py).

For each phase it prints the seconds, how many notebooks the build executed, and the machine's load
average before and after (other programs sharing the CPU make every figure larger). A benchmark, not a
test: it prints figures and never fails on them; it fails only when a phase itself fails.

Example:
    .venv/bin/python benchmarks/build_times.py --phases book,pdf
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tools import ROOT

BUILD = ROOT / "_build"
PHASES = ("book", "pdf", "nbval", "executing")
# the Makefile's ONE_BLAS: one BLAS thread per process, as `make book`, `make pdf` and `make test` run them
ONE_BLAS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
NBVAL_ARGS = ["--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg", "--nbval-cell-timeout=120"]


def commands() -> dict[str, list[str]]:
    notebooks = sorted(str(p.relative_to(ROOT)) for d in ("chapters", "exercises") for p in (ROOT / d).glob("*.ipynb"))
    python = sys.executable
    return {
        "book": [python, "-m", "tools.build_book"],
        "pdf": [python, "-m", "tools.build_pdf"],
        "nbval": [python, "-m", "pytest", "-q", "--nbval", *notebooks, *NBVAL_ARGS],
        "executing": [python, "-m", "tools.build_book"],
    }


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phases", default="book,pdf", help=f"comma-separated, from {','.join(PHASES)} (or all)")
    parser.add_argument("--keep-build", action="store_true", help="do not remove _build first (not a clean build)")
    args = parser.parse_args(argv)
    phases = PHASES if args.phases == "all" else tuple(args.phases.split(","))
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        parser.error(f"unknown phase(s) {unknown}; choose from {PHASES}")
    if not args.keep_build and BUILD.exists():
        shutil.rmtree(BUILD)
    print(f"{os.cpu_count()} CPUs; load average (1, 5, 15 min) at the start: {load()}", flush=True)
    rows = []
    for phase in phases:
        if phase == "pdf" and shutil.which("xelatex") is None:
            rows.append((phase, None, "", load(), "", "skipped: no xelatex (make texlive)"))
            continue
        environment = dict(os.environ) | ONE_BLAS
        if phase == "executing":
            shutil.rmtree(BUILD, ignore_errors=True)
        before = load()
        start = time.perf_counter()
        result = subprocess.run(commands()[phase], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=environment)
        seconds = time.perf_counter() - start
        if result.returncode != 0:
            print(result.stdout[-5000:])
            print(f"the {phase} phase FAILED after {seconds:.1f} s", file=sys.stderr)
            return 1
        detail = ""
        times = json.loads((BUILD / "build-times.json").read_text()) if (BUILD / "build-times.json").exists() else {}
        what = {"book": "book", "pdf": "PDF", "executing": "book"}.get(phase)
        if what in times:
            t = times[what]
            detail = f"{t['notebooks_executed']} notebooks executed in {t['execute_s']} s, Sphinx {t['sphinx_s']} s"
        elif phase == "nbval":
            detail = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
        rows.append((phase, seconds, detail, before, load(), ""))
        print(f"{phase}: {seconds:.1f} s", flush=True)
    print()
    print(f"{'phase':<10} {'seconds':>8}  {'load before':<15} {'load after':<15} detail")
    for phase, seconds, detail, before, after, note in rows:
        shown = f"{seconds:8.1f}" if seconds is not None else f"{'-':>8}"
        print(f"{phase:<10} {shown}  {before:<15} {after:<15} {detail or note}")
    total = sum(r[1] for r in rows if r[1] is not None)
    print(f"{'total':<10} {total:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
