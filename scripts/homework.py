"""Homework tooling: student notebooks, grading of submitted notebooks, and an nbgrader export.

    python scripts/homework.py check [HOMEWORK ...]                 # validate the instructor sources
    python scripts/homework.py student [--out DIR] [HOMEWORK ...]   # student notebooks -> _build/student/
    python scripts/homework.py grade HOMEWORK SUBMISSIONS OUT [--timeout 10] [--jobs 2] [--unsafe-no-sandbox]
    python scripts/homework.py nbgrader OUT [HOMEWORK ...]          # nbgrader source notebooks -> OUT/source/

HOMEWORK is a name such as ``hw_masks`` or a path such as ``exercises/hw_masks.md``; without one, every
``exercises/hw_*.md`` is used.

Each homework is one MyST notebook source whose cells carry exactly one role tag:

- ``instructions`` (markdown), ``setup`` (imports every version runs),
- ``stub`` (the student's starting code) directly followed by its ``solution`` (same names),
- ``public-check`` (calls into ``attnbook.checks`` and prints a verdict),
- ``hidden-test`` (asserts; metadata ``grade_id`` and ``points``).

Code cells other than setup name their ``task`` in the metadata, which ties a hidden test to the
stub it grades. The student version keeps instructions, setup, stubs and public checks (no outputs).
Grading (scripts/grading.py) runs each submission's cells in a bubblewrap sandbox (scripts/sandbox.py)
and the hidden tests in the grader, which calls the student's functions in the sandbox on the tests'
inputs and gets their results back as data; a hidden test scores its points when it runs without an
error.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import sys
import time
from pathlib import Path

import nbformat

from execute_notebooks import display_path

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "exercises"
STUDENT_DIR = ROOT / "_build" / "student"

ROLES = ("instructions", "setup", "stub", "solution", "public-check", "hidden-test")
STUDENT_ROLES = ("instructions", "setup", "stub", "public-check")
TASK_ROLES = ("stub", "solution", "public-check", "hidden-test")
BOOK_TAGS = ("remove-cell", "remove-input", "remove-output", "hide-input", "hide-output", "hide-cell")
REQUIRED_BOOK_TAGS = {"stub": "remove-cell", "solution": "hide-input", "hidden-test": "remove-cell"}

KERNEL = "python3"


class HomeworkError(Exception):
    """A homework source breaks the conventions, or a submission cannot be read; the message says how."""


# --- reading and validating the instructor sources ---------------------------------------------------


def homework_sources(root: Path = ROOT) -> list[Path]:
    """Every homework source, ``exercises/hw_*.md``, sorted by name."""
    return sorted((root / "exercises").glob("hw_*.md"))


def resolve(homework: str | Path) -> Path:
    """``hw_masks``, ``hw_masks.md`` or a path -> the path of the instructor source."""
    path = Path(homework)
    if path.suffix == ".md" and path.exists():
        return path.resolve()
    candidate = EXERCISES / f"{path.stem}.md"
    if candidate.exists():
        return candidate
    known = ", ".join(p.stem for p in homework_sources()) or "none"
    raise HomeworkError(f"no homework {str(homework)!r}: expected a name such as hw_masks (known: {known})")


def role(cell) -> str | None:
    """The role tag of a cell, or None when it has none (more than one is a validation error)."""
    roles = [tag for tag in cell.metadata.get("tags", []) if tag in ROLES]
    return roles[0] if len(roles) == 1 else None


def top_level_statements(source: str) -> list[ast.stmt]:
    """The top-level statements of a cell's code (none when it does not parse)."""
    try:
        return ast.parse(source).body
    except SyntaxError:
        return []


def defined_names(source: str) -> set[str]:
    """Names a cell defines at top level: functions, classes and assigned variables."""
    names: set[str] = set()
    for node in top_level_statements(source):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def package_functions(root: Path = ROOT) -> set[str]:
    """Names of the functions the attnbook package defines at the top level of its modules."""
    names: set[str] = set()
    for module in (root / "code" / "src" / "attnbook").glob("*.py"):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        names |= {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    return names


def package_references(source: str, forbidden: set[str], stub_names: set[str]) -> set[str]:
    """Which ``forbidden`` package functions the code of a cell uses in its own code.

    Counted: inside a function (or lambda), a global name, an attribute (``attnbook.softmax``) or a
    string constant (``getattr(attnbook, "softmax")``) equal to a forbidden name; at top level, an
    assignment to a name a stub defines (``my_softmax = softmax``) from such a name. Imports alone are
    not counted (the public checks import the reference to compare with), nor is obfuscated access.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    found: set[str] = set()

    def scan(node, local: set[str]) -> None:
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Load) and inner.id not in local:
                found.add(inner.id)
            elif isinstance(inner, ast.Attribute):
                found.add(inner.attr)
            elif isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                found.add(inner.value)

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            arguments = node.args
            local = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                     *filter(None, [arguments.vararg, arguments.kwarg])]}
            local |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            scan(node, local)
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in stub_names for t in targets) and node.value is not None:
                scan(node.value, set())
    return found & forbidden


def problems(notebook, name: str) -> list[str]:
    """Every way the instructor notebook breaks the conventions (empty when it is well formed)."""
    found: list[str] = []
    grade_ids: set[str] = set()
    cells = notebook.cells
    for index, cell in enumerate(cells):
        where = f"{name} cell {index}"
        tags = cell.metadata.get("tags", [])
        roles = [tag for tag in tags if tag in ROLES]
        if len(roles) != 1:
            found.append(f"{where} has role tags {roles}; expected exactly one of {', '.join(ROLES)}")
            continue
        cell_role = roles[0]
        if (cell.cell_type == "markdown") != (cell_role == "instructions"):
            found.append(f"{where} is a {cell.cell_type} cell tagged {cell_role}; "
                         "instructions are markdown, every other role is code")
        required = REQUIRED_BOOK_TAGS.get(cell_role)
        if required and required not in tags:
            found.append(f"{where} ({cell_role}) lacks the book tag {required}")
        if cell_role in TASK_ROLES and not cell.metadata.get("task"):
            found.append(f"{where} ({cell_role}) has no task in its metadata")
        if cell_role == "stub":
            following = cells[index + 1] if index + 1 < len(cells) else None
            if following is None or role(following) != "solution":
                found.append(f"{where} is a stub not directly followed by its solution")
            elif following.metadata.get("task") != cell.metadata.get("task"):
                found.append(f"{where}: the stub and the solution after it name different tasks")
            elif not defined_names(cell.source) or defined_names(cell.source) - defined_names(following.source):
                found.append(f"{where}: the stub defines {sorted(defined_names(cell.source))}; its solution must "
                             f"define them all, and defines {sorted(defined_names(following.source))}")
        if cell_role == "stub" and "reimplements" in cell.metadata:
            reimplements = cell.metadata["reimplements"]
            if not (isinstance(reimplements, list) and reimplements and all(isinstance(n, str) for n in reimplements)):
                found.append(f"{where}: reimplements must be a list of attnbook function names, got {reimplements!r}")
            else:
                unknown = sorted(set(reimplements) - package_functions())
                if unknown:
                    found.append(f"{where}: reimplements names {', '.join(unknown)}, not functions of attnbook")
                following = cells[index + 1] if index + 1 < len(cells) else None
                used = following is not None and package_references(
                    following.source, set(reimplements), defined_names(cell.source))
                if used:
                    found.append(f"{where}: the solution uses {', '.join(sorted(used))}, which its task "
                                 "asks students to write themselves")
        if cell_role == "solution" and (index == 0 or role(cells[index - 1]) != "stub"):
            found.append(f"{where} is a solution without a stub right before it")
        if cell_role == "hidden-test":
            grade_id, points = cell.metadata.get("grade_id"), cell.metadata.get("points")
            if not isinstance(grade_id, str) or not grade_id:
                found.append(f"{where} is a hidden test without a grade_id")
            elif grade_id in grade_ids:
                found.append(f"{where} repeats the grade_id {grade_id!r}")
            else:
                grade_ids.add(grade_id)
            if isinstance(points, bool) or not isinstance(points, (int, float)) or points <= 0:
                found.append(f"{where} is a hidden test whose points ({points!r}) are not a positive number")
    if not grade_ids:
        found.append(f"{name} has no hidden tests")
    return found


def load(homework: str | Path):
    """Read and validate an instructor source; returns ``(path, notebook)``."""
    import jupytext  # the instructor side only: submissions are plain .ipynb files

    path = resolve(homework)
    notebook = jupytext.read(path)
    found = problems(notebook, path.stem)
    if found:
        raise HomeworkError("\n".join(found))
    return path, notebook


def stable_id(name: str, index: int, source: str) -> str:
    return hashlib.sha1(f"{name}:{index}:{source}".encode()).hexdigest()[:8]


# --- student notebooks -------------------------------------------------------------------------------


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
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for homework in homeworks or homework_sources():
        notebook = student_notebook(homework)
        target = out / f"{resolve(homework).stem}.ipynb"
        nbformat.write(notebook, target)
        written.append(target)
    return written


# --- grading -----------------------------------------------------------------------------------------


def function_names(source: str) -> set[str]:
    """Names a cell defines with ``def`` at top level."""
    return {node.name for node in top_level_statements(source)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def grading_plan(homework: str | Path) -> dict:
    """What grading needs from the instructor source: tasks, the names their stubs define, hidden tests."""
    path, notebook = load(homework)
    tasks: list[str] = []
    names: dict[str, list[str]] = {}
    functions: set[str] = set()
    reimplements: dict[str, list[str]] = {}
    hidden = []
    for cell in notebook.cells:
        task = cell.metadata.get("task")
        if role(cell) == "stub":
            tasks.append(task)
            names[task] = sorted(defined_names(cell.source))
            functions |= function_names(cell.source)
            if cell.metadata.get("reimplements"):
                reimplements[task] = list(cell.metadata["reimplements"])
        elif role(cell) == "hidden-test":
            hidden.append({"grade_id": cell.metadata["grade_id"], "points": cell.metadata["points"],
                           "task": task, "source": cell.source})
    handout = [cell.source for cell in notebook.cells if role(cell) in ("setup", "public-check")]
    return {"homework": path.stem, "tasks": tasks, "names": names, "functions": sorted(functions),
            "reimplements": reimplements, "handout": handout, "hidden": hidden}


def read_submission(path: Path):
    """A submitted notebook as nbformat v4, or a HomeworkError saying why it cannot be graded."""
    try:
        notebook = nbformat.read(path, as_version=4)
    except nbformat.reader.NotJSONError:
        raise HomeworkError("not a valid notebook: the file is not valid JSON (cut off, or edited outside "
                            "Jupyter?)") from None
    except nbformat.ValidationError as error:
        message = _first_line(error, 200)
        raise HomeworkError(f"not a valid notebook: it does not follow nbformat 4 ({message})") from None
    except Exception as error:  # an unknown nbformat version, an unreadable file, JSON that is no notebook
        raise HomeworkError(f"not a valid notebook: {type(error).__name__}: {_first_line(error, 200)}") from None
    try:
        nbformat.validate(notebook)
    except Exception as error:
        message = _first_line(error, 200)
        raise HomeworkError(f"not a valid notebook: it does not follow nbformat 4 ({message})") from None
    return notebook


def _first_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _number(value) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


# --- nbgrader ----------------------------------------------------------------------------------------


def _solution_with_markers(stub: str, solution: str) -> str:
    """The solution with each part that differs from the stub between nbgrader's solution markers.

    nbgrader's ``generate_assignment`` replaces every marked region by its code stub, so the student
    still sees what the solution shares with the stub: signatures and docstrings.
    """
    import difflib

    stub_lines, solution_lines = stub.splitlines(), solution.splitlines()
    out: list[str] = []
    matcher = difflib.SequenceMatcher(a=stub_lines, b=solution_lines, autojunk=False)
    for operation, _, _, start, end in matcher.get_opcodes():
        region = solution_lines[start:end]
        if operation == "equal" or not any(line.strip() for line in region):
            out.extend(region)
            continue
        indent = min(len(line) - len(line.lstrip()) for line in region if line.strip())
        pad = " " * indent
        out.extend([f"{pad}### BEGIN SOLUTION", *region, f"{pad}### END SOLUTION"])
    return "\n".join(out)


def nbgrader_notebook(homework: str | Path):
    """The nbgrader source notebook: solution cells with markers, hidden tests, locked read-only cells."""
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
            text = _solution_with_markers(source.cells[index - 1].source, cell.source)
            new = nbformat.v4.new_code_cell(text, metadata=meta(f"{task}-solution", solution=True))
        elif cell_role == "hidden-test":
            grade_id = cell.metadata["grade_id"]
            points = cell.metadata["points"]
            worth = f"{_number(points)} point{'' if points == 1 else 's'}"
            text = (f"# Hidden tests: {grade_id} ({worth}), run when graded\n"
                    f"### BEGIN HIDDEN TESTS\n{cell.source}\n### END HIDDEN TESTS")
            new = nbformat.v4.new_code_cell(text, metadata=meta(grade_id, grade=True, locked=True,
                                                                points=cell.metadata["points"]))
        else:
            counters[cell_role] = counters.get(cell_role, 0) + 1
            grade_id = f"{cell_role}-{task + '-' if task else ''}{counters[cell_role]}"
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


# --- command line ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="validate the cell roles of the instructor sources")
    check.add_argument("homework", nargs="*")
    student = commands.add_parser("student", help="write the student notebooks")
    student.add_argument("homework", nargs="*")
    student.add_argument("--out", type=Path, default=STUDENT_DIR)
    grading = commands.add_parser("grade", help="grade a folder of submitted notebooks")
    grading.add_argument("homework")
    grading.add_argument("submissions", type=Path)
    grading.add_argument("out", type=Path)
    grading.add_argument("--timeout", type=float, default=10, help="seconds per cell and per call")
    grading.add_argument("--jobs", type=int, default=2, help="submissions graded in parallel")
    grading.add_argument("--deadline", type=float, default=180, help="seconds per submission")
    grading.add_argument("--unsafe-no-sandbox", action="store_true",
                         help="run submissions without the sandbox, with your rights (see the instructor guide)")
    export = commands.add_parser("nbgrader", help="write nbgrader source notebooks to OUT/source/")
    export.add_argument("out", type=Path)
    export.add_argument("homework", nargs="*")
    args = parser.parse_args(argv)

    try:
        if args.command == "check":
            for homework in args.homework or homework_sources():
                plan = grading_plan(homework)  # validates the source on the way
                points = sum(t["points"] for t in plan["hidden"])
                print(f"{plan['homework']}: {len(plan['tasks'])} tasks, {len(plan['hidden'])} hidden tests, "
                      f"{_number(points)} points")
        elif args.command == "student":
            for target in write_student_notebooks(args.out, args.homework):
                print(f"wrote {display_path(target)}")
        elif args.command == "grade":
            import grading as grader  # the sandbox and the grading workers: only this command needs them

            if args.unsafe_no_sandbox:
                print("homework: WARNING: --unsafe-no-sandbox: every submission runs as you, with your files "
                      "and environment in reach; it can change the grades", file=sys.stderr)
            start = time.perf_counter()
            results, skipped = grader.grade(args.homework, args.submissions, args.out, args.timeout, args.jobs,
                                            args.deadline, sandboxed=not args.unsafe_no_sandbox)
            seconds = time.perf_counter() - start
            for result in sorted(results, key=lambda r: r["student"]):
                print(_printable(f"{result['student']}: {_number(result['total'])} / "
                                 f"{_number(result['max_total'])}  {result['reason']}"))
            for relative, reason in skipped:
                print(_printable(f"skipped {relative}: {reason}"))
            print(f"graded {len(results)} submission(s) in {seconds:.1f} s: {display_path(args.out / 'grades.csv')}, "
                  f"feedback in {display_path(args.out / 'feedback')}"
                  + (f", {len(skipped)} file(s) skipped (skipped.csv)" if skipped else ""))
        elif args.command == "nbgrader":
            for target in write_nbgrader(args.out, args.homework):
                print(f"wrote {display_path(target)}")
    except HomeworkError as error:
        print(f"homework: {error}", file=sys.stderr)
        return 1
    return 0


def _printable(text: str) -> str:
    """A line for the terminal: control characters of file names and messages (escape codes) as ``?``."""
    return "".join("?" if ord(c) < 32 or 127 <= ord(c) < 160 else c for c in text)


if __name__ == "__main__":
    raise SystemExit(main())
