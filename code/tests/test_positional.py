"""Tests of attnbook.positional: the sinusoidal formula, the shift matrices, and every error."""

import math

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

from attnbook import sinusoidal_encoding, sinusoidal_frequencies, sinusoidal_shift_matrix

EVEN_WIDTHS = st.integers(1, 32).map(lambda half: 2 * half)  # d_model = 2, 4, ..., 64
BASES = st.floats(1.5, 1e5, allow_nan=False, allow_infinity=False)


def naive_encoding(n_positions, d_model, base=10000.0):
    """Oracle: the formula of Vaswani et al. (2017) written as two loops with math.sin and math.cos."""
    table = [[0.0] * d_model for _ in range(n_positions)]
    for p in range(n_positions):
        for i in range(d_model // 2):
            angle = p / base ** (2 * i / d_model)
            table[p][2 * i] = math.sin(angle)
            table[p][2 * i + 1] = math.cos(angle)
    return np.array(table)


def rotation(angle):
    """The 2 x 2 block that turns the row vector (sin a, cos a) into (sin(a + angle), cos(a + angle))."""
    return np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])


# --- values and shape of the encoding --------------------------------------------------------------


@pytest.mark.parametrize("d_model", [2, 4, 16, 512])
def test_position_zero_is_sine_zero_and_cosine_one(d_model):
    row = sinusoidal_encoding(1, d_model)[0]
    np.testing.assert_array_equal(row[0::2], 0.0)
    np.testing.assert_array_equal(row[1::2], 1.0)


def test_position_one_with_width_four_by_hand():
    # omega = (1, 10000^(-1/2)) = (1, 0.01)
    expected = [math.sin(1.0), math.cos(1.0), math.sin(0.01), math.cos(0.01)]
    np.testing.assert_allclose(sinusoidal_encoding(2, 4)[1], expected, rtol=1e-15)


@pytest.mark.parametrize("n_positions, d_model, base", [(1, 2, 10000.0), (7, 4, 10000.0), (30, 16, 10000.0),
                                                        (50, 64, 10000.0), (20, 10, 100.0), (12, 6, 2.5)])
def test_encoding_matches_the_formula_written_as_a_loop(n_positions, d_model, base):
    np.testing.assert_allclose(sinusoidal_encoding(n_positions, d_model, base),
                               naive_encoding(n_positions, d_model, base), rtol=1e-12, atol=1e-12)


@given(n_positions=st.integers(1, 40), d_model=EVEN_WIDTHS, base=BASES)
def test_encoding_matches_the_loop_for_any_size_and_base(n_positions, d_model, base):
    np.testing.assert_allclose(sinusoidal_encoding(n_positions, d_model, base),
                               naive_encoding(n_positions, d_model, base), rtol=1e-10, atol=1e-10)


def test_shape_and_dtype():
    pe = sinusoidal_encoding(5, 8)
    assert pe.shape == (5, 8) and pe.dtype == np.float64


def test_even_columns_are_sines_and_odd_columns_are_cosines_of_the_same_angle():
    pe = sinusoidal_encoding(100, 32)  # (100, 32)
    angles = np.arange(100)[:, None] * sinusoidal_frequencies(32)[None, :]  # (100, 16)
    np.testing.assert_allclose(pe[:, 0::2], np.sin(angles), rtol=0, atol=0)
    np.testing.assert_allclose(pe[:, 1::2], np.cos(angles), rtol=0, atol=0)


@given(n_positions=st.integers(1, 300), d_model=EVEN_WIDTHS, base=BASES)
def test_every_entry_lies_between_minus_one_and_one(n_positions, d_model, base):
    pe = sinusoidal_encoding(n_positions, d_model, base)
    assert np.all(pe >= -1.0) and np.all(pe <= 1.0)


@given(n_positions=st.integers(1, 300), d_model=EVEN_WIDTHS)
def test_every_row_has_norm_square_root_of_half_the_width(n_positions, d_model):
    # sin^2 + cos^2 = 1 for each of the d_model / 2 pairs
    norms = np.linalg.norm(sinusoidal_encoding(n_positions, d_model), axis=1)
    np.testing.assert_allclose(norms, math.sqrt(d_model / 2), rtol=1e-12)


def test_a_row_does_not_depend_on_how_many_positions_are_asked_for():
    np.testing.assert_array_equal(sinusoidal_encoding(1000, 16)[:10], sinusoidal_encoding(10, 16))


@pytest.mark.parametrize("d_model", [2, 4, 6, 8, 16])
def test_all_positions_below_one_thousand_have_different_encodings(d_model):
    pe = sinusoidal_encoding(1000, d_model)  # (1000, d_model)
    # by the shift property, |PE[p] - PE[q]| = |PE[0] - PE[|p - q|]|; check the direct pairwise form anyway
    squared = (pe**2).sum(1)[:, None] + (pe**2).sum(1)[None, :] - 2 * pe @ pe.T  # (1000, 1000)
    off_diagonal = squared[~np.eye(1000, dtype=bool)]
    assert off_diagonal.min() > 1e-9


def test_numpy_integer_sizes_and_float32_base_are_accepted():
    np.testing.assert_array_equal(sinusoidal_encoding(np.int64(3), np.int32(4), np.float32(10000.0)),
                                  sinusoidal_encoding(3, 4))


# --- frequencies and wavelengths -------------------------------------------------------------------


def test_frequencies_docstring_example_with_base_one_hundred():
    np.testing.assert_allclose(sinusoidal_frequencies(4, base=100.0), [1.0, 0.1], rtol=1e-15)


@given(d_model=EVEN_WIDTHS, base=BASES)
def test_frequencies_form_a_decreasing_geometric_sequence_starting_at_one(d_model, base):
    omega = sinusoidal_frequencies(d_model, base)
    assert omega.shape == (d_model // 2,)
    assert omega[0] == 1.0
    np.testing.assert_allclose(omega[1:] / omega[:-1], base ** (-2 / d_model), rtol=1e-12)
    assert np.all(np.diff(omega) < 0)


@given(d_model=EVEN_WIDTHS, base=BASES)
def test_wavelengths_run_from_two_pi_to_just_below_base_times_two_pi(d_model, base):
    wavelengths = 2 * np.pi / sinusoidal_frequencies(d_model, base)
    assert wavelengths[0] == 2 * np.pi
    np.testing.assert_allclose(wavelengths[-1], 2 * np.pi * base ** ((d_model - 2) / d_model), rtol=1e-12)
    assert wavelengths[-1] < 2 * np.pi * base


def test_width_two_has_only_the_fastest_frequency():
    np.testing.assert_array_equal(sinusoidal_frequencies(2), [1.0])


# --- the shift matrices --------------------------------------------------------------------------


def test_shift_by_zero_is_the_identity():
    np.testing.assert_array_equal(sinusoidal_shift_matrix(0, 8), np.eye(8))


@pytest.mark.parametrize("offset", [1, 3, -2, 17])
def test_shift_matrix_is_block_diagonal_with_one_rotation_per_frequency(offset):
    d_model = 8
    shift = sinusoidal_shift_matrix(offset, d_model)
    omega = sinusoidal_frequencies(d_model)
    expected = np.zeros((d_model, d_model))
    for i, w in enumerate(omega):
        expected[2 * i:2 * i + 2, 2 * i:2 * i + 2] = rotation(offset * w)
    np.testing.assert_allclose(shift, expected, rtol=0, atol=1e-15)


@given(p=st.integers(0, 500), k=st.integers(-200, 200), d_model=EVEN_WIDTHS, base=BASES)
def test_shifting_position_p_by_k_is_multiplication_by_m_k(p, k, d_model, base):
    if p + k < 0:
        p = -k
    pe = sinusoidal_encoding(p + max(k, 0) + 1, d_model, base)  # rows 0 .. max(p, p + k)
    shift = sinusoidal_shift_matrix(k, d_model, base)
    np.testing.assert_allclose(pe[p] @ shift, pe[p + k], rtol=0, atol=1e-9)


@pytest.mark.parametrize("k", [1, 2, 5, 40])
def test_one_shift_matrix_moves_every_row_at_once(k):
    pe = sinusoidal_encoding(200, 64)  # (200, 64)
    np.testing.assert_allclose(pe[:-k] @ sinusoidal_shift_matrix(k, 64), pe[k:], rtol=0, atol=1e-10)


@given(k=st.integers(-1000, 1000), d_model=EVEN_WIDTHS, base=BASES)
def test_shift_matrices_are_orthogonal_rotations(k, d_model, base):
    shift = sinusoidal_shift_matrix(k, d_model, base)
    np.testing.assert_allclose(shift @ shift.T, np.eye(d_model), rtol=0, atol=1e-12)
    assert np.linalg.det(shift) == pytest.approx(1.0, abs=1e-9)


@given(j=st.integers(-300, 300), k=st.integers(-300, 300), d_model=EVEN_WIDTHS, base=BASES)
def test_shifting_by_j_then_by_k_is_shifting_by_j_plus_k(j, k, d_model, base):
    np.testing.assert_allclose(
        sinusoidal_shift_matrix(j, d_model, base) @ sinusoidal_shift_matrix(k, d_model, base),
        sinusoidal_shift_matrix(j + k, d_model, base), rtol=0, atol=1e-9)


@given(k=st.integers(-500, 500), d_model=EVEN_WIDTHS)
def test_shifting_back_is_the_transpose(k, d_model):
    np.testing.assert_allclose(sinusoidal_shift_matrix(-k, d_model), sinusoidal_shift_matrix(k, d_model).T,
                               rtol=0, atol=1e-15)


def test_numpy_integer_offset_is_accepted():
    np.testing.assert_array_equal(sinusoidal_shift_matrix(np.int64(3), 6), sinusoidal_shift_matrix(3, 6))


# --- dot products between encodings --------------------------------------------------------------


@pytest.mark.parametrize("d_model", [2, 4, 16, 64])
def test_dot_products_depend_only_on_the_distance(d_model):
    pe = sinusoidal_encoding(60, d_model)  # (60, d_model)
    gram = pe @ pe.T  # (60, 60)
    omega = sinusoidal_frequencies(d_model)
    offsets = np.arange(60)[:, None] - np.arange(60)[None, :]  # (60, 60): p - q
    expected = np.cos(offsets[..., None] * omega).sum(-1)  # (60, 60)
    np.testing.assert_allclose(gram, expected, rtol=0, atol=1e-10)
    for k in range(-59, 60):  # constant along every diagonal (a Toeplitz matrix)
        diagonal = np.diagonal(gram, offset=k)
        np.testing.assert_allclose(diagonal, diagonal[0], rtol=0, atol=1e-10)


@given(p=st.integers(0, 400), q=st.integers(0, 400), shift=st.integers(0, 400), d_model=EVEN_WIDTHS)
def test_moving_both_positions_together_keeps_their_dot_product(p, q, shift, d_model):
    pe = sinusoidal_encoding(max(p, q) + shift + 1, d_model)
    assert pe[p] @ pe[q] == pytest.approx(pe[p + shift] @ pe[q + shift], abs=1e-9)


@given(k=st.integers(1, 400), d_model=EVEN_WIDTHS)
def test_dot_product_is_largest_at_distance_zero_and_symmetric(k, d_model):
    pe = sinusoidal_encoding(2 * k + 1, d_model)
    middle = k
    assert pe[middle] @ pe[middle] == pytest.approx(d_model / 2)
    assert pe[middle] @ pe[middle + k] < d_model / 2
    assert pe[middle] @ pe[middle + k] == pytest.approx(pe[middle] @ pe[middle - k], abs=1e-9)


def test_dot_product_decays_with_distance_but_not_monotonically():
    pe = sinusoidal_encoding(1000, 64)
    similarity = pe @ pe[0]  # (1000,)
    assert similarity[0] == pytest.approx(32.0)
    assert np.all(np.diff(similarity[:5]) < 0)  # the first steps go down
    assert np.any(np.diff(similarity) > 0)  # but not all of them
    assert similarity[100:].max() < similarity[:5].min()  # far positions look less alike than near ones


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model", [1, 3, 5, 513])
def test_odd_width_is_refused_everywhere(d_model):
    message = rf"^d_model = {d_model} is odd; sinusoidal encodings pair a sine with a cosine$"
    with pytest.raises(ValueError, match=message):
        sinusoidal_encoding(4, d_model)
    with pytest.raises(ValueError, match=message):
        sinusoidal_frequencies(d_model)
    with pytest.raises(ValueError, match=message):
        sinusoidal_shift_matrix(1, d_model)


@pytest.mark.parametrize("d_model", [0, -2])
def test_width_below_one_is_refused(d_model):
    with pytest.raises(ValueError, match=rf"^d_model must be at least 1, got {d_model}$"):
        sinusoidal_encoding(4, d_model)


@pytest.mark.parametrize("d_model", [4.0, "4", None, True])
def test_non_integer_width_is_refused(d_model):
    with pytest.raises(TypeError, match=r"^d_model must be an integer, got "):
        sinusoidal_encoding(4, d_model)


@pytest.mark.parametrize("n_positions", [0, -1])
def test_fewer_than_one_position_is_refused(n_positions):
    with pytest.raises(ValueError, match=rf"^n_positions must be at least 1, got {n_positions}$"):
        sinusoidal_encoding(n_positions, 4)


@pytest.mark.parametrize("n_positions", [3.0, "3", None, False, [3]])
def test_non_integer_number_of_positions_is_refused(n_positions):
    with pytest.raises(TypeError, match=r"^n_positions must be an integer, got "):
        sinusoidal_encoding(n_positions, 4)


@pytest.mark.parametrize("base", [1.0, 1, 0.5, 0.0, -10.0, float("nan"), float("inf"), -float("inf")])
def test_base_must_be_finite_and_greater_than_one(base):
    with pytest.raises(ValueError, match=r"^base must be a finite number greater than 1, got "):
        sinusoidal_encoding(4, 4, base)
    with pytest.raises(ValueError, match=r"^base must be a finite number greater than 1, got "):
        sinusoidal_shift_matrix(1, 4, base)


@pytest.mark.parametrize("base", ["10000", None, True, [10000.0], 1j])
def test_base_must_be_a_real_number(base):
    with pytest.raises(TypeError, match=r"^base must be a real number, got "):
        sinusoidal_frequencies(4, base)


@pytest.mark.parametrize("offset", [1.0, 1.5, "1", None, True])
def test_offset_must_be_an_integer(offset):
    with pytest.raises(TypeError, match=r"^offset must be an integer number of positions, got "):
        sinusoidal_shift_matrix(offset, 4)
