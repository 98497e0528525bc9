r"""Statistics of sampled outputs: Pearson's chi-square goodness-of-fit test, with its p-value in numpy alone.

A sampler claimed to draw from a distribution :math:`\pi` is checked by counting its draws in cells and
comparing the counts with their expectations; cells expected to hold few draws are pooled into one, as
the test's chi-square approximation asks. The p-value is the chi-square distribution's upper tail, the
regularised upper incomplete gamma function, computed here (series and continued fraction) so that a
reader's kernel needs no SciPy.

>>> test = chi_square_test([48, 30, 22], [0.5, 0.3, 0.2])
>>> round(test.statistic, 4), test.dof, round(test.p_value, 4)
(0.28, 2, 0.8694)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..validation import as_float_array

__all__ = ["ChiSquareTest", "chi_square_survival", "chi_square_test"]


class ChiSquareTest(NamedTuple):
    """Pearson's test of counts against probabilities.

    Attributes
    ----------
    statistic : float
        :math:`X^2 = \\sum_c (O_c - E_c)^2 / E_c` over the cells after pooling.
    dof : int
        Degrees of freedom: the cells after pooling, less one.
    p_value : float
        :math:`P(\\chi^2_\\text{dof} \\ge X^2)`: how often a true sampler gives a statistic this large.
    cells : int
        Cells after pooling (``dof + 1``).

    Examples
    --------
    >>> ChiSquareTest(3.0, 2, 0.2231, 3).dof
    2
    """

    statistic: float
    dof: int
    p_value: float
    cells: int


def chi_square_survival(x: float, dof: int) -> float:
    r"""The upper tail of the chi-square distribution: :math:`P(\chi^2_k \ge x) = Q(k/2,\, x/2)`.

    .. math:: Q(a, y) = \frac{1}{\Gamma(a)} \int_y^\infty t^{a-1} e^{-t}\, dt

    By the power series of the lower function for :math:`y < a + 1`, by Lentz's continued fraction beyond
    (Press et al., *Numerical Recipes*, section 6.2), to double precision.

    Parameters
    ----------
    x : float
        :math:`x \ge 0`.
    dof : int
        :math:`k \ge 1`.

    Returns
    -------
    float
        The probability.

    Examples
    --------
    >>> round(chi_square_survival(2.0, 2), 6) == round(math.exp(-1.0), 6)      # k = 2: e^{-x/2}
    True
    >>> round(chi_square_survival(10.83, 1), 4)                              # the 0.999 quantile of k = 1
    0.001
    """
    if isinstance(dof, bool) or not isinstance(dof, (int, np.integer)) or dof < 1:
        raise ValueError(f"dof must be an integer >= 1, got {dof!r}")
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) or not x >= 0:
        raise ValueError(f"x must be a number >= 0, got {x!r}")
    a, y = dof / 2.0, float(x) / 2.0
    if y == 0:
        return 1.0
    log_front = a * math.log(y) - y - math.lgamma(a)  # log(y^a e^{-y} / Gamma(a))
    if y < a + 1:  # P(a, y) = front * sum_n y^n / (a (a + 1) ... (a + n))
        term = total = 1.0 / a
        n = 0
        while abs(term) > abs(total) * 1e-17 and n < 10_000:
            n += 1
            term *= y / (a + n)
            total += term
        return float(max(0.0, 1.0 - math.exp(log_front) * total))
    tiny = 1e-300  # Q(a, y) = front / (y + 1 - a - 1 (1 - a) / (y + 3 - a - ...)), by Lentz's method
    b = y + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    fraction = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        fraction *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return float(math.exp(log_front) * fraction)


def chi_square_test(counts, probabilities, min_expected: float = 5.0) -> ChiSquareTest:
    r"""Pearson's chi-square test that ``counts`` were drawn from ``probabilities``.

    .. math:: X^2 = \sum_c \frac{(O_c - E_c)^2}{E_c}, \quad E_c = N \pi_c, \qquad
              p = P\bigl(\chi^2_{C - 1} \ge X^2\bigr)

    Cells expected to hold fewer than ``min_expected`` draws are pooled into one cell (and that cell, if it
    is still below, into the smallest other), so that every expectation reaches it (Cochran's rule).
    A count in a cell of probability 0 gives :math:`X^2 = \infty`, :math:`p = 0`.

    Parameters
    ----------
    counts : array_like
        Draws per cell, any shape; non-negative.
    probabilities : array_like
        The claimed probability of each cell, the shape of ``counts``; non-negative, summing to 1.
    min_expected : float, optional
        The least expected count of a cell after pooling; default 5.

    Returns
    -------
    ChiSquareTest
        The statistic, its degrees of freedom, the p-value and the cells compared.

    Examples
    --------
    >>> chi_square_test([10, 0, 90], [0.1, 0.02, 0.88]).cells    # the cell of 0.02 pooled with the 0.1 one
    2
    >>> chi_square_test([1, 2], [0.5, 0.6])
    Traceback (most recent call last):
    ...
    ValueError: probabilities must be non-negative and sum to 1, got a sum of 1.1
    """
    observed = as_float_array(counts, "counts").reshape(-1)  # (cells,)
    pi = as_float_array(probabilities, "probabilities").reshape(-1)  # (cells,)
    if observed.shape != pi.shape:
        raise ValueError(f"counts ({observed.size} cells) and probabilities ({pi.size} cells) must have one "
                         "entry per cell")
    if np.any(observed < 0):
        raise ValueError("counts must be non-negative")
    if np.any(pi < 0) or abs(pi.sum() - 1.0) > 1e-9:
        raise ValueError(f"probabilities must be non-negative and sum to 1, got a sum of {pi.sum():.6g}")
    n = observed.sum()
    if np.any(observed[pi == 0] > 0):
        return ChiSquareTest(math.inf, int(np.count_nonzero(pi > 0)), 0.0, int(np.count_nonzero(pi > 0)) + 1)
    expected = n * pi  # (cells,)
    small = (expected < min_expected) & (pi > 0)  # (cells,): pooled into one cell
    o = list(observed[~small & (pi > 0)])
    e = list(expected[~small & (pi > 0)])
    if small.any():
        o.append(observed[small].sum())
        e.append(expected[small].sum())
        if e[-1] < min_expected and len(e) > 1:  # still too small: into the smallest other cell
            smallest = int(np.argmin(e[:-1]))
            o[smallest] += o.pop()
            e[smallest] += e.pop()
    o_arr, e_arr = np.array(o), np.array(e)  # (C,) each
    statistic = float(((o_arr - e_arr) ** 2 / e_arr).sum())
    dof = len(e) - 1
    if dof < 1:
        raise ValueError(f"only {len(e)} cell is left after pooling cells expected below min_expected = "
                         f"{min_expected}: draw more samples")
    return ChiSquareTest(statistic, dof, chi_square_survival(statistic, dof), len(e))
