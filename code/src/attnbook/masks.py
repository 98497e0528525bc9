"""Boolean attention masks. Convention: True = the query may attend to that key.

>>> causal_mask(3).astype(int).tolist()
[[1, 0, 0], [1, 1, 0], [1, 1, 1]]
"""

from __future__ import annotations

import numpy as np

__all__ = ["causal_mask"]


def _check_length(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer number of positions, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return int(value)


def causal_mask(n_q: int, n_k: int | None = None) -> np.ndarray:
    """Mask that lets query ``i`` see key ``j`` only when ``j`` is not in its future.

    With ``n_k`` omitted the mask is square, ``(n_q, n_q)``, True on and below the diagonal.
    With ``n_k > n_q`` (new queries appended to a longer context, as when decoding with a cache)
    the queries are aligned with the *last* ``n_q`` keys: query ``i`` sees keys ``0 .. i + n_k - n_q``.

    >>> causal_mask(2, 4).astype(int).tolist()
    [[1, 1, 1, 0], [1, 1, 1, 1]]
    >>> causal_mask(3, 2)
    Traceback (most recent call last):
    ...
    ValueError: n_k=2 is smaller than n_q=3; a causal mask needs at least as many keys as queries
    """
    n_q = _check_length(n_q, "n_q")
    n_k = n_q if n_k is None else _check_length(n_k, "n_k")
    if n_k < n_q:
        raise ValueError(
            f"n_k={n_k} is smaller than n_q={n_q}; a causal mask needs at least as many keys as queries"
        )
    query_pos = np.arange(n_q)[:, None] + (n_k - n_q)  # (n_q, 1)
    key_pos = np.arange(n_k)[None, :]  # (1, n_k)
    return key_pos <= query_pos  # (n_q, n_k)
