"""The verdict of a homework check: :class:`CheckResult`, the :func:`check` decorator, and calling the student.

A check never raises because of the student's code and never prints a traceback: :func:`call_student`
turns "not done yet", exceptions and a missing ``return`` into a :class:`Failure`, whose text is the message
shown; :func:`finish` turns the first failure (or an odd return value) into the :class:`CheckResult`.
The comparison every check uses is :func:`attnbook.homework.compare.check_array`.

>>> @check
... def check_double(fn, label, rng, seed):
...     if call_student(fn, label, 3.0) != 6.0:
...         raise Failure(f"{label}: does not double 3")
...     return f"{label}: doubles"
>>> check_double(lambda x: x + 3).passed
✓ your function: doubles
True
>>> check_double(lambda x: x + 1).passed
✗ your function: does not double 3
False
"""

from __future__ import annotations

import copy
import functools
import inspect
import numbers
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..validation import check_bool

__all__ = ["CheckResult", "check"]

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


class Failure(Exception):
    """Stops a check at the first problem found; its text is the message shown to the student."""


# --- plumbing shared by every check ----------------------------------------------------------------


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def check(body: Callable[..., str]) -> Callable[..., CheckResult]:
    r"""Make a public check out of ``body(fn, label, rng, seed, **options) -> success message``.

    The check it returns, ``check_x(fn, *, seed=0, quiet=False, **options)``, does what every check
    shares: it refuses a bad ``seed`` or ``quiet`` (and a non-bool for a bool option), names the
    student's function (``label``), draws the inputs from ``np.random.default_rng(seed)`` (``rng``),
    and wraps the verdict: the body's return value is the success message, a ``Failure`` it raises
    the problem found, and anything else a failure without a traceback (:func:`finish`). It also
    writes what every check's docstring shares: the body's docstring gives the summary, the math,
    ``Parameters`` with ``fn`` and the body's own options, and ``Examples``; the public docstring adds
    the usage line, ``seed`` (after ``fn``), ``quiet`` (last) and ``Returns``.

    .. math:: \text{check}(fn) = \text{verdict}\big(\text{body}(fn, \text{label}, \text{rng}(\text{seed}), \text{seed})\big)

    Parameters
    ----------
    body : callable
        ``body(fn, label, rng, seed, **options)``: returns the success message or raises ``Failure``;
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
    ...         raise Failure(f"{label}: not positive")
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
        label = function_name(fn)
        rng = np.random.default_rng(seed)
        return finish(lambda: body(fn, label, rng, seed, **given), label, quiet)

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


def function_name(fn) -> str:
    """Unchecked kernel: the student's function's name for the messages, or "your function" (a lambda)."""
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) and name != "<lambda>" else "your function"


def finish(run: Callable[[], str], label: str, quiet: bool) -> CheckResult:
    """Unchecked kernel: run a check body: its return value is the success message, a Failure the problem found."""
    try:
        result = CheckResult(True, run())
    except Failure as failure:
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


def describe(args: Sequence) -> str:
    """Unchecked kernel: the inputs of a call in words, without their values: shapes of arrays, small scalars
    as such."""
    parts = []
    for arg in args:
        if isinstance(arg, np.ndarray):
            parts.append(f"an array of shape {arg.shape}")
        elif isinstance(arg, (bool, numbers.Number, str)) or arg is None:
            parts.append(repr(arg))
        else:  # lists, named tuples of weights, ...: their type only
            parts.append(type(arg).__name__)
    return "(" + ", ".join(parts) + ")"


def call_student(fn, name: str, *args, hint: str = ""):
    """Unchecked kernel: call the student's function on copies of ``args``; 'not done', errors and None become failures.

    ``hint`` is added to the message when the function raises (say, what usually goes wrong there).
    """
    if not callable(fn):
        raise Failure(f"{name} is not a function (it is {type(fn).__name__}); define it with def")
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            value = fn(*copy.deepcopy(args))
    except NotImplementedError:
        raise Failure(f"{name}: not done yet (it still raises NotImplementedError); "
                       "write its body, then run this check again") from None
    except (Exception, SystemExit) as error:  # not KeyboardInterrupt: the student may stop a long run
        raise Failure(f"{name} raised {type(error).__name__}: {_short(error)} "
                       f"(called with {describe(args)}){'; ' + hint if hint else ''}") from None
    if value is None:
        raise Failure(f"{name}: not done yet (it returned None; is a `return` missing?)")
    return value
