r"""Probes: run a computation, nudge its input, and measure which outputs respond and how strongly.

Perturbations and their reach per layer (the path length ``attnbook.measure.counts.path_length`` states),
finite-difference Jacobians and influence matrices, exact RNN state Jacobians, the variance of ``q . k``.

Examples
--------
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
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..recurrent import rnn_forward
from ..validation import as_float_array, check_positive_int

__all__ = [
    "DotProductVariance",
    "dependency_reach",
    "dot_product_variance",
    "influence_matrix",
    "numerical_jacobian",
    "perturbation_effect",
    "rnn_state_jacobians",
    "steps_to_reach",
]


def _checked_position(position, name: str, n: int, shape: tuple[int, ...]) -> int:
    if isinstance(position, bool) or not isinstance(position, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {position!r}")
    if not 0 <= position < n:
        raise ValueError(f"{name}={position} is not a position of x, which has shape {shape} (n = {n})")
    return int(position)


def _checked_sequence(x, layout: str = "(n, d)") -> np.ndarray:
    x = as_float_array(x, "x").astype(np.float64, copy=False)
    if x.ndim != 2:
        raise ValueError(f"x has shape {x.shape}; expected one sequence of vectors {layout}")
    return x


# --- perturbation --------------------------------------------------------------------------------


def perturbation_effect(layer: Callable, x, source: int = 0, delta: float = 1.0) -> np.ndarray:
    r"""How far each output of ``layer`` moves when input position ``source`` is moved.

    .. math:: e_t = \lVert \mathrm{layer}(x + \delta\, \mathbf{1}_{source})_t - \mathrm{layer}(x)_t \rVert_2

    where ``1_source`` adds ``delta`` to every feature of row ``source`` and nothing elsewhere.

    Parameters
    ----------
    layer : callable
        Maps a sequence ``(n, d)`` to a sequence ``(n, d_out)``.
    x : array_like, shape (n, d)
        The sequence at which to probe.
    source : int, optional
        The input position moved. Default 0.
    delta : float, optional
        How far every feature of that position moves, non-zero and finite. Default 1.

    Returns
    -------
    ndarray, shape (n,)
        The Euclidean norm of the change of each output position.

    Examples
    --------
    >>> perturbation_effect(lambda z: np.cumsum(z, axis=0), np.zeros((3, 1)), source=1)
    array([0., 1., 1.])
    """
    x = _checked_sequence(x)  # (n, d)
    n = x.shape[0]
    source = _checked_position(source, "source", n, x.shape)
    if not math.isfinite(delta) or delta == 0:
        raise ValueError(f"delta must be a non-zero finite number, got {delta!r}")
    moved = x.copy()  # (n, d)
    moved[source] += delta
    before, after = np.asarray(layer(x)), np.asarray(layer(moved))  # (n, d_out) each
    if before.shape[:1] != (n,) or before.shape != after.shape:
        raise ValueError(f"layer returned shape {before.shape} for x of shape {x.shape}; "
                         "expected one output row per position")
    return np.linalg.norm((after - before).reshape(n, -1), axis=1)  # (n,)


def dependency_reach(run: Callable, x, n_steps: int, source: int = 0, delta: float = 1.0,
                     tol: float = 1e-12) -> np.ndarray:
    """Which outputs depend on input ``source`` after each of ``n_steps`` layers or steps.

    Entry ``[s - 1, t]`` is True when moving input ``source`` by ``delta`` moves output ``t`` of
    ``run(x, s)`` by more than ``tol``.

    Parameters
    ----------
    run : callable
        ``run(x, s)`` returns the outputs ``(n, d_out)`` after ``s`` steps (layers, or steps of a recurrence).
    x : array_like, shape (n, d)
        The sequence at which to probe.
    n_steps : int
        How many steps to probe, at least 1.
    source, delta : optional
        As in :func:`perturbation_effect`.
    tol : float, optional
        The smallest change that counts as a dependence. Default ``1e-12``.

    Returns
    -------
    ndarray of bool, shape (n_steps, n)
        Which outputs have moved after each step.

    Examples
    --------
    >>> shift = lambda z, s: np.vstack([np.zeros((s, 1)), z[:len(z) - s]])  # moves rows s places down
    >>> dependency_reach(shift, np.zeros((4, 1)), n_steps=2).astype(int)
    array([[0, 1, 0, 0],
           [0, 0, 1, 0]])
    """
    n_steps = check_positive_int(n_steps, "n_steps")
    reach = [perturbation_effect(lambda z, s=s: run(z, s), x, source, delta) > tol
             for s in range(1, n_steps + 1)]
    return np.array(reach)  # (n_steps, n)


def steps_to_reach(reach, target: int = -1) -> int | None:
    """The first step, counted from 1, at which ``reach`` marks output ``target``; None if never.

    Parameters
    ----------
    reach : array_like of bool, shape (n_steps, n)
        What ``dependency_reach`` returns.
    target : int, optional
        The output position; default -1, the last.

    Returns
    -------
    int or None
        The measured path length from the probed input to ``target``.

    Examples
    --------
    >>> steps_to_reach(np.array([[True, False], [True, True]]))
    2
    >>> steps_to_reach(np.array([[True, False]])) is None
    True
    """
    reach = np.asarray(reach, dtype=bool)  # (n_steps, n)
    if reach.ndim != 2:
        raise ValueError(f"reach has shape {reach.shape}; expected (n_steps, n)")
    hits = np.flatnonzero(reach[:, target])  # (hits,)
    return int(hits[0]) + 1 if hits.size else None


# --- Jacobians -----------------------------------------------------------------------------------


def numerical_jacobian(func: Callable[[np.ndarray], np.ndarray], x, eps: float = 1e-6) -> np.ndarray:
    r"""The Jacobian of ``func`` at ``x`` by central finite differences.

    .. math:: J[\dots, m] = \frac{f(x + \varepsilon e_m) - f(x - \varepsilon e_m)}{2 \varepsilon}

    Parameters
    ----------
    func : callable
        Maps an array shaped like ``x`` to an array of any shape.
    x : array_like
        The point.
    eps : float, optional
        The step, positive and finite. Default ``1e-6``.

    Returns
    -------
    ndarray, shape func(x).shape + x.shape
        The estimated derivatives.

    Examples
    --------
    >>> print(numerical_jacobian(lambda v: np.array([v[0] * v[1], v[0] ** 2]), np.array([2.0, 3.0])).round(6))
    [[3. 2.]
     [4. 0.]]
    >>> numerical_jacobian(np.sin, np.zeros(2), eps=0.0)
    Traceback (most recent call last):
    ...
    ValueError: eps must be a positive finite number, got 0.0
    """
    if not callable(func):
        raise TypeError(f"func must be callable, got {type(func).__name__}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)):
        raise TypeError(f"eps must be a real number, got {eps!r}")
    if not math.isfinite(eps) or eps <= 0:
        raise ValueError(f"eps must be a positive finite number, got {eps!r}")
    point = as_float_array(x, "x").astype(np.float64)  # (*x_shape)
    out_shape = np.shape(func(point.copy()))
    jac = np.zeros(out_shape + point.shape)  # (*out_shape, *x_shape)
    for index in np.ndindex(point.shape):
        up, down = point.copy(), point.copy()
        up[index] += eps
        down[index] -= eps
        jac[(...,) + index] = (np.asarray(func(up)) - np.asarray(func(down))) / (2 * eps)  # (*out_shape)
    return jac


def _layer_output(layer, x: np.ndarray) -> np.ndarray:
    y = layer(x)
    if isinstance(y, tuple):  # (output, weights) from the attention functions: keep the output
        y = y[0]
    y = as_float_array(y, "layer(x)")  # (n_out, d_out)
    if y.ndim != 2:
        raise ValueError(f"layer(x) has shape {y.shape} for x of shape {x.shape}; "
                         "expected a sequence of vectors (n_out, d_out)")
    return y.astype(np.float64, copy=False)


def influence_matrix(layer, x, eps: float = 1e-6) -> np.ndarray:
    r"""How strongly each output position of ``layer`` depends on each input position, at ``x``.

    .. math:: M_{ij} = \Big\lVert \frac{\partial y_i}{\partial x_j} \Big\rVert_F

    the Frobenius norm of the ``(d_out, d_in)`` block of the Jacobian (:func:`numerical_jacobian`).

    Parameters
    ----------
    layer : callable
        Maps a sequence ``(n, d_in)`` to a sequence ``(n_out, d_out)``, or to ``(output, weights)``.
    x : array_like, shape (n, d_in)
        The sequence at which to probe.
    eps : float, optional
        As in :func:`numerical_jacobian`.

    Returns
    -------
    ndarray, shape (n_out, n)
        The influence of each input position on each output position.

    Examples
    --------
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
    x = _checked_sequence(x, "(n, d_in)")  # (n, d_in)
    y = _layer_output(layer, x)  # (n_out, d_out)

    def output(z: np.ndarray) -> np.ndarray:
        y_z = _layer_output(layer, z)  # (n_out, d_out)
        if y_z.shape != y.shape:
            raise ValueError(f"layer(x) changed shape from {y.shape} to {y_z.shape} when x moved; "
                             "expected a fixed output shape (n_out, d_out)")
        return y_z

    jacobian = numerical_jacobian(output, x, eps=eps)  # (n_out, d_out, n, d_in)
    return np.sqrt(np.sum(jacobian**2, axis=(1, 3)))  # (n_out, n)


def rnn_state_jacobians(x, w_x, w_h, b, source: int = 0, h_0=None) -> np.ndarray:
    r"""Exact Jacobians ``d h_t / d x_source`` of the tanh RNN ``attnbook.rnn_forward``, for every t.

    With rows as vectors, ``h_t = tanh(x_t W_x + h_{t-1} W_h + b)``, the chain rule gives

    .. math:: J_{source} = D_{source} W_x^T, \qquad J_t = D_t W_h^T J_{t-1}, \qquad
              D_t = \mathrm{diag}(1 - h_t^2),

    and ``J_t = 0`` for ``t < source`` (the past cannot depend on the future).

    Parameters
    ----------
    x, w_x, w_h, b
        As in :func:`attnbook.rnn_forward`, one sequence ``(n, d_in)``.
    source : int, optional
        The input position differentiated against. Default 0.
    h_0 : optional
        As in :func:`attnbook.rnn_forward`.

    Returns
    -------
    ndarray, shape (n, d_h, d_in)
        ``J_t`` for every position ``t``.

    Examples
    --------
    >>> jac = rnn_state_jacobians(np.zeros((3, 1)), np.ones((1, 1)), 0.5 * np.ones((1, 1)), np.zeros(1))
    >>> jac[:, 0, 0].tolist()
    [1.0, 0.5, 0.25]
    >>> rnn_state_jacobians(np.zeros((3, 1)), np.ones((1, 1)), np.ones((1, 1)), np.zeros(1), source=3)
    Traceback (most recent call last):
    ...
    ValueError: source=3 is not a position of x, which has shape (3, 1) (n = 3)
    """
    x = _checked_sequence(x, "(n, d_in)")  # (n, d_in)
    n = x.shape[0]
    source = _checked_position(source, "source", n, x.shape)
    states = rnn_forward(x, w_x, w_h, b, h_0=h_0)  # (n, d_h); also validates the weights
    w_x = as_float_array(w_x, "w_x")  # (d_in, d_h)
    w_h = as_float_array(w_h, "w_h")  # (d_h, d_h)
    slopes = 1.0 - states**2  # (n, d_h): tanh'(u_t) = 1 - h_t^2
    jac = np.zeros((n, w_x.shape[1], x.shape[1]))  # (n, d_h, d_in)
    jac[source] = slopes[source][:, None] * w_x.T  # (d_h, d_in)
    for t in range(source + 1, n):
        jac[t] = slopes[t][:, None] * (w_h.T @ jac[t - 1])  # (d_h, d_h) @ (d_h, d_in) -> (d_h, d_in)
    return jac


# --- the spread of scores ------------------------------------------------------------------------


class DotProductVariance(NamedTuple):
    """Sample variances of ``q . k`` before (``raw``) and after (``scaled``) dividing by ``sqrt(d_k)``.

    Attributes
    ----------
    raw, scaled : float
        Sample variances of ``q . k`` (about ``d_k``) and of ``q . k / sqrt(d_k)`` (about 1).
    d_k, n_samples : int
        As in :func:`dot_product_variance`.

    Examples
    --------
    >>> result = dot_product_variance(64, n_samples=20000, seed=0)
    >>> round(result.raw, 1), round(result.scaled, 2)
    (64.6, 1.01)
    """

    raw: float
    scaled: float
    d_k: int
    n_samples: int


def dot_product_variance(d_k: int, n_samples: int = 200_000, seed: int = 0) -> DotProductVariance:
    r"""Sample variance of the score ``q . k`` of random standard-normal queries and keys.

    If the ``d_k`` components of ``q`` and ``k`` are independent with mean 0 and variance 1, then

    .. math:: \mathrm{Var}(q \cdot k) = d_k, \qquad \mathrm{Var}\big(q \cdot k / \sqrt{d_k}\big) = 1,

    the argument behind the ``1 / sqrt(d_k)`` of scaled dot-product attention, measured here.

    Parameters
    ----------
    d_k : int
        Width of queries and keys, at least 1.
    n_samples : int, optional
        Pairs sampled, at least 2. Default 200,000.
    seed : int, optional
        Seed of the random generator, at least 0. Default 0.

    Returns
    -------
    DotProductVariance
        ``(raw, scaled, d_k, n_samples)``.

    Examples
    --------
    >>> result = dot_product_variance(d_k=4, n_samples=50_000, seed=0)
    >>> abs(result.raw - 4) < 0.2, abs(result.scaled - 1) < 0.05
    (True, True)
    >>> dot_product_variance(0)
    Traceback (most recent call last):
    ...
    ValueError: d_k must be a positive integer, got 0
    """
    for name, value in (("d_k", d_k), ("n_samples", n_samples)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if n_samples < 2:
        raise ValueError(f"n_samples must be at least 2 to estimate a variance, got {n_samples}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))  # (n_samples, d_k)
    k = rng.standard_normal((n_samples, d_k))  # (n_samples, d_k)
    dots = np.einsum("nd,nd->n", q, k)  # (n_samples,)
    return DotProductVariance(
        raw=float(dots.var()),
        scaled=float((dots / np.sqrt(d_k)).var()),
        d_k=int(d_k),
        n_samples=int(n_samples),
    )
