"""Multi-head latent attention (DeepSeek-V2, 2024; V3): keys and values from one low-rank latent per token.

Each token caches a latent ``c`` of ``r`` numbers and one rotary key of ``d_rope`` numbers shared by the heads;
:func:`latent_attention` expands them into per-head keys and values, :func:`absorbed_latent_attention` never
does (the key up-projection folded into the query, the value up-projection into the output). The two are equal.

>>> import numpy as np
>>> weights = init_latent_attention(d_model=16, n_heads=4, q_rank=8, kv_rank=6, d_nope=4, d_rope=2, d_v=3)
>>> x = np.random.default_rng(0).standard_normal((5, 16))                 # (n, d_model)
>>> plain = latent_attention(x, weights, n_heads=4)
>>> absorbed = absorbed_latent_attention(x, weights, n_heads=4)
>>> bool(np.allclose(plain.output, absorbed.output)), plain.cache.latent.shape, plain.cache.rope_key.shape
(True, (5, 6), (5, 2))
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..attention import check_scale, scaled_dot_product_attention
from ..modern import rms_norm
from ..positional import check_rotary_positions, rotate
from ..validation import Array, Dims, as_float_array, boundary, check_positive_int, check_weights

__all__ = [
    "LatentAttentionResult",
    "LatentAttentionWeights",
    "LatentCache",
    "absorbed_latent_attention",
    "init_latent_attention",
    "latent_attention",
    "latent_softmax_scale",
]


class LatentAttentionWeights(NamedTuple):
    """Weights of multi-head latent attention, in the row-vector convention ``y = x W`` (no biases).

    Attributes
    ----------
    w_dq : ndarray
        ``(d_model, q_rank)`` the query's down-projection (``q_a_proj``).
    q_norm : ndarray
        ``(q_rank,)`` the gain of the RMSNorm of the query latent (``q_a_layernorm``).
    w_uq : ndarray
        ``(q_rank, n_heads (d_nope + d_rope))`` the query's up-projection (``q_b_proj``); head ``h`` owns
        columns ``h (d_nope + d_rope) ..``, its content part first, its rotary part last.
    w_dkv : ndarray
        ``(d_model, kv_rank + d_rope)`` the down-projection to the latent and the shared rotary key
        (``kv_a_proj_with_mqa``), the latent first.
    kv_norm : ndarray
        ``(kv_rank,)`` the gain of the RMSNorm of the latent (``kv_a_layernorm``).
    w_ukv : ndarray
        ``(kv_rank, n_heads (d_nope + d_v))`` the latent's up-projection to each head's content key and value
        (``kv_b_proj``); head ``h`` owns columns ``h (d_nope + d_v) ..``, its key first.
    w_o : ndarray
        ``(n_heads d_v, d_model)`` the output projection.

    Examples
    --------
    >>> w = init_latent_attention(16, 4, q_rank=8, kv_rank=6, d_nope=4, d_rope=2, d_v=3)
    >>> w.w_uq.shape, w.w_dkv.shape, w.w_ukv.shape, w.w_o.shape
    ((8, 24), (16, 8), (6, 28), (12, 16))
    """

    w_dq: Array["d_model, q_rank"]  # the query latent
    q_norm: Array["q_rank"]
    w_uq: Array["q_rank, d_q"]  # d_q = n_heads (d_nope + d_rope)
    w_dkv: Array["d_model, d_c"]  # d_c = kv_rank + d_rope: the latent and the shared rotary key
    kv_norm: Array["kv_rank"]
    w_ukv: Array["kv_rank, d_kv"]  # d_kv = n_heads (d_nope + d_v)
    w_o: Array["d_o, d_model"]  # d_o = n_heads d_v


class LatentCache(NamedTuple):
    """What latent attention caches per token: the normalised latent and the rotated key shared by the heads.

    Attributes
    ----------
    latent : ndarray
        ``(..., t, kv_rank)`` the latent of each cached token, after its RMSNorm.
    rope_key : ndarray
        ``(..., t, d_rope)`` the rotary key of each cached token, already turned to its position.

    Examples
    --------
    >>> cache = LatentCache(np.zeros((3, 512)), np.zeros((3, 64)))
    >>> cache.latent.shape[-1] + cache.rope_key.shape[-1]            # numbers per token and layer
    576
    """

    latent: np.ndarray  # (..., t, kv_rank)
    rope_key: np.ndarray  # (..., t, d_rope)


class LatentAttentionResult(NamedTuple):
    """What latent attention returns: ``output, weights, cache = ...``.

    Attributes
    ----------
    output : ndarray
        ``(..., n, d_model)`` one row per new token.
    weights : ndarray
        ``(..., n_heads, n, t)`` the causal attention weights over all ``t`` tokens (cached and new).
    cache : LatentCache
        The cache extended by the new tokens.

    Examples
    --------
    >>> w = init_latent_attention(16, 4, q_rank=8, kv_rank=6, d_nope=4, d_rope=2, d_v=3)
    >>> out, weights, cache = latent_attention(np.ones((2, 16)), w, n_heads=4)
    >>> out.shape, weights.shape, cache.latent.shape
    ((2, 16), (4, 2, 2), (2, 6))
    """

    output: np.ndarray  # (..., n, d_model)
    weights: np.ndarray  # (..., h, n, t)
    cache: LatentCache


def init_latent_attention(d_model: int, n_heads: int, q_rank: int, kv_rank: int, d_nope: int, d_rope: int,
                          d_v: int, seed: int = 0) -> LatentAttentionWeights:
    r"""Seeded weights of multi-head latent attention: normal matrices of variance ``1 / fan_in``, gains of 1.

    Parameters
    ----------
    d_model, n_heads : int
        The model width and the number of heads.
    q_rank, kv_rank : int
        The widths of the query latent and of the key-value latent (DeepSeek-V3: 1536 and 512).
    d_nope, d_rope, d_v : int
        Each head's content key width, the rotary key width (even; shared by the heads) and the value width
        (DeepSeek-V3: 128, 64, 128).
    seed : int, optional
        Seed of the weights; default 0.

    Returns
    -------
    LatentAttentionWeights
        The weights of :func:`latent_attention`.

    Examples
    --------
    >>> w = init_latent_attention(16, 4, q_rank=8, kv_rank=6, d_nope=4, d_rope=2, d_v=3)
    >>> w.q_norm.tolist() == [1.0] * 8, w.kv_norm.shape
    (True, (6,))
    """
    sizes = [check_positive_int(value, name) for value, name in
             ((d_model, "d_model"), (n_heads, "n_heads"), (q_rank, "q_rank"), (kv_rank, "kv_rank"),
              (d_nope, "d_nope"), (d_rope, "d_rope"), (d_v, "d_v"))]
    d_model, n_heads, q_rank, kv_rank, d_nope, d_rope, d_v = sizes
    if d_rope % 2:
        raise ValueError(f"d_rope must be even (rotary embeddings turn pairs of coordinates), got {d_rope}")
    rng = np.random.default_rng(seed)

    def normal(rows: int, cols: int) -> np.ndarray:
        return rng.standard_normal((rows, cols)) / math.sqrt(rows)  # (rows, cols)

    return LatentAttentionWeights(
        normal(d_model, q_rank), np.ones(q_rank), normal(q_rank, n_heads * (d_nope + d_rope)),
        normal(d_model, kv_rank + d_rope), np.ones(kv_rank), normal(kv_rank, n_heads * (d_nope + d_v)),
        normal(n_heads * d_v, d_model))


def latent_softmax_scale(d_qk: int, factor: float = 1.0, mscale_all_dim: float = 0.0) -> float:
    r"""The factor of latent attention's scores: :math:`1/\sqrt{d_{qk}}`, times YaRN's ``mscale`` squared when stretched.

    .. math:: \text{scale} = \frac{m^2}{\sqrt{d_\text{nope} + d_\text{rope}}}, \qquad
              m = 0.1\, \mu \ln s + 1 \quad (m = 1 \text{ when } s \le 1)

    DeepSeek's reference code multiplies the scale by :math:`m^2` (``mscale_all_dim`` :math:`= \mu`) when its
    context is stretched by YaRN by :math:`s` (``factor``), on top of YaRN's own factor on the rotary part
    (:func:`attnbook.yarn_attention_factor`).

    Parameters
    ----------
    d_qk : int
        The width of each head's query and key, ``d_nope + d_rope`` (DeepSeek-V3: 192).
    factor : float, optional
        YaRN's stretch :math:`s`; default 1 (no YaRN).
    mscale_all_dim : float, optional
        :math:`\mu`; default 0 (no change).

    Returns
    -------
    float
        The scale.

    Examples
    --------
    >>> round(latent_softmax_scale(192), 6), round(latent_softmax_scale(192, factor=40.0, mscale_all_dim=1.0), 6)
    (0.072169, 0.135234)
    """
    d_qk = check_positive_int(d_qk, "d_qk")
    if not (math.isfinite(factor) and factor > 0 and math.isfinite(mscale_all_dim)):
        raise ValueError(f"factor must be a positive number and mscale_all_dim a number, got {factor!r} and "
                         f"{mscale_all_dim!r}")
    m = 0.1 * mscale_all_dim * math.log(factor) + 1.0 if factor > 1 else 1.0
    return m * m / math.sqrt(d_qk)


def _latent_arguments(x, weights: LatentAttentionWeights, n_heads: int, cache: LatentCache | None = None,
                      positions=None, frequencies=None, scale=None, eps: float = 1e-6) -> tuple:
    x = as_float_array(x, "x", layout="(..., n, d_model)")  # (..., n, d_model)
    n_heads = check_positive_int(n_heads, "n_heads")
    weights = check_weights(weights, LatentAttentionWeights, "weights",
                            Dims(d_model=(x.shape[-1], f"x has d_model = {x.shape[-1]}")),
                            see="init_latent_attention")
    kv_rank = weights.kv_norm.shape[0]
    d_rope = weights.w_dkv.shape[1] - kv_rank
    if d_rope < 2 or d_rope % 2:
        raise ValueError(f"weights.w_dkv has {weights.w_dkv.shape[1]} columns and the latent {kv_rank}, so "
                         f"d_rope = {d_rope}; the rotary key needs an even width of at least 2")
    for name, width in (("w_uq", weights.w_uq.shape[1]), ("w_ukv", weights.w_ukv.shape[1]),
                        ("w_o", weights.w_o.shape[0])):
        if width % n_heads:
            raise ValueError(f"weights.{name} has width {width}, not divisible by n_heads = {n_heads}")
    d_v = weights.w_o.shape[0] // n_heads
    d_nope = weights.w_ukv.shape[1] // n_heads - d_v
    if d_nope < 1 or weights.w_uq.shape[1] // n_heads != d_nope + d_rope:
        raise ValueError(f"the heads do not fit: w_ukv gives d_nope = {d_nope} (with d_v = {d_v} from w_o), "
                         f"so each head of w_uq needs d_nope + d_rope = {d_nope + d_rope} columns, "
                         f"not {weights.w_uq.shape[1] // n_heads}")
    batch, t_past = x.shape[:-2], 0
    if cache is not None:
        if not isinstance(cache, LatentCache):
            raise TypeError(f"cache must be a LatentCache, got {type(cache).__name__}")
        latent = as_float_array(cache.latent, "cache.latent")  # (..., t, kv_rank)
        rope_key = as_float_array(cache.rope_key, "cache.rope_key")  # (..., t, d_rope)
        t = latent.shape[-2] if latent.ndim >= 2 else -1
        if latent.shape != batch + (t, kv_rank) or rope_key.shape != batch + (t, d_rope):
            lead = "".join(f"{b}, " for b in batch)
            raise ValueError(f"cache has latent {latent.shape} and rope_key {rope_key.shape}; with x of shape "
                             f"{x.shape} expected ({lead}t, {kv_rank}) and ({lead}t, {d_rope})")
        cache, t_past = LatentCache(latent, rope_key), latent.shape[-2]
    positions, frequencies = check_rotary_positions(positions, frequencies, x.shape[-2], d_rope, start=t_past)
    if isinstance(eps, bool) or not (isinstance(eps, (int, float)) and eps >= 0):
        raise ValueError(f"eps must be a number at least 0, got {eps!r}")
    return x, weights, n_heads, cache, positions, frequencies, check_scale(scale, d_nope + d_rope), eps


def compress(x: np.ndarray, weights: LatentAttentionWeights, n_heads: int, cache: LatentCache | None,
             positions: np.ndarray, frequencies: np.ndarray, eps: float) -> tuple:
    """Unchecked kernel: each head's query parts and the cache extended by the new tokens' latents and rotary keys.

    Returns ``(q_nope (..., h, n, d_nope), q_rope (..., h, n, d_rope), cache)``.

    >>> w = init_latent_attention(8, 2, q_rank=4, kv_rank=3, d_nope=2, d_rope=2, d_v=2)
    >>> q_nope, q_rope, cache = compress(np.ones((3, 8)), w, 2, None, np.arange(3.0), np.ones(1), 1e-6)
    >>> q_nope.shape, q_rope.shape, cache.latent.shape
    ((2, 3, 2), (2, 3, 2), (3, 3))
    """
    kv_rank = weights.kv_norm.shape[0]
    c_q = rms_norm.unchecked(x @ weights.w_dq, weights.q_norm, eps)  # (..., n, q_rank): the query latent
    q = c_q @ weights.w_uq  # (..., n, h (d_nope + d_rope))
    q = np.swapaxes(q.reshape(*q.shape[:-1], n_heads, -1), -3, -2)  # (..., h, n, d_nope + d_rope)
    d_rope = weights.w_dkv.shape[1] - kv_rank
    q_nope, q_rope = q[..., :-d_rope], q[..., -d_rope:]  # (..., h, n, d_nope), (..., h, n, d_rope)
    angles = positions[:, None] * frequencies[None, :]  # (n, d_rope / 2)
    q_rope = rotate(q_rope, angles)  # (..., h, n, d_rope): DeepSeek's interleaved pairs
    compressed = x @ weights.w_dkv  # (..., n, kv_rank + d_rope)
    latent = rms_norm.unchecked(compressed[..., :kv_rank], weights.kv_norm, eps)  # (..., n, kv_rank)
    rope_key = rotate(compressed[..., kv_rank:], angles)  # (..., n, d_rope): one rotary key for all heads
    if cache is not None:
        latent = np.concatenate([cache.latent, latent], axis=-2)  # (..., t, kv_rank)
        rope_key = np.concatenate([cache.rope_key, rope_key], axis=-2)  # (..., t, d_rope)
    return q_nope, q_rope, LatentCache(latent, rope_key)


def _causal(n: int, t: int) -> np.ndarray:
    """``(n, t)``: new token ``i``, the ``t - n + i``-th of all, sees tokens ``0 .. t - n + i``."""
    return np.arange(t)[None, :] <= np.arange(t - n, t)[:, None]  # (n, t)


@boundary(_latent_arguments)
def latent_attention(x, weights: LatentAttentionWeights, n_heads: int, cache: LatentCache | None = None,
                     positions=None, frequencies=None, scale=None, eps: float = 1e-6) -> LatentAttentionResult:
    r"""Causal multi-head latent attention of new tokens ``x``, keys and values expanded from the cached latents.

    With :math:`c^Q_i = \operatorname{RMS}(x_i W_{DQ})`, :math:`[c_j, \tilde k^R_j] = x_j W_{DKV}`,
    :math:`c_j \leftarrow \operatorname{RMS}(c_j)` and head :math:`h`'s slices of the up-projections:

    .. math::
        [q^C_{h,i}, q^R_{h,i}] = c^Q_i W_{UQ,h}, \qquad [k^C_{h,j}, v_{h,j}] = c_j W_{UKV,h}, \qquad
        k^R_j = \operatorname{RoPE}_j(\tilde k^R_j),

        s_{h,ij} = \text{scale}\,\bigl(q^C_{h,i} \cdot k^C_{h,j} + \operatorname{RoPE}_i(q^R_{h,i}) \cdot k^R_j\bigr),
        \qquad o_i = \bigl[\textstyle\sum_{j \le i} \operatorname{softmax}_j(s_{h,ij})\, v_{h,j}\bigr]_h W_O

    The rotary part is decoupled: the content key :math:`k^C` carries no position, so it can be absorbed
    (:func:`absorbed_latent_attention`); the one rotary key :math:`k^R_j` is shared by every head.

    Parameters
    ----------
    x : array_like
        ``(..., n, d_model)`` the new tokens.
    weights : LatentAttentionWeights
        See :func:`init_latent_attention`.
    n_heads : int
        The number of heads.
    cache : LatentCache, optional
        ``(..., t_past, kv_rank)`` latents and ``(..., t_past, d_rope)`` rotary keys of the earlier tokens.
    positions : array_like, optional
        ``(n,)`` the new tokens' positions; default ``t_past, .., t_past + n - 1``.
    frequencies : array_like, optional
        ``(d_rope / 2,)`` the rotary frequencies; default ``rotary_frequencies(d_rope)``.
    scale : float, optional
        The factor of the scores; default ``1 / sqrt(d_nope + d_rope)`` (with YaRN, DeepSeek multiplies it by
        the square of YaRN's ``mscale``).
    eps : float, optional
        The ``eps`` of both RMSNorms; default ``1e-6``.

    Returns
    -------
    LatentAttentionResult
        ``output`` ``(..., n, d_model)``, ``weights`` ``(..., n_heads, n, t)`` and the extended ``cache``.

    Examples
    --------
    >>> w = init_latent_attention(16, 4, q_rank=8, kv_rank=6, d_nope=4, d_rope=2, d_v=3)
    >>> x = np.random.default_rng(1).standard_normal((2, 5, 16))                 # (batch, n, d_model)
    >>> whole = latent_attention(x, w, n_heads=4)
    >>> first = latent_attention(x[:, :3], w, n_heads=4)
    >>> rest = latent_attention(x[:, 3:], w, n_heads=4, cache=first.cache)         # the cache: 8 numbers a token
    >>> bool(np.allclose(rest.output, whole.output[:, 3:])), rest.weights.shape
    (True, (2, 4, 2, 5))
    """
    q_nope, q_rope, cache = compress(x, weights, n_heads, cache, positions, frequencies, eps)
    d_v = weights.w_o.shape[0] // n_heads
    kv = cache.latent @ weights.w_ukv  # (..., t, h (d_nope + d_v)): every head's key and value, expanded
    kv = np.swapaxes(kv.reshape(*kv.shape[:-1], n_heads, -1), -3, -2)  # (..., h, t, d_nope + d_v)
    k_nope, v = kv[..., :-d_v], kv[..., -d_v:]  # (..., h, t, d_nope), (..., h, t, d_v)
    shared = cache.rope_key[..., None, :, :]  # (..., 1, t, d_rope): one rotary key for every head
    rope_key = np.broadcast_to(shared, k_nope.shape[:-1] + shared.shape[-1:])  # (..., h, t, d_rope)
    q = np.concatenate([q_nope, q_rope], axis=-1)  # (..., h, n, d_nope + d_rope)
    k = np.concatenate([k_nope, rope_key], axis=-1)  # (..., h, t, d_nope + d_rope)
    mask = _causal(x.shape[-2], k.shape[-2])  # (n, t)
    heads, attention = scaled_dot_product_attention.unchecked(q, k, v, mask, scale)  # (..., h, n, d_v), (..., h, n, t)
    merged = np.swapaxes(heads, -3, -2).reshape(*x.shape[:-1], -1)  # (..., n, h d_v)
    return LatentAttentionResult(merged @ weights.w_o, attention, cache)  # (..., n, d_model)


@boundary(_latent_arguments)
def absorbed_latent_attention(x, weights: LatentAttentionWeights, n_heads: int, cache: LatentCache | None = None,
                              positions=None, frequencies=None, scale=None,
                              eps: float = 1e-6) -> LatentAttentionResult:
    r"""Latent attention as DeepSeek decodes: attention over the cached latents themselves, nothing expanded.

    Write head :math:`h`'s slices of :math:`W_{UKV}` as :math:`W_{UK,h}` (``kv_rank x d_nope``) and
    :math:`W_{UV,h}` (``kv_rank x d_v``), and of :math:`W_O` as :math:`W_{O,h}` (``d_v x d_model``). Then

    .. math::
        q^C_{h,i} \cdot k^C_{h,j} = q^C_{h,i} (c_j W_{UK,h})^\top = (q^C_{h,i} W_{UK,h}^\top) \cdot c_j,
        \qquad
        \Bigl(\sum_j a_{h,ij}\, c_j W_{UV,h}\Bigr) W_{O,h} = \Bigl(\sum_j a_{h,ij}\, c_j\Bigr) (W_{UV,h} W_{O,h}),

    so with the absorbed query :math:`\hat q_{h,i} = [q^C_{h,i} W_{UK,h}^\top,\ \operatorname{RoPE}_i(q^R_{h,i})]`
    and the cached key :math:`\hat k_j = [c_j, k^R_j]`, the scores are unchanged, and the output is
    :math:`o_i = \sum_h \bigl(\sum_j a_{h,ij} c_j\bigr) W_{UV,h} W_{O,h}`: multi-query attention with one
    key of ``kv_rank + d_rope`` numbers and one value of ``kv_rank`` numbers per token, the keys and values
    of the plain form never formed. Equal to :func:`latent_attention` (the rotary part is why it is
    decoupled: :math:`\operatorname{RoPE}_i` between :math:`q` and :math:`W_{UK}` would not let them meet).

    Parameters
    ----------
    x, weights, n_heads, cache, positions, frequencies, scale, eps
        As in :func:`latent_attention`.

    Returns
    -------
    LatentAttentionResult
        As :func:`latent_attention` returns it.

    Examples
    --------
    >>> w = init_latent_attention(16, 4, q_rank=8, kv_rank=6, d_nope=4, d_rope=2, d_v=3)
    >>> x = np.random.default_rng(2).standard_normal((4, 16))
    >>> plain, absorbed = latent_attention(x, w, 4), absorbed_latent_attention(x, w, 4)
    >>> float(np.max(np.abs(plain.output - absorbed.output))) < 1e-12
    True
    """
    q_nope, q_rope, cache = compress(x, weights, n_heads, cache, positions, frequencies, eps)
    kv_rank, d_v = weights.kv_norm.shape[0], weights.w_o.shape[0] // n_heads
    w_ukv = weights.w_ukv.reshape(kv_rank, n_heads, -1)  # (kv_rank, h, d_nope + d_v)
    w_uk, w_uv = w_ukv[..., :-d_v], w_ukv[..., -d_v:]  # (kv_rank, h, d_nope), (kv_rank, h, d_v)
    q_latent = q_nope @ np.moveaxis(w_uk, 0, -1)  # (..., h, n, kv_rank): W_UK folded into the query
    q = np.concatenate([q_latent, q_rope], axis=-1)  # (..., h, n, kv_rank + d_rope)
    k = np.concatenate([cache.latent, cache.rope_key], axis=-1)[..., None, :, :]  # (..., 1, t, kv_rank + d_rope)
    v = cache.latent[..., None, :, :]  # (..., 1, t, kv_rank): one key and value for all heads
    mask = _causal(x.shape[-2], k.shape[-2])  # (n, t)
    mixed, attention = scaled_dot_product_attention.unchecked(q, k, v, mask,
                                                              scale)  # (..., h, n, kv_rank), (..., h, n, t)
    w_o = weights.w_o.reshape(n_heads, d_v, -1)  # (h, d_v, d_model)
    w_out = np.moveaxis(w_uv, 1, 0) @ w_o  # (h, kv_rank, d_model): W_UV folded into the output
    output = np.einsum("...hnr,hrd->...nd", mixed, w_out)  # (..., n, d_model): summed over the heads
    return LatentAttentionResult(output, attention, cache)
