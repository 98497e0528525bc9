"""Data for attention that learns: tasks whose answers are known, so what a model learns can be checked.

Reversal (:func:`reversal_batch`), repeated random tokens (:func:`repeated_sequence_batch`), associative
recall and the most recent signal; the digits are :mod:`attnbook.learning.digits`. Token conventions of the
sequence tasks: ``PAD = 0``, ``BOS = 1``, ``EOS = 2``; the symbols are ``FIRST_SYMBOL = 3`` onwards, so a
task with ``n_symbols`` symbols has ``n_symbols + 3`` tokens.

>>> batch = reversal_batch(1, n_symbols=5, min_length=4, max_length=4, seed=0)
>>> batch.source.tolist(), batch.target_out.tolist()
([[7, 6, 5, 4]], [[4, 5, 6, 7, 2]])
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..validation import as_float_array, check_positive_int, check_seed

__all__ = [
    "BOS",
    "EOS",
    "FIRST_SYMBOL",
    "PAD",
    "RecallBatch",
    "InContextLoss",
    "Seq2SeqBatch",
    "alignment_agreement",
    "check_seq2seq_batch",
    "check_tokens",
    "associative_recall_batch",
    "recency_batch",
    "in_context_loss",
    "repeated_sequence_batch",
    "reversal_alignment",
    "reversal_batch",
]

PAD, BOS, EOS = 0, 1, 2
FIRST_SYMBOL = 3


# --- reversal: sequence to sequence with a known alignment ------------------------------------------------


class Seq2SeqBatch(NamedTuple):
    """A padded batch of (source, target) pairs for an encoder-decoder, with teacher forcing.

    Attributes
    ----------
    source : ndarray
        ``(batch, n_src)`` int64 source tokens, PAD after each sequence's end.
    target_in : ndarray
        ``(batch, n_tgt)`` the decoder's input: BOS, then the target, then PAD (``n_tgt = n_src + 1``).
    target_out : ndarray
        ``(batch, n_tgt)`` what the decoder must predict: the target, then EOS, then PAD.
    source_mask : ndarray
        ``(batch, n_src)`` bool, True on real source tokens.
    target_mask : ndarray
        ``(batch, n_tgt)`` bool, True on real target positions (those whose loss counts).

    Examples
    --------
    >>> b = reversal_batch(1, n_symbols=4, min_length=3, max_length=3, seed=0)
    >>> b.source.tolist(), b.target_in.tolist(), b.target_out.tolist()
    ([[6, 5, 5]], [[1, 5, 5, 6]], [[5, 5, 6, 2]])
    """

    source: np.ndarray  # (batch, n_src)
    target_in: np.ndarray  # (batch, n_tgt): BOS + target + PAD
    target_out: np.ndarray  # (batch, n_tgt): target + EOS + PAD
    source_mask: np.ndarray  # (batch, n_src): True on real tokens
    target_mask: np.ndarray  # (batch, n_tgt): True on real positions


def check_tokens(tokens, name: str, vocab_size: int, real: bool = False) -> np.ndarray:
    """Tokens ``(batch, n)``: integers in ``0 .. vocab_size - 1``, ``n > 0`` (and, ``real``, a real token per row).

    Parameters
    ----------
    tokens, name, vocab_size
        The tokens, their name in errors, the model's vocabulary.
    real : bool, optional
        Refuse a row of padding only (a source must hold a string).

    Returns
    -------
    ndarray
        ``(batch, n)`` int64.

    Examples
    --------
    >>> check_tokens([[0, 0]], "source", 13, real=True)
    Traceback (most recent call last):
    ...
    ValueError: source has a row of padding only; every source needs a real token
    """
    tokens = np.asarray(tokens)  # (batch, n)
    if tokens.ndim != 2 or tokens.dtype.kind not in "iu" or tokens.shape[1] == 0:
        raise ValueError(f"{name} must be a (batch, n) array of integer tokens with n > 0, got shape "
                         f"{tokens.shape} and dtype {tokens.dtype}")
    if np.any((tokens < 0) | (tokens >= vocab_size)):
        raise ValueError(f"{name} holds tokens outside 0 .. {vocab_size - 1}")
    if real and not np.all((tokens != PAD).any(axis=1)):
        raise ValueError(f"{name} has a row of padding only; every source needs a real token")
    return tokens.astype(np.int64, copy=False)


def check_seq2seq_batch(batch, vocab_size: int) -> Seq2SeqBatch:
    """A :class:`Seq2SeqBatch` whose arrays fit each other, or an error naming the field.

    Parameters
    ----------
    batch : Seq2SeqBatch
        Sources and targets.
    vocab_size : int
        The model's vocabulary.

    Returns
    -------
    Seq2SeqBatch
        The batch, its tokens int64.

    Examples
    --------
    >>> check_seq2seq_batch((1, 2), 13)
    Traceback (most recent call last):
    ...
    TypeError: batch must be a Seq2SeqBatch (see reversal_batch), got tuple
    """
    if not isinstance(batch, Seq2SeqBatch):
        raise TypeError(f"batch must be a Seq2SeqBatch (see reversal_batch), got {type(batch).__name__}")
    source = check_tokens(batch.source, "source", vocab_size, real=True)  # (batch, n_src)
    target_in = check_tokens(batch.target_in, "batch.target_in", vocab_size)  # (batch, n_tgt)
    target_out = check_tokens(batch.target_out, "batch.target_out", vocab_size)  # (batch, n_tgt)
    source_mask, target_mask = np.asarray(batch.source_mask), np.asarray(batch.target_mask)  # (batch, n)
    for name, array, shape in (("target_in", target_in, (source.shape[0], target_in.shape[1])),
                               ("target_out", target_out, target_in.shape), ("source_mask", source_mask, source.shape),
                               ("target_mask", target_mask, target_in.shape)):
        if array.shape != shape:
            raise ValueError(f"batch.{name} has shape {array.shape}; expected {shape}")
    if source_mask.dtype != bool or target_mask.dtype != bool:
        raise TypeError("batch.source_mask and batch.target_mask must be boolean")
    if not np.array_equal(source_mask, source != PAD):
        raise ValueError("batch.source_mask must be True exactly on the source's real (non-PAD) tokens")
    if not target_mask.any():
        raise ValueError("batch.target_mask is False everywhere; the mean loss of no positions is undefined")
    return Seq2SeqBatch(source, target_in, target_out, source_mask, target_mask)


def reversal_batch(n_sequences: int, n_symbols: int, min_length: int, max_length: int,
                   seed: int | np.random.Generator = 0) -> Seq2SeqBatch:
    r"""Random symbol strings of random length, each with its reversal as the target.

    .. math:: y_i = x_{\ell - 1 - i}, \qquad i = 0, \dots, \ell - 1

    Lengths and symbols are uniform; arrays are padded with PAD to the batch's longest sequence. The
    alignment is :func:`reversal_alignment`.

    Parameters
    ----------
    n_sequences, n_symbols : int
        Batch size; number of distinct symbols.
    min_length, max_length : int
        The shortest and longest source, ``1 <= min_length <= max_length``.
    seed : int or numpy Generator, optional
        The random source.

    Returns
    -------
    Seq2SeqBatch
        Source ``(batch, n_src)``, target_in and target_out ``(batch, n_src + 1)``, and their masks,
        where ``n_src`` is the longest length drawn.

    Examples
    --------
    >>> b = reversal_batch(3, n_symbols=6, min_length=1, max_length=4, seed=1)
    >>> b.source.shape[1] + 1 == b.target_in.shape[1], b.source_mask.sum(axis=1).tolist()
    (True, [2, 3, 4])
    >>> bool(np.all((b.target_out == EOS).sum(axis=1) == 1))
    True
    >>> reversal_batch(1, n_symbols=3, min_length=4, max_length=2)
    Traceback (most recent call last):
    ...
    ValueError: min_length = 4 is more than max_length = 2
    """
    n_sequences = check_positive_int(n_sequences, "n_sequences")
    n_symbols = check_positive_int(n_symbols, "n_symbols")
    min_length = check_positive_int(min_length, "min_length")
    max_length = check_positive_int(max_length, "max_length")
    if min_length > max_length:
        raise ValueError(f"min_length = {min_length} is more than max_length = {max_length}")
    return draw_reversal(check_seed(seed), n_sequences, n_symbols, min_length, max_length)


def draw_reversal(rng: np.random.Generator, n_sequences: int, n_symbols: int, min_length: int,
                  max_length: int) -> Seq2SeqBatch:
    """Unchecked kernel of :func:`reversal_batch`.

    >>> draw_reversal(np.random.default_rng(0), 2, 3, 2, 2).target_out.shape
    (2, 3)
    """
    lengths = rng.integers(min_length, max_length + 1, size=n_sequences)  # (batch,)
    n_src = int(lengths.max())
    symbols = rng.integers(FIRST_SYMBOL, FIRST_SYMBOL + n_symbols, size=(n_sequences, n_src))  # (batch, n_src)
    positions = np.arange(n_src)  # (n_src,)
    source_mask = positions < lengths[:, None]  # (batch, n_src)
    source = np.where(source_mask, symbols, PAD)  # (batch, n_src)
    backwards = np.clip(lengths[:, None] - 1 - positions, 0, None)  # (batch, n_src): l - 1 - i
    reversed_ = np.where(source_mask, np.take_along_axis(source, backwards, axis=1), PAD)  # (batch, n_src)
    padded = np.concatenate([reversed_, np.full((n_sequences, 1), PAD)], axis=1)  # (batch, n_src + 1)
    target_out = padded.copy()  # (batch, n_src + 1)
    target_out[np.arange(n_sequences), lengths] = EOS
    target_in = np.concatenate([np.full((n_sequences, 1), BOS), reversed_], axis=1)  # (batch, n_src + 1)
    target_mask = np.arange(n_src + 1) <= lengths[:, None]  # (batch, n_src + 1)
    return Seq2SeqBatch(source.astype(np.int64), target_in.astype(np.int64), target_out.astype(np.int64),
                        source_mask, target_mask)


def reversal_alignment(lengths, n_source: int | None = None, n_target: int | None = None) -> np.ndarray:
    r"""The cross-attention map that solves reversal: decoder position ``i`` on source position ``len - 1 - i``.

    .. math:: A_{i j} = [\, j = \ell - 1 - i \,], \qquad 0 \le i < \ell

    Rows of the EOS prediction (``i = len``) and of padding are zero.

    Parameters
    ----------
    lengths : array_like of int
        ``(batch,)`` source lengths, e.g. ``batch.source_mask.sum(axis=1)``.
    n_source, n_target : int, optional
        Columns and rows; default the batch's ``n_src = max(lengths)`` and ``n_tgt = n_src + 1``.

    Returns
    -------
    ndarray
        ``(batch, n_target, n_source)`` float, a one-hot row for each real output symbol.

    Examples
    --------
    >>> reversal_alignment([3, 2])[1].astype(int).tolist()
    [[0, 1, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0]]
    """
    lengths = np.asarray(lengths)  # (batch,)
    if lengths.ndim != 1 or lengths.size == 0 or lengths.dtype.kind not in "iu" or np.any(lengths < 1):
        raise ValueError(f"lengths must be a non-empty 1-D array of positive integers, got {lengths!r}")
    longest = int(lengths.max())
    n_source = longest if n_source is None else check_positive_int(n_source, "n_source", longest)
    n_target = longest + 1 if n_target is None else check_positive_int(n_target, "n_target")
    rows = np.arange(n_target)[:, None]  # (n_target, 1)
    columns = np.arange(n_source)[None, :]  # (1, n_source)
    ell = lengths[:, None, None]  # (batch, 1, 1)
    return ((columns == ell - 1 - rows) & (rows < ell)).astype(np.float64)  # (batch, n_target, n_source)


def alignment_agreement(weights, lengths) -> float:
    r"""Share of real output symbols whose largest cross-attention weight falls on the reversal's source position.

    .. math:: \frac{1}{\sum_b \ell_b} \sum_b \sum_{i < \ell_b} [\, \arg\max_j w_{b i j} = \ell_b - 1 - i \,]

    Parameters
    ----------
    weights : array_like
        ``(batch, n_tgt, n_src)`` cross-attention weights (average the heads first, or pass one head).
    lengths : array_like of int
        As in :func:`reversal_alignment`.

    Returns
    -------
    float
        The agreement, in ``[0, 1]``; 1 for :func:`reversal_alignment` itself.

    Examples
    --------
    >>> alignment_agreement(reversal_alignment([3, 1]), [3, 1])
    1.0
    >>> alignment_agreement(np.full((1, 3, 2), 0.5), [2])
    0.5
    """
    weights = as_float_array(weights, "weights")  # (batch, n_tgt, n_src)
    lengths = np.asarray(lengths)  # (batch,)
    if weights.ndim != 3 or lengths.shape != weights.shape[:1]:
        raise ValueError(f"weights must be (batch, n_tgt, n_src) and lengths (batch,); got shapes "
                         f"{weights.shape} and {lengths.shape}")
    expected = reversal_alignment(lengths, weights.shape[2], weights.shape[1])  # (batch, n_tgt, n_src)
    real = expected.any(axis=2)  # (batch, n_tgt): output positions with a source position
    hits = weights.argmax(axis=2) == expected.argmax(axis=2)  # (batch, n_tgt)
    return float(hits[real].mean())


# --- repeated random tokens: the induction task -----------------------------------------------------------


def repeated_sequence_batch(n_sequences: int, half_length: int, vocab_size: int,
                            seed: int | np.random.Generator = 0) -> np.ndarray:
    r"""Random tokens, then the same tokens again: the task that an induction head solves.

    .. math:: x_{h + t} = x_t, \qquad x_0, \dots, x_{h-1} \sim \mathrm{Uniform}\{0, \dots, V - 1\}

    The first half's loss is at least :math:`\ln V`; copying drives the second half's towards 0
    (:func:`in_context_loss` splits them). No PAD, BOS or EOS.

    Parameters
    ----------
    n_sequences, half_length, vocab_size : int
        Batch size; :math:`h`, at least 2; :math:`V`, tokens ``0 .. V - 1``, at least 2.
    seed : int or numpy Generator, optional
        The random source.

    Returns
    -------
    ndarray
        ``(n_sequences, 2 * half_length)`` int64.

    Examples
    --------
    >>> repeated_sequence_batch(1, half_length=4, vocab_size=10, seed=0).tolist()
    [[8, 6, 5, 2, 8, 6, 5, 2]]
    """
    n_sequences = check_positive_int(n_sequences, "n_sequences")
    half_length = check_positive_int(half_length, "half_length", 2)
    vocab_size = check_positive_int(vocab_size, "vocab_size", 2)
    first = check_seed(seed).integers(0, vocab_size, size=(n_sequences, half_length))  # (batch, h)
    return np.concatenate([first, first], axis=1).astype(np.int64)  # (batch, 2h)


class InContextLoss(NamedTuple):
    """Mean next-token losses of the two halves of a repeated sequence (see :func:`in_context_loss`).

    Attributes
    ----------
    first_half : float
        Mean loss of predicting tokens ``1 .. h - 1``: at least ``ln V`` in expectation.
    second_half : float
        Mean loss of predicting tokens ``h + 1 .. 2h - 1``: the copyable ones.

    Examples
    --------
    >>> in_context_loss(np.ones((1, 5))).first_half
    1.0
    """

    first_half: float
    second_half: float


def in_context_loss(losses) -> InContextLoss:
    r"""Split per-position next-token losses of repeated sequences into the two halves' means.

    .. math:: L_1 = \operatorname{mean}_{1 \le t < h} \ell_t, \qquad L_2 = \operatorname{mean}_{h < t < 2h} \ell_t

    where :math:`\ell_t` is the loss of predicting token :math:`t`; that of :math:`x_h` counts in neither half.

    Parameters
    ----------
    losses : array_like
        ``(..., 2h - 1)`` losses, entry ``t - 1`` that of predicting token ``t``: the layout of
        ``logits[:, :-1]`` against ``tokens[:, 1:]``.

    Returns
    -------
    InContextLoss
        ``(first_half, second_half)``.

    Examples
    --------
    >>> in_context_loss([[2.3, 2.3, 2.3, 0.1, 0.1]])  # h = 3: targets 1, 2 | 3 left out | 4, 5
    InContextLoss(first_half=2.3, second_half=0.1)
    """
    losses = as_float_array(losses, "losses")  # (..., 2h - 1)
    if losses.ndim == 0 or losses.shape[-1] % 2 == 0 or losses.shape[-1] < 3:
        raise ValueError(f"losses must have an odd last axis 2h - 1 >= 3 (one loss per predicted token), "
                         f"got shape {losses.shape}")
    h = (losses.shape[-1] + 1) // 2
    return InContextLoss(float(losses[..., : h - 1].mean()), float(losses[..., h:].mean()))


# --- associative recall: look a key up -----------------------------------------------------------------


class RecallBatch(NamedTuple):
    """A batch of associative-recall sequences (``d_in = n_keys + n_values``); see :func:`associative_recall_batch`.

    Attributes
    ----------
    context, queries : ndarray
        ``(batch, n_pairs, d_in)`` the pairs (a one-hot key, then a one-hot value) and ``(batch, n_queries,
        d_in)`` the questions (a one-hot key, the value part zero).
    targets : ndarray
        ``(batch, n_queries)`` the value paired with each query's key.
    keys, values : ndarray
        ``(batch, n_pairs)`` the symbols: keys distinct within a sequence.
    answer_positions : ndarray
        ``(batch, n_queries)`` the pair that holds each query's key.

    Examples
    --------
    >>> batch = associative_recall_batch(1, n_pairs=2, n_keys=3, n_values=2, seed=0)
    >>> batch.keys.tolist(), batch.queries[0, 0].tolist(), batch.answer_positions.tolist()
    ([[2, 1]], [0.0, 0.0, 1.0, 0.0, 0.0], [[0]])
    """

    context: np.ndarray  # (batch, n_pairs, d_in)
    queries: np.ndarray  # (batch, n_queries, d_in)
    targets: np.ndarray  # (batch, n_queries)
    keys: np.ndarray  # (batch, n_pairs)
    values: np.ndarray  # (batch, n_pairs)
    answer_positions: np.ndarray  # (batch, n_queries)


def associative_recall_batch(n_sequences: int, n_pairs: int = 4, n_keys: int = 8, n_values: int = 8,
                             n_queries: int = 1, seed=0) -> RecallBatch:
    r"""Sample ``n_sequences`` recall problems: ``n_pairs`` pairs with distinct keys, ``n_queries`` questions.

    .. math:: x_\text{pair} = [\, e_\text{key} ; e_\text{value} \,], \qquad x_\text{query} = [\, e_\text{key} ; 0 \,]

    Parameters
    ----------
    n_sequences, n_pairs, n_keys, n_values, n_queries : int
        The batch size, the pairs per sequence (at most ``n_keys``), the vocabularies, the questions per
        sequence (at most ``n_pairs``).
    seed : int or numpy Generator
        The random source.

    Returns
    -------
    RecallBatch
        One-hot context ``(batch, n_pairs, n_keys + n_values)``, queries, targets and the symbols.

    Examples
    --------
    >>> batch = associative_recall_batch(2, n_pairs=3, n_keys=5, n_values=4, seed=0)
    >>> batch.context.shape, batch.queries.shape, batch.targets.shape
    ((2, 3, 9), (2, 1, 9), (2, 1))
    >>> associative_recall_batch(1, n_pairs=5, n_keys=4)
    Traceback (most recent call last):
    ...
    ValueError: n_pairs = 5 needs at least 5 distinct keys, but n_keys = 4
    """
    n_sequences = check_positive_int(n_sequences, "n_sequences")
    n_pairs = check_positive_int(n_pairs, "n_pairs")
    n_keys = check_positive_int(n_keys, "n_keys")
    n_values = check_positive_int(n_values, "n_values")
    n_queries = check_positive_int(n_queries, "n_queries")
    if n_pairs > n_keys:
        raise ValueError(f"n_pairs = {n_pairs} needs at least {n_pairs} distinct keys, but n_keys = {n_keys}")
    if n_queries > n_pairs:
        raise ValueError(f"n_queries = {n_queries} is more than n_pairs = {n_pairs}; each query asks "
                         "for a different pair")
    rng = check_seed(seed)
    keys = np.argsort(rng.random((n_sequences, n_keys)), axis=1)[:, :n_pairs]  # (batch, n_pairs)
    values = rng.integers(0, n_values, size=(n_sequences, n_pairs))  # (batch, n_pairs)
    positions = np.argsort(rng.random((n_sequences, n_pairs)), axis=1)[:, :n_queries]  # (batch, n_q)
    rows = np.arange(n_sequences)[:, None]  # (batch, 1)
    d_in = n_keys + n_values
    context = np.zeros((n_sequences, n_pairs, d_in))  # (batch, n_pairs, d_in)
    pair_index = np.arange(n_pairs)[None, :]  # (1, n_pairs)
    context[rows, pair_index, keys] = 1.0
    context[rows, pair_index, n_keys + values] = 1.0
    queries = np.zeros((n_sequences, n_queries, d_in))  # (batch, n_q, d_in)
    queries[rows, np.arange(n_queries)[None, :], keys[rows, positions]] = 1.0
    targets = values[rows, positions]  # (batch, n_q)
    return RecallBatch(context, queries, targets, keys, values, positions)


# --- the most recent signal: which of the keys is the latest ------------------------------------------------


def recency_batch(n_sequences: int, length: int, n_symbols: int = 6, p_signal: float = 0.25,
                  seed: int | np.random.Generator = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""Sequences of the *most recent signal* task and their targets.

    .. math:: t_i = x_{j^*(i)}, \qquad j^*(i) = \max\{\, j \le i : x_j \ne 0 \,\}

    Parameters
    ----------
    n_sequences, length : int
        Batch size and tokens per sequence; positive.
    n_symbols : int, optional
        Signal tokens ``1 .. n_symbols``; token 0 is the blank. Default 6.
    p_signal : float, optional
        Probability that a position after the first holds a signal; in ``(0, 1]``. Default 0.25.
    seed : int or numpy Generator, optional
        Seeds the draw.

    Returns
    -------
    tuple of ndarray
        ``(tokens, targets)``, both ``(n_sequences, length)`` int64.

    Examples
    --------
    >>> tokens, targets = recency_batch(1, 8, seed=2)
    >>> tokens.tolist(), targets.tolist()
    ([[6, 0, 1, 2, 0, 0, 0, 1]], [[6, 6, 1, 2, 2, 2, 2, 1]])
    """
    n_sequences = check_positive_int(n_sequences, "n_sequences")
    length = check_positive_int(length, "length")
    n_symbols = check_positive_int(n_symbols, "n_symbols")
    if not 0 < p_signal <= 1:
        raise ValueError(f"p_signal must be in (0, 1], got {p_signal!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    return draw_recency(rng, n_sequences, length, n_symbols, float(p_signal))


def draw_recency(rng: np.random.Generator, n_sequences: int, length: int, n_symbols: int,
                 p_signal: float) -> tuple[np.ndarray, np.ndarray]:
    """Unchecked kernel of :func:`recency_batch`.

    >>> draw_recency(np.random.default_rng(0), 2, 3, 4, 1.0)[1].shape
    (2, 3)
    """
    symbols = rng.integers(1, n_symbols + 1, size=(n_sequences, length))  # (B, n)
    signal = rng.random((n_sequences, length)) < p_signal  # (B, n)
    signal[:, 0] = True
    tokens = np.where(signal, symbols, 0)  # (B, n)
    last = np.maximum.accumulate(np.where(signal, np.arange(length), 0), axis=1)  # (B, n): index of j*(i)
    targets = np.take_along_axis(tokens, last, axis=1)  # (B, n)
    return tokens.astype(np.int64), targets.astype(np.int64)
