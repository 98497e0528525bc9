"""Regenerate the executed .ipynb beside each MyST .md notebook (chapters/ and exercises/).

    python -m tools.execute_notebooks                 # every paired notebook
    python -m tools.execute_notebooks chapters/x.md   # just these

For each source it reads the .md with jupytext and executes it with nbclient (per-cell timeout, no
timing metadata, stable cell ids) as the book does (tools/execution.py, ``book_kernel_environment``:
the interactive figures draw their website states, the glued values are recorded), one kernel per core
(``ATTNBOOK_JOBS`` sets how many), except that a notebook that measures times runs alone.
From that one run it writes the paired .ipynb, what a reader's Jupyter shows, and keeps what the website
needs besides in web/site-outputs/ (tools/site_outputs.py): the builds then take the notebook from there
and do not execute it again, from any clone. Pictures of figure states no notebook shows any more are
removed. It prints how long each notebook took. When a cell fails, it names the source, the code cell's
number and the line of its ``{code-cell}`` fence, e.g. ``chapters/masks.md, code cell 7 (line 123)``,
and exits with status 1.

:func:`stale_cells` is the pairing check (tests/test_pairing.py): a pair is stale when a cell's type,
source or the metadata the .md controls (tags, alt text, points, ...) differs.
"""

from __future__ import annotations

import concurrent.futures
import copy
import hashlib
import multiprocessing
import os
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from jupytext.myst import myst_to_notebook
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

from tools import ROOT, display_path, site_outputs
from tools.execution import (book_kernel_environment, glue_record_path, ipc_kernel, longest_first, record_stem,
                             source_digest)

SOURCE_DIRS = ("chapters", "exercises")
CELL_TIMEOUT_S = 120
# cell metadata that a run or the Jupyter interface writes, which jupytext keeps out of the .md
RUN_METADATA = frozenset({"autoscroll", "collapsed", "scrolled", "trusted", "execution", "ExecuteTime"})


class NotebookCellFailed(RuntimeError):
    """A cell raised (or timed out, or killed the kernel); the message says where in the .md."""


def is_notebook_source(path: Path) -> bool:
    """A .md is a notebook source when its front matter declares a jupytext pairing."""
    head = path.read_text(encoding="utf-8")[:400]
    return head.startswith("---") and "jupytext:" in head


def notebook_sources(root: Path = ROOT) -> list[Path]:
    return sorted(p for d in SOURCE_DIRS for p in (root / d).glob("*.md") if is_notebook_source(p))


def cell_location(source: Path, index: int) -> str:
    """Where cell ``index`` of the MyST notebook ``source`` is: ``chapters/masks.md, code cell 7 (line 123)``.

    The code cell is counted from 1 among code cells; the line (from 1) is that of its ``{code-cell}``
    fence, from the source map of jupytext's MyST reader.
    """
    notebook = myst_to_notebook(source.read_text(encoding="utf-8"), add_source_map=True)
    place = display_path(source)
    if index >= len(notebook.cells) or notebook.cells[index].cell_type != "code":
        return f"{place}, cell {index + 1}"
    number = sum(cell.cell_type == "code" for cell in notebook.cells[: index + 1])
    return f"{place}, code cell {number} (line {notebook.metadata['source_map'][index]})"


def execute(source: Path) -> tuple[float, nbformat.NotebookNode]:
    """Execute ``source`` as the book does, write its paired .ipynb and keep what the website needs besides
    (tools/site_outputs.py), so that no build executes it again.

    Returns the execution's seconds and the notebook the book shows (:func:`tools.site_outputs.book_notebook`).
    """
    notebook = jupytext.read(source)
    for index, cell in enumerate(notebook.cells):  # stable ids: jupytext draws random ones
        cell.id = hashlib.sha1(f"{index}:{cell.source}".encode()).hexdigest()[:8]
    notebook.metadata.setdefault("jupytext", {})["formats"] = "md:myst,ipynb"
    start = time.perf_counter()
    running: list[int] = []  # the index of the cell being executed
    record = glue_record_path(source)
    # the kernel inherits the book's environment: the figures draw their website states, the glue is recorded
    with book_kernel_environment(record) as keep, ipc_kernel("python3") as kernel:
        client = NotebookClient(
            notebook,
            km=kernel,
            timeout=CELL_TIMEOUT_S,
            resources={"metadata": {"path": str(source.parent)}},
            record_timing=False,
            store_widget_state=True,  # needed by Output widgets; the state is stripped below
            on_cell_execute=lambda cell, cell_index: running.append(cell_index),
        )
        try:
            client.execute(cleanup_kc=True)  # close the client's sockets; ipc_kernel stops the kernel
        except (CellExecutionError, CellTimeoutError, DeadKernelError) as error:
            where = cell_location(source, running[-1]) if running else display_path(source)
            raise NotebookCellFailed(f"{where} failed:\n{error}") from error
        keep()
    seconds = time.perf_counter() - start
    reader, extras = site_outputs.reader_notebook(notebook)
    nbformat.validate(reader)
    jupytext.write(reader, source.with_suffix(".ipynb"), fmt="ipynb")
    site_outputs.save(record_stem(source), source_digest(source), extras, record.read_text(encoding="utf-8"))
    return seconds, site_outputs.book_notebook(copy.deepcopy(reader), extras)


def _execute_in_worker(source: str) -> tuple[str, float, str]:
    """In a worker process: :func:`execute` ``source``; (source, seconds, error message or "")."""
    try:
        seconds, _ = execute(Path(source))
    except NotebookCellFailed as failure:
        return source, 0.0, str(failure)
    return source, seconds, ""


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


def measures_time(source: Path) -> bool:
    """Whether ``source`` glues a time it measures (a glue named ``measured_…``, tools/nbval_stability.py): it then
    runs alone, so that no other kernel competes with what it measures."""
    return "measured_" in source.read_text(encoding="utf-8")


def main(argv: list[str]) -> int:
    sources = [Path(a).resolve() for a in argv] or notebook_sources()
    jobs = max(1, int(os.environ.get("ATTNBOOK_JOBS", 0)) or os.cpu_count() or 1)
    sources = longest_first(sources)
    together = [source for source in sources if not measures_time(source)]
    alone = [source for source in sources if measures_time(source)]
    print(f"executing {len(sources)} notebook(s): {len(together)} of them {jobs} at a time, then the "
          f"{len(alone)} that measure times one at a time", flush=True)
    start = time.perf_counter()
    failures = []
    context = multiprocessing.get_context("spawn")
    for batch, workers in ((together, jobs), (alone, 1)):
        if not batch:
            continue
        with concurrent.futures.ProcessPoolExecutor(max_workers=min(workers, len(batch)), mp_context=context) as pool:
            for future in concurrent.futures.as_completed([pool.submit(_execute_in_worker, str(s)) for s in batch]):
                source, seconds, error = future.result()
                if error:
                    failures.append(error)
                    print(f"error: {error}", file=sys.stderr, flush=True)
                else:
                    print(f"executed {display_path(Path(source))} in {seconds:.1f} s", flush=True)
    unused = site_outputs.prune_states()
    print(f"{len(sources) - len(failures)} notebook(s) executed in {time.perf_counter() - start:.1f} s; "
          f"{unused} picture(s) no figure shows any more removed from {display_path(site_outputs.SITE_OUTPUTS)}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
