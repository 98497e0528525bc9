"""Boolean attention masks. Convention: True = the query may attend to that key.

>>> causal_mask(3).astype(int).tolist()
[[1, 0, 0], [1, 1, 0], [1, 1, 1]]
"""

from __future__ import annotations

import numpy as np

from .validation import as_bool_mask, check_positive_int

__all__ = ["banded_mask", "causal_mask", "graph_mask", "padding_mask"]


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
    n_q = check_positive_int(n_q, "n_q")
    n_k = n_q if n_k is None else check_positive_int(n_k, "n_k")
    if n_k < n_q:
        raise ValueError(
            f"n_k={n_k} is smaller than n_q={n_q}; a causal mask needs at least as many keys as queries"
        )
    query_pos = np.arange(n_q)[:, None] + (n_k - n_q)  # (n_q, 1)
    key_pos = np.arange(n_k)[None, :]  # (1, n_k)
    return key_pos <= query_pos  # (n_q, n_k)


def padding_mask(lengths, n: int | None = None) -> np.ndarray:
    """Key mask for a batch of sequences padded to a common length ``n``: shape ``(batch, 1, n)``.

    Entry ``[b, 0, j]`` is True when position ``j`` is a real token of sequence ``b``
    (``j < lengths[b]``). The middle axis of size 1 broadcasts over the queries, so the mask can be
    passed straight to attention of shape ``(batch, n, n)``. Padded *queries* still attend to the real
    keys; their outputs are meaningless and are ignored downstream (e.g. by the loss).

    >>> padding_mask([3, 1], 4).astype(int).tolist()
    [[[1, 1, 1, 0]], [[1, 0, 0, 0]]]
    >>> padding_mask([5], 4)
    Traceback (most recent call last):
    ...
    ValueError: lengths[0] = 5 is longer than the padded length n = 4
    """
    lengths_array = np.asarray(lengths)
    if lengths_array.ndim != 1 or lengths_array.size == 0:
        raise ValueError(f"lengths must be a non-empty 1-D list of sequence lengths, got shape {lengths_array.shape}")
    if lengths_array.dtype.kind not in "iu":
        raise TypeError(f"lengths must be integers, got dtype {lengths_array.dtype}")
    for b, length in enumerate(lengths_array):
        check_positive_int(int(length), f"lengths[{b}]")
    n = int(lengths_array.max()) if n is None else check_positive_int(n, "n")
    too_long = np.flatnonzero(lengths_array > n)
    if too_long.size:
        b = int(too_long[0])
        raise ValueError(f"lengths[{b}] = {int(lengths_array[b])} is longer than the padded length n = {n}")
    positions = np.arange(n)[None, None, :]  # (1, 1, n)
    return positions < lengths_array[:, None, None]  # (batch, 1, n)


def banded_mask(n: int, window: int, causal: bool = False) -> np.ndarray:
    """Truncated (banded) self-attention: query ``i`` sees keys ``j`` with ``|i - j| <= window``.

    With ``causal=True`` only the past part of the band is kept: ``i - window <= j <= i``. Used for
    long sequences such as speech, where each frame needs only a local context.

    >>> banded_mask(4, 1).astype(int).tolist()
    [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]]
    >>> banded_mask(3, 1, causal=True).astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [0, 1, 1]]
    """
    n = check_positive_int(n, "n")
    window = check_positive_int(window, "window", minimum=0)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    offset = np.arange(n)[None, :] - np.arange(n)[:, None]  # (n, n): j - i
    band = np.abs(offset) <= window  # (n, n)
    return band & (offset <= 0) if causal else band


def graph_mask(adjacency, self_loops: bool = True) -> np.ndarray:
    """Attention restricted to the edges of a graph: node ``i`` attends to ``j`` iff ``adjacency[i, j]``.

    ``adjacency`` is a square boolean or integer 0/1 matrix; with ``self_loops`` every node also sees
    itself (so no row is fully masked unless asked for). The result is a new array, never the input.

    >>> graph_mask([[0, 1, 0], [1, 0, 1], [0, 1, 0]]).astype(int).tolist()
    [[1, 1, 0], [1, 1, 1], [0, 1, 1]]
    >>> graph_mask([[0, 1, 0], [1, 0, 1]])
    Traceback (most recent call last):
    ...
    ValueError: adjacency has shape (2, 3); expected a square matrix (n_nodes, n_nodes)
    """
    if not isinstance(self_loops, bool):
        raise TypeError(f"self_loops must be True or False, got {self_loops!r}")
    edges = as_bool_mask(adjacency, "adjacency")  # (n, n)
    if edges.ndim != 2 or edges.shape[0] != edges.shape[1]:
        raise ValueError(f"adjacency has shape {edges.shape}; expected a square matrix (n_nodes, n_nodes)")
    if self_loops:
        return edges | np.eye(edges.shape[0], dtype=bool)  # (n, n)
    return edges.copy()  # (n, n)
