"""Numbers glued into the book's prose, stored with only the digits every machine agrees on.

The tests compare each glued value's text exactly, and floating-point results differ in their last bits
from one processor to another, so a glued number keeps a fixed count of *significant* digits:

=================  ======  =========================================================================
precision          digits  for
=================  ======  =========================================================================
``CLOSED_FORM``    6       float64 formulas: softmax of a few scores, a sum, a ratio of sums
``AMPLIFIED``      3       finite differences, trained weights, long products, float32 arithmetic
exact              all     counts and other integers: :func:`glue_count`
=================  ======  =========================================================================

``decimals=`` stores exactly what the prose shows (:func:`digits_kept`). ``tests/stability`` checks the
choice by perturbing every notebook; its reference is the unrounded values each glue appends to the file
``ATTNBOOK_GLUE_RECORD`` names (set by tools/execution.py).

Example:
    >>> round_significant(390.54602452, 6)
    390.546
    >>> round_significant(1.2127322095300677e-11, CLOSED_FORM)
    1.21273e-11
    >>> round_significant(-0.000123456789, AMPLIFIED)
    -0.000123
"""

from __future__ import annotations

import json
import math
import numbers
import os

__all__ = ["AMPLIFIED", "CLOSED_FORM", "RECORD_ENV", "digits_kept", "glue_count", "glue_number", "round_significant"]

CLOSED_FORM = 6
AMPLIFIED = 3
# a file: every glue appends {"name", "value" (unrounded), "digits", "via"} to it as a JSON line; the book's
# builds set it (tools/execution.py), and tests/stability compares a perturbed run's record with the build's
RECORD_ENV = "ATTNBOOK_GLUE_RECORD"
GLUE_PREFIX = "application/papermill.record/"  # myst-nb's glue protocol (myst_nb.ext.glue.GLUE_PREFIX)


def round_significant(value: float, digits: int) -> float:
    r"""``value`` rounded to ``digits`` significant decimal digits (round half to even, on the decimal).

    .. math:: \mathrm{round}\big(v \cdot 10^{\,d - 1 - e}\big) \cdot 10^{\,e - d + 1}, \qquad
              e = \lfloor \log_{10} |v| \rfloor

    Parameters
    ----------
    value : float
        A finite real number (a Python or numpy scalar, or a 0-d array).
    digits : int
        How many significant digits to keep, 1 to 15.

    Returns
    -------
    float
        The nearest float to the decimal with ``digits`` significant digits; 0.0 stays 0.0.

    Raises
    ------
    ValueError
        If ``digits`` is not an integer from 1 to 15 or ``value`` is not finite.

    Examples
    --------
    >>> round_significant(0.80442, 3), round_significant(12345.0, 2), round_significant(0.0, 4)
    (0.804, 12000.0, 0.0)
    """
    if isinstance(digits, bool) or not isinstance(digits, numbers.Integral) or not 1 <= digits <= 15:
        raise ValueError(f"digits must be an integer from 1 to 15, got {digits!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"value must be finite to be stated in the prose, got {number!r}")
    return float(f"{number:.{int(digits) - 1}e}")


def digits_kept(value: float, digits: int = CLOSED_FORM, decimals: int | None = None) -> int:
    r"""How many significant digits ``glue_number`` keeps of ``value``.

    ``digits`` unless ``decimals`` is given; then as many as ``value`` has down to that decimal place,

    .. math:: \max\big(1,\; \text{decimals} + \lfloor \log_{10} |v| \rfloor + 1\big),

    so that the stored number is the one the prose shows (``{glue:text}`name:.4f``` with ``decimals=4``),
    rounded once.

    Parameters
    ----------
    value : float
        The number to glue.
    digits : int, optional
        Significant digits when ``decimals`` is not given. Default ``CLOSED_FORM``.
    decimals : int or None, optional
        Decimal places the prose shows.

    Returns
    -------
    int
        The number of significant digits to keep.

    Examples
    --------
    >>> digits_kept(4.1132504), digits_kept(4.1132504, decimals=4), digits_kept(26.261, decimals=4)
    (6, 5, 6)
    """
    if decimals is None:
        return digits
    if isinstance(decimals, bool) or not isinstance(decimals, numbers.Integral):
        raise ValueError(f"decimals must be an integer, got {decimals!r}")
    number = float(value)
    if number == 0.0 or not math.isfinite(number):
        return 1
    return max(1, int(decimals) + math.floor(math.log10(abs(number))) + 1)


def glue_number(name: str, value: float, digits: int = CLOSED_FORM, *, decimals: int | None = None) -> None:
    """Glue ``value`` for the prose under ``name``, rounded by ``round_significant`` (not displayed).

    The stored value is ``round_significant(value, digits_kept(value, digits, decimals))``.

    Parameters
    ----------
    name : str
        The glue key the prose uses, ``{glue:text}`name:.3f```.
    value, digits, decimals
        As in :func:`digits_kept`.

    Returns
    -------
    None
        A notebook cell that ends with it shows no output.

    Examples
    --------
    >>> glue_number("ratio", 2 / 3)  # stores 0.666667; outside a notebook glue shows nothing
    """
    kept = digits_kept(value, digits, decimals)
    _glue(name, round_significant(value, kept))
    _record(name, float(value), kept, "glue_number")


def glue_count(name: str, value) -> None:
    """Glue a count (an integer, or a float with an integer value) for the prose, exactly.

    The stored value is ``int(value)``: counts are exact on every machine, so no digit is dropped.

    Parameters
    ----------
    name : str
        The glue key the prose uses.
    value : int or float
        An integral number: ``7``, ``np.int64(7)`` or ``7.0``.

    Returns
    -------
    None
        A notebook cell that ends with it shows no output.

    Raises
    ------
    ValueError
        If ``value`` is not a whole number.

    Examples
    --------
    >>> glue_count("n", 7.0)  # stores the int 7
    >>> glue_count("n", 7.5)
    Traceback (most recent call last):
    ...
    ValueError: value of 'n' must be a whole number to be glued as a count, got 7.5
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not float(value).is_integer():
        raise ValueError(f"value of {name!r} must be a whole number to be glued as a count, got {value!r}")
    _glue(name, int(value))
    _record(name, int(value), None, "glue_count")


def _record(name: str, value, digits: int | None, via: str) -> None:
    """Append the glued value, before rounding, to the file ``RECORD_ENV`` names (if it names one)."""
    path = os.environ.get(RECORD_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(json.dumps({"name": name, "value": value, "digits": digits, "via": via}) + "\n")


def _glue(name: str, value) -> None:
    """myst-nb's ``glue(name, value, display=False)``, written out: the value's display data under
    ``GLUE_PREFIX``, named in the output's metadata. Importing ``myst_nb.glue`` would cost each kernel about a
    second (it brings nbformat and jsonschema), in every run of every notebook."""
    from IPython.core.formatters import format_display_data
    from IPython.display import display

    bundle, metadata = format_display_data(value)
    metadata["scrapbook"] = {"name": name, "mime_prefix": GLUE_PREFIX}
    display({GLUE_PREFIX + key: data for key, data in bundle.items()}, raw=True, metadata=metadata)
