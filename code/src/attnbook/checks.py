"""Public checks for the homework: run a student's function, compare it with the package, say what is wrong.

Every check chooses its own inputs (seeded), calls the student's function on copies of them, compares
the result with this package's reference implementation, and reports the first problem it finds in
plain words: wrong shape (expected vs got), rows that do not sum to 1, negative weights, NaN or inf at
large logits, a transposed result, a missing scaling factor, "not done yet" (the stub still raises
``NotImplementedError`` or returns ``None``), or the name of the exception the function raised. A
check never raises because of the student's code, never prints a traceback, and never prints the
reference values for its inputs. It returns a :class:`CheckResult` and prints its message after a
✓ or ✗ marker (``quiet=True`` only returns it). Hidden tests reuse the checks on other inputs
(``seed=``) and ``assert result.passed, result.message``.

>>> import numpy as np
>>> from attnbook import softmax
>>> result = check_softmax(softmax)
✓ softmax: correct on the rows of a 3 x 6 array, a batch of shape (2, 3, 6), a vector of 6 logits and logits of ±1000
>>> result.passed
True
>>> def naive_softmax(x):
...     e = np.exp(x)
...     return e / e.sum(axis=-1, keepdims=True)
>>> _ = check_softmax(naive_softmax)  # doctest: +ELLIPSIS
✗ naive_softmax: not stable for large inputs: logits of 1000 give NaN or inf ...
>>> def unfinished(x):
...     raise NotImplementedError
>>> _ = check_softmax(unfinished)
✗ unfinished: not done yet (it still raises NotImplementedError); write its body, then run this check again
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .attention import scaled_dot_product_attention, self_attention
from .learning.decoding import bigram_step, greedy_decode, nucleus_filter
from .masks import causal_mask
from .multihead import merge_heads, split_heads
from .positional import sinusoidal_encoding
from .probes import numerical_jacobian
from .softmax import softmax
from .transformer import layer_norm
from .validation import check_bool

__all__ = [
    "CheckResult",
    "check",
    "check_attention",
    "check_causal_mask",
    "check_function",
    "check_greedy_decode",
    "check_layer_norm_backward",
    "check_merge_heads",
    "check_nucleus_filter",
    "check_number",
    "check_self_attention",
    "check_sinusoidal_encoding",
    "check_softmax",
    "check_split_heads",
]

PASS_MARK = "✓"
FAIL_MARK = "✗"
_MAX_ERROR_TEXT = 200  # characters of a student's exception message that are repeated


@dataclass(frozen=True)
class CheckResult:
    """The verdict of a check: ``passed`` and a message in plain words (printed with a ✓ or ✗).

    Attributes
    ----------
    passed : bool
        Whether the submitted work passed.
    message : str
        What was checked and, on failure, what differs, in plain words.

    Examples
    --------
    >>> print(CheckResult(True, "softmax rows sum to 1"))
    ✓ softmax rows sum to 1
    """

    passed: bool
    message: str

    def __str__(self) -> str:
        return f"{PASS_MARK if self.passed else FAIL_MARK} {self.message}"


class _Failure(Exception):
    """Stops a check at the first problem found; its text is the message shown to the student."""


# --- plumbing shared by every check ----------------------------------------------------------------


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _check_tolerance(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a non-negative finite number, got {value!r}")
    return float(value)


def check(body: Callable[..., str]) -> Callable[..., CheckResult]:
    r"""Make a public check out of ``body(fn, label, rng, seed, **options) -> success message``.

    The check it returns, ``check_x(fn, *, seed=0, quiet=False, **options)``, does what every check
    shares: it refuses a bad ``seed`` or ``quiet`` (and a non-bool for a bool option), names the
    student's function (``label``), draws the inputs from ``np.random.default_rng(seed)`` (``rng``),
    and wraps the verdict: the body's return value is the success message, a ``_Failure`` it raises
    the problem found, and anything else a failure without a traceback (:func:`_finish`). It also
    writes what every check's docstring shares: the body's docstring gives the summary, the math,
    ``Parameters`` with ``fn`` and the body's own options, and ``Examples``; the public docstring adds
    the usage line, ``seed`` (after ``fn``), ``quiet`` (last) and ``Returns``.

    .. math:: \text{check}(fn) = \text{verdict}\big(\text{body}(fn, \text{label}, \text{rng}(\text{seed}), \text{seed})\big)

    Parameters
    ----------
    body : callable
        ``body(fn, label, rng, seed, **options)``: returns the success message or raises ``_Failure``;
        its keyword-only parameters are the check's options (a bool default makes a bool option).

    Returns
    -------
    callable
        The public check, returning a :class:`CheckResult`.

    Examples
    --------
    >>> @check
    ... def check_positive(fn, label, rng, seed):
    ...     if not fn(rng.random()) > 0:
    ...         raise _Failure(f"{label}: not positive")
    ...     return f"{label}: positive"
    >>> check_positive(lambda x: x + 1).passed
    ✓ your function: positive
    True
    >>> check_positive(abs, seed=-1)
    Traceback (most recent call last):
    ...
    ValueError: seed must be a non-negative integer, got -1
    """
    options = {name: parameter for name, parameter in inspect.signature(body).parameters.items()
               if parameter.kind is inspect.Parameter.KEYWORD_ONLY}

    @functools.wraps(body)
    def run_check(fn, *, seed: int = 0, quiet: bool = False, **given) -> CheckResult:
        seed = _check_seed(seed)
        quiet = check_bool(quiet, "quiet")
        unknown = set(given) - set(options)
        if unknown:
            raise TypeError(f"{body.__name__}() got an unexpected keyword argument {sorted(unknown)[0]!r}")
        for name, value in given.items():
            if isinstance(options[name].default, bool):
                given[name] = check_bool(value, name)
        label = _function_name(fn)
        rng = np.random.default_rng(seed)
        return _finish(lambda: body(fn, label, rng, seed, **given), label, quiet)

    keyword = inspect.Parameter.KEYWORD_ONLY
    run_check.__signature__ = inspect.Signature(
        [inspect.Parameter("fn", inspect.Parameter.POSITIONAL_OR_KEYWORD),
         inspect.Parameter("seed", keyword, default=0, annotation=int),
         *options.values(),
         inspect.Parameter("quiet", keyword, default=False, annotation=bool)],
        return_annotation=CheckResult)
    if body.__doc__:
        run_check.__doc__ = _public_docstring(body.__doc__, body.__name__, options)
    return run_check


# what every check's docstring shares: the decorator writes it, the body documents only its own parts
_SEED_ENTRY = "seed : int\n    Chooses the inputs (hidden tests pass other seeds)."
_QUIET_ENTRY = "quiet : bool\n    Only return the verdict, without printing it."
_RETURNS = "Returns\n-------\nCheckResult\n    ``passed`` and the message (printed after ✓ or ✗ unless ``quiet``)."
_PARAMETERS = "\nParameters\n----------\n"
_EXAMPLES = "\n\nExamples\n--------\n"


def _public_docstring(doc: str, name: str, options: dict) -> str:
    """A check body's docstring completed into its public check's: usage, ``seed``, ``quiet``, Returns.

    The body's docstring holds the summary, the math, ``Parameters`` with ``fn`` and the body's own
    options (after ``fn``), and ``Examples``; ``seed`` is added after ``fn`` and ``quiet`` last.
    """
    text = inspect.cleandoc(doc)
    head, found, rest = text.partition(_PARAMETERS)
    parameters, found_examples, examples = rest.partition(_EXAMPLES)
    if not (found and found_examples and parameters.startswith("fn : ")):
        raise ValueError(f"{name}: a check's docstring needs Parameters starting with fn, then Examples")
    lines = parameters.split("\n")
    end_of_fn = next((i for i, line in enumerate(lines) if i and not line.startswith(" ")), len(lines))
    parameters = "\n".join([*lines[:end_of_fn], _SEED_ENTRY, *lines[end_of_fn:], _QUIET_ENTRY])
    usage = ", ".join(["fn", "*", "seed=0", *(f"{option}={parameter.default!r}"
                                              for option, parameter in options.items()), "quiet=False"])
    return (f"{head.rstrip()}\n\nUsed as ``{name}({usage})``: the\ndecorator :func:`check` supplies ``label``, "
            f"``rng`` and the verdict (see there).\n{_PARAMETERS}{parameters}\n\n{_RETURNS}{_EXAMPLES}{examples}")


def _function_name(fn) -> str:
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) and name != "<lambda>" else "your function"


def _finish(run: Callable[[], str], label: str, quiet: bool) -> CheckResult:
    """Run a check body: its return value is the success message, a _Failure the problem found."""
    try:
        result = CheckResult(True, run())
    except _Failure as failure:
        result = CheckResult(False, str(failure))
    except Exception as error:  # an odd return value the check did not foresee: still no traceback
        result = CheckResult(False, f"{label}: the check could not finish ({type(error).__name__}: "
                                    f"{_short(error)}); look at what your function returns")
    if not quiet:
        print(result)
    return result


def _short(error: BaseException) -> str:
    text = " ".join(str(error).split()) or "(no message)"
    return text if len(text) <= _MAX_ERROR_TEXT else text[:_MAX_ERROR_TEXT - 3] + "..."


def _describe(args: Sequence) -> str:
    """The inputs of a call in words, without their values: shapes of arrays, small scalars as such."""
    parts = []
    for arg in args:
        if isinstance(arg, np.ndarray):
            parts.append(f"an array of shape {arg.shape}")
        elif isinstance(arg, (bool, numbers.Number, str)) or arg is None:
            parts.append(repr(arg))
        else:  # lists, named tuples of weights, ...: their type only
            parts.append(type(arg).__name__)
    return "(" + ", ".join(parts) + ")"


def _call(fn, name: str, *args, hint: str = ""):
    """Call the student's function on copies of ``args``; 'not done', errors and None become failures.

    ``hint`` is added to the message when the function raises (say, what usually goes wrong there).
    """
    if not callable(fn):
        raise _Failure(f"{name} is not a function (it is {type(fn).__name__}); define it with def")
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            value = fn(*copy.deepcopy(args))
    except NotImplementedError:
        raise _Failure(f"{name}: not done yet (it still raises NotImplementedError); "
                       "write its body, then run this check again") from None
    except (Exception, SystemExit) as error:  # not KeyboardInterrupt: the student may stop a long run
        raise _Failure(f"{name} raised {type(error).__name__}: {_short(error)} "
                       f"(called with {_describe(args)}){'; ' + hint if hint else ''}") from None
    if value is None:
        raise _Failure(f"{name}: not done yet (it returned None; is a `return` missing?)")
    return value


def _as_numbers(value, what: str) -> np.ndarray:
    """The student's result as a float array, or a failure saying what it is instead."""
    try:
        array = np.asarray(value)
    except Exception:  # ragged lists and other odd objects
        raise _Failure(f"{what} is a {type(value).__name__} that is not a rectangular array of numbers") from None
    if array.dtype.kind not in "biuf":
        raise _Failure(f"{what} is a {type(value).__name__} of dtype {array.dtype}, not an array of numbers")
    return array.astype(np.float64)


def _shape_hint(got: tuple, expected: tuple) -> str:
    if len(got) >= 2 and got == expected[:-2] + (expected[-1], expected[-2]):
        return " (the last two axes are swapped: a transpose?)"
    if math.prod(got) == math.prod(expected):
        return " (the right number of values in the wrong layout: check the reshape and the axis order)"
    return ""


def _compare(got: np.ndarray, expected: np.ndarray, what: str, context: str,
             rtol: float = 1e-6, atol: float = 1e-9) -> None:
    """Fail with the first difference between ``got`` and ``expected``, in words, values not shown."""
    if got.shape != expected.shape:
        raise _Failure(f"{what}: wrong shape {context}: expected {expected.shape}, got {got.shape}"
                       + _shape_hint(got.shape, expected.shape))
    if not np.all(np.isfinite(got)):
        raise _Failure(f"{what}: NaN or inf {context}")
    if np.allclose(got, expected, rtol=rtol, atol=atol):
        return
    if got.ndim >= 2 and got.shape[-1] == got.shape[-2] and np.allclose(got, np.swapaxes(expected, -1, -2),
                                                                        rtol=rtol, atol=atol):
        raise _Failure(f"{what}: off by a transpose {context} (rows and columns are swapped)")
    wrong = ~np.isclose(got, expected, rtol=rtol, atol=atol)  # (same shape as expected)
    largest = float(np.max(np.abs(got - expected)))
    raise _Failure(f"{what}: wrong values {context}: {int(wrong.sum())} of {wrong.size} are wrong "
                   f"(largest difference {largest:.3g})")


def _first_matching(got: np.ndarray, reference: np.ndarray, mistakes, rtol: float = 1e-6,
                    atol: float = 1e-9) -> str | None:
    """The explanation of the first known mistake whose result ``got`` reproduces, if ``got`` is wrong."""
    if got.shape == reference.shape and np.allclose(got, reference, rtol=rtol, atol=atol):
        return None
    for make, explanation in mistakes:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            candidate = np.asarray(make(), dtype=np.float64)
        if candidate.shape == got.shape and np.allclose(got, candidate, rtol=rtol, atol=atol):
            return explanation
    return None


def _check_distribution(weights: np.ndarray, what: str, context: str, over: str) -> None:
    """Non-negative rows summing to 1 along the last axis, with plain-words failures."""
    if not np.all(np.isfinite(weights)):
        raise _Failure(f"{what}: NaN or inf {context}")
    if np.any(weights < -1e-12):
        raise _Failure(f"{what}: negative weights {context} (the smallest is {float(weights.min()):.3g}); "
                       "softmax weights are exponentials divided by a positive sum, so never negative")
    sums = weights.sum(axis=-1)  # (...)
    if np.allclose(sums, 1.0, atol=1e-6):
        return
    if weights.ndim >= 2 and np.allclose(weights.sum(axis=-2), 1.0, atol=1e-6):
        raise _Failure(f"{what}: normalised along the wrong axis {context}: the columns sum to 1, "
                       f"but each row ({over}, the last axis) should; use axis=-1")
    worst = float(np.ravel(sums)[np.argmax(np.abs(np.ravel(sums) - 1.0))])
    raise _Failure(f"{what}: the rows do not sum to 1 {context} (one sums to {worst:.4g}); "
                   "divide each row's exponentials by that row's own sum")


# --- numbers ----------------------------------------------------------------------------------------


def _checked_number(value, name: str):
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise _Failure(f"{name} is an array of shape {value.shape}; a single number is expected")
        value = value.reshape(()).item()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        raise _Failure(f"{name} is {value}; a number is expected")
    if isinstance(value, str):
        raise _Failure(f"{name} is the text {value!r}; write the number itself, without quotes")
    if isinstance(value, complex) or not isinstance(value, numbers.Real):
        raise _Failure(f"{name} is a {type(value).__name__}; a real number is expected")
    if not math.isfinite(value):
        raise _Failure(f"{name} is {value}; a finite number is expected")
    return value


def check_number(answer, expected, name: str = "answer", rel_tol: float = 1e-6, *, abs_tol: float = 0.0,
                 hint: str | None = None, quiet: bool = False) -> CheckResult:
    r"""Check a number the student worked out (by hand or in code) against ``expected``.

    .. math:: |a - e| \le \max(\text{rel\_tol}\, |e|, \text{abs\_tol})

    ``answer`` None (or ``...``) means "not done yet". The message never shows ``expected``; a
    ``hint`` (say, which formula to revisit) is added when the answer is wrong.

    Parameters
    ----------
    answer : number or None
        The student's number; None (or ``...``) means "not done yet".
    expected : float
        The right value, never shown.
    name : str
        The answer's name in the message.
    rel_tol, abs_tol : float
        Tolerances, as in :func:`math.isclose`.
    hint : str, optional
        Added when the answer is wrong.
    quiet : bool
        Only return the verdict, without printing it.

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

    def run() -> str:
        if answer is None or answer is Ellipsis:
            raise _Failure(f"{name}: not done yet (set it to your number)")
        value = _checked_number(answer, name)
        if math.isclose(value, expected, rel_tol=rel_tol, abs_tol=abs_tol):
            return f"{name} is right"
        extra = f"; hint: {hint}" if hint else ""
        if expected != 0 and math.isclose(value, -expected, rel_tol=rel_tol, abs_tol=abs_tol):
            raise _Failure(f"{name} = {value:.6g} has the right size but the wrong sign{extra}")
        if math.isclose(value, expected, rel_tol=max(1e-2, rel_tol), abs_tol=abs_tol):
            raise _Failure(f"{name} = {value:.6g} is close but not within a relative tolerance of {rel_tol:g}: "
                           f"keep more digits, or compute it exactly{extra}")
        raise _Failure(f"{name} = {value:.6g} is not right{extra}")

    return _finish(run, name, quiet)


# --- any function against a reference ----------------------------------------------------------------


def _compare_results(got, expected, what: str, context: str, rtol: float, atol: float) -> None:
    if isinstance(expected, tuple):
        fields = getattr(expected, "_fields", None)
        if isinstance(got, np.ndarray) or not isinstance(got, (tuple, list)):
            raise _Failure(f"{what}: returned a single {type(got).__name__}; expected {len(expected)} results "
                           f"({', '.join(fields) if fields else 'a tuple'}) {context}")
        if len(got) != len(expected):
            raise _Failure(f"{what}: returned {len(got)} results; expected {len(expected)} {context}")
        for index, (part, reference) in enumerate(zip(got, expected)):
            label = fields[index] if fields else f"part {index + 1}"
            _compare_results(part, reference, f"{what} ({label})", context, rtol, atol)
        return
    expected_array = np.asarray(expected, dtype=np.float64)
    _compare(_as_numbers(got, what), expected_array, what, context, rtol, atol)


def check_function(fn, reference: Callable, cases, name: str | None = None, *, rtol: float = 1e-6,
                   atol: float = 1e-9, quiet: bool = False) -> CheckResult:
    r"""Call ``fn`` and ``reference`` on each tuple of arguments in ``cases`` and compare the results.

    .. math:: \text{fn}(*c) \approx \text{reference}(*c) \text{ for every case } c

    Results may be numbers, arrays or tuples of arrays (compared part by part). The first
    difference is reported with the case's input shapes, never the reference values.

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
    rtol, atol : float
        Tolerances, as in :func:`numpy.allclose`.
    quiet : bool
        Only return the verdict, without printing it.

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
    label = name or _function_name(fn)

    def run() -> str:
        for index, args in enumerate(cases):
            expected = reference(*copy.deepcopy(args))
            got = _call(fn, label, *args)
            context = f"on case {index + 1} of {len(cases)}, inputs {_describe(args)}"
            _compare_results(got, expected, label, context, rtol, atol)
        return f"{label}: matches the reference on " + ("its 1 case" if len(cases) == 1 else f"all {len(cases)} cases")

    return _finish(run, label, quiet)


# --- softmax ----------------------------------------------------------------------------------------


@check
def check_softmax(fn, label: str, rng: np.random.Generator, seed: int, *, large_logits: bool = True) -> str:
    r"""Check a student's softmax ``fn(x)`` along the last axis: values, batches, vectors, stability.

    .. math:: \operatorname{softmax}(x)_i = e^{x_i - \max_j x_j} / \textstyle\sum_j e^{x_j - \max_j x_j}

    Parameters
    ----------
    fn : callable
        The student's softmax ``fn(x)``, normalising the last axis.
    large_logits : bool
        Include the stability test (logits of ±1000); False tests values alone.

    Examples
    --------
    >>> _ = check_softmax(lambda x: np.exp(x) / np.exp(x).sum(axis=0, keepdims=True))
    ✗ your function: normalised along the wrong axis on a 3 x 6 array: the columns sum to 1,
      but each row (the logits of one query, the last axis) should; use axis=-1
    """
    rows, cols = 3 + seed % 3, 6 + seed % 2  # rows != cols, so a transpose shows in the shape
    x = rng.normal(scale=2.0, size=(rows, cols))  # (rows, cols)
    batch = rng.normal(scale=2.0, size=(2, rows, cols))  # (2, rows, cols)
    vector = rng.normal(scale=2.0, size=cols)  # (cols,)
    large = np.array([[1000.0, 999.0, 998.0, 0.0], [-1000.0, -1000.0, -999.0, -1000.0]])  # (2, 4)

    context = f"on a {rows} x {cols} array"
    got = _as_numbers(_call(fn, label, x), f"what {label} returned")
    if got.shape != x.shape:
        raise _Failure(f"{label}: wrong shape {context}: expected {x.shape}, got {got.shape}"
                       + _shape_hint(got.shape, x.shape)
                       + ("; softmax returns one weight per logit" if got.size != x.size else ""))
    _check_distribution(got, label, context, "the logits of one query")
    mistakes = [(lambda: softmax(-x), "the logits are negated: subtract each row's maximum from x "
                                      "(x - max), not x from the maximum")]
    explanation = _first_matching(got, softmax(x), mistakes)
    if explanation:
        raise _Failure(f"{label}: wrong values {context}: {explanation}")
    _compare(got, softmax(x), label, context)
    got_batch = _as_numbers(_call(fn, label, batch), f"what {label} returned")
    batch_context = f"on a batch of shape {batch.shape} (it works on 2-D arrays: use axis=-1 and keepdims=True)"
    _compare(got_batch, softmax(batch), label, batch_context)
    got_vector = _as_numbers(_call(fn, label, vector), f"what {label} returned")
    _compare(got_vector, softmax(vector), label, f"on a vector of shape {vector.shape}")
    if not large_logits:
        return (f"{label}: correct on the rows of a {rows} x {cols} array, a batch of shape {batch.shape} "
                f"and a vector of {cols} logits")
    got_large = _as_numbers(_call(fn, label, large), f"what {label} returned")
    if got_large.shape == large.shape and not np.all(np.isfinite(got_large)):
        raise _Failure(f"{label}: not stable for large inputs: logits of 1000 give NaN or inf "
                       "(exp(1000) overflows); subtract each row's maximum before exp")
    _compare(got_large, softmax(large), label, "on logits of ±1000 (subtract each row's maximum before exp)")
    return (f"{label}: correct on the rows of a {rows} x {cols} array, a batch of shape {batch.shape}, "
            f"a vector of {cols} logits and logits of ±1000")


# --- attention --------------------------------------------------------------------------------------


def _output_and_weights(value, label: str, output_shape: tuple, context: str):
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return (_as_numbers(value[0], f"the output of {label}"), _as_numbers(value[1], f"the weights of {label}"))
    if isinstance(value, np.ndarray) and value.shape == output_shape:
        raise _Failure(f"{label}: returned only the output {context}; return the pair (output, weights)")
    raise _Failure(f"{label}: returned a {type(value).__name__} {context}; return the pair (output, weights)")


def _attention_mistakes(q, k, v, d_k: int):
    scores = q @ np.swapaxes(k, -1, -2)  # (..., n_q, n_k)
    root = math.sqrt(d_k)
    return [
        (lambda: softmax(scores), f"off by the scaling factor: divide the scores Q K^T by sqrt(d_k) = {root:g} "
                                  "before the softmax"),
        (lambda: softmax(scores / d_k), f"the scores are divided by d_k = {d_k}; the factor is sqrt(d_k) = {root:g}"),
        (lambda: softmax(scores * root), "the scores are multiplied by sqrt(d_k); divide them by it"),
        (lambda: softmax(np.swapaxes(scores, -1, -2) / root), "the scores are transposed (K Q^T): with queries "
                                                              "as rows the scores are Q K^T"),
        (lambda: softmax(scores / root, axis=-2), "the softmax runs over the queries (the columns); "
                                                  "run it over the keys, the last axis"),
    ]


def _check_attention_pair(got_out, got_w, q, k, v, label, context, mistakes_extra=()):
    reference_out, reference_w = scaled_dot_product_attention(q, k, v)
    if got_w.shape != reference_w.shape:
        raise _Failure(f"the weights of {label}: wrong shape {context}: expected {reference_w.shape} "
                       f"(n_q, n_k), got {got_w.shape}" + _shape_hint(got_w.shape, reference_w.shape))
    if np.all(np.isfinite(got_w)) and not np.allclose(got_w, reference_w, atol=1e-8):
        mistakes = list(mistakes_extra) + _attention_mistakes(q, k, v, q.shape[-1])
        explanation = _first_matching(got_w, reference_w, mistakes)
        if explanation:
            raise _Failure(f"the weights of {label}: wrong values {context}: {explanation}")
    _check_distribution(got_w, f"the weights of {label}", context, "the weights of one query over the keys")
    _compare(got_w, reference_w, f"the weights of {label}", context, atol=1e-8)
    if got_out.shape == reference_out.shape and np.allclose(got_out, reference_w @ v, atol=1e-8):
        return
    _compare(got_out, reference_out, f"the output of {label}", context + " (the output is weights @ v)", atol=1e-8)


@check
def check_attention(fn, label: str, rng: np.random.Generator, seed: int, *, large_scores: bool = True) -> str:
    r"""Check ``fn(q, k, v) -> (output, weights)``: scaled dot-product attention, 2-D and batched.

    .. math:: \operatorname{softmax}(Q K^\top / \sqrt{d_k})\, V

    Parameters
    ----------
    fn : callable
        The student's ``fn(q, k, v) -> (output, weights)``.
    large_scores : bool
        Include the stability test (scores in the thousands).

    Examples
    --------
    >>> def unscaled(q, k, v):
    ...     w = softmax(q @ np.swapaxes(k, -1, -2))
    ...     return w @ v, w
    >>> _ = check_attention(unscaled)
    ✗ the weights of unscaled: wrong values for q (3, 4), k (5, 4), v (5, 2): off by the scaling
      factor: divide the scores Q K^T by sqrt(d_k) = 2 before the softmax
    >>> check_attention(scaled_dot_product_attention).passed
    ✓ scaled_dot_product_attention: correct for q (3, 4), k (5, 4), v (5, 2), for square inputs,
      for a batch of 2 and for large scores
    True
    """
    n_q, n_k, d_k, d_v = 3 + seed % 2, 5 + seed % 3, 4, 2  # n_q != n_k: a transpose shows in the shape
    q, k, v = rng.standard_normal((n_q, d_k)), rng.standard_normal((n_k, d_k)), rng.standard_normal((n_k, d_v))
    square = rng.standard_normal((3, 4, d_k))  # (3, n, d_k): q, k, v of a square case
    batch = [rng.standard_normal((2, n, d)) for n, d in ((n_q, d_k), (n_k, d_k), (n_k, d_v))]
    large = [30.0 * rng.standard_normal((n_q, d_k)), 30.0 * rng.standard_normal((n_k, d_k)), v]

    def shapes(arrays) -> str:
        return ", ".join(f"{n} {a.shape}" for n, a in zip("qkv", arrays))

    batch_hint = "with a batch, transpose only the last two axes of k: np.swapaxes(k, -1, -2), not k.T"
    cases = (((q, k, v), f"for {shapes((q, k, v))}", ""),
             (tuple(square), f"for square inputs {shapes(square)}", ""),
             (tuple(batch), f"for a batch {shapes(batch)}", batch_hint),
             (tuple(large), f"for large scores ({shapes(large)} with entries near ±30)", ""))
    for arrays, context, hint in cases if large_scores else cases[:-1]:
        value = _call(fn, label, *arrays, hint=hint)
        out_shape = arrays[0].shape[:-1] + (arrays[2].shape[-1],)
        got_out, got_w = _output_and_weights(value, label, out_shape, context)
        if arrays is cases[-1][0] and got_w.shape == out_shape[:-1] + (n_k,) and not np.all(np.isfinite(got_w)):
            raise _Failure(f"{label}: not stable for large scores: q and k with entries near ±30 give NaN or "
                           "inf weights; use a stable softmax (subtract each row's maximum before exp)")
        _check_attention_pair(got_out, got_w, *arrays, label, context + (f" ({hint})" if hint else ""))
    extra = " and for large scores" if large_scores else ""
    return f"{label}: correct for {shapes((q, k, v))}, for square inputs, for a batch of 2{extra}"


@check
def check_self_attention(fn, label: str, rng: np.random.Generator, seed: int) -> str:
    r"""Check ``fn(x, w_q, w_k, w_v) -> (output, weights)``: project x to Q, K, V, then attend.

    .. math:: \operatorname{softmax}(X W_Q (X W_K)^\top / \sqrt{d_k})\, X W_V

    Parameters
    ----------
    fn : callable
        The student's ``fn(x, w_q, w_k, w_v) -> (output, weights)``.

    Examples
    --------
    >>> check_self_attention(self_attention).passed
    ✓ self_attention: correct for x (4, 6) with d_k = 3, d_v = 2, and for a batch of 2
    True
    >>> _ = check_self_attention(lambda x, w_q, w_k, w_v: self_attention(x, w_q, w_k, np.eye(6)[:, :2]))
    ✗ the output of your function: wrong values for x (4, 6): it is the weights times x's first
      columns; the values are V = X W_V
    """
    n, d_model, d_k, d_v = 4 + seed % 2, 6, 3, 2
    x = rng.standard_normal((n, d_model))  # (n, d_model)
    w_q, w_k = rng.standard_normal((2, d_model, d_k))  # (d_model, d_k) each
    w_v = rng.standard_normal((d_model, d_v))  # (d_model, d_v)
    x_batch = rng.standard_normal((2, n, d_model))  # (2, n, d_model)

    for inputs, context in ((x, f"for x {x.shape}"),
                            (x_batch, f"for a batch x {x_batch.shape} (transpose only the last two axes)")):
        value = _call(fn, label, inputs, w_q, w_k, w_v)
        got_out, got_w = _output_and_weights(value, label, inputs.shape[:-1] + (d_v,), context)
        q, k, v = inputs @ w_q, inputs @ w_k, inputs @ w_v  # (..., n, d_k), (..., n, d_k), (..., n, d_v)
        reference_w = self_attention(inputs, w_q, w_k, w_v).weights  # (..., n, n)
        raw = [(lambda: softmax(inputs @ np.swapaxes(inputs, -1, -2) / math.sqrt(d_model)),
                "the scores use x itself; project first: Q = X W_Q and K = X W_K")]
        if got_w.shape == reference_w.shape and np.allclose(got_w, reference_w, atol=1e-8):
            if got_out.shape == (inputs @ w_v).shape and np.allclose(got_out, got_w @ inputs[..., :d_v]):
                raise _Failure(f"the output of {label}: wrong values {context}: it is the weights times x's "
                               "first columns; the values are V = X W_V")
        _check_attention_pair(got_out, got_w, q, k, v, label, context, raw)
    return f"{label}: correct for x {x.shape} with d_k = {d_k}, d_v = {d_v}, and for a batch of 2"


# --- masks ------------------------------------------------------------------------------------------


@check
def check_causal_mask(fn, label: str, rng: np.random.Generator, seed: int) -> str:
    r"""Check ``fn(n) -> (n, n)`` boolean causal mask (True = query i may attend to key j <= i).

    .. math:: M_{ij} = [\, j \le i \,]

    Parameters
    ----------
    fn : callable
        The student's ``fn(n) -> (n, n)`` boolean mask.

    Examples
    --------
    >>> _ = check_causal_mask(lambda n: np.triu(np.ones((n, n), dtype=bool)))
    ✗ your function: transposed for n = 4: True above the diagonal lets query i see the future keys
      j > i; the causal mask is True on and below the diagonal (j <= i)
    >>> check_causal_mask(causal_mask).passed
    ✓ causal_mask: correct for n = 4, 1 and 6
    True
    """
    sizes = (4, 1, 6 + seed % 3)

    for n in sizes:
        context = f"for n = {n}"
        value = _call(fn, label, n)
        try:
            array = np.asarray(value)
        except Exception:
            raise _Failure(f"{label}: returned a {type(value).__name__} {context}, not an array") from None
        expected = causal_mask(n)  # (n, n)
        if array.shape != expected.shape:
            raise _Failure(f"{label}: wrong shape {context}: expected {expected.shape}, got {array.shape}")
        if array.dtype.kind == "f" and np.any(np.isneginf(array)):
            raise _Failure(f"{label}: returned an additive mask (0 and -inf) {context}; this book's masks "
                           "are boolean: True where the query may attend")
        if array.dtype != np.bool_:
            if array.dtype.kind in "iuf" and np.all((array == 0) | (array == 1)):
                raise _Failure(f"{label}: returned 0s and 1s of dtype {array.dtype} {context}; return booleans "
                               "(True where the query may attend), e.g. with a comparison or .astype(bool)")
            raise _Failure(f"{label}: returned dtype {array.dtype} {context}; a boolean mask is expected")
        if np.array_equal(array, expected):
            continue
        mistakes = [
            (np.triu(np.ones((n, n), dtype=bool)), "transposed", "True above the diagonal lets query i "
             "see the future keys j > i; the causal mask is True on and below the diagonal (j <= i)"),
            (~expected, "True and False swapped", "True means the query may attend"),
            (np.tril(np.ones((n, n), dtype=bool), k=-1), "False on the diagonal",
             "each token may attend to itself"),
        ]
        for candidate, what, why in mistakes:
            if np.array_equal(array, candidate):
                raise _Failure(f"{label}: {what} {context}: {why}")
        wrong = int(np.sum(array != expected))
        raise _Failure(f"{label}: wrong values {context}: {wrong} of {n * n} entries differ from the causal mask")
    return f"{label}: correct for n = {sizes[0]}, {sizes[1]} and {sizes[2]}"


# --- heads ------------------------------------------------------------------------------------------


@check
def check_split_heads(fn, label: str, rng: np.random.Generator, seed: int) -> str:
    r"""Check ``fn(x, n_heads)``: ``(..., n, d_model) -> (..., n_heads, n, d_model / n_heads)``.

    .. math:: (\dots, n, d_\text{model}) \to (\dots, h, n, d_\text{model} / h)

    Parameters
    ----------
    fn : callable
        The student's ``fn(x, n_heads)``.

    Examples
    --------
    >>> _ = check_split_heads(lambda x, h: x.reshape(*x.shape[:-2], h, x.shape[-2], -1))
    ✗ your function: values in the wrong places for x (2, 5, 8) and n_heads = 4: reshaping straight
      to (..., n_heads, n, d_head) mixes tokens; reshape to (..., n, n_heads, d_head), then swap the
      axes -3 and -2
    """
    cases = ((rng.standard_normal((2, 5 + seed % 2, 8)), 4), (rng.standard_normal((5, 6)), 3))

    for x, h in cases:
        *lead, n, d_model = x.shape
        context = f"for x {x.shape} and n_heads = {h}"
        got = _as_numbers(_call(fn, label, x, h), f"what {label} returned")
        expected = split_heads(x, h)  # (..., h, n, d_head)
        if got.shape == (*lead, n, h, d_model // h):
            raise _Failure(f"{label}: wrong shape {got.shape} {context}: that is (..., n, n_heads, d_head); "
                           f"swap the axes -3 and -2 to get (..., n_heads, n, d_head) = {expected.shape}")
        mistakes = [
            (lambda: x.reshape(*lead, h, n, d_model // h), "reshaping straight to (..., n_heads, n, d_head) "
             "mixes tokens; reshape to (..., n, n_heads, d_head), then swap the axes -3 and -2"),
            (lambda: np.moveaxis(x.reshape(*lead, n, d_model // h, h), -1, -3), "head i got every n_heads-th "
             "column; it should get the contiguous block of columns i*d_head ... (i+1)*d_head - 1"),
        ]
        explanation = _first_matching(got, expected, mistakes)
        if explanation:
            raise _Failure(f"{label}: values in the wrong places {context}: {explanation}")
        _compare(got, expected, label, context)
    return f"{label}: correct for x (2, {cases[0][0].shape[1]}, 8) with 4 heads and for x (5, 6) with 3 heads"


@check
def check_merge_heads(fn, label: str, rng: np.random.Generator, seed: int) -> str:
    r"""Check ``fn(x)``: ``(..., n_heads, n, d_head) -> (..., n, n_heads * d_head)``, the inverse of split.

    .. math:: (\dots, h, n, d_\text{head}) \to (\dots, n, h\, d_\text{head})

    Parameters
    ----------
    fn : callable
        The student's ``fn(x)``.

    Examples
    --------
    >>> check_merge_heads(merge_heads).passed
    ✓ merge_heads: correct for x (2, 4, 5, 2) and x (3, 5, 2), and undoes split_heads
    True
    """
    cases = (rng.standard_normal((2, 4, 5 + seed % 2, 2)), rng.standard_normal((3, 5, 2)))

    for x in cases:
        *lead, h, n, d_head = x.shape
        context = f"for x {x.shape}"
        got = _as_numbers(_call(fn, label, x), f"what {label} returned")
        mistakes = [(lambda: x.reshape(*lead, n, h * d_head), "reshaping (..., n_heads, n, d_head) straight to "
                     "(..., n, d_model) mixes tokens; swap the axes -3 and -2 first, then reshape")]
        explanation = _first_matching(got, merge_heads(x), mistakes)
        if explanation:
            raise _Failure(f"{label}: values in the wrong places {context}: {explanation}")
        _compare(got, merge_heads(x), label, context)
    model = rng.standard_normal((3, 8))  # (n, d_model)
    round_trip = _as_numbers(_call(fn, label, split_heads(model, 2)), f"what {label} returned")
    _compare(round_trip, model, label, "when undoing split_heads(x, 2) for x (3, 8)")
    return f"{label}: correct for x {cases[0].shape} and x {cases[1].shape}, and undoes split_heads"


# --- positional encodings ---------------------------------------------------------------------------


def _encoding_variant(n: int, d: int, *, exponent=None, swap=False, concat=False, start=0) -> np.ndarray:
    pair = np.arange(d // 2)  # (d/2,)
    exponent = 2 * pair / d if exponent is None else exponent(pair, d)  # (d/2,)
    angles = np.arange(start, start + n)[:, None] * 10000.0 ** (-exponent)[None, :]  # (n, d/2)
    first, second = (np.cos(angles), np.sin(angles)) if swap else (np.sin(angles), np.cos(angles))
    if concat:
        return np.concatenate([first, second], axis=1)  # (n, d)
    out = np.empty((n, d))  # (n, d)
    out[:, 0::2], out[:, 1::2] = first, second
    return out


@check
def check_sinusoidal_encoding(fn, label: str, rng: np.random.Generator, seed: int) -> str:
    r"""Check ``fn(n_positions, d_model)``: ``PE[p, 2i] = sin(p / 10000^(2i/d))``, ``PE[p, 2i+1] = cos(...)``.

    .. math:: PE_{p, 2i} = \sin(p / 10000^{2i/d}), \quad PE_{p, 2i+1} = \cos(p / 10000^{2i/d})

    Parameters
    ----------
    fn : callable
        The student's ``fn(n_positions, d_model)``.

    Examples
    --------
    >>> def swapped(n_positions, d_model):
    ...     pairs = sinusoidal_encoding(n_positions, d_model).reshape(n_positions, -1, 2)  # (n, d/2, 2)
    ...     return pairs[:, :, ::-1].reshape(n_positions, d_model)  # (n, d): cos first in each pair
    >>> _ = check_sinusoidal_encoding(swapped)
    ✗ swapped: wrong values for n_positions = 6, d_model = 8: sine and cosine are swapped: even
      columns 2i hold sin, odd columns 2i+1 hold cos
    >>> check_sinusoidal_encoding(sinusoidal_encoding).passed
    ✓ sinusoidal_encoding: correct for (6, 8), (50, 16) and (1, 2)
    True
    """
    sizes = ((6, 8), (50 + seed, 16), (1, 2))

    for n, d in sizes:
        context = f"for n_positions = {n}, d_model = {d}"
        got = _as_numbers(_call(fn, label, n, d), f"what {label} returned")
        if got.shape == (d, n) and n != d:
            raise _Failure(f"{label}: wrong shape {got.shape} {context}: expected ({n}, {d}), "
                           "one row per position (a transpose?)")
        mistakes = [
            (lambda: _encoding_variant(n, d, swap=True), "sine and cosine are swapped: even columns 2i "
             "hold sin, odd columns 2i+1 hold cos"),
            (lambda: _encoding_variant(n, d, concat=True), "all sines come first and all cosines after; "
             "interleave them: sin in column 2i, cos in column 2i+1"),
            (lambda: _encoding_variant(n, d, exponent=lambda i, dd: i / dd), "the exponent is i/d_model; "
             "pair i uses 10000^(2i/d_model)"),
            (lambda: _encoding_variant(n, d, exponent=lambda i, dd: -2 * i / dd), "the frequencies grow; "
             "divide the position by 10000^(2i/d_model), do not multiply"),
            (lambda: _encoding_variant(n, d, start=1), "the positions start at 1; the first row encodes "
             "position 0"),
        ]
        mistakes.append((lambda: _odd_columns_own_exponent(n, d), "column 2i+1 uses its own index in the "
                         "exponent; both columns of pair i use 10000^(2i/d_model)"))
        if got.shape == (n, d):
            explanation = _first_matching(got, sinusoidal_encoding(n, d), mistakes)
            if explanation:
                raise _Failure(f"{label}: wrong values {context}: {explanation}")
        _compare(got, sinusoidal_encoding(n, d), label, context)
    return f"{label}: correct for {sizes[0]}, {sizes[1]} and {sizes[2]}"


def _odd_columns_own_exponent(n: int, d: int) -> np.ndarray:
    column = np.arange(d)  # (d,)
    angles = np.arange(n)[:, None] * 10000.0 ** (-column / d)[None, :]  # (n, d)
    return np.where(column % 2 == 0, np.sin(angles), np.cos(angles))  # (n, d)


# --- learning: a backward pass and decoding ---------------------------------------------------------


def _relative_error(got: np.ndarray, expected: np.ndarray) -> float:
    """``max |got - expected| / max |expected|`` (the absolute error when ``expected`` is 0)."""
    return float(np.max(np.abs(got - expected)) / max(float(np.max(np.abs(expected))), 1e-12))


def _layer_norm_differences(x: np.ndarray, gamma: np.ndarray, dy: np.ndarray, eps: float) -> tuple:
    """``dx, dgamma, dbeta`` of ``L = sum(dy * layer_norm(x, gamma, beta, eps))`` by central differences."""
    beta = np.zeros_like(gamma)  # (d,): the gradients do not depend on it
    dx = numerical_jacobian(lambda z: np.sum(dy * layer_norm(z, gamma, beta, eps)), x)  # (..., d)
    dgamma = numerical_jacobian(lambda g: np.sum(dy * layer_norm(x, g, beta, eps)), gamma)  # (d,)
    dbeta = numerical_jacobian(lambda b: np.sum(dy * layer_norm(x, gamma, b, eps)), beta)  # (d,)
    return dx, dgamma, dbeta


def _layer_norm_mistakes(x: np.ndarray, gamma: np.ndarray, dy: np.ndarray, eps: float) -> list:
    """The ``dx`` of the usual wrong formulas, each with its explanation."""
    std = np.sqrt(x.var(axis=-1, keepdims=True) + eps)  # (..., 1)
    x_hat = (x - x.mean(axis=-1, keepdims=True)) / std  # (..., d)
    g = dy * gamma  # (..., d)
    g_mean = g.mean(axis=-1, keepdims=True)  # (..., 1)
    g_x_hat = (g * x_hat).mean(axis=-1, keepdims=True)  # (..., 1)
    return [
        (lambda: (g - g_mean) / std, "the term -x_hat * mean(g * x_hat) is missing: the standard deviation "
                                     "depends on x too"),
        (lambda: (g - x_hat * g_x_hat) / std, "the term -mean(g) is missing: the mean depends on x too"),
        (lambda: (dy - dy.mean(axis=-1, keepdims=True)
                  - x_hat * (dy * x_hat).mean(axis=-1, keepdims=True)) / std,
         "gamma is missing: the gradient reaching x_hat is g = dy * gamma"),
        (lambda: g - g_mean - x_hat * g_x_hat, "the factor 1/sigma is missing: x_hat = (x - mean) / sigma"),
        (lambda: g / std, "only the direct path: the mean and the standard deviation depend on x too"),
    ]


@check
def check_layer_norm_backward(fn, label: str, rng: np.random.Generator, seed: int) -> str:
    r"""Check ``fn(x, gamma, dy) -> (dx, dgamma, dbeta)``, layer norm's backward pass, by finite differences.

    .. math:: y = \gamma \odot \hat x + \beta, \quad \hat x = \frac{x - \mu}{\sigma}, \qquad
              dx = \frac{1}{\sigma}\bigl(g - \overline{g} - \hat x\, \overline{g \odot \hat x}\bigr),
              \quad g = \gamma \odot dy

    The reference is not the package's backward pass: the three gradients of
    :math:`L = \sum dy \odot \operatorname{LayerNorm}(x)` are estimated by central differences
    (:func:`attnbook.probes.numerical_jacobian`) of the package's :func:`attnbook.layer_norm`, in
    float64, and must agree to a relative error of :math:`10^{-6}`; each row of ``dx`` must sum to 0.
    The inputs have :math:`\gamma \ne 1`, a batch of positions and rows far from 0.

    Parameters
    ----------
    fn : callable
        The student's ``fn(x, gamma, dy) -> (dx, dgamma, dbeta)``, for ``x`` and ``dy`` ``(..., d)``
        and ``gamma`` ``(d,)``, with ``eps = 1e-5``.

    Examples
    --------
    >>> from attnbook.learning.layers import layer_norm_vjp
    >>> def package_backward(x, gamma, dy):
    ...     return layer_norm_vjp(x, gamma, np.zeros_like(gamma))[1](dy)
    >>> check_layer_norm_backward(package_backward).passed
    ✓ package_backward: dx, dgamma and dbeta agree with central differences for x (4, 6), for a
      batch (2, 3, 5) and for rows far from 0
    True
    >>> def no_variance_term(x, gamma, dy):
    ...     sigma = np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)
    ...     g = dy * gamma
    ...     x_hat = (x - x.mean(axis=-1, keepdims=True)) / sigma
    ...     return (g - g.mean(axis=-1, keepdims=True)) / sigma, (dy * x_hat).sum(axis=0), dy.sum(axis=0)
    >>> _ = check_layer_norm_backward(no_variance_term)
    ✗ the dx of no_variance_term: wrong values for x (4, 6): the term -x_hat * mean(g * x_hat) is
      missing: the standard deviation depends on x too
    """
    eps = 1e-5
    n, d = 4, 6 + seed % 2
    cases = ((rng.standard_normal((n, d)), f"for x ({n}, {d})"),
             (rng.standard_normal((2, 3, 5)), "for a batch (2, 3, 5)"),
             (50.0 + 10.0 * rng.standard_normal((3, d)), f"for rows far from 0 (3, {d})"))
    for x, context in cases:
        gamma = rng.uniform(0.5, 2.0, x.shape[-1]) * rng.choice([-1.0, 1.0], x.shape[-1])  # (d,), not ones
        dy = rng.standard_normal(x.shape)  # (..., d)
        value = _call(fn, label, x, gamma, dy)
        if not isinstance(value, (tuple, list)) or len(value) != 3:
            raise _Failure(f"{label}: returned a {type(value).__name__} {context}; return the three gradients "
                           "(dx, dgamma, dbeta)")
        got_dx, got_dgamma, got_dbeta = (_as_numbers(part, f"the {name} of {label}")
                                         for part, name in zip(value, ("dx", "dgamma", "dbeta")))
        dx, dgamma, dbeta = _layer_norm_differences(x, gamma, dy, eps)
        for got, expected, name in ((got_dx, dx, "dx"), (got_dgamma, dgamma, "dgamma"), (got_dbeta, dbeta, "dbeta")):
            what = f"the {name} of {label}"
            if got.shape != expected.shape:
                summed = " (sum over every position: all axes but the last)" if name != "dx" else ""
                raise _Failure(f"{what}: wrong shape {context}: expected {expected.shape}, got {got.shape}{summed}")
            if not np.all(np.isfinite(got)):
                raise _Failure(f"{what}: NaN or inf {context}")
        if _relative_error(got_dx, dx) > 1e-6:
            explanation = _first_matching(got_dx, dx, _layer_norm_mistakes(x, gamma, dy, eps), rtol=1e-6, atol=1e-8)
            if explanation:
                raise _Failure(f"the dx of {label}: wrong values {context}: {explanation}")
            if not np.allclose(got_dx.sum(axis=-1), 0.0, atol=1e-6 * max(1.0, float(np.max(np.abs(got_dx))))):
                raise _Failure(f"the dx of {label}: wrong values {context}: a row of dx does not sum to 0, but "
                               "layer norm ignores a shift of its row, so its gradient has no component along it")
            raise _Failure(f"the dx of {label}: wrong values {context} (relative error "
                           f"{_relative_error(got_dx, dx):.3g} against central differences)")
        if _relative_error(got_dgamma, dgamma) > 1e-6:
            hint = ("it is sum(dy) over the positions, which is dbeta; dgamma is sum(dy * x_hat)"
                    if np.allclose(got_dgamma, dbeta) else "dgamma sums dy * x_hat over every position")
            raise _Failure(f"the dgamma of {label}: wrong values {context}: {hint}")
        if _relative_error(got_dbeta, dbeta) > 1e-6:
            raise _Failure(f"the dbeta of {label}: wrong values {context}: dbeta sums dy over every position")
    return (f"{label}: dx, dgamma and dbeta agree with central differences for x ({n}, {d}), for a batch (2, 3, 5) "
            "and for rows far from 0")


def _nucleus_variant(logits: np.ndarray, p: float, *, include_self=False, descending=True,
                     last_first=False) -> np.ndarray:
    """Top-p with one of the usual mistakes: the cut with the token's own probability, the order, the ties."""
    keys = -logits if descending else logits
    if last_first:  # ties to the higher index
        order = logits.shape[-1] - 1 - np.argsort(keys[..., ::-1], axis=-1, kind="stable")
    else:
        order = np.argsort(keys, axis=-1, kind="stable")  # (..., vocab)
    probs = softmax(np.take_along_axis(logits, order, axis=-1))  # (..., vocab), in that order
    cumulative = np.cumsum(probs, axis=-1)  # (..., vocab)
    kept_sorted = cumulative < p if include_self else cumulative - probs < p  # (..., vocab)
    kept = np.zeros(logits.shape, dtype=bool)  # (..., vocab)
    np.put_along_axis(kept, order, kept_sorted, axis=-1)
    return np.where(kept, logits, -np.inf)  # (..., vocab)


@check
def check_nucleus_filter(fn, label: str, rng: np.random.Generator, seed: int) -> str:
    r"""Check ``fn(logits, p)``: top-p (nucleus) filtering, the logits kept and ``-inf`` elsewhere.

    .. math:: V_p = \{\sigma(1), \dots, \sigma(m)\}, \quad
              m = \min\Bigl\{m : \sum_{r \le m} p_{\sigma(r)} \ge p\Bigr\}

    with :math:`\sigma` ordering the tokens by decreasing probability, ties to the lower index (the
    package's ``nucleus_filter``). The inputs include a batch, tied logits, ``p = 1``, a token more
    probable than ``p`` on its own (it is kept) and logits already at ``-inf``.

    Parameters
    ----------
    fn : callable
        The student's ``fn(logits, p)`` for ``logits`` ``(..., vocab)`` and ``0 < p <= 1``.

    Examples
    --------
    >>> from attnbook.learning.decoding import nucleus_filter
    >>> check_nucleus_filter(nucleus_filter).passed
    ✓ nucleus_filter: correct for logits (3, 8) with p = 0.9, a batch (2, 2, 6) with p = 0.5, tied
      logits, p = 1, a dominant token and logits at -inf
    True
    >>> def cut_including_itself(logits, p):
    ...     order = np.argsort(-logits, axis=-1, kind="stable")
    ...     probs = np.exp(np.take_along_axis(logits, order, -1))
    ...     probs = probs / probs.sum(axis=-1, keepdims=True)
    ...     kept = np.zeros(logits.shape, dtype=bool)
    ...     np.put_along_axis(kept, order, np.cumsum(probs, axis=-1) < p, axis=-1)
    ...     return np.where(kept, logits, -np.inf)
    >>> _ = check_nucleus_filter(cut_including_itself)  # doctest: +ELLIPSIS
    ✗ cut_including_itself: wrong tokens kept for logits (3, 8) with p = 0.9: the token whose
      probability carries the sum past p is dropped; ...
    """
    dominant = np.log(np.array([[0.05, 0.9, 0.05], [0.3, 0.3, 0.4]]))  # (2, 3): one token above p alone
    masked = rng.standard_normal((2, 7))  # (2, 7)
    masked[:, [1, 4]] = -np.inf  # tokens a causal or top-k step has already ruled out
    cases = ((2.0 * rng.standard_normal((3, 8)), 0.9, "logits (3, 8) with p = 0.9"),
             (2.0 * rng.standard_normal((2, 2, 6)), 0.5, "a batch (2, 2, 6) with p = 0.5"),
             (np.array([[2.0, 1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]]), 0.45 + 0.01 * (seed % 3),
              "tied logits (ties go to the lower index)"),
             (rng.standard_normal((2, 6)), 1.0, "p = 1 (every token is kept)"),
             (dominant, 0.6, "a token more probable than p on its own"),
             (masked, 0.8, "logits already at -inf"))
    for logits, p, context in cases:
        context = f"for {context}"
        got = _as_numbers(_call(fn, label, logits, p), f"what {label} returned")
        expected = nucleus_filter(logits, p)  # (..., vocab)
        if got.shape != expected.shape:
            raise _Failure(f"{label}: wrong shape {context}: expected {expected.shape} (one entry per logit), "
                           f"got {got.shape}")
        if np.any(np.isnan(got)) or np.any(got == np.inf):
            raise _Failure(f"{label}: NaN or +inf {context}; the tokens left out get -inf")
        kept, expected_kept = np.isfinite(got), np.isfinite(expected)
        if not np.array_equal(kept, expected_kept):
            if np.any(~kept.any(axis=-1)):
                raise _Failure(f"{label}: a row keeps no token {context}; the most probable token is always "
                               "kept (keep a token while the probability of the tokens before it is below p)")
            variants = [
                (dict(include_self=True), "the token whose probability carries the sum past p is dropped; keep "
                 "a token while the probability of the tokens ranked before it is below p"),
                (dict(last_first=True), "among tied logits the higher index was kept first; ties go to the "
                 "lower index (a stable sort of -logits)"),
                (dict(descending=False), "the least probable tokens were kept; sort by decreasing probability"),
            ]
            for options, why in variants:
                if np.array_equal(kept, np.isfinite(_nucleus_variant(logits, p, **options))):
                    raise _Failure(f"{label}: wrong tokens kept {context}: {why}")
            wrong = int(np.sum(kept != expected_kept))
            raise _Failure(f"{label}: wrong tokens kept {context}: {wrong} of {kept.size} differ")
        if not np.allclose(got[kept], logits[kept], rtol=1e-9, atol=1e-12):
            raise _Failure(f"{label}: the right tokens are kept {context}, but with other values; return the "
                           "logits themselves where kept (not probabilities, not renormalised), -inf elsewhere")
    return (f"{label}: correct for logits (3, 8) with p = 0.9, a batch (2, 2, 6) with p = 0.5, tied logits, "
            "p = 1, a dominant token and logits at -inf")


def _rows_step(state, tokens):
    """A toy model: row ``r``'s next token follows the bigram table ``state[r]`` ``(vocab, vocab)``."""
    with np.errstate(divide="ignore"):
        return np.log(state[np.arange(len(tokens)), tokens]), state  # (rows, vocab)


def _decode_parts(value, label: str, context: str) -> tuple:
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        raise _Failure(f"{label}: returned a {type(value).__name__} {context}; return (tokens, log_probs, lengths)")
    return tuple(_as_numbers(part, f"the {name} of {label}")
                 for part, name in zip(value, ("tokens", "log_probs", "lengths")))


@check
def check_greedy_decode(fn, label: str, rng: np.random.Generator, seed: int) -> str:
    r"""Check ``fn(step, state, batch_size, max_length, bos, eos) -> (tokens, log_probs, lengths)``: greedy search.

    .. math:: y_t = \arg\max_v \, p(v \mid y_{<t}), \quad \text{until EOS or } \texttt{max\_length} \text{ tokens}

    Compared with the package's ``greedy_decode`` on toy bigram models (``bigram_step``, and one bigram
    table per row): ``tokens`` ``(batch, n)`` holds each row's tokens up to its EOS and PAD (0) after
    it, ``n`` the longest row; ``log_probs`` the log-probability of each row's tokens, EOS included;
    ``lengths`` the tokens of each row, EOS included. The inputs include tied probabilities (the lower
    index wins), rows that end at different steps and rows cut at ``max_length``.

    Parameters
    ----------
    fn : callable
        The student's ``fn(step, state, batch_size, max_length, bos, eos)``, calling
        ``step(state, tokens) -> (logits, state)``.

    Examples
    --------
    >>> from attnbook.learning.decoding import greedy_decode
    >>> check_greedy_decode(greedy_decode).passed
    ✓ greedy_decode: correct for one bigram model, tied probabilities, rows that end at different steps
      and rows cut at max_length
    True
    >>> def never_stops(step, state, batch_size, max_length, bos, eos):
    ...     tokens, total = [np.full(batch_size, bos)], np.zeros(batch_size)
    ...     for _ in range(max_length):
    ...         logits, state = step(state, tokens[-1])
    ...         logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    ...         tokens.append(logp.argmax(axis=1))
    ...         total += logp.max(axis=1)
    ...     return np.stack(tokens[1:], axis=1), total, np.full(batch_size, max_length)
    >>> _ = check_greedy_decode(never_stops)
    ✗ never_stops: wrong shape of tokens for one bigram model: expected (2, 3), got (2, 6); stop as
      soon as every row has ended: tokens has as many columns as the longest row, EOS included
    """
    vocab = 6
    single = rng.dirichlet(np.ones(vocab) * 0.5, size=vocab)  # (vocab, vocab)
    single[1] = [0.0, 0.0, 0.0, 0.5, 0.3, 0.2]  # from BOS: token 3 first
    single[3] = [0.0, 0.1, 0.2, 0.0, 0.3, 0.4]  # then 5
    single[5] = [0.0, 0.0, 0.6, 0.2, 0.2, 0.0]  # then EOS
    tied = np.full((vocab, vocab), 1.0 / vocab)  # (vocab, vocab): ties everywhere, the lower index wins
    tied[1] = [0.0, 0.0, 0.0, 0.4, 0.4, 0.2]  # from BOS: 3 and 4 tie, 3 wins
    tied[3] = [0.0, 0.0, 0.4, 0.4, 0.2, 0.0]  # then EOS and 3 tie, EOS wins
    rows = rng.dirichlet(np.ones(vocab), size=(3, vocab))  # (3, vocab, vocab): one model per row
    rows[:, :, 2] = 0.0
    rows /= rows.sum(axis=-1, keepdims=True)
    rows[0, 1] = [0.0, 0.0, 0.9, 0.05, 0.05, 0.0]  # row 0 ends at once
    rows[1, 1] = [0.0, 0.0, 0.1, 0.0, 0.9, 0.0]  # row 1 goes to 4
    rows[1, 4] = [0.0, 0.0, 0.7, 0.1, 0.1, 0.1]  # then ends; row 2 never ends (no EOS in its table)
    cases = ((bigram_step(single), None, 2, 6, "one bigram model"),
             (bigram_step(tied), None, 1, 4, "tied probabilities"),
             (_rows_step, rows[:2].copy(), 2, 5 + seed % 2, "rows that end at different steps"),
             (_rows_step, rows, 3, 4, "rows cut at max_length"))
    for step, state, batch_size, max_length, context in cases:
        context = f"for {context}"
        expected = greedy_decode(step, copy.deepcopy(state), batch_size, max_length, 1, 2)
        got = _decode_parts(_call(fn, label, step, state, batch_size, max_length, 1, 2), label, context)
        got_tokens, got_log_probs, got_lengths = got
        wrong_tokens = _Failure(f"{label}: wrong tokens {context}: take the most probable token at each step "
                                "(the lower index among ties) and feed it back to step")
        if got_tokens.ndim == 2 and got_tokens.shape[0] == batch_size:
            shared = min(got_tokens.shape[1], expected.tokens.shape[1])  # the columns both have
            before_eos = np.arange(shared)[None, :] < expected.lengths[:, None]  # (batch, shared)
            if np.any(before_eos & (got_tokens[:, :shared] != expected.tokens[:, :shared])):
                raise wrong_tokens
        if got_tokens.shape != expected.tokens.shape:
            hint = ("; stop as soon as every row has ended: tokens has as many columns as the longest row, "
                    "EOS included" if got_tokens.shape[:1] == expected.tokens.shape[:1] else "")
            raise _Failure(f"{label}: wrong shape of tokens {context}: expected {expected.tokens.shape}, "
                           f"got {got_tokens.shape}{hint}")
        if not np.array_equal(got_tokens, expected.tokens):
            after = np.arange(expected.tokens.shape[1])[None, :] >= expected.lengths[:, None]  # (batch, n)
            if np.array_equal(np.where(after, 0, got_tokens), expected.tokens):
                raise _Failure(f"{label}: wrong tokens after EOS {context}: a row that has ended gets PAD (0) in "
                               "every later column")
            raise wrong_tokens
        _compare(got_lengths, expected.lengths.astype(np.float64), f"the lengths of {label}",
                 context + " (count each row's tokens, its EOS included)")
        _compare(got_log_probs, expected.log_probs, f"the log_probs of {label}",
                 context + " (add the log-softmax of each row's chosen tokens, up to and including its EOS)")
    return (f"{label}: correct for one bigram model, tied probabilities, rows that end at different steps "
            "and rows cut at max_length")
