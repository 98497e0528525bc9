"""Boolean attention masks (True = the query may attend to that key), and their additive form.

:func:`additive_mask` and :func:`mask_from_additive` convert to and from the additive form papers use;
:func:`plain_softmax` returns NaN on the fully masked rows :func:`fully_masked_rows` finds.

>>> causal_mask(3).astype(int).tolist()
[[1, 0, 0], [1, 1, 0], [1, 1, 1]]
>>> additive_mask(causal_mask(3)).tolist()
[[0.0, -inf, -inf], [0.0, 0.0, -inf], [0.0, 0.0, 0.0]]
>>> mask_from_additive(additive_mask(causal_mask(3))).astype(int).tolist()
[[1, 0, 0], [1, 1, 0], [1, 1, 1]]
"""

from __future__ import annotations

import math

import numpy as np

from .softmax import check_logits
from .validation import as_bool_mask, as_float_array, broadcast_batch_shapes, check_bool, check_min_ndim, check_positive_int

__all__ = [
    "additive_mask",
    "banded_mask",
    "causal_mask",
    "check_causal",
    "check_head_batches",
    "check_head_mask",
    "check_mask",
    "fully_masked_rows",
    "graph_mask",
    "mask_from_additive",
    "padding_mask",
    "plain_softmax",
]


def causal_mask(n_q: int, n_k: int | None = None) -> np.ndarray:
    r"""Mask that lets query ``i`` see key ``j`` only when ``j`` is not in its future.

    .. math:: M_{ij} = [\, j \le i + (n_k - n_q) \,]

    Parameters
    ----------
    n_q : int
        Number of queries.
    n_k : int, optional
        Number of keys; default ``n_q`` (a square mask, True on and below the diagonal). With
        ``n_k > n_q`` (new queries appended to a longer context, as when decoding with a cache) the
        queries are aligned with the *last* ``n_q`` keys: query ``i`` sees keys ``0 .. i + n_k - n_q``.

    Returns
    -------
    ndarray of bool
        ``(n_q, n_k)``, True where the query may attend.

    Examples
    --------
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
    r"""Key mask for a batch of sequences padded to a common length ``n``: shape ``(batch, 1, n)``.

    .. math:: M_{b0j} = [\, j < \text{lengths}_b \,]

    The middle axis broadcasts over the queries. Padded *queries* still attend; the loss ignores them.

    Parameters
    ----------
    lengths : sequence of int
        The real length of each sequence, each at least 1.
    n : int, optional
        The padded length; default ``max(lengths)``.

    Returns
    -------
    ndarray of bool
        ``(batch, 1, n)``, True where position ``j`` is a real token of sequence ``b``.

    Examples
    --------
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
    r"""Truncated (banded) self-attention: query ``i`` sees keys ``j`` with ``|i - j| <= window``.

    .. math:: M_{ij} = [\, |i - j| \le w \,] \quad\text{or, causal,}\quad [\, i - w \le j \le i \,]

    Parameters
    ----------
    n : int
        Sequence length.
    window : int
        How many neighbours on each side a query sees (0 = only itself).
    causal : bool
        Keep only the past part of the band.

    Returns
    -------
    ndarray of bool
        ``(n, n)``.

    Examples
    --------
    >>> banded_mask(4, 1).astype(int).tolist()
    [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]]
    >>> banded_mask(3, 1, causal=True).astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [0, 1, 1]]
    """
    n = check_positive_int(n, "n")
    window = check_positive_int(window, "window", minimum=0)
    causal = check_bool(causal, "causal")
    offset = np.arange(n)[None, :] - np.arange(n)[:, None]  # (n, n): j - i
    band = np.abs(offset) <= window  # (n, n)
    return band & (offset <= 0) if causal else band


def graph_mask(adjacency, self_loops: bool = True) -> np.ndarray:
    r"""Attention restricted to the edges of a graph: node ``i`` attends to ``j`` iff ``adjacency[i, j]``.

    .. math:: M = A \lor I \quad\text{(with self-loops)}

    Parameters
    ----------
    adjacency : array_like
        Square boolean or integer 0/1 matrix ``(n_nodes, n_nodes)``.
    self_loops : bool
        Every node also sees itself (so no row is fully masked unless asked for).

    Returns
    -------
    ndarray of bool
        ``(n_nodes, n_nodes)``, a new array, never the input.

    Examples
    --------
    >>> graph_mask([[0, 1, 0], [1, 0, 1], [0, 1, 0]]).astype(int).tolist()
    [[1, 1, 0], [1, 1, 1], [0, 1, 1]]
    >>> graph_mask([[0, 1, 0], [1, 0, 1]])
    Traceback (most recent call last):
    ...
    ValueError: adjacency has shape (2, 3); expected a square matrix (n_nodes, n_nodes)
    """
    self_loops = check_bool(self_loops, "self_loops")
    edges = as_bool_mask(adjacency, "adjacency")  # (n, n)
    if edges.ndim != 2 or edges.shape[0] != edges.shape[1]:
        raise ValueError(f"adjacency has shape {edges.shape}; expected a square matrix (n_nodes, n_nodes)")
    if self_loops:
        return edges | np.eye(edges.shape[0], dtype=bool)  # (n, n)
    return edges.copy()  # (n, n)


def additive_mask(mask, fill: float = -np.inf, dtype=np.float64) -> np.ndarray:
    r"""The additive form of a boolean ``mask``: 0 where True (may attend), ``fill`` where False.

    .. math:: B_{ij} = 0 \text{ if } M_{ij} \text{ else } \text{fill}, \qquad
              \operatorname{softmax}(S + B) = \operatorname{softmax}(S, M) \text{ on rows with an allowed key}

    Parameters
    ----------
    mask : array_like of bool
        True where attention is allowed.
    fill : float
        A negative number: ``-inf`` (the default, exact) or a large finite number such as ``-1e9``
        (approximate, and a fully masked row then gets the weights of the *unmasked* row, since
        adding a constant to a whole row does not change its softmax).
    dtype : numpy float dtype
        The type of the bias.

    Returns
    -------
    ndarray
        The bias, shaped like ``mask``.

    Examples
    --------
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
    r"""The boolean mask of an additive one: True where ``bias`` is finite, False where it is ``-inf``.

    .. math:: M_{ij} = [\, B_{ij} > -\infty \,]

    Parameters
    ----------
    bias : array_like
        Real biases; NaN and ``+inf`` are refused.

    Returns
    -------
    ndarray of bool
        Shaped like ``bias``.

    Examples
    --------
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
    r"""Softmax as the textbook formula computes it, with no special rule for fully masked slices.

    .. math:: \frac{e^{x_i - m}}{\sum_j e^{x_j - m}}, \quad m = \max_j x_j

    A slice whose logits are *all* ``-inf`` comes out as NaN (``-inf - (-inf)``), as ``torch.softmax``
    returns; :func:`attnbook.softmax` gives it zeros.

    Parameters
    ----------
    x, axis
        As in :func:`attnbook.softmax`.

    Returns
    -------
    ndarray
        Shaped like ``x``; NaN on slices with no finite logit.

    Examples
    --------
    >>> print(plain_softmax([[0.0, np.log(3.0)], [-np.inf, -np.inf]]))
    [[0.25 0.75]
     [ nan  nan]]
    """
    logits, axis, _ = check_logits(x, axis)  # (..., n, ...)
    with np.errstate(invalid="ignore", divide="ignore"):
        shifted = logits - logits.max(axis=axis, keepdims=True)  # (..., n, ...); NaN on all -inf slices
        exps = np.exp(shifted)  # (..., n, ...)
        return exps / exps.sum(axis=axis, keepdims=True)  # (..., n, ...)


def fully_masked_rows(mask) -> np.ndarray:
    r"""Which queries have no allowed key at all: ``~mask.any(axis=-1)``.

    .. math:: r_i = \lnot \bigvee_j M_{ij}

    Parameters
    ----------
    mask : array_like of bool
        ``(..., n_q, n_k)``.

    Returns
    -------
    ndarray of bool
        ``(..., n_q)``.

    Examples
    --------
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


# --- checks of masks at the boundaries of attention ------------------------------------------------------


def check_mask(mask, n_q: int, n_k: int, context: str = "", name: str = "mask") -> np.ndarray:
    """``mask`` as booleans ``(..., n_q | 1, n_k | 1)`` that fit weights ``(..., n_q, n_k)``.

    Parameters
    ----------
    mask : array_like of bool
        As in :func:`attnbook.scaled_dot_product_attention`.
    n_q, n_k, context, name
        The numbers of queries and keys; added to the error (the shapes of q and k); the mask's name.

    Returns
    -------
    ndarray of bool
        The mask.

    Examples
    --------
    >>> check_mask(np.ones((2, 3), dtype=bool), 2, 2)
    Traceback (most recent call last):
    ...
    ValueError: mask has shape (2, 3) but the weights have shape (..., 2, 2); the mask must broadcast to them
    """
    mask = as_bool_mask(mask, name)  # (..., n_q | 1, n_k | 1)
    check_min_ndim(mask, name, 2, "(..., n_q, n_k)")
    if mask.shape[-2] not in (1, n_q) or mask.shape[-1] not in (1, n_k):
        raise ValueError(f"{name} has shape {mask.shape} but the weights have shape (..., {n_q}, {n_k}){context}; "
                         "the mask must broadcast to them")
    return mask


def check_head_mask(mask, n_q: int, n_k: int, name: str = "mask", context: str = "") -> np.ndarray:
    """A multi-head mask laid out ``(..., n_heads | 1, n_q | 1, n_k | 1)``: a 3-D mask gains a head axis.

    Parameters
    ----------
    mask : array_like of bool
        ``(n_q, n_k)`` or ``(batch, n_q | 1, n_k)`` for every head, or ``(batch, n_heads | 1, n_q | 1, n_k)``.
    n_q, n_k, name, context
        As in :func:`check_mask`.

    Returns
    -------
    ndarray of bool
        The mask.

    Examples
    --------
    >>> check_head_mask(np.ones((2, 1, 5), dtype=bool), 3, 5).shape
    (2, 1, 1, 5)
    """
    mask = as_bool_mask(mask, name)
    if mask.ndim == 3:
        mask = mask[:, None, :, :]  # (batch, 1, n_q | 1, n_k): the same mask for every head
    elif mask.ndim > 4:
        raise ValueError(f"{name} has shape {mask.shape}; expected (n_q, n_k), (batch, n_q | 1, n_k) or, one mask "
                         "per head, (batch, n_heads | 1, n_q | 1, n_k)")
    return check_mask(mask, n_q, n_k, context, name)


def check_head_batches(shapes: dict[str, tuple[int, ...]], mask=None, mask_name: str = "mask") -> tuple[int, ...]:
    """Broadcast the batch shapes of multi-head inputs ``(..., n, d_model)``, which gain a head axis, with their mask's.

    Parameters
    ----------
    shapes : dict of str to tuple of int
        The full shapes of the named inputs.
    mask : ndarray of bool, optional
        A mask laid out by :func:`check_head_mask`.
    mask_name : str
        Its name.

    Returns
    -------
    tuple of int
        The broadcast leading shape, ``(..., n_heads | 1)``.

    Examples
    --------
    >>> check_head_batches({"query": (2, 3, 4), "key": (3, 5, 4)})
    Traceback (most recent call last):
    ...
    ValueError: the leading (batch, head) dimensions do not broadcast: query has (2, 1), key has (3, 1)
    """
    batches = {name: shape[:-2] + (1,) for name, shape in shapes.items()}  # (..., 1): the head axis
    if mask is not None:
        batches[mask_name] = mask.shape[:-2]  # (..., n_heads | 1)
    return broadcast_batch_shapes(batches)


def check_causal(causal, n_q: int, n_k: int) -> bool:
    """``causal`` as a bool; when True, fewer keys than queries are refused.

    Parameters
    ----------
    causal, n_q, n_k
        As in :func:`causal_mask`.

    Returns
    -------
    bool
        ``causal``.

    Examples
    --------
    >>> check_causal(True, 3, 2)
    Traceback (most recent call last):
    ...
    ValueError: n_k=2 is smaller than n_q=3; a causal mask needs at least as many keys as queries
    """
    causal = check_bool(causal, "causal")
    if causal and n_k < n_q:
        raise ValueError(f"n_k={n_k} is smaller than n_q={n_q}; a causal mask needs at least as many keys as queries")
    return causal
