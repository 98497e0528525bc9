"""Scaled dot-product attention, ``softmax(Q K^T / sqrt(d_k)) V``, and self-attention of one sequence.

The reference: :func:`scaled_dot_product_attention` is the formula line by line, its arguments checked
once (:func:`check_attention_inputs`, which the fast paths of :mod:`attnbook.efficient` share).

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

from .masks import check_mask
from .softmax import softmax_rows
from .validation import as_float_array, boundary, broadcast_batch_shapes, check_min_ndim, overflow_error

__all__ = [
    "AttentionGradients",
    "AttentionResult",
    "attention_scores",
    "check_scale",
    "check_attention_inputs",
    "check_projections",
    "check_qkv",
    "scaled_dot_product_attention",
    "self_attention",
]


class AttentionResult(NamedTuple):
    """What attention returns: unpack it as ``output, weights = ...``.

    Attributes
    ----------
    output : ndarray
        ``(..., n_q, d_v)`` one weighted average of the values per query.
    weights : ndarray
        ``(..., n_q, n_k)`` the attention weights; each row sums to 1 (0 for a fully masked row).

    Examples
    --------
    >>> result = scaled_dot_product_attention(np.zeros((2, 2)), np.eye(2), np.eye(2))
    >>> result.weights.tolist(), result.output is result[0]
    ([[0.5, 0.5], [0.5, 0.5]], True)
    """

    output: np.ndarray  # (..., n_q, d_v)
    weights: np.ndarray  # (..., n_q, n_k)


class AttentionGradients(NamedTuple):
    """Gradients of a scalar loss with respect to attention's inputs: ``dq, dk, dv = ...``.

    The backward passes return it: :func:`attnbook.learning.gradients.attention_backward` (from the
    weights) and :func:`attnbook.efficient.flash.flash_backward` (from the stored log-sum-exp).

    Attributes
    ----------
    dq : ndarray
        ``(..., n_q, d_k)`` dL/dQ, the shape of ``q``.
    dk : ndarray
        ``(..., n_k, d_k)`` dL/dK, the shape of ``k``.
    dv : ndarray
        ``(..., n_k, d_v)`` dL/dV, the shape of ``v``.

    Examples
    --------
    >>> dq, dk, dv = AttentionGradients(np.zeros((2, 4)), np.zeros((3, 4)), np.ones((3, 5)))
    >>> dv.shape
    (3, 5)
    """

    dq: np.ndarray  # (..., n_q, d_k), the shape of q
    dk: np.ndarray  # (..., n_k, d_k), the shape of k
    dv: np.ndarray  # (..., n_k, d_v), the shape of v

# --- the boundary: attention's inputs, checked once -------------------------------------------------------


def check_scale(scale, d_k: int) -> float:
    """The factor of ``q k^T``: ``1 / sqrt(d_k)`` when ``scale`` is None, else ``scale``, a positive finite number.

    Parameters
    ----------
    scale : float or None
        The factor, or None.
    d_k : int
        The width of queries and keys.

    Returns
    -------
    float
        The factor.

    Examples
    --------
    >>> check_scale(None, 4), check_scale(2, 4)
    (0.5, 2.0)
    """
    if scale is None:
        return 1.0 / math.sqrt(d_k)
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise TypeError(f"scale must be a real number, got {scale!r}")
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    return float(scale)


def check_qkv(q, k, v=None) -> tuple[np.ndarray, ...]:
    """Queries ``(..., n_q, d_k)``, keys ``(..., n_k, d_k)`` and values ``(..., n_k, d_v)`` that fit, in one float type.

    The type is the widest of the inputs' and at least float32 (float16 dot products overflow at 65504).

    Parameters
    ----------
    q, k, v : array_like
        As in :func:`scaled_dot_product_attention` (``v`` optional).

    Returns
    -------
    tuple of ndarray
        ``(q, k)`` or ``(q, k, v)``.

    Examples
    --------
    >>> check_qkv(np.ones((3, 4)), np.ones((5, 3)))
    Traceback (most recent call last):
    ...
    ValueError: q has shape (3, 4) but k has shape (5, 3); the last dimensions (d_k) must match
    """
    arrays = [as_float_array(q, "q"), as_float_array(k, "k")]  # (..., n_q, d_k), (..., n_k, d_k)
    check_min_ndim(arrays[0], "q", 2, "(..., n_q, d_k)")
    check_min_ndim(arrays[1], "k", 2, "(..., n_k, d_k)")
    q, k = arrays
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q has shape {q.shape} but k has shape {k.shape}; the last dimensions (d_k) must match")
    if q.shape[-1] == 0:
        raise ValueError(f"q and k have d_k = 0 (shapes {q.shape}, {k.shape}); d_k must be at least 1")
    if v is not None:
        arrays.append(as_float_array(v, "v"))  # (..., n_k, d_v)
        check_min_ndim(arrays[2], "v", 2, "(..., n_k, d_v)")
        if k.shape[-2] != arrays[2].shape[-2]:
            raise ValueError(f"k has shape {k.shape} but v has shape {arrays[2].shape}; k and v must have the same "
                             "number of positions n_k (second-to-last dimension)")
    dtype = np.result_type(*arrays, np.float32)
    return tuple(a.astype(dtype, copy=False) for a in arrays)


def check_attention_inputs(q, k, v, mask=None, scale=None) -> tuple:
    """Every check of scaled dot-product attention: :func:`check_qkv`, :func:`check_mask`, the batches, the scale.

    Parameters
    ----------
    q, k, v, mask, scale
        As in :func:`scaled_dot_product_attention`.

    Returns
    -------
    tuple
        ``(q, k, v, mask, scale)`` checked; their leading (batch, head) shapes broadcast.

    Examples
    --------
    >>> check_attention_inputs(np.ones((2, 2, 4)), np.ones((3, 3, 4)), np.ones((3, 3, 1)))
    Traceback (most recent call last):
    ...
    ValueError: the leading (batch, head) dimensions do not broadcast: q has (2,), k has (3,), v has (3,)
    """
    q, k, v = check_qkv(q, k, v)  # (..., n_q, d_k), (..., n_k, d_k), (..., n_k, d_v)
    shapes = {"q": q.shape[:-2], "k": k.shape[:-2], "v": v.shape[:-2]}
    if mask is not None:
        mask = check_mask(mask, q.shape[-2], k.shape[-2],
                          f" (q has shape {q.shape}, k has shape {k.shape})")  # (..., n_q | 1, n_k | 1)
        shapes["mask"] = mask.shape[:-2]
    broadcast_batch_shapes(shapes)
    return q, k, v, mask, check_scale(scale, q.shape[-1])


def check_projections(x, w_q, w_k, w_v, mask=None, scale=None, name: str = "x") -> tuple:
    """A sequence ``x`` ``(..., n, d_model)``, projections ``(d_model, d_k)``, ``(d_model, d_k)``, ``(d_model, d_v)``.

    Parameters
    ----------
    x, w_q, w_k, w_v, mask, scale
        As in :func:`self_attention`.
    name : str
        The name of ``x``.

    Returns
    -------
    tuple
        ``(x, w_q, w_k, w_v, mask, scale)`` checked.

    Examples
    --------
    >>> check_projections(np.ones((3, 4)), np.ones((4, 2)), np.ones((4, 3)), np.ones((4, 2)))
    Traceback (most recent call last):
    ...
    ValueError: w_q has shape (4, 2) but w_k has shape (4, 3); queries and keys need the same d_k
    """
    x = as_float_array(x, name)  # (..., n, d_model)
    check_min_ndim(x, name, 2, "(..., n, d_model)")
    d_model, matrices = x.shape[-1], []
    for w_name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        w = as_float_array(w, w_name)  # (d_model, d_out)
        if w.ndim != 2:
            raise ValueError(f"{w_name} has shape {w.shape}; expected a matrix (d_model, d_out)")
        if w.shape[0] != d_model:
            raise ValueError(f"{name} has shape {x.shape} but {w_name} has shape {w.shape}; "
                             f"{w_name} needs d_model = {d_model} rows to multiply {name}")
        matrices.append(w)
    w_q, w_k, w_v = matrices
    if w_q.shape[1] != w_k.shape[1]:
        raise ValueError(f"w_q has shape {w_q.shape} but w_k has shape {w_k.shape}; queries and keys need the same d_k")
    if w_q.shape[1] == 0:
        raise ValueError(f"w_q and w_k have shape {w_q.shape}, so d_k = 0; they need at least one column")
    if mask is not None:
        mask = check_mask(mask, x.shape[-2], x.shape[-2], f" ({name} has shape {x.shape})")  # (..., n | 1, n | 1)
        broadcast_batch_shapes({name: x.shape[:-2], "mask": mask.shape[:-2]})
    return x, w_q, w_k, w_v, mask, check_scale(scale, w_q.shape[1])


def _projection_overflow(x, w_q, w_k, w_v, mask=None, scale=None) -> None:
    """Name the first projection of ``x`` that overflowed (called once the result is not finite)."""
    for name, w in (("x @ w_q", w_q), ("x @ w_k", w_k), ("x @ w_v", w_v)):
        y = x @ w  # (..., n, d_out)
        if not np.all(np.isfinite(y)):
            raise overflow_error(y.dtype, name)


# --- attention --------------------------------------------------------------------------------------------


def attention_scores(q, k, scale=None) -> np.ndarray:
    r"""The scaled logits ``Q K^T * scale``, shape ``(..., n_q, n_k)``.

    .. math:: S = \mathrm{scale} \cdot Q K^\top, \qquad \mathrm{scale} = 1/\sqrt{d_k} \text{ by default}

    Parameters
    ----------
    q, k, scale
        As in :func:`scaled_dot_product_attention`.

    Returns
    -------
    ndarray
        ``(..., n_q, n_k)`` scores, in the common float type of ``q`` and ``k`` (at least float32).

    Examples
    --------
    >>> print(attention_scores([[1.0, 0.0]], [[2.0, 0.0], [2.0, 2.0]], scale=1.0))
    [[2. 2.]]
    """
    q, k = check_qkv(q, k)  # (..., n_q, d_k), (..., n_k, d_k)
    broadcast_batch_shapes({"q": q.shape[:-2], "k": k.shape[:-2]})
    scale = check_scale(scale, q.shape[-1])
    return scale * (q @ np.swapaxes(k, -1, -2))  # (..., n_q, n_k)


@boundary(check_attention_inputs)
def scaled_dot_product_attention(q, k, v, mask=None, scale=None) -> AttentionResult:
    r"""Attention of queries ``q`` over keys ``k`` and values ``v``; returns ``(output, weights)``.

    .. math:: \operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V

    Parameters
    ----------
    q : array_like
        ``(..., n_q, d_k)`` queries, one per row.
    k : array_like
        ``(..., n_k, d_k)`` keys, one per row.
    v : array_like
        ``(..., n_k, d_v)`` values, one per key.
    mask : array_like of bool, optional
        Broadcasting to ``(..., n_q, n_k)``; True = query i may attend to key j. A query whose row
        is entirely False gets all-zero weights and a zero output.
    scale : float, optional
        Factor applied to ``q k^T``; default ``1/sqrt(d_k)``.

    Returns
    -------
    AttentionResult
        ``output`` ``(..., n_q, d_v)`` and ``weights`` ``(..., n_q, n_k)``. The leading ``...``
        dimensions (batch, heads) of q, k, v and mask broadcast against each other. Everything is
        computed in the widest float type of q, k and v, and at least in float32 (float16 dot
        products overflow at 65504).

    Examples
    --------
    >>> out, w = scaled_dot_product_attention(np.ones((2, 3, 4)), np.ones((2, 5, 4)), np.ones((2, 5, 6)))
    >>> out.shape, w.shape
    ((2, 3, 6), (2, 3, 5))
    >>> print(scaled_dot_product_attention.unchecked(np.eye(2), np.eye(2), np.eye(2), scale=0.0).output)
    [[0.5 0.5]
     [0.5 0.5]]
    >>> scaled_dot_product_attention(np.ones((3, 4)), np.ones((5, 3)), np.ones((5, 2)))
    Traceback (most recent call last):
    ...
    ValueError: q has shape (3, 4) but k has shape (5, 3); the last dimensions (d_k) must match
    """
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused by softmax_rows
        scores = (q * q.dtype.type(scale)) @ np.swapaxes(k, -1, -2)  # (..., n_q, n_k): similarities
    weights = softmax_rows(scores, mask)  # (..., n_q, n_k): rows sum to 1, fully masked rows to 0
    output = weights @ v  # (..., n_q, d_v): a weighted average of the values
    return AttentionResult(output, weights)


@boundary(check_projections, overflow=_projection_overflow)
def self_attention(x, w_q, w_k, w_v, mask=None, scale=None) -> AttentionResult:
    r"""Self-attention of a sequence ``x``: project it to queries, keys and values, then attend.

    .. math:: Q = X W_Q, \quad K = X W_K, \quad V = X W_V, \quad
              \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V

    Parameters
    ----------
    x : array_like
        ``(..., n, d_model)`` the sequence, one token per row.
    w_q, w_k : array_like
        ``(d_model, d_k)`` query and key projections.
    w_v : array_like
        ``(d_model, d_v)`` value projection.
    mask, scale : optional
        As in :func:`scaled_dot_product_attention`, with ``n_q = n_k = n``.

    Returns
    -------
    AttentionResult
        ``output`` ``(..., n, d_v)`` and ``weights`` ``(..., n, n)``. A projection that overflows its
        float type is refused, naming it (``x @ w_k overflowed in float16``).

    Examples
    --------
    >>> x = np.arange(6.0).reshape(3, 2)                           # (n, d_model)
    >>> out, w = self_attention(x, np.eye(2), np.eye(2), np.eye(2))
    >>> out.shape, w.shape
    ((3, 2), (3, 3))
    """
    dtype = np.result_type(x, w_q, w_k, w_v, np.float32)  # scores in at least float32, as in attention
    q = (x @ w_q).astype(dtype, copy=False)  # (..., n, d_k)
    k = (x @ w_k).astype(dtype, copy=False)  # (..., n, d_k)
    v = (x @ w_v).astype(dtype, copy=False)  # (..., n, d_v)
    return scaled_dot_product_attention.unchecked(q, k, v, mask, scale)
