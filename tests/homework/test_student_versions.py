"""Student notebooks: no solution and no hidden test reaches them, and they run top to bottom as stubs.

`python -m tools.homework student` writes them; these tests run the same command into a temporary folder.
"""

from __future__ import annotations

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

from tools import ROOT
from tools.homework import cli, grading, sources
from tools.homework.student import STUDENT_DIR, STUDENT_ROLES

SOURCES = sources.homework_sources()
NAMES = [source.stem for source in SOURCES]

SECRET_ROLES = ("solution", "hidden-test")


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    assert cli.main(["student", "--out", str(out)]) == 0
    return out


def normalised_lines(source: str) -> set[str]:
    """Non-empty lines with runs of whitespace collapsed, so re-indenting a line does not hide it."""
    return {" ".join(line.split()) for line in source.splitlines() if line.strip()}


def is_shared_boilerplate(line: str) -> bool:
    """Lines any cell may contain: imports (a hidden test re-imports what the setup imports)."""
    return line.startswith(("import ", "from "))


def secret_lines(source_notebook) -> dict[str, set[str]]:
    """grade_id or task -> the lines of a solution or hidden test that a student must never see.

    A solution's lines that its own stub also has (the signature, the docstring) are not secret.
    """
    secrets: dict[str, set[str]] = {}
    cells = source_notebook.cells
    for index, cell in enumerate(cells):
        cell_role = sources.role(cell)
        if cell_role not in SECRET_ROLES:
            continue
        lines = normalised_lines(cell.source)
        if cell_role == "solution":
            lines -= normalised_lines(cells[index - 1].source)
        key = f"{cell_role} {cell.metadata.get('grade_id') or cell.metadata.get('task')}"
        secrets[key] = {line for line in lines if not is_shared_boilerplate(line)}
    return secrets


def leaks(source_notebook, student_notebook) -> list[str]:
    seen = set().union(*(normalised_lines(cell.source) for cell in student_notebook.cells))
    return [f"{key}: {line}" for key, lines in secret_lines(source_notebook).items() for line in sorted(lines)
            if line in seen]


def test_student_command_writes_one_notebook_per_homework(student_dir):
    assert sorted(p.stem for p in student_dir.glob("*.ipynb")) == NAMES


def test_student_command_writes_to_build_student_by_default():
    assert STUDENT_DIR == ROOT / "_build" / "student"


@pytest.mark.parametrize("source", SOURCES, ids=NAMES)
def test_no_solution_or_hidden_test_line_reaches_the_student(source, student_dir):
    student = nbformat.read(student_dir / f"{source.stem}.ipynb", as_version=4)
    instructor = jupytext.read(source)
    assert all(secret_lines(instructor).values()), "a solution or hidden test with nothing secret in it"
    assert leaks(instructor, student) == []


def test_the_leak_detector_finds_a_planted_solution(student_dir):
    source = SOURCES[0]
    student = nbformat.read(student_dir / f"{source.stem}.ipynb", as_version=4)
    instructor = jupytext.read(source)
    solution = next(c for c in instructor.cells if sources.role(c) == "solution")
    student.cells.append(nbformat.v4.new_code_cell("    " + solution.source.replace("\n", "\n    ")))
    assert leaks(instructor, student)


@pytest.mark.parametrize("source", SOURCES, ids=NAMES)
def test_student_notebook_has_only_student_roles_and_no_outputs(source, student_dir):
    path = student_dir / f"{source.stem}.ipynb"
    nbformat.validate(nbformat.read(path, as_version=4))
    student = nbformat.read(path, as_version=4)
    assert "jupytext" not in student.metadata
    roles = [sources.role(cell) for cell in student.cells]
    assert set(roles) <= set(STUDENT_ROLES) and roles.count("stub") == len(
        grading.grading_plan(source)["tasks"])
    for cell in student.cells:
        assert not set(cell.metadata.get("tags", [])) & set(sources.BOOK_TAGS + SECRET_ROLES)
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.parametrize("source", SOURCES, ids=NAMES)
def test_student_notebook_keeps_every_instruction_and_public_check(source, student_dir):
    student = nbformat.read(student_dir / f"{source.stem}.ipynb", as_version=4)
    kept = [cell.source for cell in jupytext.read(source).cells if sources.role(cell) in STUDENT_ROLES]
    assert [cell.source for cell in student.cells] == kept


@pytest.mark.parametrize("source", SOURCES, ids=NAMES)
def test_student_notebook_runs_top_to_bottom_and_every_check_says_not_done_yet(source, student_dir):
    student = nbformat.read(student_dir / f"{source.stem}.ipynb", as_version=4)
    NotebookClient(student, timeout=60, kernel_name="python3",
                   resources={"metadata": {"path": str(student_dir)}}).execute()  # raises on any error
    for cell in student.cells:
        if cell.cell_type != "code":
            continue
        assert all(output.output_type != "error" for output in cell.outputs)
        text = "".join(output.get("text", "") for output in cell.outputs)
        assert "Traceback" not in text
        if sources.role(cell) == "public-check":
            verdicts = text.splitlines()
            assert verdicts and all(line.startswith("✗ ") and "not done yet" in line for line in verdicts), text
        else:
            assert text == "", f"a {sources.role(cell)} cell printed {text!r}"


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_shows_no_myst_role_or_directive(name, student_dir):
    """What a student is handed reads as Markdown, as every notebook the book hands out (tests/site)."""
    from tools.extensions.reader_notebooks import notebook_raw_myst

    assert notebook_raw_myst(nbformat.read(student_dir / f"{name}.ipynb", as_version=4)) == []
