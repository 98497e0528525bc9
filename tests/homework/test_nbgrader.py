"""The nbgrader export works with nbgrader itself, offline: generate_assignment, then autograde.

`python -m tools.homework nbgrader` writes the source notebooks into a temporary course directory with an
nbgrader_config.py; nbgrader_driver.py (its own process) runs nbgrader's Python API on it and reports
the scores of a solved and a blank submission. nbgrader is an instructor/test dependency
(requirements-instructor.txt); without it these tests are skipped and say so.

Every homework goes through generate_assignment. Autograding costs about 2 s per notebook, so by default
two homeworks are autograded (the one with the sample submissions and the one with the most code);
ATTNBOOK_SLOW=1 autogrades all of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest

from tools.homework import cli, nbgrader_export, sources

SOURCES = sources.homework_sources()
NAMES = [source.stem for source in SOURCES]
SLOW = os.environ.get("ATTNBOOK_SLOW") == "1"
DRIVER = Path(__file__).resolve().parent / "nbgrader_driver.py"

pytest.importorskip("nbgrader", reason="nbgrader is not installed: pip install -r requirements-instructor.txt")

AUTOGRADED = NAMES if SLOW else ["hw_scaled_dot_product_attention", "hw_transformer"]

CONFIG = '''c = get_config()  # noqa: F821 (nbgrader's config files get this name)
c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = "attention-computed"
c.CourseDirectory.db_url = "sqlite:///" + {root!r} + "/gradebook.db"
c.Exchange.root = {exchange!r}
c.ExecutePreprocessor.timeout = 60
'''


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    assert cli.main(["nbgrader", str(root)]) == 0
    (root / "nbgrader_config.py").write_text(
        CONFIG.format(root=str(root), exchange=str(tmp_path_factory.mktemp("exchange"))), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def report(course):
    finished = subprocess.run([sys.executable, str(DRIVER), str(course), *AUTOGRADED],
                              capture_output=True, text=True, timeout=900)
    assert finished.returncode == 0, finished.stderr[-3000:]
    return json.loads(finished.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", NAMES)
def test_the_exported_notebook_shows_no_myst_role_or_directive(course, name):
    """The instructor's nbgrader source reads as Markdown, as every notebook the book hands out (tests/site)."""
    from tools.extensions.reader_notebooks import notebook_raw_myst

    assert notebook_raw_myst(nbformat.read(course / "source" / name / f"{name}.ipynb", as_version=4)) == []


def cells_by_id(notebook):
    return {cell.metadata["nbgrader"]["grade_id"]: cell for cell in notebook.cells}


@pytest.mark.parametrize("source", SOURCES, ids=NAMES)
def test_export_marks_every_cell_for_nbgrader(course, source):
    notebook = nbformat.read(course / "source" / source.stem / f"{source.stem}.ipynb", as_version=4)
    instructor = jupytext.read(source)
    roles = [sources.role(c) for c in instructor.cells if sources.role(c) != "stub"]
    assert [c.metadata["tags"][0] for c in notebook.cells] == roles
    for cell in notebook.cells:
        meta = cell.metadata["nbgrader"]
        assert meta["schema_version"] == 3 and meta["task"] is False
        role = cell.metadata["tags"][0]
        if role == "solution":
            assert (meta["solution"], meta["grade"], meta["locked"]) == (True, False, False)
            assert "### BEGIN SOLUTION" in cell.source and "### END SOLUTION" in cell.source
        elif role == "hidden-test":
            assert (meta["solution"], meta["grade"], meta["locked"]) == (False, True, True)
            assert meta["points"] > 0
            assert "### BEGIN HIDDEN TESTS" in cell.source and "### END HIDDEN TESTS" in cell.source
        elif role == "public-check":  # a visible test: graded, worth no points
            assert (meta["solution"], meta["grade"], meta["locked"], meta["points"]) == (False, True, True, 0)
            assert "BEGIN HIDDEN TESTS" not in cell.source and "assert all(verdict.passed for verdict in" in cell.source
        else:
            assert (meta["solution"], meta["grade"], meta["locked"]) == (False, False, True)
    assert len(cells_by_id(notebook)) == len(notebook.cells), "grade_ids must be unique in a notebook"


def test_solution_markers_keep_the_stubs_signature_outside():
    stub = 'def f(x):\n    """Doc."""\n    raise NotImplementedError("f: your code here")\n'
    solution = 'def f(x):\n    """Doc."""\n    y = x + 1  # (n,)\n    return y\n'
    assert nbgrader_export.solution_with_markers(stub, solution) == (
        'def f(x):\n    """Doc."""\n    ### BEGIN SOLUTION\n    y = x + 1  # (n,)\n    return y\n'
        "    ### END SOLUTION")


def test_solution_markers_wrap_each_function_of_a_two_function_stub():
    stub = "def f():\n    raise NotImplementedError\n\n\ndef g():\n    raise NotImplementedError\n"
    solution = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    marked = nbgrader_export.solution_with_markers(stub, solution)
    assert marked.count("### BEGIN SOLUTION") == 2 and "def g():\n    ### BEGIN SOLUTION\n    return 2" in marked


@pytest.mark.parametrize("name", NAMES)
def test_nbgrader_generates_the_student_assignment(report, course, name):
    assert report[name]["generated"], report[name]["error"]
    release = nbformat.read(course / "release" / name / f"{name}.ipynb", as_version=4)
    text = "\n".join(cell.source for cell in release.cells)
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    assert "# YOUR CODE HERE" in text


@pytest.mark.parametrize("name", NAMES)
def test_every_number_answer_keeps_its_variable_in_the_release(report, course, name):
    """nbgrader replaces a marked solution by `# YOUR CODE HERE`: the stub's placeholders stay before it, so the
    student still sees which variable the grader reads (`answer_w2 = None  # your number here: ...`)."""
    assert report[name]["generated"], report[name]["error"]
    release = nbformat.read(course / "release" / name / f"{name}.ipynb", as_version=4)
    text = "\n".join(cell.source for cell in release.cells if cell.metadata["nbgrader"]["solution"])
    stubs = [cell.source for cell in jupytext.read(sources.resolve(name)).cells if sources.role(cell) == "stub"]
    placeholders = [line for stub in stubs for line in stub.splitlines() if "= None  # your number here" in line]
    assert [line for line in placeholders if line not in text] == []


@pytest.mark.parametrize("name", AUTOGRADED)
def test_nbgrader_autograde_gives_full_marks_to_the_solution_and_none_to_the_blank(report, name):
    scores = report[name]["scores"]
    assert report[name]["error"] == ""
    assert scores["solved"] == [10.0, 10.0]
    assert scores["blank"] == [0.0, 10.0]


def nbgrader_validate(notebook: Path) -> str:
    """What `nbgrader validate NOTEBOOK` prints to a student (run as a student runs it, outside the course)."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": str(bin_dir) + os.pathsep + os.environ.get("PATH", "")}
    finished = subprocess.run([str(bin_dir / "nbgrader"), "validate", str(notebook)], capture_output=True, text=True,
                              cwd=notebook.parent, env=env, timeout=300)
    assert finished.returncode == 0, finished.stderr[-3000:]
    return finished.stdout


def student_verdicts(name: str, tmp_path: Path) -> list[str]:
    """The verdicts the public checks of the untouched student version print (tools.homework.student)."""
    from nbclient import NotebookClient

    from tools.homework.student import student_notebook

    student = student_notebook(name)
    NotebookClient(student, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    return [line for cell in student.cells if sources.role(cell) == "public-check"
            for output in cell.outputs for line in output.get("text", "").splitlines()]


@pytest.mark.parametrize("name", AUTOGRADED)
def test_nbgrader_validate_fails_a_blank_notebook_with_the_student_versions_verdicts(report, course, name, tmp_path):
    """Each public check is a visible test: `nbgrader validate` on the untouched release fails every one of them
    and shows the verdicts the student version prints (as nbgrader shows an error: cut at its line width)."""
    assert report[name]["error"] == ""
    shown = nbgrader_validate(course / "submitted" / "blank" / name / f"{name}.ipynb")
    checks = sum(sources.role(cell) == "public-check" for cell in jupytext.read(sources.resolve(name)).cells)
    assert f"VALIDATION FAILED ON {checks} CELL(S)!" in " ".join(shown.split()), shown[-2000:]
    verdicts = student_verdicts(name, tmp_path)
    assert verdicts and all(verdict.startswith("✗ ") and "not done yet" in verdict for verdict in verdicts), verdicts
    assert [verdict for verdict in verdicts if verdict[:60] not in shown] == [], shown[-3000:]
    assert "NameError" not in shown, "a visible test reads a name the release notebook never sets"


@pytest.mark.parametrize("name", AUTOGRADED)
def test_nbgrader_validate_passes_a_solved_notebook(report, course, name):
    assert report[name]["error"] == ""
    shown = nbgrader_validate(course / "submitted" / "solved" / name / f"{name}.ipynb")
    assert "Success! Your notebook passes all the tests." in shown, shown[-3000:]
