"""Tests of attnbook.rnn_forward: the tanh recurrence h_t = tanh(x_t W_x + h_{t-1} W_h + b)."""

import math

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

from attnbook import rnn_forward


def random_rnn(seed=0, n=5, d_in=3, d_h=4):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d_in))  # (n, d_in)
    w_x = rng.standard_normal((d_in, d_h))  # (d_in, d_h)
    w_h = rng.standard_normal((d_h, d_h)) / np.sqrt(d_h)  # (d_h, d_h)
    b = rng.standard_normal(d_h)  # (d_h,)
    return x, w_x, w_h, b


def loop_rnn(x, w_x, w_h, b, h_0=None):
    """Oracle: the recurrence written with math.tanh and plain Python lists, one step at a time."""
    x, w_x, w_h, b = x.tolist(), w_x.tolist(), w_h.tolist(), b.tolist()
    d_in, d_h = len(w_x), len(b)
    h = [0.0] * d_h if h_0 is None else list(h_0)
    states = []
    for x_t in x:
        h = [math.tanh(sum(x_t[m] * w_x[m][c] for m in range(d_in)) + sum(h[m] * w_h[m][c] for m in range(d_h)) + b[c])
             for c in range(d_h)]
        states.append(h)
    return np.array(states)


# --- shapes and the recurrence itself ------------------------------------------------------------


def test_one_state_per_position_of_width_d_h():
    x, w_x, w_h, b = random_rnn(n=6, d_in=3, d_h=5)
    assert rnn_forward(x, w_x, w_h, b).shape == (6, 5)


def test_states_equal_a_manual_loop():
    x, w_x, w_h, b = random_rnn(seed=1)
    np.testing.assert_allclose(rnn_forward(x, w_x, w_h, b), loop_rnn(x, w_x, w_h, b), atol=1e-12)


def test_initial_state_is_used_for_the_first_step():
    x, w_x, w_h, b = random_rnn(seed=2)
    h_0 = np.linspace(-1, 1, 4)  # (d_h,)
    states = rnn_forward(x, w_x, w_h, b, h_0=h_0)
    np.testing.assert_allclose(states, loop_rnn(x, w_x, w_h, b, h_0=h_0), atol=1e-12)
    np.testing.assert_allclose(states[0], np.tanh(x[0] @ w_x + h_0 @ w_h + b))


def test_zero_initial_state_is_the_default():
    x, w_x, w_h, b = random_rnn(seed=3)
    np.testing.assert_array_equal(rnn_forward(x, w_x, w_h, b), rnn_forward(x, w_x, w_h, b, h_0=np.zeros(4)))


def test_running_in_two_halves_with_the_carried_state_gives_the_same_states():
    x, w_x, w_h, b = random_rnn(seed=4, n=8)
    first = rnn_forward(x[:3], w_x, w_h, b)
    second = rnn_forward(x[3:], w_x, w_h, b, h_0=first[-1])
    np.testing.assert_allclose(np.vstack([first, second]), rnn_forward(x, w_x, w_h, b), atol=1e-12)


def test_batch_of_sequences_equals_each_sequence_alone():
    x, w_x, w_h, b = random_rnn(seed=5)
    batch = np.stack([x, -x, 2 * x])  # (3, n, d_in)
    states = rnn_forward(batch, w_x, w_h, b)
    assert states.shape == (3, 5, 4)
    for i, seq in enumerate(batch):
        np.testing.assert_allclose(states[i], rnn_forward(seq, w_x, w_h, b), atol=1e-12)


def test_batched_initial_state():
    x, w_x, w_h, b = random_rnn(seed=6)
    batch = np.stack([x, x])  # (2, n, d_in)
    h_0 = np.stack([np.zeros(4), np.ones(4)])  # (2, d_h)
    states = rnn_forward(batch, w_x, w_h, b, h_0=h_0)
    np.testing.assert_allclose(states[1], rnn_forward(x, w_x, w_h, b, h_0=np.ones(4)), atol=1e-12)


def test_states_lie_strictly_between_minus_one_and_one():
    x, w_x, w_h, b = random_rnn(seed=7)
    states = rnn_forward(10 * x, w_x, w_h, b)
    assert np.all(np.abs(states) <= 1)


def test_integer_inputs_are_accepted_as_floats():
    states = rnn_forward(np.ones((2, 1), dtype=int), np.ones((1, 1), dtype=int), np.zeros((1, 1), dtype=int), [0])
    np.testing.assert_allclose(states[:, 0], [math.tanh(1.0)] * 2)


def test_hand_computed_one_dimensional_example():
    # x = (1, 0, 0), w_x = 1, w_h = 0.5, b = 0: h = tanh(1), tanh(0.5 tanh(1)), tanh(0.5 tanh(0.5 tanh(1)))
    states = rnn_forward([[1.0], [0.0], [0.0]], [[1.0]], [[0.5]], [0.0])[:, 0]
    h0 = math.tanh(1.0)
    h1 = math.tanh(0.5 * h0)
    np.testing.assert_allclose(states, [h0, h1, math.tanh(0.5 * h1)])


# --- causality: state t depends on x_0 .. x_t only ------------------------------------------------


@given(st.integers(0, 5), st.integers(0, 2**31 - 1))
def test_state_t_does_not_depend_on_inputs_after_t(t, seed):
    x, w_x, w_h, b = random_rnn(seed=seed % 1000, n=6)
    changed = x.copy()
    changed[t + 1:] = np.random.default_rng(seed).standard_normal(changed[t + 1:].shape)
    before, after = rnn_forward(x, w_x, w_h, b), rnn_forward(changed, w_x, w_h, b)
    np.testing.assert_array_equal(before[: t + 1], after[: t + 1])


def test_changing_the_first_input_changes_every_state():
    x, w_x, w_h, b = random_rnn(seed=8, n=6)
    changed = x.copy()
    changed[0] += 1.0
    diff = np.abs(rnn_forward(changed, w_x, w_h, b) - rnn_forward(x, w_x, w_h, b)).max(axis=1)  # (n,)
    assert np.all(diff > 0)


def test_influence_of_the_first_input_shrinks_when_the_recurrence_contracts():
    # ||W_h||_2 = 0.5 and tanh is 1-Lipschitz: the change in h_t is at most 0.5^t times the change in h_0.
    rng = np.random.default_rng(9)
    q, _ = np.linalg.qr(rng.standard_normal((4, 4)))  # (4, 4) orthogonal
    x, w_x, _, b = random_rnn(seed=9, n=10)
    changed = x.copy()
    changed[0] += 1.0
    diff = np.linalg.norm(rnn_forward(changed, w_x, 0.5 * q, b) - rnn_forward(x, w_x, 0.5 * q, b), axis=1)
    assert np.all(diff[1:] <= 0.5 ** np.arange(1, 10) * diff[0] * (1 + 1e-9))


# --- errors name the argument and its shape --------------------------------------------------------


def test_w_x_with_the_wrong_number_of_rows_is_refused_naming_both_shapes():
    with pytest.raises(ValueError, match=r"^x has shape \(4, 3\) but w_x has shape \(2, 2\); w_x needs d_in = 3 rows$"):
        rnn_forward(np.ones((4, 3)), np.ones((2, 2)), np.eye(2), np.zeros(2))


def test_w_x_that_is_not_a_matrix_is_refused():
    with pytest.raises(ValueError, match=r"w_x has shape \(3,\); w_x needs d_in = 3 rows"):
        rnn_forward(np.ones((4, 3)), np.ones(3), np.eye(2), np.zeros(2))


def test_w_h_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match=r"w_x has shape \(3, 2\), so w_h must be \(2, 2\) and b \(2,\); got \(3, 3\) and \(2,\)"):
        rnn_forward(np.ones((4, 3)), np.ones((3, 2)), np.eye(3), np.zeros(2))


def test_bias_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match=r"so w_h must be \(2, 2\) and b \(2,\); got \(2, 2\) and \(3,\)"):
        rnn_forward(np.ones((4, 3)), np.ones((3, 2)), np.eye(2), np.zeros(3))


def test_initial_state_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match=r"^h_0 has shape \(3,\); expected \(2,\)$"):
        rnn_forward(np.ones((4, 3)), np.ones((3, 2)), np.eye(2), np.zeros(2), h_0=np.zeros(3))


def test_a_single_vector_instead_of_a_sequence_is_refused():
    with pytest.raises(ValueError, match=r"^x has shape \(3,\) but needs at least 2 dimensions, laid out as \(\.\.\., n, d_in\)$"):
        rnn_forward(np.ones(3), np.ones((3, 2)), np.eye(2), np.zeros(2))


@pytest.mark.parametrize("name", ["x", "w_x", "w_h", "b", "h_0"])
def test_nan_in_any_argument_is_refused_naming_it(name):
    args = {"x": np.ones((4, 3)), "w_x": np.ones((3, 2)), "w_h": np.eye(2), "b": np.zeros(2), "h_0": np.zeros(2)}
    args[name] = args[name].copy()
    args[name].flat[0] = np.nan
    with pytest.raises(ValueError, match=rf"^{name} contains NaN at index"):
        rnn_forward(**args)


def test_boolean_input_is_refused_naming_it():
    with pytest.raises(TypeError, match=r"^x has dtype bool"):
        rnn_forward(np.ones((2, 3), dtype=bool), np.ones((3, 2)), np.eye(2), np.zeros(2))
