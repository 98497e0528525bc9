"""Scaled dot-product attention: ``softmax(Q K^T / sqrt(d_k)) V``, with batch and head dimensions.

>>> import numpy as np
>>> q = np.eye(2); k = 2 * np.eye(2); v = np.eye(2)
>>> out, weights = scaled_dot_product_attention(q, k, v)
>>> print(np.round(weights, 4))
[[0.8044 0.1956]
 [0.1956 0.8044]]
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .softmax import softmax_rows_in_place
from .validation import as_bool_mask, as_float_array, broadcast_batch_shapes, check_min_ndim

__all__ = ["AttentionResult", "attention_scores", "scaled_dot_product_attention"]


class AttentionResult(NamedTuple):
    """What attention returns: unpack it as ``output, weights = ...``."""

    output: np.ndarray  # (..., n_q, d_v)
    weights: np.ndarray  # (..., n_q, n_k)


def _compute_dtype(*arrays: np.ndarray) -> np.dtype:
    """The common float type of the inputs, at least float32 (float16 scores overflow at 65504)."""
    return np.result_type(*arrays, np.float32)


def _checked_qk(q, k) -> tuple[np.ndarray, np.ndarray]:
    q = as_float_array(q, "q")  # (..., n_q, d_k)
    k = as_float_array(k, "k")  # (..., n_k, d_k)
    dtype = _compute_dtype(q, k)
    q, k = q.astype(dtype, copy=False), k.astype(dtype, copy=False)
    check_min_ndim(q, "q", 2, "(..., n_q, d_k)")
    check_min_ndim(k, "k", 2, "(..., n_k, d_k)")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q has shape {q.shape} but k has shape {k.shape}; "
            "the last dimensions (d_k) must match"
        )
    if q.shape[-1] == 0:
        raise ValueError(f"q and k have d_k = 0 (shapes {q.shape}, {k.shape}); d_k must be at least 1")
    return q, k


def _checked_qkv(q, k, v) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, k, v as float arrays whose shapes fit together (the checks shared by every attention)."""
    q, k = _checked_qk(q, k)  # (..., n_q, d_k), (..., n_k, d_k)
    v = as_float_array(v, "v")  # (..., n_k, d_v)
    check_min_ndim(v, "v", 2, "(..., n_k, d_v)")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k has shape {k.shape} but v has shape {v.shape}; k and v must have the same number "
            "of positions n_k (second-to-last dimension)"
        )
    return q, k, v


def _checked_scale(scale, d_k: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(d_k)
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise TypeError(f"scale must be a real number, got {scale!r}")
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    return float(scale)


def attention_scores(q, k, scale=None) -> np.ndarray:
    """The scaled logits ``Q K^T * scale`` (default ``scale = 1/sqrt(d_k)``), shape ``(..., n_q, n_k)``.

    >>> print(attention_scores([[1.0, 0.0]], [[2.0, 0.0], [2.0, 2.0]], scale=1.0))
    [[2. 2.]]
    """
    q, k = _checked_qk(q, k)
    broadcast_batch_shapes({"q": q.shape[:-2], "k": k.shape[:-2]})
    factor = _checked_scale(scale, q.shape[-1])
    scores = q @ np.swapaxes(k, -1, -2)  # (..., n_q, n_k)
    return scores * np.asarray(factor, dtype=scores.dtype)  # (..., n_q, n_k)


def scaled_dot_product_attention(q, k, v, mask=None, scale=None) -> AttentionResult:
    """Attention of queries ``q`` over keys ``k`` and values ``v``; returns ``(output, weights)``.

    Parameters
    ----------
    q : ``(..., n_q, d_k)`` queries, one per row.
    k : ``(..., n_k, d_k)`` keys, one per row.
    v : ``(..., n_k, d_v)`` values, one per key.
    mask : optional boolean array broadcasting to ``(..., n_q, n_k)``; True = query i may attend
        to key j. A query whose row is entirely False gets all-zero weights and a zero output.
    scale : factor applied to ``q k^T``; default ``1/sqrt(d_k)``.

    The leading ``...`` dimensions (batch, heads) of q, k, v and mask broadcast against each other.
    Everything is computed in the widest float type of q, k and v, and at least in float32 (float16
    inputs are promoted: their dot products overflow at 65504).

    >>> out, w = scaled_dot_product_attention(np.ones((2, 3, 4)), np.ones((2, 5, 4)), np.ones((2, 5, 6)))
    >>> out.shape, w.shape
    ((2, 3, 6), (2, 3, 5))
    >>> out, w = scaled_dot_product_attention(np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 6)),
    ...                                       mask=np.ones((2, 3, 5), dtype=bool))
    >>> w.shape
    (2, 3, 5)
    >>> scaled_dot_product_attention(np.ones((3, 4)), np.ones((5, 3)), np.ones((5, 2)))
    Traceback (most recent call last):
    ...
    ValueError: q has shape (3, 4) but k has shape (5, 3); the last dimensions (d_k) must match
    """
    q, k, v = _checked_qkv(q, k, v)  # (..., n_q, d_k), (..., n_k, d_k), (..., n_k, d_v)
    n_q, n_k = q.shape[-2], k.shape[-2]
    shapes = {"q": q.shape[:-2], "k": k.shape[:-2], "v": v.shape[:-2]}
    if mask is not None:
        mask = as_bool_mask(mask)
        check_min_ndim(mask, "mask", 2, "(..., n_q, n_k)")
        if mask.shape[-2] not in (1, n_q) or mask.shape[-1] not in (1, n_k):
            raise ValueError(
                f"mask has shape {mask.shape} but the weights have shape (..., {n_q}, {n_k}) "
                f"(q has shape {q.shape}, k has shape {k.shape}); the mask must broadcast to them"
            )
        shapes["mask"] = mask.shape[:-2]
    batch = broadcast_batch_shapes(shapes)
    factor = _checked_scale(scale, q.shape[-1])
    dtype = _compute_dtype(q, v)  # mixed inputs are computed in the widest of their types
    weights = np.empty(batch + (n_q, n_k), dtype=dtype)  # (..., n_q, n_k)
    output = np.empty(batch + (n_q, v.shape[-1]), dtype=dtype)  # (..., n_q, d_v)
    flat_q = _flat_batch(q * np.asarray(factor, dtype=dtype), batch, dtype)  # (B, n_q, d_k), pre-scaled
    flat_k = _flat_batch(k, batch, dtype)  # (B, n_k, d_k)
    flat_v = _flat_batch(v, batch, dtype)  # (B, n_k, d_v)
    n_batch = math.prod(batch)
    flat_w = weights.reshape(n_batch, n_q, n_k)  # (B, n_q, n_k), a view
    flat_o = output.reshape(n_batch, n_q, v.shape[-1])  # (B, n_q, d_v), a view
    flat_m = None if mask is None else np.broadcast_to(mask, batch + (n_q, n_k)).reshape(n_batch, n_q, n_k)
    # Work through the batch in chunks of about 2**22 scores, so that the softmax passes over a chunk
    # run in cache; every pass writes in place into the weights that are returned.
    step = max(1, _CHUNK_SCORES // max(1, n_q * n_k))
    for start in range(0, flat_w.shape[0], step):
        part = slice(start, start + step)
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected in the softmax below
            scores = np.matmul(flat_q[part], np.swapaxes(flat_k[part], -1, -2), out=flat_w[part])  # (b, n_q, n_k)
        softmax_rows_in_place(scores, None if flat_m is None else flat_m[part])  # (b, n_q, n_k)
        np.matmul(scores, flat_v[part], out=flat_o[part])  # (b, n_q, d_v); n_k = 0 gives zeros
    return AttentionResult(output, weights)


_CHUNK_SCORES = 1 << 22


def _flat_batch(x: np.ndarray, batch: tuple[int, ...], dtype) -> np.ndarray:
    """``x`` broadcast to the batch shape and flattened to ``(B, rows, cols)`` in ``dtype``."""
    full = np.broadcast_to(x.astype(dtype, copy=False), batch + x.shape[-2:])  # (..., rows, cols)
    return full.reshape((math.prod(batch),) + x.shape[-2:])  # (B, rows, cols); copies only when broadcasting


