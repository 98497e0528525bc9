"""A translated page keeps its glued numbers and translates its exercises' titles (tools.extensions.translation_fixes).

A one-page book with two glued numbers and an exercise with its solution is built in English and, from a
zh_TW catalog, in Traditional Chinese. Without the extension the numbers vanish from the translated page
(myst-nb's glue role needs the notebook the message is no longer parsed with) and the exercise's title is
never offered to translators (sphinx-exercise gives it no source); with it, the translated page shows the
English page's numbers, the exercise and its solution carry the translated title, and nothing warns.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools.extensions.translation_fixes import own_page_glue

PAGE = """\
---
jupytext:
  text_representation:
    format_name: myst
kernelspec:
  display_name: Python 3
  name: python3
---
# Glue

```{code-cell} ipython3
from myst_nb import glue
glue("answer", 6 * 7, display=False)
glue("share", 2 / 3, display=False)
```

The answer is {glue:text}`answer`, a share of {glue:text}`share:.2f`.

```{exercise} Scale the scores
:label: ex-scale

Divide by the root of the width.
```

```{solution} ex-scale
Because the variance grows with the width.
```
"""

CATALOG = r'''msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"
"Language: zh_TW\n"

msgid "The answer is {glue:text}`answer`, a share of {glue:text}`share:.2f`."
msgstr "答案是 {glue:text}`answer`，比例為 {glue:text}`share:.2f`。"

msgid "Scale the scores"
msgstr "縮放分數"
'''

FIX = "tools.extensions.translation_fixes"


def _sphinx(project: Path, builder: str, language: str, extensions: list[str]) -> tuple[Path, str]:
    (project / "conf.py").write_text(
        f"extensions = {['myst_nb', 'sphinx_exercise', *extensions]!r}\nnb_execution_mode = 'force'\n"
        "locale_dirs = ['locales']\ngettext_compact = False\nexclude_patterns = ['_build']\n", encoding="utf-8")
    out = project / "_build" / f"{builder}-{language}-{len(extensions)}"
    run = subprocess.run([sys.executable, "-m", "sphinx", "-E", "-q", "-b", builder, "-D", f"language={language}",
                          str(project), str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    warnings = "\n".join(line for line in run.stderr.splitlines() if "WARNING" in line and "TCP" not in line)
    return out, warnings


def _page(project: Path, language: str, extensions: list[str]) -> tuple[dict[str, str], str]:
    """The built page's glued paragraph, exercise title and solution title as text, and the build's warnings."""
    out, warnings = _sphinx(project, "html", language, extensions)
    body = (out / "index.html").read_text(encoding="utf-8")
    text = {name: re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", match.group(1))).strip()
            for name, pattern in [("glued", r"<p>((?:The answer|答案).*?)</p>"),
                                  ("exercise", r'<p class="admonition-title">(\s*<span class="caption-number">.*?)</p>'),
                                  ("solution", r'<p class="admonition-title">((?:Solution to|解答).*?)</p>')]
            for match in [re.search(pattern, body, flags=re.S)] if match}
    return text, warnings


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("book")
    (root / "index.md").write_text(PAGE, encoding="utf-8")
    messages = root / "locales" / "zh_TW" / "LC_MESSAGES"
    messages.mkdir(parents=True)
    (messages / "index.po").write_text(CATALOG, encoding="utf-8")
    return root


def test_the_translated_page_shows_the_english_pages_numbers_and_the_translated_titles(project):
    english, english_warnings = _page(project, "en", [FIX])
    chinese, chinese_warnings = _page(project, "zh_TW", [FIX])
    assert english["glued"] == "The answer is 42, a share of 0.67."
    assert chinese["glued"] == "答案是 42，比例為 0.67。"
    assert english["exercise"].endswith("(Scale the scores)") and chinese["exercise"].endswith("(縮放分數)")
    assert english["solution"].endswith("Exercise 1 (Scale the scores)")
    # and sphinx-exercise's own words from the book's catalog (locales/zh_TW/LC_MESSAGES/exercise.po)
    assert chinese["solution"].startswith("解答 練習") and chinese["solution"].endswith("(縮放分數)")
    assert not english_warnings and not chinese_warnings


def test_without_it_the_numbers_vanish_and_the_titles_stay_english(project):
    chinese, warnings = _page(project, "zh_TW", [])
    assert chinese["glued"] == "答案是 ，比例為 。" and "No key 'answer' found in glue data" in warnings
    assert chinese["exercise"].endswith("(Scale the scores)")


@pytest.mark.parametrize("extensions, offered", [([FIX], True), ([], False)])
def test_the_message_catalog_offers_the_exercise_title_only_with_it(project, extensions, offered):
    out, _ = _sphinx(project, "gettext", "en", extensions)
    assert ('msgid "Scale the scores"' in (out / "index.pot").read_text(encoding="utf-8")) is offered


def test_only_the_pages_own_glue_is_rewritten():
    assert own_page_glue("{glue:text}`n` and {glue:text}`x:.1f`", "p.md") == \
        "{glue:text}`p.md::n:s` and {glue:text}`p.md::x:.1f`"
    assert own_page_glue("{glue:text}`other.md::n:d`, {glue:figure}`f`", "p.md") == \
        "{glue:text}`other.md::n:d`, {glue:figure}`f`"
