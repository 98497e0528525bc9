"""Measurements of a sequence layer: how many parameters it learns, and which outputs depend on which inputs.

A single bias-free self-attention head learns only ``W_Q`` ``(d_model, d_k)``, ``W_K``
``(d_model, d_k)`` and ``W_V`` ``(d_model, d_v)``: ``d_model * (2 d_k + d_v)`` numbers, whatever the
length of the sequence. The influence matrix says, for a layer from ``n`` vectors to ``n_out``
vectors, how strongly output ``i`` moves when input ``j`` moves: full for self-attention, lower
triangular for a causal layer or a left-to-right recurrent network.

>>> self_attention_parameter_count(d_model=512, d_k=64, d_v=64)
98304
>>> import numpy as np
>>> from attnbook import rnn_forward
>>> x = np.linspace(-1.0, 1.0, 6).reshape(3, 2)                     # (n, d_in)
>>> rnn = lambda seq: rnn_forward(seq, np.eye(2), 0.5 * np.eye(2), np.zeros(2))
>>> print(influence_matrix(rnn, x) > 0)
[[ True False False]
 [ True  True False]
 [ True  True  True]]
"""

from __future__ import annotations

import math

import numpy as np

from .validation import as_float_array, check_positive_int

__all__ = ["influence_matrix", "self_attention_parameter_count"]


def self_attention_parameter_count(d_model: int, d_k: int, d_v: int | None = None, bias: bool = False) -> int:
    """Learned numbers of one self-attention head: ``d_model * (2 d_k + d_v)``, plus ``2 d_k + d_v`` biases.

    ``d_v`` defaults to ``d_k``. The count does not depend on the sequence length ``n``: the same
    three matrices are applied to every position.

    >>> self_attention_parameter_count(2, 2, 3)
    14
    >>> self_attention_parameter_count(512, 64, bias=True)
    98496
    >>> self_attention_parameter_count(512, 0)
    Traceback (most recent call last):
    ...
    ValueError: d_k must be at least 1, got 0
    """
    d_model = check_positive_int(d_model, "d_model")
    d_k = check_positive_int(d_k, "d_k")
    d_v = d_k if d_v is None else check_positive_int(d_v, "d_v")
    if not isinstance(bias, (bool, np.bool_)):
        raise TypeError(f"bias must be True or False, got {bias!r}")
    weights = d_model * d_k + d_model * d_k + d_model * d_v  # W_Q, W_K, W_V
    biases = d_k + d_k + d_v  # b_Q, b_K, b_V
    return weights + (biases if bias else 0)


def _checked_step(eps) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)):
        raise TypeError(f"eps must be a real number, got {eps!r}")
    if not math.isfinite(eps) or eps <= 0:
        raise ValueError(f"eps must be a positive finite number, got {eps!r}")
    return float(eps)


def _layer_output(layer, x: np.ndarray) -> np.ndarray:
    y = layer(x)
    if isinstance(y, tuple):  # (output, weights) from the attention functions: keep the output
        y = y[0]
    y = as_float_array(y, "layer(x)")  # (n_out, d_out)
    if y.ndim != 2:
        raise ValueError(
            f"layer(x) has shape {y.shape} for x of shape {x.shape}; "
            "expected a sequence of vectors (n_out, d_out)"
        )
    return y.astype(np.float64, copy=False)


def influence_matrix(layer, x, eps: float = 1e-6) -> np.ndarray:
    """How strongly each output position of ``layer`` depends on each input position, at ``x``: ``(n_out, n)``.

    ``layer`` maps a sequence ``x`` of shape ``(n, d_in)`` to a sequence of shape ``(n_out, d_out)``
    (a function returning ``(output, weights)``, like the attention functions, is accepted too).
    Entry ``[i, j]`` is the Frobenius norm of the Jacobian block ``d y_i / d x_j`` (a
    ``(d_out, d_in)`` matrix), estimated by central differences with step ``eps``. An entry is
    exactly 0 when moving input ``j`` leaves output ``i`` bit-for-bit unchanged.

    >>> w = np.array([[3.0, 0.0], [0.0, 4.0]])                          # (d_in, d_out)
    >>> print(np.round(influence_matrix(lambda seq: seq @ w, np.ones((3, 2))), 6))
    [[5. 0. 0.]
     [0. 5. 0.]
     [0. 0. 5.]]
    >>> influence_matrix(np.sum, np.ones((3, 2)))
    Traceback (most recent call last):
    ...
    ValueError: layer(x) has shape () for x of shape (3, 2); expected a sequence of vectors (n_out, d_out)
    """
    if not callable(layer):
        raise TypeError(f"layer must be a function of the sequence x, got {type(layer).__name__}")
    x = as_float_array(x, "x").astype(np.float64, copy=False)  # (n, d_in)
    if x.ndim != 2:
        raise ValueError(f"x has shape {x.shape}; expected one sequence of vectors (n, d_in)")
    step = _checked_step(eps)
    n, d_in = x.shape
    y = _layer_output(layer, x)  # (n_out, d_out)
    squares = np.zeros((y.shape[0], n))  # (n_out, n): sum over (d_out, d_in) of squared derivatives
    for j in range(n):
        for c in range(d_in):
            up, down = x.copy(), x.copy()  # (n, d_in) each
            up[j, c] += step
            down[j, c] -= step
            y_up, y_down = _layer_output(layer, up), _layer_output(layer, down)  # (n_out, d_out) each
            if y_up.shape != y.shape or y_down.shape != y.shape:
                raise ValueError(
                    f"layer(x) changed shape from {y.shape} to {y_up.shape} when x moved; "
                    "expected a fixed output shape (n_out, d_out)"
                )
            derivative = (y_up - y_down) / (2 * step)  # (n_out, d_out): column c of each block
            squares[:, j] += np.sum(derivative**2, axis=1)  # (n_out,)
    return np.sqrt(squares)  # (n_out, n)
