"""Regenerate the executed .ipynb beside each MyST .md notebook (chapters/ and exercises/).

    python -m tools.execute_notebooks                 # every paired notebook
    python -m tools.execute_notebooks chapters/x.md   # just these

Each source is executed as the book executes it (:func:`tools.execution.execute`, one kernel per core,
``ATTNBOOK_JOBS`` sets how many; a notebook that measures times runs alone): from that one run it writes the
paired .ipynb, the reference outputs strict nbval compares (:func:`tools.site_outputs.nbval_reference`: no
pictures), and the build's execution cache keeps the whole run, so that the next `make book` or `make pdf`
here executes it no more; a fresh clone's build executes it itself. It prints how long each notebook took. When a cell fails, it names the source, the code cell's
number and the line of its ``{code-cell}`` fence, e.g. ``chapters/masks.md, code cell 7 (line 123)``,
and exits with status 1.

:func:`stale_cells` is the pairing check (tests/test_pairing.py): a pair is stale when a cell's type,
source or the metadata the .md controls (tags, alt text, points, ...) differs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jupytext

from tools import display_path
from tools.execution import execute_all, notebook_sources

# cell metadata that a run or the Jupyter interface writes, which jupytext keeps out of the .md
RUN_METADATA = frozenset({"autoscroll", "collapsed", "scrolled", "trusted", "execution", "ExecuteTime"})


def cell_key(cell) -> tuple:
    """What a cell of a pair must agree on: its type, its source, and the metadata the .md controls
    (everything but RUN_METADATA; tags compared as a set)."""
    metadata = {key: value for key, value in cell.metadata.items() if key not in RUN_METADATA}
    if "tags" in metadata:
        metadata["tags"] = sorted(metadata["tags"])
    return cell.cell_type, cell.source.strip(), metadata


def stale_cells(source: Path) -> list[str]:
    """Why the executed pair of ``source`` no longer matches it, one line per problem; [] when fresh."""
    pair = source.with_suffix(".ipynb")
    if not pair.exists():
        return [f"{pair.name} is missing: run `make notebooks`"]
    md_cells, nb_cells = jupytext.read(source).cells, jupytext.read(pair).cells
    if len(md_cells) != len(nb_cells):
        return [f"{source.name} and {pair.name} have different cell counts ({len(md_cells)} and "
                f"{len(nb_cells)}): run `make notebooks`"]
    problems = []
    for index, (a, b) in enumerate(zip(md_cells, nb_cells)):
        (type_a, source_a, meta_a), (type_b, source_b, meta_b) = cell_key(a), cell_key(b)
        what = [name for name, x, y in (("type", type_a, type_b), ("source", source_a, source_b),
                                         ("metadata", meta_a, meta_b)) if x != y]
        if what:
            detail = f" ({meta_a} in the .md, {meta_b} in the .ipynb)" if what == ["metadata"] else ""
            problems.append(f"cell {index} of {source.name} differs from {pair.name} in its "
                            f"{' and '.join(what)}{detail}: run `make notebooks`")
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.execute_notebooks", description="\n\n".join(
        __doc__.split("\n\n")[:3]), formatter_class=argparse.RawDescriptionHelpFormatter)  # the usage, not stale_cells
    parser.add_argument("sources", nargs="*", type=Path, help="the .md notebooks to execute (default: every one)")
    args = parser.parse_args(argv)
    sources = [path.resolve() for path in args.sources] or notebook_sources()
    print(f"executing {len(sources)} notebook(s), one kernel per core; those that measure times run alone, last",
          flush=True)
    start = time.perf_counter()
    failures = []
    for source, seconds, error in execute_all(sources, write_pair=True):
        if error:
            failures.append(error)
            print(f"error: {error}", file=sys.stderr, flush=True)
        else:
            print(f"executed {display_path(source)} in {seconds:.1f} s", flush=True)
    print(f"{len(sources) - len(failures)} notebook(s) executed in {time.perf_counter() - start:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
