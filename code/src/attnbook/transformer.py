"""The pieces of a Transformer layer around attention: layer norm, feed-forward, encoder and decoder layers.

Post-norm layers as in Vaswani et al. (2017): each sub-layer is wrapped as ``LayerNorm(x + sublayer(x))``.
An encoder layer is self-attention then a feed-forward network; a decoder layer is masked (causal)
self-attention, cross-attention over the encoder output, then a feed-forward network. The feed-forward
network's activation is ReLU, as in Vaswani et al., or BERT's GELU (``activation="gelu"``).

>>> import numpy as np
>>> layer = init_encoder_layer(d_model=8, d_ff=16, seed=0)
>>> x = np.random.default_rng(0).standard_normal((3, 8))              # (n, d_model)
>>> out, attn = encoder_layer(x, layer, n_heads=2)
>>> out.shape, attn.shape
((3, 8), (2, 3, 3))
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .masks import check_head_batches, check_head_mask
from .multihead import MultiHeadWeights, check_heads, init_multi_head_weights, multi_head_attention
from .validation import Array, Dims, Norm, as_float_array, boundary, check_positive_int, check_weights

__all__ = [
    "ACTIVATIONS",
    "DecoderLayerResult",
    "DecoderLayerWeights",
    "EncoderLayerResult",
    "EncoderLayerWeights",
    "FeedForwardWeights",
    "check_activation",
    "check_eps",
    "decoder_layer",
    "encoder_layer",
    "feed_forward",
    "gelu",
    "init_decoder_layer",
    "init_encoder_layer",
    "init_feed_forward",
    "layer_norm",
]


class FeedForwardWeights(NamedTuple):
    """Weights of the position-wise feed-forward network ``act(x W_1 + b_1) W_2 + b_2`` (act ReLU or GELU).

    Attributes
    ----------
    w_1, b_1 : ndarray
        ``(d_model, d_ff)`` the expansion and ``(d_ff,)`` its bias.
    w_2, b_2 : ndarray
        ``(d_ff, d_model)`` the projection back to the model width and ``(d_model,)`` its bias.

    Examples
    --------
    >>> ff = FeedForwardWeights(np.eye(2), np.zeros(2), np.eye(2), np.ones(2))
    >>> feed_forward([[1.0, -1.0]], ff).tolist()
    [[2.0, 1.0]]
    """

    w_1: Array["d_model, d_ff"]  # the expansion
    b_1: Array["d_ff"]
    w_2: Array["d_ff, d_model"]  # back to the model width
    b_2: Array["d_model"]


class EncoderLayerWeights(NamedTuple):
    """Weights of one post-norm encoder layer, as :func:`init_encoder_layer` makes them.

    Attributes
    ----------
    self_attention : MultiHeadWeights
        The multi-head self-attention.
    feed_forward : FeedForwardWeights
        The position-wise feed-forward network.
    norm_1, norm_2 : tuple of ndarray
        ``(gamma, beta)``, each ``(d_model,)``: the layer norms after attention and after the
        feed-forward network.

    Examples
    --------
    >>> layer = init_encoder_layer(d_model=4, d_ff=8)
    >>> layer.feed_forward.w_1.shape, layer.norm_2[0].shape
    ((4, 8), (4,))
    """

    self_attention: MultiHeadWeights
    feed_forward: FeedForwardWeights
    norm_1: Norm["d_model"]  # (gamma, beta) after attention
    norm_2: Norm["d_model"]  # after the feed-forward network


class DecoderLayerWeights(NamedTuple):
    """Weights of one post-norm decoder layer, as :func:`init_decoder_layer` makes them.

    Attributes
    ----------
    self_attention : MultiHeadWeights
        The masked (causal) self-attention over the target.
    cross_attention : MultiHeadWeights
        The attention of the target over the encoder output (the memory).
    feed_forward : FeedForwardWeights
        The position-wise feed-forward network.
    norm_1, norm_2, norm_3 : tuple of ndarray
        ``(gamma, beta)``, each ``(d_model,)``: the layer norms after each of the three sub-layers.

    Examples
    --------
    >>> layer = init_decoder_layer(d_model=4, d_ff=8)
    >>> layer.cross_attention.w_q.shape, len(layer.norm_3)
    ((4, 4), 2)
    """

    self_attention: MultiHeadWeights
    cross_attention: MultiHeadWeights
    feed_forward: FeedForwardWeights
    norm_1: Norm["d_model"]  # (gamma, beta) after the self-attention
    norm_2: Norm["d_model"]  # after the cross-attention
    norm_3: Norm["d_model"]  # after the feed-forward network


class EncoderLayerResult(NamedTuple):
    """What an encoder layer returns: unpack it as ``output, weights = ...``.

    Attributes
    ----------
    output : ndarray
        ``(..., n, d_model)`` the layer's output, one row per position.
    weights : ndarray
        ``(..., h, n, n)`` the self-attention weights of each head.

    Examples
    --------
    >>> output, weights = encoder_layer(np.ones((3, 4)), init_encoder_layer(4, 8), n_heads=2)
    >>> output.shape, weights.shape
    ((3, 4), (2, 3, 3))
    """

    output: np.ndarray  # (..., n, d_model)
    weights: np.ndarray  # (..., h, n, n): self-attention weights


class DecoderLayerResult(NamedTuple):
    """What a decoder layer returns: ``output, self_weights, cross_weights = ...``.

    Attributes
    ----------
    output : ndarray
        ``(..., n_t, d_model)`` the layer's output, one row per target position.
    self_weights : ndarray
        ``(..., h, n_t, n_t)`` the causal self-attention weights (zero above the diagonal).
    cross_weights : ndarray
        ``(..., h, n_t, n_s)`` the weights over the ``n_s`` positions of the encoder output.

    Examples
    --------
    >>> result = decoder_layer(np.ones((3, 4)), np.ones((5, 4)), init_decoder_layer(4, 8), n_heads=2)
    >>> result.self_weights.shape, result.cross_weights.shape
    ((2, 3, 3), (2, 3, 5))
    """

    output: np.ndarray  # (..., n_t, d_model)
    self_weights: np.ndarray  # (..., h, n_t, n_t): causal self-attention
    cross_weights: np.ndarray  # (..., h, n_t, n_s): attention over the encoder output


def _layer_norm_arguments(x, gamma=None, beta=None, eps: float = 1e-5) -> tuple:
    x = as_float_array(x, "x", layout="(..., d)")  # (..., d)
    d = x.shape[-1]
    gamma = np.ones(d) if gamma is None else as_float_array(gamma, "gamma")  # (d,)
    beta = np.zeros(d) if beta is None else as_float_array(beta, "beta")  # (d,)
    for name, array in (("gamma", gamma), ("beta", beta)):
        if array.shape != (d,):
            raise ValueError(f"{name} has shape {array.shape} but x has shape {x.shape}; expected ({d},)")
    return x, gamma, beta, check_eps(eps)


@boundary(_layer_norm_arguments)
def layer_norm(x, gamma=None, beta=None, eps: float = 1e-5) -> np.ndarray:
    r"""Normalise each row of ``x`` ``(..., d)`` to mean 0 and variance 1, then scale by gamma, shift by beta.

    .. math:: \operatorname{LayerNorm}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta

    Parameters
    ----------
    x : array_like
        ``(..., d)`` rows to normalise.
    gamma, beta : array_like, optional
        ``(d,)`` scale and shift; default ones and zeros.
    eps : float
        Added to the variance.

    Returns
    -------
    ndarray
        ``(..., d)``, in the common float type of ``x``, ``gamma`` and ``beta``; the statistics in at
        least float32 (a float16 variance overflows).

    Examples
    --------
    >>> np.round(layer_norm([[1.0, 2.0, 3.0]]), 4).tolist()
    [[-1.2247, 0.0, 1.2247]]
    >>> np.round(layer_norm(np.array([[-1000.0, 0.0, 1000.0]], dtype=np.float16)), 4).tolist()
    [[-1.2247, 0.0, 1.2247]]
    >>> layer_norm(np.ones((2, 3)), gamma=np.ones(4))
    Traceback (most recent call last):
    ...
    ValueError: gamma has shape (4,) but x has shape (2, 3); expected (3,)
    """
    out_dtype = np.result_type(x, gamma, beta)
    x = x.astype(np.result_type(x, np.float32), copy=False)  # (..., d); float32 and float64 unchanged
    mean = x.mean(axis=-1, keepdims=True)  # (..., 1)
    std = np.sqrt(x.var(axis=-1, keepdims=True) + eps)  # (..., 1)
    x_hat = (x - mean) / std  # (..., d): mean 0, variance 1 (up to eps)
    return (x_hat * gamma + beta).astype(out_dtype, copy=False)  # (..., d)

# Abramowitz and Stegun (1964), 7.1.26: erfc(z) = t (a_1 + t (a_2 + ... + t a_5)) exp(-z^2), t = 1 / (1 + p z),
# for z >= 0, within 1.5e-7 of erf everywhere (below float32's resolution of 1 + erf)
_ERFC_P = 0.3275911
_ERFC_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)  # a_5 first (Horner)


def standard_normal_cdf(x: np.ndarray) -> np.ndarray:
    r"""Unchecked kernel: :math:`\Phi(x) = \tfrac12 (1 + \operatorname{erf}(x / \sqrt 2))` of a float array, in its type.

    erf within 1.5e-7 (A&S 7.1.26). Far in the left tail ``1 + erf`` is 0 in float32, as in PyTorch: a tail
    kept to its last bits would be a subnormal number, and matrix products of subnormals are a hundred times
    slower.

    >>> print(np.round(standard_normal_cdf(np.array([-1.0, 0.0, 1.96])), 6))
    [0.158655 0.5      0.975002]
    """
    real = x.dtype.type  # the constants in x's type: float32 stays float32
    z = np.abs(x) * real(1 / math.sqrt(2))  # (...,)
    t = real(_ERFC_P) * z  # (...,); in place from here on: this runs on every hidden unit of a layer
    t += 1
    np.reciprocal(t, out=t)  # (...,): t = 1 / (1 + p z)
    poly = t * real(_ERFC_A[0])  # (...,)
    for a in _ERFC_A[1:]:
        poly += real(a)
        poly *= t  # (...,): Horner, t (a_1 + t (a_2 + ...))
    np.square(z, out=z)
    np.negative(z, out=z)
    poly *= np.exp(z, out=z)  # (...,): erfc(|x| / sqrt 2)
    erf = np.subtract(1, poly, out=poly)  # (...,): erf(|x| / sqrt 2)
    np.copysign(erf, x, out=erf)  # (...,): erf(x / sqrt 2)
    erf += 1
    erf *= real(0.5)
    return erf  # (...,): Phi(x)


def _gelu_arguments(x) -> tuple:
    x = as_float_array(x, "x")  # (...,)
    return (x.astype(np.result_type(x, np.float32), copy=False),)


@boundary(_gelu_arguments)
def gelu(x) -> np.ndarray:
    r"""The Gaussian error linear unit of Hendrycks and Gimpel (2016), with the exact normal CDF (BERT's).

    .. math:: \operatorname{GELU}(x) = x\,\Phi(x) = \frac{x}{2}\left(1 + \operatorname{erf}(x / \sqrt 2)\right)

    :math:`\Phi` comes from an approximation of erf within 1.5e-7 (Abramowitz and Stegun 7.1.26), the
    resolution of float32 near 1; not the tanh approximation of GPT-2, which is up to 1e-3 away.

    Parameters
    ----------
    x : array_like
        Any shape.

    Returns
    -------
    ndarray
        ``x``'s shape, in its float type (at least float32).

    Examples
    --------
    >>> print(np.round(gelu([-3.0, -1.0, 0.0, 1.0, 3.0]), 4))
    [-0.004  -0.1587  0.      0.8413  2.996 ]
    """
    return x * standard_normal_cdf(x)  # (...,)


#: the activations of the feed-forward network, by the name its ``activation`` argument takes
ACTIVATIONS = {"relu": lambda h: np.maximum(h, 0), "gelu": gelu.unchecked}


def check_activation(activation) -> str:
    """``activation`` if it names one of :data:`ACTIVATIONS` (``"relu"``, ``"gelu"``), else an error naming it.

    Parameters
    ----------
    activation : str
        The name.

    Returns
    -------
    str
        ``activation``.

    Examples
    --------
    >>> check_activation("tanh")
    Traceback (most recent call last):
    ...
    ValueError: activation must be one of 'relu', 'gelu', got 'tanh'
    """
    if not isinstance(activation, str) or activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(map(repr, ACTIVATIONS))}, got {activation!r}")
    return activation


def check_eps(eps) -> float:
    """``eps`` of a layer norm, a positive number, as a float; else an error naming it.

    Parameters
    ----------
    eps : float
        Added to the variance.

    Returns
    -------
    float
        ``eps``.

    Examples
    --------
    >>> check_eps(0)
    Traceback (most recent call last):
    ...
    ValueError: eps must be a positive number, got 0
    """
    if isinstance(eps, bool) or not (isinstance(eps, (int, float)) and eps > 0):
        raise ValueError(f"eps must be a positive number, got {eps!r}")
    return float(eps)


def init_feed_forward(d_model: int, d_ff: int, seed: int = 0) -> FeedForwardWeights:
    r"""Seeded weights of a feed-forward network: Glorot-uniform matrices, zero biases.

    .. math:: W_1, W_2 \sim \mathcal{U}\left(-\sqrt{6 / (d_\text{model} + d_\text{ff})},
              \sqrt{6 / (d_\text{model} + d_\text{ff})}\right)

    Parameters
    ----------
    d_model : int
        The model width (positive).
    d_ff : int
        The hidden width of the network (positive; 4 ``d_model`` in Vaswani et al., 2017).
    seed : int, optional
        Seed of ``numpy.random.default_rng``; default 0.

    Returns
    -------
    FeedForwardWeights
        The weights of :func:`feed_forward`.

    Examples
    --------
    >>> ff = init_feed_forward(4, 8, seed=0)
    >>> [a.shape for a in ff]
    [(4, 8), (8,), (8, 4), (4,)]
    >>> bool(np.abs(ff.w_1).max() <= np.sqrt(6 / 12))
    True
    """
    d_model = check_positive_int(d_model, "d_model")
    d_ff = check_positive_int(d_ff, "d_ff")
    rng = np.random.default_rng(seed)
    limit = math.sqrt(6.0 / (d_model + d_ff))
    return FeedForwardWeights(
        rng.uniform(-limit, limit, (d_model, d_ff)), np.zeros(d_ff),
        rng.uniform(-limit, limit, (d_ff, d_model)), np.zeros(d_model),
    )


def _feed_forward_arguments(x, weights: FeedForwardWeights, activation: str = "relu") -> tuple:
    x = as_float_array(x, "x")  # (..., n, d_model)
    dims = Dims()  # the weights fix d_model and d_ff
    weights = check_weights(weights, FeedForwardWeights, "weights", dims)
    if x.shape[-1:] != (dims["d_model"],):
        raise ValueError(f"x has shape {x.shape} but weights.w_1 has shape {weights.w_1.shape}; "
                         f"x needs d_model = {dims['d_model']} columns")
    return x, weights, check_activation(activation)


@boundary(_feed_forward_arguments)
def feed_forward(x, weights: FeedForwardWeights, activation: str = "relu") -> np.ndarray:
    r"""``max(0, x W_1 + b_1) W_2 + b_2``, applied to every position independently (or GELU for the max).

    .. math:: \operatorname{FFN}(x) = \max(0, x W_1 + b_1) W_2 + b_2, \qquad
              \operatorname{FFN}_\text{GELU}(x) = \operatorname{GELU}(x W_1 + b_1) W_2 + b_2

    Parameters
    ----------
    x : array_like
        ``(..., n, d_model)`` token vectors.
    weights : FeedForwardWeights
        See :class:`FeedForwardWeights`.
    activation : {"relu", "gelu"}, optional
        ReLU, as in Vaswani et al. (2017), the default; or :func:`gelu`, as in BERT.

    Returns
    -------
    ndarray
        ``(..., n, d_model)``.

    Examples
    --------
    >>> ff = init_feed_forward(4, 8, seed=0)
    >>> feed_forward(np.ones((3, 5)), ff)
    Traceback (most recent call last):
    ...
    ValueError: x has shape (3, 5) but weights.w_1 has shape (4, 8); x needs d_model = 4 columns
    >>> ff = FeedForwardWeights(np.eye(2), np.zeros(2), np.eye(2), np.zeros(2))
    >>> print(np.round(feed_forward([[1.0, -1.0]], ff, activation="gelu"), 4))
    [[ 0.8413 -0.1587]]
    """
    hidden = ACTIVATIONS[activation](x @ weights.w_1 + weights.b_1)  # (..., n, d_ff)
    return hidden @ weights.w_2 + weights.b_2  # (..., n, d_model)


def _unit_norm(d_model: int) -> tuple[np.ndarray, np.ndarray]:
    return np.ones(d_model), np.zeros(d_model)


def init_encoder_layer(d_model: int, d_ff: int, seed: int = 0) -> EncoderLayerWeights:
    """A seeded encoder layer: multi-head self-attention, feed-forward, two layer norms.

    The attention comes from :func:`init_multi_head_weights` with ``seed``, the feed-forward network
    from :func:`init_feed_forward` with ``seed + 1``; the norms start as the identity
    (``gamma = 1``, ``beta = 0``).

    Parameters
    ----------
    d_model : int
        The model width (positive); it must be divisible by the number of heads it is used with.
    d_ff : int
        The hidden width of the feed-forward network (positive).
    seed : int, optional
        Seed of the weights; default 0.

    Returns
    -------
    EncoderLayerWeights
        The weights of :func:`encoder_layer`.

    Examples
    --------
    >>> layer = init_encoder_layer(8, 16, seed=0)
    >>> layer.self_attention.w_q.shape, layer.feed_forward.w_1.shape
    ((8, 8), (8, 16))
    >>> [a.tolist() for a in init_encoder_layer(2, 4).norm_1]
    [[1.0, 1.0], [0.0, 0.0]]
    """
    return EncoderLayerWeights(
        init_multi_head_weights(d_model, seed=seed),
        init_feed_forward(d_model, d_ff, seed=seed + 1),
        _unit_norm(d_model), _unit_norm(d_model),
    )


def init_decoder_layer(d_model: int, d_ff: int, seed: int = 0) -> DecoderLayerWeights:
    """A seeded decoder layer: masked self-attention, cross-attention, feed-forward, three layer norms.

    The self-attention is seeded with ``seed``, the cross-attention with ``seed + 1`` and the
    feed-forward network with ``seed + 2``; the norms start as the identity.

    Parameters
    ----------
    d_model, d_ff, seed
        As in :func:`init_encoder_layer`.

    Returns
    -------
    DecoderLayerWeights
        The weights of :func:`decoder_layer`.

    Examples
    --------
    >>> layer = init_decoder_layer(8, 16, seed=0)
    >>> layer.cross_attention.w_o.shape, len(layer)
    ((8, 8), 6)
    """
    return DecoderLayerWeights(
        init_multi_head_weights(d_model, seed=seed),
        init_multi_head_weights(d_model, seed=seed + 1),
        init_feed_forward(d_model, d_ff, seed=seed + 2),
        _unit_norm(d_model), _unit_norm(d_model), _unit_norm(d_model),
    )


def _encoder_arguments(x, weights: EncoderLayerWeights, n_heads: int, mask=None, activation: str = "relu",
                       eps: float = 1e-5) -> tuple:
    if not isinstance(weights, EncoderLayerWeights):
        raise TypeError(f"weights must be EncoderLayerWeights, got {type(weights).__name__}")
    x = as_float_array(x, "x", layout="(..., n, d_model)")  # (..., n, d_model)
    dims = Dims(d_model=(x.shape[-1], f"x has d_model = {x.shape[-1]}"))
    dims.alias("d_kv", "d_model")
    weights = check_weights(weights, EncoderLayerWeights, "weights", dims)
    n_heads = check_heads(x.shape[-1], n_heads)
    mask = None if mask is None else check_head_mask(mask, x.shape[-2], x.shape[-2])  # (..., h | 1, n | 1, n)
    check_head_batches({"x": x.shape}, mask)
    return x, weights, n_heads, mask, check_activation(activation), check_eps(eps)


def _decoder_arguments(y, memory, weights: DecoderLayerWeights, n_heads: int, memory_mask=None) -> tuple:
    if not isinstance(weights, DecoderLayerWeights):
        raise TypeError(f"weights must be DecoderLayerWeights, got {type(weights).__name__}")
    y = as_float_array(y, "y", layout="(..., n_t, d_model)")  # (..., n_t, d_model)
    memory = as_float_array(memory, "memory", layout="(..., n_s, d_model)")  # (..., n_s, d_model)
    if memory.shape[-1] != y.shape[-1]:
        raise ValueError(f"y has shape {y.shape} but memory has shape {memory.shape}; "
                         "both need the model width d_model in the last dimension")
    dims = Dims(d_model=(y.shape[-1], f"y has d_model = {y.shape[-1]}"))
    dims.alias("d_kv", "d_model")
    weights = check_weights(weights, DecoderLayerWeights, "weights", dims)
    n_heads = check_heads(y.shape[-1], n_heads)
    if memory_mask is not None:
        memory_mask = check_head_mask(memory_mask, y.shape[-2], memory.shape[-2], "memory_mask")  # (..., h | 1, n_t | 1, n_s)
    check_head_batches({"y": y.shape, "memory": memory.shape}, memory_mask, "memory_mask")
    return y, memory, weights, n_heads, memory_mask


@boundary(_encoder_arguments)
def encoder_layer(x, weights: EncoderLayerWeights, n_heads: int, mask=None, activation: str = "relu",
                  eps: float = 1e-5):
    r"""One post-norm encoder layer on ``x`` ``(..., n, d_model)``: self-attention, then a feed-forward network.

    .. math:: X' = \operatorname{LN}(X + \operatorname{MHA}(X, X, X)), \qquad
              Y = \operatorname{LN}(X' + \operatorname{FFN}(X'))

    Parameters
    ----------
    x : array_like
        ``(..., n, d_model)`` the input sequence.
    weights : EncoderLayerWeights
        See :func:`init_encoder_layer`.
    n_heads : int
        Heads of the self-attention; must divide ``d_model``.
    mask : array_like of bool, optional
        Passed to the self-attention (e.g. a padding mask), laid out as in
        :func:`attnbook.multi_head_attention`.
    activation : {"relu", "gelu"}, optional
        The feed-forward network's, as in :func:`feed_forward`; BERT's is ``"gelu"``.
    eps : float, optional
        The layer norms' (:func:`layer_norm`); BERT's is 1e-12.

    Returns
    -------
    EncoderLayerResult
        ``output`` ``(..., n, d_model)`` and the self-attention ``weights`` ``(..., h, n, n)``.

    Examples
    --------
    >>> layer = init_encoder_layer(d_model=4, d_ff=8, seed=0)
    >>> encoder_layer(np.ones((3, 4)), layer, n_heads=2).weights.shape
    (2, 3, 3)
    """
    w = weights
    attended, attention = multi_head_attention.unchecked(x, x, x, w.self_attention, n_heads,
                                                         mask)  # (..., n, d_model), (..., h, n, n)
    x = layer_norm.unchecked(x + attended, *w.norm_1, eps)  # (..., n, d_model)
    fed = feed_forward.unchecked(x, w.feed_forward, activation)  # (..., n, d_model)
    x = layer_norm.unchecked(x + fed, *w.norm_2, eps)  # (..., n, d_model)
    return EncoderLayerResult(x, attention)  # (..., n, d_model), (..., h, n, n)


@boundary(_decoder_arguments)
def decoder_layer(y, memory, weights: DecoderLayerWeights, n_heads: int, memory_mask=None):
    r"""One post-norm decoder layer: causal self-attention, cross-attention over ``memory``, feed-forward.

    .. math:: Y_1 = \operatorname{LN}(Y + \operatorname{MHA}_{\text{causal}}(Y, Y, Y)), \quad
              Y_2 = \operatorname{LN}(Y_1 + \operatorname{MHA}(Y_1, M, M)), \quad
              Y_3 = \operatorname{LN}(Y_2 + \operatorname{FFN}(Y_2))

    Parameters
    ----------
    y : array_like
        ``(..., n_t, d_model)`` the targets; a target position never sees later targets.
    memory : array_like
        ``(..., n_s, d_model)`` the encoder output.
    weights : DecoderLayerWeights
        See :func:`init_decoder_layer`.
    n_heads : int
        Heads of both attentions; must divide ``d_model``.
    memory_mask : array_like of bool, optional
        Restricts the cross-attention (e.g. a padding mask of the source), as in :func:`encoder_layer`.

    Returns
    -------
    DecoderLayerResult
        ``output`` ``(..., n_t, d_model)``, ``self_weights`` ``(..., h, n_t, n_t)`` and
        ``cross_weights`` ``(..., h, n_t, n_s)``.

    Examples
    --------
    >>> layer = init_decoder_layer(d_model=4, d_ff=8, seed=0)
    >>> out, self_w, cross_w = decoder_layer(np.ones((2, 4)), np.ones((3, 4)), layer, n_heads=2)
    >>> out.shape, self_w.shape, cross_w.shape
    ((2, 4), (2, 2, 2), (2, 2, 3))
    """
    w, mha, norm = weights, multi_head_attention.unchecked, layer_norm.unchecked
    future = np.tri(y.shape[-2], dtype=bool)  # (n_t, n_t): the causal mask, True on and below the diagonal
    attended, self_weights = mha(y, y, y, w.self_attention, n_heads, future)  # (..., n_t, d), (..., h, n_t, n_t)
    y = norm(y + attended, *w.norm_1)  # (..., n_t, d_model)
    crossed, cross_weights = mha(y, memory, memory, w.cross_attention, n_heads,
                                 memory_mask)  # (..., n_t, d), (..., h, n_t, n_s)
    y = norm(y + crossed, *w.norm_2)  # (..., n_t, d_model)
    y = norm(y + feed_forward.unchecked(y, w.feed_forward), *w.norm_3)  # (..., n_t, d_model)
    return DecoderLayerResult(y, self_weights, cross_weights)  # (..., n_t, d), (..., h, n_t, n_t), (..., h, n_t, n_s)
