"""Counts of the KV cache: the bytes it holds and the multiply-adds of decoding with and without it.

The cache itself, and decoding with it, live in :mod:`attnbook.efficient.kv_cache`.

>>> decode_multiply_adds(5, 8, 4, 4, "cache"), kv_cache_bytes(1, 1, 1, 1)
(600, 4)
"""

from __future__ import annotations

import math

from .efficient.kv_cache import STRATEGIES
from .validation import check_positive_int

__all__ = ["decode_multiply_adds", "kv_cache_bytes"]


def decode_multiply_adds(t: int, d_model: int, d_k: int, d_v: int, strategy: str = "cache",
                         batch: int = 1) -> int:
    """Closed form of :func:`decode`'s multiply-add count for ``t`` tokens (``batch`` sequences).

    With ``P = d_model (2 d_k + d_v)`` (the projections of one token) and ``T2 = t (t + 1) / 2``:

    * cache: ``t P + (d_k + d_v) T2``, about ``(d_k + d_v) t^2 / 2`` for long sequences;
    * recompute_kv: ``t d_model d_k + (d_model (d_k + d_v) + d_k + d_v) T2``;
    * recompute_all: ``P T2 + (d_k + d_v) t (t + 1) (2 t + 1) / 6``, about ``(d_k + d_v) t^3 / 3``.

    >>> decode_multiply_adds(5, 8, 4, 4, "cache"), decode_multiply_adds(5, 8, 4, 4, "recompute_all")
    (600, 1880)
    """
    t = check_positive_int(t, "t", minimum=0)
    d_model = check_positive_int(d_model, "d_model")
    d_k = check_positive_int(d_k, "d_k")
    d_v = check_positive_int(d_v, "d_v")
    batch = check_positive_int(batch, "batch", minimum=0)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    per_token = d_model * (2 * d_k + d_v)
    pairs = t * (t + 1) // 2  # sum of s for s = 1 .. t
    squares = t * (t + 1) * (2 * t + 1) // 6  # sum of s^2 for s = 1 .. t
    if strategy == "cache":
        count = t * per_token + (d_k + d_v) * pairs
    elif strategy == "recompute_kv":
        count = t * d_model * d_k + (d_model * (d_k + d_v) + d_k + d_v) * pairs
    else:
        count = per_token * pairs + (d_k + d_v) * squares
    return batch * count


def kv_cache_bytes(n_tokens: int, n_layers: int, n_heads: int, d_head: int, itemsize: int = 2,
                   batch: int = 1) -> int:
    """Bytes a KV cache holds: a key and a value of ``d_head`` numbers per token, head and layer.

    ``2 * batch * n_layers * n_heads * n_tokens * d_head * itemsize`` (itemsize 2 for float16).

    >>> kv_cache_bytes(n_tokens=1024, n_layers=12, n_heads=12, d_head=64) / 2**20   # MiB
    36.0
    """
    sizes = {"n_tokens": n_tokens, "n_layers": n_layers, "n_heads": n_heads, "d_head": d_head,
             "itemsize": itemsize, "batch": batch}
    checked = {name: check_positive_int(value, name, minimum=0 if name == "n_tokens" else 1)
               for name, value in sizes.items()}
    return 2 * math.prod(checked.values())
