"""A tiny attention model trained with hand-derived gradients on associative recall.

The task: a sequence shows ``n_pairs`` (key, value) pairs, then asks for the value of one of its
keys. Each pair is one token, the concatenation of a one-hot key and a one-hot value; a query token
carries a one-hot key and zeros in the value part. The answer's position changes from sequence to
sequence, so no fixed weighting of the positions can solve the task: the model has to *look up* the
pair whose key matches the query, which is what attention does.

The model is one (multi-head) cross-attention layer from the query tokens to the pair tokens,
followed by a linear read-out to one logit per value symbol:

    Q = X_q W_Q,  K = X_c W_K,  V = X_c W_V,  O = Attention(Q, K, V),  logits = O W_O.

:func:`recall_loss_and_gradients` runs the forward pass, the cross-entropy loss and the backward
pass of :mod:`attnbook.learning.gradients`; the optimisers of :mod:`attnbook.learning.optim` update the parameters;
:func:`train_recall` puts it together, with seeded data, and records the attention on a probe batch.

>>> run = train_recall(n_steps=150, seed=0)
>>> bool(run.losses[-10:].mean() < run.losses[:10].mean() / 4)
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..attention import attend
from ..multihead import from_heads, to_heads
from ..validation import as_float_array, check_bool, check_positive_int, check_seed
from .gradients import backpropagate, entropy, entropy_grads, linear_grads
from .optim import adam_update, check_learning_rate, descend, init_adam

__all__ = [
    "RecallBatch",
    "RecallForward",
    "RecallGradients",
    "RecallParameters",
    "TrainingRun",
    "associative_recall_batch",
    "init_recall_model",
    "recall_accuracy",
    "recall_forward",
    "recall_loss_and_gradients",
    "steps_to_loss",
    "train_recall",
]


class RecallBatch(NamedTuple):
    """A batch of associative-recall sequences (``d_in = n_keys + n_values``).

    Attributes
    ----------
    context : ndarray
        ``(batch, n_pairs, d_in)`` the (key, value) pairs: a one-hot key, then a one-hot value.
    queries : ndarray
        ``(batch, n_queries, d_in)`` a one-hot key each, the value part zero.
    targets : ndarray
        ``(batch, n_queries)`` the value symbol paired with each query's key: the answer.
    keys : ndarray
        ``(batch, n_pairs)`` key symbols, distinct within a sequence.
    values : ndarray
        ``(batch, n_pairs)`` value symbols.
    answer_positions : ndarray
        ``(batch, n_queries)`` the pair that holds each query's key.

    Examples
    --------
    >>> batch = associative_recall_batch(1, n_pairs=2, n_keys=3, n_values=2, seed=0)
    >>> batch.keys.tolist(), batch.queries[0, 0].tolist(), batch.answer_positions.tolist()
    ([[2, 1]], [0.0, 0.0, 1.0, 0.0, 0.0], [[0]])
    """

    context: np.ndarray  # (batch, n_pairs, d_in): one-hot key, then one-hot value
    queries: np.ndarray  # (batch, n_queries, d_in): one-hot key, value part zero
    targets: np.ndarray  # (batch, n_queries): the value symbol paired with each query key
    keys: np.ndarray  # (batch, n_pairs): key symbols, distinct within a sequence
    values: np.ndarray  # (batch, n_pairs): value symbols
    answer_positions: np.ndarray  # (batch, n_queries): the pair holding each query's key


class RecallParameters(NamedTuple):
    """The learned matrices of the recall model; convention ``y = x @ W`` (rows are tokens).

    Attributes
    ----------
    w_q : ndarray
        ``(d_in, d_k)`` query projection.
    w_k : ndarray
        ``(d_in, d_k)`` key projection.
    w_v : ndarray
        ``(d_in, d_v)`` value projection.
    w_o : ndarray
        ``(d_v, n_values)`` read-out to one logit per value symbol.

    Examples
    --------
    >>> [w.shape for w in init_recall_model(n_keys=5, n_values=3, d_k=4, d_v=6)]
    [(8, 4), (8, 4), (8, 6), (6, 3)]
    """

    w_q: np.ndarray  # (d_in, d_k): query projection
    w_k: np.ndarray  # (d_in, d_k): key projection
    w_v: np.ndarray  # (d_in, d_v): value projection
    w_o: np.ndarray  # (d_v, n_values): read-out to one logit per value symbol


class RecallForward(NamedTuple):
    """Everything the forward pass computes; the backward pass reuses it.

    Attributes
    ----------
    logits : ndarray
        ``(batch, n_queries, n_values)`` one score per value symbol.
    weights : ndarray
        ``(batch, n_heads, n_queries, n_pairs)`` attention weights of each head over the pairs.
    q : ndarray
        ``(batch, n_heads, n_queries, d_k / n_heads)`` the queries, split into heads.
    k : ndarray
        ``(batch, n_heads, n_pairs, d_k / n_heads)`` the keys, split into heads.
    v : ndarray
        ``(batch, n_heads, n_pairs, d_v / n_heads)`` the values, split into heads.
    attended : ndarray
        ``(batch, n_queries, d_v)`` the heads' outputs, concatenated.

    Examples
    --------
    >>> p = init_recall_model(n_keys=6, n_values=4, d_k=8, d_v=8)
    >>> fwd = recall_forward(p, associative_recall_batch(3, n_keys=6, n_values=4), n_heads=2)
    >>> fwd.q.shape, fwd.attended.shape
    ((3, 2, 1, 4), (3, 1, 8))
    """

    logits: np.ndarray  # (batch, n_queries, n_values)
    weights: np.ndarray  # (batch, n_heads, n_queries, n_pairs)
    q: np.ndarray  # (batch, n_heads, n_queries, d_k / n_heads)
    k: np.ndarray  # (batch, n_heads, n_pairs, d_k / n_heads)
    v: np.ndarray  # (batch, n_heads, n_pairs, d_v / n_heads)
    attended: np.ndarray  # (batch, n_queries, d_v): the heads' outputs, concatenated


class RecallGradients(NamedTuple):
    """What :func:`recall_loss_and_gradients` returns: ``loss, grads, forward, score_grads = ...``.

    Attributes
    ----------
    loss : float
        Mean cross-entropy of the batch.
    grads : RecallParameters
        dL/dW for every parameter, shaped like it.
    forward : RecallForward
        The forward pass the gradients were computed from.
    score_grads : ndarray
        ``(batch, n_heads, n_queries, n_pairs)`` dL/dS for the scaled scores.

    Examples
    --------
    >>> p = init_recall_model(n_keys=6, n_values=4, d_k=8, d_v=8)
    >>> result = recall_loss_and_gradients(p, associative_recall_batch(5, n_keys=6, n_values=4))
    >>> result.grads.w_o.shape, result.score_grads.shape
    ((8, 4), (5, 1, 1, 4))
    """

    loss: float  # mean cross-entropy of the batch
    grads: RecallParameters  # dL/dW for every parameter, shaped like it
    forward: RecallForward  # the forward pass the gradients were computed from
    score_grads: np.ndarray  # (batch, n_heads, n_queries, n_pairs): dL/dS for the scaled scores


class TrainingRun(NamedTuple):
    """What :func:`train_recall` returns: the trained parameters, the losses, and probe snapshots.

    Attributes
    ----------
    parameters : RecallParameters
        The parameters after the last step.
    initial : RecallParameters
        The parameters before the first step.
    losses : ndarray
        ``(n_steps,)`` the training loss of each step's batch, before its update.
    snapshot_steps : ndarray
        ``(n_snapshots,)`` the steps at which the probe batch was recorded.
    snapshots : ndarray
        ``(n_snapshots, probe batch, n_heads, n_queries, n_pairs)`` attention weights on the probe.
    probe_accuracy : ndarray
        ``(n_snapshots,)`` accuracy on the probe batch at those steps.

    Examples
    --------
    >>> run = train_recall(n_steps=4, batch_size=4, probe=associative_recall_batch(2, seed=1), snapshot_every=2)
    >>> run.losses.shape, run.snapshot_steps.tolist(), run.snapshots.shape
    ((4,), [0, 2, 4], (3, 2, 1, 1, 4))
    """

    parameters: RecallParameters  # after the last step
    initial: RecallParameters  # before the first step
    losses: np.ndarray  # (n_steps,): training loss of each step's batch, before its update
    snapshot_steps: np.ndarray  # (n_snapshots,): steps at which the probe was recorded
    snapshots: np.ndarray  # (n_snapshots, probe batch, n_heads, n_queries, n_pairs): probe weights
    probe_accuracy: np.ndarray  # (n_snapshots,): accuracy on the probe batch at those steps


def associative_recall_batch(n_sequences: int, n_pairs: int = 4, n_keys: int = 8, n_values: int = 8,
                             n_queries: int = 1, seed=0) -> RecallBatch:
    r"""Sample ``n_sequences`` recall problems: ``n_pairs`` pairs with distinct keys, ``n_queries`` questions.

    .. math:: x_\text{pair} = [\, e_\text{key} ; e_\text{value} \,], \qquad x_\text{query} = [\, e_\text{key} ; 0 \,]

    Keys are drawn without replacement from ``n_keys`` symbols (so each query has one answer),
    values with replacement from ``n_values`` symbols; the queried keys are distinct pairs of the
    sequence, chosen at random.

    Parameters
    ----------
    n_sequences : int
        Batch size.
    n_pairs : int
        (key, value) pairs per sequence; at most ``n_keys``.
    n_keys, n_values : int
        Sizes of the key and value vocabularies.
    n_queries : int
        Questions per sequence; at most ``n_pairs``.
    seed : int or numpy Generator
        The random source.

    Returns
    -------
    RecallBatch
        One-hot context ``(batch, n_pairs, n_keys + n_values)``, queries, targets and the symbols.

    Examples
    --------
    >>> batch = associative_recall_batch(2, n_pairs=3, n_keys=5, n_values=4, seed=0)
    >>> batch.context.shape, batch.queries.shape, batch.targets.shape
    ((2, 3, 9), (2, 1, 9), (2, 1))
    >>> bool(np.all(batch.values[np.arange(2)[:, None], batch.answer_positions] == batch.targets))
    True
    >>> associative_recall_batch(1, n_pairs=5, n_keys=4)
    Traceback (most recent call last):
    ...
    ValueError: n_pairs = 5 needs at least 5 distinct keys, but n_keys = 4
    """
    n_sequences = check_positive_int(n_sequences, "n_sequences")
    n_pairs = check_positive_int(n_pairs, "n_pairs")
    n_keys = check_positive_int(n_keys, "n_keys")
    n_values = check_positive_int(n_values, "n_values")
    n_queries = check_positive_int(n_queries, "n_queries")
    if n_pairs > n_keys:
        raise ValueError(f"n_pairs = {n_pairs} needs at least {n_pairs} distinct keys, but n_keys = {n_keys}")
    if n_queries > n_pairs:
        raise ValueError(f"n_queries = {n_queries} is more than n_pairs = {n_pairs}; each query asks "
                         "for a different pair")
    rng = check_seed(seed)
    keys = np.argsort(rng.random((n_sequences, n_keys)), axis=1)[:, :n_pairs]  # (batch, n_pairs)
    values = rng.integers(0, n_values, size=(n_sequences, n_pairs))  # (batch, n_pairs)
    positions = np.argsort(rng.random((n_sequences, n_pairs)), axis=1)[:, :n_queries]  # (batch, n_q)
    rows = np.arange(n_sequences)[:, None]  # (batch, 1)
    d_in = n_keys + n_values
    context = np.zeros((n_sequences, n_pairs, d_in))  # (batch, n_pairs, d_in)
    pair_index = np.arange(n_pairs)[None, :]  # (1, n_pairs)
    context[rows, pair_index, keys] = 1.0
    context[rows, pair_index, n_keys + values] = 1.0
    queries = np.zeros((n_sequences, n_queries, d_in))  # (batch, n_q, d_in)
    queries[rows, np.arange(n_queries)[None, :], keys[rows, positions]] = 1.0
    targets = values[rows, positions]  # (batch, n_q)
    return RecallBatch(context, queries, targets, keys, values, positions)


def init_recall_model(n_keys: int = 8, n_values: int = 8, d_k: int = 16, d_v: int = 16, seed: int = 0,
                      init_std: float = 1.0) -> RecallParameters:
    r"""Seeded random parameters: ``W_Q, W_K, W_V`` normal with standard deviation ``init_std``.

    .. math:: W_Q, W_K, W_V \sim \mathcal{N}(0, \sigma^2), \qquad W_O \sim \mathcal{N}(0, 1 / d_v)

    With one-hot tokens, a query is one row of ``W_Q`` and a key the sum of two rows of ``W_K``, so
    with ``init_std = 1`` their components have variance 1 and 2 and an unscaled score ``q . k`` has
    variance ``2 d_k``: the regime of the variance argument for dividing by ``sqrt(d_k)``.

    Parameters
    ----------
    n_keys, n_values : int
        Vocabulary sizes (``d_in = n_keys + n_values``).
    d_k, d_v : int
        Widths of queries/keys and of values.
    seed : int or numpy Generator
        The random source.
    init_std : float
        Standard deviation ``sigma`` of the projections.

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
    n_keys = check_positive_int(n_keys, "n_keys")
    n_values = check_positive_int(n_values, "n_values")
    d_k = check_positive_int(d_k, "d_k")
    d_v = check_positive_int(d_v, "d_v")
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
    if not isinstance(params, RecallParameters):
        raise TypeError(f"params must be RecallParameters (see init_recall_model), got {type(params).__name__}")
    if not isinstance(batch, RecallBatch):
        raise TypeError(f"batch must be a RecallBatch (see associative_recall_batch), got {type(batch).__name__}")
    params = RecallParameters(*(as_float_array(w, f"params.{name}") for name, w in params._asdict().items()))
    n_heads = check_positive_int(n_heads, "n_heads")
    d_in = batch.context.shape[-1]
    for name in ("w_q", "w_k", "w_v"):
        w = getattr(params, name)
        if w.ndim != 2 or w.shape[0] != d_in:
            raise ValueError(f"params.{name} has shape {w.shape} but the tokens have d_in = {d_in}; "
                             f"expected ({d_in}, d)")
    if params.w_q.shape[1] != params.w_k.shape[1]:
        raise ValueError(f"params.w_q has shape {params.w_q.shape} but params.w_k has shape "
                         f"{params.w_k.shape}; queries and keys need the same d_k")
    if params.w_o.ndim != 2 or params.w_o.shape[0] != params.w_v.shape[1]:
        raise ValueError(f"params.w_o has shape {params.w_o.shape} but params.w_v has shape "
                         f"{params.w_v.shape}; w_o needs d_v = {params.w_v.shape[1]} rows")
    for name, width in (("d_k", params.w_q.shape[1]), ("d_v", params.w_v.shape[1])):
        if width % n_heads:
            raise ValueError(f"{name} = {width} is not divisible by n_heads = {n_heads}")
    return params, batch, n_heads


def _head_scale(d_k: int, n_heads: int, scaled) -> float:
    return 1.0 / math.sqrt(d_k // n_heads) if check_bool(scaled, "scaled") else 1.0


def recall_forward(params: RecallParameters, batch: RecallBatch, n_heads: int = 1,
                   scaled: bool = True) -> RecallForward:
    r"""Logits and attention weights of the recall model.

    .. math:: \text{logits} = \operatorname{Attention}(X_q W_Q, X_c W_K, X_c W_V)\, W_O

    Parameters
    ----------
    params : RecallParameters
        The model.
    batch : RecallBatch
        The problems.
    n_heads : int
        Heads; must divide ``d_k`` and ``d_v``.
    scaled : bool
        Divide the scores by ``sqrt(d_head)``; False drops the factor.

    Returns
    -------
    RecallForward
        Logits ``(batch, n_q, n_values)``, weights ``(batch, n_heads, n_q, n_pairs)`` and the
        intermediate arrays the backward pass reuses.

    Examples
    --------
    >>> p = init_recall_model(n_keys=6, n_values=4, d_k=8, d_v=8)
    >>> fwd = recall_forward(p, associative_recall_batch(3, n_keys=6, n_values=4), n_heads=2)
    >>> fwd.logits.shape, fwd.weights.shape
    ((3, 1, 4), (3, 2, 1, 4))
    """
    params, batch, n_heads = _checked_model(params, batch, n_heads)
    return _forward(params, batch, n_heads, _head_scale(params.w_q.shape[1], n_heads, scaled))


def _forward(params: RecallParameters, batch: RecallBatch, n_heads: int, scale: float) -> RecallForward:
    q = to_heads(batch.queries @ params.w_q, n_heads)  # (batch, h, n_q, d_k / h)
    k = to_heads(batch.context @ params.w_k, n_heads)  # (batch, h, n_pairs, d_k / h)
    v = to_heads(batch.context @ params.w_v, n_heads)  # (batch, h, n_pairs, d_v / h)
    heads, weights = attend(q, k, v, None, scale)  # (b, h, n_q, d_v/h), (b, h, n_q, n_pairs)
    attended = from_heads(heads)  # (batch, n_q, d_v)
    logits = attended @ params.w_o  # (batch, n_q, n_values)
    return RecallForward(logits, weights, q, k, v, attended)


def recall_loss_and_gradients(params: RecallParameters, batch: RecallBatch, n_heads: int = 1,
                              scaled: bool = True) -> RecallGradients:
    r"""Mean cross-entropy of the batch, its gradient for every parameter, and the forward pass.

    .. math:: \frac{\partial L}{\partial W_O}, \; \frac{\partial L}{\partial W_V}, \;
              \frac{\partial L}{\partial W_K}, \; \frac{\partial L}{\partial W_Q}
              \text{ by the chain rule through the read-out, attention and the projections}

    The backward pass runs the forward pass in reverse: the loss's gradient w.r.t. the logits, then
    through the read-out, through attention (the kernel of :func:`attention_backward`, every head in
    one batched call), and through the three projections. ``score_grads`` is the gradient that
    reached the scaled scores (as :func:`score_gradient` computes it), a measure of how strongly the
    loss pulls on the attention pattern.

    Parameters
    ----------
    params, batch, n_heads, scaled
        As in :func:`recall_forward`.

    Returns
    -------
    RecallGradients
        ``(loss, grads, forward, score_grads)``.

    Examples
    --------
    >>> p = init_recall_model(n_keys=6, n_values=4, d_k=8, d_v=8)
    >>> loss, grads, fwd, ds = recall_loss_and_gradients(p, associative_recall_batch(5, n_keys=6, n_values=4))
    >>> [g.shape for g in grads] == [w.shape for w in p], ds.shape
    (True, (5, 1, 1, 4))
    """
    params, batch, n_heads = _checked_model(params, batch, n_heads)
    return _loss_and_gradients(params, batch, n_heads, _head_scale(params.w_q.shape[1], n_heads, scaled))


def _loss_and_gradients(params: RecallParameters, batch: RecallBatch, n_heads: int, scale: float) -> RecallGradients:
    fwd = _forward(params, batch, n_heads, scale)
    loss = entropy(fwd.logits, batch.targets)
    d_logits = entropy_grads(fwd.logits, batch.targets)  # (batch, n_q, n_values)
    d_attended, d_w_o = linear_grads(fwd.attended, params.w_o, d_logits)  # (b, n_q, d_v), (d_v, n_values)
    d_heads = to_heads(d_attended, n_heads)  # (batch, h, n_q, d_v / h)
    # the kernel of attention_backward, without repeating its input checks; it also hands back dL/dS
    (dq, dk, dv), d_scores = backpropagate(fwd.q, fwd.k, fwd.v, fwd.weights, d_heads, None, scale)
    _, d_w_q = linear_grads(batch.queries, params.w_q, from_heads(dq))  # (d_in, d_k)
    _, d_w_k = linear_grads(batch.context, params.w_k, from_heads(dk))  # (d_in, d_k)
    _, d_w_v = linear_grads(batch.context, params.w_v, from_heads(dv))  # (d_in, d_v)
    return RecallGradients(loss, RecallParameters(d_w_q, d_w_k, d_w_v, d_w_o), fwd, d_scores)


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


def train_recall(n_steps: int = 300, batch_size: int = 32, n_pairs: int = 4, n_keys: int = 8,
                 n_values: int = 8, d_k: int = 16, d_v: int = 16, n_heads: int = 1, scaled: bool = True,
                 optimiser: str = "adam", learning_rate: float = 0.01, init_std: float = 1.0,
                 seed: int = 0, probe: RecallBatch | None = None, snapshot_every: int = 0,
                 callback: Callable[[int, float], None] | None = None) -> TrainingRun:
    r"""Train the recall model on fresh seeded batches; record the probe's attention every few steps.

    .. math:: W_{s+1} = \operatorname{step}\big(W_s, \nabla_W L(W_s; \text{batch}_s)\big), \quad s = 0, \dots, n_\text{steps} - 1

    Every step draws a new batch (so the model cannot memorise sequences), computes the loss and the
    gradients, and updates the parameters with ``optimiser`` (``"adam"`` or ``"sgd"``). With a
    ``probe`` batch and ``snapshot_every = s > 0``, the probe's attention weights and accuracy are
    recorded before step 0, every ``s`` steps, and after the last step. The arguments are checked
    once; the loop calls the unchecked kernels. The same arguments give the same run.

    Parameters
    ----------
    n_steps, batch_size : int
        Steps and sequences per step.
    n_pairs, n_keys, n_values, d_k, d_v, n_heads : int
        The task and the model (see :func:`associative_recall_batch`, :func:`init_recall_model`).
    scaled : bool
        Divide the scores by ``sqrt(d_head)``.
    optimiser : str
        ``"adam"`` or ``"sgd"``.
    learning_rate, init_std : float
        Step size and initial standard deviation of the projections.
    seed : int
        Seeds the initial parameters and the batches.
    probe : RecallBatch, optional
        A fixed batch whose attention is recorded.
    snapshot_every : int
        Record the probe every this many steps (0: never).
    callback : callable, optional
        ``callback(step, loss)`` after every step (for a progress bar).

    Returns
    -------
    TrainingRun
        The final and initial parameters, the losses and the snapshots.

    Examples
    --------
    >>> bool(train_recall(n_steps=20, seed=0).losses.shape == (20,))
    True
    >>> train_recall(n_steps=0)
    Traceback (most recent call last):
    ...
    ValueError: n_steps must be at least 1, got 0
    """
    n_steps = check_positive_int(n_steps, "n_steps")
    batch_size = check_positive_int(batch_size, "batch_size")
    snapshot_every = check_positive_int(snapshot_every, "snapshot_every", minimum=0)
    if optimiser not in ("adam", "sgd"):
        raise ValueError(f"optimiser must be 'adam' or 'sgd', got {optimiser!r}")
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    rate = check_learning_rate(learning_rate)
    data_rng = np.random.default_rng([seed, 1])  # the training batches
    params = init_recall_model(n_keys, n_values, d_k, d_v, seed=np.random.default_rng([seed, 0]),
                               init_std=init_std)
    initial = params
    example = probe if probe is not None else associative_recall_batch(1, n_pairs, n_keys, n_values)
    n_heads = _checked_model(params, example, n_heads)[2]  # once: the training loop calls the kernels
    scale = _head_scale(d_k, n_heads, scaled)
    state = init_adam(params)
    losses = np.empty(n_steps)  # (n_steps,)
    snapshot_steps, snapshots, probe_accuracy = [], [], []

    def record(step: int) -> None:
        snapshot_steps.append(step)
        fwd = _forward(params, probe, n_heads, scale)
        snapshots.append(fwd.weights)  # (probe batch, h, n_q, n_pairs)
        probe_accuracy.append(float(np.mean(fwd.logits.argmax(axis=-1) == probe.targets)))

    if probe is not None and snapshot_every:
        record(0)
    for step in range(n_steps):
        batch = associative_recall_batch(batch_size, n_pairs, n_keys, n_values, seed=data_rng)
        losses[step], grads, _, _ = _loss_and_gradients(params, batch, n_heads, scale)
        if optimiser == "adam":
            params, state = adam_update(params, grads, state, rate)
        else:
            params = descend(params, grads, rate)
        if probe is not None and snapshot_every and ((step + 1) % snapshot_every == 0 or step + 1 == n_steps):
            record(step + 1)
        if callback is not None:
            callback(step + 1, float(losses[step]))
    if probe is None or not snapshot_every:
        return TrainingRun(params, initial, losses, np.zeros(0, dtype=int), np.zeros((0,)), np.zeros(0))
    return TrainingRun(params, initial, losses, np.array(snapshot_steps), np.stack(snapshots),
                       np.array(probe_accuracy))


def steps_to_loss(losses, threshold: float = 0.1, window: int = 10) -> int | None:
    r"""The first step count after which the mean loss of the last ``window`` steps is below ``threshold``.

    .. math:: \min \Big\{ s \ge w : \tfrac{1}{w} \textstyle\sum_{i = s - w}^{s - 1} L_i < \text{threshold} \Big\}

    Averaging over a window smooths out lucky batches.

    Parameters
    ----------
    losses : array_like
        ``(n_steps,)`` one loss per step.
    threshold : float
        The target loss.
    window : int
        Steps averaged.

    Returns
    -------
    int or None
        The step count, or ``None`` if the loss never gets there.

    Examples
    --------
    >>> steps_to_loss([1.0, 0.5, 0.05, 0.04, 0.03], threshold=0.1, window=2)
    4
    >>> steps_to_loss([1.0, 0.5], threshold=0.1, window=2) is None
    True
    """
    values = as_float_array(losses, "losses")  # (n_steps,)
    if values.ndim != 1:
        raise ValueError(f"losses has shape {values.shape}; expected one loss per step, shape (n_steps,)")
    window = check_positive_int(window, "window")
    if values.size < window:
        return None
    means = np.convolve(values, np.ones(window) / window, mode="valid")  # (n_steps - window + 1,)
    below = np.flatnonzero(means < threshold)
    return int(below[0]) + window if below.size else None
