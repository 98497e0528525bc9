"""Sparse selection (DeepSeek-V3.2's sparse attention): a cheap indexer scores every key, attention reads the top k.

The lightning indexer (:func:`indexer_scores`) gives query ``i`` and key ``j`` the score
``sum_h w_ih ReLU(q_ih . k_j / sqrt(d))`` from a few small heads; :func:`top_k_keys` keeps the ``k`` best keys of each
query and :func:`selected_attention` attends to those alone, equal to dense attention under the mask of the
selection (:func:`selection_mask`).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> q, k, v = rng.standard_normal((3, 6, 4))                       # (n, d) each
>>> scores = np.where(np.tri(6, dtype=bool), q @ k.T, -np.inf)     # any scorer; causal
>>> chosen = top_k_keys(scores, 3)
>>> sparse = selected_attention(q, k, v, chosen)
>>> from attnbook import scaled_dot_product_attention
>>> dense = scaled_dot_product_attention(q, k, v, mask=selection_mask(chosen, 6)).output
>>> bool(np.allclose(sparse.output, dense)), sparse.weights.shape
(True, (6, 3))
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..attention import AttentionResult, check_scale
from ..masks import check_mask
from ..positional import check_rotary_positions
from ..softmax import softmax_rows
from ..transformer import layer_norm
from ..validation import Array, Dims, Norm, as_float_array, boundary, check_positive_int, check_weights
from .gated import partial_rotary

__all__ = ["IndexerWeights", "Selection", "indexer_scores", "selected_attention", "selection_mask", "top_k_keys"]


class IndexerWeights(NamedTuple):
    """Weights of DeepSeek-V3.2's lightning indexer, in the row-vector convention ``y = x W`` (no biases).

    Attributes
    ----------
    w_q : ndarray
        ``(q_rank, n_heads d_index)`` the indexer's queries, from the attention's query latent (``wq_b``).
    w_k : ndarray
        ``(d_model, d_index)`` the one key per token, shared by the indexer's heads (``wk``).
    k_norm : tuple of ndarray
        ``(gamma, beta)``, each ``(d_index,)``: the LayerNorm of the keys.
    w_heads : ndarray
        ``(d_model, n_heads)`` each head's weight for each query token (``weights_proj``).

    Examples
    --------
    >>> w = IndexerWeights(np.ones((8, 12)), np.ones((16, 4)), (np.ones(4), np.zeros(4)), np.ones((16, 3)))
    >>> w.w_q.shape[1] // w.w_k.shape[1]                        # three heads of width 4
    3
    """

    w_q: Array["q_rank, d_iq"]  # d_iq = n_heads d_index
    w_k: Array["d_model, d_index"]
    k_norm: Norm["d_index"]
    w_heads: Array["d_model, n_heads"]


class Selection(NamedTuple):
    """The keys each query keeps: ``indices, scores = ...``, best first.

    Attributes
    ----------
    indices : ndarray of int
        ``(..., n_q, k)`` the kept keys of each query, by decreasing score.
    scores : ndarray
        ``(..., n_q, k)`` their scores; ``-inf`` for a key the query may not see (fewer than ``k`` allowed).

    Examples
    --------
    >>> top_k_keys([[3.0, 1.0, 2.0]], 2)
    Selection(indices=array([[0, 2]]), scores=array([[3., 2.]]))
    """

    indices: np.ndarray  # (..., n_q, k)
    scores: np.ndarray  # (..., n_q, k)


def _indexer_arguments(x, q_latent, weights: IndexerWeights, n_heads: int, d_rope: int, positions=None,
                       frequencies=None, mask=None, eps: float = 1e-6) -> tuple:
    x = as_float_array(x, "x", layout="(..., n, d_model)")  # (..., n, d_model)
    q_latent = as_float_array(q_latent, "q_latent", layout="(..., n, q_rank)")  # (..., n, q_rank)
    if q_latent.shape[:-1] != x.shape[:-1]:
        raise ValueError(f"q_latent has shape {q_latent.shape} but x has {x.shape}; one latent per token")
    n_heads, d_rope = check_positive_int(n_heads, "n_heads"), check_positive_int(d_rope, "d_rope", minimum=0)
    dims = Dims(d_model=(x.shape[-1], f"x has d_model = {x.shape[-1]}"),
                q_rank=(q_latent.shape[-1], f"q_latent has q_rank = {q_latent.shape[-1]}"),
                n_heads=(n_heads, f"n_heads = {n_heads}"))
    weights = check_weights(weights, IndexerWeights, "weights", dims)
    d_index = weights.w_k.shape[1]
    if weights.w_q.shape[1] != n_heads * d_index or d_rope % 2 or d_rope > d_index:
        raise ValueError(f"weights.w_q has {weights.w_q.shape[1]} columns; with d_index = {d_index} and n_heads = "
                         f"{n_heads} expected {n_heads * d_index}, and an even d_rope <= d_index, got {d_rope}")
    n = x.shape[-2]
    positions, frequencies = check_rotary_positions(positions, frequencies, n, d_rope)
    mask = np.tri(n, dtype=bool) if mask is None else check_mask(mask, n, n, f" (x has shape {x.shape})")  # (..., n, n)
    if isinstance(eps, bool) or not (isinstance(eps, (int, float)) and eps >= 0):
        raise ValueError(f"eps must be a number at least 0, got {eps!r}")
    return x, q_latent, weights, n_heads, d_rope, positions, frequencies, mask, eps


@boundary(_indexer_arguments)
def indexer_scores(x, q_latent, weights: IndexerWeights, n_heads: int, d_rope: int, positions=None,
                   frequencies=None, mask=None, eps: float = 1e-6) -> np.ndarray:
    r"""The lightning indexer's score of every key for every query: a few ReLU heads, weighted per query token.

    .. math::
        I_{ij} = \sum_{h=1}^{H} w_{ih}\, \operatorname{ReLU}\!\Bigl(\frac{q_{ih} \cdot k_j}{\sqrt{d}}\Bigr),
        \qquad q_{ih} = \operatorname{RoPE}_i(c^Q_i W_{Q,h}), \quad
        k_j = \operatorname{RoPE}_j(\operatorname{LN}(x_j W_K)), \quad
        w_{i\cdot} = x_i W_w / \sqrt{H}

    with rotary positions on the first ``d_rope`` coordinates (half-split layout) and :math:`-\infty` where
    ``mask`` forbids. One key of width :math:`d` per token, shared by the :math:`H` heads (DeepSeek-V3.2: 64
    heads of 128, in FP8): the cost is that of a small multi-query attention, without its softmax.

    Parameters
    ----------
    x : array_like
        ``(..., n, d_model)`` the tokens.
    q_latent : array_like
        ``(..., n, q_rank)`` the query latent of the attention layer (its RMSNorm applied).
    weights : IndexerWeights
        The indexer's weights.
    n_heads : int
        The indexer's heads.
    d_rope : int
        How many leading coordinates of each query and key turn (even; 0 for none).
    positions : array_like, optional
        ``(n,)`` the tokens' positions; default ``0 .. n - 1``.
    frequencies : array_like, optional
        ``(d_rope / 2,)``; default ``rotary_frequencies(d_rope)``.
    mask : array_like of bool, optional
        Broadcasting to ``(..., n, n)``; default causal.
    eps : float, optional
        The ``eps`` of the keys' LayerNorm; default ``1e-6``.

    Returns
    -------
    ndarray
        ``(..., n, n)`` the scores, ``-inf`` where masked.

    Examples
    --------
    >>> w = IndexerWeights(np.eye(4), np.eye(4), (np.ones(4), np.zeros(4)), np.ones((4, 1)))
    >>> s = indexer_scores(np.eye(4), np.eye(4), w, n_heads=1, d_rope=0)
    >>> bool(np.all(np.isneginf(s[np.triu_indices(4, 1)]))), s.shape
    (True, (4, 4))
    """
    d_index = weights.w_k.shape[1]
    q = np.swapaxes((q_latent @ weights.w_q).reshape(*x.shape[:-1], n_heads, d_index), -3, -2)  # (..., H, n, d)
    k = layer_norm.unchecked(x @ weights.w_k, *weights.k_norm, eps)  # (..., n, d): one key per token
    if d_rope:
        q, k = partial_rotary(q, positions, frequencies), partial_rotary(k, positions, frequencies)  # (..., H, n, d), (..., n, d)
    relu = np.maximum(q @ np.swapaxes(k, -1, -2)[..., None, :, :] / math.sqrt(d_index), 0.0)  # (..., H, n, n)
    head_weights = np.swapaxes(x @ weights.w_heads, -1, -2) / math.sqrt(n_heads)  # (..., H, n)
    scores = np.sum(head_weights[..., :, :, None] * relu, axis=-3)  # (..., n, n)
    return np.where(mask, scores, -np.inf)  # (..., n, n)


def top_k_keys(scores, k: int) -> Selection:
    r"""The ``k`` highest-scoring keys of each query (all of them when there are fewer), best first.

    .. math:: \mathcal{S}_i = \operatorname{arg\,top\text{-}k}_j\; I_{ij}

    Ties are broken towards the earlier key.

    Parameters
    ----------
    scores : array_like
        ``(..., n_q, n_k)`` the scores; ``-inf`` for keys a query may not see.
    k : int
        Keys kept per query.

    Returns
    -------
    Selection
        ``indices`` and ``scores`` ``(..., n_q, min(k, n_k))``.

    Examples
    --------
    >>> top_k_keys([[0.5, -np.inf, 2.0, 1.0]], 3).indices.tolist()
    [[2, 3, 0]]
    """
    scores = as_float_array(scores, "scores", allow_neg_inf=True, layout="(..., n_q, n_k)")  # (..., n_q, n_k)
    k = min(check_positive_int(k, "k"), scores.shape[-1])
    order = np.argsort(-scores, axis=-1, kind="stable")[..., :k]  # (..., n_q, k): best first, earlier on ties
    return Selection(order, np.take_along_axis(scores, order, axis=-1))  # (..., n_q, k) each


def selection_mask(selection: Selection, n_k: int) -> np.ndarray:
    """The boolean mask of a selection: True at each query's kept keys that it may see (finite score).

    Parameters
    ----------
    selection : Selection
        As :func:`top_k_keys` returns it.
    n_k : int
        The number of keys.

    Returns
    -------
    ndarray of bool
        ``(..., n_q, n_k)``.

    Examples
    --------
    >>> selection_mask(top_k_keys([[0.5, -np.inf, 2.0]], 2), 3).astype(int).tolist()
    [[1, 0, 1]]
    """
    n_k = check_positive_int(n_k, "n_k")
    indices = np.asarray(selection.indices)  # (..., n_q, k)
    mask = np.zeros(indices.shape[:-1] + (n_k,), dtype=bool)  # (..., n_q, n_k)
    np.put_along_axis(mask, indices, np.isfinite(selection.scores), axis=-1)
    return mask


def _selected_arguments(q, k, v, selection: Selection, scale=None) -> tuple:
    q, k, v = (as_float_array(a, name) for a, name in ((q, "q"), (k, "k"), (v, "v")))
    if not isinstance(selection, Selection):
        raise TypeError(f"selection must be a Selection (see top_k_keys), got {type(selection).__name__}")
    indices = np.asarray(selection.indices)  # (..., n_q, top_k)
    if indices.shape[-2] != q.shape[-2] or indices.max(initial=0) >= k.shape[-2] or indices.min(initial=0) < 0:
        raise ValueError(f"selection.indices has shape {indices.shape} and values up to {indices.max(initial=0)}; "
                         f"expected one row per query ({q.shape[-2]}) of keys below {k.shape[-2]}")
    return q, k, v, selection, check_scale(scale, q.shape[-1])


@boundary(_selected_arguments)
def selected_attention(q, k, v, selection: Selection, scale=None) -> AttentionResult:
    r"""Attention of each query over its selected keys only: gather them, then softmax over the ``top_k``.

    .. math:: o_i = \sum_{j \in \mathcal{S}_i} \operatorname{softmax}_{j \in \mathcal{S}_i}
              \bigl(\text{scale}\; q_i \cdot k_j\bigr)\, v_j

    Equal to dense attention under :func:`selection_mask`, with ``n_q top_k`` scores instead of
    ``n_q n_k``: the cost no longer grows with the context, once the indexer has chosen.

    Parameters
    ----------
    q, k, v : array_like
        As in :func:`attnbook.scaled_dot_product_attention` (DeepSeek-V3.2 runs it on the latent form of
        :func:`attnbook.recent.latent.absorbed_latent_attention`).
    selection : Selection
        The keys of each query (:func:`top_k_keys`); those with score ``-inf`` are skipped.
    scale : float, optional
        Default ``1 / sqrt(d_k)``.

    Returns
    -------
    AttentionResult
        ``output`` ``(..., n_q, d_v)`` and ``weights`` ``(..., n_q, top_k)`` over the selected keys.

    Examples
    --------
    >>> q, k = np.eye(3), np.eye(3)
    >>> out, w = selected_attention(q, k, 10 * np.eye(3), top_k_keys(q @ k.T, 1))
    >>> out.tolist()                                           # one key each: its value exactly
    [[10.0, 0.0, 0.0], [0.0, 10.0, 0.0], [0.0, 0.0, 10.0]]
    """
    indices = np.asarray(selection.indices)  # (..., n_q, top_k)
    keys = np.take_along_axis(k[..., None, :, :], indices[..., :, :, None], axis=-2)  # (..., n_q, top_k, d_k)
    values = np.take_along_axis(v[..., None, :, :], indices[..., :, :, None], axis=-2)  # (..., n_q, top_k, d_v)
    scores = scale * np.einsum("...qd,...qkd->...qk", q, keys)  # (..., n_q, top_k)
    weights = softmax_rows(scores, np.isfinite(selection.scores))  # (..., n_q, top_k)
    return AttentionResult(np.einsum("...qk,...qkd->...qd", weights, values), weights)  # (..., n_q, d_v)
