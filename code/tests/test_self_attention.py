"""Tests of attnbook.self_attention: projections X W_Q, X W_K, X W_V followed by attention."""

import numpy as np
import pytest

from attnbook import causal_mask, scaled_dot_product_attention, self_attention


def random_setup(seed=0, n=4, d_model=6, d_k=3, d_v=5):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d_model))  # (n, d_model)
    w_q, w_k = rng.standard_normal((2, d_model, d_k))  # (d_model, d_k) each
    w_v = rng.standard_normal((d_model, d_v))  # (d_model, d_v)
    return x, w_q, w_k, w_v


def test_self_attention_equals_attention_of_the_projected_sequence():
    x, w_q, w_k, w_v = random_setup()
    out, weights = self_attention(x, w_q, w_k, w_v)
    expected_out, expected_weights = scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)
    np.testing.assert_allclose(out, expected_out)
    np.testing.assert_allclose(weights, expected_weights)
    assert out.shape == (4, 5) and weights.shape == (4, 4)


def test_self_attention_passes_the_mask_and_scale_on():
    x, w_q, w_k, w_v = random_setup(seed=1)
    _, weights = self_attention(x, w_q, w_k, w_v, mask=causal_mask(4), scale=0.1)
    assert np.all(np.triu(weights, k=1) == 0)
    _, expected = scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v, mask=causal_mask(4), scale=0.1)
    np.testing.assert_allclose(weights, expected)


def test_self_attention_accepts_a_batch_of_sequences():
    x, w_q, w_k, w_v = random_setup(seed=2)
    batch = np.stack([x, 2 * x])  # (2, n, d_model)
    out, _ = self_attention(batch, w_q, w_k, w_v)
    np.testing.assert_allclose(out[1], self_attention(2 * x, w_q, w_k, w_v).output)


def test_projection_with_the_wrong_number_of_rows_is_refused_naming_both_shapes():
    x, w_q, w_k, w_v = random_setup()
    with pytest.raises(ValueError, match=r"x has shape \(4, 6\) but w_k has shape \(5, 3\); w_k needs d_model = 6 rows"):
        self_attention(x, w_q, np.ones((5, 3)), w_v)


def test_query_and_key_projections_must_share_d_k():
    x, w_q, _, w_v = random_setup()
    with pytest.raises(ValueError, match=r"w_q has shape \(6, 3\) but w_k has shape \(6, 2\); queries and keys need the same d_k"):
        self_attention(x, w_q, np.ones((6, 2)), w_v)


def test_projection_that_is_not_a_matrix_is_refused():
    x, w_q, w_k, _ = random_setup()
    with pytest.raises(ValueError, match=r"w_v has shape \(6,\); expected a matrix"):
        self_attention(x, w_q, w_k, np.ones(6))


def test_a_single_vector_instead_of_a_sequence_is_refused():
    _, w_q, w_k, w_v = random_setup()
    with pytest.raises(ValueError, match=r"x has shape \(6,\) but needs at least 2 dimensions"):
        self_attention(np.ones(6), w_q, w_k, w_v)
