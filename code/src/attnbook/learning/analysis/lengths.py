"""Train the one-layer model of :mod:`attnbook.learning.models.lengths` at one length, one run per position scheme.

>>> run = train_length_model("alibi", n_steps=40, seed=0)
>>> bool(run.losses[-5:].mean() < run.losses[:5].mean())
True
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..models import scaffold
from ..models.lengths import MODEL, LengthConfig, LengthModel

__all__ = ["LengthRun", "train_length_model"]


class LengthRun(NamedTuple):
    """A trained model and how it got there.

    Attributes
    ----------
    params, losses, scheme, n_heads, trained_length
        The trained parameters, the ``(n_steps,)`` loss per step, and the settings of
        :func:`train_length_model`.

    Examples
    --------
    >>> train_length_model("alibi", trained_length=6, n_steps=3, d_model=8, n_heads=2).scheme
    'alibi'
    """

    params: LengthModel
    losses: np.ndarray
    scheme: str
    n_heads: int
    trained_length: int


def train_length_model(scheme: str, trained_length: int = 32, n_steps: int = 300, batch_size: int = 32,
                       d_model: int = 32, n_heads: int = 4, n_symbols: int = 6, p_signal: float = 0.25,
                       learning_rate: float = 0.02, seed: int = 0) -> LengthRun:
    r"""Train the one-layer model on the most-recent-signal task at one length, with Adam (:func:`scaffold.train`).

    .. math:: \theta \leftarrow \mathrm{Adam}\bigl(\theta, \nabla_\theta L(\theta; \text{fresh batch of length } L)\bigr)

    Parameters
    ----------
    scheme : {"none", "sinusoidal", "learned", "rotary", "alibi"}
        How the model sees positions.
    trained_length : int, optional
        :math:`L`, the length of every training sequence; default 32.
    n_steps, batch_size : int, optional
        Adam steps and sequences per step; defaults 300 and 32.
    d_model, n_heads : int, optional
        Width and heads; ``n_heads`` divides ``d_model`` and each head's width is even for "rotary".
    n_symbols : int, optional
        Signal tokens; default 6.
    p_signal : float, optional
        Signal probability per position; default 0.25.
    learning_rate : float, optional
        Adam's step size; default 0.02.
    seed : int, optional
        Seeds the parameters and the batches.

    Returns
    -------
    LengthRun
        Trained parameters, the loss per step and the settings.

    Examples
    --------
    >>> run = train_length_model("rotary", trained_length=8, n_steps=5, d_model=8, n_heads=2)
    >>> run.losses.shape, run.trained_length
    ((5,), 8)
    """
    config = LengthConfig(scheme, trained_length, n_steps, batch_size, d_model, n_heads, n_symbols,
                          p_signal, learning_rate)
    params, record = scaffold.train(MODEL, config, seed, progress=False)
    return LengthRun(params, np.array(record["losses"]), scheme, n_heads, trained_length)
