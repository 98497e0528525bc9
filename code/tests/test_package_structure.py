"""Tests of the package's shape: arguments are validated once, at the public boundary; no module imports
another module's private names; unchecked kernels are marked; the version comes from the metadata."""

import ast
import graphlib
import importlib
import importlib.metadata
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import attnbook
from attnbook import (
    decoder_layer,
    encoder_layer,
    init_decoder_layer,
    init_encoder_layer,
    init_multi_head_weights,
    multi_head_attention,
    padding_mask,
    scaled_dot_product_attention,
)

PACKAGE = Path(attnbook.__file__).parent
MODULES = sorted(PACKAGE.rglob("*.py"))


X = np.random.default_rng(0).standard_normal((2, 5, 8))  # (batch, n, d_model)


def _callers(entries) -> set[tuple[str, str]]:
    """The (file, function) that called into attnbook.validation, aside from the test's own call of a public function
    and the reading of a weight NamedTuple's annotations (``Array[...]``, evaluated once per type)."""
    return {entry for entry in entries if entry[0] not in (Path(__file__).name, "<string>")}


def _only_checks(entries) -> list[str]:
    """The callers into validation that are not a check (an ``_..._arguments`` spec or a ``check_...``): bodies."""
    return sorted(f"{module}:{name}" for module, name in _callers(entries)
                  if not (name.startswith("check_") or (name.startswith("_") and name.endswith("_arguments"))))


def test_a_decoder_layer_checks_its_arguments_once_at_its_boundary(validation_entries):
    weights, memory_mask = init_decoder_layer(8, 16, seed=0), padding_mask([5, 3])
    entries = validation_entries(lambda: decoder_layer(X, X, weights, 2, memory_mask=memory_mask))
    # the boundary runs the check beside decoder_layer (and the checks of heads and masks it calls), once;
    # the body calls its two attentions, three norms and the feed-forward network unchecked
    assert not _only_checks(entries)
    assert ("transformer.py", "_decoder_arguments") in entries
    assert entries[(Path(__file__).name, "<lambda>")] == 1  # the one public call: its boundary


def test_an_encoder_layer_checks_its_arguments_once_at_its_boundary(validation_entries):
    weights = init_encoder_layer(8, 16, seed=0)
    entries = validation_entries(lambda: encoder_layer(X, weights, 2))
    assert not _only_checks(entries) and ("transformer.py", "_encoder_arguments") in entries


def test_multi_head_attention_checks_its_arguments_once_at_its_boundary(validation_entries):
    weights = init_multi_head_weights(8, seed=0)
    entries = validation_entries(lambda: multi_head_attention(X, X, X, weights, 2))
    assert not _only_checks(entries) and ("multihead.py", "_multi_head_arguments") in entries


def test_the_reference_attention_checks_in_one_call(validation_entries):
    entries = validation_entries(lambda: scaled_dot_product_attention(X, X, X))
    assert {module for module, _ in _callers(entries)} == {"attention.py"}  # check_attention_inputs


def test_every_public_function_of_the_core_with_a_body_others_call_has_its_boundary_and_its_unchecked_body():
    bodies = [attnbook.scaled_dot_product_attention, attnbook.self_attention, attnbook.multi_head_attention,
              attnbook.split_heads, attnbook.merge_heads, attnbook.layer_norm, attnbook.feed_forward,
              attnbook.encoder_layer, attnbook.decoder_layer, attnbook.rms_norm, attnbook.swiglu_feed_forward,
              attnbook.decoder_block]
    for public in bodies:
        assert public.unchecked is public.__wrapped__ and callable(public.check), public.__name__
        assert public.__module__ == public.unchecked.__module__ and public.__globals__ is public.unchecked.__globals__


def _imports_of(path: Path):
    """(module it imports from, name) for every ``from ... import`` of attnbook's modules in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = ".".join(("attnbook",) + path.relative_to(PACKAGE).parent.parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source == "attnbook" or source.startswith("attnbook."):
                for alias in node.names:
                    yield source, alias.name


def test_no_module_imports_a_private_name_of_another_attnbook_module():
    private = [f"{path.relative_to(PACKAGE)}: from {source} import {name}"
               for path in MODULES for source, name in _imports_of(path) if name.startswith("_")]
    assert not private, "private names imported across modules:\n" + "\n".join(private)


def test_the_ast_walk_sees_relative_imports_of_subpackages():
    found = set(_imports_of(PACKAGE / "efficient" / "tiled.py"))
    assert ("attnbook.attention", "check_attention_inputs") in found
    assert ("attnbook.efficient.online_softmax", "fold") in found


def _modules():
    yield attnbook
    for info in pkgutil.walk_packages(attnbook.__path__, "attnbook."):
        yield importlib.import_module(info.name)


def test_names_imported_across_modules_are_public_or_marked_unchecked_kernels():
    # a name another module imports is either in its module's __all__ or an unchecked kernel
    modules = {module.__name__: module for module in _modules()}
    unmarked = []
    for path in MODULES:
        for source, name in _imports_of(path):
            module = modules.get(source)
            if (module is None or f"{source}.{name}" in modules or name in getattr(module, "__all__", ())
                    or isinstance(getattr(module, name), type)):  # a submodule, a public name, a class
                continue
            doc = getattr(getattr(module, name), "__doc__", "") or ""
            if not doc.startswith("Unchecked kernel"):
                unmarked.append(f"{source}.{name}, imported by {path.relative_to(PACKAGE)}")
    assert not unmarked, "neither public nor marked 'Unchecked kernel:':\n" + "\n".join(unmarked)


def test_unchecked_kernels_are_not_exported():
    for module in _modules():
        for name in getattr(module, "__all__", ()):
            doc = getattr(getattr(module, name), "__doc__", "") or ""
            assert not doc.startswith("Unchecked kernel"), f"{module.__name__}.{name} is exported"


def test_the_version_comes_from_the_package_metadata():
    assert attnbook.__version__ == importlib.metadata.version("attnbook")


@pytest.mark.parametrize("name", attnbook.__all__)
def test_every_exported_name_is_importable_from_the_package(name):
    assert getattr(attnbook, name) is not None


# --- the layout: tiers as folders, dependencies one way ---------------------------------------------------

def _module_name(path: Path) -> str:
    """``attnbook.measure.counts`` for ``measure/counts.py``, ``attnbook.measure`` for ``measure/__init__.py``."""
    parts = ("attnbook",) + path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


NAMES = {_module_name(path): path for path in MODULES}
CORE = {name for name, path in NAMES.items() if path.parent == PACKAGE and path.name != "__init__.py"}
FACADE = "attnbook"
# the companion modules whose names the package itself re-exports, because the chapters import them from it
# figures.languages: importing the package in a kernel of the book's builds installs the figures' translations
FACADE_COMPANIONS = {"attnbook.figures.plotting", "attnbook.figures.languages", "attnbook.measure.parameters",
                     "attnbook.measure.probes"}
# companions a companion may not import (the homework checks, the figures, the book's machinery), and the
# documented exceptions: {(importer, imported): why}
LEAVES = ("attnbook.homework", "attnbook.figures", "attnbook.book")
LEAF_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("attnbook.book.static_widgets", "attnbook.figures.languages"):
        "a static page is written in each language the book's figures are drawn in",
}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _imported_modules(path: Path) -> set[str]:
    """The attnbook modules ``path`` imports, anywhere in it (functions included): ``from .x import y`` is
    module ``x`` unless ``y`` is itself a module."""
    found = set()
    for source, name in _imports_of(path):
        found.add(f"{source}.{name}" if f"{source}.{name}" in NAMES else source)
    tree = ast.parse(path.read_text(), filename=str(path))
    found |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
              if alias.name.split(".")[0] == "attnbook"}
    return found


GRAPH = {name: _imported_modules(path) - {name} for name, path in NAMES.items()}


def test_no_module_imports_one_that_imports_it_back():
    try:
        graphlib.TopologicalSorter(GRAPH).static_order()
    except graphlib.CycleError as error:
        pytest.fail("modules that import each other round in a circle: " + " -> ".join(error.args[1]))


def test_the_core_is_the_top_level_and_imports_no_companion():
    assert CORE == {f"attnbook.{name}" for name in ("validation", "softmax", "attention", "masks", "multihead",
                                                    "positional", "recurrent", "transformer", "modern")}
    leaks = [f"{name} imports {imported}" for name in sorted(CORE) for imported in sorted(GRAPH[name])
             if imported not in CORE]
    assert not leaks, "the core imports companions:\n" + "\n".join(leaks)


def test_the_package_reexports_only_the_core_and_the_named_companions():
    assert GRAPH[FACADE] <= CORE | FACADE_COMPANIONS, sorted(GRAPH[FACADE] - CORE - FACADE_COMPANIONS)


def test_no_module_imports_the_package_itself():
    # `from attnbook import x` inside the package would make the package's __init__ a module in the middle
    importers = sorted(name for name, imported in GRAPH.items() if FACADE in imported)
    assert not importers, f"modules importing the package's __init__: {importers}"


def test_efficient_attention_imports_nothing_of_learning():
    leaks = [f"{name} imports {imported}" for name in sorted(GRAPH) if _within(name, "attnbook.efficient")
             for imported in sorted(GRAPH[name]) if _within(imported, "attnbook.learning")]
    assert not leaks, "\n".join(leaks)


def test_no_companion_imports_the_homework_the_figures_or_the_book_but_their_own_modules():
    leaks = [f"{name} imports {imported}" for name in sorted(GRAPH) for imported in sorted(GRAPH[name])
             for leaf in LEAVES if _within(imported, leaf) and not _within(name, leaf) and name != FACADE
             and (name, imported) not in LEAF_EXCEPTIONS]
    assert not leaks, "\n".join(leaks)


def test_importing_the_package_imports_no_homework():
    code = "import sys, attnbook; print(sorted(m for m in sys.modules if m.startswith('attnbook.homework')))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"


# --- code/README.md: every module, in its folder's table, with its lines --------------------------------------

README = PACKAGE.parents[2] / "code" / "README.md"


def _folder(module: str) -> str:
    """The folder of a module as the README's headings name it: ``attnbook/``, ``measure/``, ``learning/models/``."""
    path = NAMES["attnbook." + module if module != "attnbook" else module]
    folder = path.parent.relative_to(PACKAGE)
    return "attnbook/" if folder == Path(".") else folder.as_posix() + "/"


def _readme_rows() -> list[tuple[str, str, list[str]]]:
    """(folder named by the heading above, module, cells) for every row of code/README.md's module tables."""
    rows, in_table, heading = [], False, ""
    for line in README.read_text().splitlines():
        if line.startswith("#"):
            quoted = re.findall(r"`([\w/]+/)`", line)
            heading = quoted[-1] if quoted else ""
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells is None:
            in_table = False
        elif cells[0] == "module":
            in_table = True
        elif in_table and not set(cells[0]) <= set("-: "):
            rows.append((heading, cells[0].strip("`"), cells))
    return rows


def _readme_modules() -> list[str]:
    return [module for _, module, _ in _readme_rows()]


def test_code_readme_has_a_row_for_every_module_and_no_other():
    walked = {"attnbook"} | {info.name.removeprefix("attnbook.")
                             for info in pkgutil.walk_packages(attnbook.__path__, "attnbook.")}
    listed = _readme_modules()
    assert len(listed) == len(set(listed)), f"modules listed twice in code/README.md: {listed}"
    assert not walked - set(listed), f"modules missing from code/README.md's tables: {sorted(walked - set(listed))}"
    assert not set(listed) - walked, f"code/README.md lists modules that do not exist: {sorted(set(listed) - walked)}"


def test_code_readme_lists_each_module_under_its_folder_with_its_lines():
    wrong = []
    for heading, module, cells in _readme_rows():
        path = NAMES["attnbook." + module if module != "attnbook" else module]
        if heading != _folder(module):
            wrong.append(f"{module} is under the heading of `{heading}`, but lives in `{_folder(module)}`")
        lines = len(path.read_text().splitlines())
        if cells[-1] != str(lines):
            wrong.append(f"{module} has {lines} lines, the README says {cells[-1]}")
    assert not wrong, "code/README.md is out of date:\n" + "\n".join(wrong)


def test_code_readme_sums_each_folder():
    summary = {}
    for line in README.read_text().split("<!-- layout -->")[1].split("###")[0].splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `"):
            summary[cells[0].strip("`")] = (int(cells[-2]), int(cells[-1]))
    folders = {}
    for name, path in NAMES.items():
        folder = _folder(name.removeprefix("attnbook.") if name != FACADE else name)
        count, lines = folders.get(folder, (0, 0))
        folders[folder] = (count + 1, lines + len(path.read_text().splitlines()))
    assert summary == folders


def test_the_readme_rows_are_read_from_every_table():
    listed = _readme_modules()
    assert {"attnbook", "validation", "efficient.tiled", "book.prose", "homework.compare"} <= set(listed)
