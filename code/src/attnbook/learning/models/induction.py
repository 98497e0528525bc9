"""A two-layer decoder-only Transformer that learns an induction head on repeated random tokens.

The data (:func:`attnbook.learning.tasks.repeated_sequence_batch`): ``h`` random tokens, then the same
``h`` tokens again. The model predicts every next token. Nothing predicts the first half, so its loss
stays at ``ln V``; the second half can be copied, and a two-layer model learns to copy it with two
heads that work together (Olsson et al., 2022): a **previous-token head** in layer 1 (position ``s``
attends to ``s - 1``) and an **induction head** in layer 2 (position ``t`` finds the position after the
earlier occurrence of its own token, and copies the token there).

The layers are the package's post-norm :func:`attnbook.encoder_layer` with a causal mask, on the scaffold
of every model (:mod:`attnbook.learning.models.scaffold`). Positions are sinusoidal, added at twice their
usual amplitude (a sharper previous-token head in trials); the half length varies from batch to batch,
so no head can find the copy by its position alone. The heads' scores, ablations and the emergence step
are :mod:`attnbook.learning.analysis.induction`; which circuit forms depends on the seed.

>>> config = InductionConfig(vocab_size=8, d_model=8, d_ff=8, batch_size=2, min_half_length=3,
...                          max_half_length=3)
>>> params = init_induction_model(config, seed=0)
>>> tokens = induction_batch(np.random.default_rng(0), config)           # (batch, 2h)
>>> forward = induction_forward(params, tokens[:, :-1], config)
>>> forward.logits.shape, forward.attention.shape                       # (batch, n, V), (layers, batch, h, n, n)
((2, 5, 8), (2, 2, 1, 5, 5))
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...masks import causal_mask
from ...positional import sinusoidal_encoding
from ...transformer import EncoderLayerWeights, init_encoder_layer
from ...validation import Array, Stack, check_positive_int
from ..gradients import token_entropy
from ..layers import embedding_vjp, encoder_layer_vjp, tied_logits_vjp
from ..tasks import repeated_sequence_batch
from . import scaffold

__all__ = ["MODEL", "InductionConfig", "InductionParameters", "check_sequences", "check_tokens", "induction_batch",
           "induction_forward", "induction_loss_and_gradients", "init_induction_model", "load_induction"]


class InductionConfig(NamedTuple):
    """Hyperparameters of the induction model, its data and its training.

    Attributes
    ----------
    vocab_size, min_half_length, max_half_length : int
        The data: ``V`` tokens ``0 .. V - 1``, and the range each batch draws its half length ``h`` from.
    d_model, n_heads, d_ff : int
        The model: width, heads per layer, feed-forward width.
    position_scale : float
        The sinusoidal encodings are added to the token embeddings times this factor.
    batch_size, n_steps, warmup : int
        Training: sequences per batch, steps, warm-up steps of the Noam schedule.
    max_norm : float
        Gradients are clipped to this global norm.
    every, probe_half_length, probe_size : int
        The checkpoints: steps between two, and the half length and size of the fixed probe batch.

    Examples
    --------
    >>> InductionConfig().vocab_size, InductionConfig(d_model=16).d_model
    (32, 16)
    """

    vocab_size: int = 32
    min_half_length: int = 8
    max_half_length: int = 16
    d_model: int = 64
    n_heads: int = 1
    d_ff: int = 64
    position_scale: float = 2.0
    batch_size: int = 32
    n_steps: int = 3000
    warmup: int = 2000
    max_norm: float = 1.0
    every: int = 25
    probe_half_length: int = 12
    probe_size: int = 128


class InductionParameters(NamedTuple):
    """The learned weights: token embeddings, two post-norm layers, and a separate output table.

    Attributes
    ----------
    embedding, layers, unembedding
        ``(V, d_model)`` token embeddings ``E``; the two layers, in order, causal; ``(V, d_model)`` the
        output table ``U``: ``logits = x U^T`` (not tied to ``E``).

    Examples
    --------
    >>> p = init_induction_model(InductionConfig(vocab_size=5, d_model=4, d_ff=8))
    >>> p.embedding.shape, len(p.layers), p.unembedding.shape
    ((5, 4), 2, (5, 4))
    """

    embedding: Array["vocab_size, d_model"]  # E
    layers: Stack[EncoderLayerWeights, "n_layers"]  # two
    unembedding: Array["vocab_size, d_model"]  # U


def _check_config(config) -> InductionConfig:
    scaffold.check_config(config, InductionConfig, minimum={"min_half_length": 2, "max_half_length": 2,
                                                            "probe_half_length": 2})
    if config.min_half_length > config.max_half_length:
        raise ValueError(f"config.min_half_length = {config.min_half_length} is larger than "
                         f"config.max_half_length = {config.max_half_length}")
    if config.d_model % config.n_heads or config.d_model % 2:
        raise ValueError(f"config.d_model = {config.d_model} must be even (sinusoidal encodings) and divisible "
                         f"by config.n_heads = {config.n_heads}")
    return config


def init_induction_model(config: InductionConfig, seed: int = 0) -> InductionParameters:
    r"""Seeded initial weights: Gaussian embeddings, the package's encoder layers, a Gaussian output table.

    .. math:: E_{ij} \sim \mathcal{N}(0, 1), \qquad U_{ij} \sim \mathcal{N}(0, 1 / d_\text{model})

    The layers come from :func:`attnbook.init_encoder_layer` with seeds ``seed + 1`` and ``seed + 3``
    (each uses its seed and the next one).

    Parameters
    ----------
    config, seed
        The sizes, and the seed of the embeddings and the output table (the base of the layers' seeds).

    Returns
    -------
    InductionParameters
        The initial weights.

    Examples
    --------
    >>> p = init_induction_model(InductionConfig(vocab_size=6, d_model=4, d_ff=8), seed=1)
    >>> p.layers[0].self_attention.w_q.shape, p.layers[1].feed_forward.w_1.shape
    ((4, 4), (4, 8))
    """
    config = _check_config(config)
    seed = check_positive_int(seed, "seed", 0)
    rng = np.random.default_rng(seed)
    embedding = rng.standard_normal((config.vocab_size, config.d_model))  # (V, d_model)
    unembedding = rng.standard_normal((config.vocab_size, config.d_model)) / math.sqrt(config.d_model)  # (V, d)
    layers = tuple(init_encoder_layer(config.d_model, config.d_ff, seed=seed + 1 + 2 * index) for index in range(2))
    return InductionParameters(embedding, layers, unembedding)


def check_tokens(tokens, config: InductionConfig, name: str = "tokens") -> np.ndarray:
    """``tokens`` as an integer array ``(batch, n)`` of ids in ``0 .. V - 1``, else an error naming ``name``.

    Parameters
    ----------
    tokens, config, name
        The token ids, the configuration (its ``vocab_size``), their name in errors.

    Returns
    -------
    ndarray
        ``(batch, n)``.

    Examples
    --------
    >>> check_tokens(np.array([[0, 9]]), InductionConfig(vocab_size=5, d_model=4, d_ff=8))
    Traceback (most recent call last):
    ...
    ValueError: tokens contains the id 9, outside 0 .. 4
    """
    tokens = np.asarray(tokens)  # (batch, n)
    if tokens.dtype.kind not in "iu":
        raise TypeError(f"{name} has dtype {tokens.dtype}; expected integer token ids")
    if tokens.ndim != 2 or tokens.shape[1] < 1:
        raise ValueError(f"{name} has shape {tokens.shape}; expected (batch, n) token ids")
    outside = (tokens < 0) | (tokens >= config.vocab_size)  # (batch, n)
    if outside.any():
        raise ValueError(f"{name} contains the id {int(tokens[outside].flat[0])}, outside 0 .. {config.vocab_size - 1}")
    return tokens


def _dims(config: InductionConfig):
    return scaffold.config_dims(config, ("vocab_size", "d_model", "d_ff"), n_layers=(2, "the model has 2 layers"))


def check_sequences(params, tokens, config: InductionConfig) -> tuple:
    """The boundary of every loss: ``(params, tokens)`` checked, each sequence long enough to predict a token.

    Parameters
    ----------
    params, tokens, config
        As in :func:`induction_loss_and_gradients`.

    Returns
    -------
    tuple
        ``(params, tokens)``.

    Examples
    --------
    >>> config = InductionConfig(vocab_size=5, d_model=4, d_ff=8)
    >>> check_sequences(init_induction_model(config), np.array([[1]]), config)
    Traceback (most recent call last):
    ...
    ValueError: tokens has shape (1, 1); a sequence needs 2 tokens to predict one
    """
    params, config = scaffold.check_model(MODEL, params, config)
    tokens = check_tokens(tokens, config)
    if tokens.shape[1] < 2:
        raise ValueError(f"tokens has shape {tokens.shape}; a sequence needs 2 tokens to predict one")
    return params, tokens


def taped(params: InductionParameters, tokens: np.ndarray, config: InductionConfig) -> tuple:
    """Unchecked kernel: the forward pass on ``tokens`` ``(batch, n)``; ``(Forward, back)``.

    >>> config = InductionConfig(vocab_size=5, d_model=4, d_ff=8)
    >>> out, back = taped(init_induction_model(config), np.array([[1, 2]]), config)
    >>> back(np.ones_like(out.logits)).embedding.shape
    (5, 4)
    """
    logits, results, back = stacked(params, tokens, config, encoder_layer_vjp.unchecked)  # (batch, n, V)
    return scaffold.Forward(logits, np.stack([r.weights for r in results])), back  # (layers, batch, h, n, n)


def stacked(params, tokens: np.ndarray, config: InductionConfig, layer_vjp) -> tuple:
    """Unchecked kernel: embed, run ``params.layers`` with ``layer_vjp``, read out; ``(logits, results, back)``.

    ``layer_vjp(x, layer, n_heads, mask)`` is a layer's vjp (:func:`~attnbook.learning.layers.encoder_layer_vjp`
    or the gated one); ``results`` its results, layer by layer; ``back(dlogits)`` the gradients, a tree like
    ``params`` (its ``embedding``, ``layers`` and ``unembedding``).

    >>> config = InductionConfig(vocab_size=5, d_model=4, d_ff=8)
    >>> logits, results, back = stacked(init_induction_model(config), np.array([[1, 2]]), config,
    ...                                 encoder_layer_vjp.unchecked)
    >>> logits.shape, len(results)
    ((1, 2, 5), 2)
    """
    n = tokens.shape[1]
    embedded, embedding_back = embedding_vjp.unchecked(params.embedding, tokens)  # (batch, n, d_model)
    x = embedded + config.position_scale * sinusoidal_encoding(n, config.d_model)  # (batch, n, d_model)
    mask = causal_mask(n)  # (n, n): position t sees 0 .. t
    results, backs = [], []
    for layer in params.layers:
        result, back = layer_vjp(x, layer, config.n_heads, mask)  # output (batch, n, d), weights (batch, h, n, n)
        x = result.output  # (batch, n, d_model)
        results.append(result)
        backs.append(back)
    logits, logits_back = tied_logits_vjp.unchecked(x, params.unembedding)  # (batch, n, V): x U^T

    def back(dlogits):
        dx, dunembedding = logits_back(dlogits)  # (batch, n, d_model), (V, d_model)
        layer_grads = []
        for layer_back in reversed(backs):
            grads, dx = layer_back(dx)  # dx: (batch, n, d_model)
            layer_grads.append(grads)
        return type(params)(embedding_back(dx), tuple(reversed(layer_grads)), dunembedding)

    return logits, results, back


def induction_forward(params: InductionParameters, tokens, config: InductionConfig) -> scaffold.Forward:
    r"""Run the model on ``tokens``: next-token logits at every position and every layer's attention.

    .. math:: X_0 = E[x] + c\,\mathrm{PE}, \quad X_\ell = \operatorname{EncoderLayer}_\ell(X_{\ell-1};
              \text{causal}), \quad \text{logits} = X_2 U^\top

    Parameters
    ----------
    params, tokens, config
        The weights; ``(batch, n)`` token ids in ``0 .. V - 1`` (position ``t`` predicts token ``t + 1``);
        the configuration the weights were made with.

    Returns
    -------
    Forward
        :class:`~attnbook.learning.models.scaffold.Forward`: ``logits`` ``(batch, n, V)``, ``attention``
        ``(2, batch, n_heads, n, n)``.

    Examples
    --------
    >>> config = InductionConfig(vocab_size=5, d_model=4, d_ff=8)
    >>> forward = induction_forward(init_induction_model(config), np.array([[1, 2, 3]]), config)
    >>> forward.logits.shape, bool(forward.attention[0, 0, 0, 0, 1] == 0)     # causal: 0 cannot see 1
    ((1, 3, 5), True)
    >>> induction_forward(init_induction_model(config), np.array([[1, 5]]), config)
    Traceback (most recent call last):
    ...
    ValueError: tokens contains the id 5, outside 0 .. 4
    """
    params, config = scaffold.check_model(MODEL, params, config)
    return taped(params, check_tokens(tokens, config), config)[0]


def induction_loss_and_gradients(params: InductionParameters, tokens, config: InductionConfig) -> tuple:
    r"""Mean next-token cross-entropy of a batch of sequences, and its gradient for every weight.

    .. math:: L = -\frac{1}{B (n - 1)} \sum_{b} \sum_{t=0}^{n-2} \log p_\theta(x_{b, t+1} \mid x_{b, 0..t})

    The backward pass chains the vjp kernels of :mod:`attnbook.learning.layers`: the output table, the
    two encoder layers in reverse, the embedding lookup (the sinusoidal encodings are fixed).

    Parameters
    ----------
    params, tokens, config
        As in :func:`induction_forward`; ``tokens`` are whole sequences: the model reads ``tokens[:, :-1]``
        and predicts ``tokens[:, 1:]``.

    Returns
    -------
    tuple
        ``(loss, grads)``: a float and an :class:`InductionParameters` of gradients.

    Examples
    --------
    >>> config = InductionConfig(vocab_size=5, d_model=4, d_ff=8)
    >>> loss, grads = induction_loss_and_gradients(init_induction_model(config), np.array([[1, 2, 3, 1]]), config)
    >>> grads.embedding.shape, bool(loss > 0)
    ((5, 4), True)
    """
    params, tokens = check_sequences(params, tokens, config)
    return scaffold.loss_and_gradients(MODEL, params, tokens, config)


def draw(rng: np.random.Generator, config: InductionConfig) -> np.ndarray:
    """Unchecked kernel of :func:`induction_batch`: a half length drawn from the configured range, then repeated random tokens.

    >>> draw(np.random.default_rng(0), InductionConfig(batch_size=1, max_half_length=8)).shape
    (1, 16)
    """
    half_length = int(rng.integers(config.min_half_length, config.max_half_length + 1))
    return repeated_sequence_batch(config.batch_size, half_length, config.vocab_size, rng)  # (batch, 2h)


MODEL = scaffold.Model(
    name="induction", config=InductionConfig, init=lambda config, seed: init_induction_model(config, seed),
    forward=lambda params, tokens, config: taped(params, tokens[:, :-1], config),
    loss=lambda logits, tokens, config: token_entropy(logits, tokens[:, 1:], np.ones(tokens[:, 1:].shape, dtype=bool)),
    batch=draw,
    evaluate=lambda params, config: {},  # the record's metrics are the heads': attnbook.learning.analysis.induction
    fit_options=lambda c: {"d_model": c.d_model, "warmup": c.warmup, "max_norm": c.max_norm, "every": 25},
    layout=InductionParameters, check=_check_config, dims=_dims,
)

induction_batch = scaffold.batcher(MODEL)  # (batch_size, 2h): h drawn from the configured range, then repeated


load_induction = scaffold.loader(MODEL)  # Trained(params, config, record) of data/trained/induction
