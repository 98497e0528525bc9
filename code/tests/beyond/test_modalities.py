"""attnbook.beyond.modalities: one convolution (centred or causal), convolution as attention, patches and fits."""

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from hypothesis.extra.numpy import arrays

from attnbook import banded_mask
from attnbook.beyond.modalities import (
    conv1d,
    conv1d_as_attention,
    conv1d_matrix,
    fit_mixing_matrix,
    grid_local_mask,
    image_to_patches,
    patches_to_image,
    quadratic_relative_scores,
    shift_mask,
)

FINITE = st.floats(-3.0, 3.0, allow_nan=False, allow_infinity=False)


@st.composite
def signal_and_kernel(draw):
    """A one-channel signal (n,) and an odd kernel (k,)."""
    n = draw(st.integers(1, 10))
    k = 2 * draw(st.integers(0, 3)) + 1
    return draw(arrays(np.float64, (n,), elements=FINITE)), draw(arrays(np.float64, (k,), elements=FINITE))


# --- convolution ---------------------------------------------------------------------------------


def test_worked_example_of_the_chapter():
    x, kernel = np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, -1.0])
    np.testing.assert_array_equal(conv1d(x, kernel), [0.0, 2.0, 8.0])
    np.testing.assert_array_equal(conv1d_matrix(kernel, 3), [[2, -1, 0], [1, 2, -1], [0, 1, 2]])


@given(signal_and_kernel())
def test_one_channel_convolution_matches_numpy_convolve_with_the_kernel_flipped(data):
    x, kernel = data
    expected = np.convolve(np.pad(x, len(kernel) // 2), kernel[::-1], mode="valid")  # (n,)
    np.testing.assert_allclose(conv1d(x, kernel), expected, atol=1e-12)


def test_multi_channel_convolution_matches_a_loop_over_offsets_and_channels():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 3))  # (n, c_in)
    kernel = rng.standard_normal((5, 3, 2))  # (k, c_in, c_out)
    expected = np.zeros((7, 2))
    for i in range(7):
        for tap, d in enumerate(range(-2, 3)):
            if 0 <= i + d < 7:
                for c_in in range(3):
                    expected[i] += x[i + d, c_in] * kernel[tap, c_in]
    np.testing.assert_allclose(conv1d(x, kernel), expected, atol=1e-12)


@given(signal_and_kernel())
def test_the_convolution_matrix_times_x_is_the_convolution(data):
    x, kernel = data
    np.testing.assert_allclose(conv1d_matrix(kernel, len(x)) @ x, conv1d(x, kernel), atol=1e-12)


@given(signal_and_kernel())
def test_the_convolution_matrix_is_banded_and_depends_only_on_the_offset(data):
    x, kernel = data
    n, r = len(x), len(kernel) // 2
    matrix = conv1d_matrix(kernel, n)
    for i in range(n):
        for j in range(n):
            assert matrix[i, j] == (kernel[j - i + r] if abs(j - i) <= r else 0.0)


@given(signal_and_kernel())
def test_attention_heads_with_shift_masks_compute_the_convolution(data):
    x, kernel = data
    output, weights = conv1d_as_attention(x, kernel)
    np.testing.assert_allclose(output, conv1d(x, kernel), atol=1e-12)
    r = len(kernel) // 2
    for head, d in enumerate(range(-r, r + 1)):
        np.testing.assert_array_equal(weights[head], shift_mask(len(x), d).astype(float))


def test_rows_without_a_key_get_zero_weights_like_zero_padding():
    _, weights = conv1d_as_attention(np.arange(4.0), np.ones(3))
    assert weights.shape == (3, 4, 4)
    np.testing.assert_array_equal(weights[0, 0], 0.0)  # offset -1 at position 0: nothing to read
    np.testing.assert_array_equal(weights[2, 3], 0.0)  # offset +1 at the last position
    np.testing.assert_array_equal(weights.sum(axis=-1)[1], 1.0)  # offset 0: every row sums to 1


def test_multi_channel_attention_matches_the_multi_channel_convolution():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 2))  # (n, c_in)
    kernel = rng.standard_normal((3, 2, 4))  # (k, c_in, c_out)
    np.testing.assert_allclose(conv1d_as_attention(x, kernel).output, conv1d(x, kernel), atol=1e-12)


def test_soft_quadratic_heads_approach_the_convolution_inside_the_sequence():
    rng = np.random.default_rng(2)
    x, kernel = rng.standard_normal(12), rng.standard_normal(3)
    errors = []
    for alpha in (0.5, 2.0, 8.0, 32.0):
        soft = conv1d_as_attention(x, kernel, alpha=alpha).output
        errors.append(np.abs(soft - conv1d(x, kernel))[1:-1].max())  # interior positions
    assert errors == sorted(errors, reverse=True) and errors[-1] < 1e-12 < errors[0]


def test_quadratic_scores_peak_at_the_requested_offset():
    scores = quadratic_relative_scores(6, -2, 1.5)
    assert scores.shape == (6, 6)
    for i in range(2, 6):
        assert np.argmax(scores[i]) == i - 2 and scores[i, i - 2] == 0.0


@pytest.mark.parametrize(
    ("x", "kernel", "message"),
    [
        (np.ones(4), np.ones(2), r"kernel has shape \(2,\); expected an odd number of taps"),
        (np.ones((4, 2)), np.ones((3, 3, 1)), r"kernel needs c_in = 2 input channels"),
        (np.ones((4, 2)), np.ones(3), r"expected x \(n,\) with kernel \(k,\), or x \(\.\.\., n, c_in\)"),
        (np.ones((4, 1)), np.ones((2, 1, 1)), r"the number of taps k = 2 must be odd"),
    ],
)
def test_convolution_errors_name_the_argument(x, kernel, message):
    with pytest.raises(ValueError, match=message):
        conv1d(x, kernel)
    with pytest.raises(ValueError, match=message):
        conv1d_as_attention(x, kernel)


def test_shift_mask_and_quadratic_scores_refuse_bad_arguments():
    with pytest.raises(TypeError, match=r"^offset must be an integer, got 1.5$"):
        shift_mask(3, 1.5)
    with pytest.raises(ValueError, match=r"^n must be at least 1, got 0$"):
        shift_mask(0, 0)
    with pytest.raises(ValueError, match=r"^alpha must be a positive finite number, got 0.0$"):
        quadratic_relative_scores(3, 0, 0.0)
    with pytest.raises(TypeError, match=r"^alpha must be a real number, got 'big'$"):
        quadratic_relative_scores(3, 0, "big")


def test_convolution_is_translation_equivariant_away_from_the_borders():
    rng = np.random.default_rng(3)
    x = np.zeros(20)
    x[5:10] = rng.standard_normal(5)  # (n,): a bump far from both ends
    kernel = rng.standard_normal(3)
    np.testing.assert_allclose(conv1d(np.roll(x, 4), kernel), np.roll(conv1d(x, kernel), 4), atol=1e-12)


def test_causal_conv1d_equals_the_definition_written_out():
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((6, 3)), rng.standard_normal((3, 3, 2)), rng.standard_normal(2)
    y = conv1d(x, w, b, causal=True, dilation=2)
    for t in range(6):
        expected = b + sum(x[t - 2 * j] @ w[j] for j in range(3) if t - 2 * j >= 0)
        np.testing.assert_allclose(y[t], expected)


def test_causal_conv1d_with_kernel_width_one_is_a_position_wise_linear_map():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((5, 3)), rng.standard_normal((1, 3, 4))
    np.testing.assert_allclose(conv1d(x, w, causal=True), x @ w[0])


def test_causal_conv1d_accepts_a_batch():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 3, 4))
    y = conv1d(x, w, causal=True)
    assert y.shape == (2, 5, 4)
    np.testing.assert_allclose(y[1], conv1d(x[1], w, causal=True))


@pytest.mark.parametrize("w, message", [
    (np.ones((2, 3)), r"^x has shape \(5, 3\) and kernel has shape \(2, 3\); expected x \(n,\) with kernel \(k,\)"),
    (np.ones((2, 4, 1)), r"^x has shape \(5, 3\) but kernel has shape \(2, 4, 1\); kernel needs c_in = 3 input channels"),
    (np.ones((0, 3, 1)), r"^kernel has shape \(0, 3, 1\); the number of taps k and c_out must be at least 1$"),
])
def test_causal_conv1d_refuses_bad_kernels_naming_the_shapes(w, message):
    with pytest.raises(ValueError, match=message):
        conv1d(np.ones((5, 3)), w, causal=True)


def test_causal_conv1d_refuses_a_bias_of_the_wrong_shape_and_a_bad_dilation():
    with pytest.raises(ValueError, match=r"^bias has shape \(3,\) but kernel has shape \(2, 3, 2\); expected bias \(2,\)$"):
        conv1d(np.ones((5, 3)), np.ones((2, 3, 2)), bias=np.zeros(3), causal=True)
    with pytest.raises(ValueError, match=r"^dilation must be at least 1, got 0$"):
        conv1d(np.ones((5, 3)), np.ones((2, 3, 2)), causal=True, dilation=0)
    with pytest.raises(TypeError, match=r"^causal must be True or False, got 1$"):
        conv1d(np.ones((5, 3)), np.ones((2, 3, 2)), causal=1)


def test_a_centred_dilated_convolution_spreads_its_taps_delta_apart():
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((9, 2)), rng.standard_normal((3, 2, 1))  # (n, c_in), (k, c_in, c_out)
    y = conv1d(x, w, dilation=3)
    for i in range(9):
        expected = sum(x[i + d * 3] @ w[d + 1] for d in (-1, 0, 1) if 0 <= i + d * 3 < 9)
        np.testing.assert_allclose(y[i], expected)


def test_a_one_channel_causal_convolution_takes_any_number_of_taps():
    # y_t = 1 x_t + 10 x_{t-1}
    np.testing.assert_allclose(conv1d(np.arange(4.0), [1.0, 10.0], causal=True), [0.0, 1.0, 12.0, 23.0])


def test_the_centred_and_the_causal_convolution_differ_by_a_shift():
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((8, 2)), rng.standard_normal((3, 2, 2))
    # centred taps look at offsets -1, 0, +1; causal taps j = 0, 1, 2 at 0, -1, -2: reverse the taps, shift by one
    centred = conv1d(x, w)
    causal = conv1d(x, w[::-1], causal=True)
    np.testing.assert_allclose(causal[1:], centred[:-1], atol=1e-12)


def test_conv1d_as_attention_refuses_a_batch():
    with pytest.raises(ValueError, match=r"conv1d_as_attention takes one sequence"):
        conv1d_as_attention(np.ones((2, 4, 1)), np.ones((3, 1, 1)))


# --- images --------------------------------------------------------------------------------------


def test_a_224_image_in_16_pixel_patches_gives_196_tokens_of_768_numbers():
    assert image_to_patches(np.zeros((224, 224, 3)), 16).shape == (196, 768)


@given(rows=st.integers(1, 4), cols=st.integers(1, 4), p=st.integers(1, 3), channels=st.integers(1, 3))
def test_patches_are_the_image_blocks_in_row_major_order(rows, cols, p, channels):
    image = np.arange(rows * p * cols * p * channels, dtype=float).reshape(rows * p, cols * p, channels)
    patches = image_to_patches(image, p)
    assert patches.shape == (rows * cols, p * p * channels)
    for index in range(rows * cols):
        r, c = divmod(index, cols)
        np.testing.assert_array_equal(patches[index], image[r * p:(r + 1) * p, c * p:(c + 1) * p].ravel())
    np.testing.assert_array_equal(patches_to_image(patches, image.shape, p), image)


def test_grey_images_round_trip_without_a_channel_axis():
    image = np.arange(36.0).reshape(6, 6)
    np.testing.assert_array_equal(patches_to_image(image_to_patches(image, 3), (6, 6), 3), image)


def test_patch_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"height 6 and width 4 must both be multiples of patch_size = 4"):
        image_to_patches(np.zeros((6, 4)), 4)
    with pytest.raises(ValueError, match=r"^image has shape \(4,\); expected \(height, width\)"):
        image_to_patches(np.zeros(4), 2)
    with pytest.raises(ValueError, match=r"^patch_size must be at least 1, got 0$"):
        image_to_patches(np.zeros((4, 4)), 0)
    with pytest.raises(ValueError, match=r"^patches has shape \(3, 4\) but an image of shape \(4, 4\)"):
        patches_to_image(np.zeros((3, 4)), (4, 4), 2)


def test_an_image_shape_of_non_integers_is_refused_instead_of_truncated():
    patches = image_to_patches(np.zeros((4, 4)), 2)
    with pytest.raises(TypeError, match=r"^image_shape\[0\] must be an integer, got 4.5$"):
        patches_to_image(patches, (4.5, 4), 2)


@given(height=st.integers(1, 5), width=st.integers(1, 5), radius=st.integers(0, 5))
def test_grid_local_mask_is_a_symmetric_square_window(height, width, radius):
    mask = grid_local_mask(height, width, radius)
    assert mask.shape == (height * width, height * width)
    np.testing.assert_array_equal(mask, mask.T)
    assert mask.diagonal().all()
    for a in range(height * width):
        for b in range(height * width):
            (ra, ca), (rb, cb) = divmod(a, width), divmod(b, width)
            assert mask[a, b] == (abs(ra - rb) <= radius and abs(ca - cb) <= radius)


def test_one_row_grid_local_mask_is_the_banded_mask():
    np.testing.assert_array_equal(grid_local_mask(1, 7, 2), banded_mask(7, 2))


# --- fitting -------------------------------------------------------------------------------------


def test_noiseless_data_from_a_convolution_recovers_its_kernel():
    rng = np.random.default_rng(6)
    truth = conv1d_matrix([0.5, 1.0, -0.5], 8)
    x = rng.standard_normal((3, 8))  # (m, n)
    np.testing.assert_allclose(fit_mixing_matrix(x, x @ truth.T, kernel_size=3), truth, atol=1e-12)


def test_the_dense_fit_needs_as_many_sequences_as_positions():
    rng = np.random.default_rng(7)
    truth = rng.standard_normal((6, 6))
    few, enough = rng.standard_normal((4, 6)), rng.standard_normal((6, 6))  # (m, n)
    assert not np.allclose(fit_mixing_matrix(few, few @ truth.T), truth)
    np.testing.assert_allclose(fit_mixing_matrix(enough, enough @ truth.T), truth, atol=1e-9)


def test_ridge_shrinks_the_fit_towards_zero():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((10, 5))
    y = rng.standard_normal((10, 5))
    norms = [np.linalg.norm(fit_mixing_matrix(x, y, ridge=lam)) for lam in (0.0, 1.0, 100.0)]
    assert norms[0] > norms[1] > norms[2]


def test_fit_errors():
    with pytest.raises(ValueError, match=r"^x has shape \(3, 4\) and y has shape \(3, 5\)"):
        fit_mixing_matrix(np.ones((3, 4)), np.ones((3, 5)))
    with pytest.raises(ValueError, match=r"^kernel_size must be odd, got 4$"):
        fit_mixing_matrix(np.ones((3, 4)), np.ones((3, 4)), kernel_size=4)
    with pytest.raises(ValueError, match=r"^ridge must be a non-negative finite number, got -1.0$"):
        fit_mixing_matrix(np.ones((3, 4)), np.ones((3, 4)), ridge=-1.0)
