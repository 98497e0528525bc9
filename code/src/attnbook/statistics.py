"""Monte Carlo check of the variance argument behind the 1/sqrt(d_k) scaling.

If the components of q and k are independent with mean 0 and variance 1, then
Var(q.k) = d_k, and Var(q.k / sqrt(d_k)) = 1.

>>> result = dot_product_variance(d_k=4, n_samples=50_000, seed=0)
>>> abs(result.raw - 4) < 0.2, abs(result.scaled - 1) < 0.05
(True, True)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["DotProductVariance", "dot_product_variance"]


class DotProductVariance(NamedTuple):
    """Sample variances of q.k before (``raw``) and after (``scaled``) dividing by sqrt(d_k)."""

    raw: float
    scaled: float
    d_k: int
    n_samples: int


def dot_product_variance(d_k: int, n_samples: int = 200_000, seed: int = 0) -> DotProductVariance:
    """Sample ``n_samples`` pairs of standard-normal q, k in ``d_k`` dimensions; return Var(q.k).

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
