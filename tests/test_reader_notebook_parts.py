"""The parts of a reader notebook that need no build (tools/extensions/reader_notebooks.py): which code cells a
reader gets, how a formula in a box is written so that JupyterLab's math handling (tools/jupyter_markdown.py)
hands it to MathJax unchanged, and the picture an interactive figure shows before it runs
(tools/site_outputs.py)."""

from __future__ import annotations

import pytest
from nbformat.v4 import new_code_cell

from tools.extensions.reader_notebooks import cells_left_out, one_line
from tools.jupyter_markdown import mathjax_inputs, remove_math, replace_math
from tools.site_outputs import first_picture

INTERNAL = {"tags": ["remove-cell"]}
INSTALL = {"tags": ["remove-cell", "setup"]}


def cells(*sources_and_metadata) -> dict:
    return {index: new_code_cell(source, metadata=metadata or {})
            for index, (source, metadata) in enumerate(sources_and_metadata)}


def test_a_book_internal_cell_that_only_checks_is_left_out_and_the_install_cell_kept():
    notebook = cells(("%pip install attnbook", INSTALL), ("x = 2", None), ("assert x == 2\nglue('x', x)", INTERNAL),
                     ("print(x)", None))
    assert cells_left_out(notebook) == ({2}, set())


def test_a_book_internal_cell_that_computes_what_a_later_cell_reads_is_kept():
    notebook = cells(("x = 2", None), ("y = x ** 2\nassert y == 4", INTERNAL), ("assert y > 0", INTERNAL),
                     ("z = [y + i for i in range(3)]", None))
    assert cells_left_out(notebook) == ({2}, {1})


def test_a_book_internal_cell_is_kept_when_a_kept_cell_it_feeds_is_itself_needed():
    notebook = cells(("a = 1", INTERNAL), ("b = a + 1", INTERNAL), ("print(b)", None))
    assert cells_left_out(notebook) == (set(), {0, 1})


def test_a_book_internal_cell_is_kept_when_it_advances_a_random_generator_a_later_cell_draws_from():
    notebook = cells(("rng = np.random.default_rng(0)", None), ("check = rng.normal()", INTERNAL),
                     ("print(rng.normal())", None))
    assert cells_left_out(notebook) == (set(), {1})


def test_a_book_internal_cell_is_kept_when_it_changes_an_object_a_later_cell_reads():
    notebook = cells(("seen = []\ntable = {}", None), ("seen.append(1)", INTERNAL), ("table['a'] = 1", INTERNAL),
                     ("print(seen.count(1), seen[0])", INTERNAL), ("print(len(seen), table)", None))
    assert cells_left_out(notebook) == ({3}, {1, 2})


def test_a_name_bound_again_before_it_is_read_does_not_keep_the_first_binding():
    notebook = cells(("x = 2", INTERNAL), ("x = 3", None), ("print(x)", None))
    assert cells_left_out(notebook) == ({0}, set())


def test_a_loop_variable_of_a_later_cell_does_not_keep_the_cell_that_bound_the_name_before():
    notebook = cells(("for b in range(2):\n    assert b < 2", INTERNAL), ("for b in range(3):\n    print(b)", None),
                     ("k = 1", INTERNAL), ("print(k)\nfor k in range(3):\n    print(k)", None))
    assert cells_left_out(notebook) == ({0}, {2})


def test_a_function_that_reads_a_name_when_called_keeps_the_cell_that_binds_it():
    notebook = cells(("scale = 3", INTERNAL), ("def f(v):\n    return scale * v", None))
    assert cells_left_out(notebook) == (set(), {0})


def test_a_quoted_multi_line_formula_reaches_mathjax_with_the_quote_markers_in_it():
    """The fault one_line avoids, as JupyterLab's removeMath sees it."""
    assert mathjax_inputs("> **Definition 4.1**\n>\n> $$\n> M_{ij} = 1\n> $$") == ["$$\n> M_{ij} = 1\n> $$"]


def test_a_quoted_formula_on_one_line_reaches_mathjax_unchanged():
    latex = "\\begin{aligned} a &= b \\\\\n c &= d \\end{aligned}\n\\tag{4.1}"
    cell = f"> **Definition 4.1**\n>\n> $${one_line(latex)}$$\n>\n> after it"
    assert mathjax_inputs(cell) == [f"$${one_line(latex)}$$"]
    assert one_line(latex).split() == latex.split()


def test_a_comment_in_a_formula_is_dropped_when_it_is_joined_to_one_line():
    assert one_line("a = b % the first\n+ c") == "a = b + c"
    assert one_line("50\\% of x") == "50\\% of x"


def test_math_in_code_is_not_math_and_comes_back_as_written():
    text, math = remove_math("`$x$` and $y < z$ and\n```\n$w$\n```")
    assert math == ["$y &lt; z$"] and "`$x$`" in text and "\n$w$\n" in text
    assert replace_math(text, math) == "`$x$` and $y &lt; z$ and\n```\n$w$\n```"


def test_a_formula_that_runs_into_a_blank_line_is_no_formula():
    assert mathjax_inputs("$$\na\n\nb\n$$") == []


def test_the_first_picture_of_a_static_form_is_its_image_and_alt_text():
    form = ('<div class="attn-static-widget" id="sw-1"><img class="attn-static-picture" src="data:image/png;base64,'
            'iVBORw0" alt="Weights &amp; a mask" style="max-width: 100%"><script type="application/json">'
            '{"0": ["data:image/png;base64,OTHER", "another state", ""]}</script></div>')
    assert first_picture(form) == {"image/png": "iVBORw0", "text/plain": "Weights & a mask"}


def test_a_static_form_without_a_picture_is_refused():
    with pytest.raises(ValueError, match="no picture of its first state"):
        first_picture('<div class="attn-static-widget"></div>')
