"""Sliding windows and attention sinks: attention over a stream with a key-value cache of fixed size.

StreamingLLM (Xiao et al., 2024): :func:`sink_window_mask` is the mask, :class:`SinkCache` the rolling cache and
:func:`stream_attention` decodes with it; the outputs equal masked attention with the mask.
:func:`sink_inputs` builds queries, keys and values with a sink by construction.

>>> import numpy as np
>>> from attnbook import scaled_dot_product_attention
>>> q, k, v = sink_inputs(12, 4, sink_logit=3.0, seed=0)         # (n, d) each
>>> streamed = stream_attention(q, k, v, window=3, sinks=1)
>>> masked = scaled_dot_product_attention(q, k, v, mask=sink_window_mask(12, 3, sinks=1)).output
>>> bool(np.allclose(streamed.outputs, masked)), streamed.cache_size
(True, 5)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..attention import check_attention_inputs, scaled_dot_product_attention
from ..validation import check_positive_int
from .kv_cache import check_cache_layout, check_one_token

__all__ = ["SinkCache", "StreamResult", "sink_inputs", "sink_window_mask", "stream_attention"]


def sink_window_mask(n: int, window: int, sinks: int = 0) -> np.ndarray:
    r"""Causal sliding window of reach ``window`` plus the first ``sinks`` positions: ``(n, n)`` booleans.

    .. math:: M_{ij} = [\, j \le i \,] \wedge \big( [\, j \ge i - w \,] \vee [\, j < s \,] \big)

    With ``sinks=0`` this is ``banded_mask(n, window, causal=True)``.

    Parameters
    ----------
    n : int
        Sequence length.
    window : int
        ``w``: query ``i`` sees the keys ``i - w, ..., i`` (0 = only itself).
    sinks : int
        ``s``: the first ``s`` positions stay visible to every later query.

    Returns
    -------
    ndarray of bool
        ``(n, n)``, True = may attend.

    Examples
    --------
    >>> sink_window_mask(5, 1, sinks=1).astype(int).tolist()
    [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 1, 1, 0], [1, 0, 0, 1, 1]]
    """
    n = check_positive_int(n, "n")
    window = check_positive_int(window, "window", minimum=0)
    sinks = check_positive_int(sinks, "sinks", minimum=0)
    return mask_of(n, window, sinks)


def mask_of(n: int, window: int, sinks: int) -> np.ndarray:
    """Unchecked kernel of :func:`sink_window_mask`.

    >>> mask_of(2, 0, 0).astype(int).tolist()
    [[1, 0], [0, 1]]
    """
    query = np.arange(n)[:, None]  # (n, 1)
    key = np.arange(n)[None, :]  # (1, n)
    return (key <= query) & ((key >= query - window) | (key < sinks))  # (n, n)


class SinkCache:
    """A key-value cache of fixed size: the first ``sinks`` tokens and the last ``window + 1``.

    Appending beyond the capacity evicts the oldest token that is not a sink; the recent tokens live in
    a ring buffer (position ``p`` in slot ``p mod (window + 1)``), so an append copies nothing.

    Parameters
    ----------
    window, sinks : int
        As in :func:`sink_window_mask`: the cache keeps the ``w + 1`` most recent tokens and the first ``s``.
    d_k, d_v, batch_shape, dtype
        As in :class:`attnbook.efficient.kv_cache.KVCache`.

    Attributes
    ----------
    keys, values : ndarray
        ``(*batch_shape, len(cache), d)`` the cached rows in the order of their positions (a copy).
    positions : ndarray
        ``(len(cache),)`` the stream positions of the cached tokens, increasing.

    Examples
    --------
    >>> cache = SinkCache(window=1, sinks=1, d_k=1, d_v=1)
    >>> for p in range(5):
    ...     cache.append(np.full((1, 1), p), np.zeros((1, 1)))
    >>> cache.positions.tolist(), cache.keys[:, 0].tolist(), len(cache)
    ([0, 3, 4], [0.0, 3.0, 4.0], 3)
    """

    def __init__(self, window: int, sinks: int, d_k: int, d_v: int, batch_shape=(), dtype=np.float64):
        self.window = check_positive_int(window, "window", minimum=0)
        self.sinks = check_positive_int(sinks, "sinks", minimum=0)
        d_k, d_v, self.batch_shape, dtype = check_cache_layout(d_k, d_v, batch_shape, dtype)
        slots = self.sinks + self.window + 1
        self._keys = np.zeros(self.batch_shape + (slots, d_k), dtype=dtype)  # (..., slots, d_k)
        self._values = np.zeros(self.batch_shape + (slots, d_v), dtype=dtype)  # (..., slots, d_v)
        self.capacity = slots
        self.seen = 0  # tokens appended so far

    def __len__(self) -> int:
        return min(self.seen, self.capacity)

    def _slots(self) -> tuple[np.ndarray, np.ndarray]:
        """The cached positions in increasing order, and the buffer slot of each."""
        sinks = np.arange(min(self.seen, self.sinks))  # (<= s,)
        recent = np.arange(max(self.sinks, self.seen - self.window - 1), self.seen)  # (<= w + 1,)
        positions = np.concatenate([sinks, recent])  # (len,)
        slots = np.where(positions < self.sinks, positions,
                         self.sinks + (positions - self.sinks) % (self.window + 1))  # (len,)
        return positions, slots

    @property
    def positions(self) -> np.ndarray:
        return self._slots()[0]  # (len,)

    @property
    def keys(self) -> np.ndarray:
        return self._keys[..., self._slots()[1], :]  # (..., len, d_k)

    @property
    def values(self) -> np.ndarray:
        return self._values[..., self._slots()[1], :]  # (..., len, d_v)

    def append(self, k_new, v_new) -> None:
        """Store the key ``(..., 1, d_k)`` and value ``(..., 1, d_v)`` of the next token, evicting if full."""
        k_new = np.asarray(k_new, dtype=self._keys.dtype)  # (..., 1, d_k)
        v_new = np.asarray(v_new, dtype=self._values.dtype)  # (..., 1, d_v)
        check_one_token(k_new, v_new, self.batch_shape, self._keys.shape[-1], self._values.shape[-1])
        self.write(k_new, v_new)

    def write(self, k_new: np.ndarray, v_new: np.ndarray) -> None:
        """Unchecked kernel of :meth:`append`."""
        p = self.seen
        slot = p if p < self.sinks else self.sinks + (p - self.sinks) % (self.window + 1)
        self._keys[..., slot, :] = k_new[..., 0, :]  # (..., d_k)
        self._values[..., slot, :] = v_new[..., 0, :]  # (..., d_v)
        self.seen += 1


class StreamResult(NamedTuple):
    """Outputs of :func:`stream_attention` and the most tokens its cache held.

    Attributes
    ----------
    outputs : ndarray
        ``(..., n, d_v)`` the output of every step.
    cache_size : int
        The largest number of cached tokens at any step (at most ``sinks + window + 1``).

    Examples
    --------
    >>> stream_attention(np.ones((4, 2)), np.ones((4, 2)), np.ones((4, 1)), window=1).cache_size
    2
    """

    outputs: np.ndarray  # (..., n, d_v)
    cache_size: int


def stream_attention(q, k, v, window: int, sinks: int = 0, scale=None) -> StreamResult:
    r"""Decode a stream one token at a time with a :class:`SinkCache`: sinks plus a sliding window.

    .. math:: o_i = \operatorname{softmax}\big(\text{scale}\; q_i K_{C_i}^\top\big) V_{C_i}, \qquad
              C_i = \{ j < s \} \cup \{ i - w \le j \le i \}, \ j \le i

    Equal to :func:`attnbook.scaled_dot_product_attention` with ``mask=sink_window_mask(n, window, sinks)``,
    but the memory for keys and values is fixed, ``sinks + window + 1`` tokens, however long the stream.

    Parameters
    ----------
    q, k, v : array_like
        ``(..., n, d_k)``, ``(..., n, d_k)``, ``(..., n, d_v)``: every token of the stream.
    window, sinks
        As in :func:`sink_window_mask`.
    scale : float, optional
        As in :func:`attnbook.scaled_dot_product_attention`.

    Returns
    -------
    StreamResult
        ``outputs`` ``(..., n, d_v)`` and the largest ``cache_size``.

    Examples
    --------
    >>> run = stream_attention(np.zeros((5, 1)), np.zeros((5, 1)), np.arange(5.0)[:, None], window=1, sinks=1)
    >>> print(run.outputs[:, 0].round(4))                            # means over the sink and the last two
    [0.     0.5    1.     1.6667 2.3333]
    """
    q, k, v, _, factor = check_attention_inputs(q, k, v, None, scale)
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(f"q has {q.shape[-2]} positions and k has {k.shape[-2]}; a stream has one query per key")
    window = check_positive_int(window, "window", minimum=0)
    sinks = check_positive_int(sinks, "sinks", minimum=0)
    batch = tuple(np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]))
    k = np.broadcast_to(k, batch + k.shape[-2:])  # (..., n, d_k)
    v = np.broadcast_to(v, batch + v.shape[-2:])  # (..., n, d_v)
    cache = SinkCache(window, sinks, k.shape[-1], v.shape[-1], batch, q.dtype)
    outputs = np.empty(batch + (q.shape[-2], v.shape[-1]), dtype=q.dtype)  # (..., n, d_v)
    largest = 0
    for i in range(q.shape[-2]):
        cache.write(k[..., i : i + 1, :], v[..., i : i + 1, :])
        largest = max(largest, len(cache))
        query = np.broadcast_to(q[..., i : i + 1, :], batch + (1, q.shape[-1]))  # (..., 1, d_k)
        outputs[..., i : i + 1, :] = scaled_dot_product_attention.unchecked(query, cache.keys, cache.values, None, factor).output  # (..., 1, d_v)
    return StreamResult(outputs, largest)


def sink_inputs(n: int, d: int, sink_logit: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Queries, keys and values of a stream whose first token is an attention sink by construction.

    .. math:: q_i = (1, z_i), \quad k_0 = (\lambda \sqrt{d}, 0), \quad k_j = (0, y_j), \quad v_0 = 0, \quad
              v_j \sim \mathcal N(0, I) \ (j \ge 1)

    with ``z_i, y_j`` standard normal in ``d - 1`` coordinates: for large ``lambda`` the first token takes
    most of every query's weight while contributing a zero value.

    Parameters
    ----------
    n, d : int
        Stream length; width of queries, keys and values, at least 2.
    sink_logit : float
        ``lambda``, the scaled score of the first token for every query (0: no sink).
    seed : int
        Seed of the random numbers.

    Returns
    -------
    tuple of ndarray
        ``(q, k, v)``, each ``(n, d)``.

    Examples
    --------
    >>> q, k, v = sink_inputs(3, 2, sink_logit=2.0)
    >>> round(float(q[1] @ k[0] / np.sqrt(2)), 6), v[0].tolist()
    (2.0, [0.0, 0.0])
    """
    n = check_positive_int(n, "n")
    d = check_positive_int(d, "d", minimum=2)
    if isinstance(sink_logit, bool) or not isinstance(sink_logit, (int, float, np.integer, np.floating)) \
            or not math.isfinite(sink_logit):
        raise ValueError(f"sink_logit must be a finite number, got {sink_logit!r}")
    rng = np.random.default_rng(seed)
    q = np.concatenate([np.ones((n, 1)), rng.standard_normal((n, d - 1))], axis=1)  # (n, d)
    k = np.concatenate([np.zeros((n, 1)), rng.standard_normal((n, d - 1))], axis=1)  # (n, d)
    k[0] = 0.0
    k[0, 0] = float(sink_logit) * math.sqrt(d)  # (d,): the sink's key
    v = rng.standard_normal((n, d))  # (n, d)
    v[0] = 0.0  # the sink's value
    return q, k, v
