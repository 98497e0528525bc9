"""The book's glossary as package data, for the semantic search of "Attention in a pretrained model".

``data/text/glossary.tsv`` holds each entry of chapters/glossary.md, its term and its definition in English
(the Chinese terms, cross-reference roles and the pointer to a chapter cut), written by
``python -m tools.make_glossary``; a test checks that it equals what the glossary page says. A notebook
opened alone (Colab) thus searches the glossary without downloading it.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

__all__ = ["glossary_entries"]


@lru_cache(maxsize=1)
def glossary_entries() -> tuple[tuple[str, str], ...]:
    """The glossary's entries, ``(term, definition)`` in the glossary's (alphabetical) order.

    Returns
    -------
    tuple of (str, str)
        One pair per entry; the definition is plain English, its mathematics in TeX between dollars.

    Examples
    --------
    >>> entries = glossary_entries()
    >>> entries[0][0], entries[0][1].split()[:3]
    ('Ablation', ['An', 'experiment', 'that'])
    >>> dict(entries)["Softmax"].startswith("The map")
    True
    """
    text = resources.files("attnbook").joinpath("data/text/glossary.tsv").read_text(encoding="utf-8")
    return tuple(tuple(line.split("\t")) for line in text.splitlines())  # type: ignore[misc]
