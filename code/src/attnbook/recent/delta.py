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
from ..validation import as_float_array, boundary, broadcast_batch_shapes, check_min_ndim, check_positive_int

__all__ = ["DeltaRuleResult", "delta_rule_chunked", "delta_rule_recurrent", "l2_normalize"]


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
    r"""Each row divided by its length, as Gated DeltaNet's queries and keys are: :math:`x / \sqrt{\lVert x\rVert^2 + \epsilon}`.

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
