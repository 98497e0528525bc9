"""Online softmax: the softmax and the weighted sum of values, computed in one pass over the scores.

The online normaliser of Milakov & Gimelshein (2018), a running maximum ``m`` and normaliser ``l``,
extended to the unnormalised output ``o`` as in Rabe & Staats (2021) and FlashAttention (2022)
(:func:`online_softmax_update`), ``l`` and ``o`` rescaled when the maximum rises; the inner loop of
FlashAttention (:mod:`attnbook.efficient.tiled`). A row with no allowed score finishes at zero.

>>> import numpy as np
>>> state = online_softmax_init(d_v=1)
>>> state = online_softmax_update(state, [1.0, 2.0], values=[[1.0], [0.0]])   # block 1
>>> state = online_softmax_update(state, [4.0], values=[[2.0]])               # block 2
>>> float(state.max[0]), round(float(state.total[0]), 4)                      # m = 4, l = e^-3 + e^-2 + 1
(4.0, 1.1851)
>>> print(np.round(online_softmax_finish(state), 4))
[1.7296]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..softmax import check_logits
from ..validation import as_float_array, check_positive_int, check_shape

__all__ = [
    "OnlineSoftmaxState",
    "online_softmax",
    "online_softmax_finish",
    "online_softmax_init",
    "online_softmax_trace",
    "online_softmax_update",
]


class OnlineSoftmaxState(NamedTuple):
    r"""The running quantities of the online softmax, for every row of a batch of score rows.

    .. math:: m = \max_{j \le t} s_j, \qquad \ell = \sum_{j \le t} e^{s_j - m}, \qquad
              o = \sum_{j \le t} e^{s_j - m}\, v_j

    Attributes
    ----------
    max : ndarray
        ``(..., 1)`` the running maximum ``m`` of the allowed scores seen so far (``-inf`` before any).
    total : ndarray
        ``(..., 1)`` the running normaliser ``l``.
    output : ndarray
        ``(..., d_v)`` the running unnormalised output ``o``; ``o / l`` is the softmax-weighted average.

    Examples
    --------
    >>> state = online_softmax_update(online_softmax_init(d_v=2), np.zeros(2), np.eye(2))
    >>> state.max.tolist(), state.total.tolist(), state.output.tolist()
    ([0.0], [2.0], [1.0, 1.0])
    """

    max: np.ndarray  # (..., 1): running maximum m of the allowed scores seen so far (-inf before any)
    total: np.ndarray  # (..., 1): running normaliser l = sum_j exp(s_j - m)
    output: np.ndarray  # (..., d_v): running unnormalised output o = sum_j exp(s_j - m) v_j


def online_softmax_init(batch_shape=(), d_v: int = 0, dtype=np.float64) -> OnlineSoftmaxState:
    r"""The state before any score: ``m = -inf``, ``l = 0``, ``o = 0``, for rows of shape ``batch_shape``.

    .. math:: m_0 = -\infty, \quad l_0 = 0, \quad o_0 = 0

    Parameters
    ----------
    batch_shape, d_v, dtype
        The shape of the rows' index (``()`` for one row); the width of the values averaged (0: only
        the normaliser is tracked); the state's float type.

    Returns
    -------
    OnlineSoftmaxState
        ``max`` and ``total`` ``(..., 1)``, ``output`` ``(..., d_v)``.

    Examples
    --------
    >>> s = online_softmax_init((2,), d_v=3, dtype=np.float32)
    >>> s.max.shape, s.total.shape, s.output.shape, s.output.dtype
    ((2, 1), (2, 1), (2, 3), dtype('float32'))
    """
    batch_shape = check_shape(batch_shape, "batch_shape")
    d_v = check_positive_int(d_v, "d_v", minimum=0)
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"dtype must be a floating-point type, got {dtype}")
    return start_state(batch_shape, d_v, dtype)


def start_state(batch_shape: tuple[int, ...], d_v: int, dtype) -> OnlineSoftmaxState:
    """Unchecked kernel of :func:`online_softmax_init`: ``m = -inf``, ``l = 0``, ``o = 0``.

    >>> start_state((), 1, np.float64).max.tolist()
    [-inf]
    """
    m = np.full(batch_shape + (1,), -np.inf, dtype=dtype)  # (..., 1)
    l = np.zeros(batch_shape + (1,), dtype=dtype)  # (..., 1)
    o = np.zeros(batch_shape + (d_v,), dtype=dtype)  # (..., d_v)
    return OnlineSoftmaxState(m, l, o)


def _checked_state(state) -> OnlineSoftmaxState:
    if not isinstance(state, OnlineSoftmaxState):
        raise TypeError(
            f"state must be an OnlineSoftmaxState (see online_softmax_init), got {type(state).__name__}"
        )
    m = as_float_array(state.max, "state.max", allow_neg_inf=True)  # (..., 1)
    l = as_float_array(state.total, "state.total")  # (..., 1)
    o = as_float_array(state.output, "state.output")  # (..., d_v)
    if m.ndim == 0 or m.shape[-1] != 1 or l.shape != m.shape or o.shape[:-1] != m.shape[:-1]:
        raise ValueError(
            f"state has max {m.shape}, total {l.shape} and output {o.shape}; expected (..., 1), "
            "(..., 1) and (..., d_v) with the same leading shape"
        )
    return OnlineSoftmaxState(m, l, o)


def fold(state: OnlineSoftmaxState, s: np.ndarray, values, allowed) -> OnlineSoftmaxState:
    """Unchecked kernel of :func:`online_softmax_update`: one step of the recurrence on checked arrays.

    ``s`` (..., b) is overwritten (it becomes p). ``allowed`` is None (every score counts) or a
    boolean array broadcasting to ``s``.

    >>> float(fold(start_state((), 0, np.float64), np.array([0.0, 0.0]), None, None).total[0])
    2.0
    """
    m_old = state.max  # (..., 1)
    if allowed is None:
        block_max = s.max(axis=-1, keepdims=True, initial=-np.inf)  # (..., 1)
    else:
        block_max = np.max(np.where(allowed, s, -np.inf), axis=-1, keepdims=True,
                           initial=-np.inf)  # (..., 1)
    m_new = np.maximum(m_old, block_max)  # (..., 1)
    shift = np.where(np.isfinite(m_new), m_new, 0).astype(m_new.dtype, copy=False)  # (..., 1), finite
    alpha = np.exp(m_old - shift)  # (..., 1): exp(m_old - m_new) <= 1; 0 when m_old = -inf
    target = np.broadcast_shapes(s.shape, shift.shape)
    if allowed is None and s.shape == target:
        p = np.subtract(s, shift, out=s)  # (..., b), in place: every entry <= 0
        np.exp(p, out=p)  # (..., b)
    else:
        p = np.exp(np.where(allowed if allowed is not None else True, s - shift, -np.inf))  # (..., b)
    total = alpha * state.total + p.sum(axis=-1, keepdims=True)  # (..., 1)
    if values is None:
        output = alpha * state.output  # (..., 0)
    else:
        output = alpha * state.output + p @ values  # (..., d_v)
    return OnlineSoftmaxState(m_new, total, output)


def online_softmax_update(state, scores, values=None, mask=None) -> OnlineSoftmaxState:
    r"""Fold a block of scores (and their values) into the running state; return the new state.

    .. math:: m' = \max(m, \max_j s_j), \quad l' = l e^{m - m'} + \sum_j e^{s_j - m'}, \quad
              o' = o e^{m - m'} + \sum_j e^{s_j - m'} v_j

    Parameters
    ----------
    state : OnlineSoftmaxState
        The state so far, rows of shape ``(...,)``.
    scores : array_like
        ``(..., b)`` the next ``b`` scores of every row; ``-inf`` means masked.
    values : array_like, optional
        ``(..., b, d_v)`` values of the block, averaged with the softmax weights (``p @ values``, so
        one set of values may be shared by all rows: ``(b, d_v)``).
    mask : array_like of bool, optional
        Broadcasting to ``scores``; True = the score takes part.

    Returns
    -------
    OnlineSoftmaxState
        The new state; the inputs are not modified, the state's float type is kept (at least float32).

    Examples
    --------
    >>> s = online_softmax_update(online_softmax_init(), [0.0, 0.0])
    >>> float(s.max[0]), float(s.total[0])
    (0.0, 2.0)
    >>> online_softmax_update(online_softmax_init((2,)), [0.0, 1.0, 2.0])
    Traceback (most recent call last):
    ...
    ValueError: scores has shape (3,) but the state holds rows of shape (2,); expected scores of shape (2, b)
    """
    state = _checked_state(state)
    rows = state.max.shape[:-1]
    if np.ndim(scores) == 0:
        raise ValueError("scores is a scalar; expected a block of scores of shape (..., b)")
    s, _, allowed = check_logits(scores, -1, mask, name="scores")  # (..., b) each
    if s.shape[:-1] != rows:
        expected = "(" + ", ".join([*map(str, rows), "b"]) + ")"
        raise ValueError(
            f"scores has shape {s.shape} but the state holds rows of shape {rows}; "
            f"expected scores of shape {expected}"
        )
    dtype = np.result_type(s, state.max, np.float32)
    v = None
    if values is not None:
        v = as_float_array(values, "values")  # (..., b, d_v)
        if v.ndim < 2 or v.shape[-2] != s.shape[-1] or v.shape[-1] != state.output.shape[-1]:
            raise ValueError(
                f"values has shape {v.shape} but scores has shape {s.shape} and the state averages "
                f"values of width d_v = {state.output.shape[-1]}; expected values of shape "
                f"(..., {s.shape[-1]}, {state.output.shape[-1]})"
            )
        dtype = np.result_type(dtype, v)
        v = v.astype(dtype, copy=False)
    elif state.output.shape[-1] != 0:
        raise ValueError(
            f"the state averages values of width d_v = {state.output.shape[-1]} but no values were given"
        )
    s = np.array(s, dtype=dtype, copy=True)  # (..., b): a private copy, overwritten by fold
    state = OnlineSoftmaxState(*(a.astype(dtype, copy=False) for a in state))
    return fold(state, s, v, None if allowed.all() else allowed)


def online_softmax_finish(state) -> np.ndarray:
    r"""The normalised output ``o / l`` of a state; zero for rows with no allowed score.

    .. math:: \text{output} = o / l = \sum_j \operatorname{softmax}(s)_j v_j

    Parameters
    ----------
    state : OnlineSoftmaxState
        The state after the last block.

    Returns
    -------
    ndarray
        ``(..., d_v)``.

    Examples
    --------
    >>> print(online_softmax_finish(online_softmax_init((2,), d_v=2)))
    [[0. 0.]
     [0. 0.]]
    """
    return finish(_checked_state(state))


def finish(state: OnlineSoftmaxState) -> np.ndarray:
    """Unchecked kernel of :func:`online_softmax_finish`: ``o / l``, zero for rows with no allowed score.

    >>> finish(start_state((), 1, np.float64)).tolist()
    [0.0]
    """
    o, l = state.output, state.total  # (..., d_v), (..., 1)
    return np.divide(o, l, out=np.zeros_like(o), where=l > 0)  # (..., d_v)


def _normaliser(s: np.ndarray, allowed: np.ndarray, block_size: int) -> OnlineSoftmaxState:
    """One streaming pass over the last axis of ``s`` in blocks: the final (m, l) of every row."""
    state = start_state(s.shape[:-1], 0, s.dtype)
    for start in range(0, s.shape[-1], block_size):
        block = slice(start, start + block_size)
        mask_block = allowed[..., block]  # (..., b)
        state = fold(state, s[..., block].copy(), None, None if mask_block.all() else mask_block)
    return state


def online_softmax(x, axis: int = -1, mask=None, block_size: int = 1) -> np.ndarray:
    r"""Softmax along ``axis`` computed the online way: one streaming pass for (m, l), then the weights.

    .. math:: \operatorname{softmax}(x)_i = e^{x_i - m_n} / l_n \text{ with } (m_n, l_n) \text{ from the recurrence}

    Equal to :func:`attnbook.softmax` up to rounding, for every ``block_size``.

    Parameters
    ----------
    x, axis, mask
        As in :func:`attnbook.softmax`.
    block_size : int
        Scores per block of the streaming pass.

    Returns
    -------
    ndarray
        Shaped like ``x``, in its float type.

    Examples
    --------
    >>> print(np.round(online_softmax([1.0, 2.0, 4.0], block_size=2), 4))
    [0.042  0.1142 0.8438]
    >>> online_softmax([1.0, 2.0], block_size=0)
    Traceback (most recent call last):
    ...
    ValueError: block_size must be at least 1, got 0
    """
    logits, axis, allowed = check_logits(x, axis, mask)  # (..., n, ...) each
    block_size = check_positive_int(block_size, "block_size")
    s = np.moveaxis(logits, axis, -1).astype(np.result_type(logits, np.float32), copy=False)  # (..., n)
    allowed = np.moveaxis(allowed, axis, -1)  # (..., n)
    state = _normaliser(s, allowed, block_size)  # max, total: (..., 1)
    shift = np.where(np.isfinite(state.max), state.max, 0)  # (..., 1)
    p = np.exp(np.where(allowed, s - shift, -np.inf))  # (..., n)
    weights = np.divide(p, state.total, out=np.zeros_like(p), where=state.total > 0)  # (..., n)
    return np.moveaxis(weights, -1, axis).astype(logits.dtype, copy=False)


def online_softmax_trace(scores, block_size: int = 1, values=None) -> list[OnlineSoftmaxState]:
    r"""The state after each block, for one row of ``scores`` (and values), to follow the recurrence by hand.

    .. math:: (m_t, l_t, o_t), \quad t = 1, \dots, \lceil n / b \rceil

    Parameters
    ----------
    scores, block_size, values
        ``(n,)`` one row of scores; scores per block; optional values ``(n, d_v)``.

    Returns
    -------
    list of OnlineSoftmaxState
        Entry ``j`` is the state after ``j + 1`` blocks.

    Examples
    --------
    >>> [(float(t.max[0]), round(float(t.total[0]), 4)) for t in online_softmax_trace([1.0, 2.0, 4.0], 2)]
    [(2.0, 1.3679), (4.0, 1.1851)]
    """
    s = as_float_array(scores, "scores", allow_neg_inf=True)  # (n,)
    if s.ndim != 1:
        raise ValueError(f"scores has shape {s.shape}; online_softmax_trace follows one row of shape (n,)")
    block_size = check_positive_int(block_size, "block_size")
    v = None if values is None else as_float_array(values, "values")  # (n, d_v)
    if v is not None and (v.ndim != 2 or v.shape[0] != s.shape[0]):
        raise ValueError(f"values has shape {v.shape} but scores has shape {s.shape}; expected ({s.shape[0]}, d_v)")
    dtype = np.result_type(s, np.float32) if v is None else np.result_type(s, v, np.float32)
    s = s.astype(dtype)  # (n,): a private copy, overwritten block by block by fold
    v = None if v is None else v.astype(dtype, copy=False)  # (n, d_v)
    state = start_state((), 0 if v is None else v.shape[1], dtype)
    trace = []
    for start in range(0, s.shape[0], block_size):
        block = slice(start, start + block_size)
        allowed = ~np.isneginf(s[block])  # (b,)
        state = fold(state, s[block], None if v is None else v[block], None if allowed.all() else allowed)
        trace.append(state)
    return trace
