"""The fast path of :func:`attnbook.learning.modern_layers.rotary_block_vjp`, which the GPT trains with.

The same block (RMSNorm, causal grouped-query attention with rotary queries and keys, SwiGLU, two
residuals) and the same backward pass, tested equal to the reference in
``code/tests/learning/test_fast_block.py`` (float64 to 1e-12, float32 to its round-off). It differs only
in how it computes:

* every product runs on the rows ``(batch n, d)`` at once, the three projections as one product with
  ``[W_Q | W_K | W_V]`` and the gate and up projections as one with ``[W_gate | W_up]``;
* the ``G`` query heads that share a key head are stacked into one ``(G n, d_head)`` block, so one product
  scores them all, and ``A^T dO`` and ``dS^T Q`` come out already summed over the group;
* the rotations use cos and sin tables in the array's dtype, and the causal mask is an additive table
  of 0 and -inf; both are made once per length;
* a masked weight is exactly 0, so the score gradient ``A (dA - rowsum(A dA))`` needs no mask;
* the softmax and its gradient work in place, and the block's activations, and its backward pass's
  scratch, are views of one allocation each: numpy backs an array of 4 MiB or more with huge pages, while
  a dozen fresh arrays of about a megabyte cost the kernel a page fault per 4 KiB each (on the GPT's
  shapes, a quarter of the step);
* on two cores or more, the two halves of the batch run side by side, one on a worker thread (numpy lets
  other threads run during its products and its operations on large arrays): everything but the weight
  gradients goes row by row or window by window, each half writes only its own rows, and the weight
  gradients, which sum over every row, are whole products split between the two threads, so the
  numbers are the same, byte for byte, on any number of cores and whatever the threads' timing. It is
  fastest with one BLAS thread, as ``make train`` runs it (``OPENBLAS_NUM_THREADS=1``): BLAS's own
  threads would compete with these two.

>>> from attnbook import init_decoder_block
>>> from attnbook.learning.modern_layers import rotary_block_vjp
>>> from attnbook.positional import sinusoidal_frequencies
>>> x = np.random.default_rng(0).standard_normal((2, 5, 8))              # (batch, n, d_model)
>>> block, theta = init_decoder_block(8, 16, n_heads=4, n_kv_heads=2), sinusoidal_frequencies(2)
>>> (fast, _), back = fast_block_vjp(x, block, 4, 2, theta, 1e-6)
>>> (slow, _), slow_back = rotary_block_vjp(x, block, 4, 2, theta)
>>> bool(np.allclose(fast, slow, rtol=1e-12)), bool(np.allclose(back(x)[1], slow_back(x)[1], rtol=1e-12))
(True, True)
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numpy as np

from ..masks import causal_mask
from ..modern import DecoderBlockResult, DecoderBlockWeights, SwiGLUWeights
from ..multihead import MultiHeadWeights
from .gradients import check_output_gradient

__all__ = ["embedding_gradient", "fast_block_vjp"]


@lru_cache(maxsize=8)
def _tables(n: int, frequencies: bytes, dtype: str, group: int) -> tuple:
    """cos and sin of every position's angles ``(n, d_head / 2)`` and the causal table ``(G n, n)``, read-only."""
    theta = np.frombuffer(frequencies)  # (d_head / 2,) float64
    angles = np.arange(n, dtype=np.float64)[:, None] * theta[None, :]  # (n, d_head / 2)
    bias = np.where(causal_mask(n), 0.0, -np.inf)  # (n, n): 0 where a query may look, -inf elsewhere
    tables = (np.cos(angles), np.sin(angles), np.tile(bias, (group, 1)))  # (n, d/2), (n, d/2), (G n, n)
    tables = tuple(t.astype(dtype) for t in tables)
    for t in tables:
        t.flags.writeable = False
    return tables


def _views(dtype, *shapes) -> list:
    """Arrays of the ``shapes``, carved one after another out of a single new allocation."""
    sizes = [math.prod(shape) for shape in shapes]
    flat = np.empty(sum(sizes), dtype=dtype)
    starts = np.cumsum([0, *sizes])
    return [flat[start:start + size].reshape(shape) for start, size, shape in zip(starts, sizes, shapes)]


def _turn(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Turn the interleaved pairs of the rows of ``x`` ``(..., n, d_head)`` by the angles of ``cos``, ``sin``."""
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., n, d_head / 2) each
    out = np.empty(x.shape, dtype=x.dtype) if out is None else out  # (..., n, d_head)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def _rms(x: np.ndarray, gamma: np.ndarray, eps: float, normed: np.ndarray, x_hat: np.ndarray,
         r: np.ndarray) -> None:
    """RMSNorm of the rows of ``x`` into ``normed``, ``x_hat = x / rms(x)`` and ``r = 1 / rms(x)`` ``(rows, 1)``."""
    r[...] = 1.0 / np.sqrt(np.vecdot(x, x)[:, None] / x.shape[-1] + eps)  # (rows, 1)
    np.multiply(x, r, out=x_hat)  # (rows, d)
    np.multiply(x_hat, gamma, out=normed)


def _rms_back(dy: np.ndarray, gamma: np.ndarray, x_hat: np.ndarray, r: np.ndarray, g: np.ndarray,
              dx: np.ndarray) -> None:
    """The gradient of :func:`_rms` with respect to its rows into ``dx`` (``g`` is scratch)."""
    np.multiply(dy, gamma, out=g)  # (rows, d)
    np.multiply(x_hat, np.vecdot(g, x_hat)[:, None] / x_hat.shape[-1], out=dx)  # (rows, d): the part along x_hat
    np.subtract(g, dx, out=dx)
    dx *= r


def _gain_gradient(dy: np.ndarray, x_hat: np.ndarray) -> np.ndarray:
    """The gradient of :func:`_rms` with respect to its gain: ``sum over rows of dy x_hat`` ``(d,)``."""
    return np.vecdot(dy.T, x_hat.T)  # (d,)


_POOL: list = []  # one worker thread, made when first needed; the calling thread is the other


def _halves() -> int:
    """Into how many parts the batch is cut: 2 when this process may run on 2 cores or more, else 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 2 if cores >= 2 else 1


def _in_pair(first, second) -> tuple:
    """``(first(), second())``, ``second`` on the worker thread while ``first`` runs on this one.

    numpy lets other threads run during its products and its operations on large arrays, so the two
    share the cores; each writes only its own arrays, so the results do not depend on the timing.
    """
    if _halves() == 1:
        return first(), second()
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnbook-fast-block"))
    later = _POOL[0].submit(second)
    try:
        done = first()
    finally:
        other = later.result()
    return done, other


def _in_halves(work, batch: int) -> None:
    """``work(part)`` on the two halves of the windows ``0 .. batch - 1``, side by side (one call if batch is 1).

    Every operation of ``work`` is row by row (or window by window), and each half writes only its own
    rows, so the result is the same, byte for byte, as one call on the whole batch.
    """
    if batch == 1:
        work(slice(0, 1))
        return
    half = (batch + 1) // 2
    _in_pair(lambda: work(slice(0, half)), lambda: work(slice(half, batch)))


def fast_block_vjp(x: np.ndarray, weights: DecoderBlockWeights, n_heads: int, n_kv_heads: int,
                   frequencies: np.ndarray, eps: float, attention_out: np.ndarray | None = None) -> tuple:
    """:func:`~attnbook.learning.modern_layers.rotary_block_vjp` on ``x`` ``(batch, n, d_model)``, unchecked and fast.

    Parameters
    ----------
    x, weights, n_heads, n_kv_heads, frequencies, eps : ndarray, DecoderBlockWeights, int, int, ndarray, float
        As in the reference, every argument given: ``x`` 3-D, ``frequencies`` ``(d_head / 2,)``.
    attention_out : ndarray, optional
        A C-contiguous ``(batch, n_heads, n, n)`` array of ``x``'s dtype to write the attention weights
        into (the GPT passes its slice of every block's weights); default a new one.

    Returns
    -------
    tuple
        ``(DecoderBlockResult, back)``, ``back(dy) -> (DecoderBlockWeights, dx)``, as the reference.

    Examples
    --------
    >>> from attnbook import init_decoder_block
    >>> x = np.ones((1, 3, 8))                                            # (batch, n, d_model)
    >>> (y, attention), back = fast_block_vjp(x, init_decoder_block(8, 8, 2), 2, 2, np.array([1.0, 0.1]), 1e-6)
    >>> y.shape, attention.shape, bool(np.all(np.triu(attention, 1) == 0))   # causal
    ((1, 3, 8), (1, 2, 3, 3), True)
    """
    batch, n, d = x.shape
    w, ff = weights.attention, weights.feed_forward
    d_head, group = d // n_heads, n_heads // n_kv_heads
    d_kv, scale, dtype = n_kv_heads * d_head, 1.0 / math.sqrt(d // n_heads), x.dtype
    cos, sin, causal = _tables(n, np.asarray(frequencies, dtype=np.float64).tobytes(), dtype.str, group)
    rows = x.reshape(batch * n, d)  # (rows, d)
    d_ff = ff.w_gate.shape[1]
    normed_1, x_hat_1, z, normed_2, x_hat_2, y, qkv, q, k, v, heads, concat, gate_up, sigma, silu, hidden, r = _views(
        dtype, *[(batch * n, d)] * 6, (batch * n, d + 2 * d_kv), (batch, n_kv_heads, group * n, d_head),
        *[(batch, n_kv_heads, n, d_head)] * 2, (batch, n_kv_heads, group * n, d_head), (batch * n, d),
        (batch * n, 2 * d_ff), *[(batch * n, d_ff)] * 3, (2, batch * n, 1))  # the activations the backward pass reads
    shape = (batch, n_kv_heads, group * n, n)
    a = np.empty(shape, dtype) if attention_out is None else attention_out.reshape(shape)  # (batch, h_kv, G n, n)
    w_qkv = np.concatenate([w.w_q, w.w_k, w.w_v], axis=1)  # (d, d + 2 d_kv)
    b_qkv = np.concatenate([w.b_q, w.b_k, w.b_v])  # (d + 2 d_kv,)
    w_gate_up = np.concatenate([ff.w_gate, ff.w_up], axis=1)  # (d, 2 d_ff)

    def grouped(array, part, queries):  # (b n, h d_head) -> queries (b, h_kv, G, n, d_head), keys (b, h_kv, n, d_head)
        b = part.stop - part.start
        if queries:
            return array.reshape(b, n, n_kv_heads, group, d_head).transpose(0, 2, 3, 1, 4)
        return array.reshape(b, n, n_kv_heads, d_head).transpose(0, 2, 1, 3)

    def forward(part: slice) -> None:  # the windows ``part`` of the batch: their rows, heads and weights only
        at, b = slice(part.start * n, part.stop * n), part.stop - part.start  # their rows
        _rms(rows[at], weights.norm_1, eps, normed_1[at], x_hat_1[at], r[0, at])  # (b n, d)
        np.matmul(normed_1[at], w_qkv, out=qkv[at])
        qkv[at] += b_qkv  # (b n, d + 2 d_kv)
        q_part = q[part].reshape(b, n_kv_heads, group, n, d_head)  # (b, h_kv, G, n, d_head)
        _turn(grouped(qkv[at, :d], part, True), cos, sin, out=q_part)
        q_part *= scale  # the scale rides on the queries, as in scaled_dot_product_attention
        _turn(grouped(qkv[at, d:d + d_kv], part, False), cos, sin, out=k[part])
        v[part] = grouped(qkv[at, d + d_kv:], part, False)
        scores = a[part]  # (b, h_kv, G n, n)
        np.matmul(q[part], np.swapaxes(k[part], -1, -2), out=scores)  # the scaled scores
        scores += causal  # masked scores to -inf
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores *= 1.0 / scores.sum(axis=-1, keepdims=True)  # (b, h_kv, G n, n): the attention weights
        np.matmul(scores, v[part], out=heads[part])  # (b, h_kv, G n, d_head)
        grouped(concat[at], part, True)[...] = heads[part].reshape(b, n_kv_heads, group, n, d_head)
        np.matmul(concat[at], w.w_o, out=z[at])
        z[at] += w.b_o
        z[at] += rows[at]  # (b n, d): the first residual
        _rms(z[at], weights.norm_2, eps, normed_2[at], x_hat_2[at], r[1, at])  # (b n, d)
        np.matmul(normed_2[at], w_gate_up, out=gate_up[at])  # (b n, 2 d_ff)
        gate, up, s = gate_up[at, :d_ff], gate_up[at, d_ff:], sigma[at]  # (b n, d_ff) each
        np.multiply(gate, 0.5, out=s)
        np.tanh(s, out=s)
        s += 1.0
        s *= 0.5  # sigma(gate) = (1 + tanh(gate / 2)) / 2
        np.multiply(gate, s, out=silu[at])
        np.multiply(silu[at], up, out=hidden[at])
        np.matmul(hidden[at], ff.w_down, out=y[at])
        y[at] += z[at]  # (b n, d): the second residual

    _in_halves(forward, batch)

    def back(dy):
        check_output_gradient(dy, x.shape, "dy")
        dy = dy.reshape(batch * n, d)  # (rows, d)
        proj, g, dx_norm, dz, dx, d_hidden, slope, d_gate_up, d_heads, d_qkv, dq, dk = _views(
            dtype, (2, batch * n, d), *[(batch * n, d)] * 4, *[(batch * n, d_ff)] * 2, (batch * n, 2 * d_ff),
            (batch * n, d), qkv.shape, q.shape, k.shape)  # scratch; proj[0] and proj[1]: into each norm

        def backward(part: slice) -> None:  # everything row by row (or window by window) of the windows ``part``
            at, b = slice(part.start * n, part.stop * n), part.stop - part.start
            np.matmul(dy[at], ff.w_down.T, out=d_hidden[at])  # (b n, d_ff)
            gate, up, s, sl = gate_up[at, :d_ff], gate_up[at, d_ff:], sigma[at], slope[at]  # (b n, d_ff) each
            np.multiply(d_hidden[at], silu[at], out=d_gate_up[at, d_ff:])  # dU
            np.subtract(1.0, s, out=sl)  # (b n, d_ff): SiLU'(gate) = sigma (1 + gate (1 - sigma))
            sl *= gate
            sl += 1.0
            sl *= s
            sl *= up
            np.multiply(d_hidden[at], sl, out=d_gate_up[at, :d_ff])  # dZ = dH U SiLU'(Z)
            np.matmul(d_gate_up[at], w_gate_up.T, out=proj[1, at])  # (b n, d)
            _rms_back(proj[1, at], weights.norm_2, x_hat_2[at], r[1, at], g[at], dx_norm[at])
            np.add(dy[at], dx_norm[at], out=dz[at])  # (b n, d): the residual passes dy on

            np.matmul(dz[at], w.w_o.T, out=d_heads[at])  # (b n, d): dO of the heads side by side
            d_out = grouped(d_heads[at], part, True).reshape(q[part].shape)  # (b, h_kv, G n, d_head), a copy
            weights_ = a[part]  # (b, h_kv, G n, n)
            grouped(d_qkv[at, d + d_kv:], part, False)[...] = (
                np.swapaxes(weights_, -1, -2) @ d_out)  # dV = A^T dO, summed over the group
            ds = d_out @ np.swapaxes(v[part], -1, -2)  # (b, h_kv, G n, n): dA
            ds -= np.vecdot(ds, weights_)[..., None]
            ds *= weights_  # dS = A (dA - rowsum(A dA)); 0 wherever A is
            np.matmul(ds, k[part], out=dq[part])  # d(q scale), per query head
            dq[part] *= scale
            _turn(dq[part].reshape(b, n_kv_heads, group, n, d_head), cos, -sin,
                  out=grouped(d_qkv[at, :d], part, True))  # turned back
            np.matmul(np.swapaxes(ds, -1, -2), q[part], out=dk[part])  # dK = dS^T (scale Q), summed over the group
            _turn(dk[part], cos, -sin, out=grouped(d_qkv[at, d:d + d_kv], part, False))
            np.matmul(d_qkv[at], w_qkv.T, out=proj[0, at])  # (b n, d)
            _rms_back(proj[0, at], weights.norm_1, x_hat_1[at], r[0, at], g[at], dx_norm[at])
            np.add(dz[at], dx_norm[at], out=dx[at])

        _in_halves(backward, batch)
        # the weight gradients sum over every row: whole products, in two groups of about equal work
        first, second = _in_pair(lambda: (normed_2.T @ d_gate_up, _gain_gradient(proj[1], x_hat_2)),
                                 lambda: (normed_1.T @ d_qkv, concat.T @ dz, hidden.T @ dy,
                                          _gain_gradient(proj[0], x_hat_1), d_qkv.sum(axis=0), dz.sum(axis=0)))
        (dw_gate_up, dgamma_2), (dw_qkv, dw_o, dw_down, dgamma_1, db_qkv, db_o) = first, second
        attention = MultiHeadWeights(dw_qkv[:, :d], dw_qkv[:, d:d + d_kv], dw_qkv[:, d + d_kv:], dw_o,
                                     db_qkv[:d], db_qkv[d:d + d_kv], db_qkv[d + d_kv:], db_o)
        feed = SwiGLUWeights(dw_gate_up[:, :d_ff], dw_gate_up[:, d_ff:], dw_down)
        grads = DecoderBlockWeights(attention, feed, dgamma_1, dgamma_2)
        return grads, dx.reshape(x.shape)

    return DecoderBlockResult(y.reshape(x.shape), a.reshape(batch, n_heads, n, n)), back


def embedding_gradient(tokens: np.ndarray, dx: np.ndarray, vocab_size: int) -> np.ndarray:
    """The gradient of an embedding table ``(V, d)`` that ``tokens`` read: ``one_hot(tokens)^T dx``, one product.

    Parameters
    ----------
    tokens : ndarray of int
        ``(...)`` the ids read, each in ``0 .. V - 1`` (unchecked).
    dx : ndarray
        ``(..., d)`` the gradient of the vectors read.
    vocab_size : int
        ``V``.

    Returns
    -------
    ndarray
        ``(V, d)``: row ``i`` sums ``dx`` over the places that read token ``i``.

    Examples
    --------
    >>> embedding_gradient(np.array([[2, 0, 2]]), np.ones((1, 3, 2)), 3).tolist()    # token 2 twice
    [[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]]
    """
    flat = tokens.reshape(-1)  # (rows,)
    one_hot = (flat[:, None] == np.arange(vocab_size)).astype(dx.dtype)  # (rows, V)
    return one_hot.T @ dx.reshape(len(flat), -1)  # (V, d)
