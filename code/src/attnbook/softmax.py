"""Numerically stable softmax with an optional boolean mask, its Jacobian, and ReLU weights.

Each slice is shifted by its largest allowed logit, so ``exp`` cannot overflow; masked positions get
weight 0, and a fully masked slice all zeros (not NaN), the package's convention.

>>> import numpy as np
>>> print(np.round(softmax([1.0, 2.0, 3.0]), 4))
[0.09   0.2447 0.6652]
>>> softmax([[1e4, 0.0]], mask=[[False, True]]).tolist()
[[0.0, 1.0]]
>>> softmax([[3.0, 1.0]], mask=[[False, False]]).tolist()
[[0.0, 0.0]]
"""

from __future__ import annotations

import numpy as np

from .validation import as_bool_mask, as_float_array, check_axis, check_bool, overflow_error

__all__ = ["check_logits", "relu_weights", "softmax", "softmax_jacobian"]


def check_logits(x, axis: int = -1, mask=None, name: str = "x",
                 allow_neg_inf: bool = True) -> tuple[np.ndarray, int, np.ndarray]:
    """The prologue of every softmax-like function: the logits, the axis, and which entries take part.

    Parameters
    ----------
    x, axis, mask
        As in :func:`softmax`.
    name : str
        The logits' name.
    allow_neg_inf : bool
        Accept ``-inf`` logits (masked).

    Returns
    -------
    tuple
        ``(logits, axis, allowed)``: float logits, the axis as an index, and booleans of ``x``'s shape,
        False where masked or ``-inf``.

    Examples
    --------
    >>> check_logits([[1.0, 2.0]], mask=[[True, False, True]])
    Traceback (most recent call last):
    ...
    ValueError: mask has shape (1, 3) but x has shape (1, 2); the mask must broadcast to x
    """
    logits = as_float_array(x, name, allow_neg_inf=allow_neg_inf)  # (..., n, ...)
    if logits.ndim == 0:
        raise ValueError(f"{name} is a scalar; expected at least one dimension (the axis to normalise over)")
    axis = check_axis(axis, logits.ndim)
    allowed = ~np.isneginf(logits)  # (same shape as logits): -inf means "masked"
    if mask is not None:
        mask = as_bool_mask(mask)
        try:
            allowed = allowed & np.broadcast_to(mask, logits.shape)  # (same shape as logits)
        except ValueError:
            raise ValueError(f"mask has shape {mask.shape} but {name} has shape {logits.shape}; "
                             f"the mask must broadcast to {name}") from None
    return logits, axis, allowed


def softmax(x, axis: int = -1, mask=None) -> np.ndarray:
    r"""Softmax of ``x`` along ``axis``; positions where ``mask`` is False get weight 0.

    .. math:: \operatorname{softmax}(x)_i = \frac{e^{x_i - m}}{\sum_j e^{x_j - m}}, \quad m = \max_j x_j

    Parameters
    ----------
    x : array_like
        Real logits, any shape with at least one dimension. ``-inf`` is allowed and means
        "masked"; NaN and ``+inf`` raise ``ValueError``.
    axis : int
        The axis that is normalised to sum to 1.
    mask : array_like of bool, optional
        Broadcasts to ``x.shape``; True = the position takes part.

    Returns
    -------
    ndarray
        The shape and float dtype of ``x``: non-negative, each slice along ``axis`` summing to 1,
        or to 0 when the whole slice is masked (or empty).

    Examples
    --------
    >>> print(softmax([[0.0, 0.0], [0.0, np.log(3.0)]]))
    [[0.5  0.5 ]
     [0.25 0.75]]
    >>> softmax([[1.0, 2.0]], mask=[[True, False, True]])
    Traceback (most recent call last):
    ...
    ValueError: mask has shape (1, 3) but x has shape (1, 2); the mask must broadcast to x
    """
    logits, axis, allowed = check_logits(x, axis, mask)  # (..., n, ...) each
    weights = np.moveaxis(logits, axis, -1).copy()  # (..., n): the normalised axis last
    softmax_rows(weights, np.moveaxis(allowed, axis, -1))  # (..., n), in place
    return np.moveaxis(weights, -1, axis)  # (same shape as logits)


def softmax_rows(scores: np.ndarray, allowed=None) -> np.ndarray:
    """Unchecked kernel: overwrite ``scores`` ``(..., n)`` with its softmax along the last axis.

    ``allowed`` (boolean, broadcasting to ``scores``) marks the entries that take part; the others
    get weight 0, and a row with no allowed entry becomes all zeros. Each row is shifted by its own
    maximum before ``exp``, so nothing overflows. Scores that overflowed are refused: a row whose
    allowed entries include NaN or ``+inf``, or are all ``-inf``, raises ``ValueError``. Returns
    ``scores``, or a new array of the broadcast shape when ``allowed`` has more batch dimensions.

    >>> s = np.array([[1000.0, 1000.0], [0.0, np.log(3.0)]])
    >>> print(softmax_rows(s))
    [[0.5  0.5 ]
     [0.25 0.75]]
    """
    if allowed is not None:
        full = np.broadcast_shapes(scores.shape, np.shape(allowed))
        if full != scores.shape:  # a mask with more (batch, head) dimensions than the scores
            scores = np.broadcast_to(scores, full).copy()  # (..., n)
        np.copyto(scores, -np.inf, where=~allowed)  # (..., n)
    if scores.shape[-1] == 0:  # no entries at all: nothing to normalise, like a fully masked row
        return scores
    row_max = scores.max(axis=-1, keepdims=True)  # (..., 1)
    if not np.all(np.isfinite(row_max)):
        # a row whose largest allowed score is -inf has no finite score left: fully masked when no
        # entry is allowed, but an overflow when its allowed scores all overflowed to -inf
        lost = np.isneginf(row_max)  # (..., 1)
        if allowed is not None:
            lost &= np.broadcast_to(allowed, scores.shape).any(axis=-1, keepdims=True)  # (..., 1)
        if np.any(np.isnan(row_max) | np.isposinf(row_max) | lost):
            raise overflow_error(scores.dtype)
        row_max[np.isneginf(row_max)] = 0  # fully masked rows: every exp below is exp(-inf) = 0
    scores -= row_max  # (..., n): every entry <= 0, so exp cannot overflow
    np.exp(scores, out=scores)  # (..., n)
    with np.errstate(over="ignore"):
        totals = scores.sum(axis=-1, keepdims=True)  # (..., 1), 0 only for fully masked rows
    if not np.all(np.isfinite(totals)):  # a float16 row of more than 65504 entries: sum it in float32
        totals = scores.sum(axis=-1, keepdims=True, dtype=np.float32)  # (..., 1)
    np.divide(1, totals, out=totals, where=totals > 0)  # (..., 1): reciprocals; 0 rows stay 0
    scores *= totals  # (..., n): rows sum to 1, fully masked rows stay 0
    return scores


def softmax_jacobian(weights) -> np.ndarray:
    r"""Jacobian of softmax at the point whose output is ``weights``: ``diag(a) - a a^T``.

    .. math:: \frac{\partial a_i}{\partial s_j} = a_i (\delta_{ij} - a_j)

    Parameters
    ----------
    weights : array_like
        ``(..., n)``: a softmax output along its last axis (non-negative, slices summing to 1).

    Returns
    -------
    ndarray
        ``(..., n, n)`` with entry ``[i, j] = d a_i / d s_j``.

    Examples
    --------
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




def relu_weights(scores, axis: int = -1, mask=None, normalize: bool = False) -> np.ndarray:
    r"""``max(scores, 0)``, zero where ``mask`` is False; divided by its sum along ``axis`` if ``normalize``.

    .. math:: w_i = \frac{\max(s_i, 0)}{\sum_j \max(s_j, 0)} \quad \text{(normalised)}

    Unless normalised they do not sum to 1; a slice whose ReLU sum is 0 stays all zeros.

    Parameters
    ----------
    scores, axis, mask
        As ``x``, ``axis``, ``mask`` in :func:`softmax` (``-inf`` is refused).
    normalize : bool
        Divide by the sum along ``axis``.

    Returns
    -------
    ndarray
        The weights, in the shape and float dtype of ``scores``.

    Examples
    --------
    >>> print(relu_weights([[2.0, -1.0, 1.0]]))
    [[2. 0. 1.]]
    >>> print(np.round(relu_weights([[2.0, -1.0, 1.0]], normalize=True), 4))
    [[0.6667 0.     0.3333]]
    >>> relu_weights([[1.0, 2.0]], mask=[[True, False]]).tolist()
    [[1.0, 0.0]]
    """
    s, axis, allowed = check_logits(scores, axis, mask, name="scores", allow_neg_inf=False)  # (..., n, ...)
    normalize = check_bool(normalize, "normalize")
    weights = np.where(allowed, np.maximum(s, 0), 0).astype(s.dtype, copy=False)  # (..., n, ...)
    if normalize:
        with np.errstate(over="ignore"):
            totals = weights.sum(axis=axis, keepdims=True)  # (..., 1, ...)
        if not np.all(np.isfinite(totals)):  # a float16 sum above 65504 overflowed: sum in float32
            totals = weights.sum(axis=axis, keepdims=True, dtype=np.float32)  # (..., 1, ...)
        weights = np.divide(weights, totals, out=np.zeros_like(weights), where=totals > 0)  # (..., n, ...)
    return weights.astype(s.dtype, copy=False)
