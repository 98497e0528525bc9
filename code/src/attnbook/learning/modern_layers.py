"""Backward passes of the pieces of today's decoder: RMSNorm, SwiGLU, rotary positions, grouped-query attention.

In the style of :mod:`attnbook.learning.layers`: each ``*_vjp`` function runs its piece forward with the
package's own forward function (:func:`attnbook.rms_norm`, :func:`attnbook.swiglu_feed_forward`,
:func:`attnbook.apply_rotary`'s kernel, :func:`attnbook.multihead.attend_grouped`), so its output is the
core's, number for number, and returns it with a closure ``back`` that maps the gradient of a scalar
loss with respect to the output to the gradients of the weights (in the weights' NamedTuple) and of the
inputs. The dtype follows the inputs: float32 in, float32 out and float32 gradients.

:func:`rotary_block_vjp` chains them into one pre-norm block of a GPT of today's shape:
``Z = X + Attn(RMS(X))`` with rotary queries and keys, then ``X' = Z + SwiGLU(RMS(Z))``.

>>> import numpy as np
>>> from attnbook import init_decoder_block
>>> x = np.random.default_rng(0).standard_normal((5, 8))              # (n, d_model)
>>> block = init_decoder_block(8, 16, n_heads=4, n_kv_heads=2)
>>> (out, attention), back = rotary_block_vjp(x, block, n_heads=4, n_kv_heads=2)
>>> grads, dx = back(np.ones_like(out))                               # L = sum(out)
>>> grads.attention.w_k.shape, attention.shape, dx.shape
((8, 4), (4, 5, 5), (5, 8))
"""

from __future__ import annotations

import math

import numpy as np

from ..attention import AttentionResult
from ..masks import causal_mask
from ..modern import DecoderBlockResult, DecoderBlockWeights, SwiGLUWeights, rms_norm, swiglu_feed_forward
from ..multihead import MultiHeadWeights, attend_grouped, check_heads, check_kv_heads, merge_heads, split_heads
from ..positional import apply_rotary, rotate, sinusoidal_frequencies
from ..validation import Dims, as_float_array, boundary, check_weights
from .gradients import backpropagate, check_output_gradient, linear_grads, sum_rows, sum_to_shape

__all__ = ["gqa_attention_vjp", "rms_norm_vjp", "rotary_block_vjp", "rotary_vjp", "swiglu_vjp"]


@boundary(rms_norm.check)
def rms_norm_vjp(x, gamma=None, eps: float = 1e-6) -> tuple:
    r"""RMSNorm of the rows of ``x``; ``back(dy)`` returns ``(dx, dgamma)``.

    .. math:: r = \left(\tfrac1d \textstyle\sum_m x_m^2 + \epsilon\right)^{-1/2}, \quad \hat x = r\,x, \quad
              y = \gamma \odot \hat x, \qquad dx = r\left(g - \hat x\,\overline{g \odot \hat x}\right),
              \quad g = \gamma \odot dy

    with the bar the mean over the row, and :math:`d\gamma = \sum dy \odot \hat x` over every row. Layer
    norm's :func:`~attnbook.learning.layers.layer_norm_vjp` also subtracts the mean of ``g``; RMSNorm
    does not centre, so its gradient need not sum to 0.

    Parameters
    ----------
    x, gamma, eps : array_like, array_like, float
        As in :func:`attnbook.rms_norm`: ``(..., d)`` rows, ``(d,)`` gain (default ones), ``1e-6``.

    Returns
    -------
    tuple
        ``(y, back)``: ``y`` ``(..., d)``, equal to :func:`attnbook.rms_norm`, and ``back(dy) -> (dx, dgamma)``.

    Examples
    --------
    >>> y, back = rms_norm_vjp(np.array([[3.0, 4.0]]), np.ones(2), eps=0.0)
    >>> dx, dgamma = back(np.array([[1.0, 0.0]]))
    >>> np.round(dx, 4).tolist(), np.round(dgamma, 4).tolist()
    ([[0.181, -0.1358]], [0.8485, 0.0])
    """
    y = rms_norm.unchecked(x, gamma, eps)  # (..., d): the core's own output
    dtype = np.result_type(x, gamma, np.float32)
    x = x.astype(dtype, copy=False)  # (..., d), as rms_norm computes
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)  # (..., 1)
    x_hat = x * r  # (..., d)

    def back(dy):
        check_output_gradient(dy, y.shape, "dy")
        g = dy * gamma  # (..., d): the gradient reaching x_hat
        dx = r * (g - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))  # (..., d)
        return dx.astype(dtype, copy=False), sum_rows(dy * x_hat).astype(dtype, copy=False)  # (..., d), (d,)

    return y, back


@boundary(swiglu_feed_forward.check)
def swiglu_vjp(x, weights: SwiGLUWeights) -> tuple:
    r"""The SwiGLU network on every position; ``back(dy)`` returns ``(SwiGLUWeights, dx)``.

    .. math:: Z = X W_\text{gate}, \quad U = X W_\text{up}, \quad H = \operatorname{SiLU}(Z) \odot U, \quad
              Y = H W_\text{down}, \qquad dH = dY\, W_\text{down}^\top, \quad dU = dH \odot \operatorname{SiLU}(Z),

    .. math:: dZ = dH \odot U \odot \sigma(Z)\bigl(1 + Z (1 - \sigma(Z))\bigr), \qquad
              dX = dZ\, W_\text{gate}^\top + dU\, W_\text{up}^\top

    the derivative of :math:`\operatorname{SiLU}(z) = z\sigma(z)` being :math:`\sigma(z) + z\sigma(z)(1 - \sigma(z))`;
    :math:`dW_\text{down} = H^\top dY`, :math:`dW_\text{gate} = X^\top dZ`, :math:`dW_\text{up} = X^\top dU`.

    Parameters
    ----------
    x, weights : array_like, SwiGLUWeights
        As in :func:`attnbook.swiglu_feed_forward`: ``(..., n, d_model)`` token vectors and the three matrices.

    Returns
    -------
    tuple
        ``(y, back)``: ``y`` ``(..., n, d_model)``, equal to :func:`attnbook.swiglu_feed_forward`, and
        ``back(dy) -> (grads, dx)`` with ``grads`` a :class:`~attnbook.SwiGLUWeights`.

    Examples
    --------
    >>> ff = SwiGLUWeights(np.eye(2), np.eye(2), np.eye(2))
    >>> y, back = swiglu_vjp(np.array([[1.0, -1.0]]), ff)
    >>> grads, dx = back(np.ones((1, 2)))
    >>> np.round(y, 4).tolist(), np.round(dx, 4).tolist()
    ([[0.7311, 0.2689]], [[1.6587, -0.3413]])
    """
    y = swiglu_feed_forward.unchecked(x, weights)  # (..., n, d_model): the core's own output
    z, u = x @ weights.w_gate, x @ weights.w_up  # (..., n, d_ff) each, as the core computes them
    sigma = 0.5 * (1.0 + np.tanh(0.5 * z))  # (..., n, d_ff): sigma(z), as the core writes it
    silu = z * sigma  # (..., n, d_ff)

    def back(dy):
        check_output_gradient(dy, y.shape, "dy")
        hidden = silu * u  # (..., n, d_ff)
        dhidden, dw_down = linear_grads(hidden, weights.w_down, dy)  # (..., n, d_ff), (d_ff, d_model)
        du = dhidden * silu  # (..., n, d_ff)
        dz = dhidden * u * sigma * (1.0 + z * (1.0 - sigma))  # (..., n, d_ff): through SiLU
        dx_gate, dw_gate = linear_grads(x, weights.w_gate, dz)  # (..., n, d_model), (d_model, d_ff)
        dx_up, dw_up = linear_grads(x, weights.w_up, du)
        return SwiGLUWeights(dw_gate, dw_up, dw_down), dx_gate + dx_up

    return y, back


def _rotary_arguments(x, positions=None, frequencies=None) -> tuple:
    x = as_float_array(x, "x", layout="(..., n, d_head)")  # (..., n, d_head)
    apply_rotary(x, positions, frequencies)  # the core's checks of the positions and frequencies
    n, d_head = x.shape[-2:]
    positions = np.arange(n, dtype=np.float64) if positions is None else np.asarray(positions, dtype=np.float64)
    frequencies = sinusoidal_frequencies(d_head) if frequencies is None else np.asarray(frequencies, dtype=np.float64)
    return x, positions, frequencies


def angles_of(positions: np.ndarray, frequencies: np.ndarray) -> np.ndarray:
    """Unchecked kernel: the angle ``p * theta_i`` of every position and pair, ``(n, d_head / 2)``.

    >>> angles_of(np.arange(2.0), np.array([1.0, 0.5])).tolist()
    [[0.0, 0.0], [1.0, 0.5]]
    """
    return positions[:, None] * frequencies[None, :]  # (n, d_head / 2)


@boundary(_rotary_arguments)
def rotary_vjp(x, positions=None, frequencies=None) -> tuple:
    r"""Rotary positions on the rows of ``x``; ``back(dy)`` turns the gradient back: ``dx = dy R_p``.

    .. math:: y_p = x_p R_p^\top, \qquad dx_p = dy_p\, R_p

    A rotation's transpose is its inverse, so the backward pass is the rotation by :math:`-p\theta_i`
    (the same kernel :func:`attnbook.positional.rotate`); the positions and frequencies are fixed and get
    no gradient. The output has the dtype of ``x``.

    Parameters
    ----------
    x : array_like
        ``(..., n, d_head)`` queries or keys; ``d_head`` even.
    positions : array_like, optional
        ``(n,)``; default ``0, 1, ..., n - 1``.
    frequencies : array_like, optional
        ``(d_head / 2,)``; default ``rotary_frequencies(d_head)``.

    Returns
    -------
    tuple
        ``(y, back)``: ``y`` ``(..., n, d_head)``, equal to :func:`attnbook.apply_rotary`, and ``back(dy) -> dx``.

    Examples
    --------
    >>> y, back = rotary_vjp(np.array([[1.0, 0.0], [1.0, 0.0]]), frequencies=[np.pi / 2])
    >>> np.round(y, 4).tolist(), np.round(back(y), 4).tolist()        # turning back undoes the turn
    ([[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]])
    """
    angles = angles_of(positions, frequencies)  # (n, d_head / 2)
    dtype = np.result_type(x, np.float32)
    y = rotate(x, angles).astype(dtype, copy=False)  # (..., n, d_head): the core's kernel

    def back(dy):
        check_output_gradient(dy, y.shape, "dy")
        return rotate(dy, -angles).astype(dtype, copy=False)  # (..., n, d_head): R_p^T undone

    return y, back


def _gqa_arguments(x, weights: MultiHeadWeights, n_heads: int, n_kv_heads: int | None = None,
                   frequencies=None) -> tuple:
    x = as_float_array(x, "x", layout="(..., n, d_model)")  # (..., n, d_model)
    d_model = x.shape[-1]
    n_heads = check_heads(d_model, n_heads)
    n_kv_heads = n_heads if n_kv_heads is None else check_kv_heads(n_heads, n_kv_heads)
    d_head = d_model // n_heads
    if d_head % 2:
        raise ValueError(f"d_model / n_heads = {d_head} is odd; rotary positions turn pairs of coordinates")
    d_kv = n_kv_heads * d_head
    dims = Dims(d_model=(d_model, f"x has d_model = {d_model}"),
                d_kv=(d_kv, f"the {n_kv_heads} key and value heads need {d_kv} columns"))
    weights = check_weights(weights, MultiHeadWeights, "weights", dims)
    frequencies = sinusoidal_frequencies(d_head) if frequencies is None else as_float_array(frequencies, "frequencies")
    if frequencies.shape != (d_head // 2,):
        raise ValueError(f"frequencies has shape {frequencies.shape}; expected ({d_head // 2},)")
    return x, weights, n_heads, n_kv_heads, frequencies


@boundary(_gqa_arguments)
def gqa_attention_vjp(x, weights: MultiHeadWeights, n_heads: int, n_kv_heads: int | None = None,
                      frequencies=None) -> tuple:
    r"""Causal grouped-query self-attention with rotary queries and keys; ``back(d_out)`` -> ``(MultiHeadWeights, dx)``.

    .. math:: \tilde Q_i = \operatorname{RoPE}(X W_Q^{(i)}), \quad \tilde K_j = \operatorname{RoPE}(X W_K^{(j)}), \quad
              O = \big\Vert_i \operatorname{softmax}_M\!\Big(\tfrac{\tilde Q_i \tilde K_{g(i)}^\top}{\sqrt{d_k}}\Big) V_{g(i)}\; W_O

    with :math:`g(i) = \lfloor i / (h / h_{kv}) \rfloor` the key and value head of query head :math:`i`
    and :math:`M` the causal mask. Backwards: the output projection, the attention VJP of
    :func:`attnbook.learning.gradients.backpropagate` on the grouped layout (a key head's gradient is the
    sum over the query heads that share it), the rotations turned back (:func:`rotary_vjp`), the three
    projections; ``dx`` adds the query, key and value gradients. The biases get their gradients too
    (a model that keeps them at 0 ignores them).

    Parameters
    ----------
    x : array_like
        ``(..., n, d_model)`` the (normalised) residual stream; position ``p`` is row ``p``.
    weights : MultiHeadWeights
        ``w_q``, ``w_o`` ``(d_model, d_model)``; ``w_k``, ``w_v`` ``(d_model, n_kv_heads d_head)``
        (:func:`attnbook.init_multi_head_weights` with ``n_heads`` and ``n_kv_heads``).
    n_heads : int
        Query heads; must divide ``d_model``, and ``d_model / n_heads`` must be even.
    n_kv_heads : int, optional
        Key and value heads; must divide ``n_heads``. Default ``n_heads``.
    frequencies : array_like, optional
        ``(d_head / 2,)`` the rotary frequencies; default ``rotary_frequencies(d_head)``.

    Returns
    -------
    tuple
        ``(result, back)``: an :class:`~attnbook.AttentionResult` (output ``(..., n, d_model)``, weights
        ``(..., n_heads, n, n)``) and ``back(d_out) -> (grads, dx)``, ``grads`` a :class:`~attnbook.MultiHeadWeights`.

    Examples
    --------
    >>> from attnbook import init_multi_head_weights
    >>> x = np.random.default_rng(0).standard_normal((3, 8))              # (n, d_model)
    >>> w = init_multi_head_weights(8, n_heads=4, n_kv_heads=1)           # multi-query attention
    >>> (out, attention), back = gqa_attention_vjp(x, w, 4, 1)
    >>> grads, dx = back(np.ones_like(out))
    >>> grads.w_v.shape, bool(attention[0, 0, 1] == 0)                    # causal: 0 cannot see 1
    ((8, 2), True)
    """
    w, n = weights, x.shape[-2]
    d_head = x.shape[-1] // n_heads
    dtype = np.result_type(x, *w, np.float32)
    q = split_heads.unchecked((x @ w.w_q + w.b_q).astype(dtype, copy=False), n_heads)  # (..., h, n, d_head)
    k = split_heads.unchecked((x @ w.w_k + w.b_k).astype(dtype, copy=False), n_kv_heads)  # (..., h_kv, n, d_head)
    v = split_heads.unchecked((x @ w.w_v + w.b_v).astype(dtype, copy=False), n_kv_heads)  # (..., h_kv, n, d_head)
    q_rot, q_back = rotary_vjp.unchecked(q, np.arange(n, dtype=np.float64), frequencies)  # (..., h, n, d_head)
    k_rot, k_back = rotary_vjp.unchecked(k, np.arange(n, dtype=np.float64), frequencies)  # (..., h_kv, n, d_head)
    scale, mask = 1.0 / math.sqrt(d_head), causal_mask(n)  # mask (n, n)
    heads, attention = attend_grouped(q_rot, k_rot, v, mask, scale)  # (..., h, n, d_head), (..., h, n, n)
    concat = merge_heads.unchecked(heads)  # (..., n, d_model)
    output = concat @ w.w_o + w.b_o  # (..., n, d_model)

    def back(d_out):
        check_output_gradient(d_out, output.shape, "d_out")
        d_concat, dw_o = linear_grads(concat, w.w_o, d_out)  # (..., n, d_model), (d_model, d_model)
        *lead, h, _, _ = q.shape
        group = h // n_kv_heads
        grouped = (*lead, n_kv_heads, group, n, d_head)  # the layout of attend_grouped
        q_g = q_rot.reshape(grouped)  # (..., h_kv, G, n, d_head)
        k_g, v_g = k_rot[..., :, None, :, :], v[..., :, None, :, :]  # (..., h_kv, 1, n, d_head)
        a_g = attention.reshape(*lead, n_kv_heads, group, n, n)  # (..., h_kv, G, n, n)
        g_g = split_heads.unchecked(d_concat, n_heads).reshape(grouped)  # (..., h_kv, G, n, d_head)
        (dq, dk, dv), _ = backpropagate(q_g, k_g, v_g, a_g, g_g, mask, scale)  # dk, dv summed over G
        dq = q_back(dq.reshape(q.shape))  # (..., h, n, d_head): the rotation turned back
        dk = k_back(dk[..., :, 0, :, :])  # (..., h_kv, n, d_head)
        dq, dk, dv = (merge_heads.unchecked(g) for g in (dq, dk, dv[..., :, 0, :, :]))  # (..., n, d_model | d_kv)
        dx_q, dw_q = linear_grads(x, w.w_q, dq)  # (..., n, d_model), (d_model, d_model)
        dx_k, dw_k = linear_grads(x, w.w_k, dk)  # (..., n, d_model), (d_model, d_kv)
        dx_v, dw_v = linear_grads(x, w.w_v, dv)
        grads = MultiHeadWeights(dw_q, dw_k, dw_v, dw_o, sum_rows(dq), sum_rows(dk), sum_rows(dv),
                                 sum_rows(d_out))
        return grads, (dx_q + dx_k + dx_v).astype(dtype, copy=False)

    return AttentionResult(output, attention), back


def _block_arguments(x, weights: DecoderBlockWeights, n_heads: int, n_kv_heads: int | None = None,
                     frequencies=None, eps: float = 1e-6) -> tuple:
    if not isinstance(weights, DecoderBlockWeights):
        raise TypeError(f"weights must be a DecoderBlockWeights, got {type(weights).__name__}")
    x, attention, n_heads, n_kv_heads, frequencies = _gqa_arguments(x, weights.attention, n_heads, n_kv_heads,
                                                                    frequencies)
    swiglu_feed_forward.check(x, weights.feed_forward)
    rms_norm.check(x, weights.norm_1, eps)
    rms_norm.check(x, weights.norm_2, eps)
    return x, weights, n_heads, n_kv_heads, frequencies, eps


@boundary(_block_arguments)
def rotary_block_vjp(x, weights: DecoderBlockWeights, n_heads: int, n_kv_heads: int | None = None,
                     frequencies=None, eps: float = 1e-6) -> tuple:
    r"""One pre-norm block of a GPT of today's shape; ``back(dy)`` returns ``(DecoderBlockWeights, dx)``.

    .. math:: Z = X + \operatorname{Attn}_\text{RoPE, GQA}(\operatorname{RMS}_1(X)), \quad
              Y = Z + \operatorname{SwiGLU}(\operatorname{RMS}_2(Z)), \qquad
              dZ = dY + \operatorname{RMS}_2\text{-VJP}(\operatorname{SwiGLU-VJP}(dY)), \quad
              dX = dZ + \operatorname{RMS}_1\text{-VJP}(\operatorname{Attn-VJP}(dZ))

    :func:`attnbook.decoder_block` (pre-norm) with rotary queries and keys; with every position 0 (no
    turn) the two are equal. The residual stream passes each gradient on unchanged.

    Parameters
    ----------
    x : array_like
        ``(..., n, d_model)`` the residual stream.
    weights : DecoderBlockWeights
        See :func:`attnbook.init_decoder_block`.
    n_heads, n_kv_heads : int
        Query heads, and key and value heads (default ``n_heads``), as in :func:`gqa_attention_vjp`.
    frequencies : array_like, optional
        ``(d_head / 2,)`` the rotary frequencies.
    eps : float, optional
        The ``eps`` of both RMSNorms. Default ``1e-6``.

    Returns
    -------
    tuple
        ``(result, back)``: a :class:`~attnbook.DecoderBlockResult` and ``back(dy) -> (grads, dx)``.

    Examples
    --------
    >>> from attnbook import init_decoder_block
    >>> x = np.random.default_rng(0).standard_normal((2, 4, 8)).astype(np.float32)   # (batch, n, d_model)
    >>> block = init_decoder_block(8, 16, n_heads=2)
    >>> block = type(block)(*(np.asarray(b, np.float32) if isinstance(b, np.ndarray) else
    ...                       type(b)(*(a.astype(np.float32) for a in b)) for b in block))
    >>> (out, _), back = rotary_block_vjp(x, block, n_heads=2)
    >>> grads, dx = back(np.ones_like(out))
    >>> out.dtype, dx.dtype, grads.feed_forward.w_up.dtype                # float32 through and through
    (dtype('float32'), dtype('float32'), dtype('float32'))
    """
    w = weights
    normed_1, norm_1_back = rms_norm_vjp.unchecked(x, w.norm_1, eps)  # (..., n, d_model)
    (attended, attention), attention_back = gqa_attention_vjp.unchecked(normed_1, w.attention, n_heads, n_kv_heads,
                                                                         frequencies)  # (..., n, d), (..., h, n, n)
    z = x + attended  # (..., n, d_model): the residual stream is never normalised
    normed_2, norm_2_back = rms_norm_vjp.unchecked(z, w.norm_2, eps)  # (..., n, d_model)
    fed, feed_back = swiglu_vjp.unchecked(normed_2, w.feed_forward)  # (..., n, d_model)
    y = z + fed  # (..., n, d_model)

    def back(dy):
        check_output_gradient(dy, y.shape, "dy")
        d_feed, d_normed_2 = feed_back(dy)
        d_z_norm, dgamma_2 = norm_2_back(d_normed_2)
        dz = dy + d_z_norm  # (..., n, d_model): the residual passes dy on
        d_attention, d_normed_1 = attention_back(dz)
        d_x_norm, dgamma_1 = norm_1_back(d_normed_1)
        return DecoderBlockWeights(d_attention, d_feed, dgamma_1, dgamma_2), sum_to_shape(dz + d_x_norm, x.shape)

    return DecoderBlockResult(y, attention), back
