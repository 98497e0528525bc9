"""Tests of attnbook.validation: every check converts good input and names the argument in its errors."""

import re

import numpy as np
import pytest

from attnbook.validation import (
    as_bool_mask,
    as_float_array,
    broadcast_batch_shapes,
    check_axis,
    check_min_ndim,
    check_shape,
)

# --- as_float_array -------------------------------------------------------------------------------


def test_integer_input_becomes_float64():
    array = as_float_array([[1, 2], [3, 4]], "q")
    assert array.dtype == np.float64
    np.testing.assert_array_equal(array, [[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_float_input_keeps_its_dtype(dtype):
    assert as_float_array(np.ones((2, 3), dtype=dtype), "k").dtype == dtype


def test_empty_array_is_accepted():
    assert as_float_array([], "q").shape == (0,)


def test_bool_dtype_is_refused_naming_the_argument():
    with pytest.raises(TypeError, match=r"^v has dtype bool; expected real numbers \(a float or integer array\)$"):
        as_float_array([True, False], "v")


def test_complex_dtype_is_refused():
    with pytest.raises(TypeError, match=r"^q has dtype complex128; expected real numbers"):
        as_float_array([1 + 2j, 3.0], "q")


def test_string_dtype_is_refused():
    with pytest.raises(TypeError, match=r"^q has dtype <U1; expected real numbers"):
        as_float_array(["a", "b"], "q")


def test_object_dtype_is_refused():
    with pytest.raises(TypeError, match=r"^k has dtype object; expected real numbers"):
        as_float_array(np.array([1.0, None], dtype=object), "k")


def test_ragged_list_is_refused_as_not_rectangular():
    with pytest.raises(TypeError, match=r"^q could not be read as a rectangular array"):
        as_float_array([[1.0, 2.0], [3.0]], "q")


def test_nan_is_refused_with_its_index():
    with pytest.raises(ValueError, match=r"^q contains NaN at index \(1, 0\); attention inputs must be finite numbers$"):
        as_float_array([[0.0, 1.0], [np.nan, 2.0]], "q")


def test_positive_infinity_is_refused_with_its_index():
    with pytest.raises(ValueError, match=r"^k contains \+inf at index \(2,\); attention inputs must be finite"):
        as_float_array([0.0, 1.0, np.inf], "k")


def test_negative_infinity_is_refused_and_points_to_mask():
    with pytest.raises(ValueError, match=re.escape(
        "v contains -inf at index (0, 1); attention inputs must be finite numbers (to exclude positions, pass mask=)"
    )):
        as_float_array([[0.0, -np.inf]], "v")


def test_negative_infinity_is_allowed_on_request():
    array = as_float_array([0.0, -np.inf], "x", allow_neg_inf=True)
    assert np.isneginf(array[1])


def test_nan_and_positive_infinity_stay_refused_when_negative_infinity_is_allowed():
    with pytest.raises(ValueError, match=r"^x contains NaN at index \(0,\)"):
        as_float_array([np.nan, -np.inf], "x", allow_neg_inf=True)
    with pytest.raises(ValueError, match=r"^x contains \+inf at index \(1,\)"):
        as_float_array([-np.inf, np.inf], "x", allow_neg_inf=True)


def test_nan_is_reported_before_infinities():
    with pytest.raises(ValueError, match=r"NaN at index \(2,\)"):
        as_float_array([np.inf, -np.inf, np.nan], "q")


# --- as_bool_mask ---------------------------------------------------------------------------------


def test_integer_zero_one_mask_becomes_boolean():
    mask = as_bool_mask([[1, 0], [0, 1]])
    assert mask.dtype == np.bool_
    assert mask.tolist() == [[True, False], [False, True]]


def test_boolean_mask_is_returned_unchanged():
    mask = np.array([[True, False]])
    np.testing.assert_array_equal(as_bool_mask(mask), mask)


def test_integer_mask_with_a_two_is_refused():
    with pytest.raises(ValueError, match=r"^mask has integer values other than 0 and 1; expected a boolean array$"):
        as_bool_mask([[1, 2]])


def test_float_mask_is_refused_even_with_zeros_and_ones():
    with pytest.raises(TypeError, match=re.escape(
        "mask has dtype float64; expected a boolean array (True where attention is allowed)"
    )):
        as_bool_mask([[1.0, 0.0]])


def test_mask_errors_use_the_given_name():
    with pytest.raises(TypeError, match=r"^padding has dtype <U1"):
        as_bool_mask(["a"], "padding")


def test_ragged_mask_is_refused_as_not_rectangular():
    with pytest.raises(TypeError, match=r"^mask could not be read as a rectangular array"):
        as_bool_mask([[1, 0], [1]])


# --- check_min_ndim -------------------------------------------------------------------------------


def test_too_few_dimensions_names_shape_and_layout():
    with pytest.raises(ValueError, match=re.escape(
        "q has shape (3,) but needs at least 2 dimensions, laid out as (..., n_q, d_k)"
    )):
        check_min_ndim(np.ones(3), "q", 2, "(..., n_q, d_k)")


def test_enough_dimensions_pass_silently():
    assert check_min_ndim(np.ones((1, 2, 3)), "q", 2, "(..., n_q, d_k)") is None


# --- check_axis -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("axis", "expected"), [(0, 0), (2, 2), (-1, 2), (-3, 0), (np.int64(-2), 1)])
def test_axis_is_normalised_to_a_non_negative_int(axis, expected):
    result = check_axis(axis, 3)
    assert result == expected
    assert type(result) is int


@pytest.mark.parametrize("axis", [2, -3, 10])
def test_out_of_range_axis_is_refused(axis):
    with pytest.raises(ValueError, match=rf"^axis={axis} is out of range for an array with 2 dimensions$"):
        check_axis(axis, 2)


@pytest.mark.parametrize("axis", [1.0, "1", None, True])
def test_non_integer_axis_is_refused(axis):
    with pytest.raises(TypeError, match=rf"^axis must be an integer, got {re.escape(repr(axis))}$"):
        check_axis(axis, 2)


def test_axis_errors_use_the_given_name():
    with pytest.raises(ValueError, match=r"^dim=5 is out of range"):
        check_axis(5, 2, name="dim")


# --- broadcast_batch_shapes -----------------------------------------------------------------------


def test_batch_shapes_broadcast():
    assert broadcast_batch_shapes({"q": (2, 1), "k": (1, 8), "v": ()}) == (2, 8)


def test_batch_shapes_that_clash_are_all_listed():
    with pytest.raises(ValueError, match=re.escape(
        "the leading (batch, head) dimensions do not broadcast: q has (2,), k has (3,), v has ()"
    )):
        broadcast_batch_shapes({"q": (2,), "k": (3,), "v": ()})


# --- check_shape ----------------------------------------------------------------------------------


def test_a_shape_of_integers_becomes_a_tuple_of_ints():
    shape = check_shape([2, np.int64(3), 0], "batch_shape")
    assert shape == (2, 3, 0) and all(type(size) is int for size in shape)
    assert check_shape((), "batch_shape") == ()


@pytest.mark.parametrize("shape, message", [
    ((2.5,), "batch_shape[0] must be an integer, got 2.5"),
    ((2, True), "batch_shape[1] must be an integer, got True"),
    ("ab", "batch_shape must be a tuple of sizes, got 'ab'"),
    (3, "batch_shape must be a tuple of sizes, got 3"),
])
def test_a_shape_that_is_not_a_tuple_of_integers_is_refused_naming_the_entry(shape, message):
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        check_shape(shape, "batch_shape")


def test_a_shape_with_a_negative_size_is_refused_naming_the_entry():
    with pytest.raises(ValueError, match=r"^batch_shape\[1\] must be at least 0, got -1$"):
        check_shape((2, -1), "batch_shape")
