"""The fast path of scaled dot-product attention for large batches: chunks that fit in cache, rows on every core.

The batch is flattened to ``(B, rows, cols)`` and worked through in chunks of about ``2**22`` scores,
the softmax written in place and split by rows over the cores (:func:`softmax_rows_in_place`).

>>> import numpy as np
>>> from attnbook import scaled_dot_product_attention
>>> rng = np.random.default_rng(0)
>>> q, k, v = rng.standard_normal((3, 2, 4, 6, 8))                 # each (batch, heads, n, d)
>>> fast, reference = batched_attention(q, k, v), scaled_dot_product_attention(q, k, v)
>>> bool(np.array_equal(fast.weights, reference.weights))
True
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..attention import AttentionResult, check_attention_inputs
from ..softmax import softmax_rows

__all__ = ["batched_attention", "softmax_rows_in_place"]

CHUNK_SCORES = 1 << 22  # scores per chunk of the batch: the softmax passes over a chunk run in cache
PARALLEL_FROM = 1 << 18  # below this many entries, handing rows to threads costs more than it saves
_POOL: list[ThreadPoolExecutor] = []


def batched_attention(q, k, v, mask=None, scale=None) -> AttentionResult:
    """:func:`attnbook.scaled_dot_product_attention`, computed in cache-sized chunks on every core.

    Parameters
    ----------
    q, k, v, mask, scale
        As in :func:`attnbook.scaled_dot_product_attention`.

    Returns
    -------
    AttentionResult
        ``output`` ``(..., n_q, d_v)`` and ``weights`` ``(..., n_q, n_k)``, equal to the reference's.

    Examples
    --------
    >>> out, w = batched_attention(np.ones((2, 3, 4)), np.ones((2, 5, 4)), np.ones((2, 5, 6)))
    >>> out.shape, w.shape
    ((2, 3, 6), (2, 3, 5))
    """
    q, k, v, mask, scale = check_attention_inputs(q, k, v, mask, scale)  # once, at the boundary
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    shapes = [q.shape[:-2], k.shape[:-2], v.shape[:-2]] + ([] if mask is None else [mask.shape[:-2]])
    batch = tuple(np.broadcast_shapes(*shapes))
    n_batch = math.prod(batch)
    weights = np.empty(batch + (n_q, n_k), dtype=q.dtype)  # (..., n_q, n_k)
    output = np.empty(batch + (n_q, d_v), dtype=q.dtype)  # (..., n_q, d_v)
    flat_q = flatten_batch(q * q.dtype.type(scale), batch)  # (B, n_q, d_k), pre-scaled as in attend
    flat_k = flatten_batch(k, batch)  # (B, n_k, d_k)
    flat_v = flatten_batch(v, batch)  # (B, n_k, d_v)
    flat_w = weights.reshape(n_batch, n_q, n_k)  # (B, n_q, n_k), a view
    flat_o = output.reshape(n_batch, n_q, d_v)  # (B, n_q, d_v), a view
    flat_m = None if mask is None else np.broadcast_to(mask, batch + (n_q, n_k)).reshape(n_batch, n_q, n_k)
    step = max(1, CHUNK_SCORES // max(1, n_q * n_k))  # batch entries per chunk
    for start in range(0, n_batch, step):
        part = slice(start, start + step)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused by the softmax
            scores = np.matmul(flat_q[part], np.swapaxes(flat_k[part], -1, -2), out=flat_w[part])  # (b, n_q, n_k)
        softmax_rows_in_place(scores, None if flat_m is None else flat_m[part])  # (b, n_q, n_k)
        np.matmul(scores, flat_v[part], out=flat_o[part])  # (b, n_q, d_v); n_k = 0 gives zeros
    return AttentionResult(output, weights_of(weights, shapes[:2] + shapes[3:]))


def weights_of(weights: np.ndarray, shapes: list) -> np.ndarray:
    """Unchecked kernel: the weights without the batch dimensions that only ``v`` brought.

    The weights depend on ``q``, ``k`` and the mask alone, so the reference returns them over the
    batch shape of those three; a batch dimension that only ``v`` has holds copies, and one is kept.

    >>> weights_of(np.zeros((2, 3, 1, 1)), [(3,), (1,)]).shape
    (3, 1, 1)
    """
    own = tuple(np.broadcast_shapes(*shapes))  # the batch shape of q, k and the mask
    batch = weights.shape[:-2]
    if own == batch:
        return weights
    index = (0,) * (len(batch) - len(own)) + tuple(slice(0, 1) if size == 1 else slice(None) for size in own)
    return np.ascontiguousarray(weights[index])  # (*own, n_q, n_k)


def flatten_batch(x: np.ndarray, batch: tuple[int, ...]) -> np.ndarray:
    """Unchecked kernel: ``x`` broadcast to the batch shape and flattened to ``(B, rows, cols)``.

    >>> flatten_batch(np.ones((1, 2, 3)), (4,)).shape
    (4, 2, 3)
    """
    full = np.broadcast_to(x, batch + x.shape[-2:])  # (..., rows, cols)
    return full.reshape((math.prod(batch),) + x.shape[-2:])  # (B, rows, cols); copies only when broadcasting


def softmax_rows_in_place(scores: np.ndarray, allowed=None) -> None:
    """Overwrite ``scores`` ``(..., rows, n)`` with its softmax along the last axis, rows split over the cores.

    The same numbers as :func:`attnbook.softmax` (its kernel on each share of the rows).

    Parameters
    ----------
    scores : ndarray
        ``(..., rows, n)`` float scores, overwritten.
    allowed : ndarray of bool, optional
        Broadcasting to ``scores``; False = weight 0.

    Returns
    -------
    None

    Examples
    --------
    >>> s = np.array([[1000.0, 1000.0], [0.0, np.log(3.0)]])
    >>> softmax_rows_in_place(s)
    >>> print(s)
    [[0.5  0.5 ]
     [0.25 0.75]]
    """
    workers = worker_count()
    if workers > 1 and scores.ndim >= 2 and scores.size >= PARALLEL_FROM and scores.shape[-2] >= workers:
        if allowed is not None:
            allowed = np.broadcast_to(allowed, scores.shape)  # (..., rows, n)
        cuts = np.linspace(0, scores.shape[-2], workers + 1).astype(int)  # (workers + 1,)
        jobs = [(scores[..., a:b, :], None if allowed is None else allowed[..., a:b, :])
                for a, b in zip(cuts[:-1], cuts[1:])]
        list(_pool().map(lambda job: softmax_rows(*job), jobs))
    else:
        softmax_rows(scores, allowed)


def worker_count() -> int:
    """Unchecked kernel: how many threads the softmax uses, at most 4 and at most the usable cores.

    >>> 1 <= worker_count() <= 4
    True
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    return min(4, cores)


def _pool() -> ThreadPoolExecutor:
    """The shared thread pool, started on first use (in each process: see ``_forget_pool_after_fork``)."""
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(max_workers=worker_count(), thread_name_prefix="attnbook-softmax"))
    return _POOL[0]


def _forget_pool_after_fork() -> None:
    """In a forked child, drop the parent's pool: its worker threads were not copied by ``fork``, so
    work handed to it would wait forever (``multiprocessing`` and data loaders fork). The child starts
    its own pool on first use."""
    _POOL.clear()


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere there is no fork to survive
    os.register_at_fork(after_in_child=_forget_pool_after_fork)
