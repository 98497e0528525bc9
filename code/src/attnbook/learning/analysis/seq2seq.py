"""What the trained reversal model does: how its cross-attention heads follow the reversal's alignment, and how
much faster the key-value cache decodes.

>>> trained = load_reversal()
>>> alignment = cross_attention_alignment(trained.params, held_out_batch(trained.config), trained.config)
>>> clearest = trained.record["metrics"]["clearest_head"]
>>> alignment.clearest == (clearest["layer"], clearest["head"])
True
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np

from ...measure.timing import time_calls
from ...validation import check_positive_int
from ..decoding import greedy_decode
from ..models import scaffold
from ..models.seq2seq import (
    MODEL,
    ReversalConfig,
    ReversalParameters,
    held_out_batch,
    init_reversal,
    load_reversal,
    taped,
)
from ..tasks import Seq2SeqBatch, check_seq2seq_batch, reversal_alignment, reversal_batch
from .seq2seq_decoder import start_decoder

__all__ = ["Alignment", "DecodingSpeed", "cross_attention_alignment", "decoding_speed"]


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
    params, config = scaffold.check_model(MODEL, params, config)
    batch = check_seq2seq_batch(batch, config.vocab_size)
    out = taped(params, batch.source, batch.target_in, config.n_heads)[0]
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
    (:func:`attnbook.measure.timing.time_calls`). Timings vary with the machine and its load.

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
    params, config = scaffold.check_model(MODEL, params, config)
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
