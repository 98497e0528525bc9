"""A character n-gram model with add-k smoothing: the baseline a language model has to beat.

.. math:: p(c \\mid h) = \\frac{N(h, c) + k}{N(h) + k V}

with ``h`` the ``n - 1`` characters before (Lidstone's add-k smoothing); an unseen context gets ``1 / V``.

>>> model = fit_ngram(np.array([0, 1, 0, 1, 0, 1]), order=2, vocab_size=2, k=0.5)
>>> round(float(ngram_probability(model, [0], 1)), 4)                   # 3 of 3 zeros were followed by 1
0.875
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..validation import check_positive_int

__all__ = ["NGramModel", "fit_ngram", "ngram_bits_per_character", "ngram_probability"]


class NGramModel(NamedTuple):
    """The counts of a fitted n-gram model, sorted by key for look-up.

    Attributes
    ----------
    order : int
        ``n``: the context is the ``n - 1`` characters before.
    vocab_size : int
        ``V``.
    k : float
        The added count.
    keys, counts : ndarray
        The seen (context, character) pairs as integers ``h V + c`` (``h`` the context read as a base-``V``
        number), sorted, and how often each occurred.
    context_keys, context_counts : ndarray
        The seen contexts, sorted, and how often each was followed by a character.

    Examples
    --------
    >>> fit_ngram(np.array([0, 1, 1]), order=2, vocab_size=2).keys.tolist()      # pairs (0, 1), (1, 1)
    [1, 3]
    """

    order: int
    vocab_size: int
    k: float
    keys: np.ndarray
    counts: np.ndarray
    context_keys: np.ndarray
    context_counts: np.ndarray


def _contexts(tokens: np.ndarray, order: int, vocab_size: int) -> np.ndarray:
    """The context of every position from ``order - 1`` on, as a base-V integer ``(len - order + 1,)``."""
    n = len(tokens) - order + 1
    h = np.zeros(n, dtype=np.int64)  # (n,)
    for j in range(order - 1):  # the oldest character is the most significant digit
        h = h * vocab_size + tokens[j:j + n]
    return h


def _checked(tokens, order, vocab_size) -> tuple:
    tokens = np.asarray(tokens).reshape(-1)
    if tokens.dtype.kind not in "iu":
        raise TypeError(f"tokens has dtype {tokens.dtype}; expected integer ids")
    order, vocab_size = check_positive_int(order, "order"), check_positive_int(vocab_size, "vocab_size")
    if vocab_size ** order >= 2 ** 62:
        raise ValueError(f"vocab_size ** order = {vocab_size}^{order} does not fit the integer keys")
    if len(tokens) and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(f"tokens must be ids in 0 .. {vocab_size - 1}")
    return tokens.astype(np.int64), order, vocab_size


def fit_ngram(tokens, order: int, vocab_size: int, k: float = 0.01) -> NGramModel:
    """Count the (context, character) pairs of a training text.

    Parameters
    ----------
    tokens : array_like of int
        ``(N,)`` the training text as ids in ``0 .. V - 1``.
    order, vocab_size : int
        ``n`` (1 counts characters alone) and ``V``, as in :class:`NGramModel`.
    k : float, optional
        The added count (positive). Default ``0.01``.

    Returns
    -------
    NGramModel
        The counts.

    Examples
    --------
    >>> fit_ngram(np.array([0, 1, 1]), order=2, vocab_size=2, k=0.0)
    Traceback (most recent call last):
    ...
    ValueError: k must be a positive number, got 0.0
    """
    tokens, order, vocab_size = _checked(tokens, order, vocab_size)
    if isinstance(k, bool) or not isinstance(k, (int, float)) or not (math.isfinite(k) and k > 0):
        raise ValueError(f"k must be a positive number, got {k!r}")
    if len(tokens) < order:
        raise ValueError(f"tokens has {len(tokens)} ids; an order-{order} model needs at least {order}")
    h = _contexts(tokens, order, vocab_size)  # (N - n + 1,)
    keys, counts = np.unique(h * vocab_size + tokens[order - 1:], return_counts=True)
    context_keys, context_counts = np.unique(h, return_counts=True)
    return NGramModel(order, vocab_size, float(k), keys, counts, context_keys, context_counts)


def _lookup(sorted_keys: np.ndarray, counts: np.ndarray, queries: np.ndarray) -> np.ndarray:
    at = np.clip(np.searchsorted(sorted_keys, queries), 0, max(len(sorted_keys) - 1, 0))  # (m,)
    return np.where(sorted_keys[at] == queries, counts[at], 0)  # (m,)


def probabilities(model: NGramModel, tokens: np.ndarray) -> np.ndarray:
    """Unchecked kernel: ``p(c_t | c_{t-n+1} .. c_{t-1})`` for every ``t >= n - 1`` of ``tokens``.

    >>> m = fit_ngram(np.array([0, 1, 0, 1]), 2, 2, k=1.0)
    >>> probabilities(m, np.array([0, 1, 1])).round(4).tolist()        # 0 -> 1 seen twice; 1 -> 1 never
    [0.75, 0.3333]
    """
    h = _contexts(tokens, model.order, model.vocab_size)  # (m,)
    pair = _lookup(model.keys, model.counts, h * model.vocab_size + tokens[model.order - 1:])  # (m,)
    context = _lookup(model.context_keys, model.context_counts, h)  # (m,)
    return (pair + model.k) / (context + model.k * model.vocab_size)  # (m,)


def ngram_probability(model: NGramModel, context, character: int) -> float:
    """The model's probability of ``character`` after ``context`` (its last ``order - 1`` ids).

    Parameters
    ----------
    model, context, character
        A fitted model; at least ``order - 1`` ids; an id.

    Returns
    -------
    float

    Examples
    --------
    >>> m = fit_ngram(np.array([0, 1, 0, 1]), 2, 2, k=1.0)
    >>> round(ngram_probability(m, [1], 0), 4)                          # (1 + 1) / (1 + 2)
    0.6667
    """
    context = np.asarray(context, dtype=np.int64).reshape(-1)
    if len(context) < model.order - 1:
        raise ValueError(f"context has {len(context)} ids; an order-{model.order} model needs {model.order - 1}")
    tail = context[len(context) - (model.order - 1):] if model.order > 1 else context[:0]
    return float(probabilities(model, np.concatenate([tail, [int(character)]]))[0])


def ngram_bits_per_character(model: NGramModel, tokens) -> float:
    r"""Mean cross-entropy in bits of the characters of ``tokens`` from position ``order - 1`` on.

    .. math:: \text{bpc} = -\frac{1}{N - n + 1} \sum_{t \ge n - 1} \log_2 p(c_t \mid c_{t-n+1}, \dots, c_{t-1})

    Parameters
    ----------
    model : NGramModel
        A fitted model.
    tokens : array_like of int
        ``(N,)`` a text (usually held out).

    Returns
    -------
    float
        Bits per character.

    Examples
    --------
    >>> m = fit_ngram(np.array([0, 1, 0, 1]), 2, 2, k=1.0)
    >>> round(ngram_bits_per_character(m, [0, 1, 0]), 4)                # mean of -log2(3/4), -log2(2/3)
    0.5
    """
    tokens, _, _ = _checked(tokens, model.order, model.vocab_size)
    if len(tokens) < model.order:
        raise ValueError(f"tokens has {len(tokens)} ids; at least order = {model.order} are needed")
    return float(-np.mean(np.log2(probabilities(model, tokens))))
