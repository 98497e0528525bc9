"""Tests of the mask tools of attnbook.masks: additive masks, the plain softmax, fully masked rows and band counts."""

import math
import warnings

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from hypothesis.extra.numpy import arrays

from attnbook import banded_mask, causal_mask, graph_mask, padding_mask, scaled_dot_product_attention, softmax
from attnbook.masks import (
    additive_mask,
    fully_masked_rows,
    mask_from_additive,
    plain_softmax,
)

FINITE = st.floats(-8.0, 8.0, allow_nan=False, allow_infinity=False)


@st.composite
def scores_and_mask(draw, max_rows=5, max_cols=6):
    shape = draw(st.tuples(st.integers(1, max_rows), st.integers(1, max_cols)))
    return draw(arrays(np.float64, shape, elements=FINITE)), draw(arrays(np.bool_, shape))


# --- additive_mask ----------------------------------------------------------------------------------


def test_additive_mask_of_the_causal_mask_has_minus_infinity_above_the_diagonal():
    bias = additive_mask(causal_mask(3))
    assert bias.dtype == np.float64
    assert bias.tolist() == [[0.0, -math.inf, -math.inf], [0.0, 0.0, -math.inf], [0.0, 0.0, 0.0]]


def test_additive_mask_with_a_finite_fill():
    assert additive_mask([[1, 0]], fill=-1e9).tolist() == [[0.0, -1e9]]


def test_additive_mask_keeps_the_shape_of_a_padding_mask():
    assert additive_mask(padding_mask([2, 3])).shape == (2, 1, 3)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_additive_mask_has_the_requested_float_type(dtype):
    bias = additive_mask(causal_mask(2), dtype=dtype)
    assert bias.dtype == dtype and np.isneginf(bias[0, 1]) and bias[1, 1] == 0


@given(pair=scores_and_mask())
def test_adding_the_additive_mask_equals_boolean_masking_on_rows_with_an_allowed_key(pair):
    scores, mask = pair
    by_bias = softmax(scores + additive_mask(mask))  # (n_q, n_k)
    by_mask = softmax(scores, mask=mask)  # (n_q, n_k)
    np.testing.assert_array_equal(by_bias, by_mask)  # including fully masked rows: both give zeros
    rows = mask.any(axis=-1)  # (n_q,)
    np.testing.assert_allclose(plain_softmax(scores + additive_mask(mask))[rows], by_mask[rows], rtol=1e-12, atol=0)


@given(pair=scores_and_mask())
def test_round_trip_through_the_additive_form_gives_the_mask_back(pair):
    _, mask = pair
    np.testing.assert_array_equal(mask_from_additive(additive_mask(mask)), mask)
    np.testing.assert_array_equal(mask_from_additive(additive_mask(mask, fill=-1e9)), np.ones_like(mask))


def test_a_finite_fill_lets_a_fully_masked_row_fall_back_to_unmasked_attention():
    scores = np.array([[0.3, -1.2, 2.0]])  # (1, 3)
    nothing_allowed = np.zeros((1, 3), dtype=bool)  # (1, 3)
    leaked = softmax(scores + additive_mask(nothing_allowed, fill=-1e9))
    np.testing.assert_allclose(leaked, softmax(scores), rtol=1e-6)  # the mask had no effect at all
    assert np.all(softmax(scores + additive_mask(nothing_allowed)) == 0)  # -inf: the package's zeros


@pytest.mark.parametrize("fill", [0.0, 1.0, math.inf, 0])
def test_additive_mask_refuses_a_fill_that_is_not_negative(fill):
    with pytest.raises(ValueError, match=r"^fill must be a negative number or -inf \(the bias of a masked pair\), got "):
        additive_mask([[True, False]], fill=fill)


def test_additive_mask_refuses_a_nan_fill():
    with pytest.raises(ValueError, match=r"^fill must be a negative number or -inf .*got nan$"):
        additive_mask([[True, False]], fill=math.nan)


@pytest.mark.parametrize("fill", ["-inf", None, True, [-1.0]])
def test_additive_mask_refuses_a_fill_that_is_not_a_number(fill):
    with pytest.raises(TypeError, match=r"^fill must be a real number \(the bias of a masked pair\), got "):
        additive_mask([[True, False]], fill=fill)


@pytest.mark.parametrize("dtype", [int, np.int32, bool])
def test_additive_mask_refuses_a_non_float_dtype(dtype):
    with pytest.raises(TypeError, match=r"^dtype must be a floating-point type \(the mask is added to scores\), got "):
        additive_mask([[True, False]], dtype=dtype)


def test_additive_mask_refuses_a_float_mask():
    with pytest.raises(TypeError, match=r"^mask has dtype float64; expected a boolean array"):
        additive_mask([[0.0, -math.inf]])


# --- mask_from_additive -----------------------------------------------------------------------------


def test_mask_from_additive_treats_every_finite_bias_as_allowed():
    assert mask_from_additive([[0.0, -1e30, 3.0, -math.inf]]).tolist() == [[True, True, True, False]]


@pytest.mark.parametrize("bad, what", [(math.nan, "NaN"), (math.inf, r"\+inf")])
def test_mask_from_additive_refuses_nan_and_plus_infinity(bad, what):
    with pytest.raises(ValueError, match=rf"^bias contains {what} at index \(0, 1\)"):
        mask_from_additive([[0.0, bad]])


def test_mask_from_additive_refuses_booleans():
    with pytest.raises(TypeError, match=r"^bias has dtype bool"):
        mask_from_additive([[True, False]])


# --- plain_softmax ----------------------------------------------------------------------------------


def test_plain_softmax_gives_nan_for_a_row_of_minus_infinity():
    weights = plain_softmax([[1.0, 2.0], [-math.inf, -math.inf]])
    assert np.all(np.isnan(weights[1]))
    np.testing.assert_allclose(weights[0], softmax([1.0, 2.0]))


def test_plain_softmax_raises_no_warning_for_the_nan_row():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain_softmax([[-math.inf, -math.inf, -math.inf]])


def test_nan_survives_multiplication_by_zero():
    # why a NaN row is worse than a zero row: a later "ignore this row" by multiplying with 0 fails
    row = plain_softmax([[-math.inf, -math.inf]])[0]  # (2,)
    assert np.isnan(0.0 * row).all()
    assert np.isnan(np.sum(row * 0.0))


@given(x=arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 5)), elements=FINITE))
def test_plain_softmax_equals_softmax_on_finite_logits(x):
    np.testing.assert_allclose(plain_softmax(x), softmax(x), rtol=1e-12, atol=1e-300)


@given(x=arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 5)), elements=FINITE))
def test_plain_softmax_along_the_first_axis(x):
    np.testing.assert_allclose(plain_softmax(x, axis=0), softmax(x, axis=0), rtol=1e-12, atol=1e-300)


def test_plain_softmax_keeps_float32():
    assert plain_softmax(np.zeros(3, dtype=np.float32)).dtype == np.float32


def test_plain_softmax_refuses_a_scalar():
    with pytest.raises(ValueError, match=r"^x is a scalar; expected at least one dimension"):
        plain_softmax(1.0)


def test_plain_softmax_refuses_a_bad_axis():
    with pytest.raises(ValueError, match=r"^axis=2 is out of range for an array with 2 dimensions$"):
        plain_softmax(np.zeros((2, 2)), axis=2)


def test_plain_softmax_refuses_nan_input():
    with pytest.raises(ValueError, match=r"^x contains NaN at index \(1,\)"):
        plain_softmax([0.0, math.nan])


# --- fully_masked_rows ------------------------------------------------------------------------------


def test_fully_masked_rows_finds_the_queries_with_no_key():
    mask = np.array([[False, False, False], [True, False, False], [False, False, True]])
    assert fully_masked_rows(mask).tolist() == [True, False, False]


def test_no_row_of_a_causal_banded_or_padding_mask_is_fully_masked():
    assert not fully_masked_rows(causal_mask(4)).any()
    assert not fully_masked_rows(banded_mask(4, 0)).any()
    assert not fully_masked_rows(padding_mask([1, 3])).any()
    assert fully_masked_rows(graph_mask(np.zeros((3, 3), dtype=int), self_loops=False)).all()


def test_fully_masked_rows_keeps_the_batch_dimensions():
    keys = padding_mask([3, 1])  # (2, 1, 3)
    pairs = keys & np.swapaxes(keys, -1, -2)  # (2, 3, 3)
    assert fully_masked_rows(pairs).tolist() == [[False, False, False], [False, True, True]]


@given(mask=arrays(np.bool_, st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 4))))
def test_fully_masked_rows_are_exactly_the_zero_outputs_of_attention(mask):
    rng = np.random.default_rng(0)
    q = rng.standard_normal(mask.shape[:-1] + (2,))  # (batch, n_q, 2)
    k = rng.standard_normal(mask.shape[:1] + mask.shape[-1:] + (2,))  # (batch, n_k, 2)
    v = rng.standard_normal(mask.shape[:1] + mask.shape[-1:] + (3,)) + 10  # (batch, n_k, 3), never 0
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    empty = fully_masked_rows(mask)  # (batch, n_q)
    np.testing.assert_array_equal(np.all(out == 0, axis=-1), empty)
    np.testing.assert_array_equal(weights.sum(axis=-1) == 0, empty)


def test_fully_masked_rows_needs_two_dimensions():
    with pytest.raises(ValueError, match=r"^mask has shape \(2,\) but needs at least 2 dimensions, laid out as \(\.\.\., n_q, n_k\)$"):
        fully_masked_rows([True, False])


def test_fully_masked_rows_refuses_a_float_mask():
    with pytest.raises(TypeError, match=r"^mask has dtype float64"):
        fully_masked_rows([[0.5, 1.0]])
