r"""An encoder-decoder Transformer that learns to reverse strings, and decoding it with a key-value cache.

The model is the Transformer of Vaswani et al. (2017), small: post-norm encoder and decoder layers
(:mod:`attnbook.transformer`) and one token embedding :math:`E` shared by the source, the target and
the output projection, with sinusoidal positions:

.. math:: X_0 = \sqrt{d}\, E[\text{source}] + \mathrm{PE}, \qquad
          Y_0 = \sqrt{d}\, E[\text{target}_\text{in}] + \mathrm{PE}, \qquad
          \text{logits} = Y_L E^\top

The encoder's self-attention and the decoder's cross-attention skip the source's padding; the
decoder's self-attention is causal. The loss is label-smoothed cross-entropy over the real target
positions; its gradient is composed from the backward passes of :mod:`attnbook.learning.layers`, and
:func:`train` fits it with Adam, Noam warm-up and gradient clipping.

Decoding runs the decoder one token at a time (:mod:`attnbook.learning.decoding`). With a cache
(:func:`reversal_decoder`, ``cache=True``) a step feeds the new token only: each decoder layer appends
the token's self-attention key and value to a :class:`attnbook.efficient.kv_cache.KVCache` and attends
over it, and the cross-attention reads keys and values of the encoder output computed once. Without a
cache a step reruns the decoder on the whole prefix and keeps its last row. Both give the same logits;
the cache does less work per token (:func:`decoding_speed`).

>>> config = ReversalConfig(n_symbols=4, d_model=8, d_ff=16, n_encoder_layers=1, n_decoder_layers=1)
>>> params = init_reversal(config, seed=0)
>>> batch = reversal_batch(2, config.n_symbols, 3, 5, seed=0)
>>> out = reversal_forward(params, batch.source, batch.target_in, config)
>>> out.logits.shape == batch.target_in.shape + (config.vocab_size,), out.cross_weights[0].shape[1]
(True, 2)
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from functools import lru_cache, partial
from typing import NamedTuple

import numpy as np

from ..attention import attend, project
from ..efficient.kv_cache import KVCache
from ..multihead import from_heads, multi_head, to_heads
from ..positional import sinusoidal_encoding
from ..timing import time_calls
from ..transformer import (
    DecoderLayerWeights,
    EncoderLayerWeights,
    feed,
    init_decoder_layer,
    init_encoder_layer,
    normalize,
)
from ..validation import check_heads, check_positive_int
from .decoding import greedy_decode
from .gradients import token_entropy
from .layers import decoder_layer_tape, embedding_tape, encoder_layer_tape, tied_logits_tape
from .store import load_trained, named_leaves, trained_path
from .tasks import PAD, Seq2SeqBatch, draw_reversal, reversal_alignment, reversal_batch

__all__ = [
    "NAME",
    "Alignment",
    "CachedState",
    "DecodingSpeed",
    "PrefixState",
    "ReversalConfig",
    "ReversalDecoder",
    "ReversalForward",
    "ReversalParameters",
    "TrainedReversal",
    "cross_attention_alignment",
    "decoding_speed",
    "init_reversal",
    "load_reversal",
    "reversal_accuracy",
    "reversal_decoder",
    "reversal_forward",
    "reversal_loss_and_gradients",
    "train",
]

NAME = "reversal"  # the stored model: attnbook/data/trained/reversal.npz and reversal.json


class ReversalConfig(NamedTuple):
    """Hyperparameters of the reversal model, its task, its training and its held-out test.

    Attributes
    ----------
    n_symbols : int
        Distinct symbols; the vocabulary adds PAD, BOS and EOS (``vocab_size = n_symbols + 3``).
    min_length, max_length : int
        The shortest and longest source string.
    d_model : int
        Model width (even: sinusoidal positions pair a sine with a cosine).
    n_heads : int
        Heads of every attention; divides ``d_model``.
    d_ff : int
        Hidden width of the feed-forward networks.
    n_encoder_layers, n_decoder_layers : int
        Depth of the encoder and of the decoder.
    batch_size : int
        Sequences per training step.
    n_steps : int
        Training steps.
    warmup : int
        Steps of the linear warm-up of the Noam schedule,
        :math:`\\eta_t = d^{-1/2} \\min(t^{-1/2}, t\\, w^{-3/2})`.
    label_smoothing : float
        :math:`\\varepsilon` of the label-smoothed cross-entropy.
    max_norm : float
        Gradients are clipped to this global norm.
    test_sequences : int
        Size of the held-out test batch.
    test_seed : int
        Seed of the held-out test batch (the training batches come from the training seed).

    Examples
    --------
    >>> config = ReversalConfig()
    >>> config.vocab_size, config.d_model // config.n_heads
    (13, 16)
    """

    n_symbols: int = 10
    min_length: int = 3
    max_length: int = 8
    d_model: int = 32
    n_heads: int = 2
    d_ff: int = 64
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    batch_size: int = 64
    n_steps: int = 3000
    warmup: int = 200
    label_smoothing: float = 0.1
    max_norm: float = 1.0
    test_sequences: int = 500
    test_seed: int = 2026

    @property
    def vocab_size(self) -> int:
        """PAD, BOS, EOS and the symbols."""
        return self.n_symbols + 3


class ReversalParameters(NamedTuple):
    """Parameters of the encoder-decoder: the shared embedding, the encoder layers, the decoder layers.

    Attributes
    ----------
    embedding : ndarray
        ``(vocab, d_model)`` the token embedding :math:`E`, also the output projection (``logits = y E^T``).
    encoder : tuple of EncoderLayerWeights
        The encoder layers, first to last.
    decoder : tuple of DecoderLayerWeights
        The decoder layers, first to last.

    Examples
    --------
    >>> params = init_reversal(ReversalConfig(d_model=8, d_ff=16, n_decoder_layers=1), seed=0)
    >>> params.embedding.shape, len(params.encoder), len(params.decoder)
    ((13, 8), 2, 1)
    """

    embedding: np.ndarray  # (vocab, d_model)
    encoder: tuple  # of EncoderLayerWeights
    decoder: tuple  # of DecoderLayerWeights


class ReversalForward(NamedTuple):
    """The forward pass on a batch, teacher-forced: logits and every attention map.

    Attributes
    ----------
    logits : ndarray
        ``(batch, n_tgt, vocab)`` scores of each target position's next token.
    encoder_weights : tuple of ndarray
        Per encoder layer, ``(batch, h, n_src, n_src)`` self-attention weights (padding keys get 0).
    self_weights : tuple of ndarray
        Per decoder layer, ``(batch, h, n_tgt, n_tgt)`` causal self-attention weights.
    cross_weights : tuple of ndarray
        Per decoder layer, ``(batch, h, n_tgt, n_src)`` cross-attention weights over the source.

    Examples
    --------
    >>> config = ReversalConfig(d_model=8, d_ff=16, n_encoder_layers=1, n_decoder_layers=1)
    >>> batch = reversal_batch(3, config.n_symbols, 3, 6, seed=1)
    >>> out = reversal_forward(init_reversal(config), batch.source, batch.target_in, config)
    >>> out.encoder_weights[0].shape[-2:] == (batch.source.shape[1],) * 2, out.self_weights[0].shape[1]
    (True, 2)
    """

    logits: np.ndarray  # (batch, n_tgt, vocab)
    encoder_weights: tuple  # per layer (batch, h, n_src, n_src)
    self_weights: tuple  # per layer (batch, h, n_tgt, n_tgt)
    cross_weights: tuple  # per layer (batch, h, n_tgt, n_src)


# --- the boundary -----------------------------------------------------------------------------------------


def _check_config(config) -> ReversalConfig:
    if not isinstance(config, ReversalConfig):
        raise TypeError(f"config must be a ReversalConfig, got {type(config).__name__}")
    for name in ("n_symbols", "min_length", "max_length", "d_model", "d_ff", "n_encoder_layers",
                 "n_decoder_layers", "batch_size", "n_steps", "warmup", "test_sequences"):
        check_positive_int(getattr(config, name), f"config.{name}")
    check_heads(config.d_model, config.n_heads)
    if config.d_model % 2:
        raise ValueError(f"config.d_model = {config.d_model} is odd; sinusoidal positions need an even width")
    if config.min_length > config.max_length:
        raise ValueError(f"config.min_length = {config.min_length} is more than config.max_length = "
                         f"{config.max_length}")
    return config


@lru_cache(maxsize=8)
def _shapes(config: ReversalConfig) -> tuple:
    """The (path, shape) of every leaf of a model of this configuration."""
    return tuple((name, leaf.shape) for name, leaf in named_leaves(init_reversal(config, seed=0)))


def _check_params(params, config) -> ReversalParameters:
    """The parameters, after checking their structure, shapes and type (float64) against ``config``."""
    config = _check_config(config)
    if not isinstance(params, ReversalParameters):
        raise TypeError(f"params must be ReversalParameters (see init_reversal), got {type(params).__name__}")
    for field, count, kind in (("encoder", config.n_encoder_layers, EncoderLayerWeights),
                               ("decoder", config.n_decoder_layers, DecoderLayerWeights)):
        layers = getattr(params, field)
        if not isinstance(layers, (tuple, list)) or len(layers) != count:
            raise ValueError(f"params.{field} must hold config.n_{field}_layers = {count} layers")
        if not all(isinstance(layer, kind) for layer in layers):
            raise TypeError(f"params.{field} must hold {kind.__name__}")
    try:
        leaves = named_leaves(params)
    except TypeError as error:
        raise TypeError(f"params: {error}") from None
    expected = _shapes(config)
    if [name for name, _ in leaves] != [name for name, _ in expected]:
        raise ValueError("params does not have the structure of init_reversal(config)")
    for (name, leaf), (_, shape) in zip(leaves, expected):
        if leaf.shape != shape:
            raise ValueError(f"params.{name} has shape {leaf.shape} but config gives {shape}")
        if leaf.dtype != np.float64:
            raise TypeError(f"params.{name} has dtype {leaf.dtype}; the model computes in float64")
    return params


def _check_tokens(tokens, name: str, vocab_size: int) -> np.ndarray:
    tokens = np.asarray(tokens)  # (batch, n)
    if tokens.ndim != 2 or tokens.dtype.kind not in "iu" or tokens.shape[1] == 0:
        raise ValueError(f"{name} must be a (batch, n) array of integer tokens with n > 0, got shape "
                         f"{tokens.shape} and dtype {tokens.dtype}")
    if np.any((tokens < 0) | (tokens >= vocab_size)):
        raise ValueError(f"{name} holds tokens outside 0 .. {vocab_size - 1}")
    return tokens.astype(np.int64, copy=False)


def _check_source(source, vocab_size: int) -> np.ndarray:
    source = _check_tokens(source, "source", vocab_size)  # (batch, n_src)
    if not np.all((source != PAD).any(axis=1)):
        raise ValueError("source has a row of padding only; every source needs a real token")
    return source


def _check_batch(batch, vocab_size: int) -> Seq2SeqBatch:
    if not isinstance(batch, Seq2SeqBatch):
        raise TypeError(f"batch must be a Seq2SeqBatch (see reversal_batch), got {type(batch).__name__}")
    source = _check_source(batch.source, vocab_size)  # (batch, n_src)
    target_in = _check_tokens(batch.target_in, "batch.target_in", vocab_size)  # (batch, n_tgt)
    target_out = _check_tokens(batch.target_out, "batch.target_out", vocab_size)  # (batch, n_tgt)
    for name, array, shape in (("target_in", target_in, (source.shape[0], target_in.shape[1])),
                               ("target_out", target_out, target_in.shape),
                               ("source_mask", np.asarray(batch.source_mask), source.shape),
                               ("target_mask", np.asarray(batch.target_mask), target_in.shape)):
        if array.shape != shape:
            raise ValueError(f"batch.{name} has shape {array.shape}; expected {shape}")
    source_mask = np.asarray(batch.source_mask)  # (batch, n_src)
    target_mask = np.asarray(batch.target_mask)  # (batch, n_tgt)
    if source_mask.dtype != bool or target_mask.dtype != bool:
        raise TypeError("batch.source_mask and batch.target_mask must be boolean")
    if not np.array_equal(source_mask, source != PAD):
        raise ValueError("batch.source_mask must be True exactly on the source's real (non-PAD) tokens")
    if not target_mask.any():
        raise ValueError("batch.target_mask is False everywhere; the mean loss of no positions is undefined")
    return Seq2SeqBatch(source, target_in, target_out, source_mask, target_mask)


# --- the model ----------------------------------------------------------------------------------------------


def init_reversal(config: ReversalConfig = ReversalConfig(), seed: int = 0) -> ReversalParameters:
    r"""Seeded parameters: a normal embedding of variance :math:`1/d`, Glorot layers, identity norms.

    .. math:: E_{ij} \sim \mathcal{N}(0, 1/d), \qquad \text{so } \sqrt{d}\, E_i \text{ has entries of variance 1}

    The layers come from :func:`attnbook.init_encoder_layer` and :func:`attnbook.init_decoder_layer`,
    each with its own seed drawn from ``seed``.

    Parameters
    ----------
    config : ReversalConfig, optional
        The sizes; default :class:`ReversalConfig` ().
    seed : int, optional
        Seed of ``numpy.random.default_rng``; default 0.

    Returns
    -------
    ReversalParameters
        The parameters, float64.

    Examples
    --------
    >>> params = init_reversal(ReversalConfig(), seed=0)
    >>> params.decoder[1].cross_attention.w_q.shape, round(float(params.embedding.std() * 32**0.5), 1)
    ((32, 32), 1.0)
    """
    config = _check_config(config)
    rng = np.random.default_rng(seed)
    d = config.d_model
    embedding = rng.standard_normal((config.vocab_size, d)) / math.sqrt(d)  # (vocab, d_model)
    seeds = rng.integers(0, 2**31, size=config.n_encoder_layers + config.n_decoder_layers)  # one per layer
    encoder = tuple(init_encoder_layer(d, config.d_ff, seed=int(s)) for s in seeds[: config.n_encoder_layers])
    decoder = tuple(init_decoder_layer(d, config.d_ff, seed=int(s)) for s in seeds[config.n_encoder_layers:])
    return ReversalParameters(embedding, encoder, decoder)


@lru_cache(maxsize=32)
def positions(n: int, d_model: int) -> np.ndarray:
    """Unchecked kernel: the ``(n, d_model)`` sinusoidal encodings, computed once per size (read-only).

    >>> positions(3, 4).shape
    (3, 4)
    """
    table = sinusoidal_encoding(n, d_model)  # (n, d_model)
    table.setflags(write=False)
    return table


def embed(table: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    r"""Unchecked kernel: :math:`\sqrt{d}\, E[\text{tokens}] + \mathrm{PE}`, ``(batch, n)`` tokens to ``(batch, n, d)``.

    >>> embed(np.zeros((3, 2)), np.array([[0, 2]]))[0].tolist()   # the positions alone: sin 0, cos 0; sin 1, cos 1
    [[0.0, 1.0], [0.8414709848078965, 0.5403023058681398]]
    """
    d = table.shape[1]
    return math.sqrt(d) * table[tokens] + positions(tokens.shape[1], d)  # (batch, n, d)


def head_mask(source: np.ndarray) -> np.ndarray:
    """Unchecked kernel: the source's padding mask laid out for the heads, ``(batch, 1, 1, n_src)``.

    >>> head_mask(np.array([[3, 0]])).tolist()
    [[[[True, False]]]]
    """
    return (source != PAD)[:, None, None, :]  # (batch, 1, 1, n_src)


def run_encoder(params: ReversalParameters, source: np.ndarray, source_mask: np.ndarray, n_heads: int) -> tuple:
    """Unchecked kernel: the encoder, forward only; returns ``(memory (batch, n_src, d), weights per layer)``.

    The layers of :func:`attnbook.encoder_layer`, on its kernels (no backward pass is recorded).

    >>> config = ReversalConfig(d_model=8, d_ff=16, n_encoder_layers=1)
    >>> memory, weights = run_encoder(init_reversal(config), np.array([[3, 0]]), head_mask(np.array([[3, 0]])), 2)
    >>> memory.shape, weights[0][0, :, :, 1].tolist()
    ((1, 2, 8), [[0.0, 0.0], [0.0, 0.0]])
    """
    x = embed(params.embedding, source)  # (batch, n_src, d)
    weights = []
    for layer in params.encoder:
        attended, attention = multi_head(x, x, x, layer.self_attention, n_heads,
                                         source_mask)  # (batch, n_src, d), (batch, h, n_src, n_src)
        x = normalize(x + attended, *layer.norm_1)  # (batch, n_src, d)
        x = normalize(x + feed(x, layer.feed_forward), *layer.norm_2)  # (batch, n_src, d)
        weights.append(attention)
    return x, tuple(weights)


def run_decoder(params: ReversalParameters, target_in: np.ndarray, memory: np.ndarray, source_mask: np.ndarray,
                n_heads: int) -> tuple:
    """Unchecked kernel: the decoder on a whole target, forward only; returns ``(y, self_weights, cross_weights)``.

    The layers of :func:`attnbook.decoder_layer`, on its kernels (no backward pass is recorded).

    >>> config = ReversalConfig(d_model=8, d_ff=16, n_decoder_layers=1)
    >>> y, self_w, cross_w = run_decoder(init_reversal(config), np.array([[1, 5]]), np.ones((1, 3, 8)), None, 2)
    >>> y.shape, float(self_w[0][0, 0, 0, 1]), cross_w[0].shape
    ((1, 2, 8), 0.0, (1, 2, 2, 3))
    """
    y = embed(params.embedding, target_in)  # (batch, n_tgt, d)
    future = np.tri(target_in.shape[1], dtype=bool)  # (n_tgt, n_tgt): causal, True on and below the diagonal
    self_weights, cross_weights = [], []
    for layer in params.decoder:
        attended, self_w = multi_head(y, y, y, layer.self_attention, n_heads,
                                      future)  # (batch, n_tgt, d), (batch, h, n_tgt, n_tgt)
        y = normalize(y + attended, *layer.norm_1)  # (batch, n_tgt, d)
        crossed, cross_w = multi_head(y, memory, memory, layer.cross_attention, n_heads,
                                      source_mask)  # (batch, n_tgt, d), (batch, h, n_tgt, n_src)
        y = normalize(y + crossed, *layer.norm_2)  # (batch, n_tgt, d)
        y = normalize(y + feed(y, layer.feed_forward), *layer.norm_3)  # (batch, n_tgt, d)
        self_weights.append(self_w)
        cross_weights.append(cross_w)
    return y, tuple(self_weights), tuple(cross_weights)


def forward(params: ReversalParameters, source: np.ndarray, target_in: np.ndarray, n_heads: int) -> ReversalForward:
    """Unchecked kernel of :func:`reversal_forward`.

    >>> config = ReversalConfig(d_model=8, d_ff=16, n_encoder_layers=1, n_decoder_layers=1)
    >>> forward(init_reversal(config), np.array([[3, 4]]), np.array([[1, 4, 3]]), 2).logits.shape
    (1, 3, 13)
    """
    mask = head_mask(source)  # (batch, 1, 1, n_src)
    memory, encoder_weights = run_encoder(params, source, mask, n_heads)  # (batch, n_src, d)
    y, self_weights, cross_weights = run_decoder(params, target_in, memory, mask, n_heads)  # (batch, n_tgt, d)
    logits = project(y, params.embedding.T, "the logits y @ E.T")  # (batch, n_tgt, vocab)
    return ReversalForward(logits, encoder_weights, self_weights, cross_weights)


def embed_tape(table: np.ndarray, tokens: np.ndarray) -> tuple:
    r"""Unchecked kernel: :math:`\sqrt{d}\, E[\text{tokens}] + \mathrm{PE}` ``(batch, n, d)``, and ``back(dx) -> dE``.

    >>> x, back = embed_tape(np.eye(4), np.array([[1, 2]]))
    >>> back(np.ones((1, 2, 4))).sum(axis=1).tolist()
    [0.0, 8.0, 8.0, 0.0]
    """
    d = table.shape[1]
    x, lookup_back = embedding_tape(table, tokens)  # (batch, n, d)
    return math.sqrt(d) * x + positions(tokens.shape[1], d), lambda dx: lookup_back(math.sqrt(d) * dx)


def encoder_tape(params: ReversalParameters, source: np.ndarray, source_mask: np.ndarray, n_heads: int) -> tuple:
    """Unchecked kernel: the encoder; returns ``(memory, weights, back)``, ``back(dmemory) -> (dE, layer grads)``.

    ``source_mask`` is laid out ``(batch, 1, 1, n_src)`` for the heads.

    >>> config = ReversalConfig(d_model=8, d_ff=16, n_encoder_layers=1)
    >>> source = np.array([[3, 4, 0]])
    >>> memory, weights, back = encoder_tape(init_reversal(config), source, head_mask(source), 2)
    >>> memory.shape, float(weights[0][0, 0, 0, 2])
    ((1, 3, 8), 0.0)
    """
    x, embed_back = embed_tape(params.embedding, source)  # (batch, n_src, d)
    backs, weights = [], []
    for layer in params.encoder:
        (x, attention), back = encoder_layer_tape(x, layer, n_heads, source_mask)  # (batch, n_src, d)
        backs.append(back)
        weights.append(attention)  # (batch, h, n_src, n_src)

    def back(dmemory):
        grads = []
        for layer_back in reversed(backs):
            layer_grads, dmemory = layer_back(dmemory)  # (batch, n_src, d)
            grads.append(layer_grads)
        return embed_back(dmemory), tuple(reversed(grads))

    return x, tuple(weights), back


def decoder_tape(params: ReversalParameters, target_in: np.ndarray, memory: np.ndarray, source_mask: np.ndarray,
                 n_heads: int) -> tuple:
    """Unchecked kernel: the decoder on a whole target; returns ``(y, self_weights, cross_weights, back)``.

    ``back(dy) -> (dE, layer grads, dmemory)`` for ``dy`` the gradient of the last layer's output.

    >>> config = ReversalConfig(d_model=8, d_ff=16, n_decoder_layers=1)
    >>> params, memory = init_reversal(config), np.ones((1, 3, 8))
    >>> y, self_w, cross_w, back = decoder_tape(params, np.array([[1, 5]]), memory, None, 2)
    >>> y.shape, cross_w[0].shape, back(np.ones_like(y))[2].shape
    ((1, 2, 8), (1, 2, 2, 3), (1, 3, 8))
    """
    y, embed_back = embed_tape(params.embedding, target_in)  # (batch, n_tgt, d)
    backs, self_weights, cross_weights = [], [], []
    for layer in params.decoder:
        (y, self_w, cross_w), back = decoder_layer_tape(y, memory, layer, n_heads, source_mask)  # (batch, n_tgt, d)
        backs.append(back)
        self_weights.append(self_w)  # (batch, h, n_tgt, n_tgt)
        cross_weights.append(cross_w)  # (batch, h, n_tgt, n_src)

    def back(dy):
        grads, dmemory = [], np.zeros_like(memory)  # (batch, n_src, d)
        for layer_back in reversed(backs):
            layer_grads, dy, dm = layer_back(dy)  # (batch, n_tgt, d), (batch, n_src, d)
            dmemory += dm
            grads.append(layer_grads)
        return embed_back(dy), tuple(reversed(grads)), dmemory

    return y, tuple(self_weights), tuple(cross_weights), back


def forward_tape(params: ReversalParameters, source: np.ndarray, target_in: np.ndarray, n_heads: int) -> tuple:
    """Unchecked kernel: the forward pass recorded for the backward pass; returns ``(ReversalForward, back)``.

    ``back(dlogits)`` returns the gradients, a :class:`ReversalParameters`.

    >>> config = ReversalConfig(d_model=8, d_ff=16, n_encoder_layers=1, n_decoder_layers=1)
    >>> out, back = forward_tape(init_reversal(config), np.array([[3, 4]]), np.array([[1, 4, 3]]), 2)
    >>> back(np.ones_like(out.logits)).embedding.shape
    (13, 8)
    """
    mask = head_mask(source)  # (batch, 1, 1, n_src)
    memory, encoder_weights, encoder_back = encoder_tape(params, source, mask, n_heads)  # (batch, n_src, d)
    y, self_weights, cross_weights, decoder_back = decoder_tape(params, target_in, memory, mask, n_heads)
    logits, logits_back = tied_logits_tape(y, params.embedding)  # (batch, n_tgt, vocab)

    def back(dlogits):
        dy, d_output = logits_back(dlogits)  # (batch, n_tgt, d), (vocab, d)
        d_target, decoder_grads, dmemory = decoder_back(dy)  # (vocab, d), ..., (batch, n_src, d)
        d_source, encoder_grads = encoder_back(dmemory)  # (vocab, d)
        return ReversalParameters(d_output + d_target + d_source, encoder_grads, decoder_grads)

    return ReversalForward(logits, encoder_weights, self_weights, cross_weights), back


def reversal_forward(params: ReversalParameters, source, target_in, config: ReversalConfig) -> ReversalForward:
    r"""The teacher-forced forward pass: next-token logits at every target position, and every attention map.

    .. math:: M = \operatorname{Enc}\bigl(\sqrt{d}\, E[s] + \mathrm{PE}\bigr), \qquad
              \text{logits} = \operatorname{Dec}\bigl(\sqrt{d}\, E[y_\text{in}] + \mathrm{PE},\ M\bigr)\, E^\top

    Parameters
    ----------
    params : ReversalParameters
        The model (:func:`init_reversal` or :func:`load_reversal`).
    source : array_like of int
        ``(batch, n_src)`` source tokens, PAD (0) after each string; the padding is masked.
    target_in : array_like of int
        ``(batch, n_tgt)`` the decoder's input: BOS, then the target so far.
    config : ReversalConfig
        The model's configuration.

    Returns
    -------
    ReversalForward
        Logits ``(batch, n_tgt, vocab)`` and the attention weights of every layer.

    Examples
    --------
    >>> trained = load_reversal()
    >>> batch = reversal_batch(1, 10, 5, 5, seed=3)
    >>> out = reversal_forward(trained.params, batch.source, batch.target_in, trained.config)
    >>> bool(np.array_equal(out.logits.argmax(axis=-1), batch.target_out))
    True
    """
    params = _check_params(params, config)
    source = _check_source(source, config.vocab_size)  # (batch, n_src)
    target_in = _check_tokens(target_in, "target_in", config.vocab_size)  # (batch, n_tgt)
    if target_in.shape[0] != source.shape[0]:
        raise ValueError(f"source has {source.shape[0]} rows but target_in has {target_in.shape[0]}")
    return forward(params, source, target_in, config.n_heads)


def loss_and_gradients(params: ReversalParameters, batch: Seq2SeqBatch, n_heads: int,
                       label_smoothing: float) -> tuple:
    """Unchecked kernel of :func:`reversal_loss_and_gradients`.

    >>> config = ReversalConfig(d_model=8, d_ff=16, n_encoder_layers=1, n_decoder_layers=1)
    >>> loss, grads = loss_and_gradients(init_reversal(config), reversal_batch(2, 10, 3, 4), 2, 0.1)
    >>> round(loss, 1) > 0, grads.decoder[0].norm_3[0].shape
    (True, (8,))
    """
    out, back = forward_tape(params, batch.source, batch.target_in, n_heads)
    loss, dlogits = token_entropy(out.logits, batch.target_out, batch.target_mask,
                                  label_smoothing)  # float, (batch, n_tgt, vocab)
    return loss, back(dlogits)


def reversal_loss_and_gradients(params: ReversalParameters, batch: Seq2SeqBatch, config: ReversalConfig) -> tuple:
    r"""The label-smoothed cross-entropy of a batch and its gradient with respect to every parameter.

    .. math:: L = \frac{1}{|M|} \sum_{(b, i) \in M} \Bigl(-(1 - \varepsilon) \log p_{b i, t_{b i}}
              - \frac{\varepsilon}{V} \sum_{v} \log p_{b i v}\Bigr), \qquad
              \frac{\partial L}{\partial E} = \underbrace{dZ^\top Y_L}_{\text{output}}
              + \sqrt{d}\,\bigl(\textstyle\sum dY_0 + \sum dX_0\bigr)_{\text{inputs}}

    over the real target positions :math:`M`. The gradient runs back through the tied output
    projection, the decoder layers (the memory collecting the cross-attentions' key and value
    gradients), the encoder layers and both embeddings, with the kernels of
    :mod:`attnbook.learning.layers`; the three uses of :math:`E` add up.

    Parameters
    ----------
    params : ReversalParameters
        The model.
    batch : Seq2SeqBatch
        A batch of :func:`attnbook.learning.tasks.reversal_batch`.
    config : ReversalConfig
        The configuration (heads, label smoothing).

    Returns
    -------
    tuple
        ``(loss, grads)``: a float and a :class:`ReversalParameters` of gradients.

    Examples
    --------
    >>> config = ReversalConfig(d_model=8, d_ff=16, n_encoder_layers=1, n_decoder_layers=1)
    >>> loss, grads = reversal_loss_and_gradients(init_reversal(config), reversal_batch(4, 10, 3, 8), config)
    >>> 2.0 < loss < 4.0, grads.encoder[0].self_attention.w_q.shape
    (True, (8, 8))
    """
    params = _check_params(params, config)
    batch = _check_batch(batch, config.vocab_size)
    smoothing = config.label_smoothing
    if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float)) or not 0 <= smoothing < 1:
        raise ValueError(f"config.label_smoothing must be a number in [0, 1), got {smoothing!r}")
    return loss_and_gradients(params, batch, config.n_heads, float(smoothing))


# --- decoding: one token at a time, with a key-value cache or without -----------------------------------


class CachedState(NamedTuple):
    """What the cached decoder carries from step to step.

    The caches grow by one token per step, in place: a state is used once, then replaced by the one
    the step returns (which holds the same caches).

    Attributes
    ----------
    caches : tuple of KVCache
        Per decoder layer, the self-attention keys and values of the tokens fed so far,
        ``batch_shape = (batch, h)``, ``d_k = d_v = d_model / h``.
    cross_keys : tuple of ndarray
        Per decoder layer, ``(batch, h, n_src, d_head)`` the cross-attention keys of the encoder output.
    cross_values : tuple of ndarray
        Per decoder layer, ``(batch, h, n_src, d_head)`` its values.
    source_mask : ndarray
        ``(batch, 1, 1, n_src)`` True on real source tokens.

    Examples
    --------
    >>> trained = load_reversal()
    >>> state = reversal_decoder(trained.params, [[3, 4, 5]], trained.config).state
    >>> len(state.caches[0]), state.caches[0].keys.shape, state.cross_keys[0].shape
    (0, (1, 2, 0, 16), (1, 2, 3, 16))
    """

    caches: tuple  # per layer: KVCache, batch_shape (batch, h)
    cross_keys: tuple  # per layer: (batch, h, n_src, d_head)
    cross_values: tuple  # per layer: (batch, h, n_src, d_head)
    source_mask: np.ndarray  # (batch, 1, 1, n_src)


class PrefixState(NamedTuple):
    """What the decoder without a cache carries: the encoder output and the tokens fed so far.

    Attributes
    ----------
    memory : ndarray
        ``(batch, n_src, d_model)`` the encoder output.
    source_mask : ndarray
        ``(batch, 1, 1, n_src)`` True on real source tokens.
    prefix : ndarray
        ``(batch, t)`` int64 the tokens fed so far (BOS first); every step reruns the decoder on it.

    Examples
    --------
    >>> trained = load_reversal()
    >>> state = reversal_decoder(trained.params, [[3, 4, 5]], trained.config, cache=False).state
    >>> state.memory.shape, state.prefix.shape
    ((1, 3, 32), (1, 0))
    """

    memory: np.ndarray  # (batch, n_src, d_model)
    source_mask: np.ndarray  # (batch, 1, 1, n_src)
    prefix: np.ndarray  # (batch, t)


class ReversalDecoder(NamedTuple):
    """A model ready for :mod:`attnbook.learning.decoding`: its ``step``, ``reorder`` and first ``state``.

    Attributes
    ----------
    step : callable
        ``step(state, tokens) -> (logits, state)``: ``tokens`` ``(batch,)``, ``logits`` ``(batch, vocab)``.
    reorder : callable
        ``reorder(state, index) -> state``: row ``r`` of the result is row ``index[r]`` (beam search).
    state : CachedState or PrefixState
        The state before the first token, the source encoded.
    batch_size : int
        Rows of the state: the number of sources.
    max_length : int
        The most tokens the state has room for (the capacity of the caches).

    Examples
    --------
    >>> trained = load_reversal()
    >>> decoder = reversal_decoder(trained.params, [[3, 4, 5, 6]], trained.config)
    >>> greedy_decode(decoder.step, decoder.state, decoder.batch_size, decoder.max_length).tokens.tolist()
    [[6, 5, 4, 3, 2]]
    """

    step: Callable
    reorder: Callable
    state: object
    batch_size: int
    max_length: int


def cached_step(params: ReversalParameters, n_heads: int, state: CachedState, tokens: np.ndarray) -> tuple:
    r"""Unchecked kernel: one decoder step with the key-value cache; returns ``(logits (batch, vocab), state)``.

    For the new token at position :math:`t`, in each decoder layer: its query, key and value;
    :math:`K \leftarrow [K; k_t]`, :math:`V \leftarrow [V; v_t]`; attention of :math:`q_t` over the
    cache (causal by construction: the cache holds positions :math:`\le t`), then cross-attention over
    the stored keys and values of the encoder output, then the feed-forward network.

    >>> trained = load_reversal()
    >>> decoder = reversal_decoder(trained.params, [[3, 4]], trained.config)
    >>> logits, state = cached_step(trained.params, 2, decoder.state, np.array([1]))
    >>> int(logits.argmax()), len(state.caches[0])
    (4, 1)
    """
    d = params.embedding.shape[1]
    t = len(state.caches[0])  # position of the new token
    x = math.sqrt(d) * params.embedding[tokens][:, None, :] + positions(state.caches[0].capacity, d)[t]  # (batch, 1, d)
    for layer, cache, cross_k, cross_v in zip(params.decoder, state.caches, state.cross_keys, state.cross_values):
        w = layer.self_attention
        q = to_heads(project(x, w.w_q, "x @ w_q + b_q", w.b_q), n_heads)  # (batch, h, 1, d_head)
        k = to_heads(project(x, w.w_k, "x @ w_k + b_k", w.b_k), n_heads)  # (batch, h, 1, d_head)
        v = to_heads(project(x, w.w_v, "x @ w_v + b_v", w.b_v), n_heads)  # (batch, h, 1, d_head)
        cache.write(k, v)  # the cache now holds positions 0 .. t
        scale = 1.0 / math.sqrt(q.shape[-1])
        heads = attend(q, cache.keys, cache.values, None, scale).output  # (batch, h, 1, d_head)
        attended = project(from_heads(heads), w.w_o, "heads @ w_o + b_o", w.b_o)  # (batch, 1, d)
        x = normalize(x + attended, *layer.norm_1)  # (batch, 1, d)
        w = layer.cross_attention
        q = to_heads(project(x, w.w_q, "x @ w_q + b_q", w.b_q), n_heads)  # (batch, h, 1, d_head)
        heads = attend(q, cross_k, cross_v, state.source_mask, scale).output  # (batch, h, 1, d_head)
        crossed = project(from_heads(heads), w.w_o, "heads @ w_o + b_o", w.b_o)  # (batch, 1, d)
        x = normalize(x + crossed, *layer.norm_2)  # (batch, 1, d)
        x = normalize(x + feed(x, layer.feed_forward), *layer.norm_3)  # (batch, 1, d)
    logits = project(x[:, 0], params.embedding.T, "the logits x @ E.T")  # (batch, vocab)
    return logits, state


def prefix_step(params: ReversalParameters, n_heads: int, state: PrefixState, tokens: np.ndarray) -> tuple:
    """Unchecked kernel: one decoder step without a cache, rerunning the decoder on the whole prefix.

    >>> trained = load_reversal()
    >>> decoder = reversal_decoder(trained.params, [[3, 4]], trained.config, cache=False)
    >>> logits, state = prefix_step(trained.params, 2, decoder.state, np.array([1]))
    >>> int(logits.argmax()), state.prefix.tolist()
    (4, [[1]])
    """
    prefix = np.concatenate([state.prefix, tokens[:, None]], axis=1)  # (batch, t + 1)
    y = run_decoder(params, prefix, state.memory, state.source_mask, n_heads)[0]  # (batch, t + 1, d)
    logits = project(y[:, -1], params.embedding.T, "the logits y @ E.T")  # (batch, vocab): the last position's
    return logits, PrefixState(state.memory, state.source_mask, prefix)


def reordered_cache(cache: KVCache, index: np.ndarray) -> KVCache:
    """Unchecked kernel: a new cache of the same capacity holding rows ``index`` of ``cache``'s batch axis.

    The :class:`~attnbook.efficient.kv_cache.KVCache` grows by one token at a time, so the reordered
    keys and values are written back token by token.

    >>> cache = KVCache(3, 1, 1, batch_shape=(2,))
    >>> cache.append(np.array([[[1.0]], [[2.0]]]), np.zeros((2, 1, 1)))
    >>> reordered_cache(cache, np.array([1, 1, 0])).keys[:, 0, 0].tolist()
    [2.0, 2.0, 1.0]
    """
    keys, values = cache.keys[index], cache.values[index]  # (batch', ..., t, d_k), (batch', ..., t, d_v)
    new = KVCache(cache.capacity, keys.shape[-1], values.shape[-1], keys.shape[:-2], keys.dtype)
    for s in range(len(cache)):
        new.write(keys[..., s:s + 1, :], values[..., s:s + 1, :])
    return new


def reorder_cached(state: CachedState, index: np.ndarray) -> CachedState:
    """Unchecked kernel: rows ``index`` of a :class:`CachedState` (beam search's reorder).

    >>> trained = load_reversal()
    >>> decoder = reversal_decoder(trained.params, [[3, 4]], trained.config)
    >>> reorder_cached(decoder.state, np.zeros(3, dtype=int)).cross_keys[0].shape
    (3, 2, 2, 16)
    """
    return CachedState(tuple(reordered_cache(cache, index) for cache in state.caches),
                       tuple(k[index] for k in state.cross_keys), tuple(v[index] for v in state.cross_values),
                       state.source_mask[index])


def reorder_prefix(state: PrefixState, index: np.ndarray) -> PrefixState:
    """Unchecked kernel: rows ``index`` of a :class:`PrefixState` (beam search's reorder).

    >>> trained = load_reversal()
    >>> decoder = reversal_decoder(trained.params, [[3, 4]], trained.config, cache=False)
    >>> reorder_prefix(decoder.state, np.zeros(3, dtype=int)).memory.shape
    (3, 2, 32)
    """
    return PrefixState(state.memory[index], state.source_mask[index], state.prefix[index])


def start_decoder(params: ReversalParameters, source: np.ndarray, n_heads: int, cache: bool,
                  max_length: int) -> ReversalDecoder:
    """Unchecked kernel of :func:`reversal_decoder`.

    >>> trained = load_reversal()
    >>> start_decoder(trained.params, np.array([[3, 4]]), 2, True, 5).state.caches[1].capacity
    5
    """
    mask = head_mask(source)  # (batch, 1, 1, n_src)
    memory = run_encoder(params, source, mask, n_heads)[0]  # (batch, n_src, d)
    batch = source.shape[0]
    if not cache:
        state = PrefixState(memory, mask, np.zeros((batch, 0), dtype=np.int64))
        return ReversalDecoder(partial(prefix_step, params, n_heads), reorder_prefix, state, batch, max_length)
    d_head = memory.shape[-1] // n_heads
    caches, keys, values = [], [], []
    for layer in params.decoder:
        w = layer.cross_attention
        k = project(memory, w.w_k, "memory @ w_k + b_k", w.b_k)  # (batch, n_src, d): once per source
        v = project(memory, w.w_v, "memory @ w_v + b_v", w.b_v)  # (batch, n_src, d)
        keys.append(to_heads(k, n_heads))  # (batch, h, n_src, d_head)
        values.append(to_heads(v, n_heads))  # (batch, h, n_src, d_head)
        caches.append(KVCache(max_length, d_head, d_head, batch_shape=(batch, n_heads)))
    state = CachedState(tuple(caches), tuple(keys), tuple(values), mask)
    return ReversalDecoder(partial(cached_step, params, n_heads), reorder_cached, state, batch, max_length)


def reversal_decoder(params: ReversalParameters, source, config: ReversalConfig, cache: bool = True,
                     max_length: int | None = None) -> ReversalDecoder:
    r"""Encode ``source``; return the model's ``step``, ``reorder`` and first state, for any decoding strategy.

    .. math:: \text{cache:}\ \ O(t)\ \text{work at step } t, \qquad
              \text{no cache:}\ \ O(t^2)\ \text{(the decoder rerun on all } t \text{ tokens)}

    Both steps compute the same logits. With ``cache=True`` the state is a :class:`CachedState`: per
    decoder layer a :class:`~attnbook.efficient.kv_cache.KVCache` of self-attention keys and values,
    and the cross-attention keys and values of the encoder output, computed here once. With
    ``cache=False`` it is a :class:`PrefixState` and each step reruns the decoder on the prefix.

    Parameters
    ----------
    params : ReversalParameters
        The model.
    source : array_like of int
        ``(batch, n_src)`` source tokens, PAD after each string.
    config : ReversalConfig
        The model's configuration.
    cache : bool, optional
        Decode with the key-value cache (default) or rerun the decoder on the prefix at every step.
    max_length : int, optional
        The most tokens to generate; default ``n_src + 1`` (the reversal and EOS).

    Returns
    -------
    ReversalDecoder
        ``step``, ``reorder``, ``state``, ``batch_size`` and ``max_length``.

    Examples
    --------
    >>> trained = load_reversal()
    >>> source = reversal_batch(4, 10, 3, 8, seed=5).source
    >>> fast = reversal_decoder(trained.params, source, trained.config)
    >>> slow = reversal_decoder(trained.params, source, trained.config, cache=False)
    >>> a = greedy_decode(fast.step, fast.state, 4, fast.max_length)
    >>> b = greedy_decode(slow.step, slow.state, 4, slow.max_length)
    >>> bool(np.array_equal(a.tokens, b.tokens)), bool(np.allclose(a.log_probs, b.log_probs, rtol=0, atol=1e-10))
    (True, True)
    """
    params = _check_params(params, config)
    source = _check_source(source, config.vocab_size)  # (batch, n_src)
    if not isinstance(cache, (bool, np.bool_)):
        raise TypeError(f"cache must be True or False, got {cache!r}")
    max_length = source.shape[1] + 1 if max_length is None else check_positive_int(max_length, "max_length")
    return start_decoder(params, source, config.n_heads, bool(cache), max_length)


# --- what the trained model does ---------------------------------------------------------------------------


def exact_matches(params: ReversalParameters, batch: Seq2SeqBatch, n_heads: int) -> np.ndarray:
    """Unchecked kernel of :func:`reversal_accuracy`: ``(batch,)`` True where greedy decoding is exactly the target.

    >>> trained = load_reversal()
    >>> exact_matches(trained.params, reversal_batch(3, 10, 3, 8, seed=0), 2).tolist()
    [True, True, True]
    """
    decoder = start_decoder(params, batch.source, n_heads, True, batch.target_out.shape[1])
    out = greedy_decode(decoder.step, decoder.state, decoder.batch_size, decoder.max_length)
    decoded = np.full(batch.target_out.shape, PAD, dtype=np.int64)  # (batch, n_tgt)
    decoded[:, : out.tokens.shape[1]] = out.tokens
    return np.all(decoded == batch.target_out, axis=1)  # (batch,)


def reversal_accuracy(params: ReversalParameters, batch: Seq2SeqBatch, config: ReversalConfig) -> float:
    r"""Share of the batch's sources whose greedy decoding is exactly their reversal, EOS included.

    .. math:: \frac{1}{B} \sum_b \bigl[\hat y_b = y_b\bigr], \qquad
              \hat y_{b,t} = \arg\max_v p(v \mid \hat y_{b,<t}, s_b)

    Parameters
    ----------
    params : ReversalParameters
        The model.
    batch : Seq2SeqBatch
        Sources and targets, e.g. the held-out batch ``reversal_batch(config.test_sequences, ...,
        seed=config.test_seed)``.
    config : ReversalConfig
        The model's configuration.

    Returns
    -------
    float
        Exact-match accuracy in ``[0, 1]``.

    Examples
    --------
    >>> trained = load_reversal()
    >>> config = trained.config
    >>> batch = reversal_batch(50, config.n_symbols, config.min_length, config.max_length, seed=11)
    >>> reversal_accuracy(trained.params, batch, config)
    1.0
    """
    params = _check_params(params, config)
    batch = _check_batch(batch, config.vocab_size)
    return float(exact_matches(params, batch, config.n_heads).mean())


class Alignment(NamedTuple):
    """How closely each cross-attention head follows the reversal's alignment.

    Attributes
    ----------
    agreement : ndarray
        ``(n_decoder_layers, n_heads)`` the share of output symbols whose largest weight falls on the
        mirrored source position.
    weight : ndarray
        ``(n_decoder_layers, n_heads)`` the mean weight on the mirrored source position.
    clearest : tuple of int
        ``(layer, head)`` of the head of highest agreement, ties broken by the weight.

    Examples
    --------
    >>> Alignment(np.array([[0.5, 1.0]]), np.array([[0.4, 0.9]]), (0, 1)).clearest
    (0, 1)
    """

    agreement: np.ndarray  # (n_decoder_layers, h)
    weight: np.ndarray  # (n_decoder_layers, h)
    clearest: tuple


def align(cross_weights: tuple, lengths: np.ndarray) -> Alignment:
    """Unchecked kernel of :func:`cross_attention_alignment`, from the maps ``(batch, h, n_tgt, n_src)`` of each layer.

    >>> w = reversal_alignment([2])[:, None]                        # (1, 1, 3, 2): one head, the exact map
    >>> align((w,), np.array([2]))
    Alignment(agreement=array([[1.]]), weight=array([[1.]]), clearest=(0, 0))
    """
    weights = np.stack(cross_weights, axis=1)  # (batch, layers, h, n_tgt, n_src)
    expected = reversal_alignment(lengths, weights.shape[-1], weights.shape[-2])  # (batch, n_tgt, n_src)
    real = expected.any(axis=-1)  # (batch, n_tgt): output symbols with a source position
    mirrored = expected.argmax(axis=-1)[:, None, None, :]  # (batch, 1, 1, n_tgt)
    hits = weights.argmax(axis=-1) == mirrored  # (batch, layers, h, n_tgt)
    on_mirror = np.take_along_axis(weights, mirrored[..., None], axis=-1)[..., 0]  # (batch, layers, h, n_tgt)
    agreement = np.moveaxis(hits, 3, 1)[real].mean(axis=0)  # (layers, h)
    weight = np.moveaxis(on_mirror, 3, 1)[real].mean(axis=0)  # (layers, h)
    ranked = np.lexsort((-weight.ravel(), -agreement.ravel()))  # best first
    layer, head = np.unravel_index(ranked[0], agreement.shape)
    return Alignment(agreement, weight, (int(layer), int(head)))


def cross_attention_alignment(params: ReversalParameters, batch: Seq2SeqBatch, config: ReversalConfig) -> Alignment:
    r"""Per decoder layer and head: how often, and how strongly, the cross-attention reads the mirrored source position.

    .. math:: a_{l h} = \frac{1}{\sum_b \ell_b} \sum_b \sum_{i < \ell_b}
              \bigl[\arg\max_j A^{(l, h)}_{b i j} = \ell_b - 1 - i\bigr], \qquad
              w_{l h} = \frac{1}{\sum_b \ell_b} \sum_b \sum_{i < \ell_b} A^{(l, h)}_{b, i, \ell_b - 1 - i}

    Decoder position :math:`i` predicts source symbol :math:`\ell - 1 - i`; a head that reads it off
    the source attends there (:func:`attnbook.learning.tasks.reversal_alignment`). The maps are those
    of the teacher-forced forward pass; the EOS position, which has no source symbol, is left out.

    Parameters
    ----------
    params : ReversalParameters
        The model.
    batch : Seq2SeqBatch
        Sources and targets.
    config : ReversalConfig
        The model's configuration.

    Returns
    -------
    Alignment
        ``agreement`` :math:`a` and ``weight`` :math:`w`, each ``(n_decoder_layers, n_heads)`` in
        ``[0, 1]``, and the clearest ``(layer, head)``.

    Examples
    --------
    >>> trained = load_reversal()
    >>> batch = reversal_batch(100, 10, 3, 8, seed=1)
    >>> alignment = cross_attention_alignment(trained.params, batch, trained.config)
    >>> alignment.clearest, float(alignment.agreement[alignment.clearest]) > 0.95
    ((1, 0), True)
    """
    params = _check_params(params, config)
    batch = _check_batch(batch, config.vocab_size)
    out = forward(params, batch.source, batch.target_in, config.n_heads)
    return align(out.cross_weights, batch.source_mask.sum(axis=1))


class DecodingSpeed(NamedTuple):
    """Greedy decoding timed with and without the key-value cache.

    Attributes
    ----------
    n_sequences : int
        Sequences decoded together.
    n_tokens : int
        Tokens generated per sequence (every step counts, EOS or not).
    cached_seconds, uncached_seconds : float
        Processor seconds of one decoding (encoder included), the fastest of the repeats.
    cached_tokens_per_second, uncached_tokens_per_second : float
        ``n_sequences * n_tokens`` over those seconds.
    speedup : float
        ``uncached_seconds / cached_seconds``.

    Examples
    --------
    >>> speed = decoding_speed(load_reversal().params, ReversalConfig(), n_sequences=4, n_tokens=4, repeats=1)
    >>> speed.n_sequences * speed.n_tokens, speed.speedup > 0
    (16, True)
    """

    n_sequences: int
    n_tokens: int
    cached_seconds: float
    uncached_seconds: float
    cached_tokens_per_second: float
    uncached_tokens_per_second: float
    speedup: float


def decoding_speed(params: ReversalParameters, config: ReversalConfig, n_sequences: int = 64, n_tokens: int = 8,
                   repeats: int = 5, seed: int = 0) -> DecodingSpeed:
    r"""Tokens per second of greedy decoding, with the key-value cache and without.

    .. math:: \text{speed-up} = \frac{t_\text{no cache}}{t_\text{cache}}, \qquad
              \text{work per step } \propto t \text{ without a cache}, \ \propto 1 \text{ with one (projections)}

    Every step counts: the end token is never chosen (it is set outside the vocabulary), so each
    sequence gets ``n_tokens`` tokens, which also times an untrained model fairly. Each run encodes
    ``n_sequences`` random sources (:func:`attnbook.learning.tasks.reversal_batch`, seeded) and
    decodes them; the time is the processor time of the fastest of ``repeats`` runs
    (:func:`attnbook.timing.time_calls`). Timings vary with the machine and its load.

    Parameters
    ----------
    params : ReversalParameters
        The model (trained or not: only the time is measured).
    config : ReversalConfig
        The model's configuration.
    n_sequences : int, optional
        Sources decoded together; default 64.
    n_tokens : int, optional
        Tokens generated per source; default 8.
    repeats : int, optional
        Timed runs of each; default 5.
    seed : int, optional
        Seed of the sources; default 0.

    Returns
    -------
    DecodingSpeed
        Seconds, tokens per second and the speed-up.

    Examples
    --------
    >>> config = ReversalConfig()
    >>> speed = decoding_speed(init_reversal(config), config, n_sequences=8, n_tokens=24, repeats=1)
    >>> speed.n_tokens, speed.speedup > 1
    (24, True)
    """
    params = _check_params(params, config)
    n_sequences = check_positive_int(n_sequences, "n_sequences")
    n_tokens = check_positive_int(n_tokens, "n_tokens")
    repeats = check_positive_int(repeats, "repeats")
    return time_decoding(params, config, n_sequences, n_tokens, repeats, seed)


def time_decoding(params: ReversalParameters, config: ReversalConfig, n_sequences: int, n_tokens: int,
                  repeats: int, seed: int) -> DecodingSpeed:
    """Unchecked kernel of :func:`decoding_speed`.

    >>> time_decoding(load_reversal().params, ReversalConfig(), 2, 3, 1, 0).n_tokens
    3
    """
    source = reversal_batch(n_sequences, config.n_symbols, config.min_length, config.max_length, seed=seed).source
    never = config.vocab_size  # an end token the model cannot choose: every sequence runs n_tokens steps

    def run(cache: bool):
        decoder = start_decoder(params, source, config.n_heads, cache, n_tokens)
        return greedy_decode(decoder.step, decoder.state, n_sequences, n_tokens, eos=never)

    cached, uncached = time_calls([partial(run, True), partial(run, False)], repeats=repeats, warmup=1)
    generated = n_sequences * n_tokens
    return DecodingSpeed(n_sequences, n_tokens, float(cached), float(uncached), generated / float(cached),
                         generated / float(uncached), float(uncached / cached))


# --- training and the stored model ---------------------------------------------------------------------------


class TrainedReversal(NamedTuple):
    """The stored model: its parameters, its configuration and the record of its training.

    Attributes
    ----------
    params : ReversalParameters
        The trained parameters.
    config : ReversalConfig
        The configuration it was trained with.
    record : dict
        The training record: ``config``, ``seed``, ``n_steps``, ``losses``, ``metrics``, ``seconds``,
        ``decoding_speed``.

    Examples
    --------
    >>> trained = load_reversal()
    >>> trained.config.d_model, trained.record["seed"]
    (32, 0)
    """

    params: ReversalParameters
    config: ReversalConfig
    record: dict


def held_out_batch(config: ReversalConfig) -> Seq2SeqBatch:
    """Unchecked kernel: the held-out batch of ``config`` (``test_sequences`` sources, seed ``test_seed``).

    >>> held_out_batch(ReversalConfig(test_sequences=3)).source.shape[0]
    3
    """
    return reversal_batch(config.test_sequences, config.n_symbols, config.min_length, config.max_length,
                          seed=config.test_seed)


def evaluate(params: ReversalParameters, config: ReversalConfig) -> dict:
    """Unchecked kernel: the metrics of the record, on the held-out batch.

    ``accuracy`` (greedy exact match), ``token_accuracy`` (teacher-forced argmax on real positions),
    ``test_loss`` (without label smoothing), ``alignment`` and ``alignment_weight`` (per decoder layer
    and head, see :func:`cross_attention_alignment`) and the clearest head.

    >>> metrics = evaluate(load_reversal().params, ReversalConfig(test_sequences=20))
    >>> metrics["accuracy"], sorted(metrics)[:2]
    (1.0, ['accuracy', 'alignment'])
    """
    batch = held_out_batch(config)
    out = forward(params, batch.source, batch.target_in, config.n_heads)
    hits = out.logits.argmax(axis=-1) == batch.target_out  # (batch, n_tgt)
    test_loss = token_entropy(out.logits, batch.target_out, batch.target_mask, 0.0)[0]
    alignment = align(out.cross_weights, batch.source_mask.sum(axis=1))
    return {"accuracy": float(exact_matches(params, batch, config.n_heads).mean()),
            "token_accuracy": float(hits[batch.target_mask].mean()), "test_loss": float(test_loss),
            "alignment": alignment.agreement.tolist(), "alignment_weight": alignment.weight.tolist(),
            "clearest_head": {"layer": alignment.clearest[0], "head": alignment.clearest[1]}}


def train(seed: int = 0, progress: bool = True, n_steps: int | None = None) -> tuple:
    r"""Train the reversal model from scratch: Adam with the Noam schedule and clipping, on fresh batches.

    .. math:: \eta_t = d^{-1/2} \min\bigl(t^{-1/2},\ t\, w^{-3/2}\bigr), \qquad
              g \leftarrow g \min\bigl(1, c / \lVert g \rVert\bigr)

    Each step draws a new batch of :func:`attnbook.learning.tasks.reversal_batch` (from ``seed``),
    takes the gradient of :func:`reversal_loss_and_gradients` and a step of Adam
    (:func:`attnbook.learning.loop.fit`). The record holds the
    configuration, the loss of every step, the held-out metrics and the training time, and (under
    ``decoding_speed``, measured on this machine, not reproducible) greedy decoding timed with and
    without the cache: the trained model on 64 sequences of 8 tokens, an untrained one of the same size
    on 64 sequences of 32 tokens.
    ``make train`` (``python -m tools.train reversal``) runs it and stores the model.

    Parameters
    ----------
    seed : int, optional
        Seeds the initial parameters and the training batches; default 0.
    progress : bool, optional
        Show a progress bar; default True.
    n_steps : int, optional
        Stop after this many steps (a shortened run, for tests); default ``ReversalConfig().n_steps``.

    Returns
    -------
    tuple
        ``(params, record)``: :class:`ReversalParameters` and a JSON-serialisable dict.

    Examples
    --------
    >>> params, record = train(seed=0, progress=False, n_steps=2)
    >>> len(record["losses"]), record["config"]["d_model"]
    (2, 32)
    """
    from .loop import fit  # the training loop (and its progress bar) only when training

    config = ReversalConfig()
    n_steps = config.n_steps if n_steps is None else check_positive_int(n_steps, "n_steps")
    params = init_reversal(config, seed)

    def next_batch(rng: np.random.Generator) -> Seq2SeqBatch:
        return draw_reversal(rng, config.batch_size, config.n_symbols, config.min_length, config.max_length)

    step_gradients = partial(loss_and_gradients, n_heads=config.n_heads, label_smoothing=config.label_smoothing)
    start = time.perf_counter()
    params, history = fit(params, step_gradients, next_batch, n_steps, d_model=config.d_model,
                          warmup=config.warmup, max_norm=config.max_norm,
                          seed=seed, progress=progress)
    seconds = time.perf_counter() - start
    metrics = evaluate(params, config)
    losses = [float(loss) for loss in history.losses]
    metrics["final_loss"] = float(np.mean(losses[-50:]))
    speeds = {"trained_64_sequences_8_tokens": time_decoding(params, config, 64, 8, 3, seed),
              "untrained_64_sequences_32_tokens": time_decoding(init_reversal(config, seed), config, 64, 32, 3, seed)}
    record = {"config": config._asdict(), "seed": seed, "n_steps": n_steps, "losses": losses, "metrics": metrics,
              "seconds": seconds, "decoding_speed": {name: speed._asdict() for name, speed in speeds.items()}}
    return params, record


def load_reversal(directory=None) -> TrainedReversal:
    """Load the stored reversal model (``attnbook/data/trained/reversal.npz``) with its configuration and record.

    .. math:: \\texttt{reversal.npz}, \\texttt{reversal.json} \\mapsto (\\theta, \\text{config}, \\text{record})

    Parameters
    ----------
    directory : str or Path, optional
        Another folder; default the package's ``data/trained``.

    Returns
    -------
    TrainedReversal
        ``params``, ``config`` (from the record) and ``record``.

    Examples
    --------
    >>> trained = load_reversal()
    >>> trained.record["metrics"]["accuracy"] >= 0.99, len(trained.params.decoder)
    (True, 2)
    """
    record_path = trained_path(NAME, ".json", directory)
    if not record_path.exists():
        raise FileNotFoundError(f"no trained model {NAME!r} in the package: run `make train` to make it")
    record = json.loads(record_path.read_text())
    config = ReversalConfig(**record["config"])
    params, record = load_trained(NAME, init_reversal(config, seed=0), directory)
    return TrainedReversal(params, config, record)
