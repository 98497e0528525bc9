"""The decoder-only block of today's language models: RMSNorm, a SwiGLU feed-forward network, pre-norm.

Its attention is causal multi-head attention, grouped-query when ``n_kv_heads < n_heads``
(:func:`attnbook.multi_head_attention`).

>>> import numpy as np
>>> block = init_decoder_block(d_model=8, d_ff=16, n_heads=4, n_kv_heads=2, seed=0)
>>> x = np.random.default_rng(0).standard_normal((5, 8))               # (n, d_model)
>>> out, attn = decoder_block(x, block, n_heads=4, n_kv_heads=2)
>>> out.shape, attn.shape
((5, 8), (4, 5, 5))
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .multihead import MultiHeadWeights, check_heads, check_kv_heads, init_multi_head_weights, multi_head_attention
from .validation import (
    Array,
    Dims,
    as_float_array,
    boundary,
    check_bool,
    check_positive_int,
    check_weights,
)

__all__ = [
    "DecoderBlockResult",
    "DecoderBlockWeights",
    "SwiGLUWeights",
    "decoder_block",
    "init_decoder_block",
    "init_swiglu_feed_forward",
    "rms_norm",
    "swiglu_feed_forward",
]


class SwiGLUWeights(NamedTuple):
    """Weights of the gated feed-forward network ``(SiLU(x W_gate) * (x W_up)) W_down`` (no biases).

    Attributes
    ----------
    w_gate, w_up : ndarray
        ``(d_model, d_ff)`` the projection that passes through SiLU and gates, and the gated one.
    w_down : ndarray
        ``(d_ff, d_model)`` the projection back to the model width.

    Examples
    --------
    >>> ff = SwiGLUWeights(np.eye(2), np.eye(2), np.eye(2))
    >>> np.round(swiglu_feed_forward([[1.0, -1.0]], ff), 4).tolist()
    [[0.7311, 0.2689]]
    """

    w_gate: Array["d_model, d_ff"]  # through SiLU: the gate
    w_up: Array["d_model, d_ff"]  # the gated linear unit
    w_down: Array["d_ff, d_model"]  # back to the model width


class DecoderBlockWeights(NamedTuple):
    """Weights of one decoder-only block, as :func:`init_decoder_block` makes them.

    Attributes
    ----------
    attention : MultiHeadWeights
        The causal self-attention (its biases are zero and not counted as parameters).
    feed_forward : SwiGLUWeights
        The gated feed-forward network.
    norm_1, norm_2 : ndarray
        ``(d_model,)`` the gains of the RMSNorms before (pre-norm) or after (post-norm) the attention
        and the feed-forward network.

    Examples
    --------
    >>> block = init_decoder_block(8, 16, n_heads=4, n_kv_heads=1)
    >>> block.attention.w_k.shape, block.feed_forward.w_up.shape, block.norm_2.shape
    ((8, 2), (8, 16), (8,))
    """

    attention: MultiHeadWeights
    feed_forward: SwiGLUWeights
    norm_1: Array["d_model"]  # the RMSNorm gain of the attention's input (pre-norm) or output (post-norm)
    norm_2: Array["d_model"]  # of the feed-forward network


class DecoderBlockResult(NamedTuple):
    """What a decoder block returns: unpack it as ``output, weights = ...``.

    Attributes
    ----------
    output : ndarray
        ``(..., n, d_model)`` the block's output, one row per position.
    weights : ndarray
        ``(..., n_heads, n, n)`` the causal attention weights of each query head.

    Examples
    --------
    >>> output, weights = decoder_block(np.ones((3, 4)), init_decoder_block(4, 8, n_heads=2), n_heads=2)
    >>> output.shape, weights.shape
    ((3, 4), (2, 3, 3))
    """

    output: np.ndarray  # (..., n, d_model)
    weights: np.ndarray  # (..., h, n, n)


def _check_eps(eps) -> float:
    if isinstance(eps, bool) or not (isinstance(eps, (int, float)) and eps >= 0):
        raise ValueError(f"eps must be a number at least 0, got {eps!r}")
    return eps


def _rms_norm_arguments(x, gamma=None, eps: float = 1e-6) -> tuple:
    x = as_float_array(x, "x", layout="(..., d)")  # (..., d)
    d = x.shape[-1]
    gamma = np.ones(d) if gamma is None else as_float_array(gamma, "gamma")  # (d,)
    if gamma.shape != (d,):
        raise ValueError(f"gamma has shape {gamma.shape} but x has shape {x.shape}; expected ({d},)")
    return x, gamma, _check_eps(eps)


@boundary(_rms_norm_arguments)
def rms_norm(x, gamma=None, eps: float = 1e-6) -> np.ndarray:
    r"""Divide each row of ``x`` ``(..., d)`` by its root mean square, then scale by the gain gamma.

    .. math:: \operatorname{RMSNorm}(x) = \gamma \odot \frac{x}{\sqrt{\frac1d \sum_m x_m^2 + \epsilon}}

    Unlike :func:`attnbook.layer_norm`, no mean is subtracted and there is no shift.

    Parameters
    ----------
    x, gamma : array_like
        ``(..., d)`` rows to normalise; ``(d,)`` the gain, default ones.
    eps : float
        Added to the mean square. Default ``1e-6``.

    Returns
    -------
    ndarray
        ``(..., d)``, computed in at least float32, in the common float type of ``x`` and ``gamma``.

    Examples
    --------
    >>> np.round(rms_norm([[3.0, 4.0]], eps=0.0), 4).tolist()                 # RMS of (3, 4) is 5 / sqrt(2)
    [[0.8485, 1.1314]]
    >>> rms_norm([[1.0, 2.0]], gamma=[1.0])
    Traceback (most recent call last):
    ...
    ValueError: gamma has shape (1,) but x has shape (1, 2); expected (2,)
    """
    out_dtype = np.result_type(x, gamma)
    x = x.astype(np.result_type(x, np.float32), copy=False)  # (..., d)
    mean_square = np.mean(x * x, axis=-1, keepdims=True)  # (..., 1)
    return (x / np.sqrt(mean_square + eps) * gamma).astype(out_dtype, copy=False)  # (..., d)


def init_swiglu_feed_forward(d_model: int, d_ff: int, seed: int = 0) -> SwiGLUWeights:
    r"""Seeded weights of a SwiGLU network: three Glorot-uniform matrices.

    .. math:: W_\text{gate}, W_\text{up}, W_\text{down} \sim \mathcal{U}\left(-\sqrt{6 / (d_\text{model} + d_\text{ff})},
              \sqrt{6 / (d_\text{model} + d_\text{ff})}\right)

    Parameters
    ----------
    d_model, d_ff, seed
        As in :func:`attnbook.init_feed_forward`; :math:`d_\text{ff} = \tfrac{8}{3} d_\text{model}` keeps
        the parameters of a ReLU network of width :math:`4 d_\text{model}`.

    Returns
    -------
    SwiGLUWeights
        The weights of :func:`swiglu_feed_forward`.

    Examples
    --------
    >>> [a.shape for a in init_swiglu_feed_forward(4, 6, seed=0)]
    [(4, 6), (4, 6), (6, 4)]
    """
    d_model = check_positive_int(d_model, "d_model")
    d_ff = check_positive_int(d_ff, "d_ff")
    rng = np.random.default_rng(seed)
    limit = math.sqrt(6.0 / (d_model + d_ff))
    w_gate, w_up = rng.uniform(-limit, limit, (2, d_model, d_ff))  # (d_model, d_ff) each
    return SwiGLUWeights(w_gate, w_up, rng.uniform(-limit, limit, (d_ff, d_model)))


def _swiglu_arguments(x, weights: SwiGLUWeights) -> tuple:
    x = as_float_array(x, "x", layout="(..., d_model)")  # (..., n, d_model)
    dims = Dims(d_model=(x.shape[-1], f"x has d_model = {x.shape[-1]}"))
    return x, check_weights(weights, SwiGLUWeights, "weights", dims)


@boundary(_swiglu_arguments)
def swiglu_feed_forward(x, weights: SwiGLUWeights) -> np.ndarray:
    r"""The gated feed-forward network of Shazeer (2020), applied to every position independently.

    .. math:: \operatorname{FFN}_\text{SwiGLU}(x) = \big(\operatorname{SiLU}(x W_\text{gate}) \odot x W_\text{up}\big) W_\text{down},
              \qquad \operatorname{SiLU}(z) = z \, \sigma(z) = \frac{z}{1 + e^{-z}}

    Parameters
    ----------
    x, weights
        As in :func:`attnbook.feed_forward`, ``weights`` a :class:`SwiGLUWeights`.

    Returns
    -------
    ndarray
        ``(..., n, d_model)``.

    Examples
    --------
    >>> ff = init_swiglu_feed_forward(4, 6, seed=0)
    >>> swiglu_feed_forward(np.ones((3, 4)), ff).shape
    (3, 4)
    >>> swiglu_feed_forward(np.ones((3, 5)), ff)
    Traceback (most recent call last):
    ...
    ValueError: weights.w_gate has shape (4, 6) but x has d_model = 5; expected (5, d_ff)
    """
    z = x @ weights.w_gate  # (..., n, d_ff)
    silu = z * 0.5 * (1.0 + np.tanh(0.5 * z))  # (..., n, d_ff): z sigma(z), sigma(z) = (1 + tanh(z/2)) / 2
    hidden = silu * (x @ weights.w_up)  # (..., n, d_ff): the gate times the linear unit
    return hidden @ weights.w_down  # (..., n, d_model)


def init_decoder_block(d_model: int, d_ff: int, n_heads: int, n_kv_heads: int | None = None,
                       seed: int = 0) -> DecoderBlockWeights:
    """A seeded decoder-only block: grouped-query attention, SwiGLU network, two RMSNorm gains of 1.

    The attention comes from :func:`attnbook.init_multi_head_weights` with ``seed`` (biases zero), the
    feed-forward network from :func:`init_swiglu_feed_forward` with ``seed + 1``.

    Parameters
    ----------
    d_model, d_ff : int
        The model width (divisible by ``n_heads``) and the SwiGLU network's hidden width.
    n_heads, n_kv_heads : int
        As in :func:`attnbook.multi_head_attention`.
    seed : int, optional
        Seed of the weights; default 0.

    Returns
    -------
    DecoderBlockWeights
        The weights of :func:`decoder_block`.

    Examples
    --------
    >>> block = init_decoder_block(8, 16, n_heads=4, n_kv_heads=2, seed=0)
    >>> block.attention.w_v.shape, block.feed_forward.w_down.shape, block.norm_1.tolist()[:2]
    ((8, 4), (16, 8), [1.0, 1.0])
    """
    d_model = check_positive_int(d_model, "d_model")
    n_heads = check_heads(d_model, n_heads)
    n_kv_heads = n_heads if n_kv_heads is None else check_kv_heads(n_heads, n_kv_heads)
    return DecoderBlockWeights(
        init_multi_head_weights(d_model, seed=seed, n_heads=n_heads, n_kv_heads=n_kv_heads),
        init_swiglu_feed_forward(d_model, d_ff, seed=seed + 1),
        np.ones(d_model), np.ones(d_model),
    )


def _block_arguments(x, weights: DecoderBlockWeights, n_heads: int, n_kv_heads: int | None = None,
                     pre_norm: bool = True, eps: float = 1e-6) -> tuple:
    x = as_float_array(x, "x", layout="(..., n, d_model)")  # (..., n, d_model)
    d_model = x.shape[-1]
    n_heads = check_heads(d_model, n_heads)
    n_kv_heads = n_heads if n_kv_heads is None else check_kv_heads(n_heads, n_kv_heads)
    pre_norm, eps = check_bool(pre_norm, "pre_norm"), _check_eps(eps)
    d_kv = n_kv_heads * (d_model // n_heads)
    dims = Dims(d_model=(d_model, f"x has d_model = {d_model}"), d_kv=(d_kv, f"the key and value heads need {d_kv} columns"))
    return x, check_weights(weights, DecoderBlockWeights, "weights", dims), n_heads, n_kv_heads, pre_norm, eps


@boundary(_block_arguments)
def decoder_block(x, weights: DecoderBlockWeights, n_heads: int, n_kv_heads: int | None = None,
                  pre_norm: bool = True, eps: float = 1e-6) -> DecoderBlockResult:
    r"""One decoder-only block on ``x`` ``(..., n, d_model)``: causal attention, then a SwiGLU network.

    Pre-norm (the default, as in GPT-2, Llama, Mistral) normalises the input of each sub-layer and
    leaves the residual stream unnormalised; post-norm (as in Vaswani et al., 2017) normalises the sum:

    .. math::

        \text{pre-norm:}\quad Z = X + \operatorname{MHA}_M(\operatorname{RMS}_1(X)), \qquad
        X' = Z + \operatorname{FFN}(\operatorname{RMS}_2(Z)),

        \text{post-norm:}\quad Z = \operatorname{RMS}_1(X + \operatorname{MHA}_M(X)), \qquad
        X' = \operatorname{RMS}_2(Z + \operatorname{FFN}(Z)),

    with :math:`M` the causal mask, :math:`\operatorname{RMS}` :func:`rms_norm` and
    :math:`\operatorname{FFN}` :func:`swiglu_feed_forward`. A pre-norm stack ends with one more
    :func:`rms_norm`, which this function leaves to the caller.

    Parameters
    ----------
    x : array_like
        ``(..., n, d_model)`` the residual stream; position ``i`` never sees a later position.
    weights : DecoderBlockWeights
        See :func:`init_decoder_block`.
    n_heads, n_kv_heads : int
        As in :func:`attnbook.multi_head_attention`.
    pre_norm : bool, optional
        True (default) for pre-norm, False for post-norm.
    eps : float, optional
        The ``eps`` of both RMSNorms. Default ``1e-6``.

    Returns
    -------
    DecoderBlockResult
        ``output`` ``(..., n, d_model)`` and the attention ``weights`` ``(..., n_heads, n, n)``.

    Examples
    --------
    >>> block = init_decoder_block(d_model=8, d_ff=16, n_heads=2, seed=0)
    >>> out, attn = decoder_block(np.ones((3, 8)), block, n_heads=2, pre_norm=False)
    >>> out.shape, bool(np.all(np.triu(attn, k=1) == 0))
    ((3, 8), True)
    """
    causal = np.tri(x.shape[-2], dtype=bool)  # (n, n): True on and below the diagonal
    w, mha, rms, ffn = weights, multi_head_attention.unchecked, rms_norm.unchecked, swiglu_feed_forward.unchecked
    if pre_norm:
        normed = rms(x, w.norm_1, eps)  # (..., n, d_model)
        attended, attention = mha(normed, normed, normed, w.attention, n_heads, causal,
                                  n_kv_heads)  # (..., n, d_model), (..., h, n, n)
        z = x + attended  # (..., n, d_model): the residual stream is never normalised
        return DecoderBlockResult(z + ffn(rms(z, w.norm_2, eps), w.feed_forward), attention)  # (..., n, d_model)
    attended, attention = mha(x, x, x, w.attention, n_heads, causal, n_kv_heads)  # (..., n, d), (..., h, n, n)
    z = rms(x + attended, w.norm_1, eps)  # (..., n, d_model): the sum is normalised
    return DecoderBlockResult(rms(z + ffn(z, w.feed_forward), w.norm_2, eps), attention)  # (..., n, d_model)
