"""The one comparison of every homework check, :func:`check_array`, and the checks built on it for a number
(:func:`check_number`) and for any function against a reference (:func:`check_function`).

:func:`check_array` documents the comparison; :func:`compare` is its kernel.

>>> _ = check_array(np.eye(2).T, np.eye(2), "identity")
✓ identity: correct (shape (2, 2), floats)
"""

from __future__ import annotations

import copy
import math
import numbers
import warnings
from collections.abc import Callable

import numpy as np

from ..validation import check_bool
from .verdict import CheckResult, Failure, call_student, describe, finish, function_name

__all__ = ["check_array", "check_function", "check_number"]


def _check_tolerance(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a non-negative finite number, got {value!r}")
    return float(value)


# --- the one comparison: every check compares a student's result with it -----------------------------

# the dtype kinds each kind of answer accepts, and what a failure asks for instead
_ACCEPTED = {"bool": "b", "int": "iu", "float": "f", "number": "iuf"}
_WANTED = {"bool": "booleans are expected (True or False): use a comparison, or .astype(bool)",
           "int": "integers are expected (token ids, counts, lengths): use an integer dtype, e.g. .astype(int)",
           "float": "real numbers (floats) are expected",
           "number": "a number is expected"}
_FOUND = {"b": "booleans", "i": "integers", "u": "integers", "f": "floats"}


def _at(context: str) -> str:
    return f" {context}" if context else ""


def answer_array(value, what: str, context: str = "", single: bool = False) -> np.ndarray:
    """Unchecked kernel: the student's result as an array of booleans or real numbers (its dtype kept), or a failure.

    ``single``: one number is expected, and the messages say so.
    """
    where = _at(context)
    try:
        array = np.asarray(value)
    except Exception:  # ragged lists and other odd objects
        raise Failure(f"{what} is a {type(value).__name__} that is not a rectangular array of numbers"
                       f"{where}") from None
    if array.dtype.kind in "US":
        raise Failure(f"{what} is the text {value!r}{where}; write the number itself, without quotes"
                       if array.ndim == 0 else f"{what} holds text{where}, not numbers")
    if array.dtype.kind == "c":
        raise Failure(f"{what} is complex{where}; " + ("a real number is expected" if single
                                                         else "real numbers are expected"))
    if array.dtype.kind not in "biuf":
        raise Failure(f"{what} is a {type(value).__name__} of dtype {array.dtype}{where}, not "
                       + ("a number" if single else "an array of numbers"))
    return array


def shape_hint(got: tuple, expected: tuple) -> str:
    """Unchecked kernel: why a shape may be wrong (empty, transposed, reshaped, broadcast), or ""."""
    if math.prod(got) == 0 < math.prod(expected):
        return " (an empty array: it holds no values at all)"
    if len(got) >= 2 and got == expected[:-2] + (expected[-1], expected[-2]):
        return " (the last two axes are swapped: a transpose?)"
    if math.prod(got) == math.prod(expected):
        return " (the right number of values in the wrong layout: check the reshape and the axis order)"
    try:
        broadcasts = np.broadcast_shapes(got, expected) == expected
    except ValueError:
        broadcasts = False
    return (" (numpy would broadcast it to the expected shape, but the shape itself must be the expected one)"
            if broadcasts else "")


def _kind(expected: np.ndarray) -> str:
    """The kind of answer an expected array asks for, from its dtype: bool, int or float."""
    return {"b": "bool", "i": "int", "u": "int", "f": "float"}[expected.dtype.kind]


def _wrong_entries(array: np.ndarray, expected: np.ndarray, kind: str, rtol: float, atol: float) -> np.ndarray:
    """Where an array of the right shape and kind differs: booleans and integers exactly, numbers within tolerance."""
    if kind in ("bool", "int"):
        return array != expected  # (same shape)
    return ~np.isclose(array, expected, rtol=rtol, atol=atol)  # (same shape)


def _difference(got, expected: np.ndarray, what: str, context: str = "", *, rtol: float = 1e-6,
                atol: float = 1e-9, kind: str | None = None, values: bool = True) -> str | None:
    """The first way ``got`` differs from ``expected``, in plain words without the expected values, or None.

    In this order: what ``got`` is (an array of booleans or real numbers), its shape (exactly: no
    broadcasting), its dtype's kind (``kind``, by default the expected array's: see :func:`check_array`),
    NaN or inf where the expected value is finite, then (``values``) the values: booleans and integers
    exactly, numbers within ``|got - expected| <= atol + rtol |expected|``, an infinite expected value
    by the same infinity.
    """
    kind = kind or _kind(expected)
    single, where = expected.ndim == 0, _at(context)
    try:
        array = answer_array(got, what, context, single)
    except Failure as failure:
        return str(failure)
    if array.shape != expected.shape:
        if single:
            noun = "an array" if isinstance(got, np.ndarray) else f"a {type(got).__name__}"
            return f"{what} is {noun} of shape {array.shape}{where}; a single number is expected"
        return (f"{what}: wrong shape{where}: expected {expected.shape}, got {array.shape}"
                + shape_hint(array.shape, expected.shape))
    if array.dtype.kind not in _ACCEPTED[kind]:
        if single and kind == "number":  # a boolean
            return f"{what} is {array.item()!r}{where}; a number is expected"
        found = ("0s and 1s" if kind == "bool" and np.all((array == 0) | (array == 1))
                 else _FOUND[array.dtype.kind])
        return f"{what}: {found} of dtype {array.dtype}{where}; {_WANTED[kind]}"
    finite = np.isfinite(expected)  # (same shape): an infinite expected entry must be the same infinity
    if array.dtype.kind == "f" and np.any(finite & ~np.isfinite(array)):
        return (f"{what} is {array.item()}{where}; a finite number is expected" if single
                else f"{what}: NaN or inf{where}")
    if not values:
        return None
    wrong = _wrong_entries(array, expected, kind, rtol, atol)  # (same shape)
    if not np.any(wrong):
        return None
    if single:
        shown = f"{array.item():.6g}" if array.dtype.kind != "b" else repr(array.item())
        return f"{what} = {shown} is not right{where}"
    if (array.ndim >= 2 and array.shape[-1] == array.shape[-2]
            and not np.any(_wrong_entries(array, np.swapaxes(expected, -1, -2), kind, rtol, atol))):
        return f"{what}: off by a transpose{where} (rows and columns are swapped)"
    count = f"{int(np.sum(wrong))} of {wrong.size}"
    if kind == "bool":
        return f"{what}: wrong values{where}: {count} entries differ"
    both = finite & np.isfinite(array)  # (same shape): where a difference is a number
    largest = (f" (largest difference {float(np.max(np.abs(array[both] - expected[both]))):.3g})"
               if np.any(both & wrong) else "")
    return f"{what}: wrong values{where}: {count} are wrong{largest}"


def agrees(got, expected: np.ndarray, **options) -> bool:
    """Unchecked kernel: whether ``got`` passes :func:`_difference` against ``expected`` (same options)."""
    return _difference(got, expected, "", **options) is None


def compare(got, expected: np.ndarray, what: str, context: str = "", **options) -> None:
    """Unchecked kernel: fail with the first difference between ``got`` and ``expected`` (same options as
    :func:`_difference`)."""
    failure = _difference(got, expected, what, context, **options)
    if failure is not None:
        raise Failure(failure)


def first_matching(got: np.ndarray, reference: np.ndarray, mistakes, rtol: float = 1e-6,
                    atol: float = 1e-9) -> str | None:
    """Unchecked kernel: the explanation of the first known mistake whose result ``got`` reproduces, if ``got``
    is wrong."""
    if agrees(got, reference, rtol=rtol, atol=atol):
        return None
    for make, explanation in mistakes:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            candidate = np.asarray(make(), dtype=np.float64)
        if agrees(got, candidate, rtol=rtol, atol=atol, kind="number"):
            return explanation
    return None


def _sums_to_one(sums: np.ndarray) -> bool:
    return agrees(sums, np.ones(np.shape(sums)), rtol=1e-5, atol=1e-6, kind="number")


def require_distribution(weights: np.ndarray, what: str, context: str, over: str) -> None:
    """Unchecked kernel: non-negative rows summing to 1 along the last axis, with plain-words failures."""
    if not np.all(np.isfinite(weights)):
        raise Failure(f"{what}: NaN or inf {context}")
    if np.any(weights < -1e-12):
        raise Failure(f"{what}: negative weights {context} (the smallest is {float(weights.min()):.3g}); "
                       "softmax weights are exponentials divided by a positive sum, so never negative")
    sums = weights.sum(axis=-1)  # (...)
    if _sums_to_one(sums):
        return
    if weights.ndim >= 2 and _sums_to_one(weights.sum(axis=-2)):
        raise Failure(f"{what}: normalised along the wrong axis {context}: the columns sum to 1, "
                       f"but each row ({over}, the last axis) should; use axis=-1")
    worst = float(np.ravel(sums)[np.argmax(np.abs(np.ravel(sums) - 1.0))])
    raise Failure(f"{what}: the rows do not sum to 1 {context} (one sums to {worst:.4g}); "
                   "divide each row's exponentials by that row's own sum")


# --- numbers and arrays -----------------------------------------------------------------------------


def check_number(answer, expected, name: str = "answer", rel_tol: float = 1e-6, *, abs_tol: float = 0.0,
                 hint: str | None = None, quiet: bool = False) -> CheckResult:
    r"""Check a number the student worked out (by hand or in code) against ``expected``.

    .. math:: |a - e| \le \text{abs\_tol} + \text{rel\_tol}\, |e|

    Any integer or float is compared by value (55 or 55.0); a boolean, text, an array or NaN is not a number.

    Parameters
    ----------
    answer : number or None
        The student's number; None (or ``...``) means "not done yet".
    expected, name
        As in :func:`check_array`, one number.
    rel_tol, abs_tol : float
        Tolerances: relative to ``expected``, and absolute.
    hint : str, optional
        Added when the answer is wrong.
    quiet : bool
        As in :func:`check_array`.

    Returns
    -------
    CheckResult
        ``passed`` and the message.

    Examples
    --------
    >>> _ = check_number(None, 2.0, "answer_a12")
    ✗ answer_a12: not done yet (set it to your number)
    >>> _ = check_number(0.196, 0.19557, "answer_a12", rel_tol=1e-3)
    ✗ answer_a12 = 0.196 is close but not within a relative tolerance of 0.001: keep more digits,
      or compute it exactly
    >>> _ = check_number(np.array([0.19557]), 0.195573, "answer_a12", rel_tol=1e-3)
    ✗ answer_a12 is an array of shape (1,); a single number is expected
    >>> check_number(0.19557, 0.195573, "answer_a12", rel_tol=1e-3).passed
    ✓ answer_a12 is right
    True
    >>> check_number(1.0, float("nan"), "x")
    Traceback (most recent call last):
    ...
    ValueError: expected must be a finite real number, got nan
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty string, got {name!r}")
    if isinstance(expected, np.generic):
        expected = expected.item()
    if isinstance(expected, bool) or not isinstance(expected, numbers.Real) or not math.isfinite(expected):
        raise ValueError(f"expected must be a finite real number, got {expected!r}")
    rel_tol = _check_tolerance(rel_tol, "rel_tol")
    abs_tol = _check_tolerance(abs_tol, "abs_tol")
    if hint is not None and not isinstance(hint, str):
        raise TypeError(f"hint must be a string or None, got {hint!r}")
    quiet = check_bool(quiet, "quiet")
    target = np.asarray(float(expected))  # ()

    def run() -> str:
        if answer is None or answer is Ellipsis:
            raise Failure(f"{name}: not done yet (set it to your number)")
        compare(answer, target, name, kind="number", values=False)
        if agrees(answer, target, rtol=rel_tol, atol=abs_tol, kind="number"):
            return f"{name} is right"
        value, extra = np.asarray(answer).item(), f"; hint: {hint}" if hint else ""
        if expected != 0 and agrees(answer, -target, rtol=rel_tol, atol=abs_tol, kind="number"):
            raise Failure(f"{name} = {value:.6g} has the right size but the wrong sign{extra}")
        if agrees(answer, target, rtol=max(1e-2, rel_tol), atol=abs_tol, kind="number"):
            raise Failure(f"{name} = {value:.6g} is close but not within a relative tolerance of {rel_tol:g}: "
                           f"keep more digits, or compute it exactly{extra}")
        raise Failure(f"{name} = {value:.6g} is not right{extra}")

    return finish(run, name, quiet)


def _expected_array(expected) -> np.ndarray:
    """``expected`` as an array of booleans or real numbers without NaN, or an error naming it."""
    try:
        array = np.asarray(expected)
    except Exception:
        raise ValueError(f"expected must be a rectangular array, got a {type(expected).__name__}") from None
    if array.dtype.kind not in "biuf":
        raise ValueError(f"expected must hold booleans or real numbers, got dtype {array.dtype}")
    if array.dtype.kind == "f" and np.any(np.isnan(array)):
        raise ValueError("expected must not hold NaN (infinite entries are compared as such)")
    return array


def check_array(answer, expected, name: str = "answer", *, rtol: float = 1e-6, atol: float = 1e-9,
                values: bool = True, context: str = "", quiet: bool = False) -> CheckResult:
    r"""Check an array (or one number) against ``expected``: its shape, its dtype, then its values.

    .. math:: \operatorname{shape}(a) = \operatorname{shape}(e), \qquad
              |a_i - e_i| \le \text{atol} + \text{rtol}\, |e_i| \ \text{for every entry } i

    The shape exactly (no broadcasting: a ``(1, n)`` or empty answer to ``(n, n)`` is wrong); the dtype of
    the expected kind (booleans and integers compared exactly, floats of any width within the
    tolerances); NaN or inf only where expected. The first problem is named in plain words, never with
    the expected values.

    Parameters
    ----------
    answer : array_like
        The student's array or number.
    expected : array_like
        The right answer: booleans, integers or floats, without NaN; never shown.
    name : str
        The answer's name in the message.
    rtol, atol : float
        Tolerances for float entries: ``|a - e| <= atol + rtol |e|``.
    values : bool
        False compares the shape, the dtype and finiteness only, not the values (for a property test,
        which then compares two results of the student's function with each other).
    context : str
        Where, in words (say ``"for n = 5"``), added to the message.
    quiet : bool
        Only return the verdict, without printing it.

    Returns
    -------
    CheckResult
        ``passed`` and the message (printed after ✓ or ✗ unless ``quiet``).

    Examples
    --------
    >>> from attnbook import causal_mask
    >>> _ = check_array(np.zeros((0, 1, 1), dtype=bool), causal_mask(3), "mask", context="for n = 3")
    ✗ mask: wrong shape for n = 3: expected (3, 3), got (0, 1, 1) (an empty array: it holds no values at all)
    >>> _ = check_array(np.tril(np.ones((3, 3))), causal_mask(3), "mask")
    ✗ mask: 0s and 1s of dtype float64; booleans are expected (True or False): use a comparison, or
      .astype(bool)
    >>> _ = check_array(causal_mask(3).T, causal_mask(3), "mask")
    ✗ mask: off by a transpose (rows and columns are swapped)
    >>> check_array(causal_mask(3), causal_mask(3), "mask", context="for n = 3").passed
    ✓ mask: correct for n = 3 (shape (3, 3), booleans)
    True
    >>> check_array(np.ones(3), [1.0, np.nan, 1.0])
    Traceback (most recent call last):
    ...
    ValueError: expected must not hold NaN (infinite entries are compared as such)
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty string, got {name!r}")
    expected = _expected_array(expected)
    rtol = _check_tolerance(rtol, "rtol")
    atol = _check_tolerance(atol, "atol")
    values = check_bool(values, "values")
    if not isinstance(context, str):
        raise TypeError(f"context must be a string, got {context!r}")
    quiet = check_bool(quiet, "quiet")
    found = _FOUND[expected.dtype.kind]
    if values:
        success = f"{name}: correct{_at(context)} (shape {expected.shape}, {found})"
    else:
        success = f"{name}: shape {expected.shape} and {found} as expected{_at(context)} (values not compared)"

    def run() -> str:
        compare(answer, expected, name, context, rtol=rtol, atol=atol, values=values)
        return success

    return finish(run, name, quiet)


# --- any function against a reference ----------------------------------------------------------------


def _compare_results(got, expected, what: str, context: str, rtol: float, atol: float) -> None:
    if isinstance(expected, tuple):
        fields = getattr(expected, "_fields", None)
        if isinstance(got, np.ndarray) or not isinstance(got, (tuple, list)):
            raise Failure(f"{what}: returned a single {type(got).__name__}; expected {len(expected)} results "
                           f"({', '.join(fields) if fields else 'a tuple'}) {context}")
        if len(got) != len(expected):
            raise Failure(f"{what}: returned {len(got)} results; expected {len(expected)} {context}")
        for index, (part, reference) in enumerate(zip(got, expected)):
            label = fields[index] if fields else f"part {index + 1}"
            _compare_results(part, reference, f"{what} ({label})", context, rtol, atol)
        return
    compare(got, _expected_array(expected), what, context, rtol=rtol, atol=atol)


def check_function(fn, reference: Callable, cases, name: str | None = None, *, rtol: float = 1e-6,
                   atol: float = 1e-9, quiet: bool = False) -> CheckResult:
    r"""Call ``fn`` and ``reference`` on each tuple of arguments in ``cases`` and compare the results.

    .. math:: \text{fn}(*c) \approx \text{reference}(*c) \text{ for every case } c

    Numbers, arrays or tuples of arrays, compared part by part by :func:`check_array`; the first difference
    is reported with the case's input shapes.

    Parameters
    ----------
    fn : callable
        The student's function.
    reference : callable
        The package's function it should match.
    cases : list of tuple
        Argument tuples, each passed to both.
    name : str, optional
        The function's name in the message; default its ``__name__``.
    rtol, atol, quiet
        As in :func:`check_array`.

    Returns
    -------
    CheckResult
        ``passed`` and the message.

    Examples
    --------
    >>> from attnbook import layer_norm
    >>> x = np.arange(6.0).reshape(2, 3)
    >>> def centred_only(x):
    ...     return x - x.mean(axis=-1, keepdims=True)  # (n, d): forgot to divide by the standard deviation
    >>> _ = check_function(centred_only, layer_norm, [(x,)])
    ✗ centred_only: wrong values on case 1 of 1, inputs (an array of shape (2, 3)): 4 of 6 are wrong
      (largest difference 0.225)
    >>> check_function(layer_norm, layer_norm, [(x,)]).passed
    ✓ layer_norm: matches the reference on its 1 case
    True
    >>> check_function(layer_norm, layer_norm, [])
    Traceback (most recent call last):
    ...
    ValueError: cases must be a non-empty list of argument tuples, got []
    """
    if not callable(reference):
        raise TypeError(f"reference must be a function, got {type(reference).__name__}")
    if not isinstance(cases, (list, tuple)) or not cases or not all(isinstance(c, tuple) for c in cases):
        raise ValueError(f"cases must be a non-empty list of argument tuples, got {cases!r}")
    if name is not None and (not isinstance(name, str) or not name):
        raise TypeError(f"name must be a non-empty string or None, got {name!r}")
    rtol = _check_tolerance(rtol, "rtol")
    atol = _check_tolerance(atol, "atol")
    quiet = check_bool(quiet, "quiet")
    label = name or function_name(fn)

    def run() -> str:
        for index, args in enumerate(cases):
            expected = reference(*copy.deepcopy(args))
            got = call_student(fn, label, *args)
            context = f"on case {index + 1} of {len(cases)}, inputs {describe(args)}"
            _compare_results(got, expected, label, context, rtol, atol)
        return f"{label}: matches the reference on " + ("its 1 case" if len(cases) == 1 else f"all {len(cases)} cases")

    return finish(run, label, quiet)
