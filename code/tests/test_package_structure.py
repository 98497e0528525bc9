"""Tests of the package's shape: arguments are validated once, at the public boundary; no module imports
another module's private names; unchecked kernels are marked; the version comes from the metadata."""

import ast
import importlib
import importlib.metadata
import pkgutil
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


def test_a_decoder_layer_validates_its_arguments_once_at_its_boundary(validation_entries):
    weights, memory_mask = init_decoder_layer(8, 16, seed=0), padding_mask([5, 3])
    entries = validation_entries(lambda: decoder_layer(X, X, weights, 2, memory_mask=memory_mask))
    # the boundary only: y and memory (2 as_float_array, 2 check_min_ndim), the 26 arrays of the weights
    # (two attentions of 8, a feed-forward network of 4, three norms of 2), n_heads, the mask, the batches;
    # nothing from multihead.py, attention.py or softmax.py
    assert set(entries) == {("transformer.py", "check_decoder_layer_inputs"), ("transformer.py", "_check_layer_weights"),
                            ("transformer.py", "check")}
    assert sum(entries.values()) == 2 + 2 + 26 + 1 + 1 + 1


def test_an_encoder_layer_validates_its_arguments_once_at_its_boundary(validation_entries):
    weights = init_encoder_layer(8, 16, seed=0)
    entries = validation_entries(lambda: encoder_layer(X, weights, 2))
    # x (as_float_array, check_min_ndim), the 16 arrays of the weights, n_heads, the batches
    assert {module for module, _ in entries} == {"transformer.py"}
    assert sum(entries.values()) == 2 + 16 + 1 + 1


def test_multi_head_attention_validates_its_arguments_once_at_its_boundary(validation_entries):
    weights = init_multi_head_weights(8, seed=0)
    entries = validation_entries(lambda: multi_head_attention(X, X, X, weights, 2))
    # query, key, value (as_float_array, check_min_ndim each), the 8 arrays of the weights, n_heads, the batches
    assert {module for module, _ in entries} == {"multihead.py"}
    assert sum(entries.values()) == 6 + 8 + 1 + 1


def test_the_reference_attention_validates_in_one_call(validation_entries):
    entries = validation_entries(lambda: scaled_dot_product_attention(X, X, X))
    assert entries == {("attention.py", "scaled_dot_product_attention"): 1}


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
    assert ("attnbook.validation", "check_attention_inputs") in found
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
            if module is None or name in getattr(module, "__all__", ()) or isinstance(getattr(module, name), type):
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


README = PACKAGE.parents[2] / "code" / "README.md"


def _readme_modules() -> list[str]:
    """The first cell of every row of code/README.md's module tables (``| module | holds | ...``), unquoted."""
    names, in_table = [], False
    for line in README.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells is None:
            in_table = False
        elif cells[0] == "module":
            in_table = True
        elif in_table and not set(cells[0]) <= set("-: "):
            names.append(cells[0].strip("`"))
    return names


def test_code_readme_has_a_row_for_every_module_and_no_other():
    walked = {"attnbook"} | {info.name.removeprefix("attnbook.")
                             for info in pkgutil.walk_packages(attnbook.__path__, "attnbook.")}
    listed = _readme_modules()
    assert len(listed) == len(set(listed)), f"modules listed twice in code/README.md: {listed}"
    assert not walked - set(listed), f"modules missing from code/README.md's tables: {sorted(walked - set(listed))}"
    assert not set(listed) - walked, f"code/README.md lists modules that do not exist: {sorted(set(listed) - walked)}"


def test_the_readme_rows_are_read_from_both_tables():
    listed = _readme_modules()
    assert {"attnbook", "validation", "efficient.tiled", "book.prose"} <= set(listed)
