"""Every MyST notebook source has an executed .ipynb beside it that matches it cell for cell.

The .md is the source the book builds from; the .ipynb holds nbval's reference outputs. These tests fail
when someone edits one without regenerating the other (`make notebooks`).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import attnbook
import jupytext
import nbformat
import pytest

from tools import ROOT
from tools.execute_notebooks import stale_cells
from tools.execution import notebook_sources

SOURCES = notebook_sources()


def package_public_names() -> set[str]:
    """Every public name of attnbook and of each of its modules and subpackages' modules (their __all__)."""
    names = set(attnbook.__all__)
    for module in pkgutil.walk_packages(attnbook.__path__, prefix="attnbook."):
        names |= set(getattr(importlib.import_module(module.name), "__all__", []))
    return names
IDS = [p.relative_to(ROOT).as_posix() for p in SOURCES]


def test_the_model_chapter_is_a_paired_notebook_source():
    assert ROOT / "chapters" / "scaled_dot_product_attention.md" in SOURCES


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_source_has_executed_pair_with_identical_cells(source: Path):
    # identical: the same type, source and metadata the .md controls (tags, alt text, points, ...)
    problems = stale_cells(source)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_pair_keeps_nbvals_reference_and_no_picture(source: Path):
    """The repository carries sources: the pair keeps what strict nbval compares, no rendered picture (the builds
    draw them, tools/execution.py; tools/site_outputs.py's nbval_reference)."""
    from tools.site_outputs import PICTURES

    notebook = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    pictures = [index for index, cell in enumerate(notebook.cells) for output in cell.get("outputs", [])
                if any(key in output.get("data", {}) for key in PICTURES)]
    assert pictures == [], f"cells {pictures} of {source.with_suffix('.ipynb').name} store pictures: run `make notebooks`"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_pair_is_executed_without_run_to_run_noise(source: Path):
    notebook = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code, "a chapter notebook without code cells"
    counts = [c.execution_count for c in code]
    assert None not in counts, "some code cells were never executed: run `make notebooks`"
    assert counts == sorted(counts), "cells were executed out of order"
    assert "widgets" not in notebook.metadata, "widget state makes git noise: regenerate with `make notebooks`"
    for cell in code:
        assert "execution" not in cell.metadata, "timing metadata makes git noise"
        for output in cell.outputs:
            assert output.output_type != "error", f"an executed cell raised: {output.get('ename')}"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_notebook_imports_the_package_and_redefines_none_of_it(source: Path):
    notebook = jupytext.read(source)
    code = "\n".join(c.source for c in notebook.cells if c.cell_type == "code")
    tree = ast.parse("\n".join(l for l in code.splitlines() if not l.lstrip().startswith(("%", "!"))))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    # an import statement, not just the name (the install cell names the package in strings)
    assert any(m.split(".")[0] == "attnbook" for m in imported), f"{source.name} does not import the attnbook package"
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    clash = defined & package_public_names()
    assert not clash, f"{source.name} redefines package functions {sorted(clash)}: import them instead"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_every_figure_has_alt_text(source: Path):
    notebook = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        # a matplotlib figure's output: its picture (the pair keeps none) and its text, "<Figure size ... Axes>"
        has_image = any("image/png" in o.get("data", {}) or str(o.get("data", {}).get("text/plain", "")).startswith(
            "<Figure size") for o in cell.outputs)
        if has_image:
            alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")
            assert len(alt.strip()) > 20, f"cell {index} of {source.name} draws a figure without alt text"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_every_ignored_output_is_justified(source: Path):
    notebook = jupytext.read(source)
    for index, cell in enumerate(notebook.cells):
        first_line = (cell.source.lstrip().splitlines() or [""])[0]
        if first_line.startswith("# nbval-ignore-output:"):
            assert "nbval-ignore-output" in cell.metadata.get("tags", []), (
                f"cell {index} of {source.name} explains why nbval should ignore its output but lacks the tag"
            )
        if "nbval-ignore-output" in cell.metadata.get("tags", []):
            first = cell.source.lstrip().splitlines()[0]
            assert re.match(r"#\s*nbval-ignore-output:\s*\S", first), (
                f"cell {index} of {source.name} skips nbval's output check without a "
                "'# nbval-ignore-output: <reason>' comment"
            )
