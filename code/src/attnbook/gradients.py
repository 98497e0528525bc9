"""Central finite differences, the check of every backward pass.

The backward passes themselves live in :mod:`attnbook.learning.gradients`.

>>> import numpy as np
>>> numerical_jacobian(np.sin, np.zeros(2)).round(6).tolist()
[[1.0, 0.0], [0.0, 1.0]]
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .validation import as_float_array

__all__ = ["numerical_jacobian"]


def numerical_jacobian(func: Callable[[np.ndarray], np.ndarray], x, eps: float = 1e-6) -> np.ndarray:
    """Central finite differences: ``J[..., m] = (f(x + eps e_m) - f(x - eps e_m)) / (2 eps)``.

    ``func`` maps an array shaped like ``x`` to an array of any shape; the result has shape
    ``func(x).shape + x.shape``. The error is of order ``eps**2`` times the third derivative, plus
    rounding of order ``1e-16 / eps``, so entries below about ``1e-9`` are not resolved.

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
