"""tools.visible_words counts the prose a reader sees and nothing the page hides or shows as code."""

from tools.visible_words import main_path, visible_words

PAGE = '''---
jupytext:
  formats: md:myst,ipynb
---

(label-target)=
# Two words

```{code-cell} ipython3
:tags: [hide-input]
print("not prose at all")
```

One two three $x + y$ {ref}`some-label`.

```{literalinclude} ../code/src/attnbook/attention.py
:pyobject: attend
```

```{note}
:class: dropdown
Four five.
```

$$
a = b + c
$$ (eq-label)

+++
<!-- a comment -->
'''


def test_counts_headings_sentences_math_roles_and_directive_bodies_only():
    # "Two words" + "One two three" + $x + y$ + {ref} + "Four five" + the display with its label
    assert visible_words(PAGE) == 2 + 3 + 1 + 1 + 2 + 1


def test_code_and_options_do_not_count():
    assert visible_words("```{code-cell} ipython3\nx = 1 + 2\n```\n") == 0
    assert visible_words("```{figure} a.png\n:alt: alt text here\n:name: fig\nCaption words.\n```\n") == 2


def test_main_path_runs_from_the_overview_to_the_end_of_the_summary():
    chapter = "# T\n\nLead.\n\n## Overview\n\nOne two.\n\n## Summary\n\n- Three.\n\n## History\n\nFour five six.\n"
    assert visible_words(main_path(chapter)) == 1 + 2 + 1 + 1   # "Overview", "One two", "Summary", "Three"
    assert main_path("# Appendix\n\nNo overview here.\n") is None
