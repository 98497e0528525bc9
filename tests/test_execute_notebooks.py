"""Tests of tools/execute_notebooks.py: a failing cell is located in its .md, and a pair is stale
when a cell's source or the metadata the .md controls (tags, alt text, points) differs."""

from __future__ import annotations

from pathlib import Path

import jupytext
import pytest

from tools import execute_notebooks
from tools.execute_notebooks import stale_cells
from tools.execution import NotebookCellFailed, execute

FRONT_MATTER = """---
jupytext:
  formats: md:myst,ipynb
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""

FAILING = FRONT_MATTER + """
# A notebook whose second code cell fails

```{code-cell} ipython3
x = 1
```

Some prose between the cells.

```{code-cell} ipython3
:tags: [remove-input]

raise ValueError("the second code cell fails")
```

```{code-cell} ipython3
x + 1
```
"""

PAIRED = FRONT_MATTER + """
# A small paired notebook

```{code-cell} ipython3
:tags: [hide-input]
:points: 2

value = 1
```

```{code-cell} ipython3
---
mystnb:
  image:
    alt: A line that rises from the lower left to the upper right of the axes.
---
print(value)
```
"""


def code_cell_lines(text: str) -> list[int]:
    """1-based line numbers of the ```{code-cell} fences of a MyST notebook."""
    return [i + 1 for i, line in enumerate(text.splitlines()) if line.startswith("```{code-cell}")]


def test_a_failing_cell_is_named_by_file_code_cell_number_and_line(tmp_path: Path):
    source = tmp_path / "broken.md"
    source.write_text(FAILING, encoding="utf-8")
    with pytest.raises(NotebookCellFailed) as failure:
        execute(source, write_pair=True)
    message = str(failure.value)
    assert f"{source}, code cell 2 (line {code_cell_lines(FAILING)[1]})" in message
    assert "ValueError" in message and "the second code cell fails" in message
    assert not source.with_suffix(".ipynb").exists(), "a failed execution wrote a notebook"


def test_the_script_reports_where_a_cell_failed_and_exits_with_an_error(tmp_path: Path, capsys):
    source = tmp_path / "broken.md"
    source.write_text(FAILING, encoding="utf-8")
    assert execute_notebooks.main([str(source)]) == 1
    assert f"{source}, code cell 2 (line {code_cell_lines(FAILING)[1]})" in capsys.readouterr().err


def write_pair(tmp_path: Path, text: str = PAIRED) -> Path:
    """A .md and an .ipynb written from it by jupytext (unexecuted: the pairing check ignores outputs)."""
    source = tmp_path / "small.md"
    source.write_text(text, encoding="utf-8")
    jupytext.write(jupytext.read(source), source.with_suffix(".ipynb"), fmt="ipynb")
    return source


def test_help_prints_the_usage_and_executes_nothing(capsys):
    with pytest.raises(SystemExit) as exit:
        execute_notebooks.main(["--help"])
    assert exit.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m tools.execute_notebooks") and "chapters/x.md" in out
    assert "executing" not in out


def test_an_unknown_option_is_a_usage_error_not_a_file(capsys):
    with pytest.raises(SystemExit) as exit:
        execute_notebooks.main(["--all"])
    assert exit.value.code == 2
    assert "unrecognized arguments: --all" in capsys.readouterr().err


def test_a_pair_written_from_its_source_is_fresh(tmp_path: Path):
    assert stale_cells(write_pair(tmp_path)) == []


def test_run_metadata_in_the_notebook_does_not_make_a_pair_stale(tmp_path: Path):
    source = write_pair(tmp_path)
    notebook = jupytext.read(source.with_suffix(".ipynb"))
    notebook.cells[2].metadata.update(
        execution={"iopub.status.busy": "2026-01-01T00:00:00Z"}, scrolled=True, collapsed=False)
    jupytext.write(notebook, source.with_suffix(".ipynb"), fmt="ipynb")
    assert stale_cells(source) == []


@pytest.mark.parametrize("old, new", [
    ("value = 1", "value = 2"),  # source
    ("alt: A line that rises", "alt: A line that falls"),  # alt text
    (":points: 2", ":points: 3"),  # points
    (":tags: [hide-input]", ":tags: [hide-input, remove-output]"),  # tags
], ids=["source", "alt text", "points", "tags"])
def test_a_change_of_source_or_of_cell_metadata_in_the_md_makes_the_pair_stale(tmp_path: Path, old, new):
    source = write_pair(tmp_path)
    assert old in PAIRED
    source.write_text(PAIRED.replace(old, new), encoding="utf-8")
    problems = stale_cells(source)
    assert len(problems) == 1, problems
    index = 2 if old.startswith("alt") else 1
    assert problems[0].startswith(f"cell {index} of small.md differs from small.ipynb")
