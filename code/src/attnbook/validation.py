"""Input checks shared by every public function of the package.

Each check raises an error that names the argument and what is wrong with it, so that a reader
never meets a bare numpy broadcasting error or a silent NaN.

>>> as_float_array([[1, 2]], "q").dtype
dtype('float64')
>>> as_float_array([1.0, float("nan")], "q")
Traceback (most recent call last):
...
ValueError: q contains NaN at index (1,); attention inputs must be finite numbers
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "as_float_array",
    "as_bool_mask",
    "check_min_ndim",
    "check_axis",
    "broadcast_batch_shapes",
    "check_positive_int",
    "check_shape",
]

_FLOAT_KINDS = "f"
_INTEGER_KINDS = "iu"


def as_float_array(x, name: str, *, allow_neg_inf: bool = False) -> np.ndarray:
    """Return ``x`` as a floating-point array, or raise an error that names ``name``.

    Floating arrays keep their dtype (float16, float32, float64); integers become float64.
    Booleans, complex numbers, strings and objects are refused, and so are NaN and +inf.
    ``-inf`` is refused too unless ``allow_neg_inf`` (a softmax logit of ``-inf`` means weight 0).

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


def check_positive_int(value, name: str, minimum: int = 1) -> int:
    """Return ``value`` as an int if it is an integer >= ``minimum``, or raise naming ``name``.

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
