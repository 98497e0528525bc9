"""Alternatives to softmax for turning scores into weights.

The lecture this book draws on (seed 001) notes that softmax is the usual choice but not the only
one: a ReLU also works. ReLU weights are non-negative but do not sum to 1 unless normalised, so the
output is then no longer guaranteed to lie in the convex hull of the values.

>>> import numpy as np
>>> print(relu_weights([[2.0, -1.0, 1.0]]))
[[2. 0. 1.]]
>>> print(np.round(relu_weights([[2.0, -1.0, 1.0]], normalize=True), 4))
[[0.6667 0.     0.3333]]
"""

from __future__ import annotations

import numpy as np

from .validation import as_bool_mask, as_float_array, check_axis

__all__ = ["relu_weights"]


def relu_weights(scores, axis: int = -1, mask=None, normalize: bool = False) -> np.ndarray:
    """``max(scores, 0)``, zero where ``mask`` is False; divided by its sum along ``axis`` if ``normalize``.

    A slice whose ReLU sum is 0 (all scores <= 0, or all masked) stays all zeros when normalised.

    >>> relu_weights([[1.0, 2.0]], mask=[[True, False]]).tolist()
    [[1.0, 0.0]]
    """
    s = as_float_array(scores, "scores")  # (..., n, ...)
    if s.ndim == 0:
        raise ValueError("scores is a scalar; expected at least one dimension")
    axis = check_axis(axis, s.ndim)
    weights = np.maximum(s, 0)  # (..., n, ...)
    if mask is not None:
        mask = as_bool_mask(mask)
        try:
            weights = np.where(np.broadcast_to(mask, s.shape), weights, 0)  # (..., n, ...)
        except ValueError:
            raise ValueError(
                f"mask has shape {mask.shape} but scores has shape {s.shape}; "
                "the mask must broadcast to scores"
            ) from None
    if normalize:
        with np.errstate(over="ignore"):
            totals = weights.sum(axis=axis, keepdims=True)  # (..., 1, ...)
        if not np.all(np.isfinite(totals)):  # a float16 sum above 65504 overflowed: sum in float32
            totals = weights.sum(axis=axis, keepdims=True, dtype=np.float32)  # (..., 1, ...)
        weights = np.divide(weights, totals, out=np.zeros_like(weights), where=totals > 0)
    return weights.astype(s.dtype, copy=False)
