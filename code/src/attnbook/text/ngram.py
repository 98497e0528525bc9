"""Character n-gram models, the baselines a language model has to beat: add-k and Kneser–Ney smoothing.

.. math:: p(c \\mid h) = \\frac{N(h, c) + k}{N(h) + k V}

with ``h`` the ``n - 1`` characters before (Lidstone's add-k smoothing); an unseen context gets ``1 / V``.
Interpolated modified Kneser–Ney (:func:`fit_kneser_ney`) backs off to shorter contexts instead.

>>> model = fit_ngram(np.array([0, 1, 0, 1, 0, 1]), order=2, vocab_size=2, k=0.5)
>>> round(float(ngram_probability(model, [0], 1)), 4)                   # 3 of 3 zeros were followed by 1
0.875
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..validation import check_positive_int

__all__ = ["KneserNeyModel", "NGramModel", "count_of_counts_discounts", "fit_kneser_ney", "fit_ngram",
           "kneser_ney_distribution", "ngram_bits_per_character", "ngram_character_bits", "ngram_coverage",
           "ngram_probability"]


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


def ngram_bits_per_character(model: NGramModel | KneserNeyModel, tokens) -> float:
    r"""Mean cross-entropy in bits of the characters of ``tokens`` from position ``order - 1`` on.

    .. math:: \text{bpc} = -\frac{1}{N - n + 1} \sum_{t \ge n - 1} \log_2 p(c_t \mid c_{t-n+1}, \dots, c_{t-1})

    Parameters
    ----------
    model : NGramModel or KneserNeyModel
        A fitted model: add-k (:func:`fit_ngram`) or Kneser–Ney (:func:`fit_kneser_ney`).
    tokens : array_like of int
        ``(N,)`` a text (usually held out).

    Returns
    -------
    float
        Bits per character: the mean of :func:`ngram_character_bits`.

    Examples
    --------
    >>> m = fit_ngram(np.array([0, 1, 0, 1]), 2, 2, k=1.0)
    >>> round(ngram_bits_per_character(m, [0, 1, 0]), 4)                # mean of -log2(3/4), -log2(2/3)
    0.5
    >>> kn = fit_kneser_ney(np.array([0, 1, 0, 1]), 2, 2, discounts=0.5)
    >>> round(ngram_bits_per_character(kn, [0, 1, 1]), 4)               # mean of -log2(0.875), -log2(0.25)
    1.0963
    """
    return float(np.mean(ngram_character_bits(model, tokens)))


def ngram_character_bits(model: NGramModel | KneserNeyModel, tokens) -> np.ndarray:
    r"""The bits of each character of ``tokens`` from position ``order - 1`` on: :math:`-\log_2 p(c_t \mid h_t)`.

    Parameters
    ----------
    model : NGramModel or KneserNeyModel
        A fitted model.
    tokens : array_like of int
        ``(N,)`` a text.

    Returns
    -------
    ndarray
        ``(N - n + 1,)`` float64: entry ``i`` scores character ``n - 1 + i``.

    Examples
    --------
    >>> m = fit_ngram(np.array([0, 1, 0, 1]), 2, 2, k=1.0)
    >>> ngram_character_bits(m, [0, 1, 1]).round(4).tolist()           # -log2(3/4), -log2(1/3)
    [0.415, 1.585]
    """
    tokens = _scored(model, tokens)
    if isinstance(model, KneserNeyModel):
        windows = np.lib.stride_tricks.sliding_window_view(tokens, model.order)  # (N - n + 1, n)
        return -np.log2(_kneser_ney(model, windows))  # (N - n + 1,)
    return -np.log2(probabilities(model, tokens))  # (N - n + 1,)


def _scored(model, tokens) -> np.ndarray:
    """``tokens`` checked against ``model``: ids of its vocabulary, at least ``order`` of them."""
    tokens, _, _ = _checked(tokens, model.order, model.vocab_size)
    if len(tokens) < model.order:
        raise ValueError(f"tokens has {len(tokens)} ids; at least order = {model.order} are needed")
    return tokens


def ngram_coverage(model: NGramModel, tokens) -> tuple[np.ndarray, np.ndarray]:
    """Which positions of ``tokens`` (from ``order - 1`` on) have a counted context, and a counted pair.

    Parameters
    ----------
    model : NGramModel
        A fitted model.
    tokens : array_like of int
        ``(N,)`` a text (usually held out).

    Returns
    -------
    context_seen, pair_seen : ndarray of bool
        ``(N - n + 1,)``: :math:`N(h) > 0` and :math:`N(h, c) > 0` at each position.

    Examples
    --------
    >>> m = fit_ngram(np.array([0, 1, 0, 1]), 2, 3)
    >>> [a.tolist() for a in ngram_coverage(m, [0, 1, 2, 2])]        # 0 -> 1 counted; 1 -> 2 not; 2 never a context
    [[True, True, False], [True, False, False]]
    """
    tokens = _scored(model, tokens)
    h = _contexts(tokens, model.order, model.vocab_size)  # (m,)
    pair = _lookup(model.keys, model.counts, h * model.vocab_size + tokens[model.order - 1:])  # (m,)
    return _lookup(model.context_keys, model.context_counts, h) > 0, pair > 0


# --- interpolated modified Kneser–Ney --------------------------------------------------------------------


class KneserNeyModel(NamedTuple):
    """The counts of a fitted modified Kneser–Ney model, one entry per order ``j = 1 .. n``.

    Attributes
    ----------
    order : int
        ``n``: the longest context is the ``n - 1`` characters before.
    vocab_size : int
        ``V``.
    discounts : ndarray
        ``(n, 3)``: row ``j - 1`` holds ``D_1, D_2, D_{3+}`` of order ``j``.
    keys, counts : tuple of ndarray
        Per order, the seen ``j``-grams as integers ``h V + c`` (sorted) and their counts: the raw count at
        order ``n``, the continuation count :math:`N_{1+}(\\bullet h c)` below it.
    context_keys, context_totals, context_backoffs : tuple of ndarray
        Per order, the seen contexts ``h`` (sorted), the sum of their counts :math:`T(h)` and the mass they
        hand down, :math:`D_1 N_1(h \\bullet) + D_2 N_2(h \\bullet) + D_{3+} N_{3+}(h \\bullet)`.

    Examples
    --------
    >>> m = fit_kneser_ney(np.array([0, 1, 1, 0, 1]), order=2, vocab_size=2, discounts=0.5)
    >>> m.counts[1].tolist(), m.counts[0].tolist()      # bigrams 01, 10, 11 once each; both ids follow one id
    ([2, 1, 1], [1, 2])
    """

    order: int
    vocab_size: int
    discounts: np.ndarray
    keys: tuple
    counts: tuple
    context_keys: tuple
    context_totals: tuple
    context_backoffs: tuple


def count_of_counts_discounts(counts) -> np.ndarray:
    r"""Chen and Goodman's discounts ``D_1, D_2, D_{3+}`` from the counts of one order.

    .. math:: Y = \frac{n_1}{n_1 + 2 n_2}, \qquad D_k = k - (k + 1)\, Y \frac{n_{k+1}}{n_k} \quad (k = 1, 2, 3)

    with :math:`n_k` the number of n-grams seen exactly ``k`` times; a ratio whose denominator is zero
    counts as zero, and each :math:`D_k` is clipped into :math:`[0, k]` so that no count goes negative.

    Parameters
    ----------
    counts : array_like of int
        ``(m,)`` positive counts of the n-grams of one order.

    Returns
    -------
    ndarray
        ``(3,)`` the discounts.

    Examples
    --------
    >>> count_of_counts_discounts([1, 1, 1, 1, 2, 2, 3, 4]).round(4).tolist()   # n = 4, 2, 1, 1
    [0.5, 1.25, 1.0]
    """
    counts = np.asarray(counts).reshape(-1)
    if counts.dtype.kind not in "iu" or (len(counts) and counts.min() < 1):
        raise ValueError("counts must be positive integers")
    n = np.array([np.sum(counts == k) for k in range(1, 5)], dtype=np.float64)  # (4,): n_1 .. n_4
    y = n[0] / (n[0] + 2 * n[1]) if n[0] + 2 * n[1] > 0 else 0.0
    ratio = np.divide(n[1:], n[:3], out=np.zeros(3), where=n[:3] > 0)  # (3,): n_{k+1} / n_k
    k = np.arange(1, 4)  # (3,)
    return np.clip(k - (k + 1) * y * ratio, 0, k)  # (3,)


def _checked_discounts(discounts, order: int) -> np.ndarray:
    d = np.broadcast_to(np.asarray(discounts, dtype=np.float64), (order, 3)) if np.ndim(discounts) < 2 \
        else np.asarray(discounts, dtype=np.float64)
    if d.shape != (order, 3):
        raise ValueError(f"discounts must be a number or an array of shape ({order}, 3), got {d.shape}")
    if not np.all(np.isfinite(d)) or np.any(d < 0) or np.any(d > np.arange(1, 4)):
        raise ValueError("discounts must satisfy 0 <= D_k <= k (D_1 <= 1, D_2 <= 2, D_3+ <= 3)")
    return d.copy()


def fit_kneser_ney(tokens, order: int, vocab_size: int, discounts=None) -> KneserNeyModel:
    r"""Count a training text for interpolated modified Kneser–Ney (Chen and Goodman 1999).

    With :math:`h'` the context :math:`h` without its oldest character,

    .. math:: p_j(c \mid h) = \frac{\max(N_j(h c) - D_j(N_j(h c)), 0)}{T_j(h)}
              + \frac{D_{j,1} N_1(h \bullet) + D_{j,2} N_2(h \bullet) + D_{j,3+} N_{3+}(h \bullet)}{T_j(h)}
              \, p_{j-1}(c \mid h'), \qquad p_0(c) = \frac{1}{V},

    where :math:`N_n` is the raw count at the top order and :math:`N_j(h c) = |\{a : N(a h c) > 0\}|`, the
    number of different characters seen before :math:`h c`, below it; :math:`T_j(h) = \sum_c N_j(h c)`,
    :math:`N_r(h \bullet)` counts the characters ``c`` with :math:`N_j(h c) = r` (``3+``: at least 3), and
    :math:`D_j(r)` is the discount of count class ``r``. A context with :math:`T_j(h) = 0` passes
    :math:`p_{j-1}` on unchanged. Each order's probabilities sum to one over the vocabulary.

    Parameters
    ----------
    tokens : array_like of int
        ``(N,)`` the training text as ids in ``0 .. V - 1``.
    order, vocab_size : int
        ``n`` (1 counts characters alone) and ``V``.
    discounts : float or array_like, optional
        ``D``: one number for every order and count class, or ``(n, 3)`` rows ``D_1, D_2, D_{3+}`` of the
        orders ``1 .. n``, with ``0 <= D_k <= k``. Default: each order's
        :func:`count_of_counts_discounts`.

    Returns
    -------
    KneserNeyModel
        The counts.

    Examples
    --------
    >>> m = fit_kneser_ney(np.array([0, 1, 0, 1, 0, 1]), order=2, vocab_size=2, discounts=0.5)
    >>> kneser_ney_distribution(m, [0]).round(4).tolist()     # 0 -> 1 three times: (3 - .5) / 3 + (.5 / 3) / 2
    [0.0833, 0.9167]
    """
    tokens, order, vocab_size = _checked(tokens, order, vocab_size)
    if len(tokens) < order:
        raise ValueError(f"tokens has {len(tokens)} ids; an order-{order} model needs at least {order}")
    grams = [np.unique(_contexts(tokens, j, vocab_size) * vocab_size + tokens[j - 1:], return_counts=True)
             for j in range(1, order + 1)]  # per order j: (seen j-grams,), (their raw counts,)
    tables = [np.unique(grams[j][0] % vocab_size ** j, return_counts=True)  # drop the oldest character
              for j in range(1, order)] + [grams[-1]]  # continuation counts below n, raw counts at n
    d = np.stack([count_of_counts_discounts(c) for _, c in tables]) if discounts is None \
        else _checked_discounts(discounts, order)  # (n, 3)
    context_keys, totals, backoffs = [], [], []
    for (keys, counts), dj in zip(tables, d):
        handed = dj[np.minimum(counts, 3) - 1]  # (m,): the discount of each n-gram's count class
        h = keys // vocab_size  # (m,): sorted, since the keys are
        first = np.flatnonzero(np.r_[True, h[1:] != h[:-1]])  # (contexts,): where each context's run starts
        context_keys.append(h[first])
        totals.append(np.add.reduceat(counts, first))  # (contexts,)
        backoffs.append(np.add.reduceat(np.minimum(handed, counts), first))  # (contexts,)
    return KneserNeyModel(order, vocab_size, d, tuple(k for k, _ in tables), tuple(c for _, c in tables),
                          tuple(context_keys), tuple(totals), tuple(backoffs))


def _kneser_ney(model: KneserNeyModel, windows: np.ndarray) -> np.ndarray:
    """Unchecked kernel: ``p(c | h)`` for rows ``(h..., c)`` of ``windows`` ``(Q, m)``, ``m <= order``.

    >>> m = fit_kneser_ney(np.array([0, 1, 0, 1]), 2, 2, discounts=0.5)
    >>> _kneser_ney(m, np.array([[0, 1], [1, 1]])).round(4).tolist()
    [0.875, 0.25]
    """
    n_rows, m = windows.shape
    V = model.vocab_size
    c = windows[:, -1]  # (Q,): the characters scored
    h = np.zeros(n_rows, dtype=np.int64)  # (Q,): the context of order j, oldest character most significant
    p = np.full(n_rows, 1.0 / V)  # (Q,): order 0, uniform
    for j in range(1, m + 1):
        if j > 1:
            h = h + windows[:, m - j] * V ** (j - 2)  # (Q,): one older character in front
        level = j - 1  # the stored tables of order j: raw counts at the top order, continuation counts below
        count = _lookup(model.keys[level], model.counts[level], h * V + c)  # (Q,)
        total = _lookup(model.context_keys[level], model.context_totals[level], h)  # (Q,)
        backoff = _lookup(model.context_keys[level], model.context_backoffs[level], h)  # (Q,)
        discount = np.where(count > 0, model.discounts[level][np.clip(count, 1, 3) - 1], 0.0)  # (Q,)
        seen = total > 0  # (Q,)
        safe = np.where(seen, total, 1)  # (Q,)
        p = np.where(seen, (np.maximum(count - discount, 0) + backoff * p) / safe, p)  # (Q,)
    return p


def kneser_ney_distribution(model: KneserNeyModel, context) -> np.ndarray:
    """The model's distribution of the next character after ``context``, over the whole vocabulary.

    Parameters
    ----------
    model : KneserNeyModel
        A fitted model.
    context : array_like of int
        The characters before, as ids; only the last ``order - 1`` are read. A shorter context (even an
        empty one) is scored at its own length: order ``len(context) + 1`` of the recursion.

    Returns
    -------
    ndarray
        ``(V,)`` probabilities that sum to one.

    Examples
    --------
    >>> m = fit_kneser_ney(np.array([0, 1, 0, 1]), 2, 2, discounts=0.5)
    >>> kneser_ney_distribution(m, []).tolist()                          # each id follows one other id
    [0.5, 0.5]
    """
    context = np.asarray(context).reshape(-1)
    if len(context) and context.dtype.kind not in "iu":
        raise TypeError(f"context has dtype {context.dtype}; expected integer ids")
    if len(context) and (context.min() < 0 or context.max() >= model.vocab_size):
        raise ValueError(f"context must be ids in 0 .. {model.vocab_size - 1}")
    tail = context[max(len(context) - (model.order - 1), 0):].astype(np.int64)  # (m - 1,)
    V = model.vocab_size
    windows = np.concatenate([np.broadcast_to(tail, (V, len(tail))), np.arange(V)[:, None]], axis=1)  # (V, m)
    return _kneser_ney(model, windows)  # (V,)

