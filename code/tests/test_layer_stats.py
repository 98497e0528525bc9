"""Tests of attnbook.layer_stats: parameter counts of a self-attention head, and influence matrices."""

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

from attnbook import causal_mask, rnn_forward, self_attention
from attnbook.layer_stats import influence_matrix, self_attention_parameter_count

# --- self_attention_parameter_count -----------------------------------------------------------


@given(st.integers(1, 64), st.integers(1, 32), st.integers(1, 32))
def test_parameter_count_equals_the_sizes_of_the_three_matrices(d_model, d_k, d_v):
    w_q, w_k, w_v = np.zeros((d_model, d_k)), np.zeros((d_model, d_k)), np.zeros((d_model, d_v))
    assert self_attention_parameter_count(d_model, d_k, d_v) == w_q.size + w_k.size + w_v.size
    assert self_attention_parameter_count(d_model, d_k, d_v) == d_model * (2 * d_k + d_v)


def test_parameter_count_with_biases_adds_one_number_per_output_column():
    assert self_attention_parameter_count(512, 64, 64, bias=True) == 98_304 + 192
    assert self_attention_parameter_count(2, 2, 3, bias=True) == 14 + 7


def test_d_v_defaults_to_d_k():
    assert self_attention_parameter_count(512, 64) == self_attention_parameter_count(512, 64, 64) == 98_304


def test_parameter_count_of_the_chapter_examples():
    assert self_attention_parameter_count(2, 2, 3) == 14  # the worked example
    assert self_attention_parameter_count(512, 512, 512) == 3 * 512 * 512  # one full-width head
    assert 8 * self_attention_parameter_count(512, 64) == self_attention_parameter_count(512, 512)


def test_parameter_count_returns_a_python_int_even_for_numpy_integers():
    count = self_attention_parameter_count(np.int64(4), np.int32(2), np.int64(3))
    assert type(count) is int and count == 28


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((0, 2, 2), ValueError, "d_model must be at least 1, got 0"),
        ((4, 0, 2), ValueError, "d_k must be at least 1, got 0"),
        ((4, 2, -1), ValueError, "d_v must be at least 1, got -1"),
        ((4.0, 2, 2), TypeError, "d_model must be an integer, got 4.0"),
        ((4, True, 2), TypeError, "d_k must be an integer, got True"),
    ],
)
def test_parameter_count_refuses_bad_sizes_naming_the_argument(args, error, message):
    with pytest.raises(error, match=message):
        self_attention_parameter_count(*args)


def test_parameter_count_refuses_a_non_boolean_bias():
    with pytest.raises(TypeError, match="bias must be True or False, got 1"):
        self_attention_parameter_count(4, 2, 2, bias=1)


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
