"""The tools package: importable as installed, one repository root, no sys.path edits, every extension loaded."""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import tools
from tools import ROOT

# the Python of the repository's own code outside the package: tools, tests, benchmarks
CHECKED = sorted(path for folder in ("tools", "tests", "benchmarks") for path in (ROOT / folder).rglob("*.py"))
IDS = [path.relative_to(ROOT).as_posix() for path in CHECKED]
DEFINES_ROOT = ROOT / "tools" / "__init__.py"


def dotted(node: ast.AST) -> str:
    """``sys.path.insert`` for the expression ``sys.path.insert``; "" for anything but names and attributes."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def sys_path_edits(tree: ast.AST) -> list[int]:
    """Lines that change the import path: sys.path's methods, assignments to it, site.addsitedir."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (dotted(node.func).startswith("sys.path.")
                                           or dotted(node.func) in ("site.addsitedir", "addsitedir")):
            lines.append(node.lineno)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if dotted(target.value if isinstance(target, ast.Subscript) else target) == "sys.path":
                    lines.append(node.lineno)
    return sorted(lines)


def derives_root_from_file(tree: ast.AST) -> list[int]:
    """Lines that climb above their own folder from ``__file__`` (``.parent.parent``, ``.parents[n]``)."""
    lines = []
    for node in ast.walk(tree):
        climbs = ((isinstance(node, ast.Attribute) and node.attr == "parent"
                   and isinstance(node.value, ast.Attribute) and node.value.attr == "parent")
                  or (isinstance(node, ast.Attribute) and node.attr == "parents"))
        if climbs and any(isinstance(n, ast.Name) and n.id == "__file__" for n in ast.walk(node)):
            lines.append(node.lineno)
    return sorted(set(lines))


def root_assignments(tree: ast.AST) -> list[int]:
    return [node.lineno for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AnnAssign))
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name) and target.id == "ROOT"]


@pytest.mark.parametrize("path", CHECKED, ids=IDS)
def test_no_file_edits_the_import_path(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert sys_path_edits(tree) == [], f"{path.name} edits sys.path: import from the installed package `tools`"


@pytest.mark.parametrize("path", CHECKED, ids=IDS)
def test_the_repository_root_is_defined_once(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    expected = [] if path != DEFINES_ROOT else root_assignments(tree)
    assert root_assignments(tree) == expected, f"{path.name} defines ROOT: use `from tools import ROOT`"
    if path != DEFINES_ROOT:
        assert derives_root_from_file(tree) == [], f"{path.name} finds the repository from __file__: use tools.ROOT"


def test_the_guards_see_what_they_guard():
    """The checks above catch the forms they forbid (and ``tools/__init__.py`` holds the one ROOT)."""
    edits = ast.parse("import sys, site\nsys.path.insert(0, 'x')\nsys.path = []\nsys.path[:0] = ['x']\n"
                      "sys.path += ['x']\nsite.addsitedir('x')\n")
    assert sys_path_edits(edits) == [2, 3, 4, 5, 6]
    assert sys_path_edits(ast.parse("import sys\nprint(sys.path)\n")) == []
    climbs = ast.parse("from pathlib import Path\nA = Path(__file__).parent.parent\nB = Path(__file__).parents[2]\n"
                       "C = Path(__file__).parent / 'data'\n")
    assert derives_root_from_file(climbs) == [2, 3]
    assert len(root_assignments(ast.parse(DEFINES_ROOT.read_text(encoding="utf-8")))) == 1
    assert DEFINES_ROOT in CHECKED and not (ROOT / "scripts").exists()


def test_tools_is_the_installed_package_of_this_repository(tmp_path):
    """`make venv` installs tools editable: it imports from any folder, as the one in this checkout."""
    found = subprocess.run([sys.executable, "-c", "import tools; print(tools.ROOT)"], cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(found) == ROOT == Path(tools.__file__).resolve().parent.parent
    assert (ROOT / "_config.yml").is_file()


def test_every_extension_module_is_loaded_by_the_book_build():
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    loaded = [name for name in config["sphinx"]["extra_extensions"] if name.startswith("tools.")]
    modules = sorted(f"tools.extensions.{path.stem}" for path in (ROOT / "tools" / "extensions").glob("*.py")
                     if path.stem != "__init__")
    assert sorted(loaded) == modules
    assert "local_extensions" not in config["sphinx"], "the extensions come from the installed package"
    for name in loaded:
        module = __import__(name, fromlist=["setup"])
        assert callable(module.setup), name


def tools_modules() -> dict[str, Path]:
    """Every module of the package ``tools``, by its dotted name."""
    modules = {}
    for path in sorted((ROOT / "tools").rglob("*.py")):
        parts = ("tools",) + path.relative_to(ROOT / "tools").with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def tools_imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The tools modules ``path`` imports anywhere in it (function bodies included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tools":
            found |= {f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                      for alias in node.names}
    return found - {"tools"}


def test_no_tools_module_imports_one_that_imports_it_back():
    modules = tools_modules()
    graph = {name: tools_imports(path, modules) - {name} for name, path in modules.items()}
    assert graph["tools.execute_notebooks"] >= {"tools.execution"}  # the search sees both kinds of import
    try:
        graphlib.TopologicalSorter(graph).static_order()
    except graphlib.CycleError as error:
        pytest.fail("tools modules that import each other round in a circle: " + " -> ".join(error.args[1]))


def test_the_book_runs_notebooks_in_one_way():
    """One executor: nothing but tools.execution starts a kernel or a process pool for notebooks."""
    starters = {name for name, path in tools_modules().items()
                if any(word in path.read_text(encoding="utf-8")
                       for word in ("NotebookClient(", "ProcessPoolExecutor(", "single_nb_execution"))}
    assert starters == {"tools.execution"}
