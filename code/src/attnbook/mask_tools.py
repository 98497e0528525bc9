"""Tools around boolean masks: additive masks, fully masked rows, band sizes, and banded attention.

The package's masks are boolean, True = the query may attend to that key (``attnbook.masks``).
Papers and most libraries write masks *additively* instead: a bias of 0 where attention is allowed
and ``-inf`` where it is not, added to the scores before the softmax. This module converts between
the two, shows what a softmax without this package's rule for fully masked rows does (it returns
NaN), and computes banded attention from the band alone, with
``O(n w)`` scores instead of ``O(n^2)``.

>>> import numpy as np
>>> from attnbook import causal_mask
>>> additive_mask(causal_mask(3)).tolist()
[[0.0, -inf, -inf], [0.0, 0.0, -inf], [0.0, 0.0, 0.0]]
>>> mask_from_additive(additive_mask(causal_mask(3))).astype(int).tolist()
[[1, 0, 0], [1, 1, 0], [1, 1, 1]]
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .attention import AttentionResult
from .softmax import _scores_overflowed, softmax
from .validation import (
    as_bool_mask,
    as_float_array,
    broadcast_batch_shapes,
    check_axis,
    check_min_ndim,
    check_positive_int,
)

__all__ = [
    "additive_mask",
    "banded_attention",
    "fully_masked_rows",
    "mask_from_additive",
    "plain_softmax",
]


def additive_mask(mask, fill: float = -np.inf, dtype=np.float64) -> np.ndarray:
    """The additive form of a boolean ``mask``: 0 where True (may attend), ``fill`` where False.

    ``softmax(scores + additive_mask(mask))`` equals ``softmax(scores, mask=mask)`` on every row with
    at least one allowed key. ``fill`` must be negative: ``-inf`` (the default, exact) or a large
    finite number such as ``-1e9`` (approximate, and a fully masked row then gets the weights of
    the *unmasked* row, since adding a constant to a whole row does not change its softmax).

    >>> additive_mask([[True, False]], fill=-1e9).tolist()
    [[0.0, -1000000000.0]]
    >>> additive_mask([[True, False]], fill=0.0)
    Traceback (most recent call last):
    ...
    ValueError: fill must be a negative number or -inf (the bias of a masked pair), got 0.0
    """
    mask = as_bool_mask(mask)  # (..., n_q, n_k)
    if isinstance(fill, bool) or not isinstance(fill, (int, float, np.integer, np.floating)):
        raise TypeError(f"fill must be a real number (the bias of a masked pair), got {fill!r}")
    if math.isnan(fill) or not fill < 0:
        raise ValueError(f"fill must be a negative number or -inf (the bias of a masked pair), got {fill!r}")
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"dtype must be a floating-point type (the mask is added to scores), got {dtype}")
    return np.where(mask, dtype.type(0), dtype.type(fill))  # (..., n_q, n_k)


def mask_from_additive(bias) -> np.ndarray:
    """The boolean mask of an additive one: True where ``bias`` is finite, False where it is ``-inf``.

    Any finite bias (0, or a learned or positional bias) counts as allowed; only ``-inf`` excludes
    a pair. NaN and ``+inf`` are refused.

    >>> mask_from_additive([[0.0, -np.inf, -2.5]]).tolist()
    [[True, False, True]]
    >>> mask_from_additive([[0.0, np.inf]])
    Traceback (most recent call last):
    ...
    ValueError: bias contains +inf at index (0, 1); attention inputs must be finite numbers
    """
    bias = as_float_array(bias, "bias", allow_neg_inf=True)  # (..., n_q, n_k)
    return ~np.isneginf(bias)  # (..., n_q, n_k)


def plain_softmax(x, axis: int = -1) -> np.ndarray:
    """Softmax as the textbook formula computes it, with no special rule for fully masked slices.

    ``exp(x - max) / sum(exp(x - max))`` along ``axis``. Logits of ``-inf`` get weight 0, like in
    :func:`attnbook.softmax`; but a slice whose logits are *all* ``-inf`` comes out as NaN, because
    its maximum is ``-inf`` and ``-inf - (-inf)`` is NaN (without the shift it would be ``0/0``).
    This is what ``torch.softmax`` and most frameworks' plain softmax return. Floating-point warnings
    are silenced: the NaN is the documented result, not an accident.

    >>> print(plain_softmax([[0.0, np.log(3.0)], [-np.inf, -np.inf]]))
    [[0.25 0.75]
     [ nan  nan]]
    """
    logits = as_float_array(x, "x", allow_neg_inf=True)  # (..., n, ...)
    if logits.ndim == 0:
        raise ValueError("x is a scalar; softmax needs at least one dimension to normalise over")
    axis = check_axis(axis, logits.ndim)
    with np.errstate(invalid="ignore", divide="ignore"):
        shifted = logits - logits.max(axis=axis, keepdims=True)  # (..., n, ...); NaN on all -inf slices
        exps = np.exp(shifted)  # (..., n, ...)
        return exps / exps.sum(axis=axis, keepdims=True)  # (..., n, ...)


def fully_masked_rows(mask) -> np.ndarray:
    """Which queries have no allowed key at all: ``~mask.any(axis=-1)``, shape ``mask.shape[:-1]``.

    By the package's convention such a query gets all-zero weights and a zero output.

    >>> fully_masked_rows([[False, False], [True, False]]).tolist()
    [True, False]
    >>> fully_masked_rows([True, False])
    Traceback (most recent call last):
    ...
    ValueError: mask has shape (2,) but needs at least 2 dimensions, laid out as (..., n_q, n_k)
    """
    mask = as_bool_mask(mask)  # (..., n_q, n_k)
    check_min_ndim(mask, "mask", 2, "(..., n_q, n_k)")
    return ~mask.any(axis=-1)  # (..., n_q)


def banded_attention(q, k, v, window: int, causal: bool = False, scale=None) -> AttentionResult:
    """Self-attention restricted to the band ``|i - j| <= window``, computing only the band.

    Equal to ``scaled_dot_product_attention(q, k, v, mask=banded_mask(n, window, causal))``, but
    the scores are computed for the ``2 window + 1`` keys around each query only: ``O(n w)`` work
    and memory instead of ``O(n^2)``. (A mask alone saves nothing: the full score matrix is still
    computed, and then most of it is thrown away.)

    Parameters
    ----------
    q, k : ``(..., n, d_k)`` queries and keys of one sequence (self-attention: the same ``n``).
    v : ``(..., n, d_v)`` values.
    window : how many neighbours on each side a query sees (0 = only itself).
    causal : keep only the past half of the band, ``i - window <= j <= i``.
    scale : factor applied to ``q k^T``; default ``1/sqrt(d_k)``.

    Returns ``(output (..., n, d_v), band_weights (..., n, 2 window + 1))``, where
    ``band_weights[..., i, window + (j - i)]`` is the weight of query ``i`` on key ``j``; slots
    that fall outside the sequence (or in the future, when causal) hold 0.

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
    q = as_float_array(q, "q")  # (..., n, d_k)
    k = as_float_array(k, "k")  # (..., n, d_k)
    v = as_float_array(v, "v")  # (..., n, d_v)
    check_min_ndim(q, "q", 2, "(..., n, d_k)")
    check_min_ndim(k, "k", 2, "(..., n, d_k)")
    check_min_ndim(v, "v", 2, "(..., n, d_v)")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q has shape {q.shape} but k has shape {k.shape}; the last dimensions (d_k) must match")
    if q.shape[-1] == 0:
        raise ValueError(f"q and k have d_k = 0 (shapes {q.shape}, {k.shape}); d_k must be at least 1")
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(f"q has shape {q.shape} but k has shape {k.shape}; "
                         "banded self-attention needs the same number of positions n")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k has shape {k.shape} but v has shape {v.shape}; "
                         "k and v must have the same number of positions n")
    broadcast_batch_shapes({"q": q.shape[:-2], "k": k.shape[:-2], "v": v.shape[:-2]})
    window = check_positive_int(window, "window", minimum=0)
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    elif isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise TypeError(f"scale must be a real number, got {scale!r}")
    elif not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    dtype = np.result_type(q, k, v, np.float32)
    q, k, v = (a.astype(dtype, copy=False) for a in (q, k, v))
    n, width = q.shape[-2], 2 * window + 1
    pad = [(0, 0)] * (k.ndim - 2) + [(window, window), (0, 0)]
    k_win = sliding_window_view(np.pad(k, pad), width, axis=-2)  # (..., n, d_k, 2w + 1)
    pad = [(0, 0)] * (v.ndim - 2) + [(window, window), (0, 0)]
    v_win = sliding_window_view(np.pad(v, pad), width, axis=-2)  # (..., n, d_v, 2w + 1)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected below
        scores = np.einsum("...id,...idw->...iw", q, k_win) * dtype.type(scale)  # (..., n, 2w + 1)
    offsets = np.arange(-window, window + 1)  # (2w + 1,): j - i for each slot
    key_pos = np.arange(n)[:, None] + offsets[None, :]  # (n, 2w + 1)
    inside = (key_pos >= 0) & (key_pos < n)  # (n, 2w + 1)
    if causal:
        inside = inside & (offsets[None, :] <= 0)  # (n, 2w + 1)
    if not np.all(np.isfinite(scores)):
        # as scaled_dot_product_attention: NaN or +inf among a row's scores, or a row whose scores all
        # overflowed to -inf (every row has at least itself in its band), is an error; an isolated
        # -inf is a score so low that its weight is 0
        row_max = np.where(inside, scores, -np.inf).max(axis=-1)  # (..., n)
        if np.any(np.isnan(row_max) | np.isinf(row_max)):
            raise _scores_overflowed(dtype)
    band = softmax(scores, axis=-1, mask=inside)  # (..., n, 2w + 1)
    output = np.einsum("...iw,...idw->...id", band, v_win)  # (..., n, d_v)
    return AttentionResult(output, band)
