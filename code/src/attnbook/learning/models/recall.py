"""A tiny attention model trained on associative recall: look up the value of the key a query asks for.

A sequence shows ``n_pairs`` (key, value) pairs, each one token (a one-hot key, then a one-hot value), and a
query token carries a key with zeros in the value part; the answer's position changes from sequence to
sequence, so the model has to *look up* the pair whose key matches, which is what attention does. The model
is one (multi-head) cross-attention layer from the queries to the pairs, then a read-out:

    Q = X_q W_Q,  K = X_c W_K,  V = X_c W_V,  O = Attention(Q, K, V),  logits = O W_O.

Its gradient is derived by hand (:mod:`attnbook.learning.gradients`); it trains on the scaffold of every
model (:mod:`attnbook.learning.models.scaffold`); :func:`attnbook.learning.analysis.recall.train_recall`
records the attention on a probe batch as it learns. The batches are
:func:`attnbook.learning.tasks.associative_recall_batch`.

>>> from attnbook.learning.models.scaffold import train
>>> params, record = train(MODEL, RecallConfig(n_steps=150), progress=False)
>>> bool(np.mean(record["losses"][-10:]) < np.mean(record["losses"][:10]) / 4)
True
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...attention import scaled_dot_product_attention
from ...multihead import merge_heads, split_heads
from ...validation import Array, Dims, check_bool, check_positive_int, check_seed, check_weights
from ..gradients import backpropagate, linear_grads
from ..tasks import RecallBatch, associative_recall_batch
from . import scaffold

__all__ = ["MODEL", "RecallConfig", "RecallParameters", "init_recall_model", "recall_accuracy", "recall_forward",
           "recall_loss_and_gradients"]


class RecallConfig(NamedTuple):
    """The task, the model and its training: the arguments of :func:`train_recall`.

    Attributes
    ----------
    n_pairs, n_keys, n_values : int
        Pairs per sequence and the sizes of the key and value vocabularies (see :func:`associative_recall_batch`).
    d_k, d_v, n_heads : int
        Widths of queries and keys, of values, and the heads (see :func:`init_recall_model`).
    scaled : bool
        Divide the scores by ``sqrt(d_head)``.
    optimiser : str
        ``"adam"`` (betas 0.9, 0.999) or ``"sgd"``.
    learning_rate, init_std : float
        The constant step size, and the standard deviation of the initial projections.
    batch_size, n_steps : int
        Sequences per step, and steps.

    Examples
    --------
    >>> RecallConfig().d_k, RecallConfig(n_heads=2).n_heads
    (16, 2)
    """

    n_pairs: int = 4
    n_keys: int = 8
    n_values: int = 8
    d_k: int = 16
    d_v: int = 16
    n_heads: int = 1
    scaled: bool = True
    optimiser: str = "adam"
    learning_rate: float = 0.01
    init_std: float = 1.0
    batch_size: int = 32
    n_steps: int = 300


class RecallParameters(NamedTuple):
    """The learned matrices of the recall model; convention ``y = x @ W`` (rows are tokens).

    Attributes
    ----------
    w_q, w_k, w_v, w_o : ndarray
        The query, key and value projections ``(d_in, d_k)``, ``(d_in, d_k)``, ``(d_in, d_v)``, and the
        read-out ``(d_v, n_values)`` to one logit per value symbol.

    Examples
    --------
    >>> [w.shape for w in init_recall_model(n_keys=5, n_values=3, d_k=4, d_v=6)]
    [(8, 4), (8, 4), (8, 6), (6, 3)]
    """

    w_q: Array["d_in, d_k"]  # query projection
    w_k: Array["d_in, d_k"]  # key projection
    w_v: Array["d_in, d_v"]  # value projection
    w_o: Array["d_v, n_values"]  # read-out to one logit per value symbol


class _RecallForward(NamedTuple):  # everything the forward pass computes; the backward pass reuses it
    logits: np.ndarray  # (batch, n_queries, n_values)
    weights: np.ndarray  # (batch, n_heads, n_queries, n_pairs)
    q: np.ndarray  # (batch, n_heads, n_queries, d_k / n_heads)
    k: np.ndarray  # (batch, n_heads, n_pairs, d_k / n_heads)
    v: np.ndarray  # (batch, n_heads, n_pairs, d_v / n_heads)
    attended: np.ndarray  # (batch, n_queries, d_v): the heads' outputs, concatenated


class _RecallGradients(NamedTuple):  # what recall_loss_and_gradients returns: loss, grads, forward, score_grads = ...
    loss: float  # mean cross-entropy of the batch
    grads: RecallParameters  # dL/dW for every parameter, shaped like it
    forward: _RecallForward  # the forward pass the gradients were computed from
    score_grads: np.ndarray  # (batch, n_heads, n_queries, n_pairs): dL/dS for the scaled scores


def init_recall_model(n_keys: int = 8, n_values: int = 8, d_k: int = 16, d_v: int = 16, seed: int = 0,
                      init_std: float = 1.0) -> RecallParameters:
    r"""Seeded random parameters: ``W_Q, W_K, W_V`` normal with standard deviation ``init_std``.

    .. math:: W_Q, W_K, W_V \sim \mathcal{N}(0, \sigma^2), \qquad W_O \sim \mathcal{N}(0, 1 / d_v)

    With one-hot tokens, a query is one row of ``W_Q`` and a key the sum of two rows of ``W_K``, so
    with ``init_std = 1`` their components have variance 1 and 2 and an unscaled score ``q . k`` has
    variance ``2 d_k``: the regime of the variance argument for dividing by ``sqrt(d_k)``.

    Parameters
    ----------
    n_keys, n_values, d_k, d_v : int
        Vocabulary sizes (``d_in = n_keys + n_values``), and the widths of queries/keys and of values.
    seed, init_std
        The random source (an int or a numpy Generator), and the standard deviation ``sigma``.

    Returns
    -------
    RecallParameters
        ``w_q``, ``w_k`` ``(d_in, d_k)``, ``w_v`` ``(d_in, d_v)``, ``w_o`` ``(d_v, n_values)``.

    Examples
    --------
    >>> p = init_recall_model(n_keys=5, n_values=3, d_k=4, d_v=6)
    >>> p.w_q.shape, p.w_v.shape, p.w_o.shape
    ((8, 4), (8, 6), (6, 3))
    """
    n_keys, n_values, d_k, d_v = (check_positive_int(value, name) for value, name in
                                  ((n_keys, "n_keys"), (n_values, "n_values"), (d_k, "d_k"), (d_v, "d_v")))
    if isinstance(init_std, bool) or not isinstance(init_std, (int, float)) or not init_std > 0:
        raise ValueError(f"init_std must be a positive number, got {init_std!r}")
    rng = check_seed(seed)
    d_in = n_keys + n_values
    w_q = init_std * rng.standard_normal((d_in, d_k))  # (d_in, d_k)
    w_k = init_std * rng.standard_normal((d_in, d_k))  # (d_in, d_k)
    w_v = init_std * rng.standard_normal((d_in, d_v))  # (d_in, d_v)
    w_o = rng.standard_normal((d_v, n_values)) / math.sqrt(d_v)  # (d_v, n_values)
    return RecallParameters(w_q, w_k, w_v, w_o)


def _checked_model(params, batch, n_heads) -> tuple[RecallParameters, RecallBatch, int]:
    if not isinstance(batch, RecallBatch):
        raise TypeError(f"batch must be a RecallBatch (see associative_recall_batch), got {type(batch).__name__}")
    d_in = batch.context.shape[-1]
    params = check_weights(params, RecallParameters, "params", Dims(d_in=(d_in, f"the tokens have d_in = {d_in}")))
    n_heads = check_positive_int(n_heads, "n_heads")
    for name, width in (("d_k", params.w_q.shape[1]), ("d_v", params.w_v.shape[1])):
        if width % n_heads:
            raise ValueError(f"{name} = {width} is not divisible by n_heads = {n_heads}")
    return params, batch, n_heads


def _head_scale(d_k: int, n_heads: int, scaled) -> float:
    return 1.0 / math.sqrt(d_k // n_heads) if check_bool(scaled, "scaled") else 1.0


def taped(params: RecallParameters, batch: RecallBatch, n_heads: int, scale: float) -> tuple:
    """Unchecked kernel: the forward pass and ``back(d_logits) -> (grads, d_scores)``.

    >>> p = init_recall_model(n_keys=6, n_values=4, d_k=8, d_v=8)
    >>> fwd, back = taped(p, associative_recall_batch(3, n_keys=6, n_values=4), 2, 0.5)
    >>> back(np.ones_like(fwd.logits))[0].w_q.shape
    (10, 8)
    """
    q = split_heads.unchecked(batch.queries @ params.w_q, n_heads)  # (batch, h, n_q, d_k / h)
    k = split_heads.unchecked(batch.context @ params.w_k, n_heads)  # (batch, h, n_pairs, d_k / h)
    v = split_heads.unchecked(batch.context @ params.w_v, n_heads)  # (batch, h, n_pairs, d_v / h)
    heads, weights = scaled_dot_product_attention.unchecked(q, k, v, None, scale)  # (b, h, n_q, d_v/h), (b, h, n_q, n_pairs)
    attended = merge_heads.unchecked(heads)  # (batch, n_q, d_v)
    fwd = _RecallForward(attended @ params.w_o, weights, q, k, v, attended)  # logits (batch, n_q, n_values)

    def back(d_logits):
        d_attended, d_w_o = linear_grads(attended, params.w_o, d_logits)  # (b, n_q, d_v), (d_v, n_values)
        (dq, dk, dv), d_scores = backpropagate(q, k, v, weights, split_heads.unchecked(d_attended, n_heads), None,
                                               scale)  # the kernel of attention_backward; it hands back dL/dS too
        _, d_w_q = linear_grads(batch.queries, params.w_q, merge_heads.unchecked(dq))  # (d_in, d_k)
        _, d_w_k = linear_grads(batch.context, params.w_k, merge_heads.unchecked(dk))  # (d_in, d_k)
        _, d_w_v = linear_grads(batch.context, params.w_v, merge_heads.unchecked(dv))  # (d_in, d_v)
        return RecallParameters(d_w_q, d_w_k, d_w_v, d_w_o), d_scores

    return fwd, back


def recall_forward(params: RecallParameters, batch: RecallBatch, n_heads: int = 1,
                   scaled: bool = True) -> _RecallForward:
    r"""Logits and attention weights of the recall model.

    .. math:: \text{logits} = \operatorname{Attention}(X_q W_Q, X_c W_K, X_c W_V)\, W_O

    Parameters
    ----------
    params, batch, n_heads, scaled
        The model; the problems; the heads, which divide ``d_k`` and ``d_v``; divide the scores by
        ``sqrt(d_head)`` (False drops the factor).

    Returns
    -------
    NamedTuple
        ``logits, weights, q, k, v, attended``: the logits ``(batch, n_queries, n_values)``, each head's weights
        over the pairs, the queries, keys and values split into heads, the heads' outputs concatenated.

    Examples
    --------
    >>> p = init_recall_model(n_keys=6, n_values=4, d_k=8, d_v=8)
    >>> fwd = recall_forward(p, associative_recall_batch(3, n_keys=6, n_values=4), n_heads=2)
    >>> fwd.logits.shape, fwd.weights.shape
    ((3, 1, 4), (3, 2, 1, 4))
    """
    params, batch, n_heads = _checked_model(params, batch, n_heads)
    return taped(params, batch, n_heads, _head_scale(params.w_q.shape[1], n_heads, scaled))[0]


def recall_loss_and_gradients(params: RecallParameters, batch: RecallBatch, n_heads: int = 1,
                              scaled: bool = True) -> _RecallGradients:
    r"""Mean cross-entropy of the batch, its gradient for every parameter, the forward pass and ``dL/dS``.

    .. math:: \frac{\partial L}{\partial W_O}, \; \frac{\partial L}{\partial W_V}, \;
              \frac{\partial L}{\partial W_K}, \; \frac{\partial L}{\partial W_Q}
              \text{ by the chain rule through the read-out, attention and the projections}

    ``score_grads`` is the gradient that reached the scaled scores (:func:`attnbook.learning.gradients.score_gradient`),
    a measure of how strongly the loss pulls on the attention pattern.

    Parameters
    ----------
    params, batch, n_heads, scaled
        As in :func:`recall_forward`.

    Returns
    -------
    NamedTuple
        ``loss, grads, forward, score_grads``: the mean loss, a :class:`RecallParameters` of gradients, the
        :func:`recall_forward` they came from, ``dL/dS`` ``(batch, n_heads, n_queries, n_pairs)``.

    Examples
    --------
    >>> p = init_recall_model(n_keys=6, n_values=4, d_k=8, d_v=8)
    >>> loss, grads, fwd, ds = recall_loss_and_gradients(p, associative_recall_batch(5, n_keys=6, n_values=4))
    >>> [g.shape for g in grads] == [w.shape for w in p], ds.shape
    (True, (5, 1, 1, 4))
    """
    params, batch, n_heads = _checked_model(params, batch, n_heads)
    fwd, back = taped(params, batch, n_heads, _head_scale(params.w_q.shape[1], n_heads, scaled))
    loss, d_logits = scaffold.entropy_loss(fwd.logits, batch.targets)
    grads, d_scores = back(d_logits)
    return _RecallGradients(loss, grads, fwd, d_scores)


def recall_accuracy(params: RecallParameters, batch: RecallBatch, n_heads: int = 1, scaled: bool = True) -> float:
    r"""Fraction of queries whose largest logit is the right value symbol.

    .. math:: \text{accuracy} = \frac{1}{N} \sum_r [\, \arg\max \text{logits}_r = t_r \,]

    Parameters
    ----------
    params, batch, n_heads, scaled
        As in :func:`recall_forward`.

    Returns
    -------
    float
        Between 0 and 1.

    Examples
    --------
    >>> p = init_recall_model(n_keys=6, n_values=4, d_k=8, d_v=8)
    >>> 0.0 <= recall_accuracy(p, associative_recall_batch(10, n_keys=6, n_values=4)) <= 1.0
    True
    """
    logits = recall_forward(params, batch, n_heads, scaled).logits  # (batch, n_q, n_values)
    return float(np.mean(logits.argmax(axis=-1) == batch.targets))


def _init(config: RecallConfig, seed: int) -> RecallParameters:
    scaffold.check_config(config, RecallConfig)
    return init_recall_model(config.n_keys, config.n_values, config.d_k, config.d_v,
                             seed=np.random.default_rng([seed, 0]), init_std=config.init_std)


def _forward(params, batch, config: RecallConfig) -> tuple:
    fwd, back = taped(params, batch, config.n_heads, _head_scale(config.d_k, config.n_heads, config.scaled))
    return fwd, lambda d_logits: back(d_logits)[0]


MODEL = scaffold.Model(
    name="", config=RecallConfig, init=_init, forward=_forward,
    loss=lambda logits, batch, config: scaffold.entropy_loss(logits, batch.targets),
    batch=lambda rng, c: associative_recall_batch(c.batch_size, c.n_pairs, c.n_keys, c.n_values, seed=rng),
    evaluate=lambda params, c: {"accuracy": recall_accuracy(params, associative_recall_batch(
        256, c.n_pairs, c.n_keys, c.n_values, seed=12345), c.n_heads, c.scaled)},
    fit_options=lambda c: {"learning_rate": c.learning_rate, "max_norm": None, "optimiser": c.optimiser,
                           "betas": (0.9, 0.999), "eps": 1e-8},
)
