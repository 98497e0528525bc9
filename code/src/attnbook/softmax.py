"""Numerically stable softmax with an optional boolean mask, and its Jacobian.

Stability comes from subtracting the largest allowed logit of each slice before ``exp``: the
result is mathematically unchanged (softmax is invariant to adding a constant to every logit of a
slice) and ``exp`` then only ever sees numbers <= 0, so it cannot overflow, in float32 or float64.

Masked positions (``mask`` False, or a logit of ``-inf``) get weight exactly 0. A slice in which
every position is masked has no distribution to normalise; by this package's convention its
weights are all 0 (not NaN), so an attention output built from it is the zero vector.

>>> import numpy as np
>>> print(np.round(softmax([1.0, 2.0, 3.0]), 4))
[0.09   0.2447 0.6652]
>>> softmax([[1e4, 0.0]], mask=[[False, True]]).tolist()
[[0.0, 1.0]]
>>> softmax([[3.0, 1.0]], mask=[[False, False]]).tolist()
[[0.0, 0.0]]
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .validation import as_bool_mask, as_float_array, check_axis

__all__ = ["softmax", "softmax_jacobian", "softmax_rows_in_place"]

_PARALLEL_FROM = 1 << 18  # below this many entries, handing rows to threads costs more than it saves
_POOL: list[ThreadPoolExecutor] = []


def softmax(x, axis: int = -1, mask=None) -> np.ndarray:
    """Softmax of ``x`` along ``axis``; positions where ``mask`` is False get weight 0.

    Parameters
    ----------
    x : array_like of real numbers, any shape with at least one dimension. ``-inf`` is allowed and
        means "masked"; NaN and ``+inf`` raise ``ValueError``.
    axis : the axis that is normalised to sum to 1.
    mask : optional boolean array that broadcasts to ``x.shape``; True = the position takes part.

    Returns
    -------
    An array of the shape and float dtype of ``x``: non-negative, each slice along ``axis`` summing
    to 1, or to 0 when the whole slice is masked (or empty).

    >>> print(softmax([[0.0, 0.0], [0.0, np.log(3.0)]]))
    [[0.5  0.5 ]
     [0.25 0.75]]
    >>> softmax([[1.0, 2.0]], mask=[[True, False, True]])
    Traceback (most recent call last):
    ...
    ValueError: mask has shape (1, 3) but x has shape (1, 2); the mask must broadcast to x
    """
    logits = as_float_array(x, "x", allow_neg_inf=True)  # (..., n, ...)
    if logits.ndim == 0:
        raise ValueError("x is a scalar; softmax needs at least one dimension to normalise over")
    axis = check_axis(axis, logits.ndim)
    allowed = ~np.isneginf(logits)  # (same shape as logits); -inf means "masked"
    if mask is not None:
        mask = as_bool_mask(mask)
        try:
            mask = np.broadcast_to(mask, logits.shape)  # (same shape as logits)
        except ValueError:
            raise ValueError(
                f"mask has shape {mask.shape} but x has shape {logits.shape}; "
                "the mask must broadcast to x"
            ) from None
        allowed = allowed & mask
    weights = np.moveaxis(logits, axis, -1).copy()  # (..., n): the normalised axis last
    softmax_rows_in_place(weights, np.moveaxis(np.broadcast_to(allowed, logits.shape), axis, -1))
    return np.moveaxis(weights, -1, axis)  # (same shape as logits)


def softmax_jacobian(weights) -> np.ndarray:
    """Jacobian of softmax at the point whose output is ``weights``: ``diag(a) - a a^T``.

    ``weights`` has shape ``(..., n)`` (the softmax output along its last axis); the result has
    shape ``(..., n, n)`` with entry ``[i, j] = d a_i / d s_j``. Its size shrinks as softmax
    saturates (one weight near 1), which is why unscaled logits slow learning.

    >>> print(softmax_jacobian([0.5, 0.5]))
    [[ 0.25 -0.25]
     [-0.25  0.25]]
    >>> softmax_jacobian([0.5, 0.6])
    Traceback (most recent call last):
    ...
    ValueError: weights must be non-negative and sum to 1 along the last axis (a softmax output); a slice sums to 1.1
    >>> softmax_jacobian([1.5, -0.5])
    Traceback (most recent call last):
    ...
    ValueError: weights must be non-negative and sum to 1 along the last axis (a softmax output); weights has the negative entry -0.5 at index (1,)
    """
    a = as_float_array(weights, "weights")  # (..., n)
    if a.ndim == 0:
        raise ValueError("weights is a scalar; expected a softmax output of shape (..., n)")
    sums = a.sum(axis=-1)  # (...)
    tolerance = 1e-3 if a.dtype == np.float16 else 1e-5
    if np.any(a < 0):
        neg_at = tuple(int(i) for i in np.argwhere(a < 0)[0])
        raise ValueError(
            "weights must be non-negative and sum to 1 along the last axis (a softmax output); "
            f"weights has the negative entry {float(a[neg_at]):.6g} at index {neg_at}"
        )
    if np.any(np.abs(sums - 1) > tolerance):
        bad = float(np.ravel(sums)[np.argmax(np.abs(np.ravel(sums) - 1))])
        raise ValueError(
            "weights must be non-negative and sum to 1 along the last axis (a softmax output); "
            f"a slice sums to {bad:.6g}"
        )
    diagonal = a[..., :, None] * np.eye(a.shape[-1], dtype=a.dtype)  # (..., n, n)
    outer = a[..., :, None] * a[..., None, :]  # (..., n, n)
    return diagonal - outer


def softmax_rows_in_place(scores: np.ndarray, allowed=None) -> None:
    """Overwrite ``scores`` ``(..., n)`` with its softmax along the last axis: the one kernel behind
    :func:`softmax` and :func:`attnbook.scaled_dot_product_attention`.

    ``allowed`` (boolean, broadcasting to ``scores``) marks the entries that take part; the others get
    weight 0, and a row with no allowed entry becomes all zeros. Scores that overflowed are refused:
    a row whose allowed entries include NaN or ``+inf``, or are all ``-inf``, raises ``ValueError``.
    Each row is shifted by its own maximum before ``exp``, so nothing overflows, and a row's result
    never depends on the other rows. The work is row-local, so large arrays are split by
    rows over the machine's cores (numpy releases the GIL inside its loops).

    >>> s = np.array([[1000.0, 1000.0], [0.0, np.log(3.0)]])
    >>> softmax_rows_in_place(s)
    >>> print(s)
    [[0.5  0.5 ]
     [0.25 0.75]]
    """
    if scores.shape[-1] == 0:  # no entries at all: nothing to normalise, like a fully masked row
        return
    workers = _workers()
    if workers > 1 and scores.ndim >= 2 and scores.size >= _PARALLEL_FROM and scores.shape[-2] >= workers:
        if allowed is not None:
            allowed = np.broadcast_to(allowed, scores.shape)  # (..., rows, n)
        cuts = np.linspace(0, scores.shape[-2], workers + 1).astype(int)  # (workers + 1,)
        jobs = [(scores[..., a:b, :], None if allowed is None else allowed[..., a:b, :])
                for a, b in zip(cuts[:-1], cuts[1:])]
        list(_pool().map(lambda job: _softmax_rows(*job), jobs))
    else:
        _softmax_rows(scores, allowed)


def _softmax_rows(scores: np.ndarray, allowed) -> None:
    if allowed is not None:
        np.copyto(scores, -np.inf, where=~allowed)  # (..., n)
    row_max = scores.max(axis=-1, keepdims=True)  # (..., 1)
    if not np.all(np.isfinite(row_max)):
        # a row whose largest allowed score is -inf has no finite score left: fully masked when no
        # entry is allowed, but an overflow when its allowed scores all overflowed to -inf
        lost = np.isneginf(row_max)  # (..., 1)
        if allowed is not None:
            lost &= allowed.any(axis=-1, keepdims=True)  # (..., 1)
        if np.any(np.isnan(row_max) | np.isposinf(row_max) | lost):
            raise _scores_overflowed(scores.dtype)
        row_max[np.isneginf(row_max)] = 0  # fully masked rows: every exp below is exp(-inf) = 0
    scores -= row_max  # every entry <= 0, so exp cannot overflow
    np.exp(scores, out=scores)  # (..., n)
    with np.errstate(over="ignore"):
        totals = scores.sum(axis=-1, keepdims=True)  # (..., 1), 0 only for fully masked rows
    if not np.all(np.isfinite(totals)):  # a float16 row of more than 65504 entries: sum it in float32
        totals = scores.sum(axis=-1, keepdims=True, dtype=np.float32)  # (..., 1)
    np.divide(1, totals, out=totals, where=totals > 0)  # reciprocals; 0 rows stay 0
    scores *= totals  # rows sum to 1, fully masked rows stay 0


def _scores_overflowed(dtype) -> ValueError:
    """The error raised when attention scores overflowed to inf (or became NaN) in ``dtype``: the
    weights are then unknown, and returning zeros or NaN would be wrong in silence."""
    return ValueError(
        f"the scores overflowed to inf or NaN in {np.dtype(dtype)}; scale the inputs down or compute in float64"
    )


def _workers() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    return min(4, cores)


def _pool() -> ThreadPoolExecutor:
    """The shared thread pool, started on first use (in each process: see ``_forget_pool_after_fork``)."""
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(max_workers=_workers(), thread_name_prefix="attnbook-softmax"))
    return _POOL[0]


def _forget_pool_after_fork() -> None:
    """In a forked child, drop the parent's pool: its worker threads were not copied by ``fork``, so
    work handed to it would wait forever (``multiprocessing`` and data loaders fork). The child starts
    its own pool on first use."""
    _POOL.clear()


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere there is no fork to survive
    os.register_at_fork(after_in_child=_forget_pool_after_fork)
