"""The GPT's data: the Shakespeare corpus as characters, their codec, and the train/held-out split.

The vocabulary is the corpus's own 76 characters (:func:`attnbook.text.corpus.shakespeare`), sorted;
the **training split** is the first seven plays, the **held-out split** the eighth, *Twelfth Night*, which
the GPT (:mod:`attnbook.learning.models.gpt`) never reads while it trains. Choices made before the held-out play
is scored (an n-gram's order, a training length) are made on the **validation slice**, the training split's last
characters, as many as the held-out play has, with models fitted to the rest (:func:`validation_splits`).

>>> decode_chars(encode_chars("To be")), len(vocabulary())
('To be', 76)
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..text.corpus import shakespeare

__all__ = ["HELD_OUT_PLAY", "decode_chars", "encode_chars", "splits", "validation_splits", "vocabulary"]

HELD_OUT_PLAY = "TWELFTH NIGHT"  #: the title line where the held-out split (the corpus's last play) begins


@lru_cache(maxsize=1)
def vocabulary() -> str:
    """The model's characters: every character of the corpus, sorted (76 of them).

    Returns
    -------
    str
        The characters; character ``vocabulary()[i]`` is token ``i``.

    Examples
    --------
    >>> v = vocabulary()
    >>> len(v), v[:3] == "\\n !", v.index("a") > v.index("A")
    (76, True, True)
    """
    return "".join(sorted(set(shakespeare())))


def encode_chars(text: str) -> np.ndarray:
    """Characters to token ids ``(len(text),)``; a character outside the vocabulary is an error.

    Parameters
    ----------
    text : str
        ASCII text of the corpus's characters.

    Returns
    -------
    ndarray
        ``(len(text),)`` int64.

    Examples
    --------
    >>> decode_chars(encode_chars("To be"))
    'To be'
    >>> encode_chars("caf\\u00e9")
    Traceback (most recent call last):
    ...
    ValueError: 'é' is not one of the model's 76 characters
    """
    index = {c: i for i, c in enumerate(vocabulary())}
    for c in text:
        if c not in index:
            raise ValueError(f"{c!r} is not one of the model's {len(index)} characters")
    return np.fromiter((index[c] for c in text), dtype=np.int64, count=len(text))


def decode_chars(tokens) -> str:
    """Token ids back to characters.

    Parameters
    ----------
    tokens : array_like of int
        ``(n,)`` ids in ``0 .. 75``.

    Returns
    -------
    str

    Examples
    --------
    >>> decode_chars([0, 1])
    '\\n '
    """
    v = vocabulary()
    return "".join(v[int(t)] for t in np.asarray(tokens).reshape(-1))


@lru_cache(maxsize=1)
def splits() -> tuple[np.ndarray, np.ndarray]:
    """The corpus as token ids, cut where its last play begins: ``(train, held_out)``.

    Returns
    -------
    tuple of ndarray
        ``train`` (the first seven plays) and ``held_out`` (*Twelfth Night*), int64, read-only.

    Examples
    --------
    >>> train, held_out = splits()
    >>> decode_chars(held_out[:13]), len(train) + len(held_out) == len(shakespeare())
    ('TWELFTH NIGHT', True)
    """
    text = shakespeare()
    cut = text.index(HELD_OUT_PLAY)
    tokens = encode_chars(text)
    train, held_out = tokens[:cut], tokens[cut:]
    train.flags.writeable = held_out.flags.writeable = False
    return train, held_out


@lru_cache(maxsize=1)
def validation_splits() -> tuple[np.ndarray, np.ndarray]:
    """The training split cut in two for choices made before the held-out play is read: ``(fitted, validation)``.

    ``validation`` is the training split's last ``len(held_out)`` characters (the end of the seventh play);
    ``fitted`` is the rest. A model fitted to ``fitted`` and scored on ``validation`` chooses settings
    without reading *Twelfth Night*.

    Returns
    -------
    tuple of ndarray
        ``fitted`` and ``validation``, int64, read-only; together they are ``splits()[0]``.

    Examples
    --------
    >>> fitted, validation = validation_splits()
    >>> train, held_out = splits()
    >>> len(validation) == len(held_out), np.array_equal(np.concatenate([fitted, validation]), train)
    (True, True)
    """
    train, held_out = splits()
    return train[: -len(held_out)], train[-len(held_out):]
