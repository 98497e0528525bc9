"""The nbgrader export: a homework as an nbgrader source notebook, for courses that grade with nbgrader.

``python -m tools.homework nbgrader OUT`` writes ``OUT/source/<homework>/<homework>.ipynb``, the layout
of an nbgrader course directory (exercises/instructor_guide.md). Each public check is a visible test
(a graded cell worth no points that fails when one of its verdicts does), so ``nbgrader validate`` tells a
student what the student version's checks say; the hidden tests carry the points.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat

from tools.homework.sources import (format_number, homework_sources, load, resolve, role, stable_id, top_level_statements,
                                    verdict_names)

KERNEL = "python3"


def placeholder_assignments(lines: list[str]) -> bool:
    """Whether ``lines`` of a stub only set names to None (``answer_w2 = None  # your number here``)."""
    statements = top_level_statements("\n".join(lines))
    return bool(statements) and all(isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                                    and node.value.value is None for node in statements)


def solution_with_markers(stub: str, solution: str) -> str:
    """The solution with each part that differs from the stub between nbgrader's solution markers.

    nbgrader's ``generate_assignment`` replaces every marked region by its code stub, so the student
    still sees what the solution shares with the stub: signatures and docstrings. The stub's placeholders
    (``answer_w2 = None  # your number here``) stay before the region they give way to, so the student sees
    which variable holds the answer, and a check of an untouched notebook says "not done yet".
    """
    import difflib

    stub_lines, solution_lines = stub.splitlines(), solution.splitlines()
    out: list[str] = []
    matcher = difflib.SequenceMatcher(a=stub_lines, b=solution_lines, autojunk=False)
    for operation, stub_start, stub_end, start, end in matcher.get_opcodes():
        region = solution_lines[start:end]
        if operation == "replace" and placeholder_assignments(stub_lines[stub_start:stub_end]):
            out.extend(stub_lines[stub_start:stub_end])
        if operation == "equal" or not any(line.strip() for line in region):
            out.extend(region)
            continue
        indent = min(len(line) - len(line.lstrip()) for line in region if line.strip())
        pad = " " * indent
        out.extend([f"{pad}### BEGIN SOLUTION", *region, f"{pad}### END SOLUTION"])
    return "\n".join(out)


def visible_test(public_check: str) -> str:
    """A public check as an nbgrader test: its code, then an assertion whose message is every failed verdict,
    as the check printed it."""
    verdicts = f"[{', '.join(verdict_names(public_check))}]"
    return (f"{public_check}\n\n# Visible test: nbgrader validate shows the verdicts above that fail\n"
            f'assert all(verdict.passed for verdict in {verdicts}), "\\n".join(\n'
            f"    str(verdict) for verdict in {verdicts} if not verdict.passed)")


def nbgrader_notebook(homework: str | Path):
    """The nbgrader source notebook: solution cells with markers, public checks as visible tests (no points),
    hidden tests, locked read-only cells."""
    path, source = load(homework)
    name = path.stem
    cells = []
    counters: dict[str, int] = {}

    def meta(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
        data = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
                "solution": solution, "task": False}
        if points is not None:
            data["points"] = points
        return {"nbgrader": data}

    for index, cell in enumerate(source.cells):
        cell_role = role(cell)
        task = cell.metadata.get("task", "")
        if cell_role == "stub":
            continue  # merged into the solution cell that follows it
        if cell_role == "solution":
            text = solution_with_markers(source.cells[index - 1].source, cell.source)
            new = nbformat.v4.new_code_cell(text, metadata=meta(f"{task}-solution", solution=True))
        elif cell_role == "hidden-test":
            grade_id = cell.metadata["grade_id"]
            points = cell.metadata["points"]
            worth = f"{format_number(points)} point{'' if points == 1 else 's'}"
            text = (f"# Hidden tests: {grade_id} ({worth}), run when graded\n"
                    f"### BEGIN HIDDEN TESTS\n{cell.source}\n### END HIDDEN TESTS")
            new = nbformat.v4.new_code_cell(text, metadata=meta(grade_id, grade=True, locked=True,
                                                                points=cell.metadata["points"]))
        else:
            counters[cell_role] = counters.get(cell_role, 0) + 1
            grade_id = f"{cell_role}-{task + '-' if task else ''}{counters[cell_role]}"
            if cell_role == "public-check":  # a visible test, worth no points: the hidden tests grade
                new = nbformat.v4.new_code_cell(visible_test(cell.source),
                                                metadata=meta(grade_id, grade=True, locked=True, points=0))
            else:
                factory = nbformat.v4.new_markdown_cell if cell.cell_type == "markdown" else nbformat.v4.new_code_cell
                new = factory(cell.source, metadata=meta(grade_id, locked=True))
        new.metadata["tags"] = [cell_role]
        new.id = stable_id(name, len(cells), new.source)
        cells.append(new)
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": KERNEL},
                         "language_info": {"name": "python"}}
    nbformat.validate(notebook)
    return notebook


def write_nbgrader(out: Path, homeworks: list[str]) -> list[Path]:
    """``OUT/source/<homework>/<homework>.ipynb``: the layout of an nbgrader course directory."""
    written = []
    for homework in homeworks or homework_sources():
        name = resolve(homework).stem
        target = out / "source" / name / f"{name}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbgrader_notebook(homework), target)
        written.append(target)
    return written
