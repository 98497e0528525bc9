"""A training loop for any model of parameter trees: Adam, the Noam schedule (or a constant rate), clipping.

:func:`fit` asks ``next_batch(rng)`` for a batch and ``loss_and_gradients(params, batch)`` for the loss
and the gradients (the model's own backward pass, e.g. built from :mod:`attnbook.learning.layers`),
clips the gradients to a global norm and takes a step of Adam. The batches come from one generator
seeded with ``seed``, so two runs with the same seed are the same, number for number. A progress bar
(``tqdm``, in Jupyter or a terminal) shows the loss; ``tqdm`` is imported only when the bar is asked for,
so the package works without it (as in the browser edition of the book).

>>> import numpy as np
>>> from attnbook.learning.models.recall import RecallParameters
>>> def loss_and_gradients(p, batch):                                  # L = |w_q - batch|^2
...     return float(np.sum((p.w_q - batch) ** 2)), p._replace(w_q=2 * (p.w_q - batch))
>>> p0 = RecallParameters(*[np.zeros(2)] * 4)
>>> p, history = fit(p0, loss_and_gradients, lambda rng: np.ones(2), 200, learning_rate=0.05, progress=False)
>>> np.round(p.w_q, 2).tolist(), bool(history.losses[-1] < 1e-3 < history.losses[0])
([1.0, 1.0], True)
"""

from __future__ import annotations

import math
import time
import warnings
from typing import NamedTuple

import numpy as np

from ..validation import check_bool, check_positive_int, check_seed
from .optim import (
    adam_update,
    check_gradients,
    check_learning_rate,
    clip_tree,
    decay_weights,
    descend,
    global_norm,
    init_adam,
    noam,
    warmup_cosine,
)

__all__ = ["History", "fit"]

BETAS, EPS = (0.9, 0.98), 1e-9  # Adam as in Vaswani et al. (2017, section 5.3)
COSINE_FLOOR = 0.1  # the cosine schedule ends at a tenth of its peak rate


class History(NamedTuple):
    """What :func:`fit` records at every step.

    Attributes
    ----------
    losses : ndarray
        ``(n_steps,)`` the loss of each step's batch, before the step.
    grad_norms : ndarray
        ``(n_steps,)`` the global norm of the gradients, before clipping.
    rates : ndarray
        ``(n_steps,)`` the learning rate of each step.
    seconds : ndarray
        ``(n_steps,)`` the wall-clock time from the start to the end of each step (the one thing that
        differs between two runs with the same seed).

    Examples
    --------
    >>> History(*[np.zeros(3)] * 4).losses.shape
    (3,)
    """

    losses: np.ndarray  # (n_steps,)
    grad_norms: np.ndarray  # (n_steps,): before clipping
    rates: np.ndarray  # (n_steps,)
    seconds: np.ndarray  # (n_steps,): since the start


def fit(params, loss_and_gradients, next_batch, n_steps: int, *, d_model: int | None = None, warmup: int = 4000,
        learning_rate: float | None = None, max_norm: float | None = 1.0, seed=0, progress: bool = True,
        every: int = 1, optimiser: str = "adam", betas: tuple = BETAS, eps: float = EPS, on_step=None,
        peak_rate: float | None = None, decay_steps: int | None = None, weight_decay: float | None = None) -> tuple:
    r"""Train ``params`` for ``n_steps`` steps of Adam (or SGD); returns ``(params, History)``.

    .. math:: g_s = \nabla L(\theta_{s-1}; \text{batch}_s), \quad
              g_s \leftarrow g_s \min\left(1, \frac{c}{\lVert g_s \rVert}\right), \quad
              \theta_s = \operatorname{Adam}(\theta_{s-1}, g_s, \eta_s), \quad
              \eta_s = d_\text{model}^{-1/2} \min\left(s^{-1/2}, s\, w^{-3/2}\right)

    Adam uses by default the betas (0.9, 0.98) and epsilon 1e-9 of Vaswani et al. (2017); the rate follows
    their schedule (:func:`attnbook.learning.optim.noam_rate`) unless ``learning_rate`` fixes it or ``peak_rate``
    asks for a warm-up and a cosine decay (:func:`attnbook.learning.optim.warmup_cosine_rate`).

    Parameters
    ----------
    params : NamedTuple
        The parameter tree (see :mod:`attnbook.learning.optim`).
    loss_and_gradients : callable
        ``loss_and_gradients(params, batch) -> (loss, grads)``: a float and a tree of the structure of ``params``.
    next_batch : callable
        ``next_batch(rng) -> batch``, with ``rng`` the generator of ``seed``.
    n_steps : int
        The number of steps.
    d_model : int, optional
        The model width of the Noam schedule; needed unless ``learning_rate`` is given.
    warmup : int
        The warm-up steps of the Noam schedule; default 4000, the paper's.
    learning_rate : float, optional
        A constant learning rate instead of the schedule.
    max_norm : float or None
        Clip the gradients to this global norm; None does not clip. Default 1.
    seed : int or numpy.random.Generator
        Seed of the generator handed to ``next_batch`` (or the generator itself).
    progress : bool
        Show a ``tqdm`` progress bar with the loss (skipped, with a warning, when tqdm is missing).
    every : int
        Refresh the bar every ``every`` steps.
    optimiser : {"adam", "sgd"}
        Adam, or plain gradient descent ``theta - rate g``.
    betas : tuple of float
        Adam's decay rates of the two moments.
    eps : float
        Adam's epsilon.
    on_step : callable, optional
        ``on_step(step, params, loss)`` after every step (``step`` counts from 1), for checkpoints.
    peak_rate : float, optional
        Instead of the Noam schedule: ``warmup`` steps up to this rate, then a half cosine down to a tenth of
        it at step ``decay_steps``.
    decay_steps : int, optional
        The length of the cosine schedule; default ``n_steps``. A run stopped early (fewer ``n_steps``) takes the
        first steps of the whole run's schedule.
    weight_decay : float, optional
        ``lambda`` of decoupled weight decay (:func:`attnbook.learning.optim.decay_weights`, with Adam: AdamW):
        after each step every weight matrix shrinks by ``1 - rate * lambda``.

    Returns
    -------
    tuple
        ``(params, history)``: the trained parameters and a :class:`History`.

    Examples
    --------
    >>> from attnbook.learning.models.recall import RecallParameters
    >>> p0 = RecallParameters(*[np.zeros(1)] * 4)
    >>> step = lambda p, batch: (float(np.sum(p.w_v ** 2)), p._replace(w_v=2 * p.w_v))
    >>> fit(p0, step, lambda rng: None, 3, progress=False)
    Traceback (most recent call last):
    ...
    ValueError: fit needs d_model (for the Noam schedule) or a constant learning_rate
    >>> fit(p0, step, lambda rng: None, 3, d_model=4, warmup=2, progress=False)[1].rates.round(4).tolist()
    [0.1768, 0.3536, 0.2887]
    """
    check_gradients(params, params)  # a tree in a NamedTuple
    for name, function in (("loss_and_gradients", loss_and_gradients), ("next_batch", next_batch)):
        if not callable(function):
            raise TypeError(f"{name} must be callable, got {type(function).__name__}")
    n_steps = check_positive_int(n_steps, "n_steps")
    if learning_rate is not None:
        learning_rate = check_learning_rate(learning_rate)
    elif peak_rate is not None:
        peak_rate, warmup = check_learning_rate(peak_rate), check_positive_int(warmup, "warmup")
        decay_steps = n_steps if decay_steps is None else check_positive_int(decay_steps, "decay_steps")
        if warmup >= decay_steps:
            raise ValueError(f"warmup = {warmup} must be smaller than the schedule's {decay_steps} steps")
    elif d_model is None:
        raise ValueError("fit needs d_model (for the Noam schedule) or a constant learning_rate")
    else:
        d_model, warmup = check_positive_int(d_model, "d_model"), check_positive_int(warmup, "warmup")
    if max_norm is not None:
        if isinstance(max_norm, bool) or not isinstance(max_norm, (int, float)) \
                or not (math.isfinite(max_norm) and max_norm > 0):
            raise ValueError(f"max_norm must be a positive finite number or None, got {max_norm!r}")
        max_norm = float(max_norm)
    if weight_decay is not None and not (isinstance(weight_decay, (int, float)) and not isinstance(weight_decay, bool)
                                         and math.isfinite(weight_decay) and weight_decay >= 0):
        raise ValueError(f"weight_decay must be a non-negative finite number or None, got {weight_decay!r}")
    if optimiser not in ("adam", "sgd"):
        raise ValueError(f"optimiser must be 'adam' or 'sgd', got {optimiser!r}")
    if on_step is not None and not callable(on_step):
        raise TypeError(f"on_step must be callable, got {type(on_step).__name__}")
    rng = check_seed(seed)
    progress, every = check_bool(progress, "progress"), check_positive_int(every, "every")

    bar = _progress_bar(n_steps) if progress else None
    state = init_adam(params)
    losses, grad_norms, rates, seconds = (np.empty(n_steps) for _ in range(4))  # (n_steps,) each
    start = time.perf_counter()
    try:
        for index in range(n_steps):
            loss, grads = loss_and_gradients(params, next_batch(rng))
            if index == 0:
                check_gradients(params, grads)  # the structure once; the same code gives it every step
            loss = float(loss)
            if not math.isfinite(loss):
                raise FloatingPointError(f"the loss is {loss} at step {index + 1}; lower the learning rate "
                                         "(or max_norm)")
            grads, norm = (grads, global_norm(grads)) if max_norm is None else clip_tree(grads, max_norm)
            if learning_rate is not None:
                rate = learning_rate
            elif peak_rate is not None:
                rate = warmup_cosine(index + 1, peak_rate, warmup, decay_steps, COSINE_FLOOR)
            else:
                rate = noam(index + 1, d_model, warmup)
            if optimiser == "adam":
                params, state = adam_update(params, grads, state, rate, *betas, eps)
            else:
                params = descend(params, grads, rate)
            if weight_decay:
                params = decay_weights(params, rate * weight_decay)
            losses[index], grad_norms[index], rates[index] = loss, norm, rate
            seconds[index] = time.perf_counter() - start
            if on_step is not None:
                on_step(index + 1, params, loss)
            if bar is not None and ((index + 1) % every == 0 or index + 1 == n_steps):
                bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
                bar.update(index + 1 - bar.n)
    finally:
        if bar is not None:
            bar.close()
    return params, History(losses, grad_norms, rates, seconds)


def _progress_bar(n_steps: int):
    """A tqdm bar (the notebook widget in Jupyter, text in a terminal), or None without tqdm."""
    try:
        from tqdm.auto import tqdm  # lazily: the package imports without tqdm
    except ImportError:
        warnings.warn("tqdm is not installed, so fit shows no progress bar (pip install tqdm, or pass "
                      "progress=False)", stacklevel=3)
        return None
    return tqdm(total=n_steps, unit="step", desc="fit")
