"""A plain (Elman) recurrent network, the sequential baseline that attention is compared with.

Step t needs step t-1 (:func:`rnn_forward`): the n steps run one after another.

>>> import numpy as np
>>> states = rnn_forward(np.ones((4, 3)), np.full((3, 2), 0.1), np.eye(2) * 0.5, np.zeros(2))
>>> states.shape
(4, 2)
"""

from __future__ import annotations

import numpy as np

from .validation import as_float_array, check_min_ndim

__all__ = ["rnn_forward"]


def rnn_forward(x, w_x, w_h, b, h_0=None) -> np.ndarray:
    r"""Hidden states ``(..., n, d_h)`` of a tanh RNN over ``x`` ``(..., n, d_in)``, computed step by step.

    .. math:: h_t = \tanh\left(x_t W_x + h_{t-1} W_h + b\right), \qquad t = 0, \dots, n - 1

    Parameters
    ----------
    x : array_like
        ``(..., n, d_in)`` the inputs, one step per row; leading dimensions are independent sequences.
    w_x : array_like
        ``(d_in, d_h)`` input-to-hidden weights.
    w_h : array_like
        ``(d_h, d_h)`` hidden-to-hidden weights, applied once per step.
    b : array_like
        ``(d_h,)`` bias.
    h_0 : array_like, optional
        ``(..., d_h)`` the state before the first step, :math:`h_{-1}`; default zeros.

    Returns
    -------
    ndarray
        ``(..., n, d_h)`` float64 states ``h_0, ..., h_{n-1}``, row t after reading ``x[..., t, :]``.

    Examples
    --------
    >>> print(np.round(rnn_forward(np.ones((3, 1)), np.ones((1, 1)), np.full((1, 1), 0.5), np.zeros(1)), 4))
    [[0.7616]
     [0.8811]
     [0.8938]]
    >>> rnn_forward(np.ones((4, 3)), np.ones((2, 2)), np.eye(2), np.zeros(2))
    Traceback (most recent call last):
    ...
    ValueError: x has shape (4, 3) but w_x has shape (2, 2); w_x needs d_in = 3 rows
    """
    x = as_float_array(x, "x")  # (..., n, d_in)
    check_min_ndim(x, "x", 2, "(..., n, d_in)")
    w_x = as_float_array(w_x, "w_x")  # (d_in, d_h)
    w_h = as_float_array(w_h, "w_h")  # (d_h, d_h)
    b = as_float_array(b, "b")  # (d_h,)
    if w_x.ndim != 2 or w_x.shape[0] != x.shape[-1]:
        raise ValueError(f"x has shape {x.shape} but w_x has shape {w_x.shape}; w_x needs d_in = {x.shape[-1]} rows")
    d_h = w_x.shape[1]
    if w_h.shape != (d_h, d_h) or b.shape != (d_h,):
        raise ValueError(f"w_x has shape {w_x.shape}, so w_h must be ({d_h}, {d_h}) and b ({d_h},); "
                         f"got {w_h.shape} and {b.shape}")
    h = np.zeros(x.shape[:-2] + (d_h,)) if h_0 is None else as_float_array(h_0, "h_0")  # (..., d_h)
    if h.shape != x.shape[:-2] + (d_h,):
        raise ValueError(f"h_0 has shape {h.shape}; expected {x.shape[:-2] + (d_h,)}")
    inputs = x @ w_x + b  # (..., n, d_h): the input part can be computed for all steps at once
    states = np.empty(x.shape[:-1] + (d_h,))  # (..., n, d_h)
    for t in range(x.shape[-2]):  # the recurrence cannot: step t needs step t - 1
        h = np.tanh(inputs[..., t, :] + h @ w_h)  # (..., d_h)
        states[..., t, :] = h
    return states
