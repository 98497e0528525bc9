"""Tests of tools/execution.py and tools/site_outputs.py: one execution of each notebook serves the website,
the PDF and `make notebooks`, through jupyter-cache entries stored under the key myst-nb looks them up by;
the paired .ipynb keeps only nbval's reference (no picture), and a build executes what its cache lacks."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jupytext
import nbformat
import pytest

from tools import execution
from tools.execution import execute, notebook_sources

NOTEBOOK = """---
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

# A small notebook

```{code-cell} ipython3
:tags: [hide-input]

import os
from attnbook.book.prose import glue_number
value = 6 * 7
glue_number("third", 1 / 3)
```

Prose between the cells.

```{code-cell} ipython3
---
mystnb:
  image:
    alt: Nothing is drawn.
---
print(value, os.environ.get("ATTNBOOK_STATIC_FIGURES"))
```
"""


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The execution cache and its package stamp in a temporary folder, never the book's."""
    monkeypatch.setattr(execution, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(execution, "STAMP", tmp_path / "package-hash")
    monkeypatch.setattr(execution, "GLUE_RECORDS", tmp_path / "glue-records")
    return tmp_path / "cache"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "small.md"
    path.write_text(NOTEBOOK, encoding="utf-8")
    return path


@pytest.mark.parametrize("book_source", notebook_sources(), ids=lambda p: p.name)
def test_jupytext_and_myst_nb_read_the_same_code_cells_from_every_source(book_source: Path):
    """`make notebooks` runs jupytext's reading; the cache is keyed on myst-nb's: they must agree."""
    ours = [c.source.strip() for c in execution.read_as_myst_nb(book_source).cells if c.cell_type == "code"]
    theirs = [c.source.strip() for c in jupytext.read(book_source).cells if c.cell_type == "code"]
    assert ours == theirs


def test_fill_cache_executes_what_is_missing_once_with_the_static_figures_on(cache_dir, source):
    assert execution.fill_cache([source], jobs=1)[0] == 1
    cache = execution.open_cache()
    assert execution.is_cached(cache, execution.read_as_myst_nb(source))
    _, merged = cache.merge_match_into_notebook(execution.read_as_myst_nb(source))
    printed = [o["text"] for c in merged.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "stream"]
    assert printed == ["42 1\n"]  # the kernel ran with ATTNBOOK_STATIC_FIGURES=1, as the book's builds
    assert execution.fill_cache([source], jobs=1) == (0, 0.0)  # found: not executed again
    assert len(execution.cached_sources()) == 1


def test_a_failing_notebook_fails_the_fill_and_names_the_source(cache_dir, tmp_path):
    failing = tmp_path / "failing.md"
    failing.write_text(NOTEBOOK.replace("value = 6 * 7", "raise ValueError('no value')"), encoding="utf-8")
    with pytest.raises(RuntimeError, match=r"failing.md, code cell 1 \(line 15\) failed") as failure:
        execution.fill_cache([failing], jobs=1)
    assert "no value" in str(failure.value)
    assert execution.cached_sources() == set()
    assert not execution.GLUE_RECORDS.exists() or list(execution.GLUE_RECORDS.iterdir()) == [], \
        "a failed run left a glue record"


def record_of(source: Path) -> list[dict]:
    return [json.loads(line) for line in execution.glue_record_path(source).read_text(encoding="utf-8").splitlines()]


def test_the_builds_run_records_each_glued_value_unrounded_for_the_stability_test(cache_dir, source):
    execution.fill_cache([source], jobs=1)
    assert record_of(source) == [{"name": "third", "value": 1 / 3, "digits": 6, "via": "glue_number"}]
    assert [p.name for p in execution.GLUE_RECORDS.iterdir()] == [execution.glue_record_path(source).name]


def test_a_record_belongs_to_one_version_of_its_source_and_is_replaced_by_the_next(cache_dir, source):
    execute(source, write_pair=True)
    first = execution.glue_record_path(source)
    source.write_text(NOTEBOOK.replace("1 / 3", "2 / 3"), encoding="utf-8")
    assert execution.glue_record_path(source) != first, "an edited source must not find the old record"
    execute(source, write_pair=True)
    assert record_of(source)[0]["value"] == 2 / 3
    assert not first.exists(), "the record of the older version was left behind"


def test_make_notebooks_keeps_its_run_for_the_book(cache_dir, source):
    """The run that writes the .ipynb is the one the book takes here: fill_cache then executes nothing."""
    execute(source, write_pair=True)
    assert execution.fill_cache([source], jobs=1) == (0, 0.0)
    assert execution.is_cached(execution.open_cache(), execution.read_as_myst_nb(source))
    stored = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    assert [o["text"] for o in stored.cells[-1].outputs] == ["42 1\n"]
    assert record_of(source) == [{"name": "third", "value": 1 / 3, "digits": 6, "via": "glue_number"}], \
        "the run's glue record must be in place for nbval's check of the glued values"


FIGURE_CELL = """
```{code-cell} ipython3
import ipywidgets as widgets
import matplotlib.pyplot as plt
from attnbook import figure_to_img_html
from attnbook.book.static_widgets import control_from_widget, with_static_page

slider = widgets.IntSlider(value=1, min=1, max=2, description="lines")
picture = widgets.HTML()

def render(lines):
    fig, ax = plt.subplots(figsize=(1, 1))
    for k in range(lines):
        ax.plot([0, 1], [k, k])
    return figure_to_img_html(fig, f"{lines} horizontal lines"), f"{lines} lines"

display(with_static_page(widgets.VBox([slider, picture]), [control_from_widget(slider)], render))
```
"""


def _figure_html(notebook) -> list[str]:
    return [output.get("data", {}).get("text/html", "") for cell in notebook.cells if cell.cell_type == "code"
            for output in cell.get("outputs", []) if "application/vnd.jupyter.widget-view+json" in output.get("data", {})]


@pytest.fixture
def figure_source(source: Path) -> Path:
    source.write_text(NOTEBOOK + FIGURE_CELL, encoding="utf-8")
    return source


def test_make_notebooks_stores_the_figures_states_for_the_book_and_keeps_no_picture_in_the_pair(cache_dir,
                                                                                                   figure_source):
    _, shown = execute(figure_source, write_pair=True)
    [static_form] = _figure_html(shown)
    assert len(set(re.findall(r"data:image/png;base64,[^\"]+", static_form))) == 2, "the book's run draws both states"
    paired = figure_source.with_suffix(".ipynb").read_text(encoding="utf-8")
    assert "attn-static-widget" not in paired and "widget-view" not in paired, "the reader's .ipynb holds neither"
    assert "image/png" not in paired and "base64" not in paired, "the paired .ipynb holds a picture"
    assert execution.fill_cache([figure_source], jobs=1) == (0, 0.0)
    _, merged = execution.open_cache().merge_match_into_notebook(execution.read_as_myst_nb(figure_source))
    assert _figure_html(merged) == [static_form], "the book shows the states the run drew"


def test_a_fresh_clone_executes_every_notebook_and_draws_the_figures_states(cache_dir, figure_source):
    execute(figure_source, write_pair=True)
    shutil.rmtree(execution.CACHE)  # a fresh clone: the paired .ipynb, no cache
    assert execution.fill_cache([figure_source], jobs=1)[0] == 1
    _, merged = execution.open_cache().merge_match_into_notebook(execution.read_as_myst_nb(figure_source))
    [static_form] = _figure_html(merged)
    assert len(set(re.findall(r"data:image/png;base64,[^\"]+", static_form))) == 2


def test_an_edited_code_cell_is_executed_again_and_edited_prose_is_not(cache_dir, figure_source):
    execute(figure_source, write_pair=True)
    figure_source.write_text(figure_source.read_text(encoding="utf-8").replace("Prose between", "Text between"),
                             encoding="utf-8")
    assert execution.fill_cache([figure_source], jobs=1) == (0, 0.0), "prose is not what the cache is keyed on"
    figure_source.write_text(figure_source.read_text(encoding="utf-8").replace("6 * 7", "7 * 6"), encoding="utf-8")
    assert execution.fill_cache([figure_source], jobs=1)[0] == 1


def test_the_progress_line_says_how_far_the_execution_is_and_how_long_is_left():
    assert execution.progress(1, 4, 30.0, "executed a.md in 30.0 s") == (
        "[#####...............] 1/4  0:30 elapsed, about 1:30 left  executed a.md in 30.0 s")
    assert execution.progress(4, 4, 125.0, "done").startswith("[####################] 4/4  2:05 elapsed  ")


def test_the_paired_notebook_keeps_every_output_nbval_compares_and_no_picture():
    from tools.site_outputs import nbval_reference

    picture = nbformat.v4.new_output("display_data", data={"image/png": "iVBOR", "text/plain": "<Figure size 2x2>"},
                                     metadata={"image/png": {"width": 2}})
    html = nbformat.v4.new_output("display_data", data={"text/html": "<img src='data:image/png;base64,AA'>"})
    cell = nbformat.v4.new_code_cell("plot()", outputs=[picture, html, nbformat.v4.new_output(
        "stream", name="stdout", text="42\n")])
    reader = nbformat.v4.new_notebook(cells=[cell])
    [paired] = nbval_reference(reader).cells
    assert [o.get("data") for o in paired.outputs[:2]] == [{"text/plain": "<Figure size 2x2>"}, html["data"]]
    assert paired.outputs[0]["metadata"] == {} and paired.outputs[2] == cell.outputs[2]
    assert "image/png" in reader.cells[0].outputs[0]["data"], "the reader's notebook itself is left whole"


NBVAL_PICTURE = """
```{code-cell} ipython3
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from IPython.display import display
fig, ax = plt.subplots(figsize=(1, 1))
ax.plot([0, 1], [0, 1])
display(fig)
plt.close(fig)
print("drawn")
```
"""


def test_strict_nbval_passes_on_a_pair_without_its_pictures(cache_dir, source, tmp_path):
    """nbval's own comparison: a cell that draws a picture matches the stored output without the picture."""
    import subprocess
    import sys

    source.write_text(NOTEBOOK.split("Prose between")[0] + NBVAL_PICTURE, encoding="utf-8")  # (no environment shown)
    execute(source, write_pair=True)
    paired = source.with_suffix(".ipynb")
    assert "image/png" not in paired.read_text(encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                             "-p", "no:tools.nbval_stability", "--nbval", "--nbval-current-env", str(paired)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and " passed" in result.stdout, result.stdout[-3000:]


def test_a_run_of_other_code_cells_is_refused(cache_dir, source):
    executed = jupytext.read(source)
    executed.cells[-1].source = "print('something else')"
    with pytest.raises(ValueError, match="code cells are not those of its source"):
        execution.store_in_cache(source, executed, 1.0)


def test_the_cache_is_cleared_when_the_package_changes(cache_dir, source, monkeypatch):
    execution.fill_cache([source], jobs=1)
    monkeypatch.setattr(execution, "package_hash", lambda: "another package")
    assert not execution.is_cached(execution.open_cache(), execution.read_as_myst_nb(source))


def test_a_build_after_the_package_changed_reads_every_page_again(monkeypatch):
    # myst-nb takes a page's outputs from the cache only when Sphinx reads the page (tools/extensions/sphinx_fixes.py)
    from types import SimpleNamespace

    from tools.extensions.sphinx_fixes import pages_of_another_run

    env = SimpleNamespace(found_docs={"chapters/masks", "chapters/intro", "exercises/hw_masks"})
    monkeypatch.setattr("tools.execution.package_hash", lambda: "first")
    assert pages_of_another_run(None, env, set(env.found_docs), set(), set()) == []  # a new environment
    assert pages_of_another_run(None, env, set(), set(), set()) == []  # the same package
    monkeypatch.setattr("tools.execution.package_hash", lambda: "second")
    assert pages_of_another_run(None, env, {"chapters/intro"}, set(), set()) == ["chapters/masks", "exercises/hw_masks"]
    assert pages_of_another_run(None, env, set(), set(), set()) == []  # read with the second since
