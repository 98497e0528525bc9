"""A decoder-only GPT of today's shape that learns to write Shakespeare, one character at a time.

The model: a token embedding ``E`` (tied: the same table scores the next character), ``n_layers``
pre-norm blocks of RMSNorm, causal grouped-query attention with rotary queries and keys, a residual,
RMSNorm, a SwiGLU network and a residual (:func:`attnbook.learning.modern_layers.rotary_block_vjp`, run
through its fast path :func:`attnbook.learning.fast_block.fast_block_vjp`), and a final RMSNorm. It
trains in float32 on the scaffold of every model (:mod:`attnbook.learning.models.scaffold`) on the
characters of :mod:`attnbook.learning.characters`: a batch is ``batch_size`` windows of ``context + 1``
characters drawn at random positions of the training split. Writing with it:
:mod:`attnbook.learning.analysis.gpt_decoder`; its heads: :mod:`attnbook.learning.analysis.gpt`.

>>> config = GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8, context=6, batch_size=2)
>>> params = init_gpt(config, seed=0)
>>> tokens = gpt_batch(np.random.default_rng(0), config)                 # (batch, context + 1)
>>> forward = gpt_forward(params, tokens[:, :-1], config)
>>> forward.logits.shape, forward.attention.shape, forward.logits.dtype  # (batch, n, V), (layers, batch, h, n, n)
((2, 6, 76), (2, 2, 2, 6, 6), dtype('float32'))
"""

from __future__ import annotations

import json
import math
from typing import NamedTuple

import numpy as np

from ...modern import DecoderBlockWeights, init_decoder_block
from ...positional import sinusoidal_frequencies
from ...validation import Array, Dims, Stack, check_positive_int
from ..characters import splits, vocabulary
from ..fast_block import embedding_gradient, fast_block_vjp
from ..gradients import log_softmax, token_entropy
from ..layers import tied_logits_vjp
from ..modern_layers import rms_norm_vjp
from ..optim import tree_map
from ..store import trained_path
from . import scaffold

__all__ = ["DRAFT", "DRAFT_CONFIG", "MODEL", "NGRAM_K", "NGRAM_ORDER", "GPTConfig", "GPTParameters", "WIDE",
           "bits_per_character", "gpt_batch", "gpt_forward", "init_gpt", "load_gpt", "load_gpt_draft", "load_gpt_wide",
           "load_scaling", "training_step_flops", "window_bits"]

EPS = 1e-6  # of every RMSNorm
NGRAM_ORDER, NGRAM_K = 4, 0.05  #: the baseline: an add-k character 4-gram (:mod:`attnbook.text.ngram`)


class GPTConfig(NamedTuple):
    """Hyperparameters of the GPT, its data and its training.

    Attributes
    ----------
    d_model, n_layers, n_heads, n_kv_heads, d_ff : int
        Width, blocks, query heads, key and value heads (grouped-query attention), SwiGLU width.
    context : int
        The characters the model reads at once (its training windows, and the most it writes).
    batch_size, n_steps, warmup : int
        Training: windows per batch, steps, warm-up steps of the Noam schedule.
    max_norm : float
        Gradients are clipped to this global norm.
    learning_rate : float or None
        None: the Noam schedule (rising for ``warmup`` steps, then falling as ``step^-1/2``). A number: a
        warm-up to this rate and a cosine decay to a tenth of it at the last step.
    weight_decay : float or None
        Decoupled weight decay of every weight matrix (AdamW); None: none.

    Examples
    --------
    >>> GPTConfig().d_model, GPTConfig().n_kv_heads < GPTConfig().n_heads
    (64, True)
    """

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    d_ff: int = 176
    context: int = 128
    batch_size: int = 16
    n_steps: int = 3000
    warmup: int = 200
    max_norm: float = 1.0
    learning_rate: float | None = None
    weight_decay: float | None = None


class GPTParameters(NamedTuple):
    """The learned weights: the embedding (also the output table), the blocks, the final RMSNorm gain.

    Attributes
    ----------
    embedding : ndarray
        ``(V, d_model)`` the token embeddings ``E``; ``logits = RMS(x) E^T`` (tied).
    layers : tuple of DecoderBlockWeights
        The pre-norm blocks (their attention biases stay 0: the model gives them no gradient).
    norm : ndarray
        ``(d_model,)`` the gain of the final RMSNorm.

    Examples
    --------
    >>> p = init_gpt(GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8, n_layers=3))
    >>> p.embedding.shape, len(p.layers), p.layers[0].attention.w_k.shape
    ((76, 8), 3, (8, 4))
    """

    embedding: Array["vocab_size, d_model"]  # E, also the output table
    layers: Stack[DecoderBlockWeights, "n_layers"]
    norm: Array["d_model"]  # the final RMSNorm's gain


def _checked_config(config) -> GPTConfig:
    scaffold.check_config(config, GPTConfig)
    if config.d_model % config.n_heads or (config.d_model // config.n_heads) % 2:
        raise ValueError(f"config.d_model = {config.d_model} must be divisible by config.n_heads = {config.n_heads} "
                         "into heads of even width (rotary positions turn pairs)")
    if config.n_heads % config.n_kv_heads:
        raise ValueError(f"config.n_heads = {config.n_heads} is not divisible by config.n_kv_heads = "
                         f"{config.n_kv_heads}")
    return config


def init_gpt(config: GPTConfig, seed: int = 0) -> GPTParameters:
    r"""Seeded float32 weights: a Gaussian embedding, the package's decoder blocks, a final gain of 1.

    .. math:: E_{ij} \sim \mathcal{N}(0, 1 / d_\text{model})

    Block ``l`` is :func:`attnbook.init_decoder_block` with seed ``seed + 1 + 2 l`` (Glorot-uniform
    matrices, zero attention biases, RMSNorm gains of 1).

    Parameters
    ----------
    config, seed
        The sizes; the seed of the embedding and base of the blocks' seeds.

    Returns
    -------
    GPTParameters
        Every array float32.

    Examples
    --------
    >>> p = init_gpt(GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8), seed=1)
    >>> p.layers[1].feed_forward.w_down.shape, p.norm.dtype
    ((8, 8), dtype('float32'))
    """
    config = _checked_config(config)
    seed = check_positive_int(seed, "seed", 0)
    rng = np.random.default_rng(seed)
    embedding = rng.standard_normal((len(vocabulary()), config.d_model)) / math.sqrt(config.d_model)  # (V, d)
    layers = tuple(init_decoder_block(config.d_model, config.d_ff, config.n_heads, config.n_kv_heads,
                                      seed=seed + 1 + 2 * index) for index in range(config.n_layers))
    params = GPTParameters(embedding, layers, np.ones(config.d_model))
    return tree_map(lambda a: np.asarray(a, dtype=np.float32), params)


def _dims(config: GPTConfig) -> Dims:
    d_kv = config.n_kv_heads * (config.d_model // config.n_heads)
    return Dims(vocab_size=(len(vocabulary()), "the vocabulary has 76 characters"),
                d_model=(config.d_model, f"config.d_model = {config.d_model}"),
                n_layers=(config.n_layers, f"config.n_layers = {config.n_layers}"),
                d_ff=(config.d_ff, f"config.d_ff = {config.d_ff}"),
                d_kv=(d_kv, f"config.n_kv_heads = {config.n_kv_heads} heads of {config.d_model // config.n_heads}"))


def _checked_tokens(tokens, config: GPTConfig, name: str = "tokens") -> np.ndarray:
    tokens = np.asarray(tokens)  # (batch, n)
    if tokens.dtype.kind not in "iu":
        raise TypeError(f"{name} has dtype {tokens.dtype}; expected integer token ids")
    if tokens.ndim != 2 or not 1 <= tokens.shape[1] <= config.context:
        raise ValueError(f"{name} has shape {tokens.shape}; expected (batch, n) with 1 <= n <= config.context = "
                         f"{config.context}")
    vocab = len(vocabulary())
    outside = (tokens < 0) | (tokens >= vocab)
    if outside.any():
        raise ValueError(f"{name} contains the id {int(tokens[outside].flat[0])}, outside 0 .. {vocab - 1}")
    return tokens


def _no_bias(grads: DecoderBlockWeights) -> DecoderBlockWeights:
    """The block's gradient with its attention biases' set to 0: today's models have none, so they stay 0."""
    a = grads.attention
    return grads._replace(attention=a._replace(b_q=np.zeros_like(a.b_q), b_k=np.zeros_like(a.b_k),
                                               b_v=np.zeros_like(a.b_v), b_o=np.zeros_like(a.b_o)))


def taped(params: GPTParameters, tokens: np.ndarray, config: GPTConfig) -> tuple:
    """Unchecked kernel: the forward pass on ``tokens`` ``(batch, n)``; ``(Forward, back)``.

    >>> config = GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8)
    >>> out, back = taped(init_gpt(config), np.array([[1, 2]]), config)
    >>> back(np.ones_like(out.logits)).embedding.dtype
    dtype('float32')
    """
    x = params.embedding[tokens]  # (batch, n, d_model)
    theta = sinusoidal_frequencies(config.d_model // config.n_heads)  # (d_head / 2,): the rotary frequencies
    batch, n = tokens.shape
    attention = np.empty((config.n_layers, batch, config.n_heads, n, n), dtype=x.dtype)  # every block's weights
    backs = []
    for layer, weights in zip(params.layers, attention):
        (x, _), back = fast_block_vjp(x, layer, config.n_heads, config.n_kv_heads, theta, EPS,
                                      weights)  # (batch, n, d): rotary_block_vjp's fast path
        backs.append(back)
    normed, norm_back = rms_norm_vjp.unchecked(x, params.norm, EPS)  # (batch, n, d_model)
    logits, logits_back = tied_logits_vjp.unchecked(normed, params.embedding)  # (batch, n, V): RMS(x) E^T

    def back(dlogits):
        d_normed, d_table_out = logits_back(dlogits)  # (batch, n, d_model), (V, d_model)
        dx, dnorm = norm_back(d_normed)
        layer_grads = []
        for layer_back in reversed(backs):
            grads, dx = layer_back(dx)  # dx: (batch, n, d_model)
            layer_grads.append(_no_bias(grads))
        d_table = embedding_gradient(tokens, dx, len(params.embedding)) + d_table_out  # (V, d): both uses of E
        return GPTParameters(d_table, tuple(reversed(layer_grads)), dnorm)

    return scaffold.Forward(logits, attention), back  # (batch, n, V), (layers, batch, h, n, n)


def gpt_forward(params: GPTParameters, tokens, config: GPTConfig) -> scaffold.Forward:
    r"""Run the model on ``tokens``: next-character logits at every position and every block's attention.

    .. math:: X_0 = E[x], \quad X_\ell = \operatorname{Block}_\ell(X_{\ell-1}), \quad
              \text{logits} = \operatorname{RMS}(X_L)\, E^\top

    Parameters
    ----------
    params, tokens, config
        The weights; ``(batch, n)`` token ids, ``n <= config.context`` (position ``t`` predicts token
        ``t + 1``); the configuration the weights were made with (checked: :func:`~.scaffold.check_model`).

    Returns
    -------
    Forward
        :class:`~attnbook.learning.models.scaffold.Forward`: ``logits`` ``(batch, n, V)``, ``attention``
        ``(n_layers, batch, n_heads, n, n)``.

    Examples
    --------
    >>> config = GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8, context=4)
    >>> gpt_forward(init_gpt(config), np.ones((1, 5), dtype=int), config)
    Traceback (most recent call last):
    ...
    ValueError: tokens has shape (1, 5); expected (batch, n) with 1 <= n <= config.context = 4
    """
    params, config = scaffold.check_model(MODEL, params, config)
    return taped(params, _checked_tokens(tokens, config), config)[0]


def draw(rng: np.random.Generator, config: GPTConfig) -> np.ndarray:
    """Unchecked kernel of :func:`gpt_batch`: ``batch_size`` windows of ``context + 1`` training characters.

    >>> draw(np.random.default_rng(0), GPTConfig(batch_size=1, context=4)).shape
    (1, 5)
    """
    train = splits()[0]
    starts = rng.integers(0, len(train) - config.context - 1, size=config.batch_size)  # (batch,)
    return train[starts[:, None] + np.arange(config.context + 1)]  # (batch, context + 1)


def bits_per_character(params: GPTParameters, tokens, config: GPTConfig, batch_size: int = 32) -> float:
    r"""Mean cross-entropy in bits of every next character of ``tokens``, read in windows of ``context + 1``.

    .. math:: \text{bpc} = -\frac{1}{\lvert T \rvert} \sum_{t \in T} \log_2 p_\theta(c_t \mid c_{w(t)}, \dots, c_{t-1})

    The text is cut into consecutive, non-overlapping windows of ``context + 1`` characters (the rest
    at the end is left out); in each, the model predicts characters 1 to ``context`` from those before
    them in the window, so the first predictions of a window see little context.

    Parameters
    ----------
    params, tokens, config
        The weights; ``(N,)`` a text, e.g. ``splits()[1]``; the configuration.
    batch_size : int, optional
        Windows per forward pass.

    Returns
    -------
    float
        Bits per character; ``log2(76)`` = 6.25 for a uniform guess.

    Examples
    --------
    >>> from attnbook.learning.characters import encode_chars
    >>> config = GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8, context=8)
    >>> round(bits_per_character(init_gpt(config), encode_chars("To be, or not to be"), config), 1)   # untrained
    7.3
    """
    params, config = scaffold.check_model(MODEL, params, config)
    tokens = np.asarray(tokens).reshape(-1)
    n = config.context + 1
    windows = tokens[: len(tokens) // n * n].reshape(-1, n)  # (windows, context + 1)
    if len(windows) == 0:
        raise ValueError(f"tokens has {len(tokens)} characters; at least config.context + 1 = {n} are needed")
    return float(window_bits(params, windows, config, batch_size).mean())


def window_bits(params: GPTParameters, windows, config: GPTConfig, batch_size: int = 32) -> np.ndarray:
    r"""The bits of every next character of each window: :math:`-\log_2 p_\theta(c_j \mid c_0, \dots, c_{j-1})`.

    Parameters
    ----------
    params : GPTParameters
        The weights.
    windows : array_like of int
        ``(W, m + 1)`` windows of character ids, ``m <= context``: the model reads the first ``m`` of
        each and predicts characters 1 to ``m``.
    config : GPTConfig
        The configuration.
    batch_size : int, optional
        Windows per forward pass.

    Returns
    -------
    ndarray
        ``(W, m)`` float64: column ``j - 1`` is the prediction that read ``j`` characters.

    Examples
    --------
    >>> from attnbook.learning.characters import encode_chars
    >>> config = GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8, context=8)
    >>> window_bits(init_gpt(config), encode_chars("To be, or")[None], config).shape
    (1, 8)
    """
    params, config = scaffold.check_model(MODEL, params, config)
    windows = np.asarray(windows)
    if windows.ndim != 2 or windows.shape[1] < 2:
        raise ValueError(f"windows has shape {windows.shape}; expected (W, m + 1) with m >= 1")
    for part in (windows[:, :-1], windows[:, 1:]):  # ids of the vocabulary, m <= context
        _checked_tokens(part, config, "windows")
    batch_size = check_positive_int(batch_size, "batch_size")
    bits = np.empty((len(windows), windows.shape[1] - 1))  # (W, m)
    for start in range(0, len(windows), batch_size):
        chunk = windows[start:start + batch_size]  # (b, m + 1)
        logits = taped(params, chunk[:, :-1], config)[0].logits  # (b, m, V)
        log_p = log_softmax(logits.astype(np.float64))  # (b, m, V)
        bits[start:start + batch_size] = -np.take_along_axis(log_p, chunk[:, 1:, None], axis=-1)[..., 0] / math.log(2)
    return bits


def training_step_flops(config: GPTConfig) -> int:
    r"""Floating-point operations of the matrix products of one training step (forward and backward), counted.

    A multiply-add is two operations; the backward pass does two products for each of the forward pass (the
    gradient of each factor), so a step is three forward passes. Per character of the batch, with
    :math:`d_h = d / h`, the forward products are

    .. math::
        \underbrace{L\,\bigl(2 d\, h d_h + 2 d\, h_{kv} d_h + 2 h\, n\, d_h + 3 d\, d_{ff}\bigr)}_{
        \text{queries and output, keys and values, scores and weighted sum, SwiGLU}} + \underbrace{d\, V}_{\text{logits}}

    multiply-adds, the attention counted over the whole ``n x n`` square the package computes (the mask is
    applied to it), and the step's operations are :math:`6\, B\, n` times that. Element-wise work (norms,
    softmax, rotations, Adam) is left out: it is a few per cent of the step's time here, and a matrix product
    is what a GEMM rate can be compared with. ``code/tests/learning/models/test_gpt_torch.py`` checks the count
    against PyTorch's ``FlopCounterMode`` on the model's twin.

    Parameters
    ----------
    config : GPTConfig
        The model's sizes and its batch (``batch_size`` windows of ``context`` characters).

    Returns
    -------
    int
        Operations of one step.

    Examples
    --------
    >>> training_step_flops(GPTConfig())          # the stored model's step: about 1.6 GFLOP
    1594884096
    >>> training_step_flops(GPTConfig(d_model=64, n_heads=3))
    Traceback (most recent call last):
    ...
    ValueError: config.d_model = 64 must be a multiple of config.n_heads = 3
    """
    d, h, h_kv = config.d_model, config.n_heads, config.n_kv_heads
    if d % h:
        raise ValueError(f"config.d_model = {d} must be a multiple of config.n_heads = {h}")
    d_h, n = d // h, config.context
    per_layer = d * h * d_h + 2 * d * h_kv * d_h + h * d_h * d + 2 * h * n * d_h + 3 * d * config.d_ff
    per_character = config.n_layers * per_layer + d * len(vocabulary())  # multiply-adds of the forward pass
    return 6 * config.batch_size * n * per_character


def _next_character_loss(logits: np.ndarray, tokens: np.ndarray, config: GPTConfig) -> tuple:
    targets = tokens[:, 1:]  # (batch, n): position t predicts character t + 1
    return token_entropy(logits, targets, np.ones(targets.shape, dtype=bool))


MODEL = scaffold.Model(
    name="gpt", config=GPTConfig, init=lambda config, seed: init_gpt(config, seed),
    forward=lambda params, tokens, config: taped(params, tokens[:, :-1], config),
    loss=_next_character_loss, batch=draw,
    evaluate=lambda params, config: {"held_out_bits_per_character": bits_per_character(params, splits()[1], config)},
    fit_options=lambda c: {"d_model": c.d_model, "warmup": c.warmup, "max_norm": c.max_norm, "every": 25,
                           "peak_rate": c.learning_rate, "decay_steps": c.n_steps, "weight_decay": c.weight_decay},
    layout=GPTParameters, check=_checked_config, dims=_dims,
)

#: the GPT that is trained longer and wider to beat the Kneser-Ney baseline (issue 40): 7.7x the stored model's
#: parameters, a cosine schedule and weight decay, 12.3 M training characters (13 passes over the seven plays)
WIDE = GPTConfig(d_model=128, n_layers=4, n_heads=4, n_kv_heads=2, d_ff=352, n_steps=6000, warmup=200,
                 learning_rate=2e-3, weight_decay=0.1)
WIDE_MODEL = MODEL._replace(name="gpt_wide")

def load_scaling(directory=None) -> dict:
    """The record of the scaling runs (``make scaling``): smaller GPTs and a longer one, with the wide GPT's recipe.

    ``tools/gpt_scaling.py`` writes it: three GPTs smaller than :data:`WIDE`, and :data:`WIDE` trained three times
    as long (``wide_long``); and that long run once more on the training split without its validation slice, scored
    on the slice (``validation``; :func:`attnbook.learning.characters.validation_splits`).

    Parameters
    ----------
    directory : str or Path, optional
        Another folder than the package's ``data/trained``.

    Returns
    -------
    dict
        ``steps`` (of each run), ``every`` (steps between checkpoints) and ``sizes``: name -> the run's record,
        with its ``config``, ``parameters``, ``metrics``, ``seconds`` and ``checkpoints`` (``step``, ``flops``,
        ``held_out_bits_per_character``); ``validation``: the same for the run scored on the validation slice,
        whose checkpoints hold ``validation_bits_per_character`` instead.

    Examples
    --------
    >>> scaling = load_scaling()
    >>> sorted(scaling["sizes"]), scaling["sizes"]["d64_2"]["config"]["d_model"]
    (['d32_1', 'd64_2', 'd96_3', 'wide_long'], 64)
    """
    return json.loads(trained_path("gpt_scaling", ".json", directory).read_text())


gpt_batch = scaffold.batcher(MODEL)  # (batch_size, context + 1) windows; the model reads [:, :-1], predicts [:, 1:]
load_gpt = scaffold.loader(MODEL)  # (params, config, record) of data/trained/gpt, the params float32
load_gpt_wide = scaffold.loader(WIDE_MODEL)  # the same of data/trained/gpt_wide

# The draft of speculative decoding (attnbook.learning.speculative): the same model, smaller, trained the same way
DRAFT_CONFIG = GPTConfig(d_model=32, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=88, n_steps=2000, warmup=100)
DRAFT = MODEL._replace(name="gpt_draft")
load_gpt_draft = scaffold.loader(DRAFT)  # (params, config, record) of data/trained/gpt_draft, the params float32
