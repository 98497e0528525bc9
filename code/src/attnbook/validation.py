"""Every check of the package's arguments, in one place: the boundary of each public function.

A public function is its computation under ``@boundary(check)`` (:func:`boundary`), checked once at the
outermost call; weight NamedTuples declare their layouts (:class:`Array`), which :func:`check_weights` checks.

>>> as_float_array([1.0, float("nan")], "q")
Traceback (most recent call last):
...
ValueError: q contains NaN at index (1,); attention inputs must be finite numbers
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Annotated, NamedTuple

import numpy as np

__all__ = ["Array", "Dims", "Norm", "Overflow", "Stack", "as_bool_mask", "as_float_array", "boundary",
           "broadcast_batch_shapes", "check_axis", "check_bool", "check_min_ndim", "check_positive_int",
           "check_seed", "check_shape", "check_weights", "overflow_error"]


# --- the boundary ------------------------------------------------------------------------------------------


class Overflow(ValueError):
    """A result that overflowed to inf or NaN in its float type, though the inputs were finite (:func:`overflow_error`).

    Parameters
    ----------
    message : str
        What overflowed, in the words of the arguments.

    Examples
    --------
    >>> isinstance(overflow_error(np.float16), Overflow)
    True
    """

    def __init__(self, message: str):
        super().__init__(message)


def overflow_error(dtype, what: str = "the scores") -> Overflow:
    """The error, for the caller to raise, of ``what`` (a product of the arguments) that overflowed in ``dtype``.

    Parameters
    ----------
    dtype : numpy dtype
        The type the product was computed in.
    what : str
        The product, in the words of the arguments (``"x @ w_q"``).

    Returns
    -------
    Overflow
        The error.

    Examples
    --------
    >>> print(overflow_error(np.float16, "x @ w_k"))
    x @ w_k overflowed in float16 (largest 65504); scale the inputs down or compute in a wider float type
    """
    dtype = np.dtype(dtype)
    if what == "the scores":
        return Overflow(f"the scores overflowed to inf or NaN in {dtype}; scale the inputs down or compute in float64")
    return Overflow(f"{what} overflowed in {dtype} (largest {float(np.finfo(dtype).max):.6g}); scale the inputs "
                    "down or compute in a wider float type")


def boundary(check, overflow=None):
    """Decorator: the public function of ``body``, which checks its arguments with ``check``, then runs ``body``.

    The public function keeps the body's name, signature and docstring and lives in its module;
    ``public.unchecked`` is the body and ``public.check`` the check.

    Parameters
    ----------
    check : callable
        ``check(*args, **kwargs)``: the arguments of ``body``, checked, in order.
    overflow : callable, optional
        Called with them when the scores overflowed or the output (the result's first array, checked once)
        is not finite; raises the error naming the product that overflowed.

    Returns
    -------
    callable
        ``decorate(body) -> public``.

    Examples
    --------
    >>> @boundary(lambda x: (check_positive_int(x, "x"),))
    ... def double(x):
    ...     return 2 * x
    >>> double(3), double.unchecked(-3)
    (6, -6)
    """
    def decorate(body):
        errstate, isfinite, refused, refusal = np.errstate, np.isfinite, Overflow, overflow_error  # closed over

        def public(*args, **kwargs):
            checked = check(*args, **kwargs)
            with errstate(over="ignore", invalid="ignore"):  # an overflow is refused by name, not warned about
                if overflow is None:
                    return body(*checked)
                try:
                    result = body(*checked)
                except refused:
                    overflow(*checked)  # names the product that overflowed, when one did
                    raise
                output = result[0] if isinstance(result, tuple) else result
                if not isfinite(output).all():  # the promise, checked once: finite inputs, a finite output
                    overflow(*checked)
                    raise refusal(output.dtype, "the output")
            return result

        # the public function's globals are its module's, so that doctest and the tests find it there; what it
        # needs of this module it closes over
        public = types.FunctionType(public.__code__, body.__globals__, body.__name__, None, public.__closure__)
        functools.update_wrapper(public, body)
        public.unchecked, public.check = body, check
        return public

    return decorate


# --- arrays --------------------------------------------------------------------------------------------------


def as_float_array(x, name: str, *, allow_neg_inf: bool = False, layout: str | None = None) -> np.ndarray:
    """``x`` as a float array (float dtypes kept, integers to float64), or an error naming ``name``.

    Booleans, complex numbers, strings, objects, NaN and ``+inf`` are refused; no copy when already float.

    Parameters
    ----------
    x, name
        The values, and their name in the error.
    allow_neg_inf : bool, optional
        Accept ``-inf`` entries (masked logits).
    layout : str, optional
        Its axes (``"(..., n_q, d_k)"``): at least as many dimensions as named (:func:`check_min_ndim`).

    Returns
    -------
    ndarray
        ``x``, of its shape.

    Examples
    --------
    >>> as_float_array(np.ones(2, dtype=np.float32), "k").dtype
    dtype('float32')
    """
    try:
        array = np.asarray(x)
    except (ValueError, TypeError) as error:  # ragged nested lists
        raise TypeError(f"{name} could not be read as a rectangular array: {error}") from None
    if array.dtype.kind in "iu":
        array = array.astype(np.float64)
    elif array.dtype.kind != "f":
        raise TypeError(f"{name} has dtype {array.dtype}; expected real numbers (a float or integer array)")
    if array.size and not np.all(np.isfinite(array)):
        for test, what, hint in ((np.isnan, "NaN", ""), (np.isposinf, "+inf", ""),
                                 (np.isneginf, "-inf", " (to exclude positions, pass mask=)")):
            at = np.argwhere(test(array))
            if at.size and not (what == "-inf" and allow_neg_inf):
                raise ValueError(f"{name} contains {what} at index {tuple(int(i) for i in at[0])}; "
                                 f"attention inputs must be finite numbers{hint}")
    if layout is not None and array.ndim < layout.count(",") + 1 - ("..." in layout):
        check_min_ndim(array, name, layout.count(",") + 1 - ("..." in layout), layout)
    return array


def as_bool_mask(mask, name: str = "mask") -> np.ndarray:
    """``mask`` as booleans (True = may attend): booleans, or integers that are all 0 or 1; else an error.

    Parameters
    ----------
    mask, name
        The mask, and its name in the error.

    Returns
    -------
    ndarray of bool
        ``mask``, of its shape.

    Examples
    --------
    >>> as_bool_mask([[1, 0]]).tolist()
    [[True, False]]
    """
    try:
        array = np.asarray(mask)
    except (ValueError, TypeError) as error:  # ragged nested lists
        raise TypeError(f"{name} could not be read as a rectangular array: {error}") from None
    if array.dtype == np.bool_:
        return array
    if array.dtype.kind in "iu":
        if np.all((array == 0) | (array == 1)):
            return array.astype(bool)
        raise ValueError(f"{name} has integer values other than 0 and 1; expected a boolean array")
    raise TypeError(f"{name} has dtype {array.dtype}; expected a boolean array (True where attention is allowed)")


def check_min_ndim(array: np.ndarray, name: str, min_ndim: int, layout: str) -> None:
    """Refuse an ``array`` of fewer than ``min_ndim`` dimensions, quoting its ``layout`` (``"(..., n_q, d_k)"``).

    Parameters
    ----------
    array, name, min_ndim, layout
        The array, its name, the fewest dimensions allowed, the expected axes.

    Examples
    --------
    >>> check_min_ndim(np.ones(3), "q", 2, "(..., n_q, d_k)")
    Traceback (most recent call last):
    ...
    ValueError: q has shape (3,) but needs at least 2 dimensions, laid out as (..., n_q, d_k)
    """
    if array.ndim < min_ndim:
        raise ValueError(f"{name} has shape {array.shape} but needs at least {min_ndim} dimensions, laid out as {layout}")


def broadcast_batch_shapes(shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    """Broadcast the leading (batch, head) shapes of named arrays, or say which ones clash.

    Parameters
    ----------
    shapes : dict of str to tuple of int
        Each array's name and its leading shape.

    Returns
    -------
    tuple of int
        The broadcast shape.

    Examples
    --------
    >>> broadcast_batch_shapes({"q": (2, 8), "k": (1, 8)})
    (2, 8)
    """
    try:
        return tuple(np.broadcast_shapes(*shapes.values()))
    except ValueError:
        listing = ", ".join(f"{name} has {shape}" for name, shape in shapes.items())
        raise ValueError(f"the leading (batch, head) dimensions do not broadcast: {listing}") from None


# --- layouts: the shapes of weight trees, declared once -----------------------------------------------------


_Layout = NamedTuple("_Layout", [("dims", tuple)])  # the named dimensions, in order
_NormLayout = NamedTuple("_NormLayout", [("dim", str)])  # gamma and beta are each (dim,)
_StackLayout = NamedTuple("_StackLayout", [("kind", type), ("count", str)])  # each layer's NamedTuple, their count


class Array:
    """The annotation of an array field of a weight NamedTuple: ``w_q: Array["d_model, d_kv"]``, its layout.

    Parameters
    ----------
    layout : str
        The named dimensions, in order; ``Array("d_model")`` is ``Array["d_model"]``.

    Examples
    --------
    >>> typing.get_args(Array["d_model, d_ff"])[1].dims
    ('d_model', 'd_ff')
    """

    def __new__(cls, layout: str):
        return Annotated[np.ndarray, _Layout(tuple(d.strip() for d in layout.split(",")))]

    __class_getitem__ = __new__


class Norm:
    """The annotation of a layer norm's ``(gamma, beta)`` pair, each of one dimension: ``norm_1: Norm["d_model"]``.

    Parameters
    ----------
    dim : str
        The dimension of ``gamma`` and of ``beta``.

    Examples
    --------
    >>> typing.get_args(Norm["d_model"])[1].dim
    'd_model'
    """

    def __new__(cls, dim: str):
        return Annotated[tuple, _NormLayout(dim)]

    __class_getitem__ = __new__


class Stack:
    """The annotation of a tuple of layers, counted by a dimension: ``layers: Stack[EncoderLayerWeights, "n_layers"]``.

    Parameters
    ----------
    kind, count
        The weight NamedTuple of each layer, and the dimension that counts them.

    Examples
    --------
    >>> typing.get_args(Stack[tuple, "n_layers"])[1].count
    'n_layers'
    """

    def __new__(cls, kind: type, count: str):
        return Annotated[tuple, _StackLayout(kind, count)]

    @classmethod
    def __class_getitem__(cls, spec):
        return cls.__new__(cls, *spec)


class Dims:
    """The sizes of named dimensions, each with the words that say how it was fixed (for the errors).

    Parameters
    ----------
    **fixed : tuple of (int, str)
        ``name=(size, why)``: ``d_model=(8, "x has d_model = 8")``.

    Examples
    --------
    >>> dims = Dims(d_model=(8, "x has d_model = 8"))
    >>> dims.alias("d_kv", "d_model")
    >>> dims["d_kv"], dims.why(("d_model", "d_kv"))
    (8, 'x has d_model = 8')
    """

    def __init__(self, **fixed):
        self._size, self._why, self._by_leaf, self._alias = {}, {}, set(), {}
        for name, (size, why) in fixed.items():
            self.fix(name, size, why)

    def fix(self, name: str, size: int, why: str, by_leaf: bool = False) -> None:
        """Fix dimension ``name`` to ``size``, ``why`` saying how (a leaf's shape when ``by_leaf``)."""
        self._size[name], self._why[name] = int(size), why
        if by_leaf:
            self._by_leaf.add(name)

    def alias(self, name: str, of: str) -> None:
        """Dimension ``name`` is dimension ``of`` (the key heads are as wide as the model)."""
        self._alias[name] = of

    def __getitem__(self, name: str):
        return self._size.get(self._alias.get(name, name))

    def why(self, names) -> str:
        """How the fixed ones of ``names`` were fixed, those fixed by a leaf first."""
        fixed = list(dict.fromkeys(self._alias.get(n, n) for n in names if self[n] is not None))
        fixed.sort(key=lambda n: n not in self._by_leaf)
        return " and ".join(self._why[n] for n in fixed)


@functools.lru_cache(maxsize=None)
def _field_layouts(kind: type) -> tuple:
    hints = typing.get_type_hints(kind, include_extras=True)
    return tuple((field, typing.get_args(hints[field])[1] if typing.get_origin(hints[field]) is Annotated
                  else hints[field]) for field in kind._fields)


def _must_be(value, kind: type, name: str, see: str | None):
    if not isinstance(value, kind):
        wanted = f"a {kind.__name__} (see {see})" if see else kind.__name__
        raise TypeError(f"{name} must be {wanted}, got {type(value).__name__}")


def _leaf(value, dims: tuple, name: str, sizes: Dims) -> np.ndarray:
    array = as_float_array(value, name)
    expected = tuple(sizes[d] for d in dims)
    if array.ndim != len(dims) or any(e is not None and e != s for e, s in zip(expected, array.shape)):
        shown = "(" + ", ".join(str(d if e is None else e) for d, e in zip(dims, expected)) + (",)" if len(dims) == 1 else ")")
        raise ValueError(f"{name} has shape {array.shape} but {sizes.why(dims)}; expected {shown}")
    for d, size in zip(dims, array.shape):
        if sizes[d] is None:
            sizes.fix(d, size, f"{name} has shape {array.shape}", by_leaf=True)
    return array


def check_weights(tree, kind: type, name: str, sizes: Dims, see: str | None = None):
    """The one checker of weight trees: ``tree`` a ``kind`` whose arrays fit the layouts its fields declare.

    A dimension not yet in ``sizes`` is fixed by the first leaf that has it; an error names the leaf by
    its place (``weights.norm_1[0]``) and says how the dimensions it breaks were fixed.

    Parameters
    ----------
    tree, kind, name
        The weights, the NamedTuple they must be (its fields annotated with :class:`Array`, :class:`Norm`,
        :class:`Stack` or another such NamedTuple), and their name in errors.
    sizes : Dims
        The dimensions fixed so far; those the tree fixes are added.
    see : str, optional
        The function that makes such weights, named when ``tree`` is not a ``kind``.

    Returns
    -------
    NamedTuple
        The tree of the same structure, its leaves float arrays.

    Examples
    --------
    >>> class Linear(NamedTuple):
    ...     w: Array["d_in, d_out"]
    ...     b: Array["d_out"]
    >>> check_weights(Linear(np.ones((2, 3)), np.zeros(4)), Linear, "weights", Dims(d_in=(2, "x has d_in = 2")))
    Traceback (most recent call last):
    ...
    ValueError: weights.b has shape (4,) but weights.w has shape (2, 3); expected (3,)
    """
    _must_be(tree, kind, name, see)
    checked = []
    for field, layout in _field_layouts(kind):
        value, path = getattr(tree, field), f"{name}.{field}"
        if isinstance(layout, _Layout):
            checked.append(_leaf(value, layout.dims, path, sizes))
        elif isinstance(layout, _NormLayout):
            if not isinstance(value, (tuple, list)) or len(value) != 2:
                got = f"a {type(value).__name__} of {len(value)}" if isinstance(value, (tuple, list)) else type(value).__name__
                raise TypeError(f"{path} must be a pair (gamma, beta), got {got}")
            checked.append(tuple(_leaf(v, (layout.dim,), f"{path}[{i}]", sizes) for i, v in enumerate(value)))
        elif isinstance(layout, _StackLayout):
            count = sizes[layout.count]
            if not isinstance(value, (tuple, list)) or (count is not None and len(value) != count):
                raise ValueError(f"{path} must hold {layout.count} = {count} {layout.kind.__name__}, got "
                                 f"{len(value) if isinstance(value, (tuple, list)) else type(value).__name__}")
            checked.append(tuple(check_weights(v, layout.kind, f"{path}[{i}]", sizes) for i, v in enumerate(value)))
        else:  # a sub-tree
            checked.append(check_weights(value, layout, path, sizes))
    return kind(*checked)


# --- numbers and flags ---------------------------------------------------------------------------------------


def check_positive_int(value, name: str, minimum: int = 1) -> int:
    """``value`` as an int if it is an integer (not a bool or a float) of at least ``minimum``, else an error.

    Parameters
    ----------
    value, name
        The number, and its name in the error.
    minimum : int, optional
        The smallest value allowed; default 1.

    Returns
    -------
    int
        ``value``.

    Examples
    --------
    >>> check_positive_int(np.int64(3), "n_heads")
    3
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def check_bool(value, name: str) -> bool:
    """``value`` as a bool if it is ``True`` or ``False`` (``np.bool_`` too); ``0``, ``1`` or ``"yes"`` are refused.

    Parameters
    ----------
    value, name
        The flag, and its name in the error.

    Returns
    -------
    bool
        ``value``.

    Examples
    --------
    >>> check_bool(np.bool_(True), "causal")
    True
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_seed(seed, name: str = "seed") -> np.random.Generator:
    """A generator from ``seed``: a non-negative integer, or a ``numpy.random.Generator`` used as it is.

    Parameters
    ----------
    seed, name
        The seed (or a generator to go on drawing from), and its name in the error.

    Returns
    -------
    numpy.random.Generator
        ``numpy.random.default_rng(seed)``, or ``seed``.

    Examples
    --------
    >>> int(check_seed(0).integers(10)) == int(np.random.default_rng(0).integers(10))
    True
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{name} must be a non-negative integer or a numpy Generator, got {seed!r}")
    return np.random.default_rng(seed)


def check_shape(shape, name: str) -> tuple[int, ...]:
    """``shape`` as a tuple of ints, each at least 0 (floats refused, not truncated), naming a bad entry ``name[i]``.

    Parameters
    ----------
    shape, name
        The sizes, and their name in the error.

    Returns
    -------
    tuple of int
        The sizes.

    Examples
    --------
    >>> check_shape([2, 3], "batch_shape")
    (2, 3)
    """
    if isinstance(shape, (str, bytes)):
        raise TypeError(f"{name} must be a tuple of sizes, got {shape!r}")
    try:
        sizes = tuple(shape)
    except TypeError:
        raise TypeError(f"{name} must be a tuple of sizes, got {shape!r}") from None
    return tuple(check_positive_int(size, f"{name}[{i}]", minimum=0) for i, size in enumerate(sizes))


def check_axis(axis, ndim: int, name: str = "axis") -> int:
    """``axis`` as an index in ``0 .. ndim - 1`` (negative ones count from the end), or an error.

    Parameters
    ----------
    axis, ndim, name
        The axis, the dimensions of the array it indexes, its name in the error.

    Returns
    -------
    int
        ``axis mod ndim``.

    Examples
    --------
    >>> check_axis(-1, 3)
    2
    """
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}={axis} is out of range for an array with {ndim} dimensions")
    return int(axis) % ndim
