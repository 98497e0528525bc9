"""Tests of attnbook.softmax: values, masking, numerical stability, errors, and the Jacobian."""

import math
import re
import warnings

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from hypothesis.extra.numpy import arrays

from attnbook import softmax, softmax_jacobian

SQRT2 = math.sqrt(2.0)


def logits(dtype=np.float64, bound=10.0, max_rows=5, max_cols=6):
    """Small 2-D arrays of finite logits in [-bound, bound]."""
    width = 32 if dtype == np.float32 else 64
    return arrays(
        dtype,
        st.tuples(st.integers(1, max_rows), st.integers(1, max_cols)),
        elements=st.floats(-bound, bound, allow_nan=False, allow_infinity=False, width=width),
    )


@st.composite
def logits_and_mask(draw, bound=10.0):
    x = draw(logits(bound=bound))
    mask = draw(arrays(np.bool_, x.shape))
    return x, mask


def reference_softmax_row(row, allowed):
    """Oracle: the definition, one exp at a time (no shift; inputs are small enough not to overflow)."""
    exps = [math.exp(value) if ok else 0.0 for value, ok in zip(row, allowed)]
    total = sum(exps)
    return [e / total if total > 0 else 0.0 for e in exps]


# --- values ---------------------------------------------------------------------------------------


def test_worked_example_rows_give_closed_form_weights():
    e = math.exp(SQRT2)
    weights = softmax([[SQRT2, 0.0], [0.0, SQRT2]])
    np.testing.assert_allclose(weights, [[e / (e + 1), 1 / (e + 1)], [1 / (e + 1), e / (e + 1)]], rtol=1e-14)


def test_equal_logits_give_uniform_weights():
    np.testing.assert_allclose(softmax([[3.0, 3.0, 3.0, 3.0]]), [[0.25] * 4], rtol=1e-15)


def test_log_three_gives_one_quarter_three_quarters():
    np.testing.assert_allclose(softmax([0.0, math.log(3.0)]), [0.25, 0.75], rtol=1e-14)


def test_integer_logits_give_float64_weights():
    weights = softmax([1, 2, 3])
    assert weights.dtype == np.float64
    np.testing.assert_allclose(weights, reference_softmax_row([1, 2, 3], [True] * 3), rtol=1e-14)


def test_axis_zero_normalises_columns():
    x = np.array([[0.0, 1.0], [math.log(3.0), 1.0]])  # (2, 2)
    weights = softmax(x, axis=0)
    np.testing.assert_allclose(weights, [[0.25, 0.5], [0.75, 0.5]], rtol=1e-14)
    np.testing.assert_allclose(weights.sum(axis=0), [1.0, 1.0], rtol=1e-15)


def test_middle_axis_of_a_3d_array_is_normalised():
    x = np.arange(24, dtype=float).reshape(2, 3, 4) / 10  # (2, 3, 4)
    weights = softmax(x, axis=1)
    np.testing.assert_allclose(weights.sum(axis=1), np.ones((2, 4)), rtol=1e-14)
    np.testing.assert_allclose(weights, np.swapaxes(softmax(np.swapaxes(x, 1, 2)), 1, 2), rtol=1e-14)


def test_output_has_the_shape_of_the_input():
    assert softmax(np.zeros((2, 3, 4))).shape == (2, 3, 4)


# --- masking --------------------------------------------------------------------------------------


def test_masked_position_gets_exactly_zero_even_with_the_largest_logit():
    assert softmax([[1e4, 0.0]], mask=[[False, True]]).tolist() == [[0.0, 1.0]]


def test_negative_infinity_logit_is_allowed_and_gets_weight_zero():
    weights = softmax([-np.inf, 0.0, 0.0])
    assert weights.tolist() == [0.0, 0.5, 0.5]


def test_integer_mask_of_zeros_and_ones_is_accepted():
    np.testing.assert_array_equal(softmax([[5.0, 1.0]], mask=[[0, 1]]), [[0.0, 1.0]])


def test_mask_broadcasts_over_rows():
    weights = softmax(np.zeros((3, 4)), mask=[True, True, False, False])
    np.testing.assert_array_equal(weights, np.tile([0.5, 0.5, 0.0, 0.0], (3, 1)))


def test_fully_masked_row_gets_zero_weights_without_warnings():
    with warnings.catch_warnings(), np.errstate(divide="warn", over="warn", invalid="warn"):
        warnings.simplefilter("error")
        weights = softmax([[3.0, 1.0], [2.0, 0.0]], mask=[[False, False], [True, True]])
    assert weights[0].tolist() == [0.0, 0.0]
    np.testing.assert_allclose(weights[1].sum(), 1.0)


def test_all_negative_infinity_row_gets_zero_weights_without_warnings():
    with warnings.catch_warnings(), np.errstate(divide="warn", over="warn", invalid="warn"):
        warnings.simplefilter("error")
        weights = softmax([[-np.inf, -np.inf], [0.0, -np.inf]])
    assert weights.tolist() == [[0.0, 0.0], [1.0, 0.0]]


def test_empty_axis_gives_an_empty_result_without_error():
    weights = softmax(np.zeros((2, 0)))
    assert weights.shape == (2, 0)


# --- numerical stability --------------------------------------------------------------------------


def test_float32_extreme_logits_give_exactly_one_zero_zero():
    weights = softmax(np.array([1e4, -1e4, 0.0], dtype=np.float32))
    assert weights.dtype == np.float32
    assert weights.tolist() == [1.0, 0.0, 0.0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@given(data=st.data())
def test_logits_up_to_ten_thousand_give_finite_weights_summing_to_one(dtype, data):
    x = data.draw(logits(dtype=dtype, bound=1e4))
    with warnings.catch_warnings(), np.errstate(divide="warn", over="warn", invalid="warn"):
        warnings.simplefilter("error", RuntimeWarning)
        weights = softmax(x)
    assert weights.dtype == dtype
    assert np.all(np.isfinite(weights))
    assert np.all(weights >= 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-5 if dtype == np.float32 else 1e-12)
    # the largest logit of each row keeps at least a 1/n share
    top = weights[np.arange(x.shape[0]), np.argmax(x, axis=-1)]
    assert np.all(top >= 1.0 / x.shape[1] - 1e-6)


# --- properties -----------------------------------------------------------------------------------


@given(x=logits())
def test_weights_are_non_negative_and_rows_sum_to_one(x):
    weights = softmax(x)
    assert np.all(weights >= 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)


@given(xm=logits_and_mask())
def test_masked_weights_are_zero_and_rows_with_an_allowed_key_sum_to_one(xm, assert_masked_distribution):
    x, mask = xm
    assert_masked_distribution(softmax(x, mask=mask), mask)


@given(x=logits(), data=st.data())
def test_adding_a_constant_per_row_does_not_change_the_weights(x, data):
    shift = data.draw(arrays(np.float64, (x.shape[0], 1), elements=st.floats(-1e3, 1e3)))
    np.testing.assert_allclose(softmax(x + shift), softmax(x), rtol=1e-9, atol=1e-12)


@given(xm=logits_and_mask(), data=st.data())
def test_adding_a_constant_per_row_does_not_change_the_masked_weights(xm, data):
    x, mask = xm
    shift = data.draw(arrays(np.float64, (x.shape[0], 1), elements=st.floats(-1e3, 1e3)))
    np.testing.assert_allclose(softmax(x + shift, mask=mask), softmax(x, mask=mask), rtol=1e-9, atol=1e-12)


@given(xm=logits_and_mask())
def test_agrees_with_the_definition_computed_one_exp_at_a_time(xm):
    x, mask = xm
    expected = [reference_softmax_row(row, allowed) for row, allowed in zip(x.tolist(), mask.tolist())]
    np.testing.assert_allclose(softmax(x, mask=mask), expected, rtol=1e-12, atol=1e-300)


# --- errors ---------------------------------------------------------------------------------------


def test_scalar_input_is_refused():
    with pytest.raises(ValueError, match=r"^x is a scalar; expected at least one dimension \(the axis to normalise over\)$"):
        softmax(3.0)


def test_nan_logit_is_refused():
    with pytest.raises(ValueError, match=r"^x contains NaN at index \(0, 1\)"):
        softmax([[0.0, np.nan]])


def test_positive_infinity_logit_is_refused():
    with pytest.raises(ValueError, match=r"^x contains \+inf at index \(1,\)"):
        softmax([0.0, np.inf])


@pytest.mark.parametrize(("x", "dtype"), [([True, False], "bool"), ([1j, 2.0], "complex128"), (["a", "b"], "<U1")])
def test_non_real_dtypes_are_refused(x, dtype):
    with pytest.raises(TypeError, match=rf"^x has dtype {re.escape(dtype)}; expected real numbers"):
        softmax(x)


def test_ragged_logits_are_refused():
    with pytest.raises(TypeError, match=r"^x could not be read as a rectangular array"):
        softmax([[1.0, 2.0], [3.0]])


@pytest.mark.parametrize("axis", [2, -3])
def test_axis_out_of_range_is_refused(axis):
    with pytest.raises(ValueError, match=rf"^axis={axis} is out of range for an array with 2 dimensions$"):
        softmax(np.zeros((2, 3)), axis=axis)


def test_non_integer_axis_is_refused():
    with pytest.raises(TypeError, match=r"^axis must be an integer, got 1\.0$"):
        softmax(np.zeros((2, 3)), axis=1.0)


def test_mask_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match=re.escape(
        "mask has shape (1, 3) but x has shape (1, 2); the mask must broadcast to x"
    )):
        softmax([[1.0, 2.0]], mask=[[True, False, True]])


def test_float_mask_is_refused():
    with pytest.raises(TypeError, match=r"^mask has dtype float64; expected a boolean array"):
        softmax([1.0, 2.0], mask=[1.0, 0.0])


def test_integer_mask_with_a_two_is_refused():
    with pytest.raises(ValueError, match=r"^mask has integer values other than 0 and 1"):
        softmax([1.0, 2.0], mask=[1, 2])


# --- Jacobian -------------------------------------------------------------------------------------


def test_jacobian_of_uniform_pair_is_a_quarter_times_plus_minus_one():
    np.testing.assert_allclose(softmax_jacobian([0.5, 0.5]), [[0.25, -0.25], [-0.25, 0.25]], rtol=1e-15)


def test_jacobian_of_a_one_hot_output_is_zero():
    np.testing.assert_array_equal(softmax_jacobian([0.0, 1.0, 0.0]), np.zeros((3, 3)))


def test_jacobian_keeps_leading_dimensions():
    weights = softmax(np.arange(24, dtype=float).reshape(2, 3, 4))  # (2, 3, 4)
    jac = softmax_jacobian(weights)
    assert jac.shape == (2, 3, 4, 4)
    np.testing.assert_allclose(jac[1, 2], softmax_jacobian(weights[1, 2]), rtol=1e-15)


@given(x=logits(bound=5.0, max_rows=1))
def test_jacobian_agrees_with_central_finite_differences(x):
    s = x[0]  # (n,)
    h = 1e-5
    n = s.size
    numeric = np.empty((n, n))  # (n, n), column j = d softmax / d s_j
    for j in range(n):
        step = np.zeros(n)
        step[j] = h
        numeric[:, j] = (softmax(s + step) - softmax(s - step)) / (2 * h)
    analytic = softmax_jacobian(softmax(s))
    np.testing.assert_allclose(analytic, numeric, atol=1e-9)
    np.testing.assert_allclose(analytic, analytic.T, atol=1e-15)  # symmetric
    np.testing.assert_allclose(analytic.sum(axis=0), 0.0, atol=1e-15)  # shifting all logits changes nothing


def test_jacobian_refuses_weights_that_do_not_sum_to_one():
    with pytest.raises(ValueError, match=re.escape(
        "weights must be non-negative and sum to 1 along the last axis (a softmax output); a slice sums to 1.1"
    )):
        softmax_jacobian([0.5, 0.6])


def test_jacobian_reports_the_worst_slice_sum():
    with pytest.raises(ValueError, match=r"a slice sums to 0\.2$"):
        softmax_jacobian([[0.5, 0.5], [0.1, 0.1], [0.6, 0.6]])


def test_jacobian_refuses_negative_weights_that_sum_to_one_and_names_the_entry():
    with pytest.raises(ValueError, match=re.escape(
        "weights must be non-negative and sum to 1 along the last axis (a softmax output); "
        "weights has the negative entry -0.5 at index (1,)"
    )):
        softmax_jacobian([1.5, -0.5])


def test_jacobian_refuses_a_scalar():
    with pytest.raises(ValueError, match=r"^weights is a scalar; expected a softmax output of shape \(\.\.\., n\)$"):
        softmax_jacobian(1.0)


def test_jacobian_refuses_nan():
    with pytest.raises(ValueError, match=r"^weights contains NaN at index \(0,\)"):
        softmax_jacobian([np.nan, 1.0])


def test_float16_rows_longer_than_65504_are_normalised_instead_of_zeroed():
    # each exp is 1, so the float16 sum of a row overflows (largest float16: 65504)
    weights = softmax(np.zeros((2, 70_000), dtype=np.float16))
    assert weights.dtype == np.float16
    assert np.all(weights == weights[0, 0]) and weights[0, 0] > 0
    np.testing.assert_allclose(weights.astype(np.float64).sum(axis=-1), 1.0, rtol=1e-2)
