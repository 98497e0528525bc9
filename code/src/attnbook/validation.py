"""Input checks shared by every public function of the package.

Each check raises an error that names the argument and what is wrong with it, so that a reader
never meets a bare numpy broadcasting error or a silent NaN. A public function calls these checks
once, at its boundary, and then hands the checked arrays to unchecked kernels (plain names, not in
any ``__all__``, whose docstrings start "Unchecked kernel:"); kernels never call back in here.

>>> as_float_array([[1, 2]], "q").dtype
dtype('float64')
>>> as_float_array([1.0, float("nan")], "q")
Traceback (most recent call last):
...
ValueError: q contains NaN at index (1,); attention inputs must be finite numbers
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "as_float_array",
    "as_bool_mask",
    "check_min_ndim",
    "check_axis",
    "broadcast_batch_shapes",
    "check_positive_int",
    "check_seed",
    "check_shape",
    "check_cache_layout",
    "check_one_token",
    "check_bool",
    "check_causal",
    "check_scale",
    "check_heads",
    "check_kv_heads",
    "check_logits",
    "check_mask",
    "check_head_mask",
    "check_head_batches",
    "check_qkv",
    "check_attention_inputs",
    "check_projections",
    "overflow_error",
]

_FLOAT_KINDS = "f"
_INTEGER_KINDS = "iu"


def as_float_array(x, name: str, *, allow_neg_inf: bool = False) -> np.ndarray:
    """Return ``x`` as a floating-point array, or raise an error that names ``name``.

    Floating arrays keep their dtype (float16, float32, float64); integers become float64.
    Booleans, complex numbers, strings and objects are refused, and so are NaN and +inf.
    ``-inf`` is refused too unless ``allow_neg_inf`` (a softmax logit of ``-inf`` means weight 0).

    Parameters
    ----------
    x : array_like
        The values to check.
    name : str
        The argument's name, used in the error.
    allow_neg_inf : bool, optional
        Accept ``-inf`` entries (masked logits); default False.

    Returns
    -------
    ndarray
        ``x`` with its shape, in its float dtype or float64 for integers (no copy when already float).

    Raises
    ------
    TypeError
        When ``x`` is ragged or not of real numbers.
    ValueError
        When ``x`` holds NaN, ``+inf``, or ``-inf`` without ``allow_neg_inf``; the message gives the first index.

    Examples
    --------
    >>> as_float_array(np.ones(2, dtype=np.float32), "k").dtype
    dtype('float32')
    >>> as_float_array([True, False], "v")
    Traceback (most recent call last):
    ...
    TypeError: v has dtype bool; expected real numbers (a float or integer array)
    """
    try:
        array = np.asarray(x)
    except (ValueError, TypeError) as error:  # ragged nested lists
        raise TypeError(f"{name} could not be read as a rectangular array: {error}") from None
    kind = array.dtype.kind
    if kind in _INTEGER_KINDS:
        array = array.astype(np.float64)
    elif kind not in _FLOAT_KINDS:
        raise TypeError(
            f"{name} has dtype {array.dtype}; expected real numbers (a float or integer array)"
        )
    if array.size and not np.all(np.isfinite(array)):
        nan_at = np.argwhere(np.isnan(array))
        if nan_at.size:
            raise ValueError(
                f"{name} contains NaN at index {tuple(int(i) for i in nan_at[0])}; "
                "attention inputs must be finite numbers"
            )
        pos_at = np.argwhere(np.isposinf(array))
        if pos_at.size:
            raise ValueError(
                f"{name} contains +inf at index {tuple(int(i) for i in pos_at[0])}; "
                "attention inputs must be finite numbers"
            )
        if not allow_neg_inf:
            neg_at = np.argwhere(np.isneginf(array))
            raise ValueError(
                f"{name} contains -inf at index {tuple(int(i) for i in neg_at[0])}; "
                "attention inputs must be finite numbers (to exclude positions, pass mask=)"
            )
    return array


def as_bool_mask(mask, name: str = "mask") -> np.ndarray:
    """Return ``mask`` as a boolean array (True = may attend), or raise a clear error.

    Integer masks of 0s and 1s are accepted; anything else must already be boolean.

    Parameters
    ----------
    mask : array_like
        Boolean, or integers that are all 0 or 1.
    name : str, optional
        The argument's name, used in the error; default ``"mask"``.

    Returns
    -------
    ndarray of bool
        ``mask`` with its shape.

    Raises
    ------
    TypeError
        When ``mask`` is ragged or neither boolean nor integer.
    ValueError
        When an integer mask holds a value other than 0 and 1.

    Examples
    --------
    >>> as_bool_mask([[1, 0]]).tolist()
    [[True, False]]
    >>> as_bool_mask([[0.5, 1.0]])
    Traceback (most recent call last):
    ...
    TypeError: mask has dtype float64; expected a boolean array (True where attention is allowed)
    """
    try:
        array = np.asarray(mask)
    except (ValueError, TypeError) as error:  # ragged nested lists
        raise TypeError(f"{name} could not be read as a rectangular array: {error}") from None
    if array.dtype == np.bool_:
        return array
    if array.dtype.kind in _INTEGER_KINDS and np.all((array == 0) | (array == 1)):
        return array.astype(bool)
    if array.dtype.kind in _INTEGER_KINDS:
        raise ValueError(f"{name} has integer values other than 0 and 1; expected a boolean array")
    raise TypeError(
        f"{name} has dtype {array.dtype}; expected a boolean array (True where attention is allowed)"
    )


def check_min_ndim(array: np.ndarray, name: str, min_ndim: int, layout: str) -> None:
    """Raise if ``array`` has fewer than ``min_ndim`` dimensions; ``layout`` names the expected axes.

    Parameters
    ----------
    array : ndarray
        The array to check.
    name : str
        The argument's name, used in the error.
    min_ndim : int
        The fewest dimensions allowed.
    layout : str
        The expected axes, such as ``"(..., n_q, d_k)"``, quoted in the error.

    Raises
    ------
    ValueError
        When ``array.ndim < min_ndim``.

    Examples
    --------
    >>> check_min_ndim(np.ones(3), "q", 2, "(..., n_q, d_k)")
    Traceback (most recent call last):
    ...
    ValueError: q has shape (3,) but needs at least 2 dimensions, laid out as (..., n_q, d_k)
    """
    if array.ndim < min_ndim:
        raise ValueError(
            f"{name} has shape {array.shape} but needs at least {min_ndim} dimensions, "
            f"laid out as {layout}"
        )


def check_axis(axis, ndim: int, name: str = "axis") -> int:
    """Return ``axis`` as a non-negative index into ``ndim`` dimensions, or raise.

    Parameters
    ----------
    axis : int
        An axis, negative ones counting from the end: ``-ndim <= axis < ndim``.
    ndim : int
        The number of dimensions of the array it indexes.
    name : str, optional
        The argument's name, used in the error; default ``"axis"``.

    Returns
    -------
    int
        ``axis mod ndim``, in ``0 .. ndim - 1``.

    Raises
    ------
    TypeError
        When ``axis`` is not an integer (bools are refused).
    ValueError
        When ``axis`` is out of range.

    Examples
    --------
    >>> check_axis(-1, 3)
    2
    >>> check_axis(3, 2)
    Traceback (most recent call last):
    ...
    ValueError: axis=3 is out of range for an array with 2 dimensions
    """
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}={axis} is out of range for an array with {ndim} dimensions")
    return int(axis) % ndim


def broadcast_batch_shapes(shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    """Broadcast the leading (batch, head) shapes of named arrays, or say which ones clash.

    Parameters
    ----------
    shapes : dict of str to tuple of int
        Each array's name and its leading shape (its shape without the last two axes).

    Returns
    -------
    tuple of int
        The broadcast shape, by numpy's rules.

    Raises
    ------
    ValueError
        When the shapes do not broadcast; the message lists every name with its shape.

    Examples
    --------
    >>> broadcast_batch_shapes({"q": (2, 8), "k": (1, 8)})
    (2, 8)
    >>> broadcast_batch_shapes({"q": (2,), "k": (3,)})
    Traceback (most recent call last):
    ...
    ValueError: the leading (batch, head) dimensions do not broadcast: q has (2,), k has (3,)
    """
    try:
        return tuple(np.broadcast_shapes(*shapes.values()))
    except ValueError:
        listing = ", ".join(f"{name} has {shape}" for name, shape in shapes.items())
        raise ValueError(
            f"the leading (batch, head) dimensions do not broadcast: {listing}"
        ) from None


def check_seed(seed, name: str = "seed") -> np.random.Generator:
    """A random generator from ``seed``: a non-negative integer, or a ``numpy.random.Generator`` used as it is.

    Parameters
    ----------
    seed : int or numpy.random.Generator
        The seed, or a generator to draw from (so that several calls continue one stream).
    name : str, optional
        The argument's name, used in the error; default ``"seed"``.

    Returns
    -------
    numpy.random.Generator
        ``numpy.random.default_rng(seed)``, or ``seed`` itself when it is a generator.

    Examples
    --------
    >>> int(check_seed(0).integers(10)) == int(np.random.default_rng(0).integers(10))
    True
    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    ValueError: seed must be a non-negative integer or a numpy Generator, got -1
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{name} must be a non-negative integer or a numpy Generator, got {seed!r}")
    return np.random.default_rng(seed)


def check_positive_int(value, name: str, minimum: int = 1) -> int:
    """Return ``value`` as an int if it is an integer >= ``minimum``, or raise naming ``name``.

    Parameters
    ----------
    value : int
        The number to check; a Python or numpy integer, not a bool or a float.
    name : str
        The argument's name, used in the error.
    minimum : int, optional
        The smallest value allowed; default 1.

    Returns
    -------
    int
        ``value`` as a Python ``int``.

    Raises
    ------
    TypeError
        When ``value`` is not an integer.
    ValueError
        When ``value < minimum``.

    Examples
    --------
    >>> check_positive_int(3, "n_heads")
    3
    >>> check_positive_int(2.0, "n_heads")
    Traceback (most recent call last):
    ...
    TypeError: n_heads must be an integer, got 2.0
    >>> check_positive_int(0, "n")
    Traceback (most recent call last):
    ...
    ValueError: n must be at least 1, got 0
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def check_shape(shape, name: str) -> tuple[int, ...]:
    """Return ``shape`` as a tuple of ints if it is a sequence of integers >= 0, or raise naming the entry.

    Floats are refused rather than truncated: a batch shape of ``(2.5,)`` is a mistake, not ``(2,)``.

    Parameters
    ----------
    shape : sequence of int
        The sizes, such as a batch shape; each an integer >= 0.
    name : str
        The argument's name; an error names the entry as ``name[i]``.

    Returns
    -------
    tuple of int
        The sizes as Python ints.

    Raises
    ------
    TypeError
        When ``shape`` is not a sequence (a string is refused) or an entry is not an integer.
    ValueError
        When an entry is negative.

    Examples
    --------
    >>> check_shape([2, 3], "batch_shape")
    (2, 3)
    >>> check_shape((2.5,), "batch_shape")
    Traceback (most recent call last):
    ...
    TypeError: batch_shape[0] must be an integer, got 2.5
    """
    if isinstance(shape, (str, bytes)):
        raise TypeError(f"{name} must be a tuple of sizes, got {shape!r}")
    try:
        sizes = tuple(shape)
    except TypeError:
        raise TypeError(f"{name} must be a tuple of sizes, got {shape!r}") from None
    return tuple(check_positive_int(size, f"{name}[{i}]", minimum=0) for i, size in enumerate(sizes))


def check_cache_layout(d_k, d_v, batch_shape, dtype) -> tuple[int, int, tuple[int, ...], np.dtype]:
    """Return the widths, leading shape and float type of a key-value cache's buffers, checked.

    Parameters
    ----------
    d_k, d_v : int
        Widths of a key and of a value (positive).
    batch_shape : tuple of int
        Leading (batch, head) shape of every key and value.
    dtype : numpy float dtype
        Type of the buffers.

    Returns
    -------
    tuple
        ``(d_k, d_v, batch_shape, dtype)`` as ``int``, ``int``, a tuple of ``int`` and an ``np.dtype``.

    Examples
    --------
    >>> check_cache_layout(2, 3, [4], "float32")
    (2, 3, (4,), dtype('float32'))
    >>> check_cache_layout(2, 3, (), np.int64)
    Traceback (most recent call last):
    ...
    TypeError: dtype must be a floating-point type, got int64
    """
    d_k = check_positive_int(d_k, "d_k")
    d_v = check_positive_int(d_v, "d_v")
    batch_shape = check_shape(batch_shape, "batch_shape")
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"dtype must be a floating-point type, got {dtype}")
    return d_k, d_v, batch_shape, dtype


def check_one_token(k_new: np.ndarray, v_new: np.ndarray, batch_shape: tuple[int, ...], d_k: int, d_v: int) -> None:
    """Raise unless ``k_new`` is ``(*batch_shape, 1, d_k)`` and ``v_new`` ``(*batch_shape, 1, d_v)``: one token.

    Parameters
    ----------
    k_new, v_new : ndarray
        The key and value of the token a cache is given.
    batch_shape : tuple of int
        The cache's leading (batch, head) shape.
    d_k, d_v : int
        The cache's widths of a key and of a value.

    Examples
    --------
    >>> check_one_token(np.ones((1, 2)), np.ones((1, 3)), (), 2, 3)
    >>> check_one_token(np.ones((2, 2)), np.ones((1, 3)), (), 2, 3)
    Traceback (most recent call last):
    ...
    ValueError: k_new has shape (2, 2); expected (1, 2) (one token)
    """
    for name, array, width in (("k_new", k_new, d_k), ("v_new", v_new, d_v)):
        expected = batch_shape + (1, width)
        if array.shape != expected:
            raise ValueError(f"{name} has shape {array.shape}; expected {expected} (one token)")


def check_bool(value, name: str) -> bool:
    """Return ``value`` as a Python bool if it is ``True`` or ``False`` (``np.bool_`` included).

    Parameters
    ----------
    value : object
        The flag to check.
    name : str
        The argument's name, used in the error.

    Returns
    -------
    bool
        ``value`` as a Python ``bool``.

    Raises
    ------
    TypeError
        If ``value`` is anything else (``0``, ``1``, ``"yes"``, ``None``...).

    Examples
    --------
    >>> check_bool(np.bool_(True), "causal")
    True
    >>> check_bool(1, "causal")
    Traceback (most recent call last):
    ...
    TypeError: causal must be True or False, got 1
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_causal(causal, n_q: int, n_k: int) -> bool:
    """Return ``causal`` as a bool; when it is True, refuse fewer keys than queries.

    Parameters
    ----------
    causal : bool
        Whether the causal mask applies (query ``i`` sees keys ``j <= i + n_k - n_q``).
    n_q, n_k : int
        Numbers of queries and keys.

    Returns
    -------
    bool
        ``causal``.

    Examples
    --------
    >>> check_causal(True, 2, 3)
    True
    >>> check_causal(True, 3, 2)
    Traceback (most recent call last):
    ...
    ValueError: n_k=2 is smaller than n_q=3; a causal mask needs at least as many keys as queries
    """
    causal = check_bool(causal, "causal")
    if causal and n_k < n_q:
        raise ValueError(f"n_k={n_k} is smaller than n_q={n_q}; a causal mask needs at least as many keys as queries")
    return causal


def check_scale(scale, d_k: int) -> float:
    """Return the factor applied to ``q k^T``: ``1 / sqrt(d_k)`` when ``scale`` is None, else ``scale``.

    Parameters
    ----------
    scale : float or None
        A positive finite real number, or None for the default ``1 / sqrt(d_k)``.
    d_k : int
        The width of queries and keys.

    Returns
    -------
    float
        The factor.

    Examples
    --------
    >>> check_scale(None, 4), check_scale(2, 4)
    (0.5, 2.0)
    >>> check_scale(-1.0, 4)
    Traceback (most recent call last):
    ...
    ValueError: scale must be a positive finite number, got -1.0
    """
    if scale is None:
        return 1.0 / math.sqrt(d_k)
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (int, float, np.integer, np.floating)):
        raise TypeError(f"scale must be a real number, got {scale!r}")
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    return float(scale)


def check_heads(d_model: int, n_heads) -> int:
    """Return ``n_heads`` as an int if it is a positive integer that divides ``d_model``.

    Parameters
    ----------
    d_model : int
        The model width, split among the heads.
    n_heads : int
        The number of heads.

    Returns
    -------
    int
        ``n_heads``.

    Examples
    --------
    >>> check_heads(8, 2)
    2
    >>> check_heads(10, 4)
    Traceback (most recent call last):
    ...
    ValueError: d_model = 10 is not divisible by n_heads = 4; each head needs d_model / n_heads dimensions
    """
    n_heads = check_positive_int(n_heads, "n_heads")
    if d_model % n_heads:
        raise ValueError(
            f"d_model = {d_model} is not divisible by n_heads = {n_heads}; "
            "each head needs d_model / n_heads dimensions"
        )
    return n_heads


def check_kv_heads(n_heads: int, n_kv_heads) -> int:
    """Return ``n_kv_heads`` as an int if it is a positive integer that divides ``n_heads``.

    Parameters
    ----------
    n_heads : int
        The number of query heads (already checked).
    n_kv_heads : int
        The number of key and value heads.

    Returns
    -------
    int
        ``n_kv_heads``.

    Examples
    --------
    >>> check_kv_heads(8, 2)
    2
    >>> check_kv_heads(8, 3)
    Traceback (most recent call last):
    ...
    ValueError: n_heads = 8 is not divisible by n_kv_heads = 3; each key and value head serves n_heads / n_kv_heads query heads
    """
    n_kv_heads = check_positive_int(n_kv_heads, "n_kv_heads")
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads = {n_heads} is not divisible by n_kv_heads = {n_kv_heads}; "
                         "each key and value head serves n_heads / n_kv_heads query heads")
    return n_kv_heads


def check_logits(x, axis: int = -1, mask=None, name: str = "x",
                 allow_neg_inf: bool = True) -> tuple[np.ndarray, int, np.ndarray]:
    """The one prologue of every softmax-like function: logits, the axis, and which entries take part.

    Parameters
    ----------
    x : array_like
        Real logits with at least one dimension; ``-inf`` means "masked" when ``allow_neg_inf``.
    axis : int
        The axis that is normalised.
    mask : array_like of bool, optional
        True where the entry takes part; must broadcast to ``x``.
    name : str
        The argument's name, used in errors.
    allow_neg_inf : bool
        Whether ``-inf`` logits are accepted.

    Returns
    -------
    logits : ndarray
        ``x`` as a float array.
    axis : int
        ``axis`` as a non-negative index.
    allowed : ndarray of bool
        ``(x.shape)``: False where ``mask`` is False or the logit is ``-inf``.

    Examples
    --------
    >>> logits, axis, allowed = check_logits([[0.0, -np.inf]], mask=[[True, True]])
    >>> axis, allowed.tolist()
    (1, [[True, False]])
    >>> check_logits([[1.0, 2.0]], mask=[[True, False, True]])
    Traceback (most recent call last):
    ...
    ValueError: mask has shape (1, 3) but x has shape (1, 2); the mask must broadcast to x
    """
    logits = as_float_array(x, name, allow_neg_inf=allow_neg_inf)  # (..., n, ...)
    if logits.ndim == 0:
        raise ValueError(f"{name} is a scalar; expected at least one dimension (the axis to normalise over)")
    axis = check_axis(axis, logits.ndim)
    allowed = ~np.isneginf(logits)  # (same shape as logits); -inf means "masked"
    if mask is not None:
        mask = as_bool_mask(mask)
        try:
            allowed = allowed & np.broadcast_to(mask, logits.shape)  # (same shape as logits)
        except ValueError:
            raise ValueError(
                f"mask has shape {mask.shape} but {name} has shape {logits.shape}; "
                f"the mask must broadcast to {name}"
            ) from None
    return logits, axis, allowed


def check_mask(mask, n_q: int, n_k: int, context: str = "", name: str = "mask") -> np.ndarray:
    """Return ``mask`` as a boolean array ``(..., n_q | 1, n_k | 1)`` that fits weights ``(..., n_q, n_k)``.

    Parameters
    ----------
    mask : array_like of bool
        True where query ``i`` may attend to key ``j``.
    n_q, n_k : int
        The numbers of queries and keys.
    context : str
        Added to the error (say, the shapes of q and k).
    name : str
        The argument's name, used in errors.

    Returns
    -------
    ndarray of bool
        The mask.

    Examples
    --------
    >>> check_mask([[1, 0]], 1, 2).tolist()
    [[True, False]]
    >>> check_mask(np.ones((2, 3), dtype=bool), 2, 2)
    Traceback (most recent call last):
    ...
    ValueError: mask has shape (2, 3) but the weights have shape (..., 2, 2); the mask must broadcast to them
    """
    mask = as_bool_mask(mask, name)  # (..., n_q | 1, n_k | 1)
    check_min_ndim(mask, name, 2, "(..., n_q, n_k)")
    if mask.shape[-2] not in (1, n_q) or mask.shape[-1] not in (1, n_k):
        raise ValueError(
            f"{name} has shape {mask.shape} but the weights have shape (..., {n_q}, {n_k}){context}; "
            "the mask must broadcast to them"
        )
    return mask


def check_head_mask(mask, n_q: int, n_k: int, name: str = "mask", context: str = "") -> np.ndarray:
    """A multi-head attention mask, laid out ``(..., n_heads | 1, n_q | 1, n_k | 1)`` for the heads.

    Parameters
    ----------
    mask : array_like of bool
        ``(n_q, n_k)`` or ``(batch, n_q | 1, n_k)``, shared by all heads, or
        ``(batch, n_heads | 1, n_q | 1, n_k)`` with one mask per head.
    n_q, n_k : int
        The numbers of queries and keys.
    name : str
        The argument's name, used in errors.
    context : str
        Added to the error of a mask that does not fit (say, the shapes of query and key).

    Returns
    -------
    ndarray of bool
        The mask; a 3-D mask gains a head axis of size 1.

    Examples
    --------
    >>> check_head_mask(np.ones((2, 1, 5), dtype=bool), 3, 5).shape
    (2, 1, 1, 5)
    """
    mask = as_bool_mask(mask, name)
    if mask.ndim == 3:
        mask = mask[:, None, :, :]  # (batch, 1, n_q | 1, n_k): the same mask for every head
    elif mask.ndim > 4:
        raise ValueError(
            f"{name} has shape {mask.shape}; expected (n_q, n_k), (batch, n_q | 1, n_k) or, one mask "
            "per head, (batch, n_heads | 1, n_q | 1, n_k)"
        )
    return check_mask(mask, n_q, n_k, context, name)


def check_head_batches(shapes: dict[str, tuple[int, ...]], mask=None, mask_name: str = "mask") -> tuple[int, ...]:
    """Broadcast the batch shapes of multi-head inputs (which gain a head axis) with their mask's.

    Parameters
    ----------
    shapes : dict of str to tuple of int
        The full shapes ``(..., n, d_model)`` of the named inputs.
    mask : ndarray of bool, optional
        A mask laid out by :func:`check_head_mask`, ``(..., n_heads | 1, n_q | 1, n_k | 1)``.
    mask_name : str
        The mask's name, used in errors.

    Returns
    -------
    tuple of int
        The broadcast leading shape, heads included: ``(..., n_heads | 1)``.

    Examples
    --------
    >>> check_head_batches({"query": (2, 3, 4), "key": (1, 5, 4)})
    (2, 1)
    >>> check_head_batches({"query": (2, 3, 4), "key": (3, 5, 4)})
    Traceback (most recent call last):
    ...
    ValueError: the leading (batch, head) dimensions do not broadcast: query has (2, 1), key has (3, 1)
    """
    batches = {name: shape[:-2] + (1,) for name, shape in shapes.items()}  # (..., 1): the head axis
    if mask is not None:
        batches[mask_name] = mask.shape[:-2]  # (..., n_heads | 1)
    return broadcast_batch_shapes(batches)


def check_qkv(q, k, v=None) -> tuple[np.ndarray, ...]:
    """Queries, keys (and values) as float arrays of one common type, at least float32, that fit together.

    Parameters
    ----------
    q : array_like
        ``(..., n_q, d_k)`` queries.
    k : array_like
        ``(..., n_k, d_k)`` keys.
    v : array_like, optional
        ``(..., n_k, d_v)`` values.

    Returns
    -------
    tuple of ndarray
        ``(q, k)`` or ``(q, k, v)`` in the widest float type of the inputs and at least float32
        (float16 dot products overflow at 65504).

    Examples
    --------
    >>> q, k = check_qkv(np.ones((2, 3), dtype=np.float16), np.ones((4, 3)))
    >>> q.dtype, k.dtype
    (dtype('float64'), dtype('float64'))
    >>> check_qkv(np.ones((3, 4)), np.ones((5, 3)))
    Traceback (most recent call last):
    ...
    ValueError: q has shape (3, 4) but k has shape (5, 3); the last dimensions (d_k) must match
    """
    arrays = [as_float_array(q, "q"), as_float_array(k, "k")]  # (..., n_q, d_k), (..., n_k, d_k)
    check_min_ndim(arrays[0], "q", 2, "(..., n_q, d_k)")
    check_min_ndim(arrays[1], "k", 2, "(..., n_k, d_k)")
    q, k = arrays
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q has shape {q.shape} but k has shape {k.shape}; the last dimensions (d_k) must match"
        )
    if q.shape[-1] == 0:
        raise ValueError(f"q and k have d_k = 0 (shapes {q.shape}, {k.shape}); d_k must be at least 1")
    if v is not None:
        arrays.append(as_float_array(v, "v"))  # (..., n_k, d_v)
        check_min_ndim(arrays[2], "v", 2, "(..., n_k, d_v)")
        if k.shape[-2] != arrays[2].shape[-2]:
            raise ValueError(
                f"k has shape {k.shape} but v has shape {arrays[2].shape}; k and v must have the same "
                "number of positions n_k (second-to-last dimension)"
            )
    dtype = np.result_type(*arrays, np.float32)
    return tuple(a.astype(dtype, copy=False) for a in arrays)


def check_attention_inputs(q, k, v, mask=None, scale=None):
    """Every check of scaled dot-product attention, in one call: ``(q, k, v, mask, scale)`` checked.

    Parameters
    ----------
    q, k, v : array_like
        ``(..., n_q, d_k)``, ``(..., n_k, d_k)``, ``(..., n_k, d_v)``; see :func:`check_qkv`.
    mask : array_like of bool, optional
        Broadcasting to ``(..., n_q, n_k)``; see :func:`check_mask`.
    scale : float, optional
        See :func:`check_scale`.

    Returns
    -------
    tuple
        ``(q, k, v, mask, scale)``: the arrays in one float type (at least float32), the mask as
        booleans (or None), the scale as a float. The leading (batch, head) shapes broadcast.

    Examples
    --------
    >>> q, k, v, mask, scale = check_attention_inputs(np.ones((2, 4)), np.ones((3, 4)), np.ones((3, 1)))
    >>> q.dtype, mask, scale
    (dtype('float64'), None, 0.5)
    >>> check_attention_inputs(np.ones((2, 2, 4)), np.ones((3, 3, 4)), np.ones((3, 3, 1)))
    Traceback (most recent call last):
    ...
    ValueError: the leading (batch, head) dimensions do not broadcast: q has (2,), k has (3,), v has (3,)
    """
    q, k, v = check_qkv(q, k, v)  # (..., n_q, d_k), (..., n_k, d_k), (..., n_k, d_v)
    shapes = {"q": q.shape[:-2], "k": k.shape[:-2], "v": v.shape[:-2]}
    if mask is not None:
        mask = check_mask(mask, q.shape[-2], k.shape[-2],
                          f" (q has shape {q.shape}, k has shape {k.shape})")  # (..., n_q | 1, n_k | 1)
        shapes["mask"] = mask.shape[:-2]
    broadcast_batch_shapes(shapes)
    return q, k, v, mask, check_scale(scale, q.shape[-1])


def _checked_projection(w, name: str, d_model: int, x_shape: tuple[int, ...]) -> np.ndarray:
    w = as_float_array(w, name)  # (d_model, d_out)
    if w.ndim != 2:
        raise ValueError(f"{name} has shape {w.shape}; expected a matrix (d_model, d_out)")
    if w.shape[0] != d_model:
        raise ValueError(
            f"x has shape {x_shape} but {name} has shape {w.shape}; "
            f"{name} needs d_model = {d_model} rows to multiply x"
        )
    return w


def check_projections(x, w_q, w_k, w_v, mask=None, scale=None, name: str = "x") -> tuple:
    """A sequence ``x`` ``(..., n, d_model)``, three projections whose shapes fit it, a mask and a scale.

    Parameters
    ----------
    x : array_like
        ``(..., n, d_model)`` token vectors, one per row.
    w_q, w_k : array_like
        ``(d_model, d_k)`` query and key projections (the same ``d_k >= 1``).
    w_v : array_like
        ``(d_model, d_v)`` value projection.
    mask : array_like of bool, optional
        Broadcasting to the ``(..., n, n)`` weights; see :func:`check_mask`.
    scale : float, optional
        See :func:`check_scale`.
    name : str
        The name of ``x`` in errors.

    Returns
    -------
    tuple
        ``(x, w_q, w_k, w_v, mask, scale)``: float arrays, the mask as booleans (or None), the scale.

    Examples
    --------
    >>> check_projections(np.ones((3, 4)), np.ones((4, 2)), np.ones((4, 3)), np.ones((4, 2)))
    Traceback (most recent call last):
    ...
    ValueError: w_q has shape (4, 2) but w_k has shape (4, 3); queries and keys need the same d_k
    """
    x = as_float_array(x, name)  # (..., n, d_model)
    check_min_ndim(x, name, 2, "(..., n, d_model)")
    d_model = x.shape[-1]
    w_q = _checked_projection(w_q, "w_q", d_model, x.shape)  # (d_model, d_k)
    w_k = _checked_projection(w_k, "w_k", d_model, x.shape)  # (d_model, d_k)
    w_v = _checked_projection(w_v, "w_v", d_model, x.shape)  # (d_model, d_v)
    if w_q.shape[1] != w_k.shape[1]:
        raise ValueError(
            f"w_q has shape {w_q.shape} but w_k has shape {w_k.shape}; queries and keys need the same d_k"
        )
    if w_q.shape[1] == 0:
        raise ValueError(f"w_q and w_k have shape {w_q.shape}, so d_k = 0; they need at least one column")
    if mask is not None:
        n = x.shape[-2]
        mask = check_mask(mask, n, n, f" ({name} has shape {x.shape})")  # (..., n | 1, n | 1)
        broadcast_batch_shapes({name: x.shape[:-2], "mask": mask.shape[:-2]})
    return x, w_q, w_k, w_v, mask, check_scale(scale, w_q.shape[1])


def overflow_error(dtype) -> ValueError:
    """The error for attention scores that overflowed to inf (or became NaN) in ``dtype``.

    The weights are then unknown, and returning zeros or NaN would be wrong in silence.

    Parameters
    ----------
    dtype : numpy dtype
        The type the scores were computed in.

    Returns
    -------
    ValueError
        The error, to be raised by the caller.

    Examples
    --------
    >>> print(overflow_error(np.float32))
    the scores overflowed to inf or NaN in float32; scale the inputs down or compute in float64
    """
    return ValueError(
        f"the scores overflowed to inf or NaN in {np.dtype(dtype)}; scale the inputs down or compute in float64"
    )
