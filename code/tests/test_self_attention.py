"""Tests of attnbook.self_attention: projections X W_Q, X W_K, X W_V followed by attention, and the layer
one query at a time, under permutations and shifts, with its shapes and errors: the properties the chapter
"Self-attention as a layer" relies on.
"""

import math

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from hypothesis.extra.numpy import arrays

from attnbook import attention_scores, causal_mask, scaled_dot_product_attention, self_attention, softmax

SMALL = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)


@st.composite
def layers(draw, min_n=1, max_n=6):
    """x (n, d_model) and projections w_q, w_k (d_model, d_k), w_v (d_model, d_v), all small."""
    n, d_model = draw(st.integers(min_n, max_n)), draw(st.integers(1, 4))
    d_k, d_v = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    x = draw(arrays(np.float64, (n, d_model), elements=SMALL))
    w_q = draw(arrays(np.float64, (d_model, d_k), elements=SMALL))
    w_k = draw(arrays(np.float64, (d_model, d_k), elements=SMALL))
    w_v = draw(arrays(np.float64, (d_model, d_v), elements=SMALL))
    return x, w_q, w_k, w_v


def random_layer(seed=0, n=5, d_model=4, d_k=3, d_v=2):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d_model))  # (n, d_model)
    w_q, w_k = rng.standard_normal((2, d_model, d_k))  # (d_model, d_k) each
    w_v = rng.standard_normal((d_model, d_v))  # (d_model, d_v)
    return x, w_q, w_k, w_v


def loop_reference(x, w_q, w_k, w_v, scale=None):
    """Oracle: b_i = sum_j softmax_j(q_i . k_j * scale) v_j with plain Python loops and math.exp."""
    x, w_q, w_k, w_v = (np.asarray(a).tolist() for a in (x, w_q, w_k, w_v))
    n, d_model, d_k, d_v = len(x), len(w_q), len(w_q[0]), len(w_v[0])
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale

    def project(a, w, width):
        return [sum(a[m] * w[m][c] for m in range(d_model)) for c in range(width)]

    q = [project(a, w_q, d_k) for a in x]
    k = [project(a, w_k, d_k) for a in x]
    v = [project(a, w_v, d_v) for a in x]
    outputs, weights = [], []
    for i in range(n):
        scores = [sum(q[i][c] * k[j][c] for c in range(d_k)) * scale for j in range(n)]
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        alphas = [e / sum(exps) for e in exps]
        weights.append(alphas)
        outputs.append([sum(alphas[j] * v[j][c] for j in range(n)) for c in range(d_v)])
    return np.array(outputs), np.array(weights)


def permutation_matrix(order):
    """P with (P X)[i] = X[order[i]]."""
    return np.eye(len(order))[list(order)]  # (n, n)


# --- attention of the projected sequence ---------------------------------------------------------


def test_self_attention_equals_attention_of_the_projected_sequence():
    x, w_q, w_k, w_v = random_layer(n=4, d_model=6, d_v=5)
    out, weights = self_attention(x, w_q, w_k, w_v)
    expected_out, expected_weights = scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)
    np.testing.assert_allclose(out, expected_out)
    np.testing.assert_allclose(weights, expected_weights)
    assert out.shape == (4, 5) and weights.shape == (4, 4)


def test_self_attention_passes_the_mask_and_scale_on():
    x, w_q, w_k, w_v = random_layer(seed=1, n=4, d_model=6, d_v=5)
    _, weights = self_attention(x, w_q, w_k, w_v, mask=causal_mask(4), scale=0.1)
    assert np.all(np.triu(weights, k=1) == 0)
    _, expected = scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v, mask=causal_mask(4), scale=0.1)
    np.testing.assert_allclose(weights, expected)


def test_self_attention_accepts_a_batch_of_sequences():
    x, w_q, w_k, w_v = random_layer(seed=2, n=4, d_model=6, d_v=5)
    batch = np.stack([x, 2 * x])  # (2, n, d_model)
    out, _ = self_attention(batch, w_q, w_k, w_v)
    np.testing.assert_allclose(out[1], self_attention(2 * x, w_q, w_k, w_v).output)


# --- the layer computed one query at a time -----------------------------------------------------


@given(layers())
def test_layer_equals_the_plain_loop_over_queries_and_keys(layer):
    out, weights = self_attention(*layer)
    expected_out, expected_weights = loop_reference(*layer)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out, expected_out, rtol=1e-10, atol=1e-12)


@given(layers())
def test_unscaled_layer_equals_the_loop_without_sqrt_d_k(layer):
    out, weights = self_attention(*layer, scale=1.0)
    expected_out, expected_weights = loop_reference(*layer, scale=1.0)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out, expected_out, rtol=1e-10, atol=1e-12)


@given(layers(), st.randoms(use_true_random=False))
def test_each_output_can_be_computed_alone_and_in_any_order(layer, random):
    x, w_q, w_k, w_v = layer
    out, weights = self_attention(x, w_q, w_k, w_v)
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (n, d_k), (n, d_k), (n, d_v)
    order = list(range(len(x)))
    random.shuffle(order)
    for i in order:  # every b_i needs only q_i and all keys and values, never another b_j
        single_out, single_weights = scaled_dot_product_attention(q[i : i + 1], k, v)  # (1, d_v), (1, n)
        np.testing.assert_allclose(single_out[0], out[i], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(single_weights[0], weights[i], rtol=1e-12, atol=1e-12)


def test_b_2_of_four_inputs_is_the_weighted_sum_of_the_values():
    x, w_q, w_k, w_v = random_layer(seed=1, n=4)
    out, weights = self_attention(x, w_q, w_k, w_v, scale=1.0)
    q_2, k, v = x[1] @ w_q, x @ w_k, x @ w_v  # (d_k,), (4, d_k), (4, d_v)
    alpha = np.array([q_2 @ k[j] for j in range(4)])  # alpha_{2,j} = q_2 . k_j
    alpha_prime = np.exp(alpha) / np.exp(alpha).sum()
    b_2 = sum(alpha_prime[j] * v[j] for j in range(4))
    np.testing.assert_allclose(weights[1], alpha_prime, rtol=1e-12)
    np.testing.assert_allclose(out[1], b_2, rtol=1e-12)


# --- permutation equivariance -------------------------------------------------------------------


@given(layers(min_n=2), st.data())
def test_permuting_the_inputs_permutes_the_outputs(layer, data):
    x, w_q, w_k, w_v = layer
    order = data.draw(st.permutations(range(len(x))))
    p = permutation_matrix(order)  # (n, n)
    out, weights = self_attention(x, w_q, w_k, w_v)
    out_p, weights_p = self_attention(p @ x, w_q, w_k, w_v)
    np.testing.assert_allclose(out_p, p @ out, rtol=1e-10, atol=1e-12)  # f(PX) = P f(X)
    np.testing.assert_allclose(weights_p, p @ weights @ p.T, rtol=1e-10, atol=1e-12)  # A(PX) = P A P^T


@given(layers(min_n=2), st.data())
def test_permuting_inputs_and_mask_together_permutes_the_outputs(layer, data):
    x, w_q, w_k, w_v = layer
    n = len(x)
    order = data.draw(st.permutations(range(n)))
    mask = data.draw(arrays(np.bool_, (n, n)))
    p = permutation_matrix(order)  # (n, n)
    out = self_attention(x, w_q, w_k, w_v, mask=mask).output
    mask_p = (p @ mask @ p.T).astype(bool)  # (n, n): the mask follows the tokens
    np.testing.assert_allclose(self_attention(p @ x, w_q, w_k, w_v, mask=mask_p).output, p @ out,
                               rtol=1e-10, atol=1e-12)


def test_a_causal_mask_that_stays_in_place_breaks_equivariance():
    x, w_q, w_k, w_v = random_layer(seed=2)
    p = permutation_matrix([4, 3, 2, 1, 0])  # (5, 5): reverse the sequence
    out = self_attention(x, w_q, w_k, w_v, mask=causal_mask(5)).output
    out_p = self_attention(p @ x, w_q, w_k, w_v, mask=causal_mask(5)).output
    assert np.abs(out_p - p @ out).max() > 0.1


def test_identical_tokens_in_one_sequence_get_identical_outputs():
    rng = np.random.default_rng(3)
    words = rng.standard_normal((3, 4))  # (vocabulary, d_model): "I", "saw", "a"
    x = words[[0, 1, 2, 1]]  # (4, d_model): "I saw a saw"
    _, w_q, w_k, w_v = random_layer(seed=3, d_model=4)
    out, weights = self_attention(x, w_q, w_k, w_v)
    np.testing.assert_array_equal(out[1], out[3])
    np.testing.assert_array_equal(weights[1], weights[3])
    positions = rng.standard_normal((4, 4))  # (n, d_model): distinct position vectors
    out_pos = self_attention(x + positions, w_q, w_k, w_v).output
    assert np.abs(out_pos[1] - out_pos[3]).max() > 1e-3


def test_the_weight_between_two_tokens_does_not_depend_on_their_distance():
    x, w_q, w_k, w_v = random_layer(seed=4, n=4)
    far = self_attention(x, w_q, w_k, w_v).weights[0, 3]  # a1 -> a4, three positions apart
    order = [1, 0, 3, 2]  # a2, a1, a4, a3: now a1 and a4 are neighbours
    near = self_attention(x[order], w_q, w_k, w_v).weights[1, 2]
    assert near == pytest.approx(far, rel=1e-12)


# --- shifting every input by the same vector ------------------------------------------------------


def test_a_shift_invisible_to_the_queries_keeps_the_weights_and_shifts_the_outputs():
    x, w_q, w_k, w_v = random_layer(seed=5, d_model=3, d_k=2, d_v=2)
    c = np.linalg.svd(w_q)[0][:, -1]  # (d_model,): c W_q = 0
    np.testing.assert_allclose(c @ w_q, 0.0, atol=1e-12)
    out, weights = self_attention(x, w_q, w_k, w_v)
    out_c, weights_c = self_attention(x + c, w_q, w_k, w_v)
    np.testing.assert_allclose(weights_c, weights, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out_c, out + c @ w_v, rtol=1e-10, atol=1e-12)


def test_a_shift_invisible_to_the_keys_only_changes_the_weights():
    x, w_q, w_k, w_v = random_layer(seed=6, d_model=3, d_k=2, d_v=2)
    c = 2.0 * np.linalg.svd(w_k)[0][:, -1]  # (d_model,): c W_k = 0 but c W_q != 0
    assert np.abs(c @ w_q).max() > 0.1
    _, weights = self_attention(x, w_q, w_k, w_v)
    _, weights_c = self_attention(x + c, w_q, w_k, w_v)
    assert np.abs(weights_c - weights).max() > 1e-3


@given(layers(min_n=2), st.data())
def test_shift_condition_c_wq_wk_transpose_zero_keeps_the_weights(layer, data):
    x, w_q, w_k, w_v = layer
    m = w_q @ w_k.T  # (d_model, d_model)
    u, s, _ = np.linalg.svd(m)
    null = u[:, s < 1e-9 * max(1.0, s.max(initial=0.0))]  # (d_model, r): left null space of m
    if null.shape[1] == 0:
        return
    c = null @ data.draw(arrays(np.float64, (null.shape[1],), elements=SMALL))  # (d_model,)
    np.testing.assert_allclose(self_attention(x + c, w_q, w_k, w_v).weights,
                               self_attention(x, w_q, w_k, w_v).weights, rtol=1e-8, atol=1e-10)


# --- the chapter's worked example and the column convention --------------------------------------

X_EX = np.array([[1, 0], [0, 1], [1, 1]])  # (n, d_model) = (3, 2)
WQ_EX = np.array([[1, 1], [0, 1]])  # (d_model, d_k) = (2, 2)
WK_EX = np.array([[1, 0], [0, 2]])  # (d_model, d_k) = (2, 2)
WV_EX = np.array([[1, 0, 1], [0, 1, -1]])  # (d_model, d_v) = (2, 3)


def test_worked_example_scores_are_integers_before_scaling():
    q, k = X_EX @ WQ_EX, X_EX @ WK_EX  # (3, 2) each
    np.testing.assert_array_equal(attention_scores(q, k, scale=1.0), [[1, 2, 3], [0, 2, 2], [1, 4, 5]])


def test_worked_example_weights_are_powers_of_r_equals_exp_of_one_over_sqrt2():
    r = math.exp(1 / math.sqrt(2))
    rows = [[1, r, r**2], [1, r**2, r**2], [1, r**3, r**4]]
    expected = np.array([np.array(row) / sum(row) for row in rows])  # (3, 3)
    out, weights = self_attention(X_EX, WQ_EX, WK_EX, WV_EX)
    np.testing.assert_allclose(weights, expected, rtol=1e-14)
    a = expected
    np.testing.assert_allclose(out, np.stack([a[:, 0] + a[:, 2], a[:, 1] + a[:, 2], a[:, 0] - a[:, 1]], axis=1),
                               rtol=1e-13, atol=1e-15)


def test_column_convention_of_the_lecture_gives_the_transposed_matrices():
    x, w_q, w_k, w_v = random_layer(seed=7)
    inputs = x.T  # (d_model, n): I, one input per column
    wq_col, wk_col, wv_col = w_q.T, w_k.T, w_v.T  # W^q = W_q^T etc.
    q_col, k_col, v_col = wq_col @ inputs, wk_col @ inputs, wv_col @ inputs  # (d_k, n), (d_k, n), (d_v, n)
    a_col = k_col.T @ q_col  # (n, n): A = K^T Q, column i holds the scores of query i
    a_prime_col = softmax(a_col / math.sqrt(3), axis=0)  # normalise each column
    o_col = v_col @ a_prime_col  # (d_v, n): O = V A'
    out, weights = self_attention(x, w_q, w_k, w_v)
    np.testing.assert_allclose(a_col, attention_scores(x @ w_q, x @ w_k, scale=1.0).T, rtol=1e-12)
    np.testing.assert_allclose(a_prime_col, weights.T, rtol=1e-12)
    np.testing.assert_allclose(o_col, out.T, rtol=1e-12)


# --- shapes, lengths, batches and dtypes -----------------------------------------------------------


def test_d_v_is_free_while_d_k_is_shared():
    x, w_q, w_k, _ = random_layer(d_model=4, d_k=3)
    for d_v in (1, 3, 7):
        out, weights = self_attention(x, w_q, w_k, np.ones((4, d_v)))
        assert out.shape == (5, d_v) and weights.shape == (5, 5)


def test_the_same_weights_handle_sequences_of_any_length():
    _, w_q, w_k, w_v = random_layer()
    for n in (1, 2, 9, 40):
        x = np.random.default_rng(n).standard_normal((n, 4))  # (n, d_model)
        out, weights = self_attention(x, w_q, w_k, w_v)
        assert out.shape == (n, 2) and weights.shape == (n, n)


def test_a_single_token_attends_only_to_itself():
    x, w_q, w_k, w_v = random_layer(n=1)
    out, weights = self_attention(x, w_q, w_k, w_v)
    np.testing.assert_array_equal(weights, [[1.0]])
    np.testing.assert_allclose(out, x @ w_v)


def test_an_empty_sequence_gives_empty_outputs():
    _, w_q, w_k, w_v = random_layer()
    out, weights = self_attention(np.zeros((0, 4)), w_q, w_k, w_v)
    assert out.shape == (0, 2) and weights.shape == (0, 0)


def test_batch_and_head_dimensions_are_applied_sequence_by_sequence():
    rng = np.random.default_rng(8)
    xs = rng.standard_normal((2, 3, 5, 4))  # (batch, group, n, d_model)
    _, w_q, w_k, w_v = random_layer()
    out, weights = self_attention(xs, w_q, w_k, w_v)
    assert out.shape == (2, 3, 5, 2) and weights.shape == (2, 3, 5, 5)
    for b in range(2):
        for g in range(3):
            single = self_attention(xs[b, g], w_q, w_k, w_v)
            np.testing.assert_allclose(out[b, g], single.output, rtol=1e-12)
            np.testing.assert_allclose(weights[b, g], single.weights, rtol=1e-12)


@given(layers())
def test_weight_rows_are_distributions_and_outputs_stay_between_the_values(layer):
    x, w_q, w_k, w_v = layer
    out, weights = self_attention(x, w_q, w_k, w_v)
    v = x @ w_v  # (n, d_v)
    assert np.all(weights >= 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)
    assert np.all(out >= v.min(axis=0) - 1e-9) and np.all(out <= v.max(axis=0) + 1e-9)


def test_float32_layer_stays_float32_and_integer_layer_becomes_float64():
    x, w_q, w_k, w_v = random_layer()
    out32, w32 = self_attention(*(a.astype(np.float32) for a in (x, w_q, w_k, w_v)))
    assert out32.dtype == np.float32 and w32.dtype == np.float32
    out_int, _ = self_attention(X_EX, WQ_EX, WK_EX, WV_EX)
    assert out_int.dtype == np.float64


# --- errors name the argument ---------------------------------------------------------------------


def test_projection_with_the_wrong_number_of_rows_is_refused_naming_both_shapes():
    x, w_q, w_k, w_v = random_layer(n=4, d_model=6, d_v=5)
    with pytest.raises(ValueError, match=r"x has shape \(4, 6\) but w_k has shape \(5, 3\); w_k needs d_model = 6 rows"):
        self_attention(x, w_q, np.ones((5, 3)), w_v)


def test_query_and_key_projections_must_share_d_k():
    x, w_q, _, w_v = random_layer(n=4, d_model=6, d_v=5)
    with pytest.raises(ValueError, match=r"w_q has shape \(6, 3\) but w_k has shape \(6, 2\); queries and keys need the same d_k"):
        self_attention(x, w_q, np.ones((6, 2)), w_v)


def test_projection_that_is_not_a_matrix_is_refused():
    x, w_q, w_k, _ = random_layer(n=4, d_model=6, d_v=5)
    with pytest.raises(ValueError, match=r"w_v has shape \(6,\); expected a matrix"):
        self_attention(x, w_q, w_k, np.ones(6))


def test_a_single_vector_instead_of_a_sequence_is_refused():
    _, w_q, w_k, w_v = random_layer(n=4, d_model=6, d_v=5)
    with pytest.raises(ValueError, match=r"x has shape \(6,\) but needs at least 2 dimensions"):
        self_attention(np.ones(6), w_q, w_k, w_v)


@pytest.mark.parametrize(
    ("replace", "error", "message"),
    [
        ({"x": np.ones((5, 4), dtype=bool)}, TypeError, "x has dtype bool; expected real numbers"),
        ({"x": [[1.0, 2.0], [3.0]]}, TypeError, "x could not be read as a rectangular array"),
        ({"w_q": np.full((4, 3), np.nan)}, ValueError, r"w_q contains NaN at index \(0, 0\)"),
        ({"w_v": np.full((4, 2), np.inf)}, ValueError, r"w_v contains \+inf at index \(0, 0\)"),
        ({"w_k": np.ones((1, 4, 3))}, ValueError, r"w_k has shape \(1, 4, 3\); expected a matrix \(d_model, d_out\)"),
        ({"w_v": np.ones((3, 2))}, ValueError,
         r"x has shape \(5, 4\) but w_v has shape \(3, 2\); w_v needs d_model = 4 rows"),
        ({"w_k": np.ones((4, 2))}, ValueError,
         r"w_q has shape \(4, 3\) but w_k has shape \(4, 2\); queries and keys need the same d_k"),
        ({"w_q": np.ones((4, 0)), "w_k": np.ones((4, 0))}, ValueError, r"w_q and w_k have shape \(4, 0\), so d_k = 0"),
        ({"mask": np.ones((4, 4), dtype=bool)}, ValueError, r"mask has shape \(4, 4\) but the weights have shape"),
        ({"mask": np.full((5, 5), 0.5)}, TypeError, "mask has dtype float64; expected a boolean array"),
        ({"scale": 0.0}, ValueError, "scale must be a positive finite number, got 0.0"),
        ({"scale": "1"}, TypeError, "scale must be a real number, got '1'"),
    ],
)
def test_bad_arguments_are_refused_with_a_message_naming_them(replace, error, message):
    x, w_q, w_k, w_v = random_layer()
    arguments = {"x": x, "w_q": w_q, "w_k": w_k, "w_v": w_v, "mask": None, "scale": None} | replace
    with pytest.raises(error, match=message):
        self_attention(**arguments)


# --- projections that overflow ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype, big", [(np.float16, 300.0), (np.float32, 1e20)])
def test_a_projection_that_overflows_is_refused_naming_x_and_the_matrix(dtype, big):
    x = np.full((2, 4), big, dtype=dtype)
    small, large = np.full((4, 3), 0.01, dtype=dtype), np.full((4, 3), big, dtype=dtype)
    with pytest.raises(ValueError, match=rf"^x @ w_k overflowed in {np.dtype(dtype).name}") as error:
        self_attention(x, small, large, small)
    assert "contains" not in str(error.value)  # not "k contains +inf": k is no argument
