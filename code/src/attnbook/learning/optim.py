"""Optimisers for a NamedTuple of parameter arrays: plain gradient descent and Adam.

>>> import numpy as np
>>> from attnbook.learning.training import RecallParameters
>>> p = RecallParameters(*[np.ones(2)] * 4)
>>> sgd_step(p, p, 0.5).w_q.tolist()
[0.5, 0.5]
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = ["AdamState", "adam_step", "check_learning_rate", "init_adam", "sgd_step"]


class AdamState(NamedTuple):
    """Running moments of Adam, one array per parameter, and the number of steps taken.

    Attributes
    ----------
    m : tuple of ndarray
        First moments (running means of the gradients), shaped like the parameters.
    v : tuple of ndarray
        Second moments (running means of the squared gradients), shaped like the parameters.
    step : int
        Steps taken so far, ``t`` in the bias corrections.

    Examples
    --------
    >>> init_adam((np.ones(2),))
    AdamState(m=(array([0., 0.]),), v=(array([0., 0.]),), step=0)
    """

    m: tuple  # first moments, shaped like the parameters
    v: tuple  # second moments, shaped like the parameters
    step: int


def check_learning_rate(learning_rate) -> float:
    """Return ``learning_rate`` as a float if it is a positive finite number.

    Parameters
    ----------
    learning_rate : float
        The step size.

    Returns
    -------
    float
        ``learning_rate``.

    Examples
    --------
    >>> check_learning_rate(0.1)
    0.1
    >>> check_learning_rate(0)
    Traceback (most recent call last):
    ...
    ValueError: learning_rate must be a positive finite number, got 0
    """
    if isinstance(learning_rate, bool) or not isinstance(learning_rate, (int, float)):
        raise TypeError(f"learning_rate must be a number, got {learning_rate!r}")
    if not math.isfinite(learning_rate) or learning_rate <= 0:
        raise ValueError(f"learning_rate must be a positive finite number, got {learning_rate!r}")
    return float(learning_rate)


def _checked_pair(params, grads) -> None:
    if not (isinstance(params, tuple) and hasattr(params, "_fields")):
        raise TypeError(f"params must be a NamedTuple of arrays, got {type(params).__name__}")
    if type(params) is not type(grads) or len(params) != len(grads):
        raise TypeError("grads must have the structure of params (the same NamedTuple type)")
    for index, (w, g) in enumerate(zip(params, grads)):
        if np.shape(w) != np.shape(g):
            raise ValueError(f"grads[{index}] has shape {np.shape(g)} but params[{index}] has shape {np.shape(w)}")


def sgd_step(params, grads, learning_rate: float = 0.1):
    r"""Plain gradient descent, ``w <- w - learning_rate * dL/dw``, for a NamedTuple of arrays.

    .. math:: w \leftarrow w - \eta\, \frac{\partial L}{\partial w}

    Parameters
    ----------
    params : NamedTuple of ndarray
        The parameters.
    grads : NamedTuple of ndarray
        Their gradients, of the same structure and shapes.
    learning_rate : float
        The step size ``eta``.

    Returns
    -------
    NamedTuple of ndarray
        The new parameters.

    Examples
    --------
    >>> from attnbook.learning.training import RecallParameters
    >>> sgd_step(RecallParameters(*[np.ones(2)] * 4), RecallParameters(*[np.ones(2)] * 4), 0.5).w_q.tolist()
    [0.5, 0.5]
    """
    rate = check_learning_rate(learning_rate)
    _checked_pair(params, grads)
    return descend(params, grads, rate)


def descend(params, grads, rate: float):
    """Unchecked kernel of :func:`sgd_step`: ``w - rate * g`` for every parameter.

    >>> from attnbook.learning.training import RecallParameters
    >>> descend(RecallParameters(*[np.ones(1)] * 4), RecallParameters(*[np.ones(1)] * 4), 0.5).w_k.tolist()
    [0.5]
    """
    return type(params)(*(w - rate * g for w, g in zip(params, grads)))


def init_adam(params) -> AdamState:
    r"""Zero moments for :func:`adam_step`.

    .. math:: m_0 = 0, \quad v_0 = 0, \quad t = 0

    Parameters
    ----------
    params : NamedTuple of ndarray
        The parameters the moments will follow.

    Returns
    -------
    AdamState
        Zero first and second moments shaped like the parameters, and step 0.

    Examples
    --------
    >>> init_adam((np.ones(2),)).step
    0
    """
    return AdamState(tuple(np.zeros_like(w) for w in params), tuple(np.zeros_like(w) for w in params), 0)


def adam_step(params, grads, state: AdamState, learning_rate: float = 0.01, beta1: float = 0.9,
              beta2: float = 0.999, eps: float = 1e-8):
    r"""One step of Adam (Kingma and Ba, 2015); returns ``(new_params, new_state)``.

    .. math:: m \leftarrow \beta_1 m + (1 - \beta_1) g, \quad v \leftarrow \beta_2 v + (1 - \beta_2) g^2, \quad
              w \leftarrow w - \eta\, \frac{m / (1 - \beta_1^t)}{\sqrt{v / (1 - \beta_2^t)} + \epsilon}

    The step size is therefore about ``learning_rate`` whatever the size of the gradient.

    Parameters
    ----------
    params, grads : NamedTuple of ndarray
        The parameters and their gradients, of the same structure.
    state : AdamState
        The moments so far (see :func:`init_adam`).
    learning_rate : float
        ``eta``.
    beta1, beta2 : float
        Decay rates of the moments, in ``[0, 1)``.
    eps : float
        Added to the denominator.

    Returns
    -------
    tuple
        ``(new_params, new_state)``.

    Examples
    --------
    >>> from attnbook.learning.training import RecallParameters
    >>> p = RecallParameters(*[np.zeros(1)] * 4)
    >>> p, state = adam_step(p, RecallParameters(*[np.full(1, 1e-3)] * 4), init_adam(p), 0.1)
    >>> print(np.round(p.w_q, 4), state.step)
    [-0.1] 1
    """
    rate = check_learning_rate(learning_rate)
    _checked_pair(params, grads)
    if not isinstance(state, AdamState) or len(state.m) != len(params):
        raise TypeError("state must be the AdamState of these parameters (see init_adam)")
    for name, beta in (("beta1", beta1), ("beta2", beta2)):
        if not 0 <= beta < 1:
            raise ValueError(f"{name} must be in [0, 1), got {beta!r}")
    return adam_update(params, grads, state, rate, beta1, beta2, eps)


def adam_update(params, grads, state: AdamState, rate: float, beta1: float = 0.9, beta2: float = 0.999,
                eps: float = 1e-8):
    """Unchecked kernel of :func:`adam_step`; returns ``(new_params, new_state)``.

    >>> from attnbook.learning.training import RecallParameters
    >>> p = RecallParameters(*[np.zeros(1)] * 4)
    >>> adam_update(p, RecallParameters(*[np.ones(1)] * 4), init_adam(p), 0.1)[0].w_q.round(4).tolist()
    [-0.1]
    """
    step = state.step + 1
    m = tuple(beta1 * m_i + (1 - beta1) * g for m_i, g in zip(state.m, grads))
    v = tuple(beta2 * v_i + (1 - beta2) * g * g for v_i, g in zip(state.v, grads))
    new = []
    for w, m_i, v_i in zip(params, m, v):
        m_hat = m_i / (1 - beta1**step)  # bias correction: the moments start at 0
        v_hat = v_i / (1 - beta2**step)
        new.append(w - rate * m_hat / (np.sqrt(v_hat) + eps))
    return type(params)(*new), AdamState(m, v, step)
