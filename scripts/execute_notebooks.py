"""Regenerate the executed .ipynb beside each MyST .md notebook (chapters/ and exercises/).

    python scripts/execute_notebooks.py                 # every paired notebook
    python scripts/execute_notebooks.py chapters/x.md   # just these

For each source it reads the .md with jupytext, executes it with nbclient (per-cell timeout, no
timing metadata, stable cell ids, stream chunks joined), drops the widget state and views (fresh random model ids on every run would make git noise;
the site builds from the .md and saves its own widget state), and writes the .ipynb with jupytext
so the pair stays linked. It prints how long each notebook took. When a cell fails, it names the
source, the code cell's number and the line of its ``{code-cell}`` fence, e.g.
``chapters/masks.md, code cell 7 (line 123)``, and exits with status 1.
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from jupytext.myst import myst_to_notebook
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIRS = ("chapters", "exercises")
CELL_TIMEOUT_S = 120


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


def display_path(path: Path) -> str:
    """``path`` relative to the repository when it is inside it (chapters/masks.md), else as given."""
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


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


def execute(source: Path) -> float:
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
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as error:
        where = cell_location(source, running[-1]) if running else display_path(source)
        raise NotebookCellFailed(f"{where} failed:\n{error}") from error
    seconds = time.perf_counter() - start
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
        for output in cell.get("outputs", []):  # views of widgets whose state is not saved
            output.get("data", {}).pop("application/vnd.jupyter.widget-view+json", None)
        if cell.cell_type == "code":
            cell.outputs = merge_streams(cell.outputs)
    nbformat.validate(notebook)
    jupytext.write(notebook, source.with_suffix(".ipynb"), fmt="ipynb")
    return seconds


def main(argv: list[str]) -> int:
    sources = [Path(a).resolve() for a in argv] or notebook_sources()
    total = 0.0
    for source in sources:
        try:
            seconds = execute(source)
        except NotebookCellFailed as failure:
            print(f"error: {failure}", file=sys.stderr)
            return 1
        total += seconds
        print(f"executed {source.relative_to(ROOT)} in {seconds:.1f} s")
    print(f"{len(sources)} notebook(s) executed in {total:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
