"""Tests of attnbook.complexity: operation counts, the causal convolution, path lengths and timing helpers."""

import math

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

from attnbook import banded_mask, rnn_forward, self_attention
from attnbook.complexity import (
    KINDS,
    Counted,
    conv1d_forward,
    conv1d_macs,
    counted_conv1d,
    counted_rnn,
    counted_self_attention,
    dependency_reach,
    loglog_slope,
    path_length,
    perturbation_effect,
    restricted_attention_macs,
    rnn_macs,
    self_attention_macs,
    sequential_operations,
    steps_to_reach,
    time_call,
    time_layer,
    time_layers,
)

SIZES = st.integers(1, 5)


# --- closed-form counts ----------------------------------------------------------------------------


def test_self_attention_count_is_projections_plus_scores_plus_weighted_sum():
    assert self_attention_macs(10, 4) == 3 * 10 * 4 * 4 + 10 * 10 * 4 + 10 * 10 * 4
    assert self_attention_macs(10, 4, projections=False) == 2 * 10 * 10 * 4


def test_rnn_count_is_input_projection_plus_recurrence():
    assert rnn_macs(10, 4) == 2 * 10 * 4 * 4
    assert rnn_macs(10, 3, 5) == 10 * 3 * 5 + 10 * 5 * 5


def test_conv_count_is_kernel_width_times_positions_times_channels():
    assert conv1d_macs(10, 4, k=3) == 3 * 10 * 4 * 4
    assert conv1d_macs(10, 4, k=3, d_out=2) == 3 * 10 * 4 * 2


def test_attention_core_is_cheaper_than_the_rnn_exactly_when_n_is_smaller_than_d():
    for n in range(1, 40):
        for d in (8, 16, 32):
            core, rnn = self_attention_macs(n, d, projections=False), rnn_macs(n, d)
            assert (core < rnn) == (n < d) and (core == rnn) == (n == d)


def test_self_attention_with_projections_always_costs_more_than_the_rnn():
    assert all(self_attention_macs(n, d) > rnn_macs(n, d) for n in range(1, 30) for d in range(1, 30))


def test_restricted_attention_counts_the_band_only():
    n, d, window = 50, 8, 3
    r = 2 * window + 1
    assert restricted_attention_macs(n, d, window) == 2 * d * (n * r - window * (window + 1))
    assert restricted_attention_macs(n, d, window) < 2 * r * n * d
    assert restricted_attention_macs(4, d, 10) == self_attention_macs(4, d, projections=False)  # band covers all


def test_restricted_attention_with_window_zero_attends_to_itself_only():
    assert restricted_attention_macs(7, 3, 0) == 2 * 7 * 3


@pytest.mark.parametrize("call", [lambda: self_attention_macs(0, 2), lambda: rnn_macs(3, 0),
                                  lambda: conv1d_macs(3, 2, k=0), lambda: restricted_attention_macs(3, 2, -1)])
def test_sizes_below_their_minimum_are_refused(call):
    with pytest.raises(ValueError, match=r"must be at least"):
        call()


def test_non_integer_sizes_are_refused_naming_them():
    with pytest.raises(TypeError, match=r"^d must be an integer, got 2.5$"):
        self_attention_macs(3, 2.5)


# --- counting loops: same outputs as the package, counts equal to the formulas -----------------------


@given(SIZES, SIZES, SIZES, st.integers(0, 10**6))
def test_counted_self_attention_matches_the_package_and_the_formula(n, d, d_k, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))  # (n, d_model)
    w_q, w_k, w_v = rng.standard_normal((3, d, d_k))  # (d_model, d_k) each
    counted = counted_self_attention(x, w_q, w_k, w_v)
    np.testing.assert_allclose(counted.output, self_attention(x, w_q, w_k, w_v).output, atol=1e-12)
    assert counted.macs == 3 * n * d * d_k + 2 * n * n * d_k
    assert counted.nonlinear == n * n
    if d_k == d:
        assert counted.macs == self_attention_macs(n, d)


@given(SIZES, SIZES, SIZES, st.integers(0, 10**6))
def test_counted_rnn_matches_rnn_forward_and_the_formula(n, d_in, d_h, seed):
    rng = np.random.default_rng(seed)
    x, b = rng.standard_normal((n, d_in)), rng.standard_normal(d_h)  # (n, d_in), (d_h,)
    w_x, w_h = rng.standard_normal((d_in, d_h)), rng.standard_normal((d_h, d_h))  # (d_in, d_h), (d_h, d_h)
    counted = counted_rnn(x, w_x, w_h, b)
    np.testing.assert_allclose(counted.output, rnn_forward(x, w_x, w_h, b), atol=1e-12)
    assert (counted.macs, counted.nonlinear) == (rnn_macs(n, d_in, d_h), n * d_h)


@given(SIZES, SIZES, SIZES, st.integers(1, 3), st.integers(1, 3), st.integers(0, 10**6))
def test_counted_conv1d_matches_conv1d_forward_and_the_formula(n, d_in, d_out, k, dilation, seed):
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal((n, d_in)), rng.standard_normal((k, d_in, d_out))  # (n, d_in), (k, d_in, d_out)
    counted = counted_conv1d(x, w, dilation)
    np.testing.assert_allclose(counted.output, conv1d_forward(x, w, dilation=dilation), atol=1e-12)
    assert counted.macs == conv1d_macs(n, d_in, k, d_out) and counted.nonlinear == 0


def test_counted_results_are_named_tuples():
    counted = counted_rnn(np.ones((2, 1)), np.ones((1, 1)), np.ones((1, 1)), np.zeros(1))
    assert isinstance(counted, Counted) and counted._fields == ("output", "macs", "nonlinear")


def test_counted_self_attention_refuses_mismatched_query_and_key_widths():
    with pytest.raises(ValueError, match=r"w_q and w_k must have the same number of columns"):
        counted_self_attention(np.ones((3, 2)), np.ones((2, 2)), np.ones((2, 3)), np.ones((2, 2)))


def test_counted_rnn_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match=r"x has shape \(3, 2\); expected w_x \(2, d_h\)"):
        counted_rnn(np.ones((3, 2)), np.ones((3, 2)), np.eye(2), np.zeros(2))


def test_counted_loops_refuse_a_batch():
    with pytest.raises(ValueError, match=r"^x has shape \(1, 3, 2\); expected a matrix$"):
        counted_conv1d(np.ones((1, 3, 2)), np.ones((2, 2, 2)))


# --- the causal convolution ----------------------------------------------------------------------------


def test_conv1d_equals_the_definition_written_out():
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((6, 3)), rng.standard_normal((3, 3, 2)), rng.standard_normal(2)
    y = conv1d_forward(x, w, b, dilation=2)
    for t in range(6):
        expected = b + sum(x[t - 2 * j] @ w[j] for j in range(3) if t - 2 * j >= 0)
        np.testing.assert_allclose(y[t], expected)


def test_conv1d_with_kernel_width_one_is_a_position_wise_linear_map():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((5, 3)), rng.standard_normal((1, 3, 4))
    np.testing.assert_allclose(conv1d_forward(x, w), x @ w[0])


def test_conv1d_is_causal_and_local():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((10, 2)), rng.standard_normal((3, 2, 2))
    effect = perturbation_effect(lambda z: conv1d_forward(z, w, dilation=2), x, source=4)
    assert np.flatnonzero(effect).tolist() == [4, 6, 8]  # t - j * dilation = 4 for j = 0, 1, 2


def test_conv1d_accepts_a_batch():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 3, 4))
    y = conv1d_forward(x, w)
    assert y.shape == (2, 5, 4)
    np.testing.assert_allclose(y[1], conv1d_forward(x[1], w))


@pytest.mark.parametrize("w, message", [
    (np.ones((2, 3)), r"^w has shape \(2, 3\); expected a kernel \(k, d_in, d_out\)$"),
    (np.ones((2, 4, 1)), r"^x has shape \(5, 3\) but w has shape \(2, 4, 1\); w needs d_in = 3 as its middle dimension$"),
    (np.ones((0, 3, 1)), r"^w has shape \(0, 3, 1\); the kernel width k and d_out must be at least 1$"),
])
def test_conv1d_refuses_bad_kernels_naming_the_shapes(w, message):
    with pytest.raises(ValueError, match=message):
        conv1d_forward(np.ones((5, 3)), w)


def test_conv1d_refuses_a_bias_of_the_wrong_shape_and_a_bad_dilation():
    with pytest.raises(ValueError, match=r"^b has shape \(3,\) but w has shape \(2, 3, 2\); expected b \(2,\)$"):
        conv1d_forward(np.ones((5, 3)), np.ones((2, 3, 2)), b=np.zeros(3))
    with pytest.raises(ValueError, match=r"^dilation must be at least 1, got 0$"):
        conv1d_forward(np.ones((5, 3)), np.ones((2, 3, 2)), dilation=0)


# --- sequential operations and path lengths ---------------------------------------------------------


def test_only_the_recurrent_layer_needs_n_sequential_operations():
    assert [sequential_operations(kind, 12) for kind in KINDS] == [1, 12, 1, 1, 1]


def test_path_lengths_against_their_formulas():
    for n in range(1, 200):
        assert path_length("self-attention", n) == 1
        assert path_length("recurrent", n) == n
        for k in (2, 3, 5):
            assert path_length("convolutional", n, k=k) == max(1, math.ceil((n - 1) / (k - 1)))
            dilated = path_length("dilated convolutional", n, k=k)
            assert k ** dilated >= n and (dilated == 1 or k ** (dilated - 1) < n)
        for window in (1, 2, 7):
            assert path_length("restricted self-attention", n, window=window) == max(1, math.ceil((n - 1) / window))


def test_a_dilated_stack_needs_ceil_log_k_n_layers():
    assert path_length("dilated convolutional", 1000, k=3) == math.ceil(math.log(1000, 3)) == 7
    assert path_length("convolutional", 1000, k=3) == 500


def test_unknown_kind_is_refused_listing_the_kinds():
    with pytest.raises(ValueError, match=r"^kind must be one of 'self-attention', 'recurrent', .*; got 'lstm'$"):
        path_length("lstm", 4)


def make_runs(n, d, k, window, seed=0):
    """Stacks of real layers: run(x, s) = outputs after s layers (or s steps of the recurrence)."""
    rng = np.random.default_rng(seed)
    kernels = rng.standard_normal((n, k, d, d)) / np.sqrt(k * d)  # one (k, d, d) kernel per layer
    heads = rng.standard_normal((n, 3, d, d)) / np.sqrt(d)  # one (3, d, d) set of projections per layer
    w_x, w_h = rng.standard_normal((2, d, d)) / np.sqrt(d)  # (d, d) each

    def recurrent(x, s):
        out = np.zeros_like(x)  # (n, d): states not yet computed are zeros
        out[:s] = rnn_forward(x[:s], w_x, w_h, np.zeros(d))
        return out

    def convolutional(x, s, dilated=False):
        for layer in range(s):
            x = np.tanh(conv1d_forward(x, kernels[layer], dilation=k ** layer if dilated else 1))
        return x

    def attention(x, s, mask=None):
        for layer in range(s):
            x = self_attention(x, *heads[layer], mask=mask).output
        return x

    return {
        "self-attention": attention,
        "recurrent": recurrent,
        "convolutional": convolutional,
        "dilated convolutional": lambda x, s: convolutional(x, s, dilated=True),
        "restricted self-attention": lambda x, s: attention(x, s, mask=banded_mask(n, window)),
    }


@pytest.mark.parametrize("n, k, window", [(9, 3, 2), (16, 2, 3), (12, 4, 1)])
def test_measured_reach_of_real_layers_equals_the_path_length(n, k, window):
    x = np.random.default_rng(1).standard_normal((n, 3))  # (n, d)
    for kind, run in make_runs(n, 3, k, window).items():
        reach = dependency_reach(run, x, n_steps=n)
        assert steps_to_reach(reach) == path_length(kind, n, k=k, window=window), kind


def test_reach_of_a_causal_convolution_grows_by_k_minus_one_per_layer():
    n, k = 12, 3
    run = make_runs(n, 2, k, 1)["convolutional"]
    reach = dependency_reach(run, np.random.default_rng(2).standard_normal((n, 2)), n_steps=4)
    for layer, row in enumerate(reach, start=1):
        assert np.flatnonzero(row).tolist() == list(range(min(n, layer * (k - 1) + 1)))


def test_perturbation_effect_measures_each_output_row():
    effect = perturbation_effect(lambda z: 2 * z, np.zeros((3, 4)), source=2, delta=0.5)
    np.testing.assert_allclose(effect, [0.0, 0.0, 2 * 0.5 * 2])  # norm of (1, 1, 1, 1) = 2


@pytest.mark.parametrize("source", [-1, 3, 1.0, True])
def test_perturbation_effect_refuses_a_source_outside_the_sequence(source):
    with pytest.raises(ValueError, match=r"^source must be a position 0 \.\. 2 of x \(shape \(3, 1\)\)"):
        perturbation_effect(lambda z: z, np.zeros((3, 1)), source=source)


def test_perturbation_effect_refuses_zero_delta_and_a_layer_that_changes_the_length():
    with pytest.raises(ValueError, match=r"^delta must be a non-zero finite number"):
        perturbation_effect(lambda z: z, np.zeros((3, 1)), delta=0.0)
    with pytest.raises(ValueError, match=r"^layer returned shape \(2, 1\) for x of shape \(3, 1\)"):
        perturbation_effect(lambda z: z[:2], np.zeros((3, 1)))


def test_steps_to_reach_is_none_when_the_target_is_never_reached():
    assert steps_to_reach(np.zeros((3, 4), dtype=bool)) is None
    assert steps_to_reach(np.array([[False, True, False]]), target=1) == 1


# --- timing helpers ------------------------------------------------------------------------------------


def test_time_call_returns_a_positive_median_and_calls_the_function_repeats_plus_warmup_times():
    calls = []
    seconds = time_call(calls.append, 1, repeats=5, warmup=2)
    assert seconds > 0 and len(calls) == 7


@pytest.mark.parametrize("clock", ["cpu", "wall"])
def test_time_call_measures_busy_work_on_both_clocks(clock):
    busy = lambda: sum(i * i for i in range(20_000))  # noqa: E731
    assert time_call(busy, repeats=3, clock=clock) > 0


def test_time_call_refuses_an_unknown_clock_or_statistic():
    with pytest.raises(ValueError, match=r"^clock must be 'cpu' or 'wall', got 'gpu'$"):
        time_call(len, [], clock="gpu")
    with pytest.raises(ValueError, match=r"^statistic must be 'median' or 'min', got 'mean'$"):
        time_layers("recurrent", [(4, 2)], statistic="mean")


def test_time_layers_interleaves_the_shapes_and_returns_one_time_each():
    times = time_layers("self-attention", [(8, 4), (16, 4), (32, 4)], repeats=3, statistic="median")
    assert times.shape == (3,) and np.all(times > 0)


def test_time_layers_refuses_shapes_that_are_not_pairs():
    with pytest.raises(ValueError, match=r"^shapes must be a non-empty list of \(n, d\) pairs"):
        time_layers("recurrent", [(4, 2, 1)])
    with pytest.raises(ValueError, match=r"^shapes must be a non-empty list"):
        time_layers("recurrent", [])


def test_time_call_refuses_zero_repeats():
    with pytest.raises(ValueError, match=r"^repeats must be at least 1, got 0$"):
        time_call(len, [], repeats=0)


@pytest.mark.parametrize("kind", ["self-attention", "attention core", "recurrent"])
def test_time_layer_times_each_layer(kind):
    assert time_layer(kind, 8, 4, repeats=2) > 0


def test_loglog_slope_recovers_exponents():
    sizes = np.array([16, 32, 64, 128])
    assert loglog_slope(sizes, 5 * sizes**2.0) == pytest.approx(2.0)
    assert loglog_slope(sizes, 0.1 * sizes) == pytest.approx(1.0)
    mixed = loglog_slope(sizes, 3 * sizes * 4 * 4 + 2 * sizes**2 * 4)  # a linear and a quadratic term
    assert 1 < mixed < 2


@pytest.mark.parametrize("sizes, values, message", [
    ([1], [1], r"1-D of the same length >= 2"),
    ([1, 2], [1, 2, 3], r"1-D of the same length >= 2"),
    ([0, 2], [1, 2], r"must be positive"),
    ([2, 2], [1, 2], r"sizes are all equal"),
])
def test_loglog_slope_refuses_bad_data(sizes, values, message):
    with pytest.raises(ValueError, match=message):
        loglog_slope(sizes, values)
