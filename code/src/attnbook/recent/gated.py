"""Gated attention (Qiu et al., 2025; Qwen3-Next): each head's output multiplied by a sigmoid gate read from the input.

The layer of Qwen3-Next: grouped-query attention with RMSNorm on each query and key head, rotary positions on
the first ``rotary_dim`` coordinates of each head (half-split layout), and the gate
``sigmoid(x W_gate)`` on the attention output, coordinate by coordinate, before the output projection.

>>> import numpy as np
>>> weights = init_gated_attention(d_model=16, n_heads=4, n_kv_heads=2, d_head=4)
>>> x = np.random.default_rng(0).standard_normal((5, 16))               # (n, d_model)
>>> out, attention, gate = gated_attention(x, weights, n_heads=4, n_kv_heads=2)
>>> out.shape, attention.shape, bool(np.all((gate > 0) & (gate < 1)))
((5, 16), (4, 5, 5), True)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..modern import rms_norm
from ..multihead import attend_grouped, check_kv_heads
from ..positional import apply_rotary_halves, check_rotary_positions
from ..masks import check_mask
from ..validation import Array, Dims, as_float_array, boundary, check_bool, check_positive_int, check_weights

__all__ = ["GatedAttentionResult", "GatedAttentionWeights", "gated_attention", "init_gated_attention"]


class GatedAttentionWeights(NamedTuple):
    """Weights of gated grouped-query attention, in the row-vector convention ``y = x W`` (no biases).

    Attributes
    ----------
    w_q, w_gate : ndarray
        ``(d_model, n_heads d_head)`` the queries and the gates' logits (Qwen3-Next's ``q_proj`` holds both,
        head by head: each head's query, then its gate).
    w_k, w_v : ndarray
        ``(d_model, n_kv_heads d_head)`` the keys and values.
    w_o : ndarray
        ``(n_heads d_head, d_model)`` the output projection.
    q_norm, k_norm : ndarray
        ``(d_head,)`` the gains of the RMSNorms of each query head and each key head (Qwen3-Next stores
        ``gain - 1``).

    Examples
    --------
    >>> w = init_gated_attention(16, 4, n_kv_heads=2, d_head=4)
    >>> w.w_gate.shape, w.w_k.shape, w.q_norm.shape
    ((16, 16), (16, 8), (4,))
    """

    w_q: Array["d_model, d_q"]  # d_q = n_heads d_head
    w_gate: Array["d_model, d_q"]
    w_k: Array["d_model, d_kv"]  # d_kv = n_kv_heads d_head
    w_v: Array["d_model, d_kv"]
    w_o: Array["d_q, d_model"]
    q_norm: Array["d_head"]
    k_norm: Array["d_head"]


class GatedAttentionResult(NamedTuple):
    """What gated attention returns: ``output, weights, gate = ...``.

    Attributes
    ----------
    output : ndarray
        ``(..., n, d_model)``.
    weights : ndarray
        ``(..., n_heads, n, n)`` the causal attention weights of each query head.
    gate : ndarray
        ``(..., n_heads, n, d_head)`` the gate of each head's output, in ``(0, 1)``.

    Examples
    --------
    >>> w = init_gated_attention(8, 2, n_kv_heads=1, d_head=4)
    >>> [a.shape for a in gated_attention(np.ones((3, 8)), w, 2, 1)]
    [(3, 8), (2, 3, 3), (2, 3, 4)]
    """

    output: np.ndarray  # (..., n, d_model)
    weights: np.ndarray  # (..., h, n, n)
    gate: np.ndarray  # (..., h, n, d_head)


def init_gated_attention(d_model: int, n_heads: int, n_kv_heads: int, d_head: int,
                         seed: int = 0) -> GatedAttentionWeights:
    """Seeded weights of gated attention: normal matrices of variance ``1 / fan_in``, norm gains of 1.

    Parameters
    ----------
    d_model, n_heads, n_kv_heads, d_head : int
        The model width, the query heads, the key-value heads (dividing ``n_heads``) and each head's width.
    seed : int, optional
        Seed of the weights; default 0.

    Returns
    -------
    GatedAttentionWeights
        The weights of :func:`gated_attention`.

    Examples
    --------
    >>> init_gated_attention(8, 2, n_kv_heads=2, d_head=2).w_o.shape
    (4, 8)
    """
    d_model, n_heads, d_head = (check_positive_int(v, name) for v, name in
                                ((d_model, "d_model"), (n_heads, "n_heads"), (d_head, "d_head")))
    n_kv_heads = check_kv_heads(n_heads, n_kv_heads)
    rng = np.random.default_rng(seed)

    def normal(rows: int, cols: int) -> np.ndarray:
        return rng.standard_normal((rows, cols)) / math.sqrt(rows)  # (rows, cols)

    d_q, d_kv = n_heads * d_head, n_kv_heads * d_head
    return GatedAttentionWeights(normal(d_model, d_q), normal(d_model, d_q), normal(d_model, d_kv),
                                 normal(d_model, d_kv), normal(d_q, d_model), np.ones(d_head), np.ones(d_head))


def _gated_arguments(x, weights: GatedAttentionWeights, n_heads: int, n_kv_heads: int, rotary_dim: int | None = None,
                     positions=None, frequencies=None, mask=None, gated: bool = True, eps: float = 1e-6) -> tuple:
    x = as_float_array(x, "x", layout="(..., n, d_model)")  # (..., n, d_model)
    n_heads = check_positive_int(n_heads, "n_heads")
    n_kv_heads = check_kv_heads(n_heads, n_kv_heads)
    weights = check_weights(weights, GatedAttentionWeights, "weights",
                            Dims(d_model=(x.shape[-1], f"x has d_model = {x.shape[-1]}")), see="init_gated_attention")
    d_head = weights.q_norm.shape[0]
    if weights.w_q.shape[1] != n_heads * d_head or weights.w_k.shape[1] != n_kv_heads * d_head:
        raise ValueError(f"weights.w_q has {weights.w_q.shape[1]} columns and weights.w_k {weights.w_k.shape[1]}; "
                         f"with d_head = {d_head} (weights.q_norm) expected {n_heads * d_head} and "
                         f"{n_kv_heads * d_head}")
    rotary_dim = d_head if rotary_dim is None else check_positive_int(rotary_dim, "rotary_dim", minimum=0)
    if rotary_dim % 2 or rotary_dim > d_head:
        raise ValueError(f"rotary_dim must be even and at most d_head = {d_head}, got {rotary_dim}")
    n = x.shape[-2]
    positions, frequencies = check_rotary_positions(positions, frequencies, n, rotary_dim)
    mask = np.tri(n, dtype=bool) if mask is None else check_mask(mask, n, n, f" (x has shape {x.shape})")  # (..., n, n)
    if isinstance(eps, bool) or not (isinstance(eps, (int, float)) and eps >= 0):
        raise ValueError(f"eps must be a number at least 0, got {eps!r}")
    gated = check_bool(gated, "gated")
    return x, weights, n_heads, n_kv_heads, rotary_dim, positions, frequencies, mask, gated, eps


def heads_of(y: np.ndarray, n_heads: int) -> np.ndarray:
    """Unchecked kernel: ``(..., n, h d)`` -> ``(..., h, n, d)``.

    >>> heads_of(np.arange(4.0).reshape(1, 4), 2).tolist()
    [[[0.0, 1.0]], [[2.0, 3.0]]]
    """
    return np.swapaxes(y.reshape(*y.shape[:-1], n_heads, -1), -3, -2)  # (..., h, n, d)


def partial_rotary(x: np.ndarray, positions: np.ndarray, frequencies: np.ndarray) -> np.ndarray:
    """Unchecked kernel: turn the first ``2 len(frequencies)`` coordinates of each row (half-split layout), keep the rest.

    >>> partial_rotary(np.array([[1.0, 0.0, 5.0]]), np.array([np.pi / 2]), np.array([1.0])).round(6).tolist()
    [[0.0, 1.0, 5.0]]
    """
    d_rotary = 2 * frequencies.size
    turned = apply_rotary_halves(x[..., :d_rotary], positions, frequencies)  # (..., n, d_rotary)
    return np.concatenate([turned, x[..., d_rotary:]], axis=-1)  # (..., n, d)


@boundary(_gated_arguments)
def gated_attention(x, weights: GatedAttentionWeights, n_heads: int, n_kv_heads: int, rotary_dim: int | None = None,
                    positions=None, frequencies=None, mask=None, gated: bool = True,
                    eps: float = 1e-6) -> GatedAttentionResult:
    r"""Qwen3-Next's gated attention of a sequence ``x``: grouped-query attention, each head's output gated.

    .. math::
        q_{h,i} = \operatorname{RoPE}_i\bigl(\operatorname{RMS}(x_i W_{Q,h})\bigr), \quad
        k_{g,j} = \operatorname{RoPE}_j\bigl(\operatorname{RMS}(x_j W_{K,g})\bigr), \quad
        v_{g,j} = x_j W_{V,g},

        o_{h,i} = \sigma(x_i W_{G,h}) \odot \sum_j \operatorname{softmax}_j\Bigl(\frac{q_{h,i} \cdot k_{g(h),j}}
        {\sqrt{d}}\Bigr) v_{g(h),j}, \qquad y_i = [o_{h,i}]_h W_O

    The gate depends on the query token :math:`x_i` and is applied after the weighted average: it can
    shrink a head's output towards 0 for one token, which plain attention can do only by putting its weight
    on a key whose value is near 0 (Qiu et al. find that the first-token sink then goes away).

    Parameters
    ----------
    x : array_like
        ``(..., n, d_model)`` the sequence.
    weights : GatedAttentionWeights
        See :func:`init_gated_attention`.
    n_heads, n_kv_heads : int
        The query heads and the key-value heads (dividing ``n_heads``).
    rotary_dim : int, optional
        How many leading coordinates of each head turn (Qwen3-Next: a quarter); default all, 0 for none.
    positions : array_like, optional
        ``(n,)`` the tokens' positions; default ``0 .. n - 1``.
    frequencies : array_like, optional
        ``(rotary_dim / 2,)`` the rotary frequencies; default ``rotary_frequencies(rotary_dim)``.
    mask : array_like of bool, optional
        ``(n, n)`` or ``(..., n_heads | 1, n, n)`` as in :func:`attnbook.multi_head_attention`; default causal.
    gated : bool, optional
        False drops the gate (plain attention of the same weights); default True.
    eps : float, optional
        The ``eps`` of the query and key RMSNorms; default ``1e-6``.

    Returns
    -------
    GatedAttentionResult
        ``output`` ``(..., n, d_model)``, ``weights`` ``(..., n_heads, n, n)`` and ``gate``
        ``(..., n_heads, n, d_head)`` (ones when ``gated`` is False).

    Examples
    --------
    >>> w = init_gated_attention(8, 2, n_kv_heads=1, d_head=4)
    >>> x = np.random.default_rng(1).standard_normal((4, 8))
    >>> gated_out, _, gate = gated_attention(x, w, 2, 1)
    >>> plain_out, _, ones = gated_attention(x, w, 2, 1, gated=False)
    >>> bool(np.all(ones == 1)), bool(np.allclose(gated_out, plain_out))
    (True, False)
    """
    d_head = weights.q_norm.shape[0]
    q = rms_norm.unchecked(heads_of(x @ weights.w_q, n_heads), weights.q_norm, eps)  # (..., h, n, d_head)
    k = rms_norm.unchecked(heads_of(x @ weights.w_k, n_kv_heads), weights.k_norm, eps)  # (..., g, n, d_head)
    v = heads_of(x @ weights.w_v, n_kv_heads)  # (..., g, n, d_head)
    if rotary_dim:
        q = partial_rotary(q, positions, frequencies)  # (..., h, n, d_head)
        k = partial_rotary(k, positions, frequencies)  # (..., g, n, d_head)
    heads, attention = attend_grouped(q, k, v, mask, 1.0 / math.sqrt(d_head))  # (..., h, n, d_head), (..., h, n, n)
    logits = heads_of(x @ weights.w_gate, n_heads)  # (..., h, n, d_head)
    gate = 1.0 / (1.0 + np.exp(-logits)) if gated else np.ones_like(heads)  # (..., h, n, d_head): sigma, in (0, 1)
    merged = np.swapaxes(heads * gate, -3, -2).reshape(*x.shape[:-1], -1)  # (..., n, h d_head)
    return GatedAttentionResult(merged @ weights.w_o, attention, gate)  # (..., n, d_model)
