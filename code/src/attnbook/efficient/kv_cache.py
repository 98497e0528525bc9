"""The key-value cache of autoregressive decoding: keys and values are computed once per token.

Under a causal mask the keys and values of earlier tokens never change, so a cache (:class:`KVCache`)
keeps them; :func:`decode` compares three strategies, whose counts
:func:`attnbook.measure.counts.decode_multiply_adds` gives in closed form.

>>> import numpy as np
>>> from attnbook import causal_mask, self_attention
>>> rng = np.random.default_rng(0)
>>> x = rng.standard_normal((5, 8))                               # (t, d_model)
>>> w_q, w_k, w_v = rng.standard_normal((3, 8, 4))                # each (d_model, d_k)
>>> cached = decode(x, w_q, w_k, w_v, strategy="cache")
>>> full = self_attention(x, w_q, w_k, w_v, mask=causal_mask(5)).output
>>> bool(np.allclose(cached.outputs, full)), cached.multiply_adds
(True, 600)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..attention import check_projections, scaled_dot_product_attention
from ..validation import as_float_array, check_positive_int, check_shape, overflow_error

__all__ = ["DecodeResult", "KVCache", "STRATEGIES", "check_cache_layout", "check_one_token", "decode", "decode_step"]

STRATEGIES = ("cache", "recompute_kv", "recompute_all")


def check_cache_layout(d_k, d_v, batch_shape, dtype) -> tuple[int, int, tuple[int, ...], np.dtype]:
    """The widths, leading shape and float type of a key-value cache's buffers, checked.

    Parameters
    ----------
    d_k, d_v, batch_shape, dtype
        As in :class:`KVCache`.

    Returns
    -------
    tuple
        ``(d_k, d_v, batch_shape, dtype)``.

    Examples
    --------
    >>> check_cache_layout(2, 3, [4], "float32")
    (2, 3, (4,), dtype('float32'))
    """
    d_k, d_v = check_positive_int(d_k, "d_k"), check_positive_int(d_v, "d_v")
    batch_shape, dtype = check_shape(batch_shape, "batch_shape"), np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"dtype must be a floating-point type, got {dtype}")
    return d_k, d_v, batch_shape, dtype


def check_one_token(k_new: np.ndarray, v_new: np.ndarray, batch_shape: tuple[int, ...], d_k: int, d_v: int) -> None:
    """Refuse ``k_new``, ``v_new`` unless they are ``(*batch_shape, 1, d_k)`` and ``(*batch_shape, 1, d_v)``: one token.

    Parameters
    ----------
    k_new, v_new : ndarray
        The token's key and value.
    batch_shape, d_k, d_v
        The cache's, as in :class:`KVCache`.

    Examples
    --------
    >>> check_one_token(np.ones((2, 2)), np.ones((1, 3)), (), 2, 3)
    Traceback (most recent call last):
    ...
    ValueError: k_new has shape (2, 2); expected (1, 2) (one token)
    """
    for name, array, width in (("k_new", k_new, d_k), ("v_new", v_new, d_v)):
        if array.shape != batch_shape + (1, width):
            raise ValueError(f"{name} has shape {array.shape}; expected {batch_shape + (1, width)} (one token)")


class KVCache:
    """Keys and values of the tokens decoded so far, in buffers preallocated for ``capacity`` tokens.

    Appending writes one row: ``t`` appends move ``O(t d)`` numbers, not the ``O(t^2 d)`` of concatenating.

    Parameters
    ----------
    capacity : int
        The most tokens the cache holds (positive).
    d_k, d_v : int
        Widths of a key and of a value (positive).
    batch_shape : tuple of int, optional
        Leading (batch, head) shape of every key and value; default ``()``.
    dtype : numpy float dtype, optional
        Type of the buffers; default float64.

    Attributes
    ----------
    keys, values : ndarray
        ``(*batch_shape, len(cache), d_k)`` and ``(..., d_v)`` views of the stored rows.

    Examples
    --------
    >>> cache = KVCache(capacity=4, d_k=2, d_v=3)
    >>> cache.append(np.ones((1, 2)), np.zeros((1, 3)))
    >>> len(cache), cache.keys.shape, cache.values.shape
    (1, (1, 2), (1, 3))
    >>> for _ in range(3):
    ...     cache.append(np.ones((1, 2)), np.zeros((1, 3)))
    >>> cache.append(np.ones((1, 2)), np.zeros((1, 3)))
    Traceback (most recent call last):
    ...
    ValueError: the cache is full (capacity 4 tokens); create it with a larger capacity
    """

    def __init__(self, capacity: int, d_k: int, d_v: int, batch_shape=(), dtype=np.float64):
        capacity = check_positive_int(capacity, "capacity")
        d_k, d_v, self.batch_shape, dtype = check_cache_layout(d_k, d_v, batch_shape, dtype)
        self._keys = np.zeros(self.batch_shape + (capacity, d_k), dtype=dtype)  # (..., capacity, d_k)
        self._values = np.zeros(self.batch_shape + (capacity, d_v), dtype=dtype)  # (..., capacity, d_v)
        self.capacity = capacity
        self.length = 0

    def __len__(self) -> int:
        return self.length

    @property
    def keys(self) -> np.ndarray:
        return self._keys[..., : self.length, :]  # (..., length, d_k)

    @property
    def values(self) -> np.ndarray:
        return self._values[..., : self.length, :]  # (..., length, d_v)

    def append(self, k_new, v_new) -> None:
        """Store the key ``(..., 1, d_k)`` and value ``(..., 1, d_v)`` of one new token.

        A number too large for the cache's dtype (above 65504 in a float16 cache) is refused here,
        instead of being stored as ``inf``.
        """
        k_new = as_float_array(k_new, "k_new")  # (..., 1, d_k)
        v_new = as_float_array(v_new, "v_new")  # (..., 1, d_v)
        check_one_token(k_new, v_new, self.batch_shape, self._keys.shape[-1], self._values.shape[-1])
        self.write(k_new, v_new)

    def write(self, k_new: np.ndarray, v_new: np.ndarray) -> None:
        """Unchecked kernel of :meth:`append`: store one token's key and value (refusing an overflow)."""
        for name, array, buffer in (("k_new", k_new, self._keys), ("v_new", v_new, self._values)):
            _check_fits(array, name, buffer.dtype)
        if self.length == self.capacity:
            raise ValueError(
                f"the cache is full (capacity {self.capacity} tokens); create it with a larger capacity"
            )
        self._keys[..., self.length, :] = k_new[..., 0, :]  # (..., d_k)
        self._values[..., self.length, :] = v_new[..., 0, :]  # (..., d_v)
        self.length += 1


def _check_fits(array: np.ndarray, name: str, dtype: np.dtype) -> None:
    """Raise if a (finite) entry of ``array`` would overflow to ``inf`` when stored in ``dtype``."""
    if np.can_cast(array.dtype, dtype, "safe"):
        return
    with np.errstate(over="ignore"):
        overflows = ~np.isfinite(array.astype(dtype))  # (same shape as array)
    if np.any(overflows):
        at = tuple(int(i) for i in np.argwhere(overflows)[0])
        raise ValueError(
            f"{name} holds {float(array[at]):.6g} at index {at}, which overflows the cache's {dtype} "
            f"(largest {float(np.finfo(dtype).max):.6g}); scale it down or create the cache with a wider dtype"
        )


class DecodeResult(NamedTuple):
    """Outputs of every decoding step and the multiply-adds of the matrix products performed.

    Attributes
    ----------
    outputs : ndarray
        ``(..., t, d_v)`` the attention output of each of the ``t`` steps, row s from the first s + 1 tokens.
    multiply_adds : int
        Multiply-adds of the projections and attention products the strategy performed.

    Examples
    --------
    >>> result = decode(np.ones((4, 2)), np.eye(2), np.eye(2), np.eye(2))
    >>> result.outputs.shape, result.multiply_adds
    ((4, 2), 88)
    """

    outputs: np.ndarray  # (..., t, d_v)
    multiply_adds: int


def _macs(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> int:
    """Multiply-adds of the matrix product of arrays of these shapes: batch * rows * inner * cols."""
    batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    return math.prod(batch) * a_shape[-2] * a_shape[-1] * b_shape[-1]


def _attention_macs(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> int:
    """Multiply-adds of attention's two products: ``q k^T`` (n_q n_k d_k) and ``weights v`` (n_q n_k d_v)."""
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    return math.prod(batch) * q.shape[-2] * k.shape[-2] * (q.shape[-1] + v.shape[-1])


def _attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask=None) -> np.ndarray:
    """Attention output of checked arrays, computed as the reference does (at least in float32)."""
    dtype = np.result_type(q, k, v, np.float32)
    q, k, v = (a.astype(dtype, copy=False) for a in (q, k, v))
    return scaled_dot_product_attention.unchecked(q, k, v, mask, 1.0 / math.sqrt(q.shape[-1])).output  # (..., n_q, d_v)


def project(x: np.ndarray, w: np.ndarray, what: str) -> np.ndarray:
    """Unchecked kernel: ``x @ w``, or the error naming ``what`` (``"x_new @ w_k"``) when it overflows.

    >>> project(np.ones((1, 2)), np.eye(2), "x @ w_q").tolist()
    [[1.0, 1.0]]
    """
    with np.errstate(over="ignore", invalid="ignore"):
        y = x @ w  # (..., n, d_out)
    if not np.all(np.isfinite(y)):
        raise overflow_error(y.dtype, what)
    return y


def _step(cache: KVCache, x_new: np.ndarray, w_q, w_k, w_v, x_name: str = "x_new") -> tuple[np.ndarray, int]:
    """One cached step; ``x_name`` is the caller's argument that ``x_new`` comes from, for errors."""
    q = project(x_new, w_q, f"{x_name} @ w_q")  # (..., 1, d_k)
    k = project(x_new, w_k, f"{x_name} @ w_k")  # (..., 1, d_k)
    v = project(x_new, w_v, f"{x_name} @ w_v")  # (..., 1, d_v)
    cache.write(k, v)
    keys, values = cache.keys, cache.values  # (..., s, d_k), (..., s, d_v)
    out = _attend(q, keys, values)  # (..., 1, d_v)
    macs = sum(_macs(x_new.shape, w.shape) for w in (w_q, w_k, w_v)) + _attention_macs(q, keys, values)
    return out, macs


def decode_step(cache: KVCache, x_new, w_q, w_k, w_v) -> np.ndarray:
    r"""One decoding step with a cache: project the new token, append its key and value, attend over all tokens so far.

    .. math:: q = x W_Q, \; K \leftarrow [K; x W_K], \; V \leftarrow [V; x W_V], \;
              o = \operatorname{softmax}(q K^\top / \sqrt{d_k}) V

    Parameters
    ----------
    cache : KVCache
        The keys and values of the tokens decoded so far; one row is appended.
    x_new : array_like
        ``(..., 1, d_model)`` the new token.
    w_q, w_k, w_v : array_like
        As in :func:`attnbook.self_attention`.

    Returns
    -------
    ndarray
        ``(..., 1, d_v)`` the new token's attention output.

    Examples
    --------
    >>> w = np.eye(2)
    >>> cache = KVCache(capacity=3, d_k=2, d_v=2)
    >>> print(decode_step(cache, [[1.0, 0.0]], w, w, w))      # the first token sees only itself
    [[1. 0.]]
    """
    x_new, w_q, w_k, w_v, _, _ = check_projections(x_new, w_q, w_k, w_v, name="x_new")
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}")
    if x_new.shape[-2] != 1:
        raise ValueError(f"x_new has shape {x_new.shape}; a decoding step takes one token, (..., 1, d_model)")
    return _step(cache, x_new, w_q, w_k, w_v)[0]


def decode(x, w_q, w_k, w_v, strategy: str = "cache") -> DecodeResult:
    r"""Decode the tokens ``x`` one step at a time with one causal attention head.

    .. math:: o_s = \operatorname{softmax}\!\left(\frac{q_s K_{1..s}^\top}{\sqrt{d_k}}\right) V_{1..s}, \quad s = 1, \dots, t

    Step ``s`` produces the output of token ``s`` from tokens ``1 .. s`` only; the ``t`` outputs
    equal causal :func:`attnbook.self_attention` over the whole sequence.

    Parameters
    ----------
    x, w_q, w_k, w_v : array_like
        As in :func:`attnbook.self_attention`: ``x`` ``(..., t, d_model)``, the projections.
    strategy : str
        ``"cache"`` (project the new token only, append its key and value, attend once),
        ``"recompute_kv"`` (recompute the prefix's keys and values each step) or ``"recompute_all"``
        (rerun causal self-attention over the prefix each step and keep the last row).

    Returns
    -------
    DecodeResult
        The outputs ``(..., t, d_v)`` and the number of multiply-adds of the matrix products
        performed (projections, ``q k^T`` and ``weights @ v``; the exponentials are not counted).

    Examples
    --------
    >>> decode(np.ones((3, 4)), np.ones((4, 2)), np.ones((4, 2)), np.ones((4, 2))).outputs.shape
    (3, 2)
    >>> decode(np.ones((3, 4)), np.ones((4, 2)), np.ones((4, 2)), np.ones((4, 2)), strategy="fast")
    Traceback (most recent call last):
    ...
    ValueError: strategy must be one of ('cache', 'recompute_kv', 'recompute_all'), got 'fast'
    """
    x, w_q, w_k, w_v, _, _ = check_projections(x, w_q, w_k, w_v)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    t = x.shape[-2]
    dtype = np.result_type(x, w_q, w_k, w_v)
    outputs = np.empty(x.shape[:-1] + (w_v.shape[1],), dtype=dtype)  # (..., t, d_v)
    macs = 0
    cache = KVCache(max(t, 1), w_k.shape[1], w_v.shape[1], x.shape[:-2], dtype) if strategy == "cache" else None
    for s in range(1, t + 1):
        x_new = x[..., s - 1 : s, :]  # (..., 1, d_model)
        if strategy == "cache":
            out, step_macs = _step(cache, x_new, w_q, w_k, w_v, x_name="x")  # (..., 1, d_v)
        elif strategy == "recompute_kv":
            prefix = x[..., :s, :]  # (..., s, d_model)
            q = project(x_new, w_q, "x @ w_q")  # (..., 1, d_k)
            k = project(prefix, w_k, "x @ w_k")  # (..., s, d_k): recomputed for the whole prefix
            v = project(prefix, w_v, "x @ w_v")  # (..., s, d_v)
            out = _attend(q, k, v)  # (..., 1, d_v)
            step_macs = (_macs(x_new.shape, w_q.shape) + _macs(prefix.shape, w_k.shape)
                         + _macs(prefix.shape, w_v.shape) + _attention_macs(q, k, v))
        else:
            prefix = x[..., :s, :]  # (..., s, d_model)
            q = project(prefix, w_q, "x @ w_q")  # (..., s, d_k)
            k = project(prefix, w_k, "x @ w_k")  # (..., s, d_k)
            v = project(prefix, w_v, "x @ w_v")  # (..., s, d_v)
            out = _attend(q, k, v, np.tri(s, dtype=bool))[..., -1:, :]  # (..., 1, d_v): causal, last row
            step_macs = sum(_macs(prefix.shape, w.shape) for w in (w_q, w_k, w_v)) + _attention_macs(q, k, v)
        outputs[..., s - 1 : s, :] = out
        macs += step_macs
    return DecodeResult(outputs, int(macs))
