"""Tests of the rotary (RoPE) and ALiBi functions of attnbook.positional.

RoPE is checked three ways: scores depend on the positions only through their offset (a property
test), the rotation equals multiplication by e^{i p theta} of complex pairs, and it equals a PyTorch
implementation written here (torch has no built-in RoPE). ALiBi's slopes are checked against the
paper's values and its official code's rule for head counts that are not powers of two.
"""

import math

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from attnbook.positional import (
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    rotary_decay_bound,
    rotary_frequencies,
    rotary_scores,
    sinusoidal_frequencies,
    sinusoidal_shift_matrix,
    yarn_attention_factor,
)

try:
    import torch
except ImportError:  # torch is optional for readers; CI must have it (the torch marker, conftest.py)
    torch = None

HALF_WIDTHS = st.integers(1, 16)  # d_head = 2, 4, ..., 32


def complex_rope(x, positions, theta):
    """Oracle: pairs as complex numbers x[2i] + i x[2i+1], multiplied by exp(i p theta_i)."""
    z = x[..., 0::2] + 1j * x[..., 1::2]  # (..., n, d/2)
    z = z * np.exp(1j * positions[:, None] * theta[None, :])  # (..., n, d/2)
    out = np.empty(x.shape)  # (..., n, d)
    out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return out


def torch_rope(x, positions, theta):
    """A PyTorch RoPE in the usual style: cos/sin caches, interleaved pairs, float64."""
    x = torch.as_tensor(x)  # (..., n, d)
    angles = torch.as_tensor(positions)[:, None] * torch.as_tensor(theta)[None, :]  # (n, d/2)
    cos, sin = torch.cos(angles), torch.sin(angles)  # (n, d/2)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., n, d/2)
    return torch.stack([x_even * cos - x_odd * sin, x_even * sin + x_odd * cos], dim=-1).flatten(-2)


# --- RoPE ----------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(half=HALF_WIDTHS, seed=st.integers(0, 2**16), shift=st.integers(-500, 500))
def test_rotary_scores_depend_only_on_the_offset(half, seed, shift):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, 6, 2 * half))  # (n, d) each
    positions = rng.integers(0, 1000, size=6).astype(float)  # (n,)
    base = rotary_scores(q, k, positions, positions[::-1].copy())  # (n, n)
    moved = rotary_scores(q, k, positions + shift, positions[::-1] + shift)  # (n, n)
    np.testing.assert_allclose(moved, base, atol=1e-9 * (1 + abs(shift)))


def test_rotary_score_is_the_book_shift_matrix_of_the_offset():
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((2, 1, 8))  # (1, 8) each
    for m, n in [(5, 2), (2, 5), (100, 0)]:
        score = rotary_scores(q, k, [m], [n])[0, 0]
        np.testing.assert_allclose(score, q[0] @ sinusoidal_shift_matrix(n - m, 8) @ k[0], rtol=1e-12)


@pytest.mark.parametrize("d_head, base", [(2, 10000.0), (8, 10000.0), (64, 10000.0), (16, 500.0)])
def test_apply_rotary_equals_complex_multiplication(d_head, base):
    rng = np.random.default_rng(d_head)
    x = rng.standard_normal((3, 2, 7, d_head))  # (batch, heads, n, d)
    positions = rng.uniform(0, 4096, size=7)  # (n,): real positions (as interpolation makes them)
    theta = rotary_frequencies(d_head, base)
    np.testing.assert_allclose(apply_rotary(x, positions, theta), complex_rope(x, positions, theta),
                               rtol=1e-12, atol=1e-12)


def test_apply_rotary_is_the_book_shift_matrix_transposed():
    x = np.random.default_rng(2).standard_normal((5, 6))  # (n, d)
    rotated = apply_rotary(x)  # (n, d)
    for p in range(5):
        np.testing.assert_allclose(rotated[p], x[p] @ sinusoidal_shift_matrix(p, 6).T, atol=1e-14)


@pytest.mark.parametrize("scaling", ["none", "interpolation", "ntk", "yarn"])
@pytest.mark.torch
def test_apply_rotary_equals_a_pytorch_implementation(scaling):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 33, 16))  # (batch, heads, n, d_head)
    factor = 1.0 if scaling == "none" else 4.0
    theta = rotary_frequencies(16, scaling=scaling, factor=factor, trained_length=64)
    positions = np.arange(33, dtype=float)
    expected = torch_rope(x, positions, theta).numpy()
    np.testing.assert_allclose(apply_rotary(x, positions, theta), expected, rtol=1e-12, atol=1e-12)
    q_t, k_t = torch_rope(x, positions, theta), torch_rope(x[:, :, ::-1].copy(), positions, theta)
    np.testing.assert_allclose(rotary_scores(x, x[:, :, ::-1], frequencies=theta),
                               (q_t @ k_t.transpose(-1, -2)).numpy(), rtol=1e-10, atol=1e-10)


def test_rotation_keeps_lengths_and_position_zero():
    x = np.random.default_rng(4).standard_normal((9, 10))  # (n, d)
    rotated = apply_rotary(x)
    np.testing.assert_allclose(np.linalg.norm(rotated, axis=1), np.linalg.norm(x, axis=1), rtol=1e-12)
    np.testing.assert_array_equal(rotated[0], x[0])


# --- context extension ---------------------------------------------------------------------------


def test_interpolation_divides_every_frequency():
    np.testing.assert_allclose(rotary_frequencies(32, scaling="interpolation", factor=8),
                               sinusoidal_frequencies(32) / 8, rtol=1e-15)


def test_ntk_keeps_the_fastest_pair_and_slows_the_slowest_by_the_factor():
    for d, s in [(8, 2.0), (64, 4.0), (128, 16.0)]:
        theta, ntk = sinusoidal_frequencies(d), rotary_frequencies(d, scaling="ntk", factor=s)
        assert ntk[0] == theta[0] == 1.0
        np.testing.assert_allclose(ntk[-1], theta[-1] / s, rtol=1e-12)
        assert np.all(ntk <= theta) and np.all(ntk >= theta / s * (1 - 1e-12))


def test_yarn_keeps_fast_pairs_interpolates_slow_ones_and_ramps_between():
    d, s, length = 128, 4.0, 2048
    theta = sinusoidal_frequencies(d)
    yarn = rotary_frequencies(d, scaling="yarn", factor=s, trained_length=length)
    turns = length * theta / (2 * math.pi)
    np.testing.assert_array_equal(yarn[turns > 32], theta[turns > 32])
    np.testing.assert_allclose(yarn[turns < 1], theta[turns < 1] / s, rtol=1e-15)
    middle = (turns >= 1) & (turns <= 32)
    assert middle.any() and np.all(yarn[middle] <= theta[middle]) and np.all(yarn[middle] >= theta[middle] / s)


def test_yarn_attention_factor_is_the_papers_formula():
    assert yarn_attention_factor(1.0) == 1.0
    np.testing.assert_allclose(yarn_attention_factor(16.0), 0.1 * math.log(16.0) + 1, rtol=1e-15)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"scaling": "linear", "factor": 2}, ValueError, "scaling must be one of"),
    ({"scaling": "none", "factor": 2}, ValueError, "factor must be 1"),
    ({"scaling": "interpolation", "factor": 0.5}, ValueError, "factor must be a finite number of at least 1"),
    ({"scaling": "interpolation", "factor": "2"}, TypeError, "factor must be a real number"),
    ({"scaling": "yarn", "factor": 2}, ValueError, "needs trained_length"),
    ({"scaling": "yarn", "factor": 2, "trained_length": 64, "alpha": 40}, ValueError, "alpha < beta"),
])
def test_rotary_frequencies_refuses_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        rotary_frequencies(16, **kwargs)


def test_ntk_needs_two_pairs():
    with pytest.raises(ValueError, match="d_head >= 4"):
        rotary_frequencies(2, scaling="ntk", factor=2)


@pytest.mark.parametrize("call, message", [
    (lambda: apply_rotary(np.ones((3, 5))), "odd"),
    (lambda: apply_rotary(np.ones(4)), "x"),
    (lambda: apply_rotary(np.ones((3, 4)), positions=[0, 1]), r"positions has shape \(2,\)"),
    (lambda: apply_rotary(np.ones((3, 4)), frequencies=[1.0]), r"frequencies has shape \(1,\)"),
    (lambda: rotary_scores(np.ones((3, 4)), np.ones((3, 6))), "last dimensions"),
    (lambda: rotary_scores(np.ones((3, 4)), np.ones((2, 4)), k_positions=[0, 1, 2]), "k_positions"),
])
def test_rotary_functions_name_what_is_wrong(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- long-range decay ----------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(half=st.integers(2, 32), seed=st.integers(0, 2**16), offset=st.integers(-3000, 3000))
def test_su_bound_holds_for_every_query_and_key(half, seed, offset):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, 1, 2 * half))  # (1, d) each
    score = rotary_scores(q, k, [offset], [0])[0, 0]
    h = (q[0, 0::2] + 1j * q[0, 1::2]) * np.conj(k[0, 0::2] + 1j * k[0, 1::2])  # (d/2,)
    h_next = np.append(h[1:], 0)  # h_{d/2} = 0
    bound = np.abs(h_next - h).max() * half * rotary_decay_bound(offset, 2 * half)
    assert abs(score) <= bound * (1 + 1e-12) + 1e-12


def test_decay_bound_equals_the_partial_sums_written_as_loops():
    d, offset = 12, 7.0
    theta = sinusoidal_frequencies(d)
    sums = [abs(sum(complex(math.cos(offset * theta[i]), math.sin(offset * theta[i])) for i in range(j)))
            for j in range(1, d // 2 + 1)]
    np.testing.assert_allclose(rotary_decay_bound(offset, d), sum(sums) / (d / 2), rtol=1e-12)
    np.testing.assert_allclose(rotary_decay_bound(0, d), (d / 2 + 1) / 2)


# --- ALiBi ---------------------------------------------------------------------------------------


def test_alibi_slopes_for_eight_heads_are_the_papers():
    np.testing.assert_array_equal(alibi_slopes(8), [2.0**-h for h in range(1, 9)])


def test_alibi_slopes_for_sixteen_heads_start_at_two_to_the_minus_half():
    np.testing.assert_allclose(alibi_slopes(16), [2 ** (-0.5 * h) for h in range(1, 17)], rtol=1e-15)


def official_slopes(n):
    """The official ALiBi code's get_slopes (Press et al., 2022), transcribed."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start**i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + official_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("n_heads", [1, 2, 3, 5, 6, 7, 8, 12, 20, 32])
def test_alibi_slopes_follow_the_official_code_for_any_head_count(n_heads):
    np.testing.assert_allclose(alibi_slopes(n_heads), official_slopes(n_heads), rtol=1e-14)


def test_alibi_bias_is_minus_slope_times_distance():
    bias = alibi_bias(5, alibi_slopes(2))  # (2, 5, 5)
    for h, m in enumerate(alibi_slopes(2)):
        for i in range(5):
            for j in range(5):
                assert bias[h, i, j] == -m * abs(i - j)


@pytest.mark.torch
def test_alibi_bias_through_torch_sdpa_equals_the_package_softmax():
    from attnbook import causal_mask, softmax

    rng = np.random.default_rng(5)
    q, k, v = rng.standard_normal((3, 4, 10, 8))  # (heads, n, d) each
    bias = alibi_bias(10, alibi_slopes(4))  # (4, 10, 10)
    weights = softmax(q @ k.swapaxes(-1, -2) / np.sqrt(8) + bias, mask=causal_mask(10))  # (4, 10, 10)
    additive = torch.as_tensor(bias).masked_fill(~torch.as_tensor(causal_mask(10)), float("-inf"))
    out = torch.nn.functional.scaled_dot_product_attention(*(torch.as_tensor(a) for a in (q, k, v)),
                                                           attn_mask=additive)
    np.testing.assert_allclose(weights @ v, out.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("call, error, message", [
    (lambda: alibi_slopes(0), ValueError, "n_heads must be at least 1"),
    (lambda: alibi_slopes(2.0), TypeError, "n_heads must be an integer"),
    (lambda: alibi_bias(3, [[0.5]]), ValueError, "1-D"),
    (lambda: alibi_bias(3, [-0.5]), ValueError, "non-negative"),
])
def test_alibi_functions_name_what_is_wrong(call, error, message):
    with pytest.raises(error, match=message):
        call()
