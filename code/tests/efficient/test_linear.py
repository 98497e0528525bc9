"""Tests of attnbook.efficient.linear: the parallel and recurrent forms agree, the weights have rank at
most d_k, and the ceiling on a key's weight is attained by no query and approached by one."""

import numpy as np
import pytest

from attnbook import scaled_dot_product_attention
from attnbook.efficient.linear import (
    elu_feature_map,
    linear_attention,
    linear_attention_recurrent,
    linear_attention_weights,
    linear_weight_ceiling,
)


def test_feature_map_equals_torch_elu_plus_one():
    torch = pytest.importorskip("torch")
    x = np.linspace(-6, 6, 101)  # (101,)
    np.testing.assert_allclose(elu_feature_map(x), torch.nn.functional.elu(torch.tensor(x)).numpy() + 1, rtol=1e-12, atol=1e-15)
    assert np.all(elu_feature_map(x) > 0)


@pytest.mark.parametrize("shape", [(7, 3), (2, 4, 9, 2)])
def test_recurrent_form_equals_the_causal_parallel_form(shape):
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, *shape))  # (..., n, d_k) each
    v = rng.standard_normal(shape[:-1] + (5,))  # (..., n, d_v)
    run = linear_attention_recurrent(q, k, v)
    np.testing.assert_allclose(run.outputs, linear_attention(q, k, v, causal=True), rtol=1e-12)
    assert run.state.shape == shape[:-2] + (shape[-1], 5) and run.normaliser.shape == shape[:-2] + (shape[-1],)


def test_state_is_the_sum_over_the_whole_stream_and_its_size_does_not_grow():
    rng = np.random.default_rng(1)
    sizes = set()
    for n in (4, 40, 400):
        q, k, v = rng.standard_normal((3, n, 3))  # (n, d) each
        run = linear_attention_recurrent(q, k, v)
        np.testing.assert_allclose(run.state, elu_feature_map(k).T @ v, rtol=1e-12)
        sizes.add(run.state.size + run.normaliser.size)
    assert sizes == {3 * 4}


def test_parallel_form_equals_its_weights_times_the_values():
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((3, 2, 6, 4))  # (batch, n, d) each
    for causal in (False, True):
        weights = linear_attention_weights(q, k, causal=causal)  # (2, 6, 6)
        np.testing.assert_allclose(linear_attention(q, k, v, causal=causal), weights @ v, rtol=1e-12)
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0)
        assert np.all(weights >= 0)
    assert np.all(np.triu(linear_attention_weights(q, k, causal=True), 1) == 0)


def test_weights_have_rank_at_most_d_k_while_softmax_weights_are_full_rank():
    rng = np.random.default_rng(3)
    n, d = 24, 3
    q, k, v = rng.standard_normal((3, n, d))  # (n, d) each
    assert np.linalg.matrix_rank(linear_attention_weights(q, k)) <= d
    assert np.linalg.matrix_rank(scaled_dot_product_attention(q, k, v).weights) == n


def test_ceiling_bounds_every_query_and_is_approached_along_a_feature_axis():
    rng = np.random.default_rng(4)
    k = rng.standard_normal((10, 2))  # (n_k, d_k)
    ceiling = linear_weight_ceiling(k)  # (n_k,)
    q = 4 * rng.standard_normal((500, 2))  # (many queries, d_k)
    assert np.all(linear_attention_weights(q, k) <= ceiling + 1e-12)
    best = int(np.argmax(ceiling))
    axis = int(np.argmax(elu_feature_map(k[best]) / elu_feature_map(k).sum(axis=0)))
    probe = np.full((1, 2), -30.0)  # phi(q) close to the coordinate axis `axis`
    probe[0, axis] = 30.0
    assert linear_attention_weights(probe, k)[0, best] == pytest.approx(ceiling[best], rel=1e-6)


def test_at_most_d_k_keys_can_receive_more_than_half_of_a_query():
    rng = np.random.default_rng(5)
    for d in (1, 2, 4):
        k = 3 * rng.standard_normal((50, d))  # (n_k, d_k)
        assert int((linear_weight_ceiling(k) > 0.5).sum()) <= d


def test_causal_refuses_fewer_keys_than_queries():
    with pytest.raises(ValueError, match="smaller than n_q"):
        linear_attention(np.ones((4, 2)), np.ones((3, 2)), np.ones((3, 1)), causal=True)
    with pytest.raises(ValueError, match="one query per key"):
        linear_attention_recurrent(np.ones((4, 2)), np.ones((3, 2)), np.ones((3, 1)))
