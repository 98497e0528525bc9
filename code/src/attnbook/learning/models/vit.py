"""A tiny Vision Transformer (Dosovitskiy et al., 2021) trained on the 8 x 8 handwritten digits.

An 8 x 8 image is cut into 16 patches of 2 x 2 pixels (a 4 x 4 grid), each patch is mapped to a
``d_model`` vector by one linear layer, a learned ``[CLS]`` vector is put in front, a learned position
vector is added to each of the 17 tokens, and post-norm encoder layers mix them; the class is read
from the final ``[CLS]`` vector by a linear layer:

    Z_0 = [c ; P W_E + b_E] + E_pos,   Z_l = EncoderLayer_l(Z_{l-1}),   logits = Z_L[0] W_C + b_C

Nothing in the model says that patch 5 lies below patch 1: the grid has to be learned into ``E_pos``.
The model stands on the scaffold of every model (:mod:`attnbook.learning.models.scaffold`): its gradient
from the layers' vector-Jacobian products, its training :func:`attnbook.learning.loop.fit`; it ships as
``data/trained/digits_vit.npz`` (its test accuracy: :func:`vit_accuracy`). What it attends to is
:mod:`attnbook.learning.analysis.vit`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...transformer import EncoderLayerWeights, init_encoder_layer
from ...multihead import check_heads
from ...validation import Array, Stack
from ..gradients import linear_grads, token_entropy
from ..layers import encoder_layer_vjp
from ..digits import GREY_LEVELS, check_digits, draw_digits, image_patches, load_digits_split
from . import scaffold

__all__ = ["MODEL", "ViTConfig", "ViTParams", "init_vit", "load_vit", "vit_accuracy", "vit_forward",
           "vit_loss_and_gradients"]


class ViTConfig(NamedTuple):
    r"""Hyperparameters of the Vision Transformer and of its training.

    Attributes
    ----------
    image_side, patch, d_model, n_heads, d_ff, n_layers, n_classes : int
        The model: image side and patch side in pixels (the patch divides the side: 2 gives 16 patches),
        width, heads, feed-forward width, encoder layers, classes.
    batch_size, n_steps, warmup : int
        Training: images per step, steps, warm-up steps of the Noam schedule.
    learning_rate, max_norm, label_smoothing : float
        A constant rate of Adam instead of the schedule (None: the schedule), the clipping norm, the
        weight of the uniform distribution mixed into the targets.
    shift, test_fraction, split_seed
        Training images are translated by up to ``shift`` pixels each way (0: none); the share of the digits
        held out and the seed of the split (:func:`attnbook.learning.digits.load_digits_split`).

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
    """Parameters of the Vision Transformer (``T = n_patches + 1`` tokens, ``d = d_model``, ``K`` classes).

    Attributes
    ----------
    embed, embed_bias, cls, positions : ndarray
        The patch embedding :math:`W_E` ``(p * p, d)`` and its bias, the ``[CLS]`` token :math:`c`, the
        positions :math:`E_\text{pos}` ``(T, d)`` (row 0 is ``[CLS]``'s, row ``1 + r g + c`` grid cell ``(r, c)``'s).
    layers : tuple of EncoderLayerWeights
        The post-norm encoder layers.
    head, head_bias : ndarray
        The classifier :math:`W_C` ``(d, K)`` on the final ``[CLS]`` vector, and its bias.

    Examples
    --------
    >>> init_vit(ViTConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1)).positions.shape
    (17, 8)
    """

    embed: Array["patch_area, d_model"]  # W_E
    embed_bias: Array["d_model"]  # b_E
    cls: Array["d_model"]  # the [CLS] token c
    positions: Array["n_tokens, d_model"]  # E_pos
    layers: Stack[EncoderLayerWeights, "n_layers"]
    head: Array["d_model, n_classes"]  # W_C
    head_bias: Array["n_classes"]  # b_C


def _check_config(config) -> ViTConfig:
    """The one check of a configuration: positive sizes that fit together."""
    scaffold.check_config(config, ViTConfig, minimum={"shift": 0, "split_seed": 0}, own=("label_smoothing", "test_fraction"))
    if config.image_side % config.patch:
        raise ValueError(f"config.patch = {config.patch} must divide config.image_side = {config.image_side}")
    check_heads(config.d_model, config.n_heads)
    if not 0 <= config.label_smoothing < 1:
        raise ValueError(f"config.label_smoothing must be in [0, 1), got {config.label_smoothing!r}")
    if not 0 < config.test_fraction < 1:
        raise ValueError(f"config.test_fraction must be in (0, 1), got {config.test_fraction!r}")
    return config


def _dims(config: ViTConfig):
    n_tokens = (config.image_side // config.patch) ** 2 + 1
    return scaffold.config_dims(
        config, ("d_model", "n_layers", "d_ff", "n_classes"),
        patch_area=(config.patch ** 2, f"config.patch = {config.patch} gives {config.patch ** 2} pixels a patch"),
        n_tokens=(n_tokens, f"config.image_side and config.patch give {n_tokens} tokens"))


def _check_digits(images, labels, config: ViTConfig, name: str = "images") -> tuple:
    return check_digits(images, labels, config.image_side, config.n_classes, name)


def to_tokens(images: np.ndarray, config: ViTConfig) -> np.ndarray:
    """Unchecked kernel: grey levels ``(n, H, W)`` -> patches ``(n, n_patches, patch * patch)`` in ``[0, 1]``.

    >>> to_tokens(np.full((1, 8, 8), 16.0), ViTConfig()).shape
    (1, 16, 4)
    """
    return image_patches(images / GREY_LEVELS, config.patch)  # (n, n_patches, p * p)


def init_vit(config: ViTConfig, seed: int = 0) -> ViTParams:
    r"""Seeded parameters: Glorot-uniform matrices, zero biases, small normal ``[CLS]`` and positions.

    .. math:: W_E \sim \mathcal{U}\bigl(\pm\sqrt{6 / (p^2 + d)}\bigr), \quad
              c,\ E_\text{pos} \sim \mathcal{N}(0, 0.02^2), \quad W_C \sim \mathcal{U}\bigl(\pm\sqrt{6 / (d + K)}\bigr)

    Layer ``l`` is :func:`attnbook.init_encoder_layer` with seed ``seed + 10 (l + 1)``.

    Parameters
    ----------
    config, seed
        The sizes, and the seed of the parameters.

    Returns
    -------
    ViTParams
        The parameters.

    Examples
    --------
    >>> init_vit(ViTConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1), seed=1).head.shape
    (8, 10)
    """
    config = _check_config(config)
    rng = np.random.default_rng(seed)
    d, p2, n_classes = config.d_model, config.patch ** 2, config.n_classes
    limit_e, limit_c = math.sqrt(6 / (p2 + d)), math.sqrt(6 / (d + n_classes))
    embed = rng.uniform(-limit_e, limit_e, (p2, d))  # (p * p, d)
    cls = 0.02 * rng.standard_normal(d)  # (d,)
    positions = 0.02 * rng.standard_normal(((config.image_side // config.patch) ** 2 + 1, d))  # (T, d)
    head = rng.uniform(-limit_c, limit_c, (d, n_classes))  # (d, K)
    layers = tuple(init_encoder_layer(d, config.d_ff, seed=seed + 10 * (index + 1))
                   for index in range(config.n_layers))
    return ViTParams(embed, np.zeros(d), cls, positions, layers, head, np.zeros(n_classes))


def taped(params: ViTParams, tokens: np.ndarray, n_heads: int) -> tuple:
    """Unchecked kernel: the forward pass on patches ``(n, n_patches, p * p)``; ``(Forward, back)``.

    ``back(d_logits)`` returns the gradient of every parameter, a :class:`ViTParams`.

    >>> config = ViTConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1)
    >>> out, back = taped(init_vit(config), np.zeros((2, 16, 4)), 2)
    >>> out.logits.shape, back(np.ones((2, 10))).positions.shape
    ((2, 10), (17, 8))
    """
    n = tokens.shape[0]
    embedded = tokens @ params.embed + params.embed_bias  # (n, n_patches, d)
    cls = np.broadcast_to(params.cls, (n, 1, params.cls.shape[0]))  # (n, 1, d)
    z = np.concatenate([cls, embedded], axis=1) + params.positions  # (n, T, d)
    weights, backs = [], []
    for layer in params.layers:
        (z, attention), back = encoder_layer_vjp.unchecked(z, layer, n_heads)  # (n, T, d), (n, h, T, T)
        weights.append(attention)
        backs.append(back)
    final = z[:, 0]  # (n, d): the [CLS] token after the last layer
    logits = final @ params.head + params.head_bias  # (n, K)

    def back(d_logits):
        d_final, d_head = linear_grads(final, params.head, d_logits)  # (n, d), (d, K)
        dz = np.zeros(z.shape)  # (n, T, d): only [CLS] reaches the loss
        dz[:, 0] = d_final
        layer_grads = []
        for layer_back in reversed(backs):
            d_layer, dz = layer_back(dz)  # EncoderLayerWeights, (n, T, d)
            layer_grads.append(d_layer)
        d_embedded = dz[:, 1:]  # (n, n_patches, d)
        _, d_embed = linear_grads(tokens, params.embed, d_embedded)  # (p * p, d)
        return ViTParams(d_embed, d_embedded.sum(axis=(0, 1)), dz[:, 0].sum(axis=0), dz.sum(axis=0),
                         tuple(reversed(layer_grads)), d_head, d_logits.sum(axis=0))

    return scaffold.Forward(logits, np.stack(weights, axis=1)), back  # attention (n, L, h, T, T)


def vit_forward(params: ViTParams, images, config: ViTConfig) -> scaffold.Forward:
    r"""Class scores and attention maps of a batch of digits.

    .. math:: Z_0 = [c ; P W_E + b_E] + E_\text{pos}, \qquad Z_l = \operatorname{Enc}_l(Z_{l-1}), \qquad
              \text{logits} = Z_L[0]\, W_C + b_C

    Parameters
    ----------
    params, images, config
        The parameters; ``(n, 8, 8)`` grey levels 0 .. 16 (:func:`attnbook.learning.digits.load_digits_split`);
        the sizes the parameters were made with.

    Returns
    -------
    Forward
        :class:`~attnbook.learning.models.scaffold.Forward`: ``logits`` ``(n, K)`` and every layer's attention
        ``(n, n_layers, h, T, T)`` (token 0 is ``[CLS]``).

    Examples
    --------
    >>> params, config, _ = load_vit()
    >>> split = load_digits_split(config.test_fraction, config.split_seed)
    >>> bool(np.all(vit_forward(params, split.test_images[:4], config).logits.argmax(1) == split.test_labels[:4]))
    True
    """
    params, config = scaffold.check_model(MODEL, params, config)
    pixels = _check_digits(images, None, config)[0]  # (n, H, W)
    return taped(params, to_tokens(pixels, config), config.n_heads)[0]


def vit_loss_and_gradients(params: ViTParams, batch: tuple, config: ViTConfig) -> tuple[float, ViTParams]:
    r"""Mean (label-smoothed) cross-entropy of a batch of digits and its gradient (:func:`taped`'s ``back``).

    .. math:: L = -\frac{1}{B} \sum_b \sum_k y_{bk} \log \operatorname{softmax}(\text{logits}_b)_k, \qquad
              \frac{\partial L}{\partial E_\text{pos}} = \sum_b \frac{\partial L}{\partial Z_{0,b}}

    Parameters
    ----------
    params, batch, config
        As in :func:`vit_forward`; ``batch`` is ``(images, labels)``, ``(B, 8, 8)`` grey levels and ``(B,)`` digits.

    Returns
    -------
    tuple
        ``(loss, grads)``, ``grads`` a :class:`ViTParams`.

    Examples
    --------
    >>> config, split = ViTConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1), load_digits_split()
    >>> loss, grads = vit_loss_and_gradients(init_vit(config), (split.train_images[:8], split.train_labels[:8]), config)
    >>> round(loss, 1), grads.cls.shape
    (2.6, (8,))
    """
    params, config = scaffold.check_model(MODEL, params, config)
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise TypeError("batch must be a pair (images, labels)")
    pixels, labels = _check_digits(batch[0], batch[1], config, "batch[0]")  # (B, H, W), (B,)
    return scaffold.loss_and_gradients(MODEL, params, (to_tokens(pixels, config), labels), config)


def predict(params: ViTParams, tokens: np.ndarray, n_heads: int, chunk: int = 512) -> np.ndarray:
    """Unchecked kernel: the predicted class of each image, a few hundred at a time.

    >>> config = ViTConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1)
    >>> predict(init_vit(config), np.zeros((3, 16, 4)), 2).shape
    (3,)
    """
    return np.concatenate([taped(params, tokens[start:start + chunk], n_heads)[0].logits.argmax(axis=1)
                           for start in range(0, tokens.shape[0], chunk)])  # (n,)


def vit_accuracy(params: ViTParams, images, labels, config: ViTConfig) -> float:
    r"""Share of the images whose largest logit is their label.

    .. math:: \operatorname{acc} = \frac{1}{n} \sum_i [\arg\max_k \text{logits}_{ik} = y_i]

    Parameters
    ----------
    params, images, labels, config
        As in :func:`vit_forward`, with the ``(n,)`` digits.

    Returns
    -------
    float
        The accuracy, in ``[0, 1]``.

    Examples
    --------
    >>> params, config, record = load_vit()
    >>> split = load_digits_split(config.test_fraction, config.split_seed)
    >>> vit_accuracy(params, split.test_images, split.test_labels, config) == record["metrics"]["test_accuracy"]
    True
    """
    params, config = scaffold.check_model(MODEL, params, config)
    pixels, labels = _check_digits(images, labels, config)  # (n, H, W), (n,)
    return float(np.mean(predict(params, to_tokens(pixels, config), config.n_heads) == labels))


def _batch(rng: np.random.Generator, c: ViTConfig) -> tuple:
    images, labels = draw_digits(rng, c.batch_size, c.shift, c.test_fraction, c.split_seed)  # (B, H, W), (B,)
    return to_tokens(images, c), labels  # (B, n_patches, p * p), (B,)


def _evaluate(params: ViTParams, config: ViTConfig) -> dict:
    split = load_digits_split(config.test_fraction, config.split_seed)
    return {"test_accuracy": vit_accuracy(params, split.test_images, split.test_labels, config)}  # learning.trained


MODEL = scaffold.Model(
    name="digits_vit", config=ViTConfig, init=lambda config, seed: init_vit(config, seed),
    forward=lambda params, batch, config: taped(params, batch[0], config.n_heads),
    loss=lambda logits, batch, config: token_entropy(logits, batch[1], np.ones(batch[1].shape, dtype=bool),
                                                     config.label_smoothing),
    batch=_batch, evaluate=_evaluate,
    fit_options=lambda c: {"d_model": c.d_model, "warmup": c.warmup, "learning_rate": c.learning_rate,
                           "max_norm": c.max_norm},
    layout=ViTParams, check=_check_config, dims=_dims,
)


load_vit = scaffold.loader(MODEL)  # Trained(params, config, record) of data/trained/digits_vit
