"""Regenerate the executed .ipynb beside each MyST .md notebook (chapters/ and exercises/).

    python -m tools.execute_notebooks                 # every paired notebook
    python -m tools.execute_notebooks chapters/x.md   # just these

For each source it reads the .md with jupytext, executes it with nbclient (per-cell timeout, no
timing metadata, stable cell ids, stream chunks joined) as the book's builds do, with
``ATTNBOOK_STATIC_FIGURES=1``, and stores that run in the book's execution cache (tools/execution.py):
the next ``make book`` or ``make pdf`` takes the notebook from there and does not execute it again.
It then drops the widget state and views (fresh random model ids on every run would make git noise)
and the precomputed static form of interactive figures (the site builds from the .md), and writes the .ipynb with jupytext
so the pair stays linked. It prints how long each notebook took. When a cell fails, it names the
source, the code cell's number and the line of its ``{code-cell}`` fence, e.g.
``chapters/masks.md, code cell 7 (line 123)``, and exits with status 1.

:func:`stale_cells` is the pairing check (tests/test_pairing.py): a pair is stale when a cell's type,
source or the metadata the .md controls (tags, alt text, points, ...) differs.
"""

from __future__ import annotations

import copy
import hashlib
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from jupytext.myst import myst_to_notebook
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

from tools import ROOT, display_path
from tools.execution import book_kernel_environment, glue_record_path, store_in_cache

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


def merge_streams(outputs: list) -> list:
    """Join consecutive stdout (or stderr) chunks: how the kernel splits them depends on timing."""
    merged: list = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (output.output_type == "stream" and previous is not None
                and previous.output_type == "stream" and previous.name == output.name):
            previous.text += output.text
        else:
            merged.append(output)
    return merged


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


def execute(source: Path, cache: bool = False) -> float:
    """Execute ``source`` and write its paired .ipynb; with ``cache``, store the run in the book's cache too.

    Returns the execution's seconds.
    """
    notebook = jupytext.read(source)
    for index, cell in enumerate(notebook.cells):  # stable ids: jupytext draws random ones
        cell.id = hashlib.sha1(f"{index}:{cell.source}".encode()).hexdigest()[:8]
    notebook.metadata.setdefault("jupytext", {})["formats"] = "md:myst,ipynb"
    start = time.perf_counter()
    running: list[int] = []  # the index of the cell being executed
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(source.parent)}},
        record_timing=False,
        store_widget_state=True,  # needed by Output widgets; the state is stripped below
        on_cell_execute=lambda cell, cell_index: running.append(cell_index),
    )
    # the kernel inherits the book's environment: the figures draw their website states, the glue is recorded
    with book_kernel_environment(glue_record_path(source)) as keep:
        try:
            client.execute()
        except (CellExecutionError, CellTimeoutError, DeadKernelError) as error:
            where = cell_location(source, running[-1]) if running else display_path(source)
            raise NotebookCellFailed(f"{where} failed:\n{error}") from error
        keep()
    seconds = time.perf_counter() - start
    if cache:
        store_in_cache(source, copy.deepcopy(notebook), seconds)
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
        for output in cell.get("outputs", []):  # views of widgets whose state is not saved
            data = output.get("data", {})
            if data.pop("application/vnd.jupyter.widget-view+json", None) is not None:
                # and the website's precomputed form of an interactive figure (attnbook.book.static_widgets):
                # every state's image, which the site builds from the .md; Jupyter shows the live widget
                if 'class="attn-static-widget"' in data.get("text/html", ""):
                    data.pop("text/html")
        if cell.cell_type == "code":
            cell.outputs = merge_streams(cell.outputs)
    nbformat.validate(notebook)
    jupytext.write(notebook, source.with_suffix(".ipynb"), fmt="ipynb")
    return seconds


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
    sources = [Path(a).resolve() for a in argv] or notebook_sources()
    total = 0.0
    for source in sources:
        try:
            seconds = execute(source, cache=True)
        except NotebookCellFailed as failure:
            print(f"error: {failure}", file=sys.stderr)
            return 1
        total += seconds
        print(f"executed {display_path(source)} in {seconds:.1f} s")
    print(f"{len(sources)} notebook(s) executed in {total:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
