"""attnbook.measure.statistics: the chi-square tail equals its closed forms, and the test pools small cells, finds a
sampler of the wrong distribution and passes one of the right distribution."""

import math

import numpy as np
import pytest

from attnbook.measure.statistics import chi_square_survival, chi_square_test


@pytest.mark.parametrize("x", [0.01, 0.7, 2.0, 9.5, 40.0, 200.0])
@pytest.mark.parametrize("half_dof", [1, 2, 5, 30])
def test_the_tail_of_an_even_dof_equals_its_closed_form(x, half_dof):
    """k = 2m: P(chi^2_k >= x) = e^{-x/2} sum_{i < m} (x/2)^i / i!."""
    closed = math.exp(-x / 2) * sum((x / 2) ** i / math.factorial(i) for i in range(half_dof))
    assert chi_square_survival(x, 2 * half_dof) == pytest.approx(closed, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("x", [0.01, 0.7, 3.84, 10.83, 50.0])
def test_the_tail_of_one_dof_is_the_normals_two_sided_tail(x):
    assert chi_square_survival(x, 1) == pytest.approx(math.erfc(math.sqrt(x / 2)), rel=1e-12)


def test_the_test_passes_the_right_sampler_and_fails_a_wrong_one():
    pi = np.array([0.4, 0.3, 0.2, 0.09, 0.01])
    counts = np.bincount(np.random.default_rng(0).choice(5, size=5000, p=pi), minlength=5)
    assert chi_square_test(counts, pi).p_value > 0.001
    assert chi_square_test(counts, [0.35, 0.35, 0.2, 0.09, 0.01]).p_value < 0.001


def test_cells_expected_below_five_are_pooled():
    test = chi_square_test([50, 30, 3, 2, 0], [0.5, 0.3, 0.1, 0.05, 0.05])  # expected 50, 30, 10, 5, 5
    assert (test.cells, test.dof) == (4, 3)  # the two cells of 5 stay: none below 5
    test = chi_square_test([50, 30, 15, 3, 2], [0.5, 0.3, 0.15, 0.03, 0.02])  # the last two pooled: 5
    assert (test.cells, test.statistic) == (4, pytest.approx(0.0))


def test_a_draw_in_a_cell_of_probability_zero_rejects():
    assert chi_square_test([5, 5, 1], [0.5, 0.5, 0.0]).p_value == 0.0


@pytest.mark.parametrize("counts, probabilities, message", [
    ([1, 2], [0.5, 0.6], "probabilities must be non-negative and sum to 1"),
    ([1, 2, 3], [0.5, 0.5], "one entry per cell"),
    ([-1, 2], [0.5, 0.5], "counts must be non-negative"),
    ([1, 1], [0.5, 0.5], "draw more samples"),
])
def test_invalid_arguments_are_refused_naming_them(counts, probabilities, message):
    with pytest.raises(ValueError, match=message):
        chi_square_test(counts, probabilities)


@pytest.mark.parametrize("x, dof, message", [(-1.0, 2, "x must be"), (1.0, 0, "dof must be"), (1.0, 1.5, "dof must be")])
def test_the_tail_refuses_a_negative_x_and_a_dof_below_one(x, dof, message):
    with pytest.raises(ValueError, match=message):
        chi_square_survival(x, dof)
