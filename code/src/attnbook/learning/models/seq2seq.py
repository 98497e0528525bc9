r"""An encoder-decoder Transformer that learns to reverse strings.

The Transformer of Vaswani et al. (2017), small: post-norm encoder and decoder layers (:mod:`attnbook.transformer`)
and one token embedding :math:`E` shared by the source, the target and the output projection:

.. math:: X_0 = \sqrt{d}\, E[\text{source}] + \mathrm{PE}, \qquad
          Y_0 = \sqrt{d}\, E[\text{target}_\text{in}] + \mathrm{PE}, \qquad
          \text{logits} = Y_L E^\top

The encoder's self-attention and the decoder's cross-attention skip the source's padding; the decoder's
self-attention is causal. The loss is label-smoothed cross-entropy over the real target positions, its gradient
the layers' backward passes (:mod:`attnbook.learning.layers`), on the scaffold of every model
(:mod:`attnbook.learning.models.scaffold`). Decoding it is :mod:`attnbook.learning.analysis.seq2seq_decoder`, its
alignment and speed :mod:`attnbook.learning.analysis.seq2seq`.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ...positional import sinusoidal_encoding
from ...transformer import DecoderLayerWeights, EncoderLayerWeights, init_decoder_layer, init_encoder_layer
from ...multihead import check_heads
from ...validation import Array, Stack
from ..gradients import token_entropy
from ..layers import decoder_layer_vjp, embedding_vjp, encoder_layer_vjp, tied_logits_vjp
from ..tasks import PAD, Seq2SeqBatch, check_seq2seq_batch, check_tokens, draw_reversal, reversal_batch
from . import scaffold

__all__ = ["MODEL", "ReversalConfig", "ReversalParameters", "held_out_batch", "init_reversal", "load_reversal",
           "reversal_forward", "reversal_loss_and_gradients"]


class ReversalConfig(NamedTuple):
    r"""The reversal model, its task, its training and its held-out test.

    Attributes
    ----------
    n_symbols, min_length, max_length : int
        The task: distinct symbols (the vocabulary adds PAD, BOS, EOS), the shortest and longest source.
    d_model, n_heads, d_ff, n_encoder_layers, n_decoder_layers : int
        The model: width (even), heads, the feed-forward width, the depths.
    batch_size, n_steps, warmup : int
        Training: sequences per step, steps, warm-up steps of the Noam schedule.
    label_smoothing, max_norm : float
        :math:`\varepsilon` of the loss, and the global norm the gradient is clipped to.
    test_sequences, test_seed : int
        The held-out batch: its size and seed (the training batches come from the training seed).

    Examples
    --------
    >>> ReversalConfig().vocab_size, ReversalConfig().d_model // ReversalConfig().n_heads
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
    """The shared embedding (also the output projection, ``logits = y E^T``), the encoder and the decoder layers.

    Attributes
    ----------
    embedding : ndarray
        ``(vocab, d_model)`` :math:`E`.
    encoder, decoder : tuple
        The :class:`~attnbook.EncoderLayerWeights` and :class:`~attnbook.DecoderLayerWeights`, first to last.

    Examples
    --------
    >>> init_reversal(ReversalConfig(d_model=8, d_ff=16, n_decoder_layers=1)).embedding.shape
    (13, 8)
    """

    embedding: Array["vocab, d_model"]  # E
    encoder: Stack[EncoderLayerWeights, "n_encoder_layers"]
    decoder: Stack[DecoderLayerWeights, "n_decoder_layers"]


class _ReversalForward(NamedTuple):  # the teacher-forced pass: the logits and every layer's attention, per stack
    logits: np.ndarray  # (batch, n_tgt, vocab)
    encoder_weights: tuple  # per layer (batch, h, n_src, n_src)
    self_weights: tuple  # per layer (batch, h, n_tgt, n_tgt)
    cross_weights: tuple  # per layer (batch, h, n_tgt, n_src)


def _check_config(config) -> ReversalConfig:
    scaffold.check_config(config, ReversalConfig, minimum={"test_seed": 0}, own=("label_smoothing",))
    check_heads(config.d_model, config.n_heads)
    if config.d_model % 2:
        raise ValueError(f"config.d_model = {config.d_model} is odd; sinusoidal positions need an even width")
    if config.min_length > config.max_length:
        raise ValueError(f"config.min_length = {config.min_length} is more than config.max_length = "
                         f"{config.max_length}")
    if isinstance(config.label_smoothing, bool) or not 0 <= config.label_smoothing < 1:
        raise ValueError(f"config.label_smoothing must be a number in [0, 1), got {config.label_smoothing!r}")
    return config


def _dims(config: ReversalConfig):
    return scaffold.config_dims(config, ("d_model", "d_ff", "n_encoder_layers", "n_decoder_layers"),
                                vocab=(config.vocab_size, f"config.vocab_size = {config.vocab_size}"))


def init_reversal(config: ReversalConfig = ReversalConfig(), seed: int = 0) -> ReversalParameters:
    r"""Seeded parameters: a normal embedding of variance :math:`1/d`, Glorot layers, identity norms.

    .. math:: E_{ij} \sim \mathcal{N}(0, 1/d), \qquad \text{so } \sqrt{d}\, E_i \text{ has entries of variance 1}

    Each layer (:func:`attnbook.init_encoder_layer`, :func:`attnbook.init_decoder_layer`) has its own seed from ``seed``.

    Parameters
    ----------
    config, seed : optional
        The sizes, and the seed of ``numpy.random.default_rng``.

    Returns
    -------
    ReversalParameters
        The parameters, float64.

    Examples
    --------
    >>> round(float(init_reversal(ReversalConfig(), seed=0).embedding.std() * 32**0.5), 1)
    1.0
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


def _embed_tape(table: np.ndarray, tokens: np.ndarray) -> tuple:
    d = table.shape[1]
    x, lookup_back = embedding_vjp.unchecked(table, tokens)  # (batch, n, d)
    return math.sqrt(d) * x + positions(tokens.shape[1], d), lambda dx: lookup_back(math.sqrt(d) * dx)


def taped(params: ReversalParameters, source: np.ndarray, target_in: np.ndarray, n_heads: int) -> tuple:
    """Unchecked kernel: the forward pass and ``back(dlogits)``, the gradient of every parameter.

    >>> config = ReversalConfig(d_model=8, d_ff=16, n_encoder_layers=1, n_decoder_layers=1)
    >>> out, back = taped(init_reversal(config), np.array([[3, 4]]), np.array([[1, 4, 3]]), 2)
    >>> back(np.ones_like(out.logits)).embedding.shape
    (13, 8)
    """
    mask = (source != PAD)[:, None, None, :]  # (batch, 1, 1, n_src): the padding keys, for every head
    x, source_back = _embed_tape(params.embedding, source)  # (batch, n_src, d)
    encoder_backs, encoder_weights = [], []
    for layer in params.encoder:
        (x, attention), back = encoder_layer_vjp.unchecked(x, layer, n_heads, mask)  # (batch, n_src, d)
        encoder_backs.append(back)
        encoder_weights.append(attention)  # (batch, h, n_src, n_src)
    memory = x  # (batch, n_src, d)
    y, target_back = _embed_tape(params.embedding, target_in)  # (batch, n_tgt, d)
    decoder_backs, self_weights, cross_weights = [], [], []
    for layer in params.decoder:
        (y, self_w, cross_w), back = decoder_layer_vjp.unchecked(y, memory, layer, n_heads, mask)  # (batch, n_tgt, d)
        decoder_backs.append(back)
        self_weights.append(self_w)  # (batch, h, n_tgt, n_tgt)
        cross_weights.append(cross_w)  # (batch, h, n_tgt, n_src)
    logits, logits_back = tied_logits_vjp.unchecked(y, params.embedding)  # (batch, n_tgt, vocab)

    def back(dlogits):
        dy, d_output = logits_back(dlogits)  # (batch, n_tgt, d), (vocab, d)
        decoder_grads, dmemory = [], np.zeros_like(memory)  # (batch, n_src, d)
        for layer_back in reversed(decoder_backs):
            grads, dy, dm = layer_back(dy)  # (batch, n_tgt, d), (batch, n_src, d)
            dmemory += dm  # the memory collects every cross-attention's key and value gradients
            decoder_grads.append(grads)
        d_target, encoder_grads = target_back(dy), []  # (vocab, d)
        for layer_back in reversed(encoder_backs):
            grads, dmemory = layer_back(dmemory)  # (batch, n_src, d)
            encoder_grads.append(grads)
        d_source = source_back(dmemory)  # (vocab, d)
        return ReversalParameters(d_output + d_target + d_source, tuple(reversed(encoder_grads)),
                                  tuple(reversed(decoder_grads)))  # the three uses of E add up

    return _ReversalForward(logits, tuple(encoder_weights), tuple(self_weights), tuple(cross_weights)), back


def reversal_forward(params: ReversalParameters, source, target_in, config: ReversalConfig) -> _ReversalForward:
    r"""The teacher-forced forward pass: next-token logits at every target position, and every attention map.

    .. math:: M = \operatorname{Enc}\bigl(\sqrt{d}\, E[s] + \mathrm{PE}\bigr), \qquad
              \text{logits} = \operatorname{Dec}\bigl(\sqrt{d}\, E[y_\text{in}] + \mathrm{PE},\ M\bigr)\, E^\top

    Parameters
    ----------
    params, source, target_in, config
        The model (:func:`init_reversal`, :func:`load_reversal`); ``(batch, n_src)`` source tokens, PAD (0)
        after each string (masked); ``(batch, n_tgt)`` the decoder's input, BOS and the target so far; its
        configuration.

    Returns
    -------
    NamedTuple
        ``logits, encoder_weights, self_weights, cross_weights``: ``(batch, n_tgt, vocab)`` and, a tuple per stack,
        every layer's ``(batch, h, n_src, n_src)``, ``(batch, h, n_tgt, n_tgt)`` (causal), ``(batch, h, n_tgt, n_src)``.

    Examples
    --------
    >>> trained = load_reversal()
    >>> batch = reversal_batch(1, 10, 5, 5, seed=3)
    >>> out = reversal_forward(trained.params, batch.source, batch.target_in, trained.config)
    >>> bool(np.array_equal(out.logits.argmax(axis=-1), batch.target_out)), out.cross_weights[0].shape  # 2 heads
    (True, (1, 2, 6, 5))
    """
    params, config = scaffold.check_model(MODEL, params, config)
    source = check_tokens(source, "source", config.vocab_size, real=True)  # (batch, n_src)
    target_in = check_tokens(target_in, "target_in", config.vocab_size)  # (batch, n_tgt)
    if target_in.shape[0] != source.shape[0]:
        raise ValueError(f"source has {source.shape[0]} rows but target_in has {target_in.shape[0]}")
    return taped(params, source, target_in, config.n_heads)[0]


def reversal_loss_and_gradients(params: ReversalParameters, batch: Seq2SeqBatch, config: ReversalConfig) -> tuple:
    r"""The label-smoothed cross-entropy of a batch, and its gradient for every parameter (:func:`taped`'s ``back``).

    .. math:: L = \frac{1}{|M|} \sum_{(b, i) \in M} \Bigl(-(1 - \varepsilon) \log p_{b i, t_{b i}}
              - \frac{\varepsilon}{V} \sum_{v} \log p_{b i v}\Bigr), \qquad
              \frac{\partial L}{\partial E} = dZ^\top Y_L + \sqrt{d}\,\bigl(\textstyle\sum dY_0 + \sum dX_0\bigr)

    over the real target positions :math:`M`; the three uses of :math:`E` add up.

    Parameters
    ----------
    params, batch, config
        As in :func:`reversal_forward`; ``batch`` a :func:`attnbook.learning.tasks.reversal_batch`.

    Returns
    -------
    tuple
        ``(loss, grads)``, ``grads`` a :class:`ReversalParameters`.

    Examples
    --------
    >>> config = ReversalConfig(d_model=8, d_ff=16, n_encoder_layers=1, n_decoder_layers=1)
    >>> loss, grads = reversal_loss_and_gradients(init_reversal(config), reversal_batch(4, 10, 3, 8), config)
    >>> 2.0 < loss < 4.0, grads.encoder[0].self_attention.w_q.shape
    (True, (8, 8))
    """
    params, config = scaffold.check_model(MODEL, params, config)
    return scaffold.loss_and_gradients(MODEL, params, check_seq2seq_batch(batch, config.vocab_size), config)


def held_out_batch(config: ReversalConfig) -> Seq2SeqBatch:
    """The held-out batch of ``config``: ``test_sequences`` sources of seed ``test_seed``, never a training batch.

    Parameters
    ----------
    config : ReversalConfig
        The configuration.

    Returns
    -------
    Seq2SeqBatch
        A :func:`attnbook.learning.tasks.reversal_batch`.

    Examples
    --------
    >>> held_out_batch(ReversalConfig(test_sequences=3)).source.shape[0]
    3
    """
    return reversal_batch(config.test_sequences, config.n_symbols, config.min_length, config.max_length,
                          seed=config.test_seed)


def _evaluate(params: ReversalParameters, config: ReversalConfig) -> dict:
    batch = held_out_batch(config)
    out = taped(params, batch.source, batch.target_in, config.n_heads)[0]
    hits = out.logits.argmax(axis=-1) == batch.target_out  # (batch, n_tgt)
    test_loss = token_entropy(out.logits, batch.target_out, batch.target_mask, 0.0)[0]
    return {"token_accuracy": float(hits[batch.target_mask].mean()), "test_loss": float(test_loss)}


MODEL = scaffold.Model(
    name="reversal", config=ReversalConfig, init=lambda config, seed: init_reversal(config, seed),
    forward=lambda params, batch, config: taped(params, batch.source, batch.target_in, config.n_heads),
    loss=lambda logits, batch, config: token_entropy(logits, batch.target_out, batch.target_mask,
                                                     float(config.label_smoothing)),
    batch=lambda rng, c: draw_reversal(rng, c.batch_size, c.n_symbols, c.min_length, c.max_length),
    evaluate=_evaluate,
    fit_options=lambda c: {"d_model": c.d_model, "warmup": c.warmup, "max_norm": c.max_norm},
    layout=ReversalParameters, check=_check_config, dims=_dims,
)


load_reversal = scaffold.loader(MODEL)  # Trained(params, config, record) of data/trained/reversal
