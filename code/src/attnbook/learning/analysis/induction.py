"""What the trained induction model's heads do: where they look (previous-token and induction scores), what
silencing one costs, and when the circuit emerges during training.

What the stored model shows (its record): the second-half loss drops from about ``ln V`` to near 0 within a few
hundred steps (the *emergence step*), while the induction score of layer 2 jumps and layer 1 turns into a
previous-token head at the first-half positions, where the induction head reads its keys. Silencing either
head brings the second-half loss back above ``ln V / 2``.

>>> params, config, record = load_induction()
>>> metrics = induction_metrics(params, config)
>>> bool(abs(metrics["second_half_loss"] - record["metrics"]["second_half_loss"]) < 1e-9)
True
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...validation import check_positive_int
from ..gradients import log_softmax
from ..models import scaffold
from ..models.induction import (
    MODEL,
    InductionConfig,
    InductionParameters,
    check_sequences,
    init_induction_model,
    load_induction,
    taped,
)
from ..tasks import repeated_sequence_batch

__all__ = ["HALF_LENGTHS", "HeadScores", "SinkShares", "ablate_head", "emergence_step", "first_token_share",
           "half_way_step", "head_scores", "induction_metrics", "next_token_losses", "probe_tokens", "sink_measurements"]

HALF_LENGTHS = (4, 8, 12, 16, 20, 24)  # evaluated after training; 20 and 24 are longer than any training batch


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
    return scores(*_repeated_attention(attention, half_length))


def _repeated_attention(attention, half_length: int) -> tuple:
    """``(attention, half_length)`` checked: ``(n_layers, batch, n_heads, 2h - 1, 2h - 1)`` weights and ``h``."""
    a = np.asarray(attention, dtype=float)  # (layers, batch, h, n, n)
    half_length = check_positive_int(half_length, "half_length", 2)
    n = 2 * half_length - 1
    if a.ndim != 5 or a.shape[-2:] != (n, n):
        raise ValueError(f"attention has shape {a.shape}; expected (n_layers, batch, n_heads, {n}, {n}) "
                         f"for half_length = {half_length}")
    return a, half_length


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


class SinkShares(NamedTuple):
    """How much weight the queries put on the first token, in each half of repeated sequences.

    Attributes
    ----------
    first_half : ndarray
        ``(n_layers, n_heads)`` mean weight of query ``s`` on key 0 over ``s = 1 .. h - 1``, where nothing
        can be copied (query 0 has no other key and is left out).
    second_half : ndarray
        ``(n_layers, n_heads)`` the same over the second half's queries ``t = h .. 2h - 2``.

    Examples
    --------
    >>> SinkShares(np.ones((2, 1)), np.zeros((2, 1))).first_half.tolist()
    [[1.0], [1.0]]
    """

    first_half: np.ndarray  # (n_layers, n_heads): queries 1 .. h - 1, key 0
    second_half: np.ndarray  # (n_layers, n_heads): queries h .. 2h - 2, key 0


def first_token_share(attention, half_length: int) -> SinkShares:
    r"""The share of attention weight on the first token (an attention sink's), per layer and head, by half.

    .. math:: \text{sink}_1 = \operatorname{mean}_{b,\; 1 \le s \le h-1} A_{b, s, 0}, \qquad
              \text{sink}_2 = \operatorname{mean}_{b,\; h \le t \le 2h-2} A_{b, t, 0}

    Parameters
    ----------
    attention : array_like
        ``(n_layers, batch, n_heads, 2h - 1, 2h - 1)``, as a model's forward pass returns it on
        ``tokens[:, :-1]`` of repeated sequences.
    half_length : int
        ``h``.

    Returns
    -------
    SinkShares
        ``(first_half, second_half)``, each ``(n_layers, n_heads)``.

    Examples
    --------
    >>> a = np.zeros((1, 1, 1, 5, 5)); a[..., 0] = 1                      # every query on token 0
    >>> first_token_share(a, half_length=3).second_half.tolist()
    [[1.0]]
    """
    a, half_length = _repeated_attention(attention, half_length)  # (layers, batch, h, n, n)
    on_first = a[..., 0]  # (layers, batch, heads, n): each query's weight on key 0
    first = on_first[..., 1:half_length].mean(axis=(1, 3))  # (layers, heads)
    second = on_first[..., half_length:].mean(axis=(1, 3))  # (layers, heads)
    return SinkShares(first, second)


def sink_measurements(forward, tokens, half_length: int) -> dict:
    r"""A model's first-token shares and its task on repeated sequences: the second half's loss and accuracy.

    .. math:: \text{accuracy} = \operatorname{mean}_{b,\; h \le t \le 2h-2}
              \bigl[\arg\max_v z_{b, t, v} = x_{b, t+1}\bigr]

    the share of the copyable next tokens (``t = h .. 2h - 2``, as in :func:`head_scores`) the model
    predicts best. Any model's forward pass on ``tokens[:, :-1]`` will do: the induction model's and the
    gated one's (:mod:`attnbook.learning.models.induction_gated`), whose mean gates are measured too.

    Parameters
    ----------
    forward : Forward or GatedForward
        ``logits`` ``(batch, 2h - 1, V)`` and ``attention`` ``(n_layers, batch, n_heads, 2h - 1, 2h - 1)``
        of the model on ``tokens[:, :-1]``; with a ``gate`` ``(n_layers, batch, n_heads, 2h - 1, d_head)``.
    tokens : array_like of int
        ``(batch, 2h)`` the repeated sequences.
    half_length : int
        ``h``.

    Returns
    -------
    dict
        ``sink_first_half`` and ``sink_second_half`` (``[layer][head]``, :func:`first_token_share`),
        ``first_half_loss``, ``second_half_loss``, ``second_half_accuracy``; for a gated model also
        ``gate_first_half`` and ``gate_second_half`` (``[layer][head]``, the mean gate of those queries).

    Examples
    --------
    >>> params, config, record = load_induction()
    >>> probe = probe_tokens(config)
    >>> found = sink_measurements(taped(params, probe[:, :-1], config)[0], probe, config.probe_half_length)
    >>> found["second_half_accuracy"] > 0.95, found["sink_first_half"][1][0] > 0.5
    (True, True)
    """
    tokens = np.asarray(tokens)  # (batch, 2h)
    half_length = check_positive_int(half_length, "half_length", 2)
    if tokens.ndim != 2 or tokens.shape[1] != 2 * half_length:
        raise ValueError(f"tokens has shape {tokens.shape}; expected (batch, {2 * half_length}) for "
                         f"half_length = {half_length}")
    logits = np.asarray(forward.logits)  # (batch, 2h - 1, V)
    if logits.shape[:2] != (tokens.shape[0], 2 * half_length - 1):
        raise ValueError(f"forward.logits has shape {logits.shape}; expected ({tokens.shape[0]}, "
                         f"{2 * half_length - 1}, V): the model's logits on tokens[:, :-1]")
    shares = first_token_share(forward.attention, half_length)
    losses = token_losses(logits, tokens[:, 1:])  # (batch, 2h - 1)
    hits = logits.argmax(axis=-1) == tokens[:, 1:]  # (batch, 2h - 1)
    found = {"sink_first_half": shares.first_half.tolist(), "sink_second_half": shares.second_half.tolist(),
             "first_half_loss": float(losses[:, :half_length - 1].mean()),
             "second_half_loss": float(losses[:, half_length:].mean()),
             "second_half_accuracy": float(hits[:, half_length:].mean())}
    gate = getattr(forward, "gate", None)
    if gate is not None:
        gate = np.asarray(gate)  # (layers, batch, heads, 2h - 1, d_head)
        found["gate_first_half"] = gate[..., 1:half_length, :].mean(axis=(1, 3, 4)).tolist()  # (layers, heads)
        found["gate_second_half"] = gate[..., half_length:, :].mean(axis=(1, 3, 4)).tolist()  # (layers, heads)
    return found


def next_token_losses(params: InductionParameters, tokens, config: InductionConfig) -> np.ndarray:
    r"""The loss of every prediction: ``-log p(x_{t+1} | x_0..t)`` for each sequence and position.

    .. math:: \ell_{b, t} = -\log \operatorname{softmax}(z_{b, t})_{x_{b, t+1}}

    Parameters
    ----------
    params, tokens, config
        As in :func:`attnbook.learning.models.induction.induction_loss_and_gradients`.

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
    params, tokens = check_sequences(params, tokens, config)
    logits = taped(params, tokens[:, :-1], config)[0].logits  # (batch, n - 1, V)
    return token_losses(logits, tokens[:, 1:])


def token_losses(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Unchecked kernel of :func:`next_token_losses`: ``-log softmax(logits)[target]`` per position.

    >>> token_losses(np.zeros((1, 2, 4)), np.array([[0, 3]])).round(4).tolist()
    [[1.3863, 1.3863]]
    """
    log_p = log_softmax(logits)  # (batch, n, V)
    return -np.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]  # (batch, n)


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
    config = MODEL.check(config)
    return repeated_sequence_batch(config.probe_size, config.probe_half_length, config.vocab_size, 12345)


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
    params, config = scaffold.check_model(MODEL, params, config)
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


def probe_measurements(params: InductionParameters, probe: np.ndarray, config: InductionConfig) -> dict:
    """Unchecked kernel: a checkpoint's measurements on the probe: both halves' losses, the best heads' scores.

    >>> config = InductionConfig(vocab_size=5, d_model=4, d_ff=8, probe_size=2, probe_half_length=3)
    >>> sorted(probe_measurements(init_induction_model(config), probe_tokens(config), config))[0]
    'first_half_loss'
    """
    logits, attention = taped(params, probe[:, :-1], config)[0]  # (batch, n, V), (layers, batch, h, n, n)
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
    params, config = scaffold.check_model(MODEL, params, config)
    probe, h = probe_tokens(config), config.probe_half_length
    logits, attention = taped(params, probe[:, :-1], config)[0]  # (batch, n, V), (layers, batch, heads, n, n)
    per_position = token_losses(logits, probe[:, 1:]).mean(axis=0)  # (2h - 1,)
    found = scores(attention, h)
    previous_head, induction_head = int(found.previous_token[0].argmax()), int(found.induction[1].argmax())

    def second_half_without(layer: int, head: int) -> float:
        silenced = ablate_head(params, layer, head, config)
        return float(token_losses(taped(silenced, probe[:, :-1], config)[0].logits, probe[:, 1:])[:, h:].mean())

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
    logits = taped(params, tokens[:, :-1], config)[0].logits  # (batch, 2h - 1, V)
    return float(token_losses(logits, tokens[:, 1:])[:, half_length:].mean())
