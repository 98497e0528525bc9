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


import numpy as np

from .gradients import numerical_jacobian
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
    y = _layer_output(layer, x)  # (n_out, d_out)

    def output(z: np.ndarray) -> np.ndarray:
        y_z = _layer_output(layer, z)  # (n_out, d_out)
        if y_z.shape != y.shape:
            raise ValueError(
                f"layer(x) changed shape from {y.shape} to {y_z.shape} when x moved; "
                "expected a fixed output shape (n_out, d_out)"
            )
        return y_z

    jacobian = numerical_jacobian(output, x, eps=eps)  # (n_out, d_out, n, d_in)
    return np.sqrt(np.sum(jacobian**2, axis=(1, 3)))  # (n_out, n)
