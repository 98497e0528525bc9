"""Lines of the package per folder, and how many of them are docstrings.

``python -m tools.package_lines [--base REV]`` prints, for each folder of ``code/src/attnbook`` (its own
modules, not its subfolders'), the number of modules, lines, docstring lines (the lines spanned by the
docstrings of modules, classes and functions, found with :mod:`ast`) and their share, then the total.
With ``--base REV`` it first prints the figures at that git revision. ``make package-lines`` runs it
(``BASE=rev``): printed figures, not a test (issue #26: docstrings say each thing once).
"""

from __future__ import annotations

import argparse
import ast
import subprocess
from collections.abc import Iterable
from pathlib import Path

from tools import ROOT, file_at_revision

__all__ = ["docstring_lines", "folder_figures"]

PACKAGE = Path("code/src/attnbook")


def docstring_lines(source: str) -> int:
    """The number of lines of ``source`` that module, class and function docstrings span."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return len(lines)


def folder_figures(files: Iterable[tuple[str, str]]) -> dict[str, tuple[int, int, int]]:
    """``{folder: (modules, lines, docstring lines)}`` of ``(path relative to the package, source)`` pairs."""
    figures: dict[str, list[int]] = {}
    for path, source in files:
        parent = Path(path).parent.as_posix()
        folder = "attnbook" if parent == "." else parent
        row = figures.setdefault(folder, [0, 0, 0])
        row[0] += 1
        row[1] += len(source.splitlines())
        row[2] += docstring_lines(source)
    return {folder: tuple(row) for folder, row in sorted(figures.items(), key=lambda item: item[0] != "attnbook")}


def _working_tree() -> list[tuple[str, str]]:
    root = ROOT / PACKAGE
    return [(path.relative_to(root).as_posix(), path.read_text()) for path in sorted(root.rglob("*.py"))]


def _revision(rev: str) -> list[tuple[str, str]]:
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, str(PACKAGE)], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    return [(Path(name).relative_to(PACKAGE).as_posix(), file_at_revision(name, rev))
            for name in names if name.endswith(".py")]


def _table(figures: dict[str, tuple[int, int, int]]) -> list[str]:
    rows = [f"{'folder':<20}{'modules':>8}{'lines':>8}{'docstring':>10}{'share':>7}"]
    totals = [0, 0, 0]
    for folder, (modules, lines, docs) in figures.items():
        rows.append(f"{folder + '/':<20}{modules:>8}{lines:>8}{docs:>10}{docs / lines:>7.0%}")
        totals = [a + b for a, b in zip(totals, (modules, lines, docs))]
    rows.append(f"{'all':<20}{totals[0]:>8}{totals[1]:>8}{totals[2]:>10}{totals[2] / totals[1]:>7.0%}")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="a git revision to print the figures of too")
    args = parser.parse_args(argv)
    if args.base:
        print(f"at {args.base}:")
        print("\n".join(_table(folder_figures(_revision(args.base)))))
        print("\nnow:")
    print("\n".join(_table(folder_figures(_working_tree()))))


if __name__ == "__main__":
    main()
