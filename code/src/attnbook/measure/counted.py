"""The forward passes of the book's layers written as scalar loops that count every multiply-add they perform,
so that the closed forms of :mod:`attnbook.measure.counts` can be checked by doing.

>>> counted = counted_rnn(np.ones((4, 2)), np.ones((2, 3)), np.eye(3), np.zeros(3))
>>> counted.macs == rnn_macs(4, 2, 3), counted.nonlinear
(True, 12)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..validation import as_float_array, check_positive_int
from .counts import conv1d_macs, rnn_macs, self_attention_macs

__all__ = ["Counted", "counted_conv1d", "counted_rnn", "counted_self_attention"]


class Counted(NamedTuple):
    """A layer's output computed by explicit scalar loops, with the operations the loops performed.

    Attributes
    ----------
    output : ndarray
        The layer's output, as the package computes it.
    macs : int
        Multiply-adds of the matrix products (``a * b`` added to a running sum).
    nonlinear : int
        Evaluations of ``exp`` (softmax) or ``tanh`` (the recurrence).

    Examples
    --------
    >>> counted = counted_self_attention(np.ones((3, 2)), np.eye(2), np.eye(2), np.eye(2))
    >>> counted.macs == self_attention_macs(3, 2), counted.nonlinear
    (True, 9)
    """

    output: np.ndarray  # the layer's output, as the package computes it
    macs: int  # multiply-adds of the matrix products (a * b added to a running sum)
    nonlinear: int  # evaluations of exp (softmax) or tanh (recurrence)


def _matrix(a, name: str) -> np.ndarray:
    a = as_float_array(a, name)
    if a.ndim != 2:
        raise ValueError(f"{name} has shape {a.shape}; expected a matrix")
    return a


def counted_self_attention(x, w_q, w_k, w_v) -> Counted:
    """``attnbook.self_attention(x, w_q, w_k, w_v).output`` as scalar loops that count their work.

    The loops perform ``n d_model (2 d_k + d_v) + n^2 (d_k + d_v)`` multiply-adds and ``n^2`` exponentials.

    Parameters
    ----------
    x, w_q, w_k, w_v : array_like
        As in :func:`attnbook.self_attention`, one sequence ``(n, d_model)``.

    Returns
    -------
    Counted
        ``(output (n, d_v), macs, nonlinear)``.

    Examples
    --------
    >>> counted = counted_self_attention(np.eye(3, 2), np.eye(2), np.eye(2), np.eye(2))
    >>> counted.macs, counted.nonlinear
    (72, 9)
    >>> counted_self_attention(np.ones((3, 2)), np.ones((3, 2)), np.ones((2, 2)), np.ones((2, 2)))
    Traceback (most recent call last):
    ...
    ValueError: x has shape (3, 2) but w_q has shape (3, 2); w_q needs d_model = 2 rows
    """
    x = _matrix(x, "x")  # (n, d_model)
    n, d_model = x.shape
    ws = {}
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        w = _matrix(w, name)  # (d_model, d_out)
        if w.shape[0] != d_model:
            raise ValueError(f"x has shape {x.shape} but {name} has shape {w.shape}; "
                             f"{name} needs d_model = {d_model} rows")
        ws[name] = w.tolist()
    if len(ws["w_q"][0]) != len(ws["w_k"][0]):
        raise ValueError("w_q and w_k must have the same number of columns (d_k)")
    rows, macs = x.tolist(), 0

    def project(w):
        nonlocal macs
        out = [[0.0] * len(w[0]) for _ in range(n)]
        for i in range(n):
            for c in range(len(w[0])):
                for m in range(d_model):
                    out[i][c] += rows[i][m] * w[m][c]
                    macs += 1
        return out

    q, k, v = project(ws["w_q"]), project(ws["w_k"]), project(ws["w_v"])
    d_k, d_v = len(q[0]), len(v[0])
    output = [[0.0] * d_v for _ in range(n)]
    for i in range(n):
        scores = [0.0] * n
        for j in range(n):
            for c in range(d_k):
                scores[j] += q[i][c] * k[j][c]
                macs += 1
        top = max(scores)
        exps = [math.exp((s - top) / math.sqrt(d_k)) for s in scores]  # softmax of scores / sqrt(d_k)
        total = sum(exps)
        weights = [e / total for e in exps]
        for c in range(d_v):
            for j in range(n):
                output[i][c] += weights[j] * v[j][c]
                macs += 1
    return Counted(np.array(output), macs, n * n)


def counted_rnn(x, w_x, w_h, b) -> Counted:
    """``attnbook.rnn_forward(x, w_x, w_h, b)`` (zero initial state) as scalar loops that count their work.

    The loops perform ``rnn_macs(n, d_in, d_h)`` multiply-adds and ``n d_h`` evaluations of tanh.

    Parameters
    ----------
    x, w_x, w_h, b : array_like
        As in :func:`attnbook.rnn_forward`, one sequence ``(n, d_in)``.

    Returns
    -------
    Counted
        ``(states (n, d_h), macs, nonlinear)``.

    Examples
    --------
    >>> counted_rnn(np.ones((3, 2)), np.ones((2, 2)), np.eye(2), np.zeros(2)).macs
    24
    """
    x = _matrix(x, "x")  # (n, d_in)
    w_x, w_h = _matrix(w_x, "w_x"), _matrix(w_h, "w_h")  # (d_in, d_h), (d_h, d_h)
    b = as_float_array(b, "b")  # (d_h,)
    n, d_in = x.shape
    d_h = w_x.shape[1]
    if w_x.shape[0] != d_in or w_h.shape != (d_h, d_h) or b.shape != (d_h,):
        raise ValueError(f"x has shape {x.shape}; expected w_x ({d_in}, d_h), w_h (d_h, d_h) and b (d_h,), "
                         f"got {w_x.shape}, {w_h.shape} and {b.shape}")
    rows, wx, wh, bias, macs = x.tolist(), w_x.tolist(), w_h.tolist(), b.tolist(), 0
    inputs = [[bias[c] for c in range(d_h)] for _ in range(n)]
    for t in range(n):
        for c in range(d_h):
            for m in range(d_in):
                inputs[t][c] += rows[t][m] * wx[m][c]
                macs += 1
    h, states = [0.0] * d_h, []
    for t in range(n):  # one step after another: step t reads the state of step t - 1
        pre = list(inputs[t])
        for c in range(d_h):
            for m in range(d_h):
                pre[c] += h[m] * wh[m][c]
                macs += 1
        h = [math.tanh(p) for p in pre]
        states.append(h)
    return Counted(np.array(states), macs, n * d_h)


def counted_conv1d(x, w, dilation: int = 1) -> Counted:
    r"""``attnbook.beyond.modalities.conv1d(x, w, causal=True, dilation=dilation)`` as scalar loops that count.

    Computed densely, the zero padding before position 0 multiplied like any other input, so the
    loops perform exactly ``conv1d_macs(n, d_in, k, d_out)`` multiply-adds:

    .. math:: y_t = \sum_{j=0}^{k-1} x_{t - j \delta} W_j, \qquad x_s = 0 \text{ for } s < 0.

    Parameters
    ----------
    x, w, dilation
        As in :func:`attnbook.beyond.modalities.conv1d` (``w`` its ``kernel``), one sequence ``(n, d_in)``.

    Returns
    -------
    Counted
        ``(output (n, d_out), macs, nonlinear = 0)``.

    Examples
    --------
    >>> counted_conv1d(np.ones((3, 2)), np.ones((2, 2, 2))).macs
    24
    """
    x = _matrix(x, "x")  # (n, d_in)
    w = as_float_array(w, "w")  # (k, d_in, d_out)
    if w.ndim != 3 or w.shape[1] != x.shape[1] or w.shape[0] < 1 or w.shape[2] < 1:
        raise ValueError(f"x has shape {x.shape} but w has shape {w.shape}; expected w (k, {x.shape[1]}, d_out)")
    dilation = check_positive_int(dilation, "dilation")
    n, d_in = x.shape
    k, _, d_out = w.shape
    rows, kernel, macs = x.tolist(), w.tolist(), 0
    output = [[0.0] * d_out for _ in range(n)]
    for t in range(n):
        for j in range(k):
            source = t - j * dilation
            row = rows[source] if source >= 0 else [0.0] * d_in  # zero padding before position 0
            for c in range(d_out):
                for m in range(d_in):
                    output[t][c] += row[m] * kernel[j][m][c]
                    macs += 1
    return Counted(np.array(output), macs, 0)


# --- sequential operations and path lengths -------------------------------------------------------
