"""Tests of attnbook.efficient.online_softmax: the running-max recurrence is exact, for every way of cutting the scores."""

import math
import re
import warnings

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from hypothesis.extra.numpy import arrays

from attnbook import scaled_dot_product_attention, softmax
from attnbook.efficient.online_softmax import (
    OnlineSoftmaxState,
    online_softmax,
    online_softmax_finish,
    online_softmax_init,
    online_softmax_trace,
    online_softmax_update,
)

FINITE = st.floats(-30.0, 30.0, allow_nan=False, allow_infinity=False)


def stream(scores, values, block_size, mask=None):
    """Feed one row of scores (n,) and values (n, d_v) to the recurrence in blocks; return the state."""
    state = online_softmax_init((), values.shape[1])
    for start in range(0, scores.shape[0], block_size):
        block = slice(start, start + block_size)
        state = online_softmax_update(state, scores[block], values[block],
                                      mask=None if mask is None else mask[block])
    return state


# --- the worked example of the chapter: scores (1, 2, 4) in blocks of 2 -----------------------------


def test_trace_of_one_two_four_in_blocks_of_two_matches_the_hand_computation():
    first, second = online_softmax_trace([1.0, 2.0, 4.0], block_size=2)
    assert first.max.tolist() == [2.0] and second.max.tolist() == [4.0]
    np.testing.assert_allclose(first.total, [math.exp(-1) + 1], rtol=1e-15)
    # the old sum is rescaled by exp(2 - 4) when the maximum rises to 4
    np.testing.assert_allclose(second.total, [(math.exp(-1) + 1) * math.exp(-2) + 1], rtol=1e-15)
    np.testing.assert_allclose(second.total, [math.exp(-3) + math.exp(-2) + 1], rtol=1e-15)


def test_trace_with_values_ends_at_the_attention_output():
    values = np.array([[1.0], [0.0], [2.0]])  # (3, 1)
    scores = np.array([1.0, 2.0, 4.0])  # (3,)
    last = online_softmax_trace(scores, 2, values)[-1]
    np.testing.assert_allclose(online_softmax_finish(last), softmax(scores) @ values, rtol=1e-15)


def test_element_by_element_trace_has_one_state_per_score_and_the_running_maximum():
    trace = online_softmax_trace([3.0, 1.0, 5.0, 2.0], block_size=1)
    assert [float(s.max[0]) for s in trace] == [3.0, 3.0, 5.0, 5.0]


# --- properties -----------------------------------------------------------------------------------


@given(scores=arrays(np.float64, st.integers(1, 12), elements=FINITE), block=st.integers(1, 14))
def test_final_state_holds_the_maximum_and_the_shifted_sum(scores, block):
    state = stream(scores, np.zeros((scores.shape[0], 0)), block)
    assert state.max[0] == scores.max()
    np.testing.assert_allclose(state.total[0], np.exp(scores - scores.max()).sum(), rtol=1e-13)


@given(data=st.data(), block=st.integers(1, 14), d_v=st.integers(1, 4))
def test_streamed_output_equals_softmax_weighted_sum_for_every_block_size(data, block, d_v):
    n = data.draw(st.integers(1, 12))
    scores = data.draw(arrays(np.float64, n, elements=FINITE))
    values = data.draw(arrays(np.float64, (n, d_v), elements=st.floats(-5, 5)))
    out = online_softmax_finish(stream(scores, values, block))
    np.testing.assert_allclose(out, softmax(scores) @ values, rtol=1e-12, atol=1e-12)


@given(data=st.data(), block=st.integers(1, 14))
def test_masked_stream_equals_masked_softmax_and_fully_masked_gives_zero(data, block):
    n = data.draw(st.integers(1, 12))
    scores = data.draw(arrays(np.float64, n, elements=FINITE))
    values = data.draw(arrays(np.float64, (n, 2), elements=st.floats(-5, 5)))
    mask = data.draw(arrays(np.bool_, n))
    with warnings.catch_warnings(), np.errstate(divide="warn", over="warn", invalid="warn"):
        warnings.simplefilter("error")
        out = online_softmax_finish(stream(scores, values, block, mask))
    np.testing.assert_allclose(out, softmax(scores, mask=mask) @ values, rtol=1e-12, atol=1e-12)
    if not mask.any():
        assert out.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@given(data=st.data(), block=st.integers(1, 9), axis=st.integers(-2, 1), use_mask=st.booleans())
def test_online_softmax_equals_the_package_softmax(dtype, data, block, axis, use_mask):
    shape = (data.draw(st.integers(1, 4)), data.draw(st.integers(1, 9)))
    width = 32 if dtype == np.float32 else 64
    x = data.draw(arrays(dtype, shape, elements=st.floats(-50, 50, width=width)))
    mask = data.draw(arrays(np.bool_, shape)) if use_mask else None
    got = online_softmax(x, axis=axis, mask=mask, block_size=block)
    assert got.dtype == dtype and got.shape == shape
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, softmax(x, axis=axis, mask=mask), rtol=tol, atol=tol)


@given(data=st.data(), block=st.integers(1, 6))
def test_rows_of_a_batch_are_streamed_independently_and_match_attention(data, block):
    n_q, n_k, d = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 8)), data.draw(st.integers(1, 3))
    q = data.draw(arrays(np.float64, (n_q, d), elements=st.floats(-3, 3)))
    k = data.draw(arrays(np.float64, (n_k, d), elements=st.floats(-3, 3)))
    v = data.draw(arrays(np.float64, (n_k, 2), elements=st.floats(-3, 3)))
    scores = q @ k.T / math.sqrt(d)  # (n_q, n_k)
    state = online_softmax_init((n_q,), 2)
    for start in range(0, n_k, block):
        state = online_softmax_update(state, scores[:, start:start + block], v[start:start + block])
    expected = scaled_dot_product_attention(q, k, v).output
    np.testing.assert_allclose(online_softmax_finish(state), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scores_of_ten_thousand_do_not_overflow(dtype):
    scores = np.array([1e4, -1e4, 9999.0], dtype=dtype)  # (3,)
    with warnings.catch_warnings(), np.errstate(divide="warn", over="warn", invalid="warn"):
        warnings.simplefilter("error")
        weights = online_softmax(scores, block_size=1)
    np.testing.assert_allclose(weights, softmax(scores), rtol=1e-6)


def test_negative_infinity_scores_count_as_masked():
    weights = online_softmax([0.0, -np.inf, 0.0], block_size=2)
    assert weights.tolist() == [0.5, 0.0, 0.5]


def test_update_does_not_modify_its_inputs():
    scores, values = np.array([1.0, 2.0]), np.array([[1.0], [2.0]])  # (2,), (2, 1)
    state = online_softmax_init((), 1)
    online_softmax_update(state, scores, values)
    assert scores.tolist() == [1.0, 2.0] and values.tolist() == [[1.0], [2.0]]
    assert state.max.tolist() == [-np.inf] and state.total.tolist() == [0.0]


def test_float32_state_stays_float32():
    state = online_softmax_init((2,), 1, np.float32)
    state = online_softmax_update(state, np.zeros((2, 3), np.float32), np.ones((3, 1), np.float32))
    assert all(a.dtype == np.float32 for a in state)


def test_empty_block_leaves_the_state_unchanged():
    state = online_softmax_update(online_softmax_init(), [3.0])
    again = online_softmax_update(state, np.zeros(0))
    assert again.max.tolist() == [3.0] and again.total.tolist() == [1.0]


# --- errors ---------------------------------------------------------------------------------------


def test_state_of_the_wrong_type_is_refused():
    with pytest.raises(TypeError, match=re.escape(
            "state must be an OnlineSoftmaxState (see online_softmax_init), got tuple")):
        online_softmax_update((np.zeros(1), np.zeros(1), np.zeros(0)), [1.0])


def test_inconsistent_state_is_refused():
    bad = OnlineSoftmaxState(np.zeros((2, 1)), np.zeros((3, 1)), np.zeros((2, 0)))
    with pytest.raises(ValueError, match=re.escape(
            "state has max (2, 1), total (3, 1) and output (2, 0); expected (..., 1), (..., 1) and "
            "(..., d_v) with the same leading shape")):
        online_softmax_finish(bad)


def test_scores_whose_rows_do_not_match_the_state_are_refused():
    with pytest.raises(ValueError, match=re.escape(
            "scores has shape (3, 4) but the state holds rows of shape (2,); expected scores of shape (2, b)")):
        online_softmax_update(online_softmax_init((2,)), np.zeros((3, 4)))


def test_values_that_do_not_fit_the_block_are_refused():
    with pytest.raises(ValueError, match=re.escape(
            "values has shape (3, 2) but scores has shape (2,) and the state averages values of width "
            "d_v = 2; expected values of shape (..., 2, 2)")):
        online_softmax_update(online_softmax_init((), 2), [1.0, 2.0], np.zeros((3, 2)))


def test_missing_values_are_refused_when_the_state_averages_values():
    with pytest.raises(ValueError, match=re.escape(
            "the state averages values of width d_v = 2 but no values were given")):
        online_softmax_update(online_softmax_init((), 2), [1.0])


def test_mask_that_does_not_broadcast_is_refused():
    with pytest.raises(ValueError, match=re.escape(
            "mask has shape (3,) but scores has shape (2,); the mask must broadcast to scores")):
        online_softmax_update(online_softmax_init(), [1.0, 2.0], mask=[True, True, False])
    with pytest.raises(ValueError, match=re.escape(
            "mask has shape (1, 3) but x has shape (1, 2); the mask must broadcast to x")):
        online_softmax([[1.0, 2.0]], mask=[[True, False, True]])


@pytest.mark.parametrize("bad", [0, -1])
def test_block_size_below_one_is_refused(bad):
    with pytest.raises(ValueError, match=f"^block_size must be at least 1, got {bad}$"):
        online_softmax([1.0, 2.0], block_size=bad)


def test_nan_scores_are_refused_naming_the_argument():
    with pytest.raises(ValueError, match=re.escape("scores contains NaN at index (1,)")):
        online_softmax_update(online_softmax_init(), [1.0, np.nan])


def test_scalar_inputs_are_refused():
    with pytest.raises(ValueError, match="x is a scalar"):
        online_softmax(1.0)
    with pytest.raises(ValueError, match="scores is a scalar"):
        online_softmax_update(online_softmax_init(), 1.0)


def test_trace_takes_one_row_only():
    with pytest.raises(ValueError, match=re.escape(
            "scores has shape (2, 2); online_softmax_trace follows one row of shape (n,)")):
        online_softmax_trace(np.zeros((2, 2)))


def test_init_refuses_an_integer_dtype_and_negative_sizes():
    with pytest.raises(TypeError, match="dtype must be a floating-point type, got int64"):
        online_softmax_init((), 1, np.int64)
    with pytest.raises(ValueError, match=re.escape("batch_shape[0] must be at least 0, got -1")):
        online_softmax_init((-1,))


def test_init_refuses_a_batch_shape_of_non_integers_instead_of_truncating_it():
    with pytest.raises(TypeError, match=re.escape("batch_shape[0] must be an integer, got 2.5")):
        online_softmax_init((2.5,))
