"""Tiled attention (FlashAttention-style): exact attention without ever holding the n_q x n_k weights.

Each ``(block_q, block_k)`` tile of scores is folded into the online softmax
(:mod:`attnbook.efficient.online_softmax`) and thrown away; tiles the mask forbids are skipped (:func:`tile_plan`).

>>> import numpy as np
>>> from attnbook import scaled_dot_product_attention
>>> rng = np.random.default_rng(0)
>>> q, k, v = rng.standard_normal((3, 2, 10, 4))                  # each (heads, n, d)
>>> out = tiled_attention(q, k, v, causal=True, block_q=3, block_k=4)
>>> out.shape
(2, 10, 4)
>>> from attnbook import causal_mask
>>> bool(np.allclose(out, scaled_dot_product_attention(q, k, v, mask=causal_mask(10)).output))
True
"""

from __future__ import annotations

import numpy as np

from ..attention import check_attention_inputs
from ..masks import check_causal, check_mask
from ..validation import check_positive_int, overflow_error
from .online_softmax import OnlineSoftmaxState, finish, fold, start_state

__all__ = ["SKIPPED", "PARTIAL", "FULL", "tile_plan", "tiled_attention"]

SKIPPED, PARTIAL, FULL = 0, 1, 2  # tile_plan's codes: no allowed pair / some allowed / all allowed


def _mask_tile(mask: np.ndarray, rows: slice, cols: slice) -> np.ndarray:
    """The tile ``mask[..., rows, cols]`` of a mask whose last two axes may be broadcast (size 1)."""
    rows = rows if mask.shape[-2] > 1 else slice(None)
    cols = cols if mask.shape[-1] > 1 else slice(None)
    return mask[..., rows, cols]  # (..., block_q | 1, block_k | 1)


def causal_tile(rows: slice, cols: slice, offset: int) -> np.ndarray:
    """Unchecked kernel: the causal mask of one tile, query i sees key j when j <= i + offset (offset = n_k - n_q).

    >>> causal_tile(slice(0, 2), slice(1, 3), 0).astype(int).tolist()
    [[0, 0], [1, 0]]
    """
    query_pos = np.arange(rows.start, rows.stop)[:, None] + offset  # (block_q, 1)
    key_pos = np.arange(cols.start, cols.stop)[None, :]  # (1, block_k)
    return key_pos <= query_pos  # (block_q, block_k)


def _checked_blocks(n_q: int, n_k: int, block_q, block_k, causal) -> tuple[int, int, bool]:
    block_q = check_positive_int(block_q, "block_q")
    block_k = check_positive_int(block_k, "block_k")
    return block_q, block_k, check_causal(causal, n_q, n_k)


def _plan(n_q: int, n_k: int, block_q: int, block_k: int, causal: bool, mask) -> np.ndarray:
    tiles_q, tiles_k = -(-n_q // block_q), -(-n_k // block_k)
    plan = np.full((tiles_q, tiles_k), FULL, dtype=np.int8)  # (tiles_q, tiles_k)
    offset = n_k - n_q
    for a in range(tiles_q):
        rows = slice(a * block_q, min((a + 1) * block_q, n_q))
        for b in range(tiles_k):
            cols = slice(b * block_k, min((b + 1) * block_k, n_k))
            if causal:
                if cols.start > rows.stop - 1 + offset:  # the first key is after the last query's horizon
                    plan[a, b] = SKIPPED
                    continue
                if cols.stop - 1 > rows.start + offset:  # the last key is after the first query's horizon
                    plan[a, b] = PARTIAL
            if mask is not None:
                tile = _mask_tile(mask, rows, cols)  # (..., block_q | 1, block_k | 1)
                if causal and plan[a, b] == PARTIAL:
                    tile = tile & causal_tile(rows, cols, offset)  # (..., block_q, block_k)
                if not tile.any():
                    plan[a, b] = SKIPPED
                elif not tile.all():
                    plan[a, b] = PARTIAL
    return plan


def tile_plan(n_q: int, n_k: int, block_q: int, block_k: int, causal: bool = False, mask=None) -> np.ndarray:
    r"""Which tiles :func:`tiled_attention` computes: an int8 array ``(ceil(n_q/block_q), ceil(n_k/block_k))``.

    .. math:: P_{ab} \in \{\text{SKIPPED}, \text{PARTIAL}, \text{FULL}\}

    Entry ``[a, b]``, for query block ``a`` and key block ``b``: ``SKIPPED`` (0) when no pair is allowed
    in any batch entry, ``FULL`` (2) when every pair is allowed in every one, else ``PARTIAL`` (1).

    Parameters
    ----------
    n_q, n_k : int
        Numbers of queries and keys.
    block_q, block_k, causal, mask
        As in :func:`tiled_attention`.

    Returns
    -------
    ndarray of int8
        The plan.

    Examples
    --------
    >>> tile_plan(6, 6, 2, 2, causal=True).tolist()
    [[1, 0, 0], [2, 1, 0], [2, 2, 1]]
    >>> tile_plan(5, 5, 2, 3).tolist()
    [[2, 2], [2, 2], [2, 2]]
    """
    n_q = check_positive_int(n_q, "n_q", minimum=0)
    n_k = check_positive_int(n_k, "n_k", minimum=0)
    block_q, block_k, causal = _checked_blocks(n_q, n_k, block_q, block_k, causal)
    if mask is not None:
        mask = check_mask(mask, n_q, n_k)  # (..., n_q | 1, n_k | 1)
    return _plan(n_q, n_k, block_q, block_k, causal, mask)


def tiled_attention(q, k, v, mask=None, scale=None, *, causal: bool = False, block_q: int = 128,
                    block_k: int = 1024) -> np.ndarray:
    r"""Exact scaled dot-product attention, computed tile by tile; returns the output ``(..., n_q, d_v)``.

    .. math:: O_{I} = \sum_{J} \operatorname{fold}\big(\text{scale}\, Q_I K_J^\top,\; V_J\big)
              \text{ over key blocks } J, \text{ for each query block } I

    It returns no weights: never forming the ``(..., n_q, n_k)`` weight matrix is the point.

    Parameters
    ----------
    q, k, v, mask, scale
        As in :func:`attnbook.scaled_dot_product_attention`.
    causal : bool
        Also apply the causal mask of :func:`attnbook.causal_mask` (made tile by tile).
    block_q, block_k : int
        Rows per query block and per key block; any positive sizes (they need not divide ``n_q`` or
        ``n_k``).

    Returns
    -------
    ndarray
        ``(..., n_q, d_v)``, the output of :func:`attnbook.scaled_dot_product_attention` up to rounding.

    See Also
    --------
    attnbook.scaled_dot_product_attention

    Examples
    --------
    >>> out = tiled_attention(np.eye(2), 2 * np.eye(2), np.eye(2), block_q=1, block_k=1)
    >>> print(np.round(out, 4))
    [[0.8044 0.1956]
     [0.1956 0.8044]]
    >>> tiled_attention(np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2)), block_k=0)
    Traceback (most recent call last):
    ...
    ValueError: block_k must be at least 1, got 0
    """
    q, k, v, mask, factor = check_attention_inputs(q, k, v, mask, scale)  # at least float32, as the reference
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    block_q, block_k, causal = _checked_blocks(n_q, n_k, block_q, block_k, causal)
    shapes = [q.shape[:-2], k.shape[:-2], v.shape[:-2]] + ([] if mask is None else [mask.shape[:-2]])
    batch = tuple(np.broadcast_shapes(*shapes))
    dtype = q.dtype
    plan = _plan(n_q, n_k, block_q, block_k, causal, mask)  # (tiles_q, tiles_k)
    offset = n_k - n_q
    output = np.empty(batch + (n_q, d_v), dtype=dtype)  # (..., n_q, d_v)
    for a, i0 in enumerate(range(0, n_q, block_q)):
        rows = slice(i0, min(i0 + block_q, n_q))
        q_block = q[..., rows, :] * np.asarray(factor, dtype=dtype)  # (..., block_q, d_k), pre-scaled
        state = start_state(batch + (rows.stop - rows.start,), d_v, dtype)  # (..., block_q, 1 | d_v)
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected below, once per query block
            for b, j0 in enumerate(range(0, n_k, block_k)):
                if plan[a, b] == SKIPPED:
                    continue
                cols = slice(j0, min(j0 + block_k, n_k))
                scores = q_block @ np.swapaxes(k[..., cols, :], -1, -2)  # (..., block_q, block_k)
                allowed = None
                if plan[a, b] == PARTIAL:
                    allowed = True
                    if mask is not None:
                        allowed = _mask_tile(mask, rows, cols)  # (..., block_q | 1, block_k | 1)
                    if causal:
                        allowed = allowed & causal_tile(rows, cols, offset)  # (..., block_q, block_k)
                state = fold(state, scores, v[..., cols, :], allowed)  # scores is overwritten
        _refuse_overflow(state, v, rows, n_k, offset, causal, mask)
        output[..., rows, :] = finish(state)  # (..., block_q, d_v)
    return output


def _refuse_overflow(state: OnlineSoftmaxState, v: np.ndarray, rows: slice, n_k: int, offset: int,
                     causal: bool, mask) -> None:
    """Raise, as :func:`attnbook.scaled_dot_product_attention` does, when the scores of a block of
    queries overflowed: a running maximum that is NaN or ``+inf``, or ``-inf`` in a row that may attend
    to some key (all its scores overflowed to ``-inf``; ``-inf`` in a row with no allowed key just means
    fully masked). Raise too when the unnormalised weighted sum of ``v`` overflowed."""
    m = state.max  # (..., block_q, 1)
    if not np.all(np.isfinite(m)):
        lost = np.isnan(m) | np.isposinf(m)  # (..., block_q, 1)
        if np.any(np.isneginf(m)):
            every = slice(0, n_k)
            allowed = np.ones((rows.stop - rows.start, n_k), dtype=bool)  # (block_q, n_k)
            if mask is not None:
                allowed = allowed & _mask_tile(mask, rows, every)  # (..., block_q, n_k)
            if causal:
                allowed = allowed & causal_tile(rows, every, offset)  # (..., block_q, n_k)
            lost = lost | (np.isneginf(m) & allowed.any(axis=-1, keepdims=True))  # (..., block_q, 1)
        if np.any(lost):
            raise overflow_error(m.dtype)
    if not np.all(np.isfinite(state.output)):
        raise ValueError(
            f"the weighted sum of v overflowed in {v.dtype} before normalisation (v holds values up to "
            f"{float(np.abs(v).max()):.3g} in absolute value); scale v down or compute in float64"
        )
