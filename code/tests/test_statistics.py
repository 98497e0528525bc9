"""Tests of attnbook.statistics: the Monte Carlo behind the 1/sqrt(d_k) scaling."""

import re

import numpy as np
import pytest

from attnbook import DotProductVariance, dot_product_variance


@pytest.fixture(scope="module")
def d16():
    return dot_product_variance(16, 200_000, seed=0)


def test_raw_variance_is_close_to_d_k(d16):
    assert abs(d16.raw - 16) < 0.3


def test_scaled_variance_is_close_to_one(d16):
    assert abs(d16.scaled - 1) < 0.02


def test_scaled_variance_is_raw_variance_over_d_k(d16):
    assert d16.scaled == pytest.approx(d16.raw / 16, rel=1e-12)


def test_result_records_its_arguments_as_plain_python_numbers(d16):
    assert isinstance(d16, DotProductVariance)
    assert (d16.d_k, d16.n_samples) == (16, 200_000)
    assert all(type(x) is float for x in (d16.raw, d16.scaled))
    assert all(type(x) is int for x in (d16.d_k, d16.n_samples))


def test_same_seed_gives_identical_results(d16):
    assert dot_product_variance(16, 200_000, seed=0) == d16


def test_different_seeds_give_different_samples():
    assert dot_product_variance(4, 1000, seed=1).raw != dot_product_variance(4, 1000, seed=2).raw


def test_numpy_integer_arguments_are_accepted():
    assert dot_product_variance(np.int64(4), np.int32(1000), seed=np.int64(3)) == dot_product_variance(4, 1000, seed=3)


def test_unscaled_variance_grows_with_d_k_while_scaled_variance_stays_near_one():
    small, large = dot_product_variance(2, 50_000, seed=0), dot_product_variance(64, 50_000, seed=0)
    assert large.raw > 10 * small.raw
    assert abs(small.scaled - 1) < 0.05 and abs(large.scaled - 1) < 0.05


@pytest.mark.parametrize("d_k", [0, -3, 2.0, True, "4", None])
def test_d_k_that_is_not_a_positive_integer_is_refused(d_k):
    with pytest.raises(ValueError, match=rf"^d_k must be a positive integer, got {re.escape(repr(d_k))}$"):
        dot_product_variance(d_k)


@pytest.mark.parametrize("n_samples", [0, -1, 10.0, False])
def test_n_samples_that_is_not_a_positive_integer_is_refused(n_samples):
    with pytest.raises(ValueError, match=rf"^n_samples must be a positive integer, got {re.escape(repr(n_samples))}$"):
        dot_product_variance(4, n_samples)


def test_a_single_sample_is_refused_because_it_has_no_variance():
    with pytest.raises(ValueError, match=r"^n_samples must be at least 2 to estimate a variance, got 1$"):
        dot_product_variance(4, 1)


@pytest.mark.parametrize("seed", [-1, 1.5, "0", True, None])
def test_seed_that_is_not_a_non_negative_integer_is_refused(seed):
    with pytest.raises(ValueError, match=rf"^seed must be a non-negative integer, got {re.escape(repr(seed))}$"):
        dot_product_variance(4, 100, seed=seed)
