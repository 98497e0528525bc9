"""Tests of attnbook.modalities: convolution as attention, patches, RNN Jacobians, counts and fits."""

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from hypothesis.extra.numpy import arrays

from attnbook import banded_mask, causal_mask, rnn_forward
from attnbook.modalities import (
    attention_pair_count,
    conv1d,
    conv1d_as_attention,
    conv1d_matrix,
    fit_mixing_matrix,
    grid_local_mask,
    image_to_patches,
    numerical_jacobian,
    steps_between,
    patches_to_image,
    quadratic_relative_scores,
    rnn_state_jacobians,
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
        (np.ones((4, 2)), np.ones(3), r"expected x \(n,\) with kernel \(k,\), or x \(n, c_in\)"),
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


# --- RNN Jacobians -------------------------------------------------------------------------------


def random_rnn(seed, n=12, d_in=3, d_h=4, scale=0.9):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d_in))  # (n, d_in)
    w_x = rng.standard_normal((d_in, d_h)) / np.sqrt(d_in)  # (d_in, d_h)
    orthogonal, _ = np.linalg.qr(rng.standard_normal((d_h, d_h)))  # (d_h, d_h)
    return x, w_x, scale * orthogonal, 0.1 * rng.standard_normal(d_h)


@pytest.mark.parametrize("source", [0, 3])
def test_analytic_rnn_jacobians_match_finite_differences(source):
    x, w_x, w_h, b = random_rnn(4)

    def states_given(x_source):
        changed = x.copy()
        changed[source] = x_source
        return rnn_forward(changed, w_x, w_h, b)  # (n, d_h)

    analytic = rnn_state_jacobians(x, w_x, w_h, b, source=source)
    numeric = numerical_jacobian(states_given, x[source])
    assert analytic.shape == numeric.shape == (12, 4, 3)
    np.testing.assert_allclose(analytic, numeric, atol=1e-8)
    np.testing.assert_array_equal(analytic[:source], 0.0)


@pytest.mark.parametrize("scale", [0.3, 0.9, 1.5])
def test_influence_is_bounded_by_the_recurrent_norm_to_the_power_of_the_distance(scale):
    x, w_x, w_h, b = random_rnn(5, n=30, scale=scale)
    norms = np.linalg.norm(rnn_state_jacobians(x, w_x, w_h, b), ord=2, axis=(1, 2))  # (n,)
    bound = np.linalg.norm(w_x, 2) * np.linalg.norm(w_h, 2) ** np.arange(30)  # (n,)
    assert np.all(norms <= bound * (1 + 1e-12))


def test_a_linear_scalar_rnn_has_jacobian_w_h_to_the_power_t():
    # tanh'(0) = 1: with zero inputs and zero bias the states stay 0 and the chain is exactly w_h^t w_x
    jac = rnn_state_jacobians(np.zeros((5, 1)), [[2.0]], [[0.5]], [0.0])
    np.testing.assert_allclose(jac[:, 0, 0], 2.0 * 0.5 ** np.arange(5))


def test_rnn_jacobian_errors():
    with pytest.raises(ValueError, match=r"^x has shape \(2, 3, 1\); expected one sequence \(n, d_in\)$"):
        rnn_state_jacobians(np.zeros((2, 3, 1)), [[1.0]], [[1.0]], [0.0])
    with pytest.raises(TypeError, match=r"^source must be an integer, got 1.0$"):
        rnn_state_jacobians(np.zeros((3, 1)), [[1.0]], [[1.0]], [0.0], source=1.0)
    with pytest.raises(ValueError, match=r"w_x needs d_in = 1 rows"):
        rnn_state_jacobians(np.zeros((3, 1)), np.ones((2, 1)), [[1.0]], [0.0])


def test_numerical_jacobian_of_a_linear_map_is_the_matrix():
    matrix = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(numerical_jacobian(lambda v: matrix @ v, np.ones(3)), matrix, atol=1e-9)


def test_numerical_jacobian_keeps_the_shapes_of_input_and_output():
    jac = numerical_jacobian(lambda a: a.sum(axis=0), np.ones((2, 3)))
    assert jac.shape == (3, 2, 3)
    np.testing.assert_allclose(jac[1], [[0, 1, 0], [0, 1, 0]], atol=1e-9)


def test_numerical_jacobian_errors():
    with pytest.raises(TypeError, match=r"^func must be callable, got int$"):
        numerical_jacobian(3, np.ones(2))
    with pytest.raises(ValueError, match=r"^eps must be a positive finite number, got -1.0$"):
        numerical_jacobian(np.sin, np.ones(2), eps=-1.0)


# --- counting ------------------------------------------------------------------------------------


@given(n=st.integers(1, 30), window=st.integers(0, 35))
def test_pair_counts_equal_the_number_of_true_entries_of_the_masks(n, window):
    assert attention_pair_count(n) == n * n
    assert attention_pair_count(n, causal=True) == int(causal_mask(n).sum())
    assert attention_pair_count(n, window=window) == int(banded_mask(n, window).sum())
    assert attention_pair_count(n, window=window, causal=True) == int(banded_mask(n, window, causal=True).sum())


def test_pair_counts_of_long_inputs_are_exact_integers():
    assert attention_pair_count(224 * 224) == 2_517_630_976
    assert attention_pair_count(160_000) == 25_600_000_000
    assert isinstance(attention_pair_count(10**6, window=10), int)


def test_pair_count_errors():
    with pytest.raises(TypeError, match=r"^causal must be True or False, got 'yes'$"):
        attention_pair_count(3, causal="yes")
    with pytest.raises(ValueError, match=r"^window must be at least 0, got -1$"):
        attention_pair_count(3, window=-1)


@pytest.mark.parametrize(
    ("distance", "architecture", "reach", "expected"),
    [
        (0, "recurrent", None, 0),
        (37, "recurrent", None, 37),
        (37, "self-attention", None, 1),
        (0, "self-attention", None, 1),
        (37, "convolution", 1, 37),
        (37, "convolution", 2, 19),
        (0, "convolution", 2, 1),
        (1000, "banded-attention", 50, 20),
        (1001, "banded-attention", 50, 21),
    ],
)
def test_steps_between_positions(distance, architecture, reach, expected):
    assert steps_between(distance, architecture, reach=reach) == expected


def test_steps_between_errors():
    with pytest.raises(ValueError, match=r"^architecture must be one of"):
        steps_between(3, "transformer")
    with pytest.raises(ValueError, match=r"needs reach="):
        steps_between(3, "banded-attention")
    with pytest.raises(ValueError, match=r"^reach must be at least 1, got 0$"):
        steps_between(3, "convolution", reach=0)


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
