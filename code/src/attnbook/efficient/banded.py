"""Banded attention computed from the band alone: ``O(n w)`` scores instead of ``O(n^2)``.

A banded mask (:func:`attnbook.banded_mask`) applied as a mask saves nothing; :func:`banded_attention`
computes only the ``2 window + 1`` scores around each query.

>>> import numpy as np
>>> from attnbook import banded_mask, scaled_dot_product_attention
>>> x = np.random.default_rng(0).standard_normal((6, 4))          # (n, d)
>>> out, band = banded_attention(x, x, x, window=1)
>>> bool(np.allclose(out, scaled_dot_product_attention(x, x, x, mask=banded_mask(6, 1)).output))
True
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..attention import AttentionResult, check_qkv, check_scale
from ..softmax import softmax_rows
from ..validation import broadcast_batch_shapes, check_bool, check_positive_int

__all__ = ["banded_attention"]


def banded_attention(q, k, v, window: int, causal: bool = False, scale=None) -> AttentionResult:
    """Self-attention restricted to the band ``|i - j| <= window``, computing only the band.

    Equal to ``scaled_dot_product_attention(q, k, v, mask=banded_mask(n, window, causal))``, in
    ``O(n w)`` work and memory instead of ``O(n^2)``.

    Parameters
    ----------
    q, k, v
        As in :func:`attnbook.scaled_dot_product_attention`, one sequence (the same ``n``).
    window, causal
        As in :func:`attnbook.banded_mask`.
    scale : float, optional
        As in :func:`attnbook.scaled_dot_product_attention`.

    Returns
    -------
    AttentionResult
        ``output`` ``(..., n, d_v)`` and ``band_weights`` ``(..., n, 2 window + 1)``, where
        ``band_weights[..., i, window + (j - i)]`` is the weight of query ``i`` on key ``j``; slots
        that fall outside the sequence (or in the future, when causal) hold 0.

    Examples
    --------

    >>> out, band = banded_attention(np.eye(3), np.eye(3), np.eye(3), window=1, scale=1.0)
    >>> print(np.round(band, 4))
    [[0.     0.7311 0.2689]
     [0.2119 0.5761 0.2119]
     [0.2689 0.7311 0.    ]]
    >>> banded_attention(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 2)), window=1)
    Traceback (most recent call last):
    ...
    ValueError: q has shape (3, 2) but k has shape (4, 2); banded self-attention needs the same number of positions n
    """
    q, k, v = check_qkv(q, k, v)  # (..., n, d_k), (..., n, d_k), (..., n, d_v), at least float32
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(f"q has shape {q.shape} but k has shape {k.shape}; "
                         "banded self-attention needs the same number of positions n")
    broadcast_batch_shapes({"q": q.shape[:-2], "k": k.shape[:-2], "v": v.shape[:-2]})
    window = check_positive_int(window, "window", minimum=0)
    causal = check_bool(causal, "causal")
    scale = check_scale(scale, q.shape[-1])
    n, width = q.shape[-2], 2 * window + 1
    pad = [(0, 0)] * (k.ndim - 2) + [(window, window), (0, 0)]
    k_win = sliding_window_view(np.pad(k, pad), width, axis=-2)  # (..., n, d_k, 2w + 1)
    pad = [(0, 0)] * (v.ndim - 2) + [(window, window), (0, 0)]
    v_win = sliding_window_view(np.pad(v, pad), width, axis=-2)  # (..., n, d_v, 2w + 1)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected below
        scores = np.einsum("...id,...idw->...iw", q, k_win) * q.dtype.type(scale)  # (..., n, 2w + 1)
    offsets = np.arange(-window, window + 1)  # (2w + 1,): j - i for each slot
    key_pos = np.arange(n)[:, None] + offsets[None, :]  # (n, 2w + 1)
    inside = (key_pos >= 0) & (key_pos < n)  # (n, 2w + 1)
    if causal:
        inside = inside & (offsets[None, :] <= 0)  # (n, 2w + 1)
    # an overflow is refused as in scaled_dot_product_attention (every row has itself in its band)
    band = softmax_rows(scores, inside)  # (..., n, 2w + 1)
    output = np.einsum("...iw,...idw->...id", band, v_win)  # (..., n, d_v)
    return AttentionResult(output, band)
