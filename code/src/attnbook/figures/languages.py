"""The words inside the book's figures in its other languages, drawn in the same run as the English.

The chapters' code and its figures stay English. While the book is built, ``ATTNBOOK_FIGURE_TRANSLATIONS``
names each other language and its catalog of figure words (``zh_TW=/path/figures.po``); then every figure the
run shows is drawn once more per language, from the same figure object, so its numbers are the English
figure's numbers. Each text of the figure (titles, axis labels, tick labels, legends, annotations) is looked
up as a *message*: the text with its numbers and quoted samples replaced by ``{0}``, ``{1}``, ... and its
``$...$`` math kept as written.

>>> message_of("head 3 of layer 12 on 'the cat'")
('head {0} of layer {1} on {2}', ['3', '12', "'the cat'"])
>>> message_of("$q_1$"), message_of("0.25"), message_of("PE[10]")
((None, []), (None, []), ('PE[{0}]', ['10']))
>>> fill("第 {1} 層的第 {0} 頭", ["3", "12"])
'第 12 層的第 3 頭'

Where the drawings go: a figure shown by Jupyter (``plt.show()``) gets them as one more entry of its output,
:data:`MIME`, beside the English PNG (:func:`install_formatter`); a state of an interactive figure
(:func:`attnbook.figures.plotting.figure_to_img_html`) and a static page
(:func:`attnbook.book.static_widgets.static_widget_html`) return a :class:`Translated` string that carries
them. The builds put each language's drawings on its own pages and leave them out of the English ones and
of the reader notebooks (tools/site_outputs.py). Every output also lists the messages it looked up, which
``make translations`` gathers into the catalog's template (tools/translations.py).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import logging
import os
import re
import warnings

__all__ = ["ENV", "MIME", "FONTS", "Translated", "message_of", "fill", "languages", "translate",
           "output_entry", "fonts_of", "drawn_in", "install_formatter"]

ENV = "ATTNBOOK_FIGURE_TRANSLATIONS"  # "zh_TW=/path/to/figures.po[;other=...]": the builds set it
MIME = "application/vnd.attnbook.translations+json"
# each language's fonts for the figures' words: (sans-serif, monospace); Debian's fonts-noto-cjk
FONTS = {"zh_TW": ("Noto Sans CJK TC", "Noto Sans Mono CJK TC")}

_MATH = re.compile(r"(?<!\\)\$[^$]*(?<!\\)\$")
# quoted samples (data the figure shows, kept as they are), then numbers: 4,096, -1.5, 1e-3, 30%
_VALUE = re.compile(r"""(?<![\w'"])'[^'\n]+'(?![\w'])|"[^"\n]+"|“[^”\n]+”"""
                    r"|(?<![\w.])[-−+]?\d{1,3}(?:,\d{3})+(?![\d])|(?<![\w.])[-−+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
_PLACEHOLDER = re.compile(r"\{(\d+)\}")
_WORD = re.compile(r"[A-Za-z]{2,}")


def _outside_math(text: str, change) -> str:
    """``text`` with ``change`` applied to each part outside ``$...$`` math."""
    parts, last = [], 0
    for match in _MATH.finditer(text):
        parts += [change(text[last:match.start()]), match.group(0)]
        last = match.end()
    return "".join(parts + [change(text[last:])])


def _pieces(text: str) -> list[tuple[bool, str]]:
    """``text`` as (is a value, text) pieces: numbers and quoted samples outside math are values, and a list
    of values (``2, 4 and 8`` holds ``2, 4``; ``a | b | c``) is one value, so lists of any length are one message."""
    pieces: list[tuple[bool, str]] = []

    def split(part: str) -> None:
        last = 0
        for match in _VALUE.finditer(part):
            pieces.extend([(False, part[last:match.start()]), (True, match.group(0))])
            last = match.end()
        pieces.append((False, part[last:]))

    last = 0
    for match in _MATH.finditer(text):
        split(text[last:match.start()])
        pieces.append((False, match.group(0)))
        last = match.end()
    split(text[last:])
    joined: list[tuple[bool, str]] = []
    for is_value, piece in pieces:
        if (is_value and len(joined) >= 2 and joined[-1][1] in _SEPARATORS and joined[-2][0]
                and joined[-1][1] == getattr(joined[-2], "separator", joined[-1][1])):
            separator = joined.pop()[1]
            joined[-1] = _Joined(joined[-1][1] + separator + piece, separator)
        else:
            joined.append((is_value, piece))
    return joined


class _Joined(tuple):
    """A value that is a list of values, and the separator it was joined with."""

    def __new__(cls, text: str, separator: str):
        self = super().__new__(cls, (True, text))
        self.separator = separator
        return self


_SEPARATORS = (", ", " | ")


def message_of(text: str) -> tuple[str | None, list[str]]:
    """The message a catalog translates for a figure's ``text``, and the values its placeholders stand for.

    Numbers and quoted samples outside ``$...$``, and lists of them, become ``{0}``, ``{1}``, ... in order.

    Parameters
    ----------
    text : str
        One text of a figure: a title, a label, a tick label, a legend entry.

    Returns
    -------
    tuple of (str or None, list of str)
        The message and the values in placeholder order; ``(None, [])`` for a text with no word to translate
        (numbers, a letter, math).

    Examples
    --------
    >>> message_of("widths 2, 4, 8 | 16 and 'a' | 'b'")
    ('widths {0} | {1} and {2}', ['2, 4, 8', '16', "'a' | 'b'"])
    >>> message_of("$q_1$ = 0.5")
    (None, [])
    """
    values: list[str] = []
    parts = []
    for is_value, piece in _pieces(text):
        if is_value:
            values.append(piece)
            parts.append(f"{{{len(values) - 1}}}")
        else:
            parts.append(piece)
    message = "".join(parts)
    words = _PLACEHOLDER.sub(" ", _MATH.sub(" ", message))
    if not _WORD.search(words):
        return None, []
    return message, values


def fill(message: str, values: list[str]) -> str:
    """``message`` with each ``{k}`` outside math replaced by ``values[k]``: the inverse of :func:`message_of`.

    Parameters
    ----------
    message : str
        A message or its translation, with placeholders ``{0}``, ``{1}``, ...
    values : list of str
        The values, in placeholder order.

    Returns
    -------
    str
        The filled text; braces inside ``$...$`` math are left alone.

    Examples
    --------
    >>> fill("$x_{1}$ at step {0}", ["12"])
    '$x_{1}$ at step 12'
    """
    return _outside_math(message, lambda part: _PLACEHOLDER.sub(lambda m: values[int(m.group(1))], part))


@functools.lru_cache(maxsize=None)
def _catalogs(setting: str) -> dict[str, dict[str, str]]:
    catalogs = {}
    for entry in filter(None, setting.split(";")):
        language, _, path = entry.partition("=")
        catalogs[language] = _read_po(path) if path and os.path.exists(path) else {}
    return catalogs


def _read_po(path: str) -> dict[str, str]:
    """The translated, not fuzzy, messages of a gettext catalog (babel: the builds' Sphinx has it)."""
    from babel.messages.pofile import read_po

    with open(path, "rb") as stream:
        return {m.id: m.string for m in read_po(stream) if m.id and m.string and not m.fuzzy}


def languages() -> list[str]:
    """The languages the figures are drawn in besides English, as :data:`ENV` names them.

    Returns
    -------
    list of str
        Language codes (``["zh_TW"]`` in the book's builds); empty outside them.

    Examples
    --------
    >>> import os
    >>> languages() if ENV not in os.environ else []
    []
    """
    return list(_catalogs(os.environ.get(ENV, "")))


def translate(text: str, language: str, used: set | None = None) -> str:
    """``text`` in ``language``, from that language's catalog of figure words.

    A quoted value that is a message of the catalog, as an alt text quotes a figure's label, is translated too.

    Parameters
    ----------
    text : str
        A figure's text, in English.
    language : str
        A language of :func:`languages`.
    used : set, optional
        Gets the message looked up (whether or not the catalog has it), for the catalog's template.

    Returns
    -------
    str
        The translation with the English values filled in, or ``text`` itself when the catalog lacks its message.

    Examples
    --------
    >>> used = set()
    >>> translate("head 2", "xx", used), used
    ('head 2', {'head {0}'})
    """
    message, values = message_of(text)
    if message is None:
        return text
    if used is not None:
        used.add(message)
    catalog = _catalogs(os.environ.get(ENV, "")).get(language, {})
    translation = catalog.get(message)
    return fill(translation, [_quoted(value, catalog) for value in values]) if translation else text


_QUOTES = {"'": "'", '"': '"', "“": "”"}


def _quoted(value: str, catalog: dict[str, str]) -> str:
    """A value of a translated message: a quoted label the catalog translates (a figure's own words, quoted by its
    alt text) in the language's quotation marks, 「…」; any other value as it is."""
    if len(value) < 2 or _QUOTES.get(value[0]) != value[-1]:
        return value
    message, values = message_of(value[1:-1])
    translation = catalog.get(message) if message else None
    return f"「{fill(translation, values)}」" if translation else value


def output_entry(drawings: dict[str, dict], messages, missing=()) -> dict:
    """The entry :data:`MIME` of an output: its drawings in each other language and what they looked up.

    Parameters
    ----------
    drawings : dict of str to dict
        For each language, the output's data in it (MIME type to data), as Jupyter holds an output's.
    messages : iterable of str
        The catalog messages the drawings looked up (the catalog's template gathers them).
    missing : iterable of str, optional
        The warnings of glyphs that no font had, which the book's tests fail on.

    Returns
    -------
    dict
        ``{"languages": drawings, "messages": [...]}``, with ``"missing_glyphs"`` when a glyph was missing.

    Examples
    --------
    >>> output_entry({"zh_TW": {"text/plain": "頭"}}, {"head"})
    {'languages': {'zh_TW': {'text/plain': '頭'}}, 'messages': ['head']}
    """
    entry = {"languages": drawings, "messages": sorted(set(messages))}
    if missing:
        entry["missing_glyphs"] = sorted(set(missing))
    return entry


class Translated(str):
    """An English string (HTML) that also carries its translations by language and the messages they used.

    Parameters
    ----------
    english : str
        The English text; the string's own value.
    translations : dict of str to str
        The same text in each other language.
    messages : iterable of str
        The catalog messages the translations looked up.
    missing : iterable of str, optional
        The warnings of glyphs that no font had while they were drawn.

    Examples
    --------
    >>> shown = Translated("<b>head</b>", {"zh_TW": "<b>頭</b>"}, {"head"})
    >>> shown == "<b>head</b>", shown.payload("text/html")
    (True, {'languages': {'zh_TW': {'text/html': '<b>頭</b>'}}, 'messages': ['head']})
    """

    translations: dict[str, str]
    messages: set
    missing: set

    def __new__(cls, english: str, translations: dict[str, str], messages=(), missing=()):
        self = super().__new__(cls, english)
        self.translations, self.messages, self.missing = dict(translations), set(messages), set(missing)
        return self

    def payload(self, mime: str) -> dict:
        """The output entry :data:`MIME` (:func:`output_entry`) of this string shown as ``mime``."""
        return output_entry({lang: {mime: text} for lang, text in self.translations.items()}, self.messages,
                            self.missing)


@functools.lru_cache(maxsize=None)
def _translating_formatter():
    from matplotlib.ticker import Formatter

    class TranslatingFormatter(Formatter):
        """A tick formatter whose labels are looked up in a catalog: a tick axis makes its labels at draw time."""

        def __init__(self, formatter, change):
            self._formatter, self._change = formatter, change
            self.axis = formatter.axis

        def __call__(self, x, pos=None):
            return self._change(self._formatter(x, pos))

        def format_ticks(self, values):
            return [self._change(label) for label in self._formatter.format_ticks(values)]

        def get_offset(self):
            return self._formatter.get_offset()

        def set_locs(self, locs):
            self._formatter.set_locs(locs)

    return TranslatingFormatter


def _font_ready(language: str) -> tuple[str, str]:
    """The language's fonts (:data:`FONTS`), or a RuntimeError naming the one matplotlib does not find."""
    from matplotlib import font_manager

    def found(family: str) -> bool:
        try:
            font_manager.findfont(font_manager.FontProperties(family=family), fallback_to_default=False)
        except ValueError:
            return False
        return True

    if not all(map(found, FONTS[language])):  # installed after matplotlib listed the fonts: list them again
        font_manager.fontManager = font_manager._load_fontmanager(try_read_cache=False)
    for family in FONTS[language]:
        if not found(family):
            raise RuntimeError(f"the {language} figures need the font {family!r} (Debian: fonts-noto-cjk), "
                               "which matplotlib does not find")
    return FONTS[language]


# matplotlib falls back glyph by glyph only across the families a text names: a generic family ("sans-serif")
# resolves to one font, so the figures' texts name the language's font and DejaVu (symbols: ⁽⁰⁾, ᵀ) explicitly
_FALLBACK = {"sans-serif": "DejaVu Sans", "monospace": "DejaVu Sans Mono"}


@contextlib.contextmanager
def fonts_of(language: str, fig=None):
    """While the block runs, matplotlib draws words with ``language``'s fonts first, quietly.

    The fonts are :data:`FONTS`. Each text of ``fig`` names them and matplotlib's own DejaVu after them, so a
    glyph they lack (⁽⁰⁾, ᵀ) comes from DejaVu, and an italic text keeps its Chinese upright (CJK fonts have no
    italics); tick labels that the axes make while drawing take the language's font alone.

    Parameters
    ----------
    language : str
        A key of :data:`FONTS`.
    fig : matplotlib.figure.Figure, optional
        A figure whose texts' font families are changed for the block only.

    Yields
    ------
    list of str
        Empty while the block runs; when it ends, the warnings of glyphs that no font had.

    Raises
    ------
    RuntimeError
        If matplotlib does not find one of the fonts (Debian: ``fonts-noto-cjk``).

    Examples
    --------
    >>> with fonts_of("zh_TW", figure) as missing:  # doctest: +SKIP
    ...     figure.savefig("zh.png")
    >>> missing  # doctest: +SKIP
    []
    """
    import matplotlib
    from matplotlib.text import Text

    sans, mono = _font_ready(language)
    missing: list[str] = []
    quiet = logging.getLogger("matplotlib.font_manager")
    level = quiet.level
    fonts = {"font.sans-serif": [sans, *matplotlib.rcParams["font.sans-serif"]],
             "font.monospace": [mono, *matplotlib.rcParams["font.monospace"]]}
    own = {"sans-serif": sans, "monospace": mono}
    # a tick label is copied into the ticks an axis adds while drawing: left as it is, they stay English after the block
    ticks = {id(label) for ax in (fig.axes if fig is not None else []) for axis in ax._axis_map.values()
             for tick in axis.majorTicks + axis.minorTicks for label in (tick.label1, tick.label2)}
    texts = [(text, text.get_fontfamily()) for text in (fig.findobj(Text) if fig is not None else [])
             if id(text) not in ticks]
    try:
        quiet.setLevel(logging.ERROR)
        for text, families in texts:
            text.set_fontfamily([name for family in families
                                 for name in ((own[family], _FALLBACK[family]) if family in own else (family,))])
        with matplotlib.rc_context(fonts), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield missing
        missing += sorted({str(w.message) for w in caught if "missing from" in str(w.message)})
    finally:
        quiet.setLevel(level)
        for text, families in texts:
            text.set_fontfamily(families)


@contextlib.contextmanager
def drawn_in(fig, language: str):
    """While the block runs, ``fig``'s words are in ``language``, drawn with that language's fonts.

    Every text and tick formatter is put back afterwards: the English drawing is the same before and after.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure; its texts are changed for the block only.
    language : str
        A language of :func:`languages`, with fonts in :data:`FONTS`.

    Yields
    ------
    tuple of (set of str, list of str)
        The messages looked up, and (filled when the block ends) the warnings of glyphs no font had.

    Examples
    --------
    >>> with drawn_in(figure, "zh_TW") as (used, missing):  # doctest: +SKIP
    ...     figure.savefig("zh.png")
    """
    from matplotlib.text import Text

    used: set = set()
    change = functools.partial(_translated_text, language=language, used=used)
    texts = [(text, text.get_text()) for text in fig.findobj(Text)]
    tickers = [ticker for ax in fig.axes for axis in ax._axis_map.values() for ticker in (axis.major, axis.minor)]
    formatters = [(ticker, ticker.formatter) for ticker in tickers]
    try:
        for text, english in texts:
            text.set_text(change(english))
        for ticker, formatter in formatters:
            ticker.formatter = _translating_formatter()(formatter, change)
        with fonts_of(language, fig) as missing:
            yield used, missing
    finally:
        for ticker, formatter in formatters:
            ticker.formatter = formatter
        for text, english in texts:
            text.set_text(english)


def _translated_text(text: str, language: str, used: set) -> str:
    return translate(text, language, used) if isinstance(text, str) and text else text


def _png_formatter(ip):
    def translations(fig) -> dict | None:
        if not languages():
            return None
        try:  # the kernel's own drawing of the figure (the inline backend's, once pyplot is imported)
            english = ip.display_formatter.formatters["image/png"].lookup(fig)
        except KeyError:
            return None
        drawings: dict[str, dict] = {}
        messages: set = set()
        missing: list[str] = []
        for language in languages():
            with drawn_in(fig, language) as (used, absent):
                png = english(fig)
            missing += absent
            png = png[0] if isinstance(png, tuple) else png
            png = base64.b64encode(png).decode("ascii") if isinstance(png, bytes) else png
            drawings[language] = {"image/png": png}
            messages |= used
        return output_entry(drawings, messages, missing)
    return translations


def install_formatter(ip=None) -> bool:
    """Give every matplotlib figure an IPython kernel displays its drawings in :func:`languages`.

    The drawings are one more entry of the figure's output, :data:`MIME`; it is installed only in the book's
    builds (:data:`ENV` set), once per kernel.

    Parameters
    ----------
    ip : IPython.core.interactiveshell.InteractiveShell, optional
        The shell; the running one by default.

    Returns
    -------
    bool
        Whether the formatter is installed (now or before).

    Examples
    --------
    >>> import os
    >>> install_formatter() if ENV not in os.environ else False
    False
    """
    if not languages():
        return False
    if ip is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        ip = get_ipython()
    if ip is None or MIME in ip.display_formatter.formatters:
        return ip is not None
    from IPython.core.formatters import BaseFormatter
    from matplotlib.figure import Figure

    draw = _png_formatter(ip)

    class TranslationsFormatter(BaseFormatter):
        """Draws a matplotlib Figure in the other languages; nothing else. Not a printer registered for the Figure
        type: the inline backend removes every formatter's Figure printer each time it sets up its own."""

        format_type = MIME
        _return_type = dict

        def __call__(self, obj):
            return draw(obj) if self.enabled and isinstance(obj, Figure) else None

    formatter = TranslationsFormatter(parent=ip.display_formatter)
    ip.display_formatter.formatters[MIME] = formatter
    return True
