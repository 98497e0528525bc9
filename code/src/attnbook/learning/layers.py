"""Backward passes of every layer of a Transformer, in the style of ``jax.vjp``: the forward result and ``back``.

Each ``*_vjp`` function takes its layer's arguments (documented by the layer), runs it forward with the
package's kernels (its output equals the layer's) and returns it with a closure ``back``: from the gradient
of a scalar loss with respect to the output, the gradients of the parameters (in the NamedTuple type of the
weights) and of the inputs. Arguments are checked once, with the layer's check; ``.unchecked`` skips it.

>>> import numpy as np
>>> from attnbook import init_encoder_layer
>>> x = np.random.default_rng(0).standard_normal((3, 4))              # (n, d_model)
>>> (out, attention), back = encoder_layer_vjp(x, init_encoder_layer(4, 8, seed=0), n_heads=2)
>>> grads, dx = back(np.ones_like(out))                               # L = sum(out)
>>> grads.feed_forward.w_1.shape, dx.shape
((4, 8), (3, 4))
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..attention import AttentionResult, scaled_dot_product_attention
from ..multihead import MultiHeadWeights, merge_heads, multi_head_attention, split_heads
from ..transformer import (
    DecoderLayerResult,
    DecoderLayerWeights,
    EncoderLayerResult,
    EncoderLayerWeights,
    FeedForwardWeights,
    decoder_layer,
    encoder_layer,
    feed_forward,
    layer_norm,
    standard_normal_cdf,
)
from ..recent.gated import GatedAttentionResult
from ..validation import Array, Norm, as_float_array, boundary
from .gradients import backpropagate, check_output_gradient, linear_grads, sum_rows, sum_to_shape

__all__ = [
    "decoder_layer_vjp",
    "embedding_vjp",
    "encoder_layer_vjp",
    "feed_forward_vjp",
    "GatedEncoderLayerWeights",
    "gated_encoder_layer_vjp",
    "gated_self_attention_vjp",
    "layer_norm_vjp",
    "multi_head_vjp",
    "tied_logits_vjp",
]


def _table(table) -> np.ndarray:
    table = as_float_array(table, "table")  # (vocab, d_model)
    if table.ndim != 2:
        raise ValueError(f"table has shape {table.shape}; expected (vocab, d_model)")
    return table


def _embedding_arguments(table, tokens) -> tuple:
    table, tokens = _table(table), np.asarray(tokens)  # (vocab, d_model), (...)
    if tokens.dtype.kind not in "iu":
        raise TypeError(f"tokens has dtype {tokens.dtype}; expected integer token ids")
    outside = (tokens < 0) | (tokens >= table.shape[0])  # (...)
    if outside.any():
        raise ValueError(f"tokens contains the id {int(tokens[outside].flat[0])}, outside 0 .. {table.shape[0] - 1} "
                         f"(table has {table.shape[0]} rows)")
    return table, tokens


@boundary(_embedding_arguments)
def embedding_vjp(table, tokens) -> tuple:
    r"""Look up the rows of ``table`` for ``tokens``; ``back(dx)`` scatter-adds the gradient into ``dtable``.

    .. math:: x_{\dots} = E_{t_{\dots}}, \qquad dE_j = \sum_{\text{positions with } t = j} dx

    Parameters
    ----------
    table : array_like
        ``(vocab, d_model)`` the embedding matrix ``E``.
    tokens : array_like of int
        ``(...)`` token ids in ``0 .. vocab - 1``.

    Returns
    -------
    tuple
        ``(x, back)``: the embeddings ``(..., d_model)`` and ``back(dx) -> dtable`` ``(vocab, d_model)``.

    Examples
    --------
    >>> x, back = embedding_vjp(np.eye(3), np.array([2, 0, 2]))
    >>> x.tolist()
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    >>> back(np.ones((3, 3))).tolist()                                  # token 2 occurs twice
    [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [2.0, 2.0, 2.0]]
    >>> embedding_vjp(np.eye(3), np.array([3]))
    Traceback (most recent call last):
    ...
    ValueError: tokens contains the id 3, outside 0 .. 2 (table has 3 rows)
    """
    x = table[tokens]  # (..., d_model)

    def back(dx):
        check_output_gradient(dx, x.shape, "dx")
        dtable = np.zeros(table.shape, dtype=np.result_type(table, dx))  # (vocab, d_model)
        np.add.at(dtable, tokens, dx)  # row t_i += dx_i, repeated tokens accumulate
        return dtable

    return x, back


def _tied_arguments(x, table) -> tuple:
    x, table = as_float_array(x, "x", layout="(..., d_model)"), _table(table)  # (..., d_model), (vocab, d_model)
    if table.shape[1] != x.shape[-1]:
        raise ValueError(f"x has shape {x.shape} but table has shape {table.shape}; both need d_model = "
                         f"{x.shape[-1]} columns")
    return x, table


@boundary(_tied_arguments)
def tied_logits_vjp(x, table) -> tuple:
    r"""Logits from the embedding matrix itself (tied weights): ``x E^T``; ``back`` returns ``(dx, dE)``.

    .. math:: Z = X E^\top, \qquad dX = dZ\, E, \qquad dE = \sum_{\text{rows}} dZ^\top X

    The same ``E`` embeds the input tokens (:func:`embedding_vjp`); the model adds the two ``dE``.

    Parameters
    ----------
    x : array_like
        ``(..., d_model)`` the final hidden states.
    table : array_like
        ``(vocab, d_model)`` the embedding matrix ``E``.

    Returns
    -------
    tuple
        ``(logits, back)``: ``(..., vocab)`` and ``back(dlogits) -> (dx, dtable)``.

    Examples
    --------
    >>> logits, back = tied_logits_vjp(np.array([[1.0, 2.0]]), np.eye(2))
    >>> logits.tolist(), [g.tolist() for g in back(np.array([[1.0, 0.0]]))]
    ([[1.0, 2.0]], [[[1.0, 0.0]], [[1.0, 2.0], [0.0, 0.0]]])
    """
    logits = x @ table.T  # (..., vocab)

    def back(dlogits):
        check_output_gradient(dlogits, logits.shape, "dlogits")
        dx, dtable_t = linear_grads(x, table.T, dlogits)  # (..., d_model), (d_model, vocab)
        return dx, dtable_t.T  # (..., d_model), (vocab, d_model)

    return logits, back


@boundary(layer_norm.check)
def layer_norm_vjp(x, gamma, beta, eps: float = 1e-5) -> tuple:
    r"""Layer norm of the rows of ``x``; ``back(dy)`` returns ``(dx, dgamma, dbeta)``.

    .. math:: \hat x = \frac{x - \mu}{\sigma}, \quad y = \gamma \odot \hat x + \beta, \qquad
              dx = \frac{1}{\sigma}\left(g - \overline{g} - \hat x\, \overline{g \odot \hat x}\right),
              \quad g = \gamma \odot dy

    with :math:`\sigma = \sqrt{\operatorname{var}(x) + \epsilon}` and bars the means over the row;
    :math:`d\gamma = \sum dy \odot \hat x` and :math:`d\beta = \sum dy` over every row.

    Parameters
    ----------
    x, gamma, beta, eps
        As in :func:`attnbook.layer_norm`.

    Returns
    -------
    tuple
        ``(y, back)``: ``y`` ``(..., d)``, equal to :func:`attnbook.layer_norm`, and
        ``back(dy) -> (dx, dgamma, dbeta)``.

    See Also
    --------
    attnbook.layer_norm

    Examples
    --------
    >>> y, back = layer_norm_vjp(np.array([[1.0, 2.0, 3.0]]), np.ones(3), np.zeros(3))
    >>> dx, dgamma, dbeta = back(np.array([[1.0, 0.0, 0.0]]))
    >>> np.round(dx, 4).tolist(), dbeta.tolist()
    ([[0.2041, -0.4082, 0.2041]], [1.0, 0.0, 0.0])
    """
    y = layer_norm.unchecked(x, gamma, beta, eps)  # (..., d): the layer's own output
    x = x.astype(np.result_type(x, np.float32), copy=False)  # (..., d), as layer_norm computes
    std = np.sqrt(x.var(axis=-1, keepdims=True) + eps)  # (..., 1)
    x_hat = (x - x.mean(axis=-1, keepdims=True)) / std  # (..., d)

    def back(dy):
        check_output_gradient(dy, y.shape, "dy")
        g = dy * gamma  # (..., d): the gradient reaching x_hat
        dx = (g - g.mean(axis=-1, keepdims=True)
              - x_hat * (g * x_hat).mean(axis=-1, keepdims=True)) / std  # (..., d)
        return dx, sum_rows(dy * x_hat), sum_rows(dy)  # (..., d), (d,), (d,)

    return y, back


@boundary(feed_forward.check)
def feed_forward_vjp(x, weights: FeedForwardWeights, activation: str = "relu") -> tuple:
    r"""The feed-forward network on every position; ``back(dy)`` returns ``(FeedForwardWeights, dx)``.

    .. math:: H = \max(0, X W_1 + b_1), \quad Y = H W_2 + b_2, \qquad
              dH = dY\, W_2^\top, \quad dP = dH \odot [H > 0], \quad dX = dP\, W_1^\top

    and :math:`dW_2 = H^\top dY`, :math:`dW_1 = X^\top dP`, :math:`db_2`, :math:`db_1` the sums of
    :math:`dY`, :math:`dP` over every row. With GELU, :math:`H = P \Phi(P)` for :math:`P = X W_1 + b_1`,
    and :math:`dP = dH \odot (\Phi(P) + P \varphi(P))`.

    Parameters
    ----------
    x, weights, activation
        As in :func:`attnbook.feed_forward`.

    Returns
    -------
    tuple
        ``(y, back)``: ``y`` ``(..., n, d_model)``, equal to :func:`attnbook.feed_forward`, and
        ``back(dy) -> (grads, dx)`` with ``grads`` a :class:`~attnbook.FeedForwardWeights`.

    Examples
    --------
    >>> ff = FeedForwardWeights(np.eye(2), np.zeros(2), np.eye(2), np.zeros(2))
    >>> y, back = feed_forward_vjp(np.array([[1.0, -1.0]]), ff)
    >>> grads, dx = back(np.ones((1, 2)))
    >>> y.tolist(), dx.tolist(), grads.b_1.tolist()                    # the negative unit passes nothing
    ([[1.0, 0.0]], [[1.0, 0.0]], [1.0, 0.0])
    """
    pre = x @ weights.w_1 + weights.b_1  # (..., n, d_ff)
    if activation == "relu":
        hidden = np.maximum(pre, 0)  # (..., n, d_ff)
        slope = hidden > 0  # (..., n, d_ff): the ReLU's derivative
    else:
        cdf = standard_normal_cdf(pre)  # (..., n, d_ff): Phi(pre)
        hidden = pre * cdf  # (..., n, d_ff): GELU, as gelu computes it
        slope = cdf + pre * np.exp(-pre * pre / 2) / math.sqrt(2 * math.pi)  # (..., n, d_ff): Phi + x phi
    y = hidden @ weights.w_2 + weights.b_2  # (..., n, d_model), as feed_forward computes it

    def back(dy):
        check_output_gradient(dy, y.shape, "dy")
        dhidden, dw_2 = linear_grads(hidden, weights.w_2, dy)  # (..., n, d_ff), (d_ff, d_model)
        dpre = dhidden * slope  # (..., n, d_ff): through the activation
        dx, dw_1 = linear_grads(x, weights.w_1, dpre)  # (..., n, d_model), (d_model, d_ff)
        return FeedForwardWeights(dw_1, sum_rows(dpre), dw_2, sum_rows(dy)), dx

    return y, back


def _multi_head_arguments(query, key, value, weights: MultiHeadWeights, n_heads: int, mask=None) -> tuple:
    return multi_head_attention.check(query, key, value, weights, n_heads, mask)[:6]  # every head its own keys


@boundary(_multi_head_arguments)
def multi_head_vjp(query, key, value, weights: MultiHeadWeights, n_heads: int, mask=None) -> tuple:
    r"""Multi-head attention; ``back(d_output)`` returns ``(MultiHeadWeights, dquery, dkey, dvalue)``.

    .. math:: dW_O = C^\top dO, \quad dC = dO\, W_O^\top, \quad
              (dQ_i, dK_i, dV_i) = \operatorname{Attention-VJP}(dC_i), \quad
              dX_q = dQ\, W_Q^\top, \; dX_k = dK\, W_K^\top, \; dX_v = dV\, W_V^\top

    with :math:`C` the concatenated heads and :math:`dC_i` its slice of head :math:`i`. Self-attention
    adds ``dquery + dkey + dvalue``.

    Parameters
    ----------
    query, key, value, weights, n_heads, mask
        As in :func:`attnbook.multi_head_attention` (every head its own keys and values).

    Returns
    -------
    tuple
        ``(result, back)``: the :class:`~attnbook.AttentionResult` of
        :func:`attnbook.multi_head_attention` (equal to it) and
        ``back(d_output) -> (grads, dquery, dkey, dvalue)``, ``grads`` a :class:`~attnbook.MultiHeadWeights`.

    See Also
    --------
    attnbook.multi_head_attention, attnbook.learning.gradients.attention_backward

    Examples
    --------
    >>> from attnbook import causal_mask, init_multi_head_weights
    >>> x = np.random.default_rng(0).standard_normal((3, 4))              # (n, d_model)
    >>> (out, attention), back = multi_head_vjp(x, x, x, init_multi_head_weights(4), 2, mask=causal_mask(3))
    >>> grads, dq, dk, dv = back(np.ones_like(out))
    >>> grads.w_o.shape, (dq + dk + dv).shape                          # self-attention: x gets the sum
    ((4, 4), (3, 4))
    """
    w, split = weights, split_heads.unchecked
    projected = [x @ w_x + b_x for x, w_x, b_x in ((query, w.w_q, w.b_q), (key, w.w_k, w.b_k), (value, w.w_v, w.b_v))]
    dtype = np.result_type(*projected, np.float32)  # scores in at least float32, as in attention
    q, k, v = (split(p.astype(dtype, copy=False), n_heads) for p in projected)  # (..., h, n, d_head) each
    scale = 1.0 / math.sqrt(q.shape[-1])
    heads, attention = scaled_dot_product_attention.unchecked(q, k, v, mask, scale)  # (..., h, n_q, d_head)
    concat = merge_heads.unchecked(heads)  # (..., n_q, d_model)
    output = concat @ w.w_o + w.b_o  # (..., n_q, d_model), as multi_head_attention computes it

    def back(d_output):
        check_output_gradient(d_output, output.shape, "d_output")
        d_concat, dw_o = linear_grads(concat, w.w_o, d_output)  # (..., n_q, d_model), (d_model, d_model)
        (dq, dk, dv), _ = backpropagate(q, k, v, attention, split(d_concat, n_heads), mask,
                                        scale)  # each (..., h, n, d_head), summed to the shape of q, k, v
        dq, dk, dv = (merge_heads.unchecked(g) for g in (dq, dk, dv))  # (..., n_q | n_k, d_model)
        dquery, dw_q = linear_grads(query, w.w_q, dq)  # (..., n_q, d_model), (d_model, d_model)
        dkey, dw_k = linear_grads(key, w.w_k, dk)  # (..., n_k, d_model), (d_model, d_model)
        dvalue, dw_v = linear_grads(value, w.w_v, dv)  # (..., n_k, d_model), (d_model, d_model)
        grads = MultiHeadWeights(dw_q, dw_k, dw_v, dw_o, sum_rows(dq), sum_rows(dk), sum_rows(dv),
                                 sum_rows(d_output))
        return grads, dquery, dkey, dvalue

    return AttentionResult(output, attention), back


@boundary(encoder_layer.check)
def encoder_layer_vjp(x, weights: EncoderLayerWeights, n_heads: int, mask=None, activation: str = "relu",
                      eps: float = 1e-5) -> tuple:
    r"""One post-norm encoder layer; ``back(dy)`` returns ``(EncoderLayerWeights, dx)``.

    .. math:: X' = \operatorname{LN}_1(X + \operatorname{MHA}(X, X, X)), \quad
              Y = \operatorname{LN}_2(X' + \operatorname{FFN}(X')), \qquad
              dX' = dS_2 + \operatorname{FFN-VJP}(dS_2), \quad
              dX = dS_1 + dQ + dK + dV

    with :math:`dS_2 = \operatorname{LN}_2\text{-VJP}(dY)`, :math:`dS_1 = \operatorname{LN}_1\text{-VJP}(dX')`
    and :math:`(dQ, dK, dV)` the input gradients of the self-attention at :math:`dS_1`. With a causal
    mask it is the block of a decoder-only (GPT-style) model.

    Parameters
    ----------
    x, weights, n_heads, mask, activation, eps
        As in :func:`attnbook.encoder_layer`.

    Returns
    -------
    tuple
        ``(result, back)``: the :class:`~attnbook.EncoderLayerResult` of :func:`attnbook.encoder_layer`
        (equal to it) and ``back(dy) -> (grads, dx)``, ``grads`` an :class:`~attnbook.EncoderLayerWeights`.

    Examples
    --------
    >>> from attnbook import causal_mask, init_encoder_layer
    >>> x = np.random.default_rng(0).standard_normal((3, 4))              # (n, d_model)
    >>> (out, attention), back = encoder_layer_vjp(x, init_encoder_layer(4, 8), 2, mask=causal_mask(3))
    >>> grads, dx = back(np.arange(12.0).reshape(3, 4))                  # L = sum(out * dy)
    >>> [g.shape for g in grads.norm_2], dx.shape
    ([(4,), (4,)], (3, 4))
    """
    (attended, attention), attention_back = multi_head_vjp.unchecked(x, x, x, weights.self_attention, n_heads,
                                                                      mask)  # (..., n, d_model), (..., h, n, n)
    y, rest_back = post_norm_rest(x, attended, weights, activation, eps)  # (..., n, d_model)

    def back(dy):
        ds_1, d_feed, norm_1, norm_2 = rest_back(dy)  # ds_1: (..., n, d_model)
        d_attention, dq, dk, dv = attention_back(ds_1)
        grads = EncoderLayerWeights(d_attention, d_feed, norm_1, norm_2)
        dx = sum_to_shape(ds_1, x.shape) + dq + dk + dv  # (..., n, d_model): x is the residual, query, key and value
        return grads, dx

    return EncoderLayerResult(y, attention), back


def post_norm_rest(x: np.ndarray, attended: np.ndarray, weights, activation: str, eps: float) -> tuple:
    """Unchecked kernel: a post-norm layer after its self-attention; ``back(dy) -> (ds_1, d_feed, norm_1, norm_2)``.

    ``ds_1`` is the gradient of ``x + attended``, ``d_feed`` the feed-forward weights', ``norm_1`` and
    ``norm_2`` the ``(dgamma, dbeta)`` of the two layer norms.

    >>> from attnbook import init_encoder_layer
    >>> y, back = post_norm_rest(np.eye(2), np.zeros((2, 2)), init_encoder_layer(2, 4), "relu", 1e-5)
    >>> back(np.ones((2, 2)))[0].shape
    (2, 2)
    """
    x_1, norm_1_back = layer_norm_vjp.unchecked(x + attended, *weights.norm_1, eps)  # (..., n, d_model)
    fed, feed_back = feed_forward_vjp.unchecked(x_1, weights.feed_forward, activation)  # (..., n, d_model)
    y, norm_2_back = layer_norm_vjp.unchecked(x_1 + fed, *weights.norm_2, eps)  # (..., n, d_model)

    def back(dy):
        ds_2, dgamma_2, dbeta_2 = norm_2_back(dy)  # (..., n, d_model)
        d_feed, dx_1 = feed_back(ds_2)
        ds_1, dgamma_1, dbeta_1 = norm_1_back(ds_2 + dx_1)  # the residual passes ds_2 on
        return ds_1, d_feed, (dgamma_1, dbeta_1), (dgamma_2, dbeta_2)

    return y, back


@boundary(decoder_layer.check)
def decoder_layer_vjp(y, memory, weights: DecoderLayerWeights, n_heads: int, memory_mask=None) -> tuple:
    r"""One post-norm decoder layer; ``back(dout)`` returns ``(DecoderLayerWeights, dy, dmemory)``.

    .. math:: Y_1 = \operatorname{LN}_1(Y + \operatorname{MHA}_{\text{causal}}(Y, Y, Y)), \quad
              Y_2 = \operatorname{LN}_2(Y_1 + \operatorname{MHA}(Y_1, M, M)), \quad
              Y_3 = \operatorname{LN}_3(Y_2 + \operatorname{FFN}(Y_2)), \qquad
              dM = dK_\text{cross} + dV_\text{cross}

    Each sub-layer sends its gradient back as in :func:`encoder_layer_vjp`; the cross-attention's key
    and value gradients go to the memory :math:`M`.

    Parameters
    ----------
    y, memory, weights, n_heads, memory_mask
        As in :func:`attnbook.decoder_layer`.

    Returns
    -------
    tuple
        ``(result, back)``: the :class:`~attnbook.DecoderLayerResult` of :func:`attnbook.decoder_layer`
        (equal to it) and ``back(dout) -> (grads, dy, dmemory)``, ``grads`` a
        :class:`~attnbook.DecoderLayerWeights`.

    Examples
    --------
    >>> from attnbook import init_decoder_layer
    >>> rng = np.random.default_rng(0)
    >>> y, memory = rng.standard_normal((2, 4)), rng.standard_normal((3, 4))
    >>> result, back = decoder_layer_vjp(y, memory, init_decoder_layer(4, 8), n_heads=2)
    >>> grads, dy, dmemory = back(np.ones_like(result.output))
    >>> grads.cross_attention.w_k.shape, dy.shape, dmemory.shape
    ((4, 4), (2, 4), (3, 4))
    """
    mha, norm = multi_head_vjp.unchecked, layer_norm_vjp.unchecked
    future = np.tri(y.shape[-2], dtype=bool)  # (n_t, n_t): the causal mask, True on and below the diagonal
    (attended, self_weights), self_back = mha(y, y, y, weights.self_attention, n_heads,
                                              future)  # (..., n_t, d), (..., h, n_t, n_t)
    y_1, norm_1_back = norm(y + attended, *weights.norm_1)  # (..., n_t, d_model)
    (crossed, cross_weights), cross_back = mha(y_1, memory, memory, weights.cross_attention, n_heads,
                                               memory_mask)  # (..., n_t, d), (..., h, n_t, n_s)
    y_2, norm_2_back = norm(y_1 + crossed, *weights.norm_2)  # (..., n_t, d_model)
    fed, feed_back = feed_forward_vjp.unchecked(y_2, weights.feed_forward)  # (..., n_t, d_model)
    y_3, norm_3_back = norm(y_2 + fed, *weights.norm_3)  # (..., n_t, d_model)

    def back(dout):
        check_output_gradient(dout, y_3.shape, "dout")
        ds_3, dgamma_3, dbeta_3 = norm_3_back(dout)  # (..., n_t, d_model)
        d_feed, dy_2 = feed_back(ds_3)
        ds_2, dgamma_2, dbeta_2 = norm_2_back(ds_3 + dy_2)
        d_cross, dq_cross, dk_cross, dv_cross = cross_back(ds_2)
        ds_1, dgamma_1, dbeta_1 = norm_1_back(ds_2 + dq_cross)  # (..., n_t, d_model)
        d_self, dq, dk, dv = self_back(ds_1)
        grads = DecoderLayerWeights(d_self, d_cross, d_feed, (dgamma_1, dbeta_1), (dgamma_2, dbeta_2),
                                    (dgamma_3, dbeta_3))
        dy = sum_to_shape(ds_1, y.shape) + dq + dk + dv  # (..., n_t, d_model): the residual and the three uses
        return grads, dy, dk_cross + dv_cross  # (..., n_t, d_model), (..., n_s, d_model)

    return DecoderLayerResult(y_3, self_weights, cross_weights), back


class GatedEncoderLayerWeights(NamedTuple):
    """Weights of a post-norm encoder layer whose self-attention has an output gate (Qiu et al., 2025).

    Attributes
    ----------
    self_attention, feed_forward, norm_1, norm_2
        As in :class:`attnbook.EncoderLayerWeights`.
    w_gate : ndarray
        ``(d_model, d_model)`` the gates' logits ``x W_G``, head by head (the columns of head ``i`` are
        ``i d_head .. (i + 1) d_head - 1``, as those of ``W_Q``); no bias.

    Examples
    --------
    >>> from attnbook import init_encoder_layer
    >>> layer = GatedEncoderLayerWeights(*init_encoder_layer(4, 8), np.zeros((4, 4)))
    >>> layer.w_gate.shape, layer.norm_1[0].shape
    ((4, 4), (4,))
    """

    self_attention: MultiHeadWeights
    feed_forward: FeedForwardWeights
    norm_1: Norm["d_model"]  # (gamma, beta) after attention
    norm_2: Norm["d_model"]  # after the feed-forward network
    w_gate: Array["d_model, d_model"]  # the gates' logits, head by head


def _checked_gate(w_gate, d_model: int) -> np.ndarray:
    w_gate = as_float_array(w_gate, "w_gate")  # (d_model, d_model)
    if w_gate.shape != (d_model, d_model):
        raise ValueError(f"w_gate has shape {w_gate.shape} but x has d_model = {d_model}; "
                         f"expected ({d_model}, {d_model})")
    return w_gate


def _gated_attention_arguments(x, weights: MultiHeadWeights, w_gate, n_heads: int, mask=None) -> tuple:
    x, _, _, weights, n_heads, mask = _multi_head_arguments(x, x, x, weights, n_heads, mask)
    return x, weights, _checked_gate(w_gate, x.shape[-1]), n_heads, mask


@boundary(_gated_attention_arguments)
def gated_self_attention_vjp(x, weights: MultiHeadWeights, w_gate, n_heads: int, mask=None) -> tuple:
    r"""Multi-head self-attention with a sigmoid gate on each head's output; ``back(d_output)`` -> ``(grads, dw_gate, dx)``.

    .. math:: G_i = \sigma(X W_{G,i}), \quad O_i = \operatorname{Attention}(X W_{Q,i}, X W_{K,i}, X W_{V,i}),
              \quad Y = [G_i \odot O_i]_i\, W_O + b_O,

              dO_i = G_i \odot dC_i, \qquad dZ_i = O_i \odot G_i \odot (1 - G_i) \odot dC_i, \qquad
              dW_G = X^\top [dZ_i]_i, \qquad dX = dX_{Q,K,V} + [dZ_i]_i\, W_G^\top

    with :math:`dC = dY\, W_O^\top` the gradient of the gated heads, concatenated, :math:`dC_i` its slice of
    head :math:`i`, and :math:`\sigma' = \sigma (1 - \sigma)` the sigmoid's derivative. The gate is the one of
    :func:`attnbook.recent.gated.gated_attention` (coordinate by coordinate, read from the query's token), on the
    book's multi-head attention with biases.

    Parameters
    ----------
    x : array_like
        ``(..., n, d_model)`` the sequence (queries, keys and values).
    weights
        As in :func:`attnbook.multi_head_attention`.
    w_gate : array_like
        ``(d_model, d_model)`` the gates' logits, head by head.
    n_heads, mask
        As in :func:`attnbook.multi_head_attention`.

    Returns
    -------
    tuple
        ``(result, back)``: a :class:`~attnbook.recent.gated.GatedAttentionResult` (``output`` ``(..., n, d_model)``,
        ``weights`` ``(..., n_heads, n, n)``, ``gate`` ``(..., n_heads, n, d_head)``) and
        ``back(d_output) -> (grads, dw_gate, dx)``, ``grads`` a :class:`~attnbook.MultiHeadWeights`.

    Examples
    --------
    >>> from attnbook import causal_mask, init_multi_head_weights, multi_head_attention
    >>> x = np.random.default_rng(0).standard_normal((3, 4))              # (n, d_model)
    >>> w = init_multi_head_weights(4)
    >>> (out, attention, gate), back = gated_self_attention_vjp(x, w, np.zeros((4, 4)), 2, mask=causal_mask(3))
    >>> float(gate.min()), float(gate.max())                              # sigma(0) everywhere
    (0.5, 0.5)
    >>> halved = w._replace(w_o=w.w_o / 2)                                # a gate of 1/2 halves W_O
    >>> bool(np.allclose(out, multi_head_attention(x, x, x, halved, 2, mask=causal_mask(3)).output))
    True
    >>> grads, dw_gate, dx = back(np.ones_like(out))
    >>> dw_gate.shape, dx.shape
    ((4, 4), (3, 4))
    """
    w, split = weights, split_heads.unchecked
    projected = [x @ w_x + b_x for w_x, b_x in ((w.w_q, w.b_q), (w.w_k, w.b_k), (w.w_v, w.b_v))]
    dtype = np.result_type(*projected, np.float32)  # scores in at least float32, as in attention
    q, k, v = (split(p.astype(dtype, copy=False), n_heads) for p in projected)  # (..., h, n, d_head) each
    scale = 1.0 / math.sqrt(q.shape[-1])
    heads, attention = scaled_dot_product_attention.unchecked(q, k, v, mask, scale)  # (..., h, n, d_head)
    gate = 1.0 / (1.0 + np.exp(-split(x @ w_gate, n_heads)))  # (..., h, n, d_head): sigma, in (0, 1)
    concat = merge_heads.unchecked(heads * gate)  # (..., n, d_model): the gated heads
    output = concat @ w.w_o + w.b_o  # (..., n, d_model)

    def back(d_output):
        check_output_gradient(d_output, output.shape, "d_output")
        d_concat, dw_o = linear_grads(concat, w.w_o, d_output)  # (..., n, d_model), (d_model, d_model)
        d_gated = split(d_concat, n_heads)  # (..., h, n, d_head)
        d_logits = merge_heads.unchecked(d_gated * heads * gate * (1.0 - gate))  # (..., n, d_model): sigma'
        dx_gate, dw_gate = linear_grads(x, w_gate, d_logits)  # (..., n, d_model), (d_model, d_model)
        (dq, dk, dv), _ = backpropagate(q, k, v, attention, d_gated * gate, mask, scale)  # (..., h, n, d_head)
        dq, dk, dv = (merge_heads.unchecked(g) for g in (dq, dk, dv))  # (..., n, d_model)
        dx_q, dw_q = linear_grads(x, w.w_q, dq)  # (..., n, d_model), (d_model, d_model)
        dx_k, dw_k = linear_grads(x, w.w_k, dk)
        dx_v, dw_v = linear_grads(x, w.w_v, dv)
        grads = MultiHeadWeights(dw_q, dw_k, dw_v, dw_o, sum_rows(dq), sum_rows(dk), sum_rows(dv),
                                 sum_rows(d_output))
        return grads, dw_gate, dx_q + dx_k + dx_v + dx_gate  # dx: (..., n, d_model), the four uses of x

    return GatedAttentionResult(output, attention, gate), back


def _gated_layer_arguments(x, weights: GatedEncoderLayerWeights, n_heads: int, mask=None, activation: str = "relu",
                           eps: float = 1e-5) -> tuple:
    if not isinstance(weights, GatedEncoderLayerWeights):
        raise TypeError(f"weights must be GatedEncoderLayerWeights, got {type(weights).__name__}")
    x, layer, n_heads, mask, activation, eps = encoder_layer.check(x, EncoderLayerWeights(*weights[:4]), n_heads,
                                                                   mask, activation, eps)
    return x, GatedEncoderLayerWeights(*layer, _checked_gate(weights.w_gate, x.shape[-1])), n_heads, mask, activation, eps


@boundary(_gated_layer_arguments)
def gated_encoder_layer_vjp(x, weights: GatedEncoderLayerWeights, n_heads: int, mask=None, activation: str = "relu",
                            eps: float = 1e-5) -> tuple:
    r"""One post-norm encoder layer whose self-attention is gated; ``back(dy)`` -> ``(GatedEncoderLayerWeights, dx)``.

    .. math:: X' = \operatorname{LN}_1(X + \operatorname{GatedMHA}(X)), \quad
              Y = \operatorname{LN}_2(X' + \operatorname{FFN}(X'))

    :func:`encoder_layer_vjp` with :func:`gated_self_attention_vjp` in place of the self-attention: the
    one change of Qiu et al. (2025) to a layer.

    Parameters
    ----------
    x
        As in :func:`attnbook.encoder_layer`.
    weights : GatedEncoderLayerWeights
        The layer's weights and its gate's.
    n_heads, mask, activation, eps
        As in :func:`attnbook.encoder_layer`.

    Returns
    -------
    tuple
        ``(result, back)``: a :class:`~attnbook.recent.gated.GatedAttentionResult` whose ``output`` is the
        layer's ``(..., n, d_model)`` (``weights`` and ``gate`` those of its attention) and
        ``back(dy) -> (grads, dx)``, ``grads`` a :class:`GatedEncoderLayerWeights`.

    Examples
    --------
    >>> from attnbook import causal_mask, init_encoder_layer
    >>> x = np.random.default_rng(0).standard_normal((3, 4))              # (n, d_model)
    >>> layer = GatedEncoderLayerWeights(*init_encoder_layer(4, 8), np.zeros((4, 4)))
    >>> (out, attention, gate), back = gated_encoder_layer_vjp(x, layer, 2, mask=causal_mask(3))
    >>> grads, dx = back(np.ones_like(out))
    >>> grads.w_gate.shape, gate.shape, dx.shape
    ((4, 4), (2, 3, 2), (3, 4))
    """
    (attended, attention, gate), attention_back = gated_self_attention_vjp.unchecked(
        x, weights.self_attention, weights.w_gate, n_heads, mask)  # (..., n, d_model), (..., h, n, n), (..., h, n, d_head)
    y, rest_back = post_norm_rest(x, attended, weights, activation, eps)  # (..., n, d_model)

    def back(dy):
        ds_1, d_feed, norm_1, norm_2 = rest_back(dy)  # ds_1: (..., n, d_model)
        d_attention, dw_gate, dx_attention = attention_back(ds_1)
        grads = GatedEncoderLayerWeights(d_attention, d_feed, norm_1, norm_2, dw_gate)
        return grads, sum_to_shape(ds_1, x.shape) + dx_attention  # (..., n, d_model): the residual and the attention

    return GatedAttentionResult(y, attention, gate), back
