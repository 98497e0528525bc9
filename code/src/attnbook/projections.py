"""Self-attention of a sequence: project it to queries, keys and values, then attend.

``Q = X W_Q``, ``K = X W_K``, ``V = X W_V``, then ``softmax(Q K^T / sqrt(d_k)) V``. The
projection matrices are the only learned parameters of a single attention head.

>>> import numpy as np
>>> x = np.arange(6.0).reshape(3, 2)                           # (n, d_model)
>>> out, w = self_attention(x, np.eye(2), np.eye(2), np.eye(2))
>>> out.shape, w.shape
((3, 2), (3, 3))
"""

from __future__ import annotations

import numpy as np

from .attention import AttentionResult, scaled_dot_product_attention
from .validation import as_float_array, check_min_ndim

__all__ = ["self_attention"]


def _project(x: np.ndarray, w: np.ndarray, what: str, bias=None) -> np.ndarray:
    """``x @ w`` (plus ``bias``), or an error naming ``what`` (e.g. ``"x @ w_q"``) when it overflows.

    The numbers are those of the plain expression; numpy's overflow warning is silenced because the
    overflow is reported here, naming the arguments, instead of as a non-finite ``q`` further on.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        y = x @ w if bias is None else x @ w + bias  # (..., n, d_out)
    if not np.all(np.isfinite(y)):
        raise ValueError(
            f"{what} overflowed in {y.dtype} (largest {float(np.finfo(y.dtype).max):.6g}); scale the inputs "
            "down or compute in a wider float type"
        )
    return y


def _checked_projection(w, name: str, d_model: int, x_shape: tuple[int, ...]) -> np.ndarray:
    w = as_float_array(w, name)  # (d_model, d_out)
    if w.ndim != 2:
        raise ValueError(f"{name} has shape {w.shape}; expected a matrix (d_model, d_out)")
    if w.shape[0] != d_model:
        raise ValueError(
            f"x has shape {x_shape} but {name} has shape {w.shape}; "
            f"{name} needs d_model = {d_model} rows to multiply x"
        )
    return w


def _checked_self_attention_inputs(x, w_q, w_k, w_v):
    """x ``(..., n, d_model)`` and projections whose shapes fit it (shared with the KV-cache decoder)."""
    x = as_float_array(x, "x")  # (..., n, d_model)
    check_min_ndim(x, "x", 2, "(..., n, d_model)")
    d_model = x.shape[-1]
    w_q = _checked_projection(w_q, "w_q", d_model, x.shape)  # (d_model, d_k)
    w_k = _checked_projection(w_k, "w_k", d_model, x.shape)  # (d_model, d_k)
    w_v = _checked_projection(w_v, "w_v", d_model, x.shape)  # (d_model, d_v)
    if w_q.shape[1] != w_k.shape[1]:
        raise ValueError(
            f"w_q has shape {w_q.shape} but w_k has shape {w_k.shape}; queries and keys need the same d_k"
        )
    if w_q.shape[1] == 0:
        raise ValueError(f"w_q and w_k have shape {w_q.shape}, so d_k = 0; they need at least one column")
    return x, w_q, w_k, w_v


def self_attention(x, w_q, w_k, w_v, mask=None, scale=None) -> AttentionResult:
    """Self-attention of ``x`` (``(..., n, d_model)``) with projections ``w_q``, ``w_k`` (``(d_model, d_k)``)
    and ``w_v`` (``(d_model, d_v)``); returns ``(output (..., n, d_v), weights (..., n, n))``.

    ``mask`` and ``scale`` are passed to :func:`scaled_dot_product_attention`.

    >>> self_attention(np.ones((3, 4)), np.ones((4, 2)), np.ones((4, 3)), np.ones((4, 2)))
    Traceback (most recent call last):
    ...
    ValueError: w_q has shape (4, 2) but w_k has shape (4, 3); queries and keys need the same d_k
    """
    x, w_q, w_k, w_v = _checked_self_attention_inputs(x, w_q, w_k, w_v)
    q = _project(x, w_q, "x @ w_q")  # (..., n, d_k)
    k = _project(x, w_k, "x @ w_k")  # (..., n, d_k)
    v = _project(x, w_v, "x @ w_v")  # (..., n, d_v)
    return scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)
