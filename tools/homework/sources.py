"""Reading and validating a homework's instructor source, ``exercises/hw_*.md``.

Each homework is one MyST notebook source whose cells carry exactly one role tag (:data:`ROLES`);
:func:`problems` lists every way a source breaks the conventions (tools.homework says what they are)
and :func:`load` reads a source and refuses one with problems. The student version
(tools.homework.student), the nbgrader export (tools.homework.nbgrader_export) and grading
(tools.homework.grading) all start from :func:`load`.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

from tools import ROOT

EXERCISES = ROOT / "exercises"

ROLES = ("instructions", "setup", "stub", "solution", "public-check", "hidden-test")
TASK_ROLES = ("stub", "solution", "public-check", "hidden-test")
BOOK_TAGS = ("remove-cell", "remove-input", "remove-output", "hide-input", "hide-output", "hide-cell")
REQUIRED_BOOK_TAGS = {"stub": "remove-cell", "solution": "hide-input", "hidden-test": "remove-cell"}


class HomeworkError(Exception):
    """A homework source breaks the conventions, or a submission cannot be read; the message says how."""



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


def verdict_names(source: str) -> list[str]:
    """The names a public check keeps its verdicts in (``verdict``, ``verdict_w2``), in the order it sets them.

    The nbgrader export's visible test asserts that every one of them passed."""
    return list(dict.fromkeys(name for node in top_level_statements(source) if isinstance(node, ast.Assign)
                              for target in node.targets for name in [getattr(target, "id", "")]
                              if name == "verdict" or name.startswith("verdict_")))


@functools.cache
def package_functions(root: Path = ROOT) -> frozenset[str]:
    """Names of the functions the attnbook package defines at the top level of its modules.

    Parsed once per process (every :func:`load` validates against them).
    """
    names: set[str] = set()
    for module in (root / "code" / "src" / "attnbook").rglob("*.py"):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        names |= {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    return frozenset(names)


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
        if cell_role == "public-check" and not verdict_names(cell.source):
            found.append(f"{where} (public-check) keeps no verdict: assign each check's result to verdict or "
                         "verdict_<name> (the nbgrader export asserts them)")
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
    """A cell id that depends only on the homework, the cell's place and its source (no git noise)."""
    return hashlib.sha1(f"{name}:{index}:{source}".encode()).hexdigest()[:8]



def function_names(source: str) -> set[str]:
    """Names a cell defines with ``def`` at top level."""
    return {node.name for node in top_level_statements(source)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}



def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line (runs of white space as one space), cut to ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def format_number(value) -> str:
    """Points as people write them: ``3`` for 3.0, ``2.5`` for 2.5."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
