"""The (gated) delta rule: linear attention as a fast-weight memory that writes with an error-correcting update.

DeltaNet (Yang et al., 2024), Gated DeltaNet (Yang et al., 2025; Qwen3-Next) and Kimi Delta Attention (one
decay per key channel): :func:`delta_rule_recurrent` runs the recurrence token by token,
:func:`delta_rule_chunked` a chunk at a time with the WY representation (the UT transform); they are equal.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> q, k = l2_normalize(rng.standard_normal((2, 6, 4))), l2_normalize(rng.standard_normal((2, 6, 4)))
>>> v, beta, g = rng.standard_normal((6, 3)), rng.uniform(0, 1, 6), -rng.uniform(0, 1, 6)
>>> step = delta_rule_recurrent(q, k, v, beta, g)
>>> chunk = delta_rule_chunked(q, k, v, beta, g, chunk_size=4)
>>> bool(np.allclose(step.outputs, chunk.outputs)), step.state.shape
(True, (2, 4, 3))
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..attention import check_scale
from ..modern import rms_norm
from ..validation import (
    Array,
    Dims,
    as_float_array,
    boundary,
    broadcast_batch_shapes,
    check_min_ndim,
    check_positive_int,
    check_weights,
)

__all__ = ["DeltaRuleResult", "GatedDeltaNetWeights", "KimiDeltaWeights", "MEMORY_RULES", "delta_rule_chunked",
           "delta_rule_recurrent", "fast_weight_memory", "gated_deltanet", "init_gated_deltanet",
           "init_kimi_delta_attention", "kimi_delta_attention", "l2_normalize"]

#: The two ways of writing pairs into a fast-weight memory that :func:`fast_weight_memory` knows: linear
#: attention's sum of outer products and the delta rule.
MEMORY_RULES = ("linear", "delta")


class GatedDeltaNetWeights(NamedTuple):
    """Weights of Qwen3-Next's Gated DeltaNet layer, in the row-vector convention ``y = x W`` (no biases).

    Attributes
    ----------
    w_q, w_k : ndarray
        ``(d_model, n_k_heads d_k)`` the queries and keys.
    w_v, w_z : ndarray
        ``(d_model, n_v_heads d_v)`` the values and the output gates' logits.
    w_beta, w_alpha : ndarray
        ``(d_model, n_v_heads)`` the write strengths' and the decays' logits.
    conv : ndarray
        ``(d_conv, kernel)`` the depthwise causal convolution of the queries, keys and values (channels in
        that order, ``d_conv = 2 n_k_heads d_k + n_v_heads d_v``); tap ``kernel - 1`` reads the current token.
    a_log, dt_bias : ndarray
        ``(n_v_heads,)`` the decay rate's log and the bias of its softplus.
    norm : ndarray
        ``(d_v,)`` the gain of the RMSNorm of each head's output.
    w_o : ndarray
        ``(n_v_heads d_v, d_model)`` the output projection.

    Examples
    --------
    >>> w = init_gated_deltanet(16, n_k_heads=2, n_v_heads=4, d_k=4, d_v=3, kernel=4)
    >>> w.conv.shape, w.w_beta.shape
    ((28, 4), (16, 4))
    """

    w_q: Array["d_model, d_qk"]
    w_k: Array["d_model, d_qk"]
    w_v: Array["d_model, d_vz"]
    w_z: Array["d_model, d_vz"]
    w_beta: Array["d_model, n_v_heads"]
    w_alpha: Array["d_model, n_v_heads"]
    conv: Array["d_conv, kernel"]
    a_log: Array["n_v_heads"]
    dt_bias: Array["n_v_heads"]
    norm: Array["d_v"]
    w_o: Array["d_vz, d_model"]


class KimiDeltaWeights(NamedTuple):
    """Weights of Kimi Linear's delta attention layer (KDA), in the row-vector convention ``y = x W`` (no biases).

    Attributes
    ----------
    w_q, w_k, w_v : ndarray
        ``(d_model, n_heads d_head)`` the queries, keys and values.
    conv : ndarray
        ``(3 n_heads d_head, kernel)`` the depthwise causal convolution of the queries, keys and values.
    w_fa, w_fb : ndarray
        ``(d_model, d_head)`` and ``(d_head, n_heads d_head)``: the low-rank projection of the decays' logits.
    dt_bias : ndarray
        ``(n_heads d_head,)`` the bias of the decays' softplus, one per key channel.
    a_log : ndarray
        ``(n_heads,)`` each head's decay rate's log.
    w_beta : ndarray
        ``(d_model, n_heads)`` the write strengths' logits.
    w_ga, w_gb : ndarray
        ``(d_model, d_head)`` and ``(d_head, n_heads d_head)``: the low-rank projection of the output gates' logits.
    norm : ndarray
        ``(d_head,)`` the gain of the RMSNorm of each head's output.
    w_o : ndarray
        ``(n_heads d_head, d_model)`` the output projection.

    Examples
    --------
    >>> w = init_kimi_delta_attention(16, n_heads=2, d_head=4)
    >>> w.w_fb.shape, w.dt_bias.shape, w.conv.shape
    ((4, 8), (8,), (24, 4))
    """

    w_q: Array["d_model, d_qkv"]
    w_k: Array["d_model, d_qkv"]
    w_v: Array["d_model, d_qkv"]
    conv: Array["d_conv, kernel"]
    w_fa: Array["d_model, d_head"]
    w_fb: Array["d_head, d_qkv"]
    dt_bias: Array["d_qkv"]
    a_log: Array["n_heads"]
    w_beta: Array["d_model, n_heads"]
    w_ga: Array["d_model, d_head"]
    w_gb: Array["d_head, d_qkv"]
    norm: Array["d_head"]
    w_o: Array["d_qkv, d_model"]


class DeltaRuleResult(NamedTuple):
    """Outputs of the delta rule and its final state: ``outputs, state = ...``.

    Attributes
    ----------
    outputs : ndarray
        ``(..., n, d_v)`` the output of every token.
    state : ndarray
        ``(..., d_k, d_v)`` the memory :math:`S_n` after the last token.

    Examples
    --------
    >>> run = delta_rule_recurrent(np.ones((1, 2)), [[1.0, 0.0]], [[3.0]], beta=[1.0])
    >>> run.state.tolist()                                       # beta = 1 writes v at key k exactly
    [[3.0], [0.0]]
    """

    outputs: np.ndarray  # (..., n, d_v)
    state: np.ndarray  # (..., d_k, d_v)


def l2_normalize(x, eps: float = 1e-6) -> np.ndarray:
    r"""Each row divided by its length, as Gated DeltaNet's queries and keys are.

    .. math:: \hat x = x / \sqrt{\lVert x\rVert^2 + \epsilon}

    Parameters
    ----------
    x : array_like
        ``(..., d)`` rows.
    eps : float, optional
        Added to the squared length (transformers' and FLA's ``1e-6``).

    Returns
    -------
    ndarray
        ``(..., d)`` rows of length just under 1.

    Examples
    --------
    >>> l2_normalize([[3.0, 4.0]], eps=0.0).tolist()
    [[0.6, 0.8]]
    """
    x = as_float_array(x, "x", layout="(..., d)")  # (..., d)
    if isinstance(eps, bool) or not (isinstance(eps, (int, float)) and eps >= 0):
        raise ValueError(f"eps must be a number at least 0, got {eps!r}")
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)  # (..., d)


def _delta_arguments(q, k, v, beta, g=None, scale=None, initial_state=None) -> tuple:
    q, k, v = (as_float_array(a, name) for a, name in ((q, "q"), (k, "k"), (v, "v")))
    for a, name, layout in ((q, "q", "(..., n, d_k)"), (k, "k", "(..., n, d_k)"), (v, "v", "(..., n, d_v)")):
        check_min_ndim(a, name, 2, layout)
    if q.shape[-2:] != k.shape[-2:] or v.shape[-2] != k.shape[-2]:
        raise ValueError(f"q {q.shape}, k {k.shape} and v {v.shape} need one row per token each and q, k the "
                         "same width d_k")
    n, d_k, d_v = k.shape[-2], k.shape[-1], v.shape[-1]
    beta = as_float_array(beta, "beta")  # (..., n)
    if beta.shape[-1:] != (n,):
        raise ValueError(f"beta has shape {beta.shape}; expected one write strength per token, (..., {n})")
    g = np.zeros(n) if g is None else as_float_array(g, "g")  # (..., n) or (..., n, d_k)
    per_channel = g.ndim >= 1 and g.shape[-1] == d_k and g.ndim >= 2 and g.shape[-2] == n
    if not per_channel and g.shape[-1:] != (n,):
        raise ValueError(f"g has shape {g.shape}; expected one log-decay per token (..., {n}) or per token and "
                         f"key channel (..., {n}, {d_k})")
    if np.any(g > 0):
        raise ValueError("g holds log-decays, which must be at most 0 (the memory never grows by decay)")
    g = g if per_channel else g[..., None]  # (..., n, d_k | 1)
    batch = broadcast_batch_shapes({"q": q.shape[:-2], "k": k.shape[:-2], "v": v.shape[:-2],
                                    "beta": beta.shape[:-1], "g": g.shape[:-2]})
    if initial_state is not None:
        initial_state = as_float_array(initial_state, "initial_state")  # (..., d_k, d_v)
        if initial_state.shape[-2:] != (d_k, d_v):
            raise ValueError(f"initial_state has shape {initial_state.shape}; expected (..., {d_k}, {d_v})")
    state = np.zeros(batch + (d_k, d_v)) if initial_state is None else initial_state  # (..., d_k, d_v)
    dtype = np.result_type(q, k, v, beta, g, state, np.float32)
    q, k, v, beta, g, state = (a.astype(dtype, copy=False) for a in (q, k, v, beta, g, state))
    return q, k, v, beta, g, check_scale(scale, d_k), state


@boundary(_delta_arguments)
def delta_rule_recurrent(q, k, v, beta, g=None, scale=None, initial_state=None) -> DeltaRuleResult:
    r"""The gated delta rule token by token: decay the memory, correct what it returns for :math:`k_t`, read it.

    The memory :math:`S \in \mathbb{R}^{d_k \times d_v}` maps keys to values, :math:`k \mapsto S^\top k`.
    Token :math:`t` decays it by :math:`\alpha_t = e^{g_t}`, then moves the value it returns for :math:`k_t`
    a fraction :math:`\beta_t` of the way to :math:`v_t` (one step of gradient descent on
    :math:`\tfrac12 \lVert S^\top k_t - v_t \rVert^2` with rate :math:`\beta_t` when :math:`\lVert k_t \rVert = 1`):

    .. math::
        S_t = \alpha_t S_{t-1} + \beta_t\, k_t \bigl(v_t - \alpha_t S_{t-1}^\top k_t\bigr)^\top
            = (I - \beta_t k_t k_t^\top)\, \alpha_t S_{t-1} + \beta_t\, k_t v_t^\top,
        \qquad o_t = S_t^\top (\text{scale}\; q_t)

    Without the correction (:math:`S_t = S_{t-1} + k_t v_t^\top`) this is linear attention without its
    normaliser (:func:`attnbook.efficient.linear.linear_attention_recurrent`); :math:`g = 0` is DeltaNet,
    a scalar :math:`g_t` Gated DeltaNet, a vector :math:`g_t \in \mathbb{R}^{d_k}` Kimi Delta Attention
    (:math:`\alpha_t = \operatorname{diag}(e^{g_t})`).

    Parameters
    ----------
    q, k : array_like
        ``(..., n, d_k)`` queries and keys (the models L2-normalise them: :func:`l2_normalize`).
    v : array_like
        ``(..., n, d_v)`` values.
    beta : array_like
        ``(..., n)`` the write strengths, in ``[0, 1]`` in the models (a sigmoid).
    g : array_like, optional
        ``(..., n)`` or ``(..., n, d_k)`` the log-decays, at most 0; default 0 (no decay).
    scale : float, optional
        The factor of the queries; default ``1 / sqrt(d_k)``.
    initial_state : array_like, optional
        ``(..., d_k, d_v)`` the memory before the first token; default zeros.

    Returns
    -------
    DeltaRuleResult
        ``outputs`` ``(..., n, d_v)`` and the final ``state`` ``(..., d_k, d_v)``.

    Examples
    --------
    >>> k = np.array([[1.0, 0.0], [1.0, 0.0]])                   # the same key twice
    >>> run = delta_rule_recurrent(k, k, [[1.0], [5.0]], beta=[1.0, 1.0], scale=1.0)
    >>> run.outputs.tolist()                                    # the second write replaces the first
    [[1.0], [5.0]]
    """
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], beta.shape[:-1], g.shape[:-2],
                                initial_state.shape[:-2])
    n = k.shape[-2]
    state = np.broadcast_to(initial_state, batch + initial_state.shape[-2:]).copy()  # (..., d_k, d_v): S_0
    outputs = np.empty(batch + (n, v.shape[-1]), dtype=state.dtype)  # (..., n, d_v)
    for t in range(n):
        k_t, v_t = k[..., t, :], v[..., t, :]  # (..., d_k), (..., d_v)
        state = np.exp(g[..., t, :])[..., :, None] * state  # (..., d_k, d_v): decayed
        recalled = np.einsum("...k,...kv->...v", k_t, state)  # (..., d_v): what the memory returns for k_t
        error = beta[..., t, None] * (v_t - recalled)  # (..., d_v): the delta, scaled by beta
        state = state + k_t[..., :, None] * error[..., None, :]  # (..., d_k, d_v): the correction written
        outputs[..., t, :] = np.einsum("...k,...kv->...v", scale * q[..., t, :], state)  # (..., d_v)
    return DeltaRuleResult(outputs, state)


def _chunked_arguments(q, k, v, beta, g=None, chunk_size: int = 64, scale=None, initial_state=None) -> tuple:
    q, k, v, beta, g, scale, state = _delta_arguments(q, k, v, beta, g, scale, initial_state)
    return q, k, v, beta, g, check_positive_int(chunk_size, "chunk_size"), scale, state


@boundary(_chunked_arguments)
def delta_rule_chunked(q, k, v, beta, g=None, chunk_size: int = 64, scale=None, initial_state=None) -> DeltaRuleResult:
    r"""The gated delta rule a chunk at a time: products of matrices within a chunk, the recurrence between chunks.

    Inside a chunk of :math:`C` tokens starting from memory :math:`S_0`, write :math:`\Gamma_t` for the decay
    from the chunk's start to token :math:`t` (:math:`\Gamma_t = \prod_{s \le t} \alpha_s`, per channel
    for KDA) and :math:`\Gamma_{t/s} = \Gamma_t / \Gamma_s`. Unrolling the recurrence, every token's write
    :math:`S_t - \alpha_t S_{t-1} = k_t u_t^\top` is a rank-one term whose vector :math:`u_t` (the new value,
    the error written) satisfies

    .. math::
        u_t = \beta_t \Bigl(v_t - (\Gamma_t k_t)^\top S_0 - \sum_{s < t} (\Gamma_{t/s}\, k_t \cdot k_s)\, u_s\Bigr),

    a unit lower-triangular system :math:`(I + A) U = \operatorname{diag}(\beta)\,(V - (\Gamma K) S_0)`
    with :math:`A_{ts} = \beta_t\, \Gamma_{t/s} k_t \cdot k_s` (:math:`s < t`): the WY representation,
    solved once per chunk (the "UT transform"). Then, for every token of the chunk at once,

    .. math::
        o_t = \text{scale}\Bigl((\Gamma_t q_t)^\top S_0 + \sum_{s \le t} (\Gamma_{t/s}\, q_t \cdot k_s)\, u_s\Bigr),
        \qquad S_C = \Gamma_C S_0 + \sum_{s} (\Gamma_{C/s} k_s)\, u_s^\top.

    Equal to :func:`delta_rule_recurrent`; the last chunk may be shorter.

    Parameters
    ----------
    q, k, v, beta, g
        As in :func:`delta_rule_recurrent`.
    chunk_size : int, optional
        Tokens per chunk; default 64 (as transformers' and FLA's kernels).
    scale, initial_state
        As in :func:`delta_rule_recurrent`.

    Returns
    -------
    DeltaRuleResult
        As :func:`delta_rule_recurrent` returns it.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> q, k = l2_normalize(rng.standard_normal((7, 3))), l2_normalize(rng.standard_normal((7, 3)))
    >>> v, beta = rng.standard_normal((7, 2)), np.full(7, 0.5)
    >>> one = delta_rule_recurrent(q, k, v, beta)
    >>> bool(np.allclose(delta_rule_chunked(q, k, v, beta, chunk_size=3).outputs, one.outputs))
    True
    """
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], beta.shape[:-1], g.shape[:-2],
                                initial_state.shape[:-2])
    n, d_k = k.shape[-2:]
    q, k, v = (np.broadcast_to(a, batch + a.shape[-2:]) for a in (q, k, v))  # (..., n, d)
    beta = np.broadcast_to(beta, batch + (n,))  # (..., n)
    g = np.broadcast_to(g, batch + (n, d_k))  # (..., n, d_k): one log-decay per channel
    state = np.broadcast_to(initial_state, batch + initial_state.shape[-2:]).copy()  # (..., d_k, d_v): S_0
    outputs = np.empty(batch + (n, v.shape[-1]), dtype=state.dtype)  # (..., n, d_v)
    for start in range(0, n, chunk_size):
        rows = slice(start, min(start + chunk_size, n))
        q_c, k_c, v_c, b_c = q[..., rows, :], k[..., rows, :], v[..., rows, :], beta[..., rows]  # a chunk of C
        log_gamma = np.cumsum(g[..., rows, :], axis=-2)  # (..., C, d_k): log Gamma_t
        c = log_gamma.shape[-2]
        lower = np.tri(c, dtype=bool)  # (C, C): s <= t
        log_ratio = log_gamma[..., :, None, :] - log_gamma[..., None, :, :]  # (..., C, C, d_k): log Gamma_{t/s}
        ratio = np.exp(np.where(lower[..., None], log_ratio, -np.inf))  # (..., C, C, d_k): 0 above the diagonal
        k_k = np.einsum("...tc,...tsc,...sc->...ts", k_c, ratio, k_c)  # (..., C, C): Gamma_{t/s} k_t . k_s
        q_k = np.einsum("...tc,...tsc,...sc->...ts", q_c, ratio, k_c)  # (..., C, C)
        a = b_c[..., :, None] * np.where(np.tri(c, k=-1, dtype=bool), k_k, 0.0)  # (..., C, C): strictly lower
        decayed_k = np.exp(log_gamma) * k_c  # (..., C, d_k): Gamma_t k_t
        right = b_c[..., :, None] * (v_c - decayed_k @ state)  # (..., C, d_v)
        u = np.linalg.solve(np.eye(c) + a, right)  # (..., C, d_v): the WY (UT) system, solved
        outputs[..., rows, :] = scale * (
            (np.exp(log_gamma) * q_c) @ state + np.where(lower, q_k, 0.0) @ u)  # (..., C, d_v)
        to_end = np.exp(log_gamma[..., -1:, :] - log_gamma) * k_c  # (..., C, d_k): Gamma_{C/s} k_s
        state = np.exp(log_gamma[..., -1, :])[..., :, None] * state + np.swapaxes(to_end, -1, -2) @ u  # (..., d_k, d_v)
    return DeltaRuleResult(outputs, state)


def init_gated_deltanet(d_model: int, n_k_heads: int, n_v_heads: int, d_k: int, d_v: int, kernel: int = 4,
                        seed: int = 0) -> GatedDeltaNetWeights:
    """Seeded weights of a Gated DeltaNet layer: normal matrices of variance ``1 / fan_in``, decay rates in [1, 16].

    Parameters
    ----------
    d_model : int
        The model width.
    n_k_heads, n_v_heads : int
        The query-key heads and the value heads (a multiple: each query-key head serves a group of value heads).
    d_k, d_v : int
        Each head's key and value widths.
    kernel : int, optional
        Taps of the causal convolution; default 4 (Qwen3-Next's).
    seed : int, optional
        Seed of the weights; default 0.

    Returns
    -------
    GatedDeltaNetWeights
        The weights of :func:`gated_deltanet`.

    Examples
    --------
    >>> init_gated_deltanet(8, 1, 2, 4, 2).w_o.shape
    (4, 8)
    """
    d_model, n_k_heads, n_v_heads, d_k, d_v, kernel = (check_positive_int(v, name) for v, name in (
        (d_model, "d_model"), (n_k_heads, "n_k_heads"), (n_v_heads, "n_v_heads"), (d_k, "d_k"), (d_v, "d_v"),
        (kernel, "kernel")))
    if n_v_heads % n_k_heads:
        raise ValueError(f"n_v_heads = {n_v_heads} must be a multiple of n_k_heads = {n_k_heads}")
    rng = np.random.default_rng(seed)
    d_qk, d_vz = n_k_heads * d_k, n_v_heads * d_v
    w_q, w_k = rng.standard_normal((2, d_model, d_qk)) / np.sqrt(d_model)  # (d_model, d_qk) each
    w_v, w_z = rng.standard_normal((2, d_model, d_vz)) / np.sqrt(d_model)  # (d_model, d_vz) each
    w_beta, w_alpha = rng.standard_normal((2, d_model, n_v_heads)) / np.sqrt(d_model)  # (d_model, n_v_heads) each
    conv = rng.standard_normal((2 * d_qk + d_vz, kernel)) / np.sqrt(kernel)  # (d_conv, kernel)
    return GatedDeltaNetWeights(w_q, w_k, w_v, w_z, w_beta, w_alpha, conv, np.log(rng.uniform(1, 16, n_v_heads)),
                                np.ones(n_v_heads), np.ones(d_v), rng.standard_normal((d_vz, d_model)) / np.sqrt(d_vz))


def _deltanet_arguments(x, weights: GatedDeltaNetWeights, n_k_heads: int, n_v_heads: int, chunk_size: int = 64,
                        eps: float = 1e-6) -> tuple:
    x = as_float_array(x, "x", layout="(..., n, d_model)")  # (..., n, d_model)
    n_k_heads, n_v_heads = check_positive_int(n_k_heads, "n_k_heads"), check_positive_int(n_v_heads, "n_v_heads")
    if n_v_heads % n_k_heads:
        raise ValueError(f"n_v_heads = {n_v_heads} must be a multiple of n_k_heads = {n_k_heads}")
    dims = Dims(d_model=(x.shape[-1], f"x has d_model = {x.shape[-1]}"),
                n_v_heads=(n_v_heads, f"n_v_heads = {n_v_heads}"))
    weights = check_weights(weights, GatedDeltaNetWeights, "weights", dims, see="init_gated_deltanet")
    d_qk, d_vz = weights.w_q.shape[1], weights.w_v.shape[1]
    if d_qk % n_k_heads or d_vz != n_v_heads * weights.norm.shape[0] or weights.conv.shape[0] != 2 * d_qk + d_vz:
        raise ValueError(f"the widths do not fit the heads: w_q has {d_qk} columns for {n_k_heads} heads, w_v {d_vz} "
                         f"for {n_v_heads} heads of {weights.norm.shape[0]} (norm), conv {weights.conv.shape[0]} "
                         f"channels for 2 * {d_qk} + {d_vz}")
    return x, weights, n_k_heads, n_v_heads, check_positive_int(chunk_size, "chunk_size"), eps


def short_convolution(mixed: np.ndarray, conv: np.ndarray) -> np.ndarray:
    """Unchecked kernel: the depthwise causal convolution of each channel, then SiLU, as the delta-rule layers use.

    ``mixed`` ``(..., n, d_conv)``, ``conv`` ``(d_conv, kernel)``; tap ``kernel - 1`` reads the current token.

    >>> short_convolution(np.ones((3, 1)), np.array([[1.0, 1.0]])).round(4).tolist()     # SiLU(1), SiLU(2), SiLU(2)
    [[0.7311], [1.7616], [1.7616]]
    """
    n, kernel = mixed.shape[-2], conv.shape[1]
    before = np.zeros(mixed.shape[:-2] + (kernel - 1, mixed.shape[-1]))  # (..., K - 1, d_conv): nothing before t = 0
    padded = np.concatenate([before, mixed], axis=-2)  # (..., n + K - 1, d_conv)
    out = sum(conv[:, j] * padded[..., j:j + n, :] for j in range(kernel))  # (..., n, d_conv): depthwise, causal
    return out / (1.0 + np.exp(-out))  # (..., n, d_conv): SiLU


def heads(y: np.ndarray, count: int) -> np.ndarray:
    """Unchecked kernel: ``(..., n, count d)`` -> ``(..., count, n, d)``.

    >>> heads(np.arange(4.0).reshape(1, 4), 2).tolist()
    [[[0.0, 1.0]], [[2.0, 3.0]]]
    """
    return np.swapaxes(y.reshape(*y.shape[:-1], count, -1), -3, -2)  # (..., count, n, d)


@boundary(_deltanet_arguments)
def gated_deltanet(x, weights: GatedDeltaNetWeights, n_k_heads: int, n_v_heads: int, chunk_size: int = 64,
                   eps: float = 1e-6) -> np.ndarray:
    r"""Qwen3-Next's Gated DeltaNet layer: a short causal convolution, the gated delta rule, a gated RMSNorm.

    .. math::
        [q_t, k_t, v_t] = \operatorname{SiLU}igl(\operatorname{conv}([x W_Q, x W_K, x W_V])_tigr), \quad
        eta_t = \sigma(x_t W_eta), \quad g_t = -e^{A}\, \operatorname{softplus}(x_t W_lpha + b_{dt}),

        o_t = 	ext{the gated delta rule of } (\hat q_t, \hat k_t, v_t, eta_t, g_t), \qquad
        y_t = igl[\operatorname{RMS}(o_{h,t}) \odot \operatorname{SiLU}(x_t W_{Z,h})igr]_h W_O

    per value head :math:`h` (:func:`delta_rule_chunked`), with :math:`\hat q, \hat k` the L2-normalised
    queries and keys of the query-key head that serves :math:`h` (heads ``h // (n_v_heads / n_k_heads)``).
    The state per value head is ``d_k x d_v`` numbers, whatever the length: the layer's whole cache, with the
    convolution's last ``kernel - 1`` inputs.

    Parameters
    ----------
    x : array_like
        ``(..., n, d_model)`` the sequence.
    weights : GatedDeltaNetWeights
        See :func:`init_gated_deltanet`.
    n_k_heads, n_v_heads : int
        The query-key heads and the value heads.
    chunk_size : int, optional
        As in :func:`delta_rule_chunked`; default 64.
    eps : float, optional
        The ``eps`` of the output's RMSNorm (the model's ``rms_norm_eps``); default ``1e-6``. The L2
        normalisation of queries and keys keeps FLA's ``1e-6``.

    Returns
    -------
    ndarray
        ``(..., n, d_model)``.

    Examples
    --------
    >>> w = init_gated_deltanet(16, n_k_heads=2, n_v_heads=4, d_k=4, d_v=3)
    >>> x = np.random.default_rng(0).standard_normal((2, 6, 16))
    >>> y = gated_deltanet(x, w, 2, 4)
    >>> y.shape, bool(np.allclose(gated_deltanet(x[:, :4], w, 2, 4), y[:, :4]))       # causal
    ((2, 6, 16), True)
    """
    d_qk = weights.w_q.shape[1]
    conv = short_convolution(np.concatenate([x @ weights.w_q, x @ weights.w_k, x @ weights.w_v], axis=-1),
                             weights.conv)  # (..., n, d_conv)
    group, d_v = n_v_heads // n_k_heads, weights.norm.shape[0]
    q = np.repeat(l2_normalize(heads(conv[..., :d_qk], n_k_heads)), group, axis=-3)  # (..., h_v, n, d_k)
    k = np.repeat(l2_normalize(heads(conv[..., d_qk:2 * d_qk], n_k_heads)), group, axis=-3)  # (..., h_v, n, d_k)
    v = heads(conv[..., 2 * d_qk:], n_v_heads)  # (..., h_v, n, d_v)
    beta = np.swapaxes(1.0 / (1.0 + np.exp(-(x @ weights.w_beta))), -1, -2)  # (..., h_v, n): write strengths
    softplus = np.logaddexp(0.0, x @ weights.w_alpha + weights.dt_bias)  # (..., n, h_v)
    g = np.swapaxes(-np.exp(weights.a_log) * softplus, -1, -2)[..., None]  # (..., h_v, n, 1): log-decays
    start = np.zeros(x.shape[:-2] + (n_v_heads, q.shape[-1], d_v))  # (..., h_v, d_k, d_v): an empty memory
    scale = 1.0 / np.sqrt(q.shape[-1])
    o = delta_rule_chunked.unchecked(q, k, v, beta, g, chunk_size, scale, start).outputs  # (..., h_v, n, d_v)
    z = heads(x @ weights.w_z, n_v_heads)  # (..., h_v, n, d_v)
    gated = rms_norm.unchecked(o, weights.norm, eps) * z / (1.0 + np.exp(-z))  # (..., h_v, n, d_v): RMS(o) * SiLU(z)
    return np.swapaxes(gated, -3, -2).reshape(*x.shape[:-1], -1) @ weights.w_o  # (..., n, d_model)


def init_kimi_delta_attention(d_model: int, n_heads: int, d_head: int, kernel: int = 4,
                              seed: int = 0) -> KimiDeltaWeights:
    """Seeded weights of a Kimi delta attention layer: normal matrices of variance ``1 / fan_in``, decay rates in [1, 16].

    Parameters
    ----------
    d_model, n_heads, d_head : int
        The model width, the heads and each head's width (keys and values alike).
    kernel, seed : int, optional
        As in :func:`init_gated_deltanet`.

    Returns
    -------
    KimiDeltaWeights
        The weights of :func:`kimi_delta_attention`.

    Examples
    --------
    >>> init_kimi_delta_attention(8, 2, 4).w_o.shape
    (8, 8)
    """
    d_model, n_heads, d_head, kernel = (check_positive_int(v, name) for v, name in (
        (d_model, "d_model"), (n_heads, "n_heads"), (d_head, "d_head"), (kernel, "kernel")))
    rng = np.random.default_rng(seed)
    d_qkv = n_heads * d_head

    def normal(rows: int, cols: int) -> np.ndarray:
        return rng.standard_normal((rows, cols)) / np.sqrt(rows)  # (rows, cols)

    return KimiDeltaWeights(normal(d_model, d_qkv), normal(d_model, d_qkv), normal(d_model, d_qkv),
                            normal(kernel, 3 * d_qkv).T.copy(), normal(d_model, d_head), normal(d_head, d_qkv),
                            np.zeros(d_qkv), np.log(rng.uniform(1, 16, n_heads)), normal(d_model, n_heads),
                            normal(d_model, d_head), normal(d_head, d_qkv), np.ones(d_head), normal(d_qkv, d_model))


def _kimi_arguments(x, weights: KimiDeltaWeights, n_heads: int, chunk_size: int = 64, eps: float = 1e-6) -> tuple:
    x = as_float_array(x, "x", layout="(..., n, d_model)")  # (..., n, d_model)
    n_heads = check_positive_int(n_heads, "n_heads")
    dims = Dims(d_model=(x.shape[-1], f"x has d_model = {x.shape[-1]}"), n_heads=(n_heads, f"n_heads = {n_heads}"))
    weights = check_weights(weights, KimiDeltaWeights, "weights", dims, see="init_kimi_delta_attention")
    d_qkv, d_head = weights.w_q.shape[1], weights.norm.shape[0]
    if d_qkv != n_heads * d_head or weights.conv.shape[0] != 3 * d_qkv:
        raise ValueError(f"weights.w_q has {d_qkv} columns and weights.conv {weights.conv.shape[0]} channels; with "
                         f"n_heads = {n_heads} of d_head = {d_head} (weights.norm) expected {n_heads * d_head} and "
                         f"{3 * n_heads * d_head}")
    return x, weights, n_heads, check_positive_int(chunk_size, "chunk_size"), eps


@boundary(_kimi_arguments)
def kimi_delta_attention(x, weights: KimiDeltaWeights, n_heads: int, chunk_size: int = 64,
                         eps: float = 1e-6) -> np.ndarray:
    r"""Kimi Linear's delta attention layer (KDA): Gated DeltaNet with one decay per key channel.

    .. math::
        [q_t, k_t, v_t] = \operatorname{SiLU}\bigl(\operatorname{conv}([x W_Q, x W_K, x W_V])_t\bigr), \quad
        \beta_t = \sigma(x_t W_\beta), \quad
        g_{t} = -e^{A_h} \operatorname{softplus}(x_t W_{fa} W_{fb} + b_{dt}) \in \mathbb{R}^{d},

        y_t = \bigl[\operatorname{RMS}(o_{h,t}) \odot \sigma(x_t W_{ga} W_{gb})_h\bigr]_h W_O

    with :math:`o` the delta rule of the L2-normalised queries and keys (:func:`delta_rule_chunked`,
    :math:`\alpha_t = \operatorname{diag}(e^{g_t})`): each key channel forgets at its own rate, where
    Gated DeltaNet (:func:`gated_deltanet`) has one rate per head.

    Parameters
    ----------
    x : array_like
        ``(..., n, d_model)`` the sequence.
    weights : KimiDeltaWeights
        See :func:`init_kimi_delta_attention`.
    n_heads : int
        The heads.
    chunk_size, eps
        As in :func:`gated_deltanet`.

    Returns
    -------
    ndarray
        ``(..., n, d_model)``.

    Examples
    --------
    >>> w = init_kimi_delta_attention(16, n_heads=2, d_head=4)
    >>> x = np.random.default_rng(0).standard_normal((5, 16))
    >>> kimi_delta_attention(x, w, 2).shape
    (5, 16)
    """
    d_qkv = weights.w_q.shape[1]
    conv = short_convolution(np.concatenate([x @ weights.w_q, x @ weights.w_k, x @ weights.w_v], axis=-1),
                             weights.conv)  # (..., n, 3 d_qkv)
    q = l2_normalize(heads(conv[..., :d_qkv], n_heads))  # (..., h, n, d)
    k = l2_normalize(heads(conv[..., d_qkv:2 * d_qkv], n_heads))  # (..., h, n, d)
    v = heads(conv[..., 2 * d_qkv:], n_heads)  # (..., h, n, d)
    softplus = np.logaddexp(0.0, x @ weights.w_fa @ weights.w_fb + weights.dt_bias)  # (..., n, d_qkv)
    g = -np.exp(weights.a_log)[:, None, None] * heads(softplus, n_heads)  # (..., h, n, d): per-channel log-decays
    beta = np.swapaxes(1.0 / (1.0 + np.exp(-(x @ weights.w_beta))), -1, -2)  # (..., h, n)
    start = np.zeros(x.shape[:-2] + (n_heads, q.shape[-1], q.shape[-1]))  # (..., h, d, d): an empty memory
    scale = 1.0 / np.sqrt(q.shape[-1])
    o = delta_rule_chunked.unchecked(q, k, v, beta, g, chunk_size, scale, start).outputs  # (..., h, n, d)
    gate = heads(x @ weights.w_ga @ weights.w_gb, n_heads)  # (..., h, n, d)
    gated = rms_norm.unchecked(o, weights.norm, eps) / (1.0 + np.exp(-gate))  # (..., h, n, d): RMS(o) * sigma(gate)
    return np.swapaxes(gated, -3, -2).reshape(*x.shape[:-1], -1) @ weights.w_o  # (..., n, d_model)


def _memory_arguments(keys, values, rule: str = "delta", beta=1.0) -> tuple:
    keys = as_float_array(keys, "keys", layout="(n, d_k)")  # (n, d_k)
    values = as_float_array(values, "values", layout="(n, d_v)")  # (n, d_v)
    if keys.ndim != 2 or values.ndim != 2 or keys.shape[0] != values.shape[0]:
        raise ValueError(f"keys {keys.shape} and values {values.shape} must be (n, d_k) and (n, d_v), one pair per row")
    if rule not in MEMORY_RULES:
        raise ValueError(f"rule must be one of {MEMORY_RULES}, got {rule!r}")
    if isinstance(beta, bool) or not (isinstance(beta, (int, float)) and 0 < beta <= 1):
        raise ValueError(f"beta must be a number in (0, 1], got {beta!r}")
    return keys, values, rule, float(beta)


@boundary(_memory_arguments)
def fast_weight_memory(keys, values, rule: str = "delta", beta=1.0) -> np.ndarray:
    r"""The memory :math:`S` (``d_k x d_v``) after writing the pairs ``(k_t, v_t)`` in order; read it with ``k @ S``.

    .. math::
        \text{linear: } S_t = S_{t-1} + k_t v_t^\top, \qquad
        \text{delta: } S_t = S_{t-1} + \beta\, k_t \bigl(v_t - S_{t-1}^\top k_t\bigr)^\top

    The first is causal linear attention's state (without its feature map and normaliser), the second
    :func:`delta_rule_recurrent` with a constant ``beta`` and no decay. Both hold ``d_k d_v`` numbers, however
    many pairs are written.

    Parameters
    ----------
    keys : array_like
        ``(n, d_k)`` the keys, in the order written.
    values : array_like
        ``(n, d_v)`` the values.
    rule : str, optional
        One of ``MEMORY_RULES``; default ``"delta"``.
    beta : float, optional
        The delta rule's write strength, in ``(0, 1]``; default 1 (the linear rule ignores it).

    Returns
    -------
    ndarray
        ``(d_k, d_v)`` the memory; ``keys @ memory`` is what it returns for each key.

    Examples
    --------
    >>> keys = np.array([[1.0, 0.0], [1.0, 0.0]])               # one key written twice
    >>> values = np.array([[1.0], [5.0]])
    >>> (keys[:1] @ fast_weight_memory(keys, values, "linear")).tolist()    # the sum of both
    [[6.0]]
    >>> (keys[:1] @ fast_weight_memory(keys, values, "delta")).tolist()     # the latest
    [[5.0]]
    """
    if rule == "linear":
        return keys.T @ values  # (d_k, d_v): sum_t k_t v_t^T
    n, d_k = keys.shape
    return delta_rule_recurrent.unchecked(keys, keys, values, np.full(n, beta), np.zeros((n, 1)), 1.0,
                                          np.zeros((d_k, values.shape[1]))).state  # (d_k, d_v)
