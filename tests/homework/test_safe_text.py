"""The sanitiser of the grader's outputs (tools.homework.safe_text): examples, then properties over any string.

The properties: whatever string comes in (lone surrogates and undecodable file-name bytes included),
what comes out encodes as UTF-8 and holds no control or format character; a CSV row written the
grader's way reads back as exactly the sanitised cells, none of which a spreadsheet starts a formula
in; and Markdown built from it (running text, a code span, a fenced block, a whole feedback file) holds
no raw HTML, no link and no emphasis, and says exactly the sanitised text.
"""

from __future__ import annotations

import csv
import io
import os
import re
import unicodedata

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from markdown_it import MarkdownIt

from tools.homework import reports, safe_text
from tools.homework.safe_text import markdown_block, markdown_code, markdown_text, spreadsheet_safe, visible

# any code point, lone surrogates too, with the dangerous ones made likely
DANGEROUS = "\x1b\x07\x00\r\n\t\x85\u202e\u2066\u200b\ufeff\u2028\udcff\ud800`<>&[]*_#|~$\\=+-@;,! "
TEXTS = st.text(st.one_of(st.characters(exclude_categories=()), st.sampled_from(DANGEROUS)), max_size=300)
NAMES = st.one_of(TEXTS, st.binary(max_size=120).map(os.fsdecode))  # a file name as os.fsdecode gives it
MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])  # GitHub's additions too
UNSAFE_CATEGORIES = {"Cc", "Cf", "Cs"}
SETTINGS = settings(deadline=None, derandomize=True, database=None)  # as code/tests/conftest.py's profile


def tokens(text: str) -> list:
    """Every token of ``text`` parsed as Markdown, the inline children included."""
    found = []
    for token in MARKDOWN.parse(text):
        found += [token, *(token.children or [])]
    return found


# --- examples -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "shown"), [
    ("evil\x1b[2J", "evil\\x1b[2J"),  # an escape sequence: clears a terminal
    ("\x1b]52;c;SGk=\x07", "\\x1b]52;c;SGk=\\x07"),  # OSC 52: writes the clipboard
    ("gnp.\u202eexe", "gnp.\\u202eexe"),  # a right-to-left override
    ("a\u200bb", "a\\u200bb"),  # a zero-width space
    ("line\nbreak\r", "line\\nbreak\\r"),
    (os.fsdecode(b"caf\xe9"), "caf\\xe9"),  # a Latin-1 byte in a UTF-8 file name
    ("\ud800", "\\ud800"),  # a lone surrogate from elsewhere
    ("\U000e0041", "\\U000e0041"),  # a tag character (format, outside the BMP)
    ("a\u00a0b\u3000c", "a\\u00a0b\\u3000c"),  # spaces that are not the ASCII one
    ("caf\u00e9 \u03b1\u03b2 \u6f22\u5b57", "caf\u00e9 \u03b1\u03b2 \u6f22\u5b57"),  # printable text is kept
])
def test_invisible_characters_are_written_out(text, shown):
    assert visible(text) == shown


def test_bytes_are_decoded_as_file_names_are():
    assert visible(b"bad\xff\xfe.ipynb") == "bad\\xff\\xfe.ipynb"


def test_long_text_is_cut_with_a_marker_that_counts_the_rest():
    assert visible("x" * 5000) == "x" * safe_text.TEXT_LIMIT + "[... 3000 more characters]"
    assert visible("\x1b" * 10, limit=8) == "\\x1b\\x1b[... 8 more characters]"  # an escape is never split


@pytest.mark.parametrize(("text", "safe"), [
    ("=1+1", "'=1+1"), ("@SUM(A1)", "'@SUM(A1)"), ("  -2", "'  -2"),
    ("alice;=HYPERLINK(\"x\")", "alice;'=HYPERLINK(\"x\")"), ("a, +1", "a, '+1"), ("a|@x", "a|'@x"),
    ("4 of 8 hidden tests failed (softmax-values, softmax-stable)",
     "4 of 8 hidden tests failed (softmax-values, softmax-stable)"),
])
def test_cells_a_spreadsheet_would_read_as_a_formula_are_neutralised(text, safe):
    assert spreadsheet_safe(text) == safe


def test_markdown_payloads_stay_text():
    payload = "`<img src=x onerror=alert(1)>` [a](javascript:x) *b* <!-- c --> &amp; # d | e"
    found = tokens(markdown_text(payload))
    assert [t.type for t in found] == ["paragraph_open", "inline", "text", "paragraph_close"]
    assert found[2].content == payload
    assert [t.type for t in tokens(markdown_code(payload))][2:4] == ["code_inline", "paragraph_close"]
    [fence] = tokens("\n".join(markdown_block(["```", payload, "~~~"])))
    assert fence.type == "fence" and fence.content == f"```\n{payload}\n~~~\n"


@pytest.mark.parametrize("text", ["- item", "+ item", "1. item", "3) item", "---", "=== ", "    code", "# h"])
def test_running_text_starts_no_block(text):
    assert [t.type for t in tokens(markdown_text(text))] == ["paragraph_open", "inline", "text", "paragraph_close"]


# --- properties -----------------------------------------------------------------------------------


@SETTINGS
@given(TEXTS, st.integers(0, 400))
def test_any_string_comes_out_as_utf8_with_no_control_or_format_character(text, limit):
    shown = visible(text, limit)
    shown.encode("utf-8")  # strict: a lone surrogate would raise
    assert not [c for c in shown if unicodedata.category(c) in UNSAFE_CATEGORIES]
    assert len(shown) <= limit + len(f"[... {len(text)} more characters]")


@SETTINGS
@given(NAMES)
def test_a_file_name_comes_out_as_utf8_and_printable(name):
    shown = visible(name, safe_text.NAME_LIMIT)
    assert shown.encode("utf-8").decode("utf-8") == shown and shown.isprintable()


@SETTINGS
@given(TEXTS)
def test_printable_text_is_left_as_it_is(text):
    if text.isprintable() and len(text) <= safe_text.TEXT_LIMIT:
        assert visible(text) == text


@SETTINGS
@given(st.lists(st.tuples(NAMES, TEXTS), max_size=5))
def test_csv_rows_read_back_as_exactly_the_sanitised_cells(tmp_path_factory, skipped):
    path = tmp_path_factory.mktemp("csv") / "skipped.csv"
    reports.write_skipped(path, skipped)
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    expected = [[spreadsheet_safe(visible(name, safe_text.NAME_LIMIT)), spreadsheet_safe(reason)]
                for name, reason in skipped]
    assert rows == [["file", "reason"], *expected]
    for cell in (cell for row in expected for cell in row):
        assert not cell.lstrip(" ").startswith(safe_text.SPREADSHEET_TRIGGERS)
        assert not re.search(r"[,;|]\s*[=+\-@]", cell)
    assert path.read_text(encoding="utf-8").count('"') >= 2 * (2 + 2 * len(skipped))  # every cell quoted


@SETTINGS
@given(TEXTS)
def test_a_cell_is_quoted_whatever_it_holds(text):
    buffer = io.StringIO()
    csv.writer(buffer, quoting=csv.QUOTE_ALL).writerow([spreadsheet_safe(text)])
    assert buffer.getvalue().startswith('"') and next(csv.reader(io.StringIO(buffer.getvalue()))) == [
        spreadsheet_safe(text)]


@SETTINGS
@given(TEXTS)
def test_markdown_running_text_is_one_paragraph_of_the_sanitised_text(text):
    shown = visible(text).strip()
    found = tokens(markdown_text(text))
    if not shown:
        return
    assert [t.type for t in found[:2]] == ["paragraph_open", "inline"] and found[-1].type == "paragraph_close"
    children = found[2:-1]
    assert {t.type for t in children} == {"text"}, [t.type for t in children]
    assert "".join(t.content for t in children).strip() == shown


@SETTINGS
@given(TEXTS)
def test_a_markdown_code_span_shows_the_sanitised_text_exactly(text):
    shown = visible(text)
    span = markdown_code(text)
    if not shown.strip():
        return
    found = tokens(f"x {span} y")
    assert [t.type for t in found] == ["paragraph_open", "inline", "text", "code_inline", "text", "paragraph_close"]
    assert found[3].content == shown


@SETTINGS
@given(st.lists(TEXTS, min_size=1, max_size=6))
def test_a_fenced_block_holds_exactly_the_sanitised_lines(lines):
    found = tokens("\n".join(markdown_block(lines)) + "\n\nafter")
    assert found[0].type == "fence" and found[0].info == "text"
    assert found[0].content == "".join(visible(line) + "\n" for line in lines)
    assert [t.type for t in found[1:]] == ["paragraph_open", "inline", "text", "paragraph_close"]


@settings(SETTINGS, max_examples=200)
@given(NAMES, TEXTS, TEXTS, TEXTS, st.booleans())
def test_a_feedback_file_holds_no_raw_html_link_or_control_character(name, error, output, note, graded):
    plan = {"homework": "hw_masks"}
    result = {"student": name, "total": 0, "max_total": 2, "status": "graded" if graded else "invalid",
              "reason": note, "notes": [note],
              "feedback": [{"grade_id": "mask-values", "passed": False, "points": 0, "max": 2,
                            "output": output, "error": error}]}
    text = reports.feedback_markdown(plan, result)
    text.encode("utf-8")
    assert not [c for c in text if unicodedata.category(c) in UNSAFE_CATEGORIES and c != "\n"]
    types = [t.type for t in tokens(text)]
    assert not set(types) & {"html_block", "html_inline", "link_open", "image", "em_open", "s_open"}, types
    assert types.count("strong_open") == 1  # the grader's own: the score


@SETTINGS
@given(NAMES)
def test_a_feedback_file_name_is_short_ascii_and_starts_with_the_key(name):
    file = reports.feedback_name("0007-3f2a9c1b", name)
    assert re.fullmatch(r"0007-3f2a9c1b(-[A-Za-z0-9_-]{1,40})?\.md", file), file
