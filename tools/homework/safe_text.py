"""Text a submission controls, made safe for each place the grader writes it: a terminal, a CSV cell, Markdown.

A submission controls more of the grader's outputs than its answers: the names of its files and
folders (any bytes but ``/`` and NUL, undecodable ones reaching Python as lone surrogates through
``os.fsdecode``), the messages of its exceptions, what the hidden tests print about its values. Every
such string passes through :func:`visible` on its way out, and then through the function for where it
goes:

- :func:`visible`: one line of printable text (``str.isprintable``), cut to a length. Control and
  format characters (Unicode categories Cc and Cf: escape sequences, newlines, bidirectional
  overrides, zero-width spaces), lone surrogates, private-use and unassigned code points, the line and
  paragraph separators and every space but the ASCII one (a no-break space looks like a space) are
  written out as Python writes them (``\\x1b``, ``\\n``, ``\\u202e``), a byte that is not UTF-8 as
  ``\\xff``; what is cut says how much (``[... 812 more characters]``). The result encodes as UTF-8
  whatever came in, and a terminal shows it as it is;
- :func:`spreadsheet_safe`: a CSV cell a spreadsheet program shows as text, not as a formula;
- :func:`markdown_text`, :func:`markdown_code` and :func:`markdown_block`: running text, an inline code
  span and a fenced block of lines in Markdown, which no Markdown renderer turns into HTML, a link,
  emphasis or another block.
"""

from __future__ import annotations

import os
import re
import unicodedata

NAME_LIMIT = 200  # a file name, a folder, a row's name
TEXT_LIMIT = 2000  # a reason, a message, a line of output
ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})  # what str.isprintable refuses
SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}

# A spreadsheet reads a cell as a formula when it starts with one of these, and a program that splits
# lines on ; or , (or | or a tab) reads one after such a separator as the start of a cell of its own
SPREADSHEET_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
AFTER_SEPARATOR = re.compile(r"([,;|])(\s*)(?=[=+\-@])")

# Markdown's punctuation that can start emphasis, a link, an HTML tag or entity, a heading, a table
# cell, a code span, strikethrough or math: written with a backslash, which CommonMark allows before
# any ASCII punctuation and shows as the character itself
MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>&#|~$])")
LINE_START = re.compile(r"^(\d{1,9})([.)])|^([-+=])")  # a list item, a thematic break, a setext underline


def _escape(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that os.fsdecode could not decode (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if char in SHORT_ESCAPES:
        return SHORT_ESCAPES[char]
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: str | bytes, limit: int = TEXT_LIMIT) -> str:
    """``text`` as one line of printable text: invisible characters written out, cut to ``limit`` characters.

    Parameters
    ----------
    text : str or bytes
        Any string, with lone surrogates if it came from ``os.fsdecode``; bytes are decoded that way.
    limit : int
        The most characters kept (escapes count at their written length); the rest is replaced by
        ``[... N more characters]``, N counted in ``text``.

    Returns
    -------
    str
        Printable text (no character of the categories Cc, Cf, Cs, Co, Cn, Zl, Zp, nor Zs but the
        space), which therefore encodes as UTF-8.

    Examples
    --------
    >>> visible("evil\\x1b[2J\\u202egnp.ipynb")
    'evil\\\\x1b[2J\\\\u202egnp.ipynb'
    >>> visible(b"caf\\xe9")
    'caf\\\\xe9'
    >>> visible("a" * 12, limit=5)
    'aaaaa[... 7 more characters]'
    """
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not isinstance(text, str):
        raise TypeError(f"text must be str or bytes, got {type(text).__name__}")
    if not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be a non-negative integer, got {limit!r}")
    pieces: list[str] = []
    used = 0
    for index, char in enumerate(text):
        piece = _escape(char) if char != " " and unicodedata.category(char) in ESCAPED_CATEGORIES else char
        if used + len(piece) > limit:
            pieces.append(f"[... {len(text) - index} more characters]")
            break
        pieces.append(piece)
        used += len(piece)
    return "".join(pieces)


def spreadsheet_safe(text: str, limit: int = TEXT_LIMIT) -> str:
    """A CSV cell that a spreadsheet program shows as text (OWASP's advice on CSV injection).

    The cell is :func:`visible` (so it holds no tab, CR or newline), a ``'`` goes in front of a cell
    that starts, after any spaces, with ``=``, ``+``, ``-`` or ``@``, and after a ``;``, ``,`` or ``|``
    (and any spaces) that one of those follows, so that a program splitting the line there starts no
    formula either. Write the cells with ``csv.QUOTE_ALL``.

    Examples
    --------
    >>> spreadsheet_safe('=HYPERLINK("http://x")')
    '\\'=HYPERLINK("http://x")'
    >>> spreadsheet_safe("alice;=1+1")
    "alice;'=1+1"
    >>> spreadsheet_safe("all 8 hidden tests passed")
    'all 8 hidden tests passed'
    """
    shown = AFTER_SEPARATOR.sub(r"\1\2'", visible(text, limit))
    return "'" + shown if shown.lstrip(" ").startswith(SPREADSHEET_TRIGGERS) else shown


def markdown_text(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` for running Markdown text: :func:`visible`, its Markdown punctuation escaped with a backslash.

    Backticks, ``< > &`` (HTML tags and entities), ``* _ ~`` (emphasis), ``[ ]`` (links), ``#``, ``|``,
    ``$`` (math) and the backslash itself are escaped everywhere; a ``-``, ``+`` or ``=`` at the start,
    or the ``.`` or ``)`` after a leading number, is escaped too, so the text starts no list, break
    or heading; leading spaces (an indented code block) are dropped.

    Examples
    --------
    >>> markdown_text("<img src=x> *bold* [link](u) 1_000")
    '\\\\<img src=x\\\\> \\\\*bold\\\\* \\\\[link\\\\](u) 1\\\\_000'
    >>> markdown_text("1. not a list")
    '1\\\\. not a list'
    """
    escaped = MARKDOWN_SPECIAL.sub(r"\\\1", visible(text, limit).lstrip(" "))
    return LINE_START.sub(lambda m: f"{m[1]}\\{m[2]}" if m[1] else f"\\{m[3]}", escaped, count=1)


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def markdown_code(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` as a Markdown code span: shown as it is, nothing in it rendered.

    The span's backtick fence is longer than any run of backticks in the :func:`visible` text, and
    padded with a space where the text starts or ends with a backtick or a space (CommonMark strips
    one space on each side). An empty text gives an empty string.

    Examples
    --------
    >>> markdown_code("ValueError: <b>x</b>")
    '`ValueError: <b>x</b>`'
    >>> markdown_code("a `` b")
    '```a `` b```'
    >>> markdown_code("`x")
    '`` `x ``'
    """
    shown = visible(text, limit)
    if not shown:
        return ""
    fence = "`" * (_longest_backtick_run(shown) + 1)
    pad = " " if shown.strip(" ") and (shown[0] in "` " or shown[-1] in "` ") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def markdown_block(lines: list[str], limit: int = TEXT_LIMIT) -> list[str]:
    """Lines as a fenced Markdown code block (info string ``text``): each line :func:`visible`, the fence longer.

    Examples
    --------
    >>> markdown_block(["ok", "``` <script>"])
    ['````text', 'ok', '``` <script>', '````']
    """
    shown = [visible(line, limit) for line in lines]
    fence = "`" * max(3, max((_longest_backtick_run(line) for line in shown), default=0) + 1)
    return [f"{fence}text", *shown, fence]
