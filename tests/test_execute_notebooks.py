"""Tests of scripts/execute_notebooks.py: a failing cell is located in its .md."""

from __future__ import annotations

from pathlib import Path

import jupytext
import pytest

import execute_notebooks
from execute_notebooks import NotebookCellFailed, execute

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

def code_cell_lines(text: str) -> list[int]:
    """1-based line numbers of the ```{code-cell} fences of a MyST notebook."""
    return [i + 1 for i, line in enumerate(text.splitlines()) if line.startswith("```{code-cell}")]


def test_a_failing_cell_is_named_by_file_code_cell_number_and_line(tmp_path: Path):
    source = tmp_path / "broken.md"
    source.write_text(FAILING, encoding="utf-8")
    with pytest.raises(NotebookCellFailed) as failure:
        execute(source)
    message = str(failure.value)
    assert f"{source}, code cell 2 (line {code_cell_lines(FAILING)[1]})" in message
    assert "ValueError" in message and "the second code cell fails" in message
    assert not source.with_suffix(".ipynb").exists(), "a failed execution wrote a notebook"


def test_the_script_reports_where_a_cell_failed_and_exits_with_an_error(tmp_path: Path, capsys):
    source = tmp_path / "broken.md"
    source.write_text(FAILING, encoding="utf-8")
    assert execute_notebooks.main([str(source)]) == 1
    assert f"{source}, code cell 2 (line {code_cell_lines(FAILING)[1]})" in capsys.readouterr().err
