"""The induction model with gated attention: the one change a sigmoid gate on each head's output (Qiu et al., 2025).

The model, its data, its seed, its sizes and its training are those of
:mod:`attnbook.learning.models.induction`; each layer's self-attention multiplies every head's output,
coordinate by coordinate, by ``sigmoid(x W_G)`` read from the query's token, before the output projection
(:func:`attnbook.learning.layers.gated_self_attention_vjp`, the gate of Qwen3-Next's
:func:`attnbook.recent.gated.gated_attention`). The initial weights are the induction model's, from the same seed,
and each layer's ``W_G`` is drawn from its own generator, so the two runs start from the same model but for
the gates. Whether the gate removes the first-token sink is measured by
:func:`attnbook.learning.analysis.induction.sink_measurements`.

>>> from attnbook.learning.models.induction import InductionConfig, induction_batch
>>> config = InductionConfig(vocab_size=8, d_model=8, d_ff=8, batch_size=2, min_half_length=3,
...                          max_half_length=3)
>>> params = init_gated_induction_model(config, seed=0)
>>> tokens = induction_batch(np.random.default_rng(0), config)           # (batch, 2h)
>>> forward = gated_induction_forward(params, tokens[:, :-1], config)
>>> forward.logits.shape, forward.attention.shape, forward.gate.shape   # gate: (layers, batch, h, n, d_head)
((2, 5, 8), (2, 2, 1, 5, 5), (2, 2, 1, 5, 8))
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...validation import Array, Stack
from ..layers import GatedEncoderLayerWeights, gated_encoder_layer_vjp
from . import induction, scaffold
from .induction import InductionConfig, init_induction_model, stacked

__all__ = ["GATE_SEED_OFFSET", "MODEL", "GatedForward", "GatedInductionParameters", "gated_induction_forward",
           "init_gated_induction_model", "load_gated_induction"]

GATE_SEED_OFFSET = 5  # the gates' generator is seeded seed + 5: the layers use seed + 1 .. seed + 4


class GatedInductionParameters(NamedTuple):
    """The learned weights: token embeddings, two gated post-norm layers, the output table.

    Attributes
    ----------
    embedding, layers, unembedding
        As in :class:`~attnbook.learning.models.induction.InductionParameters`; each layer a
        :class:`~attnbook.learning.layers.GatedEncoderLayerWeights` (its ``w_gate`` ``(d_model, d_model)``).

    Examples
    --------
    >>> p = init_gated_induction_model(InductionConfig(vocab_size=5, d_model=4, d_ff=8))
    >>> p.embedding.shape, len(p.layers), p.layers[1].w_gate.shape
    ((5, 4), 2, (4, 4))
    """

    embedding: Array["vocab_size, d_model"]  # E
    layers: Stack[GatedEncoderLayerWeights, "n_layers"]  # two
    unembedding: Array["vocab_size, d_model"]  # U


class GatedForward(NamedTuple):
    """The gated model's forward pass: ``logits, attention, gate = ...``.

    Attributes
    ----------
    logits, attention
        As in :class:`~attnbook.learning.models.scaffold.Forward`: ``(batch, n, V)`` and
        ``(2, batch, n_heads, n, n)``.
    gate : ndarray
        ``(2, batch, n_heads, n, d_head)`` every layer's gate on each head's output, in ``(0, 1)``.

    Examples
    --------
    >>> GatedForward(None, None, None)._fields
    ('logits', 'attention', 'gate')
    """

    logits: object  # (batch, n, V)
    attention: object  # (layers, batch, h, n, n)
    gate: object  # (layers, batch, h, n, d_head)


def init_gated_induction_model(config: InductionConfig, seed: int = 0) -> GatedInductionParameters:
    r"""Seeded initial weights: the induction model's from ``seed``, and a gate per layer.

    .. math:: (W_G)_{ij} \sim \mathcal{N}(0, 1 / d_\text{model})

    from the generator of ``seed + GATE_SEED_OFFSET`` (as :func:`attnbook.recent.gated.init_gated_attention`).

    Parameters
    ----------
    config, seed
        As in :func:`~attnbook.learning.models.induction.init_induction_model`.

    Returns
    -------
    GatedInductionParameters
        The initial weights.

    Examples
    --------
    >>> from attnbook.learning.models.induction import init_induction_model
    >>> config = InductionConfig(vocab_size=6, d_model=4, d_ff=8)
    >>> gated, plain = init_gated_induction_model(config, seed=1), init_induction_model(config, seed=1)
    >>> bool(np.array_equal(gated.layers[0].self_attention.w_q, plain.layers[0].self_attention.w_q))
    True
    """
    plain = init_induction_model(config, seed)  # checks config and seed
    rng = np.random.default_rng(seed + GATE_SEED_OFFSET)
    d = config.d_model
    layers = tuple(GatedEncoderLayerWeights(*layer, rng.standard_normal((d, d)) / math.sqrt(d))  # w_gate: (d, d)
                   for layer in plain.layers)
    return GatedInductionParameters(plain.embedding, layers, plain.unembedding)


def taped(params: GatedInductionParameters, tokens: np.ndarray, config: InductionConfig) -> tuple:
    """Unchecked kernel: the forward pass on ``tokens`` ``(batch, n)``; ``(GatedForward, back)``.

    >>> config = InductionConfig(vocab_size=5, d_model=4, d_ff=8)
    >>> out, back = taped(init_gated_induction_model(config), np.array([[1, 2]]), config)
    >>> back(np.ones_like(out.logits)).layers[0].w_gate.shape
    (4, 4)
    """
    logits, results, back = stacked(params, tokens, config, gated_encoder_layer_vjp.unchecked)  # (batch, n, V)
    attention = np.stack([r.weights for r in results])  # (layers, batch, h, n, n)
    return GatedForward(logits, attention, np.stack([r.gate for r in results])), back  # gate: (layers, batch, h, n, d_head)


def gated_induction_forward(params: GatedInductionParameters, tokens, config: InductionConfig) -> GatedForward:
    r"""Run the gated model on ``tokens``: next-token logits, every layer's attention and gates.

    .. math:: X_\ell = \operatorname{LN}_2\bigl(X' + \operatorname{FFN}(X')\bigr), \quad
              X' = \operatorname{LN}_1\bigl(X_{\ell-1} + [\sigma(X_{\ell-1} W_{G,i}) \odot O_i]_i W_O + b_O\bigr)

    Parameters
    ----------
    params, tokens, config
        The weights; ``(batch, n)`` token ids in ``0 .. V - 1``; the configuration.

    Returns
    -------
    GatedForward
        ``logits`` ``(batch, n, V)``, ``attention`` ``(2, batch, n_heads, n, n)``, ``gate``
        ``(2, batch, n_heads, n, d_head)``.

    Examples
    --------
    >>> config = InductionConfig(vocab_size=5, d_model=4, d_ff=8)
    >>> forward = gated_induction_forward(init_gated_induction_model(config), np.array([[1, 2, 3]]), config)
    >>> bool(forward.attention[0, 0, 0, 0, 1] == 0), bool(np.all((forward.gate > 0) & (forward.gate < 1)))
    (True, True)
    """
    params, config = scaffold.check_model(MODEL, params, config)
    tokens = induction.check_tokens(tokens, config)  # (batch, n)
    return taped(params, tokens, config)[0]


MODEL = induction.MODEL._replace(
    name="induction_gated", init=lambda config, seed: init_gated_induction_model(config, seed),
    forward=lambda params, tokens, config: taped(params, tokens[:, :-1], config),
    layout=GatedInductionParameters,
)

load_gated_induction = scaffold.loader(MODEL)  # Trained(params, config, record) of data/trained/induction_gated
