"""FlashAttention properly: its memory traffic, and a backward pass that stores no weights.

IO counts: :func:`simulate_hbm_traffic` replays tiled attention's loop on a machine with a slow memory
(HBM) and a fast one (SRAM) of ``M`` numbers, against :func:`standard_hbm_traffic` and the closed form
:func:`tiled_hbm_traffic`. Backward: :func:`flash_backward` recomputes each tile of weights from the
log-sum-exp :func:`flash_forward` stores, so neither pass holds the ``n_q x n_k`` weights.

>>> import numpy as np
>>> from attnbook import scaled_dot_product_attention
>>> from attnbook.learning.gradients import attention_backward
>>> rng = np.random.default_rng(0)
>>> q, k, v, d_out = rng.standard_normal((4, 7, 3))            # each (n, d)
>>> out, lse = flash_forward(q, k, v, block_q=2, block_k=3)
>>> ref, weights = scaled_dot_product_attention(q, k, v)
>>> grads = flash_backward(q, k, v, out, lse, d_out, block_q=2, block_k=3)
>>> bool(np.allclose(grads.dq, attention_backward(q, k, v, weights, d_out).dq))
True
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from ..attention import AttentionGradients, check_attention_inputs
from ..masks import check_causal
from ..validation import as_float_array, check_positive_int
from .online_softmax import finish, fold, start_state
from .tiled import SKIPPED, causal_tile, tile_plan

__all__ = [
    "FlashForward",
    "HBMTraffic",
    "blocks_for_sram",
    "flash_backward",
    "flash_forward",
    "simulate_hbm_traffic",
    "sram_footprint",
    "standard_hbm_traffic",
    "tiled_hbm_traffic",
]


class HBMTraffic(NamedTuple):
    """Numbers moved between the slow memory (HBM) and the fast one (SRAM).

    Attributes
    ----------
    reads, writes : int
        Numbers read from HBM into SRAM, and written from SRAM to HBM.

    Examples
    --------
    >>> traffic = standard_hbm_traffic(4, 2)
    >>> traffic.reads, traffic.writes, traffic.total
    (56, 40, 96)
    """

    reads: int
    writes: int

    @property
    def total(self) -> int:
        """Reads plus writes."""
        return self.reads + self.writes


class FlashForward(NamedTuple):
    """Output of :func:`flash_forward`: the attention output and the log-sum-exp of every query's scores.

    Attributes
    ----------
    output : ndarray
        ``(..., n_q, d_v)`` the attention output.
    logsumexp : ndarray
        ``(..., n_q)`` ``L_i = log sum_j exp(s_ij)`` over the allowed keys (``-inf`` for a query with none).

    Examples
    --------
    >>> out, lse = flash_forward(np.zeros((1, 2)), np.zeros((3, 2)), np.ones((3, 1)))
    >>> out.tolist(), round(float(lse[0]), 4)                       # log 3
    ([[1.0]], 1.0986)
    """

    output: np.ndarray  # (..., n_q, d_v)
    logsumexp: np.ndarray  # (..., n_q)


# ----------------------------------------------------------------------------------------- IO counts


def sram_footprint(block_q: int, block_k: int, d: int) -> int:
    r"""Numbers that one step of tiled attention holds in fast memory (SRAM).

    .. math:: F(B_q, B_k, d) = \underbrace{B_q d}_{Q_a} + \underbrace{B_q d}_{O_a}
              + \underbrace{2 B_q}_{m_a,\ \ell_a} + \underbrace{2 B_k d}_{K_b,\ V_b}
              + \underbrace{B_q B_k}_{\text{tile } S}

    Parameters
    ----------
    block_q, block_k : int
        Rows per query block and per key block.
    d : int
        Width of queries, keys and values (``d_k = d_v = d``).

    Returns
    -------
    int
        ``F``.

    Examples
    --------
    >>> sram_footprint(4, 2, 8)
    112
    """
    block_q = check_positive_int(block_q, "block_q")
    block_k = check_positive_int(block_k, "block_k")
    d = check_positive_int(d, "d")
    return footprint(block_q, block_k, d)


def footprint(block_q: int, block_k: int, d: int) -> int:
    """Unchecked kernel of :func:`sram_footprint`.

    >>> footprint(1, 1, 1)
    7
    """
    return 2 * block_q * d + 2 * block_q + 2 * block_k * d + block_q * block_k


def blocks_for_sram(sram: int, d: int) -> tuple[int, int]:
    r"""The block sizes of the IO-complexity theorem for an SRAM of ``sram`` numbers: ``(block_q, block_k)``.

    .. math:: B_q = \left\lfloor \frac{M}{7d} \right\rfloor, \qquad B_k = \min(d, B_q)

    With these, :func:`sram_footprint` is at most ``7 B_q d <= M``.

    Parameters
    ----------
    sram, d : int
        ``M``, at least ``7 d``; the width of queries, keys and values.

    Returns
    -------
    tuple of int
        ``(B_q, B_k)``.

    Examples
    --------
    >>> blocks_for_sram(1000, 8)
    (17, 8)
    >>> blocks_for_sram(40, 8)
    Traceback (most recent call last):
    ...
    ValueError: sram must be at least 7 d = 56 numbers, got 40
    """
    sram = check_positive_int(sram, "sram")
    d = check_positive_int(d, "d")
    if sram < 7 * d:
        raise ValueError(f"sram must be at least 7 d = {7 * d} numbers, got {sram}")
    block_q = sram // (7 * d)
    return block_q, min(d, block_q)


def standard_hbm_traffic(n: int, d: int) -> HBMTraffic:
    r"""HBM traffic of standard attention, which writes the scores and the weights to HBM.

    .. math:: \text{read } Q, K;\ \text{write } S;\ \text{read } S;\ \text{write } P;\
              \text{read } P, V;\ \text{write } O: \quad
              (3nd + 2n^2) \text{ reads} + (nd + 2n^2) \text{ writes} = 4nd + 4n^2

    This is Algorithm 0 of Dao et al. (2022).

    Parameters
    ----------
    n, d : int
        Sequence length; width of queries, keys and values.

    Returns
    -------
    HBMTraffic
        Reads and writes, in numbers.

    Examples
    --------
    >>> standard_hbm_traffic(1024, 64).total
    4456448
    """
    n = check_positive_int(n, "n")
    d = check_positive_int(d, "d")
    return HBMTraffic(3 * n * d + 2 * n * n, n * d + 2 * n * n)


def tiled_hbm_traffic(n: int, d: int, block_q: int) -> HBMTraffic:
    r"""Closed form of :func:`simulate_hbm_traffic` without a mask when no key block stays in SRAM.

    .. math:: \text{reads} = nd + 2nd \left\lceil \frac{n}{B_q} \right\rceil, \qquad \text{writes} = nd

    Parameters
    ----------
    n, d, block_q : int
        As in :func:`simulate_hbm_traffic`.

    Returns
    -------
    HBMTraffic
        Reads and writes, in numbers.

    Examples
    --------
    >>> tiled_hbm_traffic(1024, 64, 128)
    HBMTraffic(reads=1114112, writes=65536)
    """
    n = check_positive_int(n, "n")
    d = check_positive_int(d, "d")
    block_q = check_positive_int(block_q, "block_q")
    return HBMTraffic(n * d + 2 * n * d * -(-n // block_q), n * d)


def simulate_hbm_traffic(n: int, d: int, block_q: int, block_k: int, sram: int,
                         causal: bool = False) -> HBMTraffic:
    r"""Replay tiled attention's loop on a machine with an SRAM of ``sram`` numbers and count HBM traffic.

    .. math:: \text{traffic} = \sum_{\text{blocks moved}} (\text{rows} \times \text{width})

    The loop is :func:`attnbook.efficient.tiled.tiled_attention`'s: each query block ``Q_a`` is read
    once, each key and value block a tile needs is read unless still in SRAM (least recently used
    evicted), ``O_a`` is written once. The working set, :func:`sram_footprint`, must fit.

    Parameters
    ----------
    n, d : int
        Sequence length (queries and keys); width of queries, keys and values.
    block_q, block_k
        As in :func:`attnbook.efficient.tiled.tiled_attention`.
    sram : int
        ``M``, the numbers that fast memory holds.
    causal : bool
        Skip the tiles the causal mask forbids, as ``tiled_attention`` does.

    Returns
    -------
    HBMTraffic
        Reads and writes, in numbers.

    Examples
    --------
    >>> simulate_hbm_traffic(1024, 64, 128, 64, sram=sram_footprint(128, 64, 64))
    HBMTraffic(reads=1114112, writes=65536)
    >>> simulate_hbm_traffic(1024, 64, 128, 64, sram=1000)
    Traceback (most recent call last):
    ...
    ValueError: sram = 1000 numbers cannot hold one step of tiled attention with blocks of 128 and 64 at d = 64 (it needs 33024)
    """
    n = check_positive_int(n, "n")
    d = check_positive_int(d, "d")
    sram = check_positive_int(sram, "sram")
    plan = tile_plan(n, n, block_q, block_k, causal=causal)  # (tiles_q, tiles_k); checks the blocks
    need = footprint(block_q, block_k, d)
    if need > sram:
        raise ValueError(f"sram = {sram} numbers cannot hold one step of tiled attention with blocks of "
                         f"{block_q} and {block_k} at d = {d} (it needs {need})")
    return replay(plan, n, d, block_q, block_k, sram - need)


def replay(plan: np.ndarray, n: int, d: int, block_q: int, block_k: int, spare: int) -> HBMTraffic:
    """Unchecked kernel of :func:`simulate_hbm_traffic`; ``spare`` numbers of SRAM cache key/value blocks.

    >>> replay(np.full((1, 1), 2), 3, 2, 3, 3, 0)
    HBMTraffic(reads=18, writes=6)
    """
    reads = writes = 0
    cached: OrderedDict[int, int] = OrderedDict()  # key block -> numbers it takes (its K and V rows)
    for a in range(plan.shape[0]):
        rows = min(block_q, n - a * block_q)
        reads += rows * d  # Q_a
        for b in range(plan.shape[1]):
            if plan[a, b] == SKIPPED:
                continue
            size = 2 * min(block_k, n - b * block_k) * d  # K_b and V_b
            if b in cached:
                del cached[b]  # a hit: no traffic; the block joins the working set
            else:
                reads += size  # read into the working set
            if size <= spare:  # after the step, keep it in the spare SRAM, evicting the least recently used
                while sum(cached.values()) + size > spare:
                    cached.popitem(last=False)
                cached[b] = size
        writes += rows * d  # O_a
    return HBMTraffic(reads, writes)


# --------------------------------------------------------------------------- forward and backward


def _checked(q, k, v, scale, causal, block_q, block_k):
    q, k, v, _, factor = check_attention_inputs(q, k, v, None, scale)  # at least float32
    block_q = check_positive_int(block_q, "block_q")
    block_k = check_positive_int(block_k, "block_k")
    causal = check_causal(causal, q.shape[-2], k.shape[-2])
    if not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        raise ValueError(f"q, k and v have the leading shapes {q.shape[:-2]}, {k.shape[:-2]} and {v.shape[:-2]}; "
                         "flash_forward and flash_backward need the same (batch, head) shape for all three")
    return q, k, v, factor, causal, block_q, block_k


def _blocks(n: int, size: int):
    return [slice(start, min(start + size, n)) for start in range(0, n, size)]


def _skipped(rows: slice, cols: slice, offset: int, causal: bool) -> bool:
    return causal and cols.start > rows.stop - 1 + offset  # the first key is after the last query's horizon


def flash_forward(q, k, v, scale=None, *, causal: bool = False, block_q: int = 64,
                  block_k: int = 64) -> FlashForward:
    r"""Tiled attention that also returns each query's log-sum-exp, all the backward pass needs to keep.

    .. math:: O = \operatorname{softmax}(S) V, \qquad L_i = m_i + \log \ell_i = \log \sum_j e^{s_{ij}},
              \qquad S = \text{scale}\; Q K^\top

    The loop is :func:`attnbook.efficient.tiled.tiled_attention`'s; the running maximum ``m`` and
    normaliser ``l`` give ``L``, which replaces the ``n_q x n_k`` weights ``exp(s_ij - L_i)``.

    Parameters
    ----------
    q, k, v, scale, causal, block_q, block_k
        As in :func:`attnbook.efficient.tiled.tiled_attention` (the same leading shape).

    Returns
    -------
    FlashForward
        ``output`` ``(..., n_q, d_v)`` and ``logsumexp`` ``(..., n_q)``.

    Examples
    --------
    >>> out, lse = flash_forward(np.eye(2), np.eye(2), np.eye(2), scale=1.0, block_k=1)
    >>> print(np.round(lse, 4))                                     # log(e + 1)
    [1.3133 1.3133]
    """
    q, k, v, factor, causal, block_q, block_k = _checked(q, k, v, scale, causal, block_q, block_k)
    return forward(q, k, v, factor, causal, block_q, block_k)


def forward(q, k, v, factor, causal, block_q, block_k) -> FlashForward:
    """Unchecked kernel of :func:`flash_forward`.

    >>> float(forward(np.zeros((1, 1)), np.zeros((2, 1)), np.ones((2, 1)), 1.0, False, 1, 1).logsumexp[0])
    0.6931471805599453
    """
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    batch, dtype, offset = q.shape[:-2], q.dtype, n_k - n_q
    output = np.empty(batch + (n_q, d_v), dtype=dtype)  # (..., n_q, d_v)
    lse = np.empty(batch + (n_q,), dtype=dtype)  # (..., n_q)
    for rows in _blocks(n_q, block_q):
        q_block = q[..., rows, :] * np.asarray(factor, dtype=dtype)  # (..., block_q, d_k), pre-scaled
        state = start_state(batch + (rows.stop - rows.start,), d_v, dtype)  # (..., block_q, 1 | d_v)
        for cols in _blocks(n_k, block_k):
            if _skipped(rows, cols, offset, causal):
                continue
            scores = q_block @ np.swapaxes(k[..., cols, :], -1, -2)  # (..., block_q, block_k)
            allowed = causal_tile(rows, cols, offset) if causal else None  # (block_q, block_k)
            state = fold(state, scores, v[..., cols, :], allowed)
        output[..., rows, :] = finish(state)  # (..., block_q, d_v)
        with np.errstate(divide="ignore"):  # l = 0 (no allowed key) gives L = -inf
            lse[..., rows] = (state.max + np.log(state.total))[..., 0]  # (..., block_q)
    return FlashForward(output, lse)


def flash_backward(q, k, v, output, logsumexp, grad_output, scale=None, *, causal: bool = False,
                   block_q: int = 64, block_k: int = 64) -> AttentionGradients:
    r"""Gradients of attention from the output and the log-sum-exp, recomputing every tile of weights.

    .. math:: P = e^{S - L}, \quad D_i = \sum_c dO_{ic}\, O_{ic}, \quad dV \mathrel{+}= P^\top dO, \quad
              dS = P \odot (dO\, V^\top - D), \quad dQ \mathrel{+}= \text{scale}\, dS\, K, \quad
              dK \mathrel{+}= \text{scale}\, dS^\top Q

    Key blocks outside, query blocks inside; ``D_i = dO_i . O_i`` equals ``sum_j P_ij dP_ij``, so every
    tile is complete on its own. The result equals :func:`attnbook.learning.gradients.attention_backward`.

    Parameters
    ----------
    q, k, v : array_like
        The forward pass's inputs, ``(..., n_q, d_k)``, ``(..., n_k, d_k)``, ``(..., n_k, d_v)``.
    output : array_like
        ``(..., n_q, d_v)`` the forward output.
    logsumexp : array_like
        ``(..., n_q)`` from :func:`flash_forward` (``-inf`` for a query with no allowed key).
    grad_output : array_like
        ``(..., n_q, d_v)`` the gradient of the loss with respect to the output.
    scale, causal, block_q, block_k
        As in the forward pass (the block sizes need not be the same).

    Returns
    -------
    AttentionGradients
        ``(dq, dk, dv)``, each with the shape of its input.

    Examples
    --------
    >>> q = k = v = np.eye(2)
    >>> out, lse = flash_forward(q, k, v)
    >>> grads = flash_backward(q, k, v, out, lse, np.ones((2, 2)))
    >>> grads.dv.round(4).tolist()                                  # each value is used with total weight 1
    [[1.0, 1.0], [1.0, 1.0]]
    """
    q, k, v, factor, causal, block_q, block_k = _checked(q, k, v, scale, causal, block_q, block_k)
    n_q, d_v = q.shape[-2], v.shape[-1]
    out = as_float_array(output, "output").astype(q.dtype, copy=False)  # (..., n_q, d_v)
    lse = as_float_array(logsumexp, "logsumexp", allow_neg_inf=True).astype(q.dtype, copy=False)  # (..., n_q)
    g = as_float_array(grad_output, "grad_output").astype(q.dtype, copy=False)  # (..., n_q, d_v)
    expected = q.shape[:-2] + (n_q, d_v)
    for name, array, shape in (("output", out, expected), ("grad_output", g, expected),
                               ("logsumexp", lse, q.shape[:-1])):
        if array.shape != shape:
            raise ValueError(f"{name} has shape {array.shape}; expected {shape}")
    return backward(q, k, v, out, lse, g, factor, causal, block_q, block_k)


def backward(q, k, v, out, lse, g, factor, causal, block_q, block_k) -> AttentionGradients:
    """Unchecked kernel of :func:`flash_backward`.

    >>> grads = backward(np.zeros((1, 1)), np.zeros((2, 1)), np.eye(2), np.full((1, 2), 0.5),
    ...                  np.log([2.0]), np.array([[1.0, 0.0]]), 1.0, False, 1, 1)
    >>> grads.dv.tolist()
    [[0.5, 0.0], [0.5, 0.0]]
    """
    n_q, n_k = q.shape[-2], k.shape[-2]
    offset, dtype = n_k - n_q, q.dtype
    scale = np.asarray(factor, dtype=dtype)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)  # shapes of q, k, v
    delta = np.sum(g * out, axis=-1)  # (..., n_q): D_i = dO_i . O_i
    shift = np.where(np.isfinite(lse), lse, np.inf)[..., None]  # (..., n_q, 1): L = -inf gives weights 0
    for cols in _blocks(n_k, block_k):
        k_block, v_block = k[..., cols, :], v[..., cols, :]  # (..., block_k, d_k), (..., block_k, d_v)
        for rows in _blocks(n_q, block_q):
            if _skipped(rows, cols, offset, causal):
                continue
            scores = scale * (q[..., rows, :] @ np.swapaxes(k_block, -1, -2))  # (..., block_q, block_k)
            p = np.exp(scores - shift[..., rows, :])  # (..., block_q, block_k): recomputed weights
            if causal:
                p = np.where(causal_tile(rows, cols, offset), p, 0.0)  # (..., block_q, block_k)
            g_block = g[..., rows, :]  # (..., block_q, d_v)
            dv[..., cols, :] += np.swapaxes(p, -1, -2) @ g_block  # (..., block_k, d_v): P^T dO
            dp = g_block @ np.swapaxes(v_block, -1, -2)  # (..., block_q, block_k): dO V^T
            ds = p * (dp - delta[..., rows, None]) * scale  # (..., block_q, block_k): scale * dS
            dq[..., rows, :] += ds @ k_block  # (..., block_q, d_k)
            dk[..., cols, :] += np.swapaxes(ds, -1, -2) @ q[..., rows, :]  # (..., block_k, d_k)
    return AttentionGradients(dq, dk, dv)
