"""Scaled dot-product attention, ``softmax(Q K^T / sqrt(d_k)) V``, and self-attention of one sequence.

This module is the reference: :func:`scaled_dot_product_attention` checks its arguments once and
then computes the formula line by line (:func:`attend`). :func:`self_attention` projects a sequence
to queries, keys and values (``Q = X W_Q``, ``K = X W_K``, ``V = X W_V``) and attends; the
projection matrices are the only learned parameters of one attention head. A faster kernel for
large batches, tested equal to this one, is :func:`attnbook.efficient.batched.batched_attention`.

>>> import numpy as np
>>> q = np.eye(2); k = 2 * np.eye(2); v = np.eye(2)
>>> out, weights = scaled_dot_product_attention(q, k, v)
>>> print(np.round(weights, 4))
[[0.8044 0.1956]
 [0.1956 0.8044]]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .softmax import softmax_rows
from .validation import broadcast_batch_shapes, check_attention_inputs, check_projections, check_qkv, check_scale

__all__ = ["AttentionResult", "attention_scores", "scaled_dot_product_attention", "self_attention"]


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


def attention_scores(q, k, scale=None) -> np.ndarray:
    r"""The scaled logits ``Q K^T * scale``, shape ``(..., n_q, n_k)``.

    .. math:: S = \mathrm{scale} \cdot Q K^\top, \qquad \mathrm{scale} = 1/\sqrt{d_k} \text{ by default}

    Parameters
    ----------
    q : array_like
        ``(..., n_q, d_k)`` queries, one per row.
    k : array_like
        ``(..., n_k, d_k)`` keys, one per row.
    scale : float, optional
        The factor; default ``1 / sqrt(d_k)``.

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
    >>> out, w = scaled_dot_product_attention(np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 6)),
    ...                                       mask=np.ones((2, 3, 5), dtype=bool))
    >>> w.shape
    (2, 3, 5)
    >>> scaled_dot_product_attention(np.ones((3, 4)), np.ones((5, 3)), np.ones((5, 2)))
    Traceback (most recent call last):
    ...
    ValueError: q has shape (3, 4) but k has shape (5, 3); the last dimensions (d_k) must match
    """
    q, k, v, mask, scale = check_attention_inputs(q, k, v, mask, scale)  # once, at the boundary
    return attend(q, k, v, mask, scale)


def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask=None, scale: float = 1.0) -> AttentionResult:
    """Unchecked kernel: ``softmax(scale q k^T, mask) v`` on arrays that fit (see :func:`scaled_dot_product_attention`).

    >>> print(attend(np.eye(2), np.eye(2), np.eye(2), scale=0.0).output)
    [[0.5 0.5]
     [0.5 0.5]]
    """
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused by softmax_rows
        scores = (q * q.dtype.type(scale)) @ np.swapaxes(k, -1, -2)  # (..., n_q, n_k): similarities
    weights = softmax_rows(scores, mask)  # (..., n_q, n_k): rows sum to 1, fully masked rows to 0
    output = weights @ v  # (..., n_q, d_v): a weighted average of the values
    return AttentionResult(output, weights)


def project(x: np.ndarray, w: np.ndarray, what: str, bias=None) -> np.ndarray:
    """Unchecked kernel: ``x @ w`` (plus ``bias``), or an error naming ``what`` (``"x @ w_q"``) on overflow.

    The numbers are those of the plain expression; numpy's overflow warning is silenced because
    the overflow is reported here, naming the arguments, instead of as a non-finite ``q`` further on.

    >>> project(np.ones((1, 2)), np.eye(2), "x @ w_q", bias=np.ones(2)).tolist()
    [[2.0, 2.0]]
    """
    with np.errstate(over="ignore", invalid="ignore"):
        y = x @ w if bias is None else x @ w + bias  # (..., n, d_out)
    if not np.all(np.isfinite(y)):
        raise ValueError(
            f"{what} overflowed in {y.dtype} (largest {float(np.finfo(y.dtype).max):.6g}); scale the inputs "
            "down or compute in a wider float type"
        )
    return y


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
        ``output`` ``(..., n, d_v)`` and ``weights`` ``(..., n, n)``.

    Examples
    --------
    >>> x = np.arange(6.0).reshape(3, 2)                           # (n, d_model)
    >>> out, w = self_attention(x, np.eye(2), np.eye(2), np.eye(2))
    >>> out.shape, w.shape
    ((3, 2), (3, 3))
    >>> self_attention(np.ones((3, 4)), np.ones((4, 2)), np.ones((4, 3)), np.ones((4, 2)))
    Traceback (most recent call last):
    ...
    ValueError: w_q has shape (4, 2) but w_k has shape (4, 3); queries and keys need the same d_k
    """
    x, w_q, w_k, w_v, mask, scale = check_projections(x, w_q, w_k, w_v, mask, scale)  # once, at the boundary
    dtype = np.result_type(x, w_q, w_k, w_v, np.float32)  # scores in at least float32, as in attention
    q = project(x, w_q, "x @ w_q").astype(dtype, copy=False)  # (..., n, d_k)
    k = project(x, w_k, "x @ w_k").astype(dtype, copy=False)  # (..., n, d_k)
    v = project(x, w_v, "x @ w_v").astype(dtype, copy=False)  # (..., n, d_v)
    return attend(q, k, v, mask, scale)
