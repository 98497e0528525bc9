"""A translated page keeps its glued numbers (tools.extensions.translated_glue, issue #28's mechanism).

A one-page book with one glued number is built in English and, from a zh_TW catalog that translates the
paragraph holding the number, in Traditional Chinese: without the extension the number vanishes from the
translated page (myst-nb's glue role needs the notebook the message is no longer parsed with); with it,
the translated page shows the number the English page shows, and the build warns of nothing.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools.extensions.translated_glue import own_page_glue

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
"""

CATALOG = r'''msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"
"Language: zh_TW\n"

msgid "Glue"
msgstr "黏貼"

msgid "The answer is {glue:text}`answer`, a share of {glue:text}`share:.2f`."
msgstr "答案是 {glue:text}`answer`，比例為 {glue:text}`share:.2f`。"
'''


def _build(project: Path, language: str, extensions: list[str]) -> tuple[str, str]:
    (project / "conf.py").write_text(
        f"extensions = {['myst_nb', *extensions]!r}\nnb_execution_mode = 'force'\n"
        "locale_dirs = ['locales']\ngettext_compact = False\nexclude_patterns = ['_build']\n", encoding="utf-8")
    out = project / "_build" / language
    run = subprocess.run([sys.executable, "-m", "sphinx", "-E", "-q", "-b", "html", "-D", f"language={language}",
                          str(project), str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    body = (out / "index.html").read_text(encoding="utf-8")
    paragraph = re.search(r"<p>(The answer|答案)(.*?)</p>", body, flags=re.S)
    assert paragraph, f"no glued paragraph in the {language} page"
    warnings = "\n".join(line for line in run.stderr.splitlines() if "WARNING" in line and "TCP" not in line)
    return re.sub(r"<[^>]+>", "", paragraph.group(0)), warnings


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("glue-book")
    (root / "index.md").write_text(PAGE, encoding="utf-8")
    messages = root / "locales" / "zh_TW" / "LC_MESSAGES"
    messages.mkdir(parents=True)
    (messages / "index.po").write_text(CATALOG, encoding="utf-8")
    return root


def test_the_translated_page_shows_the_english_pages_glued_numbers(project):
    english, english_warnings = _build(project, "en", ["tools.extensions.translated_glue"])
    chinese, chinese_warnings = _build(project, "zh_TW", ["tools.extensions.translated_glue"])
    assert english == "The answer is 42, a share of 0.67."
    assert chinese == "答案是 42，比例為 0.67。"
    assert not english_warnings and not chinese_warnings


def test_without_it_the_translated_page_loses_them(project):
    chinese, warnings = _build(project, "zh_TW", [])
    assert chinese == "答案是 ，比例為 。" and "No key 'answer' found in glue data" in warnings


def test_only_the_pages_own_glue_is_rewritten():
    assert own_page_glue("{glue:text}`n` and {glue:text}`x:.1f`", "p.md") == \
        "{glue:text}`p.md::n:s` and {glue:text}`p.md::x:.1f`"
    assert own_page_glue("{glue:text}`other.md::n:d`, {glue:figure}`f`", "p.md") == \
        "{glue:text}`other.md::n:d`, {glue:figure}`f`"
