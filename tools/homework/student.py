"""The student version of a homework: instructions, setup, stubs and public checks; no outputs.

``python -m tools.homework student`` (``make student``) writes one notebook per homework into
_build/student/.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from tools import ROOT
from tools.homework.sources import BOOK_TAGS, homework_sources, load, resolve, role, stable_id

STUDENT_DIR = ROOT / "_build" / "student"
STUDENT_ROLES = ("instructions", "setup", "stub", "public-check")


def student_notebook(homework: str | Path):
    """The student version: instructions, setup, stubs and public checks; no outputs, no counts."""
    path, source = load(homework)
    cells = []
    for cell in source.cells:
        if role(cell) not in STUDENT_ROLES:
            continue
        tags = [tag for tag in cell.metadata.get("tags", []) if tag not in BOOK_TAGS]
        metadata = {"tags": tags}
        if cell.metadata.get("task"):
            metadata["task"] = cell.metadata["task"]
        if cell.cell_type == "markdown":
            new = nbformat.v4.new_markdown_cell(cell.source, metadata=metadata)
        else:
            new = nbformat.v4.new_code_cell(cell.source, metadata=metadata)
        new.id = stable_id(path.stem, len(cells), cell.source)
        cells.append(new)
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "attnbook": {"homework": path.stem},
    }
    nbformat.validate(notebook)
    return notebook


def write_student_notebooks(out: Path, homeworks: list[str]) -> list[Path]:
    """``OUT/<homework>.ipynb`` for each homework (every one when none is named)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for homework in homeworks or homework_sources():
        notebook = student_notebook(homework)
        target = out / f"{resolve(homework).stem}.ipynb"
        nbformat.write(notebook, target)
        written.append(target)
    return written
