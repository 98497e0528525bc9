"""Regenerate the executed .ipynb beside each MyST .md notebook (chapters/ and exercises/).

    python scripts/execute_notebooks.py                 # every paired notebook
    python scripts/execute_notebooks.py chapters/x.md   # just these

For each source it reads the .md with jupytext, executes it with nbclient (per-cell timeout, no
timing metadata, stable cell ids, stream chunks joined), drops the widget state and views (fresh random model ids on every run would make git noise;
the site builds from the .md and saves its own widget state), and writes the .ipynb with jupytext
so the pair stays linked. It prints how long each notebook took.
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIRS = ("chapters", "exercises")
CELL_TIMEOUT_S = 120


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


def execute(source: Path) -> float:
    notebook = jupytext.read(source)
    for index, cell in enumerate(notebook.cells):  # stable ids: jupytext draws random ones
        cell.id = hashlib.sha1(f"{index}:{cell.source}".encode()).hexdigest()[:8]
    notebook.metadata.setdefault("jupytext", {})["formats"] = "md:myst,ipynb"
    start = time.perf_counter()
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(source.parent)}},
        record_timing=False,
        store_widget_state=True,  # needed by Output widgets; the state is stripped below
    )
    client.execute()
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
        seconds = execute(source)
        total += seconds
        print(f"executed {source.relative_to(ROOT)} in {seconds:.1f} s")
    print(f"{len(sources)} notebook(s) executed in {total:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
