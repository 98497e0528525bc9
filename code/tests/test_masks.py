"""Tests of attnbook.masks: the causal mask, its errors, and what it guarantees inside attention."""

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from hypothesis.extra.numpy import arrays

from attnbook import causal_mask, scaled_dot_product_attention

FINITE = st.floats(-5.0, 5.0, allow_nan=False, allow_infinity=False)


def test_square_causal_mask_is_true_on_and_below_the_diagonal():
    mask = causal_mask(3)
    assert mask.dtype == np.bool_
    assert mask.astype(int).tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]


def test_single_position_sees_itself():
    assert causal_mask(1).tolist() == [[True]]


def test_more_keys_than_queries_aligns_queries_with_the_last_keys():
    assert causal_mask(2, 4).astype(int).tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]


@given(n_q=st.integers(1, 8), extra=st.integers(0, 8))
def test_mask_equals_the_lower_triangle_shifted_by_the_extra_keys(n_q, extra):
    n_k = n_q + extra
    np.testing.assert_array_equal(causal_mask(n_q, n_k), np.tril(np.ones((n_q, n_k), dtype=bool), k=extra))


@given(n=st.integers(1, 8))
def test_explicit_equal_n_k_gives_the_square_mask(n):
    np.testing.assert_array_equal(causal_mask(n, n), causal_mask(n))


def test_numpy_integers_are_accepted():
    np.testing.assert_array_equal(causal_mask(np.int64(2), np.int32(3)), causal_mask(2, 3))


def test_fewer_keys_than_queries_is_refused():
    with pytest.raises(ValueError, match=r"^n_k=2 is smaller than n_q=3; a causal mask needs at least as many keys as queries$"):
        causal_mask(3, 2)


@pytest.mark.parametrize("n", [2.0, "3", None, True, [2]])
def test_non_integer_n_q_is_refused(n):
    with pytest.raises(TypeError, match=r"^n_q must be an integer, got "):
        causal_mask(n)


@pytest.mark.parametrize("n", [2.0, "3", False])
def test_non_integer_n_k_is_refused(n):
    with pytest.raises(TypeError, match=rf"^n_k must be an integer, got {n!r}$"):
        causal_mask(2, n)


@pytest.mark.parametrize("n", [0, -1])
def test_n_q_below_one_is_refused(n):
    with pytest.raises(ValueError, match=rf"^n_q must be at least 1, got {n}$"):
        causal_mask(n)


@pytest.mark.parametrize("n", [0, -4])
def test_n_k_below_one_is_refused(n):
    with pytest.raises(ValueError, match=rf"^n_k must be at least 1, got {n}$"):
        causal_mask(1, n)


@given(data=st.data())
def test_changing_inputs_after_position_t_never_changes_outputs_up_to_t(data):
    n, d_k, d_v = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    t = data.draw(st.integers(0, n - 1))
    q, q_other = (data.draw(arrays(np.float64, (n, d_k), elements=FINITE)) for _ in range(2))
    k, k_other = (data.draw(arrays(np.float64, (n, d_k), elements=FINITE)) for _ in range(2))
    v, v_other = (data.draw(arrays(np.float64, (n, d_v), elements=FINITE)) for _ in range(2))
    q2, k2, v2 = q.copy(), k.copy(), v.copy()
    q2[t + 1:], k2[t + 1:], v2[t + 1:] = q_other[t + 1:], k_other[t + 1:], v_other[t + 1:]
    output, weights = scaled_dot_product_attention(q, k, v, mask=causal_mask(n))
    output2, weights2 = scaled_dot_product_attention(q2, k2, v2, mask=causal_mask(n))
    np.testing.assert_array_equal(output2[: t + 1], output[: t + 1])
    np.testing.assert_array_equal(weights2[: t + 1], weights[: t + 1])


def test_without_the_causal_mask_later_positions_do_change_earlier_outputs():
    # the counterpart of the property above: the mask, not the data, is what makes it hold
    q = k = np.array([[1.0, 0.0], [0.0, 1.0]])  # (2, 2)
    v = np.array([[1.0, 0.0], [0.0, 1.0]])  # (2, 2)
    v2 = np.array([[1.0, 0.0], [5.0, 5.0]])  # (2, 2), only position 1 changed
    unmasked = scaled_dot_product_attention(q, k, v).output[0]
    unmasked2 = scaled_dot_product_attention(q, k, v2).output[0]
    assert not np.allclose(unmasked, unmasked2)
    masked = scaled_dot_product_attention(q, k, v, mask=causal_mask(2)).output[0]
    masked2 = scaled_dot_product_attention(q, k, v2, mask=causal_mask(2)).output[0]
    np.testing.assert_array_equal(masked, masked2)
