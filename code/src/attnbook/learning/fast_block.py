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
  shapes, a quarter of the step).

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


def _rms(x: np.ndarray, gamma: np.ndarray, eps: float, normed: np.ndarray, x_hat: np.ndarray) -> np.ndarray:
    """RMSNorm of the rows of ``x`` into ``normed`` (and ``x_hat = x / rms(x)``); returns ``1 / rms`` ``(rows, 1)``."""
    r = 1.0 / np.sqrt(np.vecdot(x, x)[:, None] / x.shape[-1] + eps)  # (rows, 1)
    np.multiply(x, r, out=x_hat)  # (rows, d)
    np.multiply(x_hat, gamma, out=normed)
    return r


def _rms_back(dy: np.ndarray, gamma: np.ndarray, x_hat: np.ndarray, r: np.ndarray, g: np.ndarray,
              dx: np.ndarray) -> np.ndarray:
    """The gradient of :func:`_rms` into ``dx`` (``g`` is scratch); returns ``dgamma`` ``(d,)``."""
    np.multiply(dy, gamma, out=g)  # (rows, d)
    np.multiply(x_hat, np.vecdot(g, x_hat)[:, None] / x_hat.shape[-1], out=dx)  # (rows, d): the part along x_hat
    np.subtract(g, dx, out=dx)
    dx *= r
    return np.vecdot(dy.T, x_hat.T)  # (d,): dgamma = sum over rows of dy x_hat


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
    grouped = (batch, n, n_kv_heads, group, d_head)  # a query row's heads, by key head and place in the group
    rows = x.reshape(batch * n, d)  # (rows, d)
    d_ff = ff.w_gate.shape[1]
    normed_1, x_hat_1, z, normed_2, x_hat_2, qkv, q, k, v, heads, concat, gate_up, sigma, silu, hidden = _views(
        dtype, *[(batch * n, d)] * 5, (batch * n, d + 2 * d_kv), (batch, n_kv_heads, group, n, d_head), (batch, n_kv_heads, n, d_head),
        (batch, n_kv_heads, n, d_head), (batch, n_kv_heads, group * n, d_head), (batch * n, d),
        (batch * n, 2 * d_ff), *[(batch * n, d_ff)] * 3)  # the activations the backward pass reads

    r_1 = _rms(rows, weights.norm_1, eps, normed_1, x_hat_1)  # (rows, 1)
    w_qkv = np.concatenate([w.w_q, w.w_k, w.w_v], axis=1)  # (d, d + 2 d_kv)
    np.matmul(normed_1, w_qkv, out=qkv)
    qkv += np.concatenate([w.b_q, w.b_k, w.b_v])  # (rows, d + 2 d_kv)
    _turn(qkv[:, :d].reshape(grouped).transpose(0, 2, 3, 1, 4), cos, sin, out=q)  # (batch, h_kv, G, n, d_head)
    q *= scale  # the scale rides on the queries, as in scaled_dot_product_attention
    q = q.reshape(batch, n_kv_heads, group * n, d_head)  # (batch, h_kv, G n, d_head)
    _turn(qkv[:, d:d + d_kv].reshape(batch, n, n_kv_heads, d_head).transpose(0, 2, 1, 3), cos, sin, out=k)
    v[...] = qkv[:, d + d_kv:].reshape(batch, n, n_kv_heads, d_head).transpose(0, 2, 1, 3)
    shape = (batch, n_kv_heads, group * n, n)
    a = np.empty(shape, dtype) if attention_out is None else attention_out.reshape(shape)  # (batch, h_kv, G n, n)
    np.matmul(q, np.swapaxes(k, -1, -2), out=a)  # the scaled scores
    a += causal  # masked scores to -inf
    a -= a.max(axis=-1, keepdims=True)
    np.exp(a, out=a)
    a *= 1.0 / a.sum(axis=-1, keepdims=True)  # (batch, h_kv, G n, n): the attention weights
    np.matmul(a, v, out=heads)  # (batch, h_kv, G n, d_head)
    concat.reshape(grouped)[...] = heads.reshape(batch, n_kv_heads, group, n, d_head).transpose(0, 3, 1, 2, 4)
    np.matmul(concat, w.w_o, out=z)
    z += w.b_o
    z += rows  # (rows, d): the first residual

    r_2 = _rms(z, weights.norm_2, eps, normed_2, x_hat_2)  # (rows, 1)
    w_gate_up = np.concatenate([ff.w_gate, ff.w_up], axis=1)  # (d, 2 d_ff)
    np.matmul(normed_2, w_gate_up, out=gate_up)  # (rows, 2 d_ff)
    gate, up = gate_up[:, :d_ff], gate_up[:, d_ff:]  # (rows, d_ff) each
    np.multiply(gate, 0.5, out=sigma)
    np.tanh(sigma, out=sigma)
    sigma += 1.0
    sigma *= 0.5  # sigma(gate) = (1 + tanh(gate / 2)) / 2
    np.multiply(gate, sigma, out=silu)
    np.multiply(silu, up, out=hidden)
    y = z + hidden @ ff.w_down  # (rows, d)

    def back(dy):
        check_output_gradient(dy, x.shape, "dy")
        dy = dy.reshape(batch * n, d)  # (rows, d)
        proj, g, dx_norm, dz, d_hidden, slope, d_gate_up, d_heads, d_qkv, dq, dk = _views(
            dtype, *[(batch * n, d)] * 4, *[(batch * n, d_ff)] * 2, (batch * n, 2 * d_ff), grouped, qkv.shape,
            q.shape, k.shape)  # scratch
        np.matmul(dy, ff.w_down.T, out=d_hidden)  # (rows, d_ff)
        np.multiply(d_hidden, silu, out=d_gate_up[:, d_ff:])  # dU
        np.subtract(1.0, sigma, out=slope)  # (rows, d_ff): SiLU'(gate) = sigma (1 + gate (1 - sigma))
        slope *= gate
        slope += 1.0
        slope *= sigma
        slope *= up
        np.multiply(d_hidden, slope, out=d_gate_up[:, :d_ff])  # dZ = dH U SiLU'(Z)
        dw_gate_up = normed_2.T @ d_gate_up  # (d, 2 d_ff)
        np.matmul(d_gate_up, w_gate_up.T, out=proj)  # (rows, d)
        dgamma_2 = _rms_back(proj, weights.norm_2, x_hat_2, r_2, g, dx_norm)
        np.add(dy, dx_norm, out=dz)  # (rows, d): the residual passes dy on

        np.matmul(dz, w.w_o.T, out=d_heads.reshape(batch * n, d))  # (rows, d): dO of the heads side by side
        d_heads = d_heads.transpose(0, 2, 3, 1, 4).reshape(q.shape)  # (batch, h_kv, G n, d_head), a copy
        d_qkv[:, d + d_kv:].reshape(batch, n, n_kv_heads, d_head).transpose(0, 2, 1, 3)[...] = (
            np.swapaxes(a, -1, -2) @ d_heads)  # dV = A^T dO, summed over the group
        ds = d_heads @ np.swapaxes(v, -1, -2)  # (batch, h_kv, G n, n): dA
        ds -= np.vecdot(ds, a)[..., None]
        ds *= a  # dS = A (dA - rowsum(A dA)); 0 wherever A is
        np.matmul(ds, k, out=dq)  # d(q scale), per query head
        dq *= scale
        _turn(dq.reshape(batch, n_kv_heads, group, n, d_head), cos, -sin,
              out=d_qkv[:, :d].reshape(grouped).transpose(0, 2, 3, 1, 4))  # turned back
        np.matmul(np.swapaxes(ds, -1, -2), q, out=dk)  # dK = dS^T (scale Q), summed over the group
        _turn(dk, cos, -sin, out=d_qkv[:, d:d + d_kv].reshape(batch, n, n_kv_heads, d_head).transpose(0, 2, 1, 3))
        dw_qkv = normed_1.T @ d_qkv  # (d, d + 2 d_kv)
        np.matmul(d_qkv, w_qkv.T, out=proj)  # (rows, d)
        dgamma_1 = _rms_back(proj, weights.norm_1, x_hat_1, r_1, g, dx_norm)
        db_qkv = d_qkv.sum(axis=0)  # (d + 2 d_kv,)
        attention = MultiHeadWeights(dw_qkv[:, :d], dw_qkv[:, d:d + d_kv], dw_qkv[:, d + d_kv:], concat.T @ dz,
                                     db_qkv[:d], db_qkv[d:d + d_kv], db_qkv[d + d_kv:], dz.sum(axis=0))
        feed = SwiGLUWeights(dw_gate_up[:, :d_ff], dw_gate_up[:, d_ff:], hidden.T @ dy)
        grads = DecoderBlockWeights(attention, feed, dgamma_1, dgamma_2)
        return grads, (dz + dx_norm).reshape(x.shape)

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
