"""tools.package_lines counts the lines module, class and function docstrings span, per folder of the package."""

from tools.package_lines import docstring_lines, folder_figures

SOURCE = '''"""A module.

Two lines of it, three with the quotes."""


def f(x):
    """One line."""
    return x  # not a docstring


class C:
    """A class,
    on two lines."""

    def method(self):
        return "a string, not a docstring"
'''


def test_docstring_lines_counts_the_lines_each_docstring_spans():
    assert docstring_lines(SOURCE) == 3 + 1 + 2
    assert docstring_lines("x = 1\n'a string after code is no docstring'\n") == 0


def test_folder_figures_sum_modules_lines_and_docstrings_per_folder_top_level_first():
    figures = folder_figures([("efficient/a.py", SOURCE), ("b.py", SOURCE), ("efficient/c.py", "x = 1\n")])
    lines = len(SOURCE.splitlines())
    assert list(figures) == ["attnbook", "efficient"]
    assert figures["attnbook"] == (1, lines, 6)
    assert figures["efficient"] == (2, lines + 1, 6)
