"""attnbook.measure.probes: the measured dependence of outputs on inputs, and of score spread on width.

Perturbations find exactly the outputs a layer connects to an input; finite-difference Jacobians equal
exact ones; influence matrices are zero exactly where a layer never reads an input; and the sampled
variance of q . k grows like d_k while the scaled scores keep variance 1.
"""

import re

import numpy as np
import pytest

from attnbook import causal_mask, rnn_forward, self_attention
from attnbook.beyond.modalities import conv1d
from attnbook.measure.probes import (
    DotProductVariance,
    dependency_reach,
    dot_product_variance,
    influence_matrix,
    numerical_jacobian,
    perturbation_effect,
    rnn_state_jacobians,
    steps_to_reach,
)


# --- perturbation and reach ------------------------------------------------------------------------


def test_perturbation_effect_measures_each_output_row():
    effect = perturbation_effect(lambda z: 2 * z, np.zeros((3, 4)), source=2, delta=0.5)
    np.testing.assert_allclose(effect, [0.0, 0.0, 2 * 0.5 * 2])  # norm of (1, 1, 1, 1) = 2


@pytest.mark.parametrize("source", [-1, 3])
def test_perturbation_effect_refuses_a_source_outside_the_sequence(source):
    with pytest.raises(ValueError, match=rf"^source={source} is not a position of x, which has shape \(3, 1\) \(n = 3\)$"):
        perturbation_effect(lambda z: z, np.zeros((3, 1)), source=source)


@pytest.mark.parametrize("source", [1.0, True])
def test_perturbation_effect_refuses_a_source_that_is_not_an_integer(source):
    with pytest.raises(TypeError, match=r"^source must be an integer, got"):
        perturbation_effect(lambda z: z, np.zeros((3, 1)), source=source)


def test_perturbation_effect_refuses_zero_delta_and_a_layer_that_changes_the_length():
    with pytest.raises(ValueError, match=r"^delta must be a non-zero finite number"):
        perturbation_effect(lambda z: z, np.zeros((3, 1)), delta=0.0)
    with pytest.raises(ValueError, match=r"^layer returned shape \(2, 1\) for x of shape \(3, 1\)"):
        perturbation_effect(lambda z: z[:2], np.zeros((3, 1)))


def test_steps_to_reach_is_none_when_the_target_is_never_reached():
    assert steps_to_reach(np.zeros((3, 4), dtype=bool)) is None
    assert steps_to_reach(np.array([[False, True, False]]), target=1) == 1


def test_a_causal_convolution_is_causal_and_local():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((10, 2)), rng.standard_normal((3, 2, 2))
    effect = perturbation_effect(lambda z: conv1d(z, w, causal=True, dilation=2), x, source=4)
    assert np.flatnonzero(effect).tolist() == [4, 6, 8]  # t - j * dilation = 4 for j = 0, 1, 2


def test_dependency_reach_marks_the_outputs_moved_after_each_step():
    shift = lambda z, s: np.vstack([np.zeros((s, 1)), z[: len(z) - s]])  # noqa: E731
    reach = dependency_reach(shift, np.zeros((5, 1)), n_steps=3, source=1)
    assert reach.shape == (3, 5) and reach.dtype == bool
    assert [np.flatnonzero(row).tolist() for row in reach] == [[2], [3], [4]]
    assert steps_to_reach(reach) == 3 and steps_to_reach(reach, target=0) is None


# --- Jacobians ---------------------------------------------------------------------------------


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
    with pytest.raises(ValueError, match=r"^x has shape \(2, 3, 1\); expected one sequence of vectors \(n, d_in\)$"):
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


# --- influence_matrix ---------------------------------------------------------------------------


def random_sequence(seed=0, n=5, d=3):
    return np.random.default_rng(seed).standard_normal((n, d))  # (n, d)


def test_influence_of_a_position_wise_linear_map_is_diagonal_with_the_frobenius_norm():
    w = np.random.default_rng(1).standard_normal((3, 4))  # (d_in, d_out)
    influence = influence_matrix(lambda seq: seq @ w, random_sequence())  # (5, 5)
    np.testing.assert_allclose(np.diag(influence), np.linalg.norm(w), rtol=1e-7)
    assert np.all(influence[~np.eye(5, dtype=bool)] == 0)


def test_influence_matches_the_exact_jacobian_of_a_nonlinear_map():
    x = random_sequence(seed=2, n=3, d=2)  # (n, d)
    # y_i = sum over j of tanh(x_j) * (i + 1): d y_i / d x_j = (i + 1) diag(1 - tanh(x_j)^2) per row
    layer = lambda seq: np.tile(np.tanh(seq).sum(axis=0), (3, 1)) * np.arange(1, 4)[:, None]  # noqa: E731
    expected = np.arange(1, 4)[:, None] * np.linalg.norm(1 - np.tanh(x) ** 2, axis=1)[None, :]  # (3, 3)
    np.testing.assert_allclose(influence_matrix(layer, x), expected, rtol=1e-6)


def test_every_self_attention_output_depends_on_every_input():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 4))  # (n, d_model)
    w_q, w_k, w_v = 0.5 * rng.standard_normal((3, 4, 4))  # (d_model, d) each: a softmax far from saturation
    influence = influence_matrix(lambda seq: self_attention(seq, w_q, w_k, w_v), x)  # (6, 6)
    assert influence.shape == (6, 6) and np.all(influence > 1e-3)


def test_causal_self_attention_and_rnn_never_depend_on_later_inputs():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 4))  # (n, d_model)
    w_q, w_k, w_v = rng.standard_normal((3, 4, 4))  # (d_model, d) each
    causal = influence_matrix(lambda seq: self_attention(seq, w_q, w_k, w_v, mask=causal_mask(6)), x)
    rnn = influence_matrix(lambda seq: rnn_forward(seq, w_q, 0.3 * w_k, np.zeros(4)), x)
    for influence in (causal, rnn):
        assert np.all(np.triu(influence, k=1) == 0)  # exactly: the future is never read
        assert np.all(np.tril(influence)[np.tril_indices(6)] > 0)


def test_rnn_influence_fades_with_distance_when_the_recurrence_contracts():
    x = random_sequence(seed=5, n=8, d=2)
    rnn = lambda seq: rnn_forward(seq, np.eye(2), 0.5 * np.eye(2), np.zeros(2))  # noqa: E731
    last_row = influence_matrix(rnn, x)[-1]  # (n,): influence of every input on the final state
    assert np.all(np.diff(last_row) > 0)  # the further back, the weaker
    assert last_row[0] < 0.5**7 * np.sqrt(2)  # at most 0.5 per step, 7 steps back


def test_layers_returning_output_and_weights_are_accepted():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 2))  # (n, d_model)
    with_tuple = influence_matrix(lambda seq: self_attention(seq, np.eye(2), np.eye(2), np.eye(2)), x)
    output_only = influence_matrix(lambda seq: self_attention(seq, np.eye(2), np.eye(2), np.eye(2)).output, x)
    np.testing.assert_array_equal(with_tuple, output_only)


def test_output_length_may_differ_from_input_length():
    influence = influence_matrix(lambda seq: seq.sum(axis=0, keepdims=True), random_sequence())  # (1, 5)
    np.testing.assert_allclose(influence, np.sqrt(3) * np.ones((1, 5)), rtol=1e-7)


def test_integer_input_is_accepted_and_measured_in_float64():
    influence = influence_matrix(lambda seq: 2 * seq, [[1, 2], [3, 4]])
    assert influence.dtype == np.float64
    np.testing.assert_allclose(influence, 2 * np.sqrt(2) * np.eye(2), rtol=1e-7)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"layer": "not a function"}, TypeError, "layer must be a function of the sequence x, got str"),
        ({"x": np.ones(3)}, ValueError, r"x has shape \(3,\); expected one sequence of vectors \(n, d_in\)"),
        ({"x": np.ones((2, 2, 2))}, ValueError, r"x has shape \(2, 2, 2\); expected one sequence"),
        ({"x": [[1.0, np.nan]]}, ValueError, r"x contains NaN at index \(0, 1\)"),
        ({"eps": 0.0}, ValueError, "eps must be a positive finite number, got 0.0"),
        ({"eps": float("inf")}, ValueError, "eps must be a positive finite number, got inf"),
        ({"eps": "small"}, TypeError, "eps must be a real number, got 'small'"),
        ({"eps": True}, TypeError, "eps must be a real number, got True"),
    ],
)
def test_bad_arguments_are_refused_naming_the_argument(kwargs, error, message):
    arguments = {"layer": lambda seq: seq, "x": np.ones((2, 2)), "eps": 1e-6} | kwargs
    with pytest.raises(error, match=message):
        influence_matrix(arguments["layer"], arguments["x"], eps=arguments["eps"])


def test_a_layer_that_returns_a_single_vector_is_refused():
    with pytest.raises(ValueError, match=r"layer\(x\) has shape \(2,\) for x of shape \(3, 2\)"):
        influence_matrix(lambda seq: seq.sum(axis=0), np.ones((3, 2)))


def test_a_layer_whose_output_shape_changes_is_refused():
    def unstable(seq):
        return seq if seq[0, 0] <= 1.0 else seq[:1]

    with pytest.raises(ValueError, match=r"layer\(x\) changed shape from \(2, 2\) to \(1, 2\)"):
        influence_matrix(unstable, np.ones((2, 2)))


def test_a_layer_that_produces_nan_is_refused():
    with pytest.raises(ValueError, match=r"layer\(x\) contains NaN"):
        influence_matrix(lambda seq: np.full(seq.shape, np.nan), np.ones((2, 2)))


# --- the spread of scores --------------------------------------------------------------------


@pytest.fixture(scope="module")
def d16():
    return dot_product_variance(16, 200_000, seed=0)


def test_raw_variance_is_close_to_d_k(d16):
    assert abs(d16.raw - 16) < 0.3


def test_scaled_variance_is_close_to_one(d16):
    assert abs(d16.scaled - 1) < 0.02


def test_scaled_variance_is_raw_variance_over_d_k(d16):
    assert d16.scaled == pytest.approx(d16.raw / 16, rel=1e-12)


def test_result_records_its_arguments_as_plain_python_numbers(d16):
    assert isinstance(d16, DotProductVariance)
    assert (d16.d_k, d16.n_samples) == (16, 200_000)
    assert all(type(x) is float for x in (d16.raw, d16.scaled))
    assert all(type(x) is int for x in (d16.d_k, d16.n_samples))


def test_same_seed_gives_identical_results(d16):
    assert dot_product_variance(16, 200_000, seed=0) == d16


def test_different_seeds_give_different_samples():
    assert dot_product_variance(4, 1000, seed=1).raw != dot_product_variance(4, 1000, seed=2).raw


def test_numpy_integer_arguments_are_accepted():
    assert dot_product_variance(np.int64(4), np.int32(1000), seed=np.int64(3)) == dot_product_variance(4, 1000, seed=3)


def test_unscaled_variance_grows_with_d_k_while_scaled_variance_stays_near_one():
    small, large = dot_product_variance(2, 50_000, seed=0), dot_product_variance(64, 50_000, seed=0)
    assert large.raw > 10 * small.raw
    assert abs(small.scaled - 1) < 0.05 and abs(large.scaled - 1) < 0.05


@pytest.mark.parametrize("d_k", [0, -3, 2.0, True, "4", None])
def test_d_k_that_is_not_a_positive_integer_is_refused(d_k):
    with pytest.raises(ValueError, match=rf"^d_k must be a positive integer, got {re.escape(repr(d_k))}$"):
        dot_product_variance(d_k)


@pytest.mark.parametrize("n_samples", [0, -1, 10.0, False])
def test_n_samples_that_is_not_a_positive_integer_is_refused(n_samples):
    with pytest.raises(ValueError, match=rf"^n_samples must be a positive integer, got {re.escape(repr(n_samples))}$"):
        dot_product_variance(4, n_samples)


def test_a_single_sample_is_refused_because_it_has_no_variance():
    with pytest.raises(ValueError, match=r"^n_samples must be at least 2 to estimate a variance, got 1$"):
        dot_product_variance(4, 1)


@pytest.mark.parametrize("seed", [-1, 1.5, "0", True, None])
def test_seed_that_is_not_a_non_negative_integer_is_refused(seed):
    with pytest.raises(ValueError, match=rf"^seed must be a non-negative integer, got {re.escape(repr(seed))}$"):
        dot_product_variance(4, 100, seed=seed)


def test_the_top_level_names_are_the_probes():
    import attnbook

    assert attnbook.dot_product_variance is dot_product_variance
    assert attnbook.DotProductVariance is DotProductVariance
