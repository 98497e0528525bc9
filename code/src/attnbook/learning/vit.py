"""A tiny Vision Transformer (Dosovitskiy et al., 2021) trained on the 8 x 8 handwritten digits.

An 8 x 8 image is cut into 16 patches of 2 x 2 pixels (a 4 x 4 grid), each patch is mapped to a
``d_model`` vector by one linear layer, a learned ``[CLS]`` vector is put in front, a learned position
vector is added to each of the 17 tokens, and post-norm encoder layers mix them; the class is read
from the final ``[CLS]`` vector by a linear layer:

    Z_0 = [c ; P W_E + b_E] + E_pos,   Z_l = EncoderLayer_l(Z_{l-1}),   logits = Z_L[0] W_C + b_C

Nothing in the model says that patch 5 lies below patch 1: the grid has to be learned into
``E_pos``. The gradients come from the layers' vector-Jacobian products
(:mod:`attnbook.learning.layers`); training is :func:`attnbook.learning.loop.fit` (Adam, warm-up,
gradient clipping). The trained model ships as ``data/trained/digits_vit.npz``.

>>> params, config, record = load_vit()
>>> split = load_digits_split(config.test_fraction, config.split_seed)
>>> accuracy = vit_accuracy(params, split.test_images, split.test_labels, config)
>>> accuracy == record["metrics"]["test_accuracy"]
True
"""

from __future__ import annotations

import json
import math
import time
from typing import NamedTuple

import numpy as np

from ..transformer import EncoderLayerWeights, init_encoder_layer
from ..validation import as_float_array, check_heads, check_positive_int
from .gradients import linear_grads, token_entropy
from .layers import encoder_layer_tape
from .loop import fit
from .store import load_trained, trained_path
from .tasks import image_patches, load_digits_split

__all__ = [
    "MODEL_NAME",
    "ViTConfig",
    "ViTOutput",
    "ViTParams",
    "attention_rollout",
    "cls_attention",
    "confusion_matrix",
    "grid_distances",
    "init_vit",
    "load_vit",
    "plot_cls_attention",
    "plot_position_similarity",
    "position_similarity",
    "similarity_by_distance",
    "train",
    "vit_accuracy",
    "vit_forward",
    "vit_loss_and_gradients",
]

MODEL_NAME = "digits_vit"  # data/trained/digits_vit.npz and .json
_GREY_LEVELS = 16  # the digits' pixels are counts 0 .. 16


class ViTConfig(NamedTuple):
    r"""Hyperparameters of the Vision Transformer and of its training.

    Attributes
    ----------
    image_side : int
        Side of the square images, in pixels; 8 for the digits.
    patch : int
        Side of a patch, in pixels; it divides ``image_side``. 2 gives a 4 x 4 grid of 16 patches.
    d_model : int
        Width of every token vector.
    n_heads : int
        Attention heads per layer; divides ``d_model``.
    d_ff : int
        Hidden width of the feed-forward networks.
    n_layers : int
        Encoder layers.
    n_classes : int
        Classes; 10 digits.
    batch_size : int
        Images per training step.
    n_steps : int
        Training steps.
    warmup : int
        Warm-up steps of the Noam schedule (:func:`attnbook.learning.optim.noam_rate`): the rate rises
        linearly to its peak :math:`(d_\text{model}\, w)^{-1/2}` at step ``warmup``, then falls as
        :math:`s^{-1/2}`.
    learning_rate : float or None
        A constant learning rate of Adam instead of the schedule; default None (the schedule).
    max_norm : float
        The gradient is clipped to this global norm.
    label_smoothing : float
        Weight of the uniform distribution mixed into the targets.
    shift : int
        Training images are translated by up to ``shift`` pixels in each direction (zeros fill in);
        0 turns this augmentation off.
    test_fraction : float
        Share of the digits held out for testing (:func:`attnbook.learning.tasks.load_digits_split`).
    split_seed : int
        Seed of the train/test split.

    Examples
    --------
    >>> config = ViTConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1)
    >>> config.patch, (config.image_side // config.patch) ** 2
    (2, 16)
    """

    image_side: int = 8
    patch: int = 2
    d_model: int = 32
    n_heads: int = 2
    d_ff: int = 64
    n_layers: int = 2
    n_classes: int = 10
    batch_size: int = 64
    n_steps: int = 5000
    warmup: int = 400
    learning_rate: float | None = None
    max_norm: float = 1.0
    label_smoothing: float = 0.0
    shift: int = 1
    test_fraction: float = 0.2
    split_seed: int = 0


class ViTParams(NamedTuple):
    """Parameters of the Vision Transformer (``T = n_patches + 1`` tokens, ``d = d_model``).

    Attributes
    ----------
    embed : ndarray
        ``(patch * patch, d)`` the patch embedding :math:`W_E`.
    embed_bias : ndarray
        ``(d,)`` its bias :math:`b_E`.
    cls : ndarray
        ``(d,)`` the learned ``[CLS]`` token :math:`c`.
    positions : ndarray
        ``(T, d)`` learned position embeddings :math:`E_\\text{pos}`; row 0 belongs to ``[CLS]``, row
        ``1 + r * grid + c`` to the patch in grid row ``r``, column ``c``.
    layers : tuple of EncoderLayerWeights
        The post-norm encoder layers.
    head : ndarray
        ``(d, n_classes)`` the classifier :math:`W_C` on the final ``[CLS]`` vector.
    head_bias : ndarray
        ``(n_classes,)`` its bias :math:`b_C`.

    Examples
    --------
    >>> params = init_vit(ViTConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1))
    >>> params.positions.shape, len(params.layers)
    ((17, 8), 1)
    """

    embed: np.ndarray  # (p * p, d)
    embed_bias: np.ndarray  # (d,)
    cls: np.ndarray  # (d,)
    positions: np.ndarray  # (T, d)
    layers: tuple  # of EncoderLayerWeights
    head: np.ndarray  # (d, n_classes)
    head_bias: np.ndarray  # (n_classes,)


class ViTOutput(NamedTuple):
    """What :func:`vit_forward` returns: ``logits, attention = ...``.

    Attributes
    ----------
    logits : ndarray
        ``(n, n_classes)`` class scores of each image.
    attention : ndarray
        ``(n, n_layers, n_heads, T, T)`` the self-attention weights of every layer and head, over the
        ``T = n_patches + 1`` tokens (token 0 is ``[CLS]``).

    Examples
    --------
    >>> config = ViTConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1)
    >>> out = vit_forward(init_vit(config), np.zeros((3, 8, 8)), config)
    >>> out.logits.shape, out.attention.shape
    ((3, 10), (3, 1, 2, 17, 17))
    """

    logits: np.ndarray  # (n, n_classes)
    attention: np.ndarray  # (n, n_layers, h, T, T)


# --- checks at the boundary ---------------------------------------------------------------------------------


def _check_config(config) -> ViTConfig:
    """The one check of a configuration: positive sizes that fit together."""
    if not isinstance(config, ViTConfig):
        raise TypeError(f"config must be a ViTConfig, got {type(config).__name__}")
    for field in ("image_side", "patch", "d_model", "d_ff", "n_layers", "n_classes", "batch_size", "n_steps",
                  "warmup"):
        check_positive_int(getattr(config, field), f"config.{field}")
    check_positive_int(config.shift, "config.shift", minimum=0)
    if config.image_side % config.patch:
        raise ValueError(f"config.patch = {config.patch} must divide config.image_side = {config.image_side}")
    check_heads(config.d_model, config.n_heads)
    for field in ("learning_rate", "max_norm"):
        value = getattr(config, field)
        if field == "learning_rate" and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            raise ValueError(f"config.{field} must be a positive number, got {value!r}")
    if not 0 <= config.label_smoothing < 1:
        raise ValueError(f"config.label_smoothing must be in [0, 1), got {config.label_smoothing!r}")
    if not 0 < config.test_fraction < 1:
        raise ValueError(f"config.test_fraction must be in (0, 1), got {config.test_fraction!r}")
    return config


def _n_patches(config: ViTConfig) -> int:
    return (config.image_side // config.patch) ** 2


def _check_params(params, config: ViTConfig) -> ViTParams:
    if not isinstance(params, ViTParams):
        raise TypeError(f"params must be ViTParams (see init_vit), got {type(params).__name__}")
    d, n_tokens = config.d_model, _n_patches(config) + 1
    expected = {"embed": (config.patch ** 2, d), "embed_bias": (d,), "cls": (d,), "positions": (n_tokens, d),
                "head": (d, config.n_classes), "head_bias": (config.n_classes,)}
    for name, shape in expected.items():
        got = np.shape(getattr(params, name))
        if got != shape:
            raise ValueError(f"params.{name} has shape {got} but the config asks for {shape}")
    if len(params.layers) != config.n_layers or not all(isinstance(w, EncoderLayerWeights) for w in params.layers):
        raise ValueError(f"params.layers must hold config.n_layers = {config.n_layers} EncoderLayerWeights, "
                         f"got {len(params.layers)}")
    for index, layer in enumerate(params.layers):
        if layer.self_attention.w_q.shape != (d, d) or layer.feed_forward.w_1.shape != (d, config.d_ff):
            raise ValueError(f"params.layers[{index}] does not have d_model = {d} and d_ff = {config.d_ff}")
    return params


def _check_images(images, config: ViTConfig, name: str = "images") -> np.ndarray:
    pixels = as_float_array(images, name)  # (n, H, W)
    side = config.image_side
    if pixels.ndim != 3 or pixels.shape[1:] != (side, side):
        raise ValueError(f"{name} has shape {pixels.shape}; expected (n, {side}, {side}) grey levels 0 .. 16")
    if pixels.size and (pixels.min() < 0 or pixels.max() > _GREY_LEVELS):
        raise ValueError(f"{name} must hold grey levels 0 .. 16 (as load_digits_split gives them), "
                         f"got values in [{pixels.min():g}, {pixels.max():g}]")
    return pixels


def _check_labels(labels, n: int, config: ViTConfig) -> np.ndarray:
    labels = np.asarray(labels)  # (n,)
    if labels.shape != (n,) or labels.dtype.kind not in "iu":
        raise ValueError(f"labels must be ({n},) integers, one per image, got shape {labels.shape} and dtype "
                         f"{labels.dtype}")
    if labels.size and (labels.min() < 0 or labels.max() >= config.n_classes):
        raise ValueError(f"labels must lie in 0 .. {config.n_classes - 1}")
    return labels.astype(np.int64)


def to_tokens(images: np.ndarray, config: ViTConfig) -> np.ndarray:
    """Unchecked kernel: grey levels ``(n, H, W)`` -> patches ``(n, n_patches, patch * patch)`` in ``[0, 1]``.

    >>> to_tokens(np.full((1, 8, 8), 16.0), ViTConfig()).shape
    (1, 16, 4)
    """
    return image_patches(images / _GREY_LEVELS, config.patch)  # (n, n_patches, p * p)


# --- the model ------------------------------------------------------------------------------------------------


def init_vit(config: ViTConfig, seed: int = 0) -> ViTParams:
    r"""Seeded parameters: Glorot-uniform matrices, zero biases, small normal ``[CLS]`` and positions.

    .. math:: W_E \sim \mathcal{U}\bigl(\pm\sqrt{6 / (p^2 + d)}\bigr), \quad
              c,\ E_\text{pos} \sim \mathcal{N}(0, 0.02^2), \quad W_C \sim \mathcal{U}\bigl(\pm\sqrt{6 / (d + K)}\bigr)

    Layer ``l`` comes from :func:`attnbook.transformer.init_encoder_layer` with seed ``seed + 10 (l + 1)``.

    Parameters
    ----------
    config : ViTConfig
        The sizes.
    seed : int, optional
        Seed of the parameters; default 0.

    Returns
    -------
    ViTParams
        The parameters.

    Examples
    --------
    >>> params = init_vit(ViTConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1), seed=1)
    >>> params.embed.shape, params.head.shape
    ((4, 8), (8, 10))
    """
    config = _check_config(config)
    rng = np.random.default_rng(seed)
    d, p2, n_classes = config.d_model, config.patch ** 2, config.n_classes
    limit_e, limit_c = math.sqrt(6 / (p2 + d)), math.sqrt(6 / (d + n_classes))
    embed = rng.uniform(-limit_e, limit_e, (p2, d))  # (p * p, d)
    cls = 0.02 * rng.standard_normal(d)  # (d,)
    positions = 0.02 * rng.standard_normal((_n_patches(config) + 1, d))  # (T, d)
    head = rng.uniform(-limit_c, limit_c, (d, n_classes))  # (d, K)
    layers = tuple(init_encoder_layer(d, config.d_ff, seed=seed + 10 * (index + 1))
                   for index in range(config.n_layers))
    return ViTParams(embed, np.zeros(d), cls, positions, layers, head, np.zeros(n_classes))


class _Forward(NamedTuple):
    tokens: np.ndarray  # (n, n_patches, p * p)
    final: np.ndarray  # (n, d): the final [CLS] vector
    logits: np.ndarray  # (n, K)
    attention: np.ndarray  # (n, L, h, T, T)
    backs: tuple  # one backward closure per layer


def forward(params: ViTParams, tokens: np.ndarray, n_heads: int) -> _Forward:
    """Unchecked kernel of :func:`vit_forward` on patches ``(n, n_patches, p * p)`` in ``[0, 1]``.

    >>> config = ViTConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1)
    >>> forward(init_vit(config), np.zeros((2, 16, 4)), 2).logits.shape
    (2, 10)
    """
    n = tokens.shape[0]
    embedded = tokens @ params.embed + params.embed_bias  # (n, n_patches, d)
    cls = np.broadcast_to(params.cls, (n, 1, params.cls.shape[0]))  # (n, 1, d)
    z = np.concatenate([cls, embedded], axis=1) + params.positions  # (n, T, d)
    weights, backs = [], []
    for layer in params.layers:
        (z, attention), back = encoder_layer_tape(z, layer, n_heads)  # (n, T, d), (n, h, T, T)
        weights.append(attention)
        backs.append(back)
    final = z[:, 0]  # (n, d): the [CLS] token after the last layer
    logits = final @ params.head + params.head_bias  # (n, K)
    return _Forward(tokens, final, logits, np.stack(weights, axis=1), tuple(backs))  # attention (n, L, h, T, T)


def vit_forward(params: ViTParams, images, config: ViTConfig) -> ViTOutput:
    r"""Class scores and attention maps of a batch of digits.

    .. math:: Z_0 = [c ; P W_E + b_E] + E_\text{pos}, \qquad Z_l = \operatorname{Enc}_l(Z_{l-1}), \qquad
              \text{logits} = Z_L[0]\, W_C + b_C

    Parameters
    ----------
    params : ViTParams
        The parameters.
    images : array_like
        ``(n, 8, 8)`` grey levels 0 .. 16, as :func:`attnbook.learning.tasks.load_digits_split` gives them
        (they are divided by 16 here).
    config : ViTConfig
        The sizes the parameters were made with.

    Returns
    -------
    ViTOutput
        ``logits`` ``(n, n_classes)`` and ``attention`` ``(n, n_layers, n_heads, T, T)``.

    Examples
    --------
    >>> params, config, _ = load_vit()
    >>> split = load_digits_split(config.test_fraction, config.split_seed)
    >>> out = vit_forward(params, split.test_images[:4], config)
    >>> out.logits.argmax(axis=1).tolist() == split.test_labels[:4].tolist()
    True
    """
    config = _check_config(config)
    params = _check_params(params, config)
    pixels = _check_images(images, config)  # (n, H, W)
    f = forward(params, to_tokens(pixels, config), config.n_heads)
    return ViTOutput(f.logits, f.attention)


def loss_and_gradients(params: ViTParams, batch: tuple, config: ViTConfig) -> tuple[float, ViTParams]:
    """Unchecked kernel of :func:`vit_loss_and_gradients`; ``batch`` is ``(tokens, labels)``, already patched.

    >>> config = ViTConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1)
    >>> loss, grads = loss_and_gradients(init_vit(config), (np.zeros((2, 16, 4)), np.array([1, 2])), config)
    >>> grads.positions.shape
    (17, 8)
    """
    tokens, labels = batch  # (B, n_patches, p * p), (B,)
    f = forward(params, tokens, config.n_heads)
    keep = np.ones(labels.shape, dtype=bool)  # (B,): every image counts
    loss, d_logits = token_entropy(f.logits, labels, keep, config.label_smoothing)  # float, (B, K)
    d_final, d_head = linear_grads(f.final, params.head, d_logits)  # (B, d), (d, K)
    dz = np.zeros(f.attention.shape[:1] + params.positions.shape)  # (B, T, d): only [CLS] reaches the loss
    dz[:, 0] = d_final
    layer_grads = []
    for back in reversed(f.backs):
        d_layer, dz = back(dz)  # EncoderLayerWeights, (B, T, d)
        layer_grads.append(d_layer)
    d_embedded = dz[:, 1:]  # (B, n_patches, d)
    _, d_embed = linear_grads(tokens, params.embed, d_embedded)  # (p * p, d)
    return loss, ViTParams(d_embed, d_embedded.sum(axis=(0, 1)), dz[:, 0].sum(axis=0), dz.sum(axis=0),
                           tuple(reversed(layer_grads)), d_head, d_logits.sum(axis=0))


def vit_loss_and_gradients(params: ViTParams, batch: tuple, config: ViTConfig) -> tuple[float, ViTParams]:
    r"""Mean cross-entropy of a batch of digits and its gradient for every parameter.

    .. math:: L = -\frac{1}{B} \sum_b \sum_k y_{bk} \log \operatorname{softmax}(\text{logits}_b)_k, \qquad
              \frac{\partial L}{\partial E_\text{pos}} = \sum_b \frac{\partial L}{\partial Z_{0,b}}, \qquad
              \frac{\partial L}{\partial c} = \sum_b \frac{\partial L}{\partial Z_{0,b}}[0]

    ``y`` is the one-hot label, mixed with the uniform distribution by ``config.label_smoothing``. The
    gradient runs back through the classifier, the layers' vector-Jacobian products
    (:func:`attnbook.learning.layers.encoder_layer_vjp`) and the patch embedding.

    Parameters
    ----------
    params : ViTParams
        The parameters.
    batch : tuple
        ``(images, labels)``: ``(B, 8, 8)`` grey levels 0 .. 16 and ``(B,)`` digits.
    config : ViTConfig
        The sizes and the label smoothing.

    Returns
    -------
    tuple
        ``(loss, grads)``, ``grads`` a :class:`ViTParams` of gradients.

    Examples
    --------
    >>> config = ViTConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1)
    >>> split = load_digits_split()
    >>> loss, grads = vit_loss_and_gradients(init_vit(config), (split.train_images[:8], split.train_labels[:8]),
    ...                                      config)
    >>> round(loss, 1), grads.cls.shape
    (2.6, (8,))
    """
    config = _check_config(config)
    params = _check_params(params, config)
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise TypeError("batch must be a pair (images, labels)")
    pixels = _check_images(batch[0], config, "batch[0]")  # (B, H, W)
    labels = _check_labels(batch[1], pixels.shape[0], config)  # (B,)
    return loss_and_gradients(params, (to_tokens(pixels, config), labels), config)


def predict(params: ViTParams, tokens: np.ndarray, n_heads: int, chunk: int = 512) -> np.ndarray:
    """Unchecked kernel: the predicted class of each image, a few hundred at a time.

    >>> config = ViTConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1)
    >>> predict(init_vit(config), np.zeros((3, 16, 4)), 2).shape
    (3,)
    """
    return np.concatenate([forward(params, tokens[start:start + chunk], n_heads).logits.argmax(axis=1)
                           for start in range(0, tokens.shape[0], chunk)])  # (n,)


def vit_accuracy(params: ViTParams, images, labels, config: ViTConfig) -> float:
    r"""Share of the images whose largest logit is their label.

    .. math:: \operatorname{acc} = \frac{1}{n} \sum_i [\arg\max_k \text{logits}_{ik} = y_i]

    Parameters
    ----------
    params : ViTParams
        The parameters.
    images : array_like
        ``(n, 8, 8)`` grey levels 0 .. 16.
    labels : array_like of int
        ``(n,)`` digits.
    config : ViTConfig
        The sizes.

    Returns
    -------
    float
        The accuracy, in ``[0, 1]``.

    Examples
    --------
    >>> params, config, record = load_vit()
    >>> split = load_digits_split(config.test_fraction, config.split_seed)
    >>> vit_accuracy(params, split.test_images, split.test_labels, config) >= 0.95
    True
    """
    config = _check_config(config)
    params = _check_params(params, config)
    pixels = _check_images(images, config)  # (n, H, W)
    labels = _check_labels(labels, pixels.shape[0], config)  # (n,)
    return float(np.mean(predict(params, to_tokens(pixels, config), config.n_heads) == labels))


def confusion_matrix(labels, predicted, n_classes: int = 10) -> np.ndarray:
    r"""Counts of (true class, predicted class) pairs; the diagonal holds the correct answers.

    .. math:: C_{jk} = \#\{\, i : y_i = j,\ \hat y_i = k \,\}

    Parameters
    ----------
    labels : array_like of int
        ``(n,)`` true classes.
    predicted : array_like of int
        ``(n,)`` predicted classes.
    n_classes : int, optional
        Number of classes; default 10.

    Returns
    -------
    ndarray
        ``(n_classes, n_classes)`` int64, rows the true class, columns the prediction.

    Examples
    --------
    >>> confusion_matrix([0, 1, 1], [0, 1, 0], n_classes=2).tolist()
    [[1, 0], [1, 1]]
    """
    n_classes = check_positive_int(n_classes, "n_classes")
    labels, predicted = np.asarray(labels), np.asarray(predicted)  # (n,), (n,)
    if labels.shape != predicted.shape or labels.ndim != 1:
        raise ValueError(f"labels has shape {labels.shape} and predicted {predicted.shape}; expected equal (n,)")
    for name, values in (("labels", labels), ("predicted", predicted)):
        if values.size and (values.dtype.kind not in "iu" or values.min() < 0 or values.max() >= n_classes):
            raise ValueError(f"{name} must be integers in 0 .. {n_classes - 1}")
    counts = np.zeros((n_classes, n_classes), dtype=np.int64)  # (K, K)
    np.add.at(counts, (labels, predicted), 1)
    return counts


# --- what the model attends to ----------------------------------------------------------------------------


def cls_attention(params: ViTParams, images, config: ViTConfig) -> np.ndarray:
    r"""The weights the ``[CLS]`` token's query gives the 16 patches, in every layer and head.

    .. math:: a^{(l,h)}_j = \operatorname{softmax}_{j'}\Bigl(\frac{q^{(l,h)}_\text{CLS} \cdot k^{(l,h)}_{j'}}
              {\sqrt{d_\text{head}}}\Bigr)_j, \qquad j = 1, \dots, n_\text{patches}

    Row 0 of each attention map (the ``[CLS]`` query) without its column 0: the weight ``[CLS]`` gives
    itself is ``1 - a.sum(-1)``. Patch ``j`` (0-based here) sits in grid row ``j // grid``, column
    ``j % grid``.

    Parameters
    ----------
    params : ViTParams
        The parameters.
    images : array_like
        ``(n, 8, 8)`` grey levels 0 .. 16.
    config : ViTConfig
        The sizes.

    Returns
    -------
    ndarray
        ``(n, n_layers, n_heads, n_patches)``, each slice summing to at most 1.

    Examples
    --------
    >>> params, config, _ = load_vit()
    >>> split = load_digits_split(config.test_fraction, config.split_seed)
    >>> cls_attention(params, split.test_images[:2], config).shape
    (2, 2, 2, 16)
    """
    return vit_forward(params, images, config).attention[..., 0, 1:]  # (n, L, h, n_patches)


def attention_rollout(attention) -> np.ndarray:
    r"""Attention rollout (Abnar and Zuidema, 2020): how much each token's input flows into each output.

    .. math:: \hat A_l = \operatorname{rownorm}\Bigl(\tfrac12 \bar A_l + \tfrac12 I\Bigr), \qquad
              R = \hat A_L \hat A_{L-1} \cdots \hat A_1

    where :math:`\bar A_l` is layer ``l``'s attention averaged over its heads and the identity stands
    for the residual connection. Row 0 of ``R`` without its column 0 says how much of each patch the
    final ``[CLS]`` vector holds, through every layer.

    Parameters
    ----------
    attention : array_like
        ``(..., n_layers, n_heads, T, T)`` attention maps, first layer first (``vit_forward(...).attention``).

    Returns
    -------
    ndarray
        ``(..., T, T)`` the rollout; every row sums to 1.

    Examples
    --------
    >>> a = np.array([[[[0.0, 1.0], [0.0, 1.0]]]] * 2)             # (L, h, T, T): both layers copy token 1
    >>> attention_rollout(a).tolist()
    [[0.25, 0.75], [0.0, 1.0]]
    """
    a = as_float_array(attention, "attention")  # (..., L, h, T, T)
    if a.ndim < 4 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"attention has shape {a.shape}; expected (..., n_layers, n_heads, T, T)")
    n_tokens = a.shape[-1]
    mixed = 0.5 * a.mean(axis=-3) + 0.5 * np.eye(n_tokens)  # (..., L, T, T)
    mixed = mixed / mixed.sum(axis=-1, keepdims=True)  # (..., L, T, T)
    rollout = np.broadcast_to(np.eye(n_tokens), mixed.shape[:-3] + (n_tokens, n_tokens)).copy()  # (..., T, T)
    for layer in range(mixed.shape[-3]):
        rollout = mixed[..., layer, :, :] @ rollout  # (..., T, T)
    return rollout


def position_similarity(params: ViTParams) -> np.ndarray:
    r"""Cosine similarity between the learned position embeddings of every pair of patches.

    .. math:: S_{ij} = \frac{e_i \cdot e_j}{\lVert e_i \rVert\, \lVert e_j \rVert}, \qquad
              e_i = E_\text{pos}[1 + i]

    Parameters
    ----------
    params : ViTParams
        The parameters (the ``[CLS]`` row of the positions is left out).

    Returns
    -------
    ndarray
        ``(n_patches, n_patches)``, ones on the diagonal.

    Examples
    --------
    >>> params, _, _ = load_vit()
    >>> similarity = position_similarity(params)
    >>> similarity.shape, round(float(similarity[5, 5]), 6)
    ((16, 16), 1.0)
    """
    if not isinstance(params, ViTParams):
        raise TypeError(f"params must be ViTParams, got {type(params).__name__}")
    e = as_float_array(params.positions, "params.positions")[1:]  # (n_patches, d)
    unit = e / np.linalg.norm(e, axis=1, keepdims=True)  # (n_patches, d)
    return unit @ unit.T  # (n_patches, n_patches)


def grid_distances(grid: int) -> np.ndarray:
    r"""City-block distances between the cells of a ``grid x grid`` layout in row-major order.

    .. math:: D_{ij} = |r_i - r_j| + |c_i - c_j|, \qquad r_i = \lfloor i / g \rfloor,\ c_i = i \bmod g

    Parameters
    ----------
    grid : int
        Cells per side.

    Returns
    -------
    ndarray
        ``(grid ** 2, grid ** 2)`` int64.

    Examples
    --------
    >>> grid_distances(2).tolist()
    [[0, 1, 1, 2], [1, 0, 2, 1], [1, 2, 0, 1], [2, 1, 1, 0]]
    """
    grid = check_positive_int(grid, "grid")
    rows, cols = np.divmod(np.arange(grid * grid), grid)  # (g * g,), (g * g,)
    return np.abs(rows[:, None] - rows[None, :]) + np.abs(cols[:, None] - cols[None, :])  # (g * g, g * g)


def similarity_by_distance(similarity, grid: int) -> np.ndarray:
    r"""Mean similarity of the pairs of cells at each city-block distance on the grid.

    .. math:: m_k = \operatorname{mean}\{\, S_{ij} : D_{ij} = k \,\}, \qquad k = 1, \dots, 2(g - 1)

    Parameters
    ----------
    similarity : array_like
        ``(grid ** 2, grid ** 2)`` a similarity of cells, e.g. :func:`position_similarity`.
    grid : int
        Cells per side.

    Returns
    -------
    ndarray
        ``(2 * (grid - 1),)`` the mean at distances ``1, 2, ..., 2 (grid - 1)``.

    Examples
    --------
    >>> similarity = -grid_distances(2).astype(float)
    >>> similarity_by_distance(similarity, 2).tolist()
    [-1.0, -2.0]
    """
    grid = check_positive_int(grid, "grid")
    s = as_float_array(similarity, "similarity")  # (g * g, g * g)
    if s.shape != (grid * grid, grid * grid):
        raise ValueError(f"similarity has shape {s.shape}; a {grid} x {grid} grid needs {(grid * grid,) * 2}")
    distance = grid_distances(grid)  # (g * g, g * g)
    return np.array([s[distance == k].mean() for k in range(1, 2 * (grid - 1) + 1)])  # (2 (g - 1),)


# --- figures ----------------------------------------------------------------------------------------------


def plot_cls_attention(image, maps, titles=None, *, vmax=None):
    """Draw a digit, then each attention map over its patches with the digit's outline on top; return the figure.

    .. math:: \\text{map}_j \\ \\text{fills patch } j \\text{ (grid row } \\lfloor j / g \\rfloor,
              \\text{ column } j \\bmod g)

    The maps use the package's colour-blind-safe ``COLOUR_MAP`` (:mod:`attnbook.plotting`), all on one
    scale, from 0 to the largest weight shown; the digit's ink (grey level 8 of 16) is outlined in white.

    Parameters
    ----------
    image : array_like
        ``(8, 8)`` grey levels 0 .. 16.
    maps : array_like
        ``(n_maps, n_patches)`` weights over the patches, e.g. ``cls_attention(...)[i, -1]`` (one row
        per head) or a rollout row.
    titles : sequence of str, optional
        One title per map; default "map 1", "map 2", ...
    vmax : float, optional
        Top of the colour scale; default the largest weight.

    Returns
    -------
    matplotlib.figure.Figure
        One panel for the digit and one per map, with a colour bar.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> fig = plot_cls_attention(np.eye(8) * 16, np.full((2, 16), 1 / 16), titles=["head 1", "head 2"])
    >>> [ax.get_title() for ax in fig.axes[:3]]
    ['digit', 'head 1', 'head 2']
    """
    import matplotlib.pyplot as plt

    from ..plotting import COLOUR_MAP

    pixels = as_float_array(image, "image")  # (H, W)
    values = as_float_array(maps, "maps")  # (n_maps, n_patches)
    if pixels.ndim != 2 or pixels.shape[0] != pixels.shape[1]:
        raise ValueError(f"image has shape {pixels.shape}; expected a square (H, H) image")
    if values.ndim != 2:
        raise ValueError(f"maps has shape {values.shape}; expected (n_maps, n_patches)")
    grid = math.isqrt(values.shape[1])
    side = pixels.shape[0]
    if grid * grid != values.shape[1] or side % grid:
        raise ValueError(f"maps has {values.shape[1]} patches per map; expected a square grid whose side "
                         f"divides the image side {side}")
    titles = [f"map {i + 1}" for i in range(values.shape[0])] if titles is None else [str(t) for t in titles]
    if len(titles) != values.shape[0]:
        raise ValueError(f"titles has {len(titles)} entries but maps has {values.shape[0]} rows")
    top = float(values.max()) if vmax is None else float(vmax)
    n_panels = values.shape[0] + 1
    fig, axes = plt.subplots(1, n_panels, figsize=(1.9 * n_panels + 0.6, 2.2))
    extent = (-0.5, side - 0.5, side - 0.5, -0.5)  # pixel centres at integer coordinates
    axes[0].imshow(pixels, cmap="gray_r", vmin=0, vmax=_GREY_LEVELS)
    axes[0].set_title("digit")
    image_ = None
    for ax, row, title in zip(axes[1:], values, titles):
        image_ = ax.imshow(row.reshape(grid, grid), cmap=COLOUR_MAP, vmin=0, vmax=top if top > 0 else 1,
                           extent=extent, interpolation="nearest")  # each patch one block
        ax.contour(np.arange(side), np.arange(side), pixels, levels=[_GREY_LEVELS / 2], colors="white",
                   linewidths=1.2)
        ax.set_title(title)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(image_, ax=list(axes[1:]), fraction=0.046, pad=0.04, label="attention weight")
    return fig


def plot_position_similarity(similarity, grid: int):
    """For each patch, the similarity of its position embedding to every other patch's, laid out on the grid.

    .. math:: \\text{panel } (r, c) \\text{ cell } (r', c') = S_{r g + c,\\ r' g + c'}

    The figure of Dosovitskiy et al. (2021, figure 7): if the embeddings learned the grid, each panel
    is bright around its own cell. Colours are ``COLOUR_MAP`` on ``[-1, 1]``.

    Parameters
    ----------
    similarity : array_like
        ``(grid ** 2, grid ** 2)`` e.g. :func:`position_similarity`.
    grid : int
        Patches per side.

    Returns
    -------
    matplotlib.figure.Figure
        ``grid x grid`` panels and a colour bar.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> fig = plot_position_similarity(np.eye(4), 2)
    >>> len(fig.axes)
    5
    """
    import matplotlib.pyplot as plt

    from ..plotting import COLOUR_MAP

    grid = check_positive_int(grid, "grid")
    s = as_float_array(similarity, "similarity")  # (g * g, g * g)
    if s.shape != (grid * grid, grid * grid):
        raise ValueError(f"similarity has shape {s.shape}; a {grid} x {grid} grid needs {(grid * grid,) * 2}")
    fig, axes = plt.subplots(grid, grid, figsize=(0.75 * grid + 0.9, 0.75 * grid), squeeze=False)
    image_ = None
    for index, ax in enumerate(axes.ravel()):
        image_ = ax.imshow(s[index].reshape(grid, grid), cmap=COLOUR_MAP, vmin=-1, vmax=1)
        ax.set_xticks([])
        ax.set_yticks([])
    for r in range(grid):
        axes[r, 0].set_ylabel(str(r + 1), rotation=0, labelpad=8)
        axes[-1, r].set_xlabel(str(r + 1))
    fig.supxlabel("patch column", fontsize=9, y=-0.06)
    fig.supylabel("patch row", fontsize=9, x=-0.02)
    fig.colorbar(image_, ax=list(axes.ravel()), fraction=0.046, pad=0.04, label="cosine similarity")
    return fig


# --- training and the stored model ---------------------------------------------------------------------


def shifted(images: np.ndarray, rng: np.random.Generator, shift: int) -> np.ndarray:
    """Unchecked kernel: each image translated by a random whole number of pixels in ``-shift .. shift`` per axis.

    Pixels that leave the frame are dropped; zeros (blank paper) fill in.

    >>> out = shifted(np.ones((2, 8, 8)), np.random.default_rng(0), 1)
    >>> out.shape, float(out.max())
    ((2, 8, 8), 1.0)
    """
    if shift == 0:
        return images
    n, side, _ = images.shape
    padded = np.pad(images, ((0, 0), (shift, shift), (shift, shift)))  # (n, H + 2s, W + 2s)
    rows, cols = rng.integers(0, 2 * shift + 1, size=(2, n))  # (n,), (n,): the window's corner
    index = np.arange(side)  # (H,)
    r = (rows[:, None] + index[None, :])[:, :, None]  # (n, H, 1)
    c = (cols[:, None] + index[None, :])[:, None, :]  # (n, 1, W)
    return padded[np.arange(n)[:, None, None], r, c]  # (n, H, W)


def train(seed: int = 0, progress: bool = True, n_steps: int | None = None, config: ViTConfig | None = None):
    r"""Train the Vision Transformer on the training digits; return ``(params, record)`` for the store.

    .. math:: \theta_{t+1} = \operatorname{Adam}\bigl(\theta_t, \operatorname{clip}(\nabla_\theta L(\theta_t;
              \text{batch}_t)),\ \eta_t\bigr), \qquad \eta_t = \eta \min(1, t / t_\text{warm-up})

    Batches of ``config.batch_size`` training images are drawn with replacement (shifted by up to
    ``config.shift`` pixels) from a generator seeded with ``seed``; the parameters are ``init_vit(config,
    seed)``. The record holds the configuration, the loss of every step, the metrics on the fixed test
    split and the training time. ``python -m tools.train digits_vit`` runs this and stores the result.

    Parameters
    ----------
    seed : int, optional
        Seeds the parameters and the batches; default 0.
    progress : bool, optional
        Show a progress bar; default True.
    n_steps : int, optional
        Stop after this many steps (a shortened rerun of the same schedule); default ``config.n_steps``.
    config : ViTConfig, optional
        The hyperparameters; default ``ViTConfig()``.

    Returns
    -------
    tuple
        ``(params, record)``: :class:`ViTParams` and a JSON-serialisable dict.

    Examples
    --------
    >>> config = ViTConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1)
    >>> params, record = train(n_steps=3, progress=False, config=config)
    >>> len(record["losses"]), record["config"]["d_model"]
    (3, 8)
    """
    config = _check_config(ViTConfig() if config is None else config)
    total = config.n_steps if n_steps is None else check_positive_int(n_steps, "n_steps")
    split = load_digits_split(config.test_fraction, config.split_seed)
    train_images = split.train_images.astype(np.float64)  # (n_train, H, W)
    train_labels = split.train_labels.astype(np.int64)  # (n_train,)

    def next_batch(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        chosen = rng.integers(0, train_labels.size, size=config.batch_size)  # (B,)
        images = shifted(train_images[chosen], rng, config.shift)  # (B, H, W)
        return to_tokens(images, config), train_labels[chosen]  # (B, n_patches, p * p), (B,)

    start = time.perf_counter()
    params, history = fit(init_vit(config, seed), lambda p, batch: loss_and_gradients(p, batch, config),
                          next_batch, total, d_model=config.d_model, warmup=config.warmup,
                          learning_rate=config.learning_rate,
                          max_norm=config.max_norm, seed=seed, progress=progress)
    seconds = time.perf_counter() - start
    metrics = evaluate(params, config, split)
    losses = [float(loss) for loss in history.losses]
    metrics["final_loss"] = float(np.mean(losses[-100:]))
    record = {"config": config._asdict(), "seed": int(seed), "n_steps": int(total), "losses": losses,
              "metrics": metrics, "seconds": round(seconds, 1)}
    return params, record


def evaluate(params: ViTParams, config: ViTConfig, split) -> dict:
    """Unchecked kernel: the metrics of the record (accuracies, the errors, the position similarity by distance).

    >>> config = ViTConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1)
    >>> sorted(evaluate(init_vit(config), config, load_digits_split()))[:2]
    ['errors', 'n_test']
    """
    test_tokens = to_tokens(split.test_images.astype(np.float64), config)  # (n_test, n_patches, p * p)
    predicted = predict(params, test_tokens, config.n_heads)  # (n_test,)
    wrong = np.flatnonzero(predicted != split.test_labels)  # (n_errors,)
    train_predicted = predict(params, to_tokens(split.train_images.astype(np.float64), config), config.n_heads)
    grid = config.image_side // config.patch
    by_distance = similarity_by_distance(position_similarity(params), grid)  # (2 (g - 1),)
    return {
        "test_accuracy": float(np.mean(predicted == split.test_labels)),
        "train_accuracy": float(np.mean(train_predicted == split.train_labels)),
        "n_test": int(split.test_labels.size),
        "n_test_errors": int(wrong.size),
        "errors": [{"index": int(i), "label": int(split.test_labels[i]), "predicted": int(predicted[i])}
                   for i in wrong],
        "position_similarity_by_distance": [float(m) for m in by_distance],
    }


def load_vit(directory=None) -> tuple[ViTParams, ViTConfig, dict]:
    """The trained Vision Transformer shipped with the package: ``params, config, record = load_vit()``.

    .. math:: \\texttt{digits\\_vit.npz}, \\texttt{digits\\_vit.json} \\mapsto (\\theta, \\text{config}, \\text{record})

    Parameters
    ----------
    directory : str or Path, optional
        Another folder of trained models; default the package's ``data/trained``.

    Returns
    -------
    tuple
        ``(params, config, record)``: :class:`ViTParams`, the :class:`ViTConfig` it was trained with
        and the training record (loss curve, metrics, seconds).

    Examples
    --------
    >>> params, config, record = load_vit()
    >>> config.d_model, record["metrics"]["test_accuracy"] >= 0.95
    (32, True)
    """
    path = trained_path(MODEL_NAME, ".json", directory)
    if not path.exists():
        raise FileNotFoundError(f"no trained model {MODEL_NAME!r} in {path.parent}: run `make train` to make it")
    config = ViTConfig(**json.loads(path.read_text())["config"])  # the template's sizes
    params, record = load_trained(MODEL_NAME, init_vit(config), directory)
    return params, config, record
