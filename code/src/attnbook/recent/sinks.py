"""Learned sinks (gpt-oss, 2025): one learned logit per head in the softmax's denominator, a place to put weight.

:func:`sink_attention` is attention whose weights may sum to less than 1; it equals attention with one more,
virtual, token whose score is the sink's logit for every query and whose value is zero.
:func:`sink_grouped_attention` is gpt-oss's layer: grouped-query attention with biases, rotary positions, a
sliding window on every other layer, and the sinks.

>>> import numpy as np
>>> out, weights = sink_attention(np.zeros((2, 1, 4)), np.ones((2, 3, 4)), np.ones((2, 3, 2)), sinks=[0.0, 5.0])
>>> np.round(weights.sum(axis=-1), 4).tolist()                 # e^0 and e^5 beside three keys of logit 0
[[0.75], [0.0198]]
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..attention import AttentionResult, check_attention_inputs
from ..masks import banded_mask
from ..multihead import check_kv_heads
from ..positional import apply_rotary_halves, check_rotary_positions
from ..softmax import softmax_rows
from ..validation import (
    Array,
    Dims,
    as_float_array,
    boundary,
    broadcast_batch_shapes,
    check_positive_int,
    check_weights,
)
from .gated import init_gated_attention

__all__ = ["SinkAttentionWeights", "init_sink_attention", "sink_attention", "sink_grouped_attention"]


class SinkAttentionWeights(NamedTuple):
    """Weights of gpt-oss's attention layer, in the row-vector convention ``y = x W + b``.

    Attributes
    ----------
    w_q, b_q : ndarray
        ``(d_model, n_heads d_head)``, ``(n_heads d_head,)`` the queries.
    w_k, b_k, w_v, b_v : ndarray
        ``(d_model, n_kv_heads d_head)``, ``(n_kv_heads d_head,)`` the keys and values.
    w_o, b_o : ndarray
        ``(n_heads d_head, d_model)``, ``(d_model,)`` the output projection.
    sinks : ndarray
        ``(n_heads,)`` each head's sink logit.

    Examples
    --------
    >>> w = init_sink_attention(16, 4, n_kv_heads=2, d_head=4)
    >>> w.w_k.shape, w.sinks.shape
    ((16, 8), (4,))
    """

    w_q: Array["d_model, d_q"]
    b_q: Array["d_q"]
    w_k: Array["d_model, d_kv"]
    b_k: Array["d_kv"]
    w_v: Array["d_model, d_kv"]
    b_v: Array["d_kv"]
    w_o: Array["d_q, d_model"]
    b_o: Array["d_model"]
    sinks: Array["n_heads"]


def init_sink_attention(d_model: int, n_heads: int, n_kv_heads: int, d_head: int,
                        seed: int = 0) -> SinkAttentionWeights:
    """Seeded weights of gpt-oss's attention: the matrices of gated attention's initialiser, zero biases and sinks.

    Parameters
    ----------
    d_model, n_heads, n_kv_heads, d_head, seed
        As in :func:`attnbook.recent.gated.init_gated_attention`.

    Returns
    -------
    SinkAttentionWeights
        The weights of :func:`sink_grouped_attention`.

    Examples
    --------
    >>> init_sink_attention(8, 2, n_kv_heads=1, d_head=4).w_o.shape
    (8, 8)
    """
    w = init_gated_attention(d_model, n_heads, n_kv_heads, d_head, seed)
    return SinkAttentionWeights(w.w_q, np.zeros(w.w_q.shape[1]), w.w_k, np.zeros(w.w_k.shape[1]), w.w_v,
                                np.zeros(w.w_v.shape[1]), w.w_o, np.zeros(w.w_o.shape[1]), np.zeros(n_heads))


def _sink_arguments(q, k, v, sinks, mask=None, scale=None) -> tuple:
    q, k, v, mask, scale = check_attention_inputs(q, k, v, mask, scale)
    sinks = as_float_array(sinks, "sinks")  # (...): one per head
    broadcast_batch_shapes({"q": q.shape[:-2], "sinks": sinks.shape})
    return q, k, v, sinks, mask, scale


@boundary(_sink_arguments)
def sink_attention(q, k, v, sinks, mask=None, scale=None) -> AttentionResult:
    r"""Attention with a learned sink logit :math:`s` in the softmax's denominator: weights may sum to less than 1.

    .. math::
        a_{ij} = \frac{e^{\ell_{ij}}}{e^{s} + \sum_{l} e^{\ell_{il}}}, \qquad
        o_i = \sum_j a_{ij} v_j, \qquad \ell_{ij} = \text{scale}\; q_i \cdot k_j

    It is attention over one more, virtual, key :math:`k_\varnothing` with :math:`\ell_{i\varnothing} = s`
    for every query and value :math:`v_\varnothing = 0`: the sink takes the weight
    :math:`e^{s} / (e^{s} + \sum_l e^{\ell_{il}})` and adds nothing to the output. StreamingLLM's sink
    tokens are real tokens that models learn to use that way; gpt-oss gives each head the place outright.

    Parameters
    ----------
    q, k, v
        As in :func:`attnbook.scaled_dot_product_attention`.
    sinks : array_like
        The sink logits, broadcasting against the leading (batch, head) dimensions of ``q``: ``(n_heads,)``
        for ``q`` of shape ``(batch, n_heads, n_q, d_k)``.
    mask, scale
        As in :func:`attnbook.scaled_dot_product_attention`.

    Returns
    -------
    AttentionResult
        ``output`` ``(..., n_q, d_v)`` and ``weights`` ``(..., n_q, n_k)`` over the real keys, rows summing to
        ``1 - a_sink``.

    Examples
    --------
    >>> out, w = sink_attention(np.zeros((1, 2)), np.zeros((1, 2)), [[4.0]], sinks=0.0)
    >>> w.tolist(), out.tolist()                                # half the weight on the sink, whose value is 0
    ([[0.5]], [[2.0]])
    """
    scores = scale * (q @ np.swapaxes(k, -1, -2))  # (..., n_q, n_k)
    sink = np.broadcast_to(np.asarray(sinks)[..., None, None], scores.shape[:-1] + (1,))  # (..., n_q, 1)
    batch = np.broadcast_shapes(scores.shape[:-1], sink.shape[:-1])
    logits = np.concatenate([np.broadcast_to(scores, batch + scores.shape[-1:]),
                             np.broadcast_to(sink, batch + (1,))], axis=-1)  # (..., n_q, n_k + 1): the sink last
    allowed = None if mask is None else np.concatenate([np.broadcast_to(mask, batch + scores.shape[-1:]),
                                                        np.ones(batch + (1,), dtype=bool)], axis=-1)  # (..., n_q, n_k + 1)
    weights = softmax_rows(logits, allowed)[..., :-1]  # (..., n_q, n_k): the sink's share dropped
    return AttentionResult(weights @ v, weights)  # (..., n_q, d_v)


def _layer_arguments(x, weights: SinkAttentionWeights, n_heads: int, n_kv_heads: int, window: int | None = None,
                     positions=None, frequencies=None) -> tuple:
    x = as_float_array(x, "x", layout="(..., n, d_model)")  # (..., n, d_model)
    n_heads = check_positive_int(n_heads, "n_heads")
    n_kv_heads = check_kv_heads(n_heads, n_kv_heads)
    dims = Dims(d_model=(x.shape[-1], f"x has d_model = {x.shape[-1]}"), n_heads=(n_heads, f"n_heads = {n_heads}"))
    weights = check_weights(weights, SinkAttentionWeights, "weights", dims, see="init_sink_attention")
    d_q = weights.w_q.shape[1]
    if d_q % n_heads or weights.w_k.shape[1] != n_kv_heads * (d_q // n_heads):
        raise ValueError(f"weights.w_q has {d_q} columns and weights.w_k {weights.w_k.shape[1]}; expected "
                         f"n_heads = {n_heads} and n_kv_heads = {n_kv_heads} heads of one width")
    d_head, n = d_q // n_heads, x.shape[-2]
    window = None if window is None else check_positive_int(window, "window")
    positions, frequencies = check_rotary_positions(positions, frequencies, n, d_head)
    return x, weights, n_heads, n_kv_heads, window, positions, frequencies


@boundary(_layer_arguments)
def sink_grouped_attention(x, weights: SinkAttentionWeights, n_heads: int, n_kv_heads: int, window: int | None = None,
                           positions=None, frequencies=None) -> AttentionResult:
    r"""gpt-oss's attention layer: causal grouped-query attention with biases, rotary positions and learned sinks.

    .. math::
        q_{h,i} = \operatorname{RoPE}_i(x_i W_{Q,h} + b_{Q,h}), \quad
        k_{g,j} = \operatorname{RoPE}_j(x_j W_{K,g} + b_{K,g}), \quad v_{g,j} = x_j W_{V,g} + b_{V,g},

        y_i = \Bigl[\textstyle\sum_{j} a_{h,ij}\, v_{g(h),j}\Bigr]_h W_O + b_O, \qquad
        a_{h,ij} = \frac{e^{\ell_{h,ij}}}{e^{s_h} + \sum_{l} e^{\ell_{h,il}}} \quad (j \le i,\ i - j < w)

    with :func:`sink_attention`'s weights, rotary pairs in the half-split layout and, on gpt-oss's sliding
    layers, a window of :math:`w` keys (the query's own included).

    Parameters
    ----------
    x : array_like
        ``(..., n, d_model)`` the sequence.
    weights : SinkAttentionWeights
        See :func:`init_sink_attention`.
    n_heads, n_kv_heads : int
        The query heads and the key-value heads (dividing ``n_heads``).
    window : int, optional
        Keys each query sees, itself included (gpt-oss: 128 on every other layer); default all earlier ones.
    positions : array_like, optional
        ``(n,)`` the tokens' positions; default ``0 .. n - 1``.
    frequencies : array_like, optional
        ``(d_head / 2,)`` the rotary frequencies; default ``rotary_frequencies(d_head)``.

    Returns
    -------
    AttentionResult
        ``output`` ``(..., n, d_model)`` and ``weights`` ``(..., n_heads, n, n)`` over the real keys.

    Examples
    --------
    >>> w = init_sink_attention(8, 2, n_kv_heads=1, d_head=4)
    >>> x = np.random.default_rng(0).standard_normal((5, 8))
    >>> out, a = sink_grouped_attention(x, w._replace(sinks=np.array([0.0, 30.0])), 2, 1, window=2)
    >>> bool(np.all(a[1] < 1e-12)), int(np.count_nonzero(a[0, 4]))   # head 1 rests on its sink; two keys seen
    (True, 2)
    """
    d_head = weights.w_q.shape[1] // n_heads
    n, group = x.shape[-2], n_heads // n_kv_heads

    def heads(y: np.ndarray, count: int) -> np.ndarray:
        return np.swapaxes(y.reshape(*y.shape[:-1], count, d_head), -3, -2)  # (..., count, n, d_head)

    q = apply_rotary_halves(heads(x @ weights.w_q + weights.b_q, n_heads), positions, frequencies)  # (..., h, n, d)
    k = apply_rotary_halves(heads(x @ weights.w_k + weights.b_k, n_kv_heads), positions, frequencies)  # (..., g, n, d)
    v = heads(x @ weights.w_v + weights.b_v, n_kv_heads)  # (..., g, n, d)
    q = q.reshape(*q.shape[:-3], n_kv_heads, group, n, d_head)  # (..., g, G, n, d): the query heads of each group
    mask = np.tri(n, dtype=bool) if window is None else banded_mask(n, window - 1, causal=True)  # (n, n)
    out, attention = sink_attention.unchecked(q, k[..., :, None, :, :], v[..., :, None, :, :],
                                              weights.sinks.reshape(n_kv_heads, group), mask,
                                              1.0 / math.sqrt(d_head))  # (..., g, G, n, d), (..., g, G, n, n)
    out = out.reshape(*out.shape[:-4], n_heads, n, d_head)  # (..., h, n, d)
    merged = np.swapaxes(out, -3, -2).reshape(*x.shape[:-1], -1)  # (..., n, h d)
    return AttentionResult(merged @ weights.w_o + weights.b_o, attention.reshape(*attention.shape[:-4], n_heads, n, n))
