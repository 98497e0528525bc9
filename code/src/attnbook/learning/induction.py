"""A two-layer decoder-only Transformer that learns an induction head on repeated random tokens.

The data (:func:`attnbook.learning.tasks.repeated_sequence_batch`): ``h`` random tokens, then the same
``h`` tokens again. The model predicts every next token. Nothing predicts the first half, so its loss
stays at ``ln V``; the second half can be copied, and a two-layer model learns to copy it with two
heads that work together (Olsson et al., 2022):

* a **previous-token head** in layer 1: position ``s`` attends to ``s - 1`` and writes "my predecessor
  was ``x_{s-1}``" into its own residual stream;
* an **induction head** in layer 2: position ``t`` looks for the position ``s`` whose predecessor is
  its own token ``x_t`` (its key is built from what layer 1 wrote there), which is ``s = t - h + 1``,
  the token after the earlier occurrence, and copies ``x_s``: the next token.

The layers are the package's post-norm :func:`attnbook.encoder_layer` with a causal mask, trained with
their backward passes (:func:`attnbook.learning.layers.encoder_layer_vjp`) by
:func:`attnbook.learning.loop.fit`. Positions are sinusoidal: the shift by one position is the same
rotation at every position (:func:`attnbook.positional.sinusoidal_shift_matrix`), so a single
``W_Q W_K^T`` can point every query at its predecessor; they are added at twice their usual amplitude,
which made that head sharper in trials. The half length varies from batch to batch, so no head can find
the copy by its position alone: it has to match tokens.

What the stored model shows (:func:`load_induction`; the numbers are in its record): the second-half
loss drops from about ``ln V`` to near 0 within a few hundred steps (the *emergence step*), while the
induction score of layer 2 jumps and layer 1 turns into a previous-token head at the first-half
positions, where the induction head reads its keys; layer 1 becomes a previous-token head in the second
half too, but only later. Silencing either head brings the second-half loss back above ``ln V / 2``.
Which circuit forms depends on the seed: other seeds find, instead or in part, a positional look-back
(layer 1 attending to a window of positions several tokens back) that copies worse.

>>> config = InductionConfig(vocab_size=8, d_model=8, d_ff=8, batch_size=2, min_half_length=3,
...                          max_half_length=3)
>>> params = init_induction_model(config, seed=0)
>>> tokens = induction_batch(np.random.default_rng(0), config)           # (batch, 2h)
>>> forward = induction_forward(params, tokens[:, :-1], config)
>>> forward.logits.shape, forward.attention.shape                       # (batch, n, V), (layers, batch, h, n, n)
((2, 5, 8), (2, 2, 1, 5, 5))
"""

from __future__ import annotations

import json
import math
import time
from typing import NamedTuple

import numpy as np

from ..masks import causal_mask
from ..positional import sinusoidal_encoding
from ..transformer import EncoderLayerWeights, init_encoder_layer
from ..validation import check_positive_int
from .gradients import log_softmax, token_entropy
from .layers import embedding_tape, encoder_layer_tape, tied_logits_tape
from .store import load_trained, trained_path
from .tasks import repeated_sequence_batch

__all__ = [
    "HeadScores",
    "InductionConfig",
    "InductionForward",
    "InductionParameters",
    "ablate_head",
    "emergence_step",
    "half_way_step",
    "head_scores",
    "induction_batch",
    "induction_forward",
    "induction_loss_and_gradients",
    "induction_metrics",
    "init_induction_model",
    "load_induction",
    "next_token_losses",
    "probe_tokens",
    "train",
]

NAME = "induction"  # the stored model: attnbook/data/trained/induction.npz and .json
HALF_LENGTHS = (4, 8, 12, 16, 20, 24)  # evaluated after training; 20 and 24 are longer than any training batch


class InductionConfig(NamedTuple):
    """Hyperparameters of the induction model, its data and its training.

    Attributes
    ----------
    vocab_size : int
        ``V``, tokens ``0 .. V - 1``.
    min_half_length, max_half_length : int
        Each training batch draws its half length ``h`` uniformly from this range.
    d_model : int
        The model width.
    n_heads : int
        Heads per layer.
    d_ff : int
        Hidden width of each feed-forward network.
    position_scale : float
        The sinusoidal encodings are added to the token embeddings times this factor.
    batch_size : int
        Sequences per training batch.
    n_steps : int
        Training steps.
    warmup : int
        Warm-up steps of the Noam schedule (its peak rate is ``(d_model warmup)^-1/2``).
    max_norm : float
        Gradients are clipped to this global norm.
    every : int
        Steps between two checkpoints of the probe measurements.
    probe_half_length : int
        Half length of the fixed probe batch on which the checkpoints are measured.
    probe_size : int
        Sequences in the probe batch.

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
    embedding : ndarray
        ``(V, d_model)`` the token embeddings ``E``.
    layers : tuple of EncoderLayerWeights
        The two layers, applied in order with a causal mask.
    unembedding : ndarray
        ``(V, d_model)`` the output table ``U``: ``logits = x U^T`` (not tied to ``E``).

    Examples
    --------
    >>> p = init_induction_model(InductionConfig(vocab_size=5, d_model=4, d_ff=8))
    >>> p.embedding.shape, len(p.layers), p.unembedding.shape
    ((5, 4), 2, (5, 4))
    """

    embedding: np.ndarray  # (V, d_model)
    layers: tuple  # (EncoderLayerWeights, EncoderLayerWeights)
    unembedding: np.ndarray  # (V, d_model)


class InductionForward(NamedTuple):
    """What :func:`induction_forward` returns: ``logits, attention = ...``.

    Attributes
    ----------
    logits : ndarray
        ``(batch, n, V)`` the next-token scores at every position.
    attention : ndarray
        ``(n_layers, batch, n_heads, n, n)`` the causal self-attention weights of each layer.

    Examples
    --------
    >>> config = InductionConfig(vocab_size=5, d_model=4, d_ff=8)
    >>> induction_forward(init_induction_model(config), np.array([[1, 2, 3]]), config).attention.shape
    (2, 1, 1, 3, 3)
    """

    logits: np.ndarray  # (batch, n, V)
    attention: np.ndarray  # (n_layers, batch, n_heads, n, n)


class HeadScores(NamedTuple):
    """Where the heads look in the second half of repeated sequences (see :func:`head_scores`).

    Attributes
    ----------
    previous_token : ndarray
        ``(n_layers, n_heads)`` mean weight of query ``t`` on key ``t - 1``, over the second half.
    induction : ndarray
        ``(n_layers, n_heads)`` mean weight of query ``t`` on key ``t - h + 1``, the token after the
        earlier occurrence of ``x_t``, over the second half.
    previous_token_first_half : ndarray
        ``(n_layers, n_heads)`` mean weight of query ``s`` on key ``s - 1`` over ``s = 1 .. h - 1``: the
        positions whose keys an induction head reads.

    Examples
    --------
    >>> HeadScores(np.zeros((2, 1)), np.ones((2, 1)), np.zeros((2, 1))).induction.tolist()
    [[1.0], [1.0]]
    """

    previous_token: np.ndarray  # (n_layers, n_heads): second-half queries, key t - 1
    induction: np.ndarray  # (n_layers, n_heads): second-half queries, key t - h + 1
    previous_token_first_half: np.ndarray  # (n_layers, n_heads): first-half queries 1 .. h - 1, key s - 1


def _checked_config(config) -> InductionConfig:
    if not isinstance(config, InductionConfig):
        raise TypeError(f"config must be an InductionConfig, got {type(config).__name__}")
    for name in ("vocab_size", "d_model", "n_heads", "d_ff", "batch_size", "n_steps", "warmup", "every",
                 "probe_size"):
        check_positive_int(getattr(config, name), f"config.{name}")
    for name in ("min_half_length", "max_half_length", "probe_half_length"):
        check_positive_int(getattr(config, name), f"config.{name}", 2)
    if config.min_half_length > config.max_half_length:
        raise ValueError(f"config.min_half_length = {config.min_half_length} is larger than "
                         f"config.max_half_length = {config.max_half_length}")
    if config.d_model % config.n_heads or config.d_model % 2:
        raise ValueError(f"config.d_model = {config.d_model} must be even (sinusoidal encodings) and divisible "
                         f"by config.n_heads = {config.n_heads}")
    for name in ("position_scale", "max_norm"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"config.{name} must be a positive finite number, got {value!r}")
    return config


def init_induction_model(config: InductionConfig, seed: int = 0) -> InductionParameters:
    r"""Seeded initial weights: Gaussian embeddings, the package's encoder layers, a Gaussian output table.

    .. math:: E_{ij} \sim \mathcal{N}(0, 1), \qquad U_{ij} \sim \mathcal{N}(0, 1 / d_\text{model})

    The layers come from :func:`attnbook.init_encoder_layer` with seeds ``seed + 1`` and ``seed + 3``
    (each uses its seed and the next one).

    Parameters
    ----------
    config : InductionConfig
        The sizes.
    seed : int
        Seed of the embeddings and the output table, and base of the layers' seeds.

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
    config = _checked_config(config)
    seed = check_positive_int(seed, "seed", 0)
    rng = np.random.default_rng(seed)
    embedding = rng.standard_normal((config.vocab_size, config.d_model))  # (V, d_model)
    unembedding = rng.standard_normal((config.vocab_size, config.d_model)) / math.sqrt(config.d_model)  # (V, d)
    layers = tuple(init_encoder_layer(config.d_model, config.d_ff, seed=seed + 1 + 2 * index) for index in range(2))
    return InductionParameters(embedding, layers, unembedding)


def _checked_tokens(tokens, config: InductionConfig, name: str = "tokens") -> np.ndarray:
    tokens = np.asarray(tokens)  # (batch, n)
    if tokens.dtype.kind not in "iu":
        raise TypeError(f"{name} has dtype {tokens.dtype}; expected integer token ids")
    if tokens.ndim != 2 or tokens.shape[1] < 1:
        raise ValueError(f"{name} has shape {tokens.shape}; expected (batch, n) token ids")
    outside = (tokens < 0) | (tokens >= config.vocab_size)  # (batch, n)
    if outside.any():
        raise ValueError(f"{name} contains the id {int(tokens[outside].flat[0])}, outside 0 .. {config.vocab_size - 1}")
    return tokens


def _checked_params(params, config: InductionConfig) -> InductionParameters:
    if not isinstance(params, InductionParameters):
        raise TypeError(f"params must be InductionParameters, got {type(params).__name__}")
    shape = (config.vocab_size, config.d_model)
    for name in ("embedding", "unembedding"):
        array = np.asarray(getattr(params, name))
        if array.shape != shape:
            raise ValueError(f"params.{name} has shape {array.shape}; the config needs {shape}")
    if len(params.layers) != 2 or not all(isinstance(layer, EncoderLayerWeights) for layer in params.layers):
        raise TypeError("params.layers must be two EncoderLayerWeights")
    for index, layer in enumerate(params.layers):
        if np.shape(layer.self_attention.w_q) != (config.d_model, config.d_model) \
                or np.shape(layer.feed_forward.w_1) != (config.d_model, config.d_ff):
            raise ValueError(f"params.layers[{index}] does not fit d_model = {config.d_model}, d_ff = {config.d_ff}")
    return params


def _tape(params: InductionParameters, tokens: np.ndarray, config: InductionConfig) -> tuple:
    """The forward pass, keeping each layer's ``back``: ``(logits, attention, back)``."""
    n = tokens.shape[1]
    embedded, embedding_back = embedding_tape(params.embedding, tokens)  # (batch, n, d_model)
    x = embedded + config.position_scale * sinusoidal_encoding(n, config.d_model)  # (batch, n, d_model)
    mask = causal_mask(n)  # (n, n): position t sees 0 .. t
    attention, backs = [], []
    for layer in params.layers:
        (x, weights), back = encoder_layer_tape(x, layer, config.n_heads, mask)  # (batch, n, d), (batch, h, n, n)
        attention.append(weights)
        backs.append(back)
    logits, logits_back = tied_logits_tape(x, params.unembedding)  # (batch, n, V): x U^T

    def back(dlogits):
        dx, dunembedding = logits_back(dlogits)  # (batch, n, d_model), (V, d_model)
        layer_grads = []
        for layer_back in reversed(backs):
            grads, dx = layer_back(dx)  # dx: (batch, n, d_model)
            layer_grads.append(grads)
        return InductionParameters(embedding_back(dx), tuple(reversed(layer_grads)), dunembedding)

    return logits, np.stack(attention), back  # (batch, n, V), (layers, batch, h, n, n)


def induction_forward(params: InductionParameters, tokens, config: InductionConfig) -> InductionForward:
    r"""Run the model on ``tokens``: next-token logits at every position and every layer's attention.

    .. math:: X_0 = E[x] + c\,\mathrm{PE}, \quad X_\ell = \operatorname{EncoderLayer}_\ell(X_{\ell-1};
              \text{causal}), \quad \text{logits} = X_2 U^\top

    Parameters
    ----------
    params : InductionParameters
        The weights.
    tokens : array_like of int
        ``(batch, n)`` token ids in ``0 .. V - 1``; position ``t`` predicts token ``t + 1``.
    config : InductionConfig
        The configuration the weights were made with.

    Returns
    -------
    InductionForward
        ``logits`` ``(batch, n, V)`` and ``attention`` ``(2, batch, n_heads, n, n)``.

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
    config = _checked_config(config)
    params = _checked_params(params, config)
    tokens = _checked_tokens(tokens, config)
    logits, attention, _ = _tape(params, tokens, config)
    return InductionForward(logits, attention)


def induction_loss_and_gradients(params: InductionParameters, tokens, config: InductionConfig) -> tuple:
    r"""Mean next-token cross-entropy of a batch of sequences, and its gradient for every weight.

    .. math:: L = -\frac{1}{B (n - 1)} \sum_{b} \sum_{t=0}^{n-2} \log p_\theta(x_{b, t+1} \mid x_{b, 0..t})

    The backward pass chains the vjp kernels of :mod:`attnbook.learning.layers`: the output table, the
    two encoder layers in reverse, the embedding lookup (the sinusoidal encodings are fixed).

    Parameters
    ----------
    params : InductionParameters
        The weights.
    tokens : array_like of int
        ``(batch, n)`` whole sequences; the model reads ``tokens[:, :-1]`` and predicts ``tokens[:, 1:]``.
    config : InductionConfig
        The configuration.

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
    config = _checked_config(config)
    params = _checked_params(params, config)
    tokens = _checked_tokens(tokens, config)
    if tokens.shape[1] < 2:
        raise ValueError(f"tokens has shape {tokens.shape}; a sequence needs 2 tokens to predict one")
    return loss_and_gradients(params, tokens, config)


def loss_and_gradients(params: InductionParameters, tokens: np.ndarray, config: InductionConfig) -> tuple:
    """Unchecked kernel of :func:`induction_loss_and_gradients`.

    >>> config = InductionConfig(vocab_size=5, d_model=4, d_ff=8)
    >>> loss, grads = loss_and_gradients(init_induction_model(config), np.array([[1, 2, 3]]), config)
    >>> grads.unembedding.shape
    (5, 4)
    """
    targets = tokens[:, 1:]  # (batch, n - 1)
    logits, _, back = _tape(params, tokens[:, :-1], config)  # (batch, n - 1, V)
    loss, dlogits = token_entropy(logits, targets, np.ones(targets.shape, dtype=bool))  # float, (batch, n - 1, V)
    return loss, back(dlogits)


def next_token_losses(params: InductionParameters, tokens, config: InductionConfig) -> np.ndarray:
    r"""The loss of every prediction: ``-log p(x_{t+1} | x_0..t)`` for each sequence and position.

    .. math:: \ell_{b, t} = -\log \operatorname{softmax}(z_{b, t})_{x_{b, t+1}}

    Parameters
    ----------
    params : InductionParameters
        The weights.
    tokens : array_like of int
        ``(batch, n)`` whole sequences.
    config : InductionConfig
        The configuration.

    Returns
    -------
    ndarray
        ``(batch, n - 1)``; entry ``t - 1`` is the loss of predicting token ``t``, the layout of
        :func:`attnbook.learning.tasks.in_context_loss`.

    Examples
    --------
    >>> config = InductionConfig(vocab_size=5, d_model=4, d_ff=8)
    >>> next_token_losses(init_induction_model(config), np.array([[1, 2, 3, 1]]), config).shape
    (1, 3)
    """
    config = _checked_config(config)
    params = _checked_params(params, config)
    tokens = _checked_tokens(tokens, config)
    if tokens.shape[1] < 2:
        raise ValueError(f"tokens has shape {tokens.shape}; a sequence needs 2 tokens to predict one")
    logits = _tape(params, tokens[:, :-1], config)[0]  # (batch, n - 1, V)
    return token_losses(logits, tokens[:, 1:])


def token_losses(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Unchecked kernel of :func:`next_token_losses`: ``-log softmax(logits)[target]`` per position.

    >>> token_losses(np.zeros((1, 2, 4)), np.array([[0, 3]])).round(4).tolist()
    [[1.3863, 1.3863]]
    """
    log_p = log_softmax(logits)  # (batch, n, V)
    return -np.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]  # (batch, n)


def head_scores(attention, half_length: int) -> HeadScores:
    r"""Previous-token and induction scores of every head, on repeated sequences of half length ``h``.

    .. math:: \text{prev} = \operatorname{mean}_{b,\; h \le t \le 2h-2} A_{b, t, t-1}, \qquad
              \text{ind} = \operatorname{mean}_{b,\; h \le t \le 2h-2} A_{b, t, t-h+1}, \qquad
              \text{prev}_1 = \operatorname{mean}_{b,\; 1 \le s \le h-1} A_{b, s, s-1}

    The first two average over the queries of the second half (``t = h .. 2h - 2``, the positions whose
    next token can be copied): a previous-token head puts its weight on ``t - 1``, an induction head on
    ``t - h + 1``, the position after the earlier occurrence of ``x_t``. The third is the previous-token
    score where the induction head needs it: at the positions ``s = t - h + 1`` of the first half whose
    keys it reads, which must know their predecessor ``x_{s-1}``.

    Parameters
    ----------
    attention : array_like
        ``(n_layers, batch, n_heads, 2h - 1, 2h - 1)`` as :func:`induction_forward` returns it on
        ``tokens[:, :-1]`` of repeated sequences.
    half_length : int
        ``h``.

    Returns
    -------
    HeadScores
        ``(previous_token, induction, previous_token_first_half)``, each ``(n_layers, n_heads)``.

    Examples
    --------
    >>> a = np.zeros((1, 1, 1, 5, 5)); a[..., np.arange(5), np.maximum(np.arange(5) - 1, 0)] = 1
    >>> head_scores(a, half_length=3).previous_token.tolist()                # h = 3: queries 3, 4
    [[1.0]]
    """
    a = np.asarray(attention, dtype=float)  # (layers, batch, h, n, n)
    half_length = check_positive_int(half_length, "half_length", 2)
    n = 2 * half_length - 1
    if a.ndim != 5 or a.shape[-2:] != (n, n):
        raise ValueError(f"attention has shape {a.shape}; expected (n_layers, batch, n_heads, {n}, {n}) "
                         f"for half_length = {half_length}")
    return scores(a, half_length)


def scores(a: np.ndarray, half_length: int) -> HeadScores:
    """Unchecked kernel of :func:`head_scores`.

    >>> scores(np.full((1, 1, 1, 3, 3), 1 / 3), 2).induction.round(3).tolist()
    [[0.333]]
    """
    t = np.arange(half_length, 2 * half_length - 1)  # (h - 1,): the queries of the second half
    s = np.arange(1, half_length)  # (h - 1,): the first half's positions that have a predecessor
    previous = a[..., t, t - 1].mean(axis=(1, 3))  # (layers, heads)
    induction = a[..., t, t - half_length + 1].mean(axis=(1, 3))  # (layers, heads)
    previous_first_half = a[..., s, s - 1].mean(axis=(1, 3))  # (layers, heads)
    return HeadScores(previous, induction, previous_first_half)


def ablate_head(params: InductionParameters, layer: int, head: int, config: InductionConfig) -> InductionParameters:
    r"""The weights with one head's output removed: its rows of ``W_O`` set to zero.

    .. math:: W_O[i\, d_\text{head} : (i + 1)\, d_\text{head}, :] \leftarrow 0

    The head still computes its attention, but nothing of it reaches the residual stream (the bias
    ``b_O`` stays), so the loss of the ablated model shows what the head contributed.

    Parameters
    ----------
    params : InductionParameters
        The weights (left unchanged).
    layer : int
        0 or 1.
    head : int
        ``0 .. n_heads - 1``.
    config : InductionConfig
        The configuration.

    Returns
    -------
    InductionParameters
        A copy with the head silenced.

    Examples
    --------
    >>> config = InductionConfig(vocab_size=5, d_model=4, d_ff=8)
    >>> ablated = ablate_head(init_induction_model(config), 1, 0, config)
    >>> bool(np.all(ablated.layers[1].self_attention.w_o == 0))
    True
    """
    config = _checked_config(config)
    params = _checked_params(params, config)
    if isinstance(layer, bool) or layer not in (0, 1):
        raise ValueError(f"layer must be 0 or 1, got {layer!r}")
    if isinstance(head, bool) or not isinstance(head, (int, np.integer)) or not 0 <= head < config.n_heads:
        raise ValueError(f"head must be an integer in 0 .. {config.n_heads - 1}, got {head!r}")
    d_head = config.d_model // config.n_heads
    attention = params.layers[layer].self_attention
    w_o = attention.w_o.copy()  # (d_model, d_model)
    w_o[head * d_head:(head + 1) * d_head] = 0  # the head's slice of the concatenated heads
    layers = list(params.layers)
    layers[layer] = layers[layer]._replace(self_attention=attention._replace(w_o=w_o))
    return params._replace(layers=tuple(layers))


def induction_batch(rng: np.random.Generator, config: InductionConfig) -> np.ndarray:
    r"""One training batch: a half length drawn from the configured range, then repeated random tokens.

    .. math:: h \sim \mathcal{U}\{h_\min, \dots, h_\max\}, \qquad x_{h + t} = x_t

    Parameters
    ----------
    rng : numpy.random.Generator
        The source of the half length and the tokens.
    config : InductionConfig
        ``batch_size``, ``vocab_size`` and the half-length range.

    Returns
    -------
    ndarray
        ``(batch_size, 2h)`` int64.

    Examples
    --------
    >>> config = InductionConfig(batch_size=2, min_half_length=3, max_half_length=3)
    >>> tokens = induction_batch(np.random.default_rng(0), config)
    >>> tokens.shape, bool(np.all(tokens[:, :3] == tokens[:, 3:]))
    ((2, 6), True)
    """
    config = _checked_config(config)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
    return draw(rng, config)


def draw(rng: np.random.Generator, config: InductionConfig) -> np.ndarray:
    """Unchecked kernel of :func:`induction_batch`.

    >>> draw(np.random.default_rng(0), InductionConfig(batch_size=1, max_half_length=8)).shape
    (1, 16)
    """
    half_length = int(rng.integers(config.min_half_length, config.max_half_length + 1))
    return repeated_sequence_batch(config.batch_size, half_length, config.vocab_size, rng)  # (batch, 2h)


def probe_tokens(config: InductionConfig) -> np.ndarray:
    """The fixed probe batch of the checkpoints: ``probe_size`` sequences of half length ``probe_half_length``.

    .. math:: x \\sim \\texttt{repeated\\_sequence\\_batch}(\\text{probe\\_size}, h_\\text{probe}, V, \\text{seed} = 12345)

    Its seed (12345) is not the training seed, so the probe's sequences are not training batches.

    Parameters
    ----------
    config : InductionConfig
        ``probe_size``, ``probe_half_length`` and ``vocab_size``.

    Returns
    -------
    ndarray
        ``(probe_size, 2 probe_half_length)`` int64.

    Examples
    --------
    >>> probe_tokens(InductionConfig(probe_size=4, probe_half_length=5)).shape
    (4, 10)
    """
    config = _checked_config(config)
    return repeated_sequence_batch(config.probe_size, config.probe_half_length, config.vocab_size, 12345)


def _measure(params: InductionParameters, probe: np.ndarray, config: InductionConfig) -> dict:
    """The probe measurements of one checkpoint: both halves' losses and the best heads' scores."""
    logits, attention, _ = _tape(params, probe[:, :-1], config)  # (batch, n, V), (layers, batch, h, n, n)
    losses = token_losses(logits, probe[:, 1:])  # (batch, 2h - 1)
    h = config.probe_half_length
    found = scores(attention, h)
    return {"first_half_loss": float(losses[:, :h - 1].mean()), "second_half_loss": float(losses[:, h:].mean()),
            "previous_token_score": float(found.previous_token[0].max()),
            "previous_token_score_first_half": float(found.previous_token_first_half[0].max()),
            "induction_score": float(found.induction[1].max())}


def emergence_step(steps, second_half_losses, vocab_size: int):
    r"""The first checkpoint at which the probe's second-half loss is below half of ``ln V``.

    .. math:: s^\ast = \min \{ s : L_2(s) < \tfrac{1}{2} \ln V \}

    The probe loss is already a mean over many sequences, so no further smoothing is applied.

    Parameters
    ----------
    steps : array_like of int
        ``(n_checkpoints,)`` the training steps of the checkpoints, increasing.
    second_half_losses : array_like
        ``(n_checkpoints,)`` the probe's second-half loss at each.
    vocab_size : int
        ``V``.

    Returns
    -------
    int or None
        The step, or None if the loss never falls that low.

    Examples
    --------
    >>> emergence_step([0, 25, 50], [3.4, 2.0, 0.3], vocab_size=32)                 # ln 32 / 2 = 1.73
    50
    """
    steps = np.asarray(steps)  # (n_checkpoints,)
    losses = np.asarray(second_half_losses, dtype=float)  # (n_checkpoints,)
    if steps.shape != losses.shape or steps.ndim != 1:
        raise ValueError(f"steps has shape {steps.shape} and second_half_losses {losses.shape}; "
                         "expected two 1-D arrays of the same length")
    below = np.flatnonzero(losses < 0.5 * math.log(check_positive_int(vocab_size, "vocab_size", 2)))
    return int(steps[below[0]]) if below.size else None


def half_way_step(steps, curve) -> int:
    r"""The first checkpoint at which a rising curve reaches half of its final value.

    .. math:: s_{1/2} = \min \{ s : c(s) \ge \tfrac{1}{2} c(s_\text{last}) \}

    Parameters
    ----------
    steps : array_like of int
        ``(n_checkpoints,)`` the steps, increasing.
    curve : array_like
        ``(n_checkpoints,)`` the values (a head score).

    Returns
    -------
    int
        The step.

    Examples
    --------
    >>> half_way_step([0, 25, 50, 75], [0.0, 0.1, 0.5, 0.8])
    50
    """
    steps = np.asarray(steps)  # (n_checkpoints,)
    values = np.asarray(curve, dtype=float)  # (n_checkpoints,)
    if steps.shape != values.shape or steps.ndim != 1 or steps.size == 0:
        raise ValueError(f"steps has shape {steps.shape} and curve {values.shape}; expected two non-empty "
                         "1-D arrays of the same length")
    return int(steps[int(np.argmax(values >= values[-1] / 2))])


def train(seed: int = 0, progress: bool = True, n_steps: int | None = None, config: InductionConfig | None = None):
    """Train the induction model from scratch; returns ``(params, record)`` for :func:`attnbook.learning.store.save_trained`.

    .. math:: \\theta^\\ast = \\operatorname{fit}(\\theta_0, \\nabla L, \\text{batches})

    :func:`attnbook.learning.loop.fit` runs Adam with the Noam schedule and clipping. It has no
    callback, so the loss function takes the checkpoints itself: every ``config.every`` steps it
    measures the current weights on the probe batch (both halves' losses, the best previous-token
    scores of layer 1 over the second half and over the first half, the best induction score of
    layer 2) before computing the gradient. The record's metrics add the emergence step
    (:func:`emergence_step`) and the step at which each score curve first reaches half of its final
    value (:func:`half_way_step`).

    Parameters
    ----------
    seed : int
        Seed of the initial weights and of the batches.
    progress : bool
        Show ``fit``'s progress bar.
    n_steps : int, optional
        Stop after this many steps (a shortened run); default ``config.n_steps``.
    config : InductionConfig, optional
        Default ``InductionConfig()``, the stored model's.

    Returns
    -------
    tuple
        ``(params, record)``: the trained weights and a JSON-serialisable record (``config``, ``seed``,
        ``n_steps``, ``losses``, ``checkpoints``, ``metrics``, ``seconds``).

    Examples
    --------
    >>> config = InductionConfig(vocab_size=6, d_model=8, d_ff=8, batch_size=2, max_half_length=8,
    ...                          probe_size=2, probe_half_length=3, every=2)
    >>> params, record = train(progress=False, n_steps=3, config=config)
    >>> len(record["losses"]), record["checkpoints"]["step"]
    (3, [0, 2, 3])
    """
    from .loop import fit  # the loop imports tqdm only when asked for a bar

    config = _checked_config(InductionConfig() if config is None else config)
    n_steps = config.n_steps if n_steps is None else check_positive_int(n_steps, "n_steps")
    params = init_induction_model(config, seed)
    probe = probe_tokens(config)
    checkpoints: dict[str, list] = {"step": []}
    calls = [0]

    def record_checkpoint(current: InductionParameters, step: int) -> None:
        checkpoints["step"].append(step)
        for key, value in _measure(current, probe, config).items():
            checkpoints.setdefault(key, []).append(value)

    def measured_loss_and_gradients(current: InductionParameters, tokens: np.ndarray) -> tuple:
        if calls[0] % config.every == 0:  # the weights after calls[0] steps
            record_checkpoint(current, calls[0])
        calls[0] += 1
        return loss_and_gradients(current, tokens, config)

    start = time.perf_counter()
    params, history = fit(params, measured_loss_and_gradients, lambda rng: draw(rng, config), n_steps,
                          d_model=config.d_model, warmup=config.warmup, max_norm=config.max_norm, seed=seed,
                          progress=progress, every=25)
    seconds = time.perf_counter() - start
    if checkpoints["step"][-1] != n_steps:
        record_checkpoint(params, n_steps)
    record = {"config": config._asdict(), "seed": seed, "n_steps": n_steps,
              "losses": [float(loss) for loss in history.losses], "checkpoints": checkpoints,
              "metrics": induction_metrics(params, config), "seconds": round(seconds, 1)}
    metrics = record["metrics"]
    metrics["emergence_step"] = emergence_step(checkpoints["step"], checkpoints["second_half_loss"], config.vocab_size)
    for name in ("previous_token_score", "previous_token_score_first_half", "induction_score"):
        metrics[f"{name}_half_step"] = half_way_step(checkpoints["step"], checkpoints[name])
    return params, record


def induction_metrics(params: InductionParameters, config: InductionConfig) -> dict:
    """The final measurements of a trained model on the probe batch: losses, head scores, ablations.

    .. math:: \\Delta L_2 = L_2(\\text{head ablated}) - L_2

    Parameters
    ----------
    params : InductionParameters
        The weights.
    config : InductionConfig
        The configuration.

    Returns
    -------
    dict
        ``first_half_loss``, ``second_half_loss``, ``per_position_loss`` (mean over the probe of each
        prediction), ``previous_token_scores``, ``previous_token_scores_first_half`` and
        ``induction_scores`` (``[layer][head]``, see :func:`head_scores`),
        ``previous_token_head`` and ``induction_head`` (the best layer-1 and layer-2 heads),
        ``ablated_second_half_loss`` (the induction head silenced) and
        ``ablated_previous_token_second_half_loss`` (the previous-token head silenced), and
        ``second_half_loss_by_half_length`` (keys ``"4"`` to ``"24"``: sequences shorter and longer than
        any seen in training).

    Examples
    --------
    >>> config = InductionConfig(vocab_size=5, d_model=4, d_ff=8, probe_size=2, probe_half_length=3)
    >>> sorted(induction_metrics(init_induction_model(config), config))[:3]
    ['ablated_previous_token_second_half_loss', 'ablated_second_half_loss', 'first_half_loss']
    """
    config = _checked_config(config)
    params = _checked_params(params, config)
    probe, h = probe_tokens(config), config.probe_half_length
    logits, attention, _ = _tape(params, probe[:, :-1], config)  # (batch, n, V), (layers, batch, heads, n, n)
    per_position = token_losses(logits, probe[:, 1:]).mean(axis=0)  # (2h - 1,)
    found = scores(attention, h)
    previous_head, induction_head = int(found.previous_token[0].argmax()), int(found.induction[1].argmax())

    def second_half_without(layer: int, head: int) -> float:
        silenced = ablate_head(params, layer, head, config)
        return float(token_losses(_tape(silenced, probe[:, :-1], config)[0], probe[:, 1:])[:, h:].mean())

    return {"first_half_loss": float(per_position[:h - 1].mean()), "second_half_loss": float(per_position[h:].mean()),
            "per_position_loss": [float(value) for value in per_position],
            "previous_token_scores": found.previous_token.tolist(), "induction_scores": found.induction.tolist(),
            "previous_token_scores_first_half": found.previous_token_first_half.tolist(),
            "previous_token_head": previous_head, "induction_head": induction_head,
            "ablated_second_half_loss": second_half_without(1, induction_head),
            "ablated_previous_token_second_half_loss": second_half_without(0, previous_head),
            "second_half_loss_by_half_length": {str(length): _second_half_loss(params, length, config)
                                                for length in HALF_LENGTHS}}


def _second_half_loss(params: InductionParameters, half_length: int, config: InductionConfig) -> float:
    """The probe-sized second-half loss at another half length (its own seeded sequences)."""
    tokens = repeated_sequence_batch(config.probe_size, half_length, config.vocab_size, 12345 + half_length)
    logits = _tape(params, tokens[:, :-1], config)[0]  # (batch, 2h - 1, V)
    return float(token_losses(logits, tokens[:, 1:])[:, half_length:].mean())


def load_induction(directory=None) -> tuple:
    """The stored induction model: ``(params, config, record)``, read from ``attnbook/data/trained``.

    .. math:: \\texttt{induction.npz}, \\texttt{induction.json} \\mapsto (\\theta, \\text{config}, \\text{record})

    Parameters
    ----------
    directory : str or Path, optional
        Another folder; default the package's data.

    Returns
    -------
    tuple
        ``(params, config, record)``: :class:`InductionParameters`, the :class:`InductionConfig` it was
        trained with, and the training record (dict).

    Examples
    --------
    >>> params, config, record = load_induction()
    >>> config.vocab_size == params.embedding.shape[0], record["seed"]
    (True, 0)
    """
    path = trained_path(NAME, ".json", directory)
    if not path.exists():
        raise FileNotFoundError(f"no trained model {NAME!r} in {path.parent}: run `make train` to make it")
    config = InductionConfig(**json.loads(path.read_text())["config"])  # the template's sizes
    params, record = load_trained(NAME, init_induction_model(config), directory)
    return params, config, record
