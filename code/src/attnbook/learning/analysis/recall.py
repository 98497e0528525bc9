"""Watching the recall model learn: its attention on a probe batch, step by step, and the steps to a loss.

>>> run = train_recall(n_steps=150, seed=0)
>>> bool(run.losses[-10:].mean() < run.losses[:10].mean() / 4)
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ...validation import as_float_array, check_bool, check_positive_int
from ..models import scaffold
from ..models.recall import MODEL, RecallConfig, RecallParameters, recall_forward
from ..tasks import RecallBatch, associative_recall_batch

__all__ = ["TrainingRun", "steps_to_loss", "train_recall"]


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


def train_recall(n_steps: int = 300, batch_size: int = 32, n_pairs: int = 4, n_keys: int = 8,
                 n_values: int = 8, d_k: int = 16, d_v: int = 16, n_heads: int = 1, scaled: bool = True,
                 optimiser: str = "adam", learning_rate: float = 0.01, init_std: float = 1.0,
                 seed: int = 0, probe: RecallBatch | None = None, snapshot_every: int = 0,
                 callback: Callable[[int, float], None] | None = None) -> TrainingRun:
    r"""Train the recall model on fresh seeded batches (:func:`scaffold.train`); record the probe's attention.

    .. math:: W_{s+1} = \operatorname{step}\big(W_s, \nabla_W L(W_s; \text{batch}_s)\big), \quad s = 0, \dots, n_\text{steps} - 1

    Every step draws a new batch (so the model cannot memorise sequences). With a ``probe`` batch and
    ``snapshot_every = s > 0``, the probe's attention weights and accuracy are recorded before step 0,
    every ``s`` steps, and after the last step. The same arguments give the same run.

    Parameters
    ----------
    n_steps, batch_size, n_pairs, n_keys, n_values, d_k, d_v, n_heads, scaled, optimiser, learning_rate, init_std
        The fields of :class:`RecallConfig`.
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
    >>> train_recall(n_steps=0)
    Traceback (most recent call last):
    ...
    ValueError: n_steps must be at least 1, got 0
    """
    n_steps = check_positive_int(n_steps, "n_steps")
    snapshot_every = check_positive_int(snapshot_every, "snapshot_every", minimum=0)
    if optimiser not in ("adam", "sgd"):
        raise ValueError(f"optimiser must be 'adam' or 'sgd', got {optimiser!r}")
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    config = RecallConfig(n_pairs, n_keys, n_values, d_k, d_v, n_heads, check_bool(scaled, "scaled"), optimiser,
                          learning_rate, init_std, batch_size, n_steps)
    initial = MODEL.init(config, seed)
    example = probe if probe is not None else associative_recall_batch(1, n_pairs, n_keys, n_values)
    recall_forward(initial, example, n_heads, scaled)  # the checks, once: the training loop calls the kernels
    snapshot_steps, snapshots, probe_accuracy = [], [], []
    recording = probe is not None and snapshot_every > 0

    def record(step: int, params: RecallParameters) -> None:
        snapshot_steps.append(step)
        fwd = MODEL.forward(params, probe, config)[0]
        snapshots.append(fwd.weights)  # (probe batch, h, n_q, n_pairs)
        probe_accuracy.append(float(np.mean(fwd.logits.argmax(axis=-1) == probe.targets)))

    def on_step(step: int, params: RecallParameters, loss: float) -> None:
        if recording and (step % snapshot_every == 0 or step == n_steps):
            record(step, params)
        if callback is not None:
            callback(step, loss)

    if recording:
        record(0, initial)
    params, record_ = scaffold.train(MODEL, config, seed, progress=False, rng=np.random.default_rng([seed, 1]),
                                     on_step=on_step)
    losses = np.array(record_["losses"])  # (n_steps,)
    if not recording:
        return TrainingRun(params, initial, losses, np.zeros(0, dtype=int), np.zeros((0,)), np.zeros(0))
    return TrainingRun(params, initial, losses, np.array(snapshot_steps), np.stack(snapshots), np.array(probe_accuracy))


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
