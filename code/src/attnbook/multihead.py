"""Multi-head and grouped-query attention (:func:`multi_head_attention`), splitting and merging heads.

As in minGPT, the h per-head projections are stored side by side as one matrix per role
(:class:`MultiHeadWeights`); convention ``y = x @ W + b`` (rows are tokens).

>>> import numpy as np
>>> weights = init_multi_head_weights(d_model=8, seed=0)
>>> x = np.random.default_rng(1).standard_normal((2, 5, 8))            # (batch, n, d_model)
>>> out, attn = multi_head_attention(x, x, x, weights, n_heads=2)
>>> out.shape, attn.shape
((2, 5, 8), (2, 2, 5, 5))
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .attention import AttentionResult, scaled_dot_product_attention
from .masks import check_head_batches, check_head_mask
from .validation import (
    Array,
    Dims,
    as_float_array,
    boundary,
    check_positive_int,
    check_weights,
    overflow_error,
)

__all__ = [
    "MultiHeadWeights",
    "check_heads",
    "check_kv_heads",
    "init_multi_head_weights",
    "merge_heads",
    "multi_head_attention",
    "multi_head_weights_from_torch",
    "split_heads",
]


class MultiHeadWeights(NamedTuple):
    """Parameters of one multi-head attention layer: ``(d_model, d_model)`` matrices, narrower keys and values if grouped.

    Head i uses columns ``i d_head`` to ``(i + 1) d_head`` of ``w_q`` (``d_head = d_model / n_heads``) and
    the same rows of ``w_o``; key and value head j the columns ``j d_head`` to ``(j + 1) d_head`` of ``w_k``, ``w_v``.

    Attributes
    ----------
    w_q : ndarray
        ``(d_model, d_model)`` the query projections of all heads, side by side.
    w_k, w_v : ndarray
        ``(d_model, n_kv_heads * d_head)`` the key and value projections; ``(d_model, d_model)`` when
        every query head has its own.
    w_o : ndarray
        ``(d_model, d_model)`` the output projection :math:`W_O` of the concatenated heads.
    b_q : ndarray
        ``(d_model,)`` the bias of the query projection.
    b_k, b_v : ndarray
        ``(n_kv_heads * d_head,)`` the biases of the key and value projections.
    b_o : ndarray
        ``(d_model,)`` the bias of the output projection.

    Examples
    --------
    >>> w = init_multi_head_weights(4, seed=0)
    >>> w.w_q.shape, w.b_o.tolist()
    ((4, 4), [0.0, 0.0, 0.0, 0.0])
    """

    w_q: Array["d_model, d_model"]  # h query projections side by side
    w_k: Array["d_model, d_kv"]  # d_kv = n_kv_heads * d_head: d_model without grouping
    w_v: Array["d_model, d_kv"]
    w_o: Array["d_model, d_model"]  # output projection W_O
    b_q: Array["d_model"]
    b_k: Array["d_kv"]
    b_v: Array["d_kv"]
    b_o: Array["d_model"]


def check_heads(d_model: int, n_heads) -> int:
    """``n_heads`` as an int if it is a positive integer that divides ``d_model``.

    Parameters
    ----------
    d_model, n_heads : int
        The width split among the heads, the number of heads.

    Returns
    -------
    int
        ``n_heads``.

    Examples
    --------
    >>> check_heads(10, 4)
    Traceback (most recent call last):
    ...
    ValueError: d_model = 10 is not divisible by n_heads = 4; each head needs d_model / n_heads dimensions
    """
    n_heads = check_positive_int(n_heads, "n_heads")
    if d_model % n_heads:
        raise ValueError(f"d_model = {d_model} is not divisible by n_heads = {n_heads}; "
                         "each head needs d_model / n_heads dimensions")
    return n_heads


def check_kv_heads(n_heads: int, n_kv_heads) -> int:
    """``n_kv_heads`` as an int if it is a positive integer that divides ``n_heads``; see :func:`check_heads`.

    Parameters
    ----------
    n_heads, n_kv_heads : int
        The query heads (checked), the key and value heads.

    Returns
    -------
    int
        ``n_kv_heads``.

    Examples
    --------
    >>> check_kv_heads(8, 2)
    2
    """
    n_kv_heads = check_positive_int(n_kv_heads, "n_kv_heads")
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads = {n_heads} is not divisible by n_kv_heads = {n_kv_heads}; "
                         "each key and value head serves n_heads / n_kv_heads query heads")
    return n_kv_heads


def _split_arguments(x, n_heads) -> tuple:
    x = as_float_array(x, "x", layout="(..., n, d_model)")  # (..., n, d_model)
    return x, check_heads(x.shape[-1], n_heads)


@boundary(_split_arguments)
def split_heads(x, n_heads: int) -> np.ndarray:
    """``(..., n, d_model)`` -> ``(..., n_heads, n, d_model / n_heads)``: head i gets columns ``i*d_head ..``.

    Parameters
    ----------
    x : array_like
        ``(..., n, d_model)`` token vectors.
    n_heads : int
        The number of heads; must divide ``d_model``.

    Returns
    -------
    ndarray
        ``(..., n_heads, n, d_head)``.

    Examples
    --------
    >>> split_heads(np.arange(8.0).reshape(1, 8), 2)[:, 0].tolist()
    [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]
    >>> split_heads(np.ones((3, 10)), 4)
    Traceback (most recent call last):
    ...
    ValueError: d_model = 10 is not divisible by n_heads = 4; each head needs d_model / n_heads dimensions
    """
    *lead, n, d_model = x.shape
    heads = x.reshape(*lead, n, n_heads, d_model // n_heads)  # (..., n, h, d_head)
    return np.swapaxes(heads, -3, -2)  # (..., h, n, d_head)


def _merge_arguments(x) -> tuple:
    return (as_float_array(x, "x", layout="(..., n_heads, n, d_head)"),)  # (..., h, n, d_head)


@boundary(_merge_arguments)
def merge_heads(x) -> np.ndarray:
    """``(..., n_heads, n, d_head)`` -> ``(..., n, n_heads * d_head)``; the inverse of :func:`split_heads`.

    Parameters
    ----------
    x : array_like
        ``(..., n_heads, n, d_head)`` the heads' outputs.

    Returns
    -------
    ndarray
        ``(..., n, n_heads d_head)``.

    Examples
    --------
    >>> x = np.random.default_rng(0).standard_normal((2, 3, 8))
    >>> bool(np.array_equal(merge_heads(split_heads(x, 4)), x))
    True
    """
    *lead, h, n, d_head = x.shape
    return np.swapaxes(x, -3, -2).reshape(*lead, n, h * d_head)  # (..., n, d_model)


def init_multi_head_weights(d_model: int, seed: int = 0, n_heads: int | None = None,
                            n_kv_heads: int | None = None) -> MultiHeadWeights:
    r"""Random weights, uniform in ``±sqrt(6 / (fan_in + fan_out))`` (Glorot), biases 0; seeded.

    .. math:: W \sim \mathcal{U}\left(-\sqrt{6 / (d_\text{in} + d_\text{out})}, \sqrt{6 / (d_\text{in} + d_\text{out})}\right)

    Parameters
    ----------
    d_model : int
        The model width.
    seed : int or numpy Generator
        Seed of the generator.
    n_heads, n_kv_heads : int, optional
        For grouped-query attention (see :func:`multi_head_attention`); left out or equal, no grouping.

    Returns
    -------
    MultiHeadWeights
        The layer's weights (see :class:`MultiHeadWeights` for the shapes).

    Examples
    --------
    >>> w = init_multi_head_weights(4, seed=0)
    >>> w.w_q.shape, w.b_o.shape
    ((4, 4), (4,))
    >>> w = init_multi_head_weights(8, seed=0, n_heads=4, n_kv_heads=2)
    >>> w.w_q.shape, w.w_k.shape, w.b_v.shape
    ((8, 8), (8, 4), (4,))
    """
    d_model = check_positive_int(d_model, "d_model")
    if n_kv_heads is not None:
        if n_heads is None:
            raise ValueError("n_kv_heads needs n_heads: the width of a key head is d_model / n_heads")
        n_heads = check_heads(d_model, n_heads)
        n_kv_heads = check_kv_heads(n_heads, n_kv_heads)
    elif n_heads is not None:
        n_heads = check_heads(d_model, n_heads)
    rng = np.random.default_rng(seed)
    if n_kv_heads is None or n_kv_heads == n_heads:  # every head its own keys and values
        limit = math.sqrt(6.0 / (2 * d_model))
        w_q, w_k, w_v, w_o = rng.uniform(-limit, limit, size=(4, d_model, d_model))  # (d_model, d_model) each
        zeros = np.zeros(d_model)  # (d_model,)
        return MultiHeadWeights(w_q, w_k, w_v, w_o, zeros, zeros.copy(), zeros.copy(), zeros.copy())
    d_kv = n_kv_heads * (d_model // n_heads)  # width of all key (or value) heads together
    limit, limit_kv = math.sqrt(6.0 / (2 * d_model)), math.sqrt(6.0 / (d_model + d_kv))
    w_q, w_o = rng.uniform(-limit, limit, size=(2, d_model, d_model))  # (d_model, d_model) each
    w_k, w_v = rng.uniform(-limit_kv, limit_kv, size=(2, d_model, d_kv))  # (d_model, d_kv) each
    return MultiHeadWeights(w_q, w_k, w_v, w_o, np.zeros(d_model), np.zeros(d_kv), np.zeros(d_kv),
                            np.zeros(d_model))


def _multi_head_arguments(query, key, value, weights, n_heads, mask=None, n_kv_heads=None) -> tuple:
    """The boundary of :func:`multi_head_attention`: every argument checked, in the order of the errors."""
    query = as_float_array(query, "query", layout="(..., n_q, d_model)")  # (..., n_q, d_model)
    key = as_float_array(key, "key", layout="(..., n_k, d_model)")  # (..., n_k, d_model)
    value = as_float_array(value, "value", layout="(..., n_k, d_model)")  # (..., n_k, d_model)
    d_model = query.shape[-1]
    for name, array in (("key", key), ("value", value)):
        if array.shape[-1] != d_model:
            raise ValueError(f"query has shape {query.shape} but {name} has shape {array.shape}; "
                             "both need the model width d_model in the last dimension")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"key has shape {key.shape} but value has shape {value.shape}; "
                         "they need the same number of positions n_k")
    n_heads = check_heads(d_model, n_heads)
    n_kv_heads = n_heads if n_kv_heads is None else check_kv_heads(n_heads, n_kv_heads)
    dims = Dims(d_model=(d_model, f"the inputs have d_model = {d_model}"))
    d_kv = n_kv_heads * (d_model // n_heads)
    if d_kv == d_model:
        dims.alias("d_kv", "d_model")
    else:
        dims.fix("d_kv", d_kv, f"the key and value heads need {d_kv} columns")
    weights = check_weights(weights, MultiHeadWeights, "weights", dims, see="init_multi_head_weights")
    if mask is not None:
        mask = check_head_mask(mask, query.shape[-2], key.shape[-2],
                               context=f" (query has shape {query.shape}, key has shape {key.shape})")
    check_head_batches({"query": query.shape, "key": key.shape, "value": value.shape}, mask)
    return query, key, value, weights, n_heads, mask, n_kv_heads


def _projection_overflow(query, key, value, w, n_heads, mask=None, n_kv_heads=None) -> None:
    """Name the projection that overflowed (called once the scores or the output were not finite)."""
    for name, x, w_x, b_x in (("query", query, w.w_q, w.b_q), ("key", key, w.w_k, w.b_k), ("value", value, w.w_v, w.b_v)):
        y = x @ w_x + b_x  # (..., n, d_out)
        if not np.all(np.isfinite(y)):
            raise overflow_error(y.dtype, f"{name} @ weights.w_{name[0]} + weights.b_{name[0]}")
    raise overflow_error(np.result_type(query, w.w_o), "the output projection heads @ weights.w_o + weights.b_o")


@boundary(_multi_head_arguments, overflow=_projection_overflow)
def multi_head_attention(query, key, value, weights: MultiHeadWeights, n_heads: int,
                         mask=None, n_kv_heads: int | None = None) -> AttentionResult:
    r"""Multi-head attention of ``query`` over ``key`` and ``value``: h heads on ``d_model / h`` slices, then ``W_O``.

    .. math:: \operatorname{MultiHead}(X_q, X_{kv}) = \operatorname{Concat}(\text{head}_1, \dots, \text{head}_h) W_O + b_O,
              \quad \text{head}_i = \operatorname{Attention}(X_q W_Q^{(i)}, X_{kv} W_K^{(g(i))}, X_{kv} W_V^{(g(i))})

    with :math:`g(i) = i` (multi-head attention) or, with ``n_kv_heads`` key and value heads shared
    by groups of :math:`G = h / n_\text{kv}` consecutive query heads, :math:`g(i) = \lfloor i / G \rfloor`
    (grouped-query attention; multi-query attention when ``n_kv_heads = 1``), as PyTorch's
    ``enable_gqa=True``. Self-attention passes one array three times; cross-attention the decoder
    states as ``query``, the encoder output as ``key`` and ``value``.

    Parameters
    ----------
    query : array_like
        ``(..., n_q, d_model)``.
    key, value : array_like
        ``(..., n_k, d_model)``.
    weights : MultiHeadWeights
        See :func:`init_multi_head_weights`.
    n_heads : int
        The number of heads; must divide ``d_model``.
    mask : array_like of bool, optional
        True = may attend: ``(n_q, n_k)`` or ``(batch, n_q | 1, n_k)``, shared by all heads, or
        ``(batch, n_heads | 1, n_q | 1, n_k)`` with one mask per (query) head.
    n_kv_heads : int, optional
        The number of key and value heads; must divide ``n_heads``. Default ``n_heads``.

    Returns
    -------
    AttentionResult
        ``output`` ``(..., n_q, d_model)`` and ``weights`` ``(..., n_heads, n_q, n_k)``.

    Examples
    --------
    >>> w = init_multi_head_weights(8, seed=0, n_heads=4, n_kv_heads=1)      # multi-query attention
    >>> x = np.random.default_rng(0).standard_normal((5, 8))                 # (n, d_model)
    >>> multi_head_attention(x, x, x, w, n_heads=4, n_kv_heads=1).weights.shape
    (4, 5, 5)
    >>> w = init_multi_head_weights(6, seed=0)
    >>> out, attn = multi_head_attention(np.ones((2, 6)), np.ones((3, 6)), np.ones((3, 6)), w, n_heads=2)
    >>> out.shape, attn.shape
    ((2, 6), (2, 2, 3))
    >>> multi_head_attention(np.ones((2, 6)), np.ones((3, 4)), np.ones((3, 4)), w, n_heads=2)
    Traceback (most recent call last):
    ...
    ValueError: query has shape (2, 6) but key has shape (3, 4); both need the model width d_model in the last dimension
    """
    w, n_kv = weights, n_heads if n_kv_heads is None else n_kv_heads
    q = query @ w.w_q + w.b_q  # (..., n_q, d_model)
    k = key @ w.w_k + w.b_k  # (..., n_k, n_kv d_head)
    v = value @ w.w_v + w.b_v  # (..., n_k, n_kv d_head)
    dtype = np.result_type(q, k, v, np.float32)  # scores in at least float32, as in attention
    q = split_heads.unchecked(q.astype(dtype, copy=False), n_heads)  # (..., h, n_q, d_head)
    k = split_heads.unchecked(k.astype(dtype, copy=False), n_kv)  # (..., n_kv, n_k, d_head)
    v = split_heads.unchecked(v.astype(dtype, copy=False), n_kv)  # (..., n_kv, n_k, d_head)
    scale = 1.0 / math.sqrt(q.shape[-1])
    if n_kv == n_heads:
        heads, attention = scaled_dot_product_attention.unchecked(q, k, v, mask, scale)  # (..., h, n_q, d_head), (..., h, n_q, n_k)
    else:
        heads, attention = attend_grouped(q, k, v, mask, scale)  # (..., h, n_q, d_head), (..., h, n_q, n_k)
    output = merge_heads.unchecked(heads) @ w.w_o + w.b_o  # (..., n_q, d_model)
    return AttentionResult(output, attention)


def attend_grouped(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask, scale: float) -> AttentionResult:
    """Unchecked kernel: attention of ``h`` query heads over ``n_kv`` shared key and value heads.

    Query head i reads key and value head ``i // (h / n_kv)``; a group's query heads are stacked against
    their one key head, which broadcasts (nothing is copied). ``q`` ``(..., h, n_q, d)``, ``k``, ``v``
    ``(..., n_kv, n_k, d)``, the mask as in :func:`multi_head_attention`.

    >>> q, k = np.ones((4, 2, 3)), np.ones((2, 5, 3))
    >>> attend_grouped(q, k, k, None, 1.0).weights.shape
    (4, 2, 5)
    """
    *lead, h, n_q, d = q.shape
    n_kv = k.shape[-3]
    group = h // n_kv
    q = q.reshape(*lead, n_kv, group, n_q, d)  # (..., n_kv, G, n_q, d): the query heads of each group
    k = k[..., :, None, :, :]  # (..., n_kv, 1, n_k, d): one key head per group
    v = v[..., :, None, :, :]  # (..., n_kv, 1, n_k, d_v)
    if mask is not None and mask.ndim >= 3:
        if mask.shape[-3] == 1:  # one mask for every head
            mask = mask[..., None, :, :]  # (..., 1, 1, n_q | 1, n_k)
        else:  # one mask per query head
            mask = mask.reshape(*mask.shape[:-3], n_kv, group, *mask.shape[-2:])  # (..., n_kv, G, n_q | 1, n_k)
    heads, weights = scaled_dot_product_attention.unchecked(q, k, v, mask, scale)  # (..., n_kv, G, n_q, d_v), (..., n_kv, G, n_q, n_k)
    heads = heads.reshape(*heads.shape[:-4], h, *heads.shape[-2:])  # (..., h, n_q, d_v)
    weights = weights.reshape(*weights.shape[:-4], h, *weights.shape[-2:])  # (..., h, n_q, n_k)
    return AttentionResult(heads, weights)


def multi_head_weights_from_torch(in_proj_weight, in_proj_bias, out_proj_weight,
                                  out_proj_bias) -> MultiHeadWeights:
    r"""Convert the parameters of ``torch.nn.MultiheadAttention`` (as numpy arrays) to this package's layout.

    .. math:: W_Q = (W_\text{in}[0{:}d])^\top, \; W_K = (W_\text{in}[d{:}2d])^\top, \;
              W_V = (W_\text{in}[2d{:}3d])^\top, \; W_O = W_\text{out}^\top

    PyTorch stacks Q, K, V in ``in_proj_weight`` and computes ``y = x W^T + b``; this package ``y = x W + b``,
    so each block is transposed.

    Parameters
    ----------
    in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias : array_like
        ``(3 d_model, d_model)``, ``(3 d_model,)``, ``(d_model, d_model)``, ``(d_model,)``.

    Returns
    -------
    MultiHeadWeights
        The same layer in this package's layout.

    Examples
    --------
    >>> d = 4
    >>> w = multi_head_weights_from_torch(np.ones((3 * d, d)), np.zeros(3 * d), np.eye(d), np.zeros(d))
    >>> w.w_q.shape, w.b_v.shape
    ((4, 4), (4,))
    """
    in_w = as_float_array(in_proj_weight, "in_proj_weight")  # (3 d_model, d_model)
    in_b = as_float_array(in_proj_bias, "in_proj_bias")  # (3 d_model,)
    out_w = as_float_array(out_proj_weight, "out_proj_weight")  # (d_model, d_model)
    out_b = as_float_array(out_proj_bias, "out_proj_bias")  # (d_model,)
    if in_w.ndim != 2 or in_w.shape[0] != 3 * in_w.shape[1]:
        raise ValueError(f"in_proj_weight has shape {in_w.shape}; expected (3 d_model, d_model)")
    d_model = in_w.shape[1]
    if in_b.shape != (3 * d_model,):
        raise ValueError(f"in_proj_bias has shape {in_b.shape}; expected ({3 * d_model},)")
    if out_w.shape != (d_model, d_model) or out_b.shape != (d_model,):
        raise ValueError(f"out_proj has weight {out_w.shape} and bias {out_b.shape}; "
                         f"expected ({d_model}, {d_model}) and ({d_model},)")
    w_q, w_k, w_v = (block.T for block in np.split(in_w, 3))  # (d_model, d_model) each
    b_q, b_k, b_v = np.split(in_b, 3)  # (d_model,) each
    return MultiHeadWeights(w_q, w_k, w_v, out_w.T, b_q, b_k, b_v, out_b)

