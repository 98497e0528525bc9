"""Tests of attnbook.softmax.relu_weights: ReLU weights as the alternative to softmax."""

import re
import warnings

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from hypothesis.extra.numpy import arrays

from attnbook import relu_weights

SCORES = arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(1, 6)),
                elements=st.floats(-10, 10, allow_nan=False, allow_infinity=False))


def test_negative_scores_become_zero_and_positive_scores_are_kept():
    assert relu_weights([[2.0, -1.0, 1.0]]).tolist() == [[2.0, 0.0, 1.0]]


def test_normalised_weights_are_divided_by_their_sum():
    np.testing.assert_allclose(relu_weights([[2.0, -1.0, 1.0]], normalize=True), [[2 / 3, 0.0, 1 / 3]], rtol=1e-15)


def test_unnormalised_weights_need_not_sum_to_one():
    # which is why the output of unnormalised ReLU attention can leave the convex hull of the values
    assert relu_weights([[2.0, 3.0]]).sum() == 5.0


def test_masked_positions_get_zero_even_with_positive_scores():
    assert relu_weights([[1.0, 2.0]], mask=[[True, False]]).tolist() == [[1.0, 0.0]]


def test_normalised_row_with_no_positive_score_stays_zero_without_warnings():
    with warnings.catch_warnings(), np.errstate(divide="warn", over="warn", invalid="warn"):
        warnings.simplefilter("error")
        weights = relu_weights([[-1.0, 0.0], [1.0, 3.0]], normalize=True)
    assert weights.tolist() == [[0.0, 0.0], [0.25, 0.75]]


def test_normalised_fully_masked_row_stays_zero():
    weights = relu_weights([[1.0, 2.0]], mask=[[0, 0]], normalize=True)
    assert weights.tolist() == [[0.0, 0.0]]


def test_axis_zero_normalises_columns():
    weights = relu_weights([[1.0, 2.0], [3.0, -2.0]], axis=0, normalize=True)
    np.testing.assert_allclose(weights, [[0.25, 1.0], [0.75, 0.0]], rtol=1e-15)


def test_float32_scores_keep_their_dtype_and_integers_become_float64():
    assert relu_weights(np.ones((1, 2), dtype=np.float32), normalize=True).dtype == np.float32
    assert relu_weights([[1, 2]]).dtype == np.float64


@given(scores=SCORES, data=st.data(), normalize=st.booleans())
def test_weights_are_relu_of_scores_zeroed_by_the_mask(scores, data, normalize):
    mask = data.draw(arrays(np.bool_, scores.shape))
    weights = relu_weights(scores, mask=mask, normalize=normalize)
    expected = np.array([[max(s, 0.0) if ok else 0.0 for s, ok in zip(row, ok_row)]
                         for row, ok_row in zip(scores.tolist(), mask.tolist())])  # (n, m)
    if normalize:
        totals = expected.sum(axis=-1, keepdims=True)  # (n, 1)
        expected = np.divide(expected, totals, out=np.zeros_like(expected), where=totals > 0)
    np.testing.assert_allclose(weights, expected, rtol=1e-14, atol=0)


@given(scores=SCORES)
def test_normalised_rows_sum_to_one_or_to_zero(scores):
    weights = relu_weights(scores, normalize=True)
    assert np.all(weights >= 0)
    sums = weights.sum(axis=-1)
    has_positive = (scores > 0).any(axis=-1)
    np.testing.assert_allclose(sums[has_positive], 1.0, rtol=1e-12)
    assert np.all(sums[~has_positive] == 0)


# --- errors ---------------------------------------------------------------------------------------


def test_mask_that_does_not_broadcast_is_refused():
    with pytest.raises(ValueError, match=re.escape(
        "mask has shape (2, 2) but scores has shape (2, 3); the mask must broadcast to scores"
    )):
        relu_weights(np.ones((2, 3)), mask=np.ones((2, 2), dtype=bool))


def test_float_mask_is_refused():
    with pytest.raises(TypeError, match=r"^mask has dtype float64; expected a boolean array"):
        relu_weights([1.0, 2.0], mask=[1.0, 1.0])


def test_integer_mask_with_a_two_is_refused():
    with pytest.raises(ValueError, match=r"^mask has integer values other than 0 and 1"):
        relu_weights([1.0, 2.0], mask=[1, 2])


def test_scalar_scores_are_refused():
    with pytest.raises(ValueError, match=r"^scores is a scalar; expected at least one dimension \(the axis to normalise over\)$"):
        relu_weights(3.0)


@pytest.mark.parametrize(("bad", "label"), [(np.nan, "NaN"), (np.inf, r"\+inf"), (-np.inf, "-inf")])
def test_non_finite_scores_are_refused(bad, label):
    with pytest.raises(ValueError, match=rf"^scores contains {label} at index \(0, 1\)"):
        relu_weights([[1.0, bad]])


def test_boolean_scores_are_refused():
    with pytest.raises(TypeError, match=r"^scores has dtype bool; expected real numbers"):
        relu_weights([True, False])


def test_axis_out_of_range_is_refused():
    with pytest.raises(ValueError, match=r"^axis=2 is out of range for an array with 2 dimensions$"):
        relu_weights(np.ones((2, 3)), axis=2, normalize=True)


def test_non_integer_axis_is_refused():
    with pytest.raises(TypeError, match=r"^axis must be an integer, got '0'$"):
        relu_weights(np.ones((2, 3)), axis="0")


def test_float16_weights_whose_sum_overflows_float16_are_still_normalised():
    weights = relu_weights(np.array([[60000.0, 60000.0, 0.0], [1.0, 3.0, -1.0]], dtype=np.float16), normalize=True)
    assert weights.dtype == np.float16
    np.testing.assert_array_equal(weights, [[0.5, 0.5, 0.0], [0.25, 0.75, 0.0]])
