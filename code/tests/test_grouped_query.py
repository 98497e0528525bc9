"""Grouped-query and multi-query attention in attnbook.multi_head_attention.

Checked against repeating the key and value heads by hand (ordinary multi-head attention on the
repeated heads) and against PyTorch's ``scaled_dot_product_attention(..., enable_gqa=True)``. PyTorch
is optional for readers: without it the PyTorch tests are skipped, except in CI (CI=true).
"""

import math

import numpy as np
import pytest

from attnbook import causal_mask, init_multi_head_weights, multi_head_attention, padding_mask
from attnbook.measure.parameters import kv_cache_bytes
from attnbook.multihead import merge_heads, split_heads

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # torch is optional for readers; CI must have it (the torch marker, conftest.py)
    torch = None


def repeated(weights, n_heads, n_kv_heads):
    """The same layer as ordinary multi-head weights: every key and value head copied G times."""
    group = n_heads // n_kv_heads
    d_head = weights.w_q.shape[0] // n_heads
    columns = np.repeat(np.arange(n_kv_heads), group)[:, None] * d_head + np.arange(d_head)  # (h, d_head)
    columns = columns.reshape(-1)  # (d_model,): query head i reads the columns of key head i // G
    return weights._replace(w_k=weights.w_k[:, columns], w_v=weights.w_v[:, columns],
                            b_k=weights.b_k[columns], b_v=weights.b_v[columns])


def random_biases(weights, seed):
    rng = np.random.default_rng(seed)
    return weights._replace(**{name: rng.standard_normal(getattr(weights, name).shape)
                               for name in ("b_q", "b_k", "b_v", "b_o")})


@pytest.mark.parametrize("n_heads, n_kv_heads", [(4, 1), (4, 2), (8, 2), (6, 3)])
def test_grouped_query_attention_equals_multi_head_attention_on_repeated_key_value_heads(n_heads, n_kv_heads):
    d_model = 24
    w = random_biases(init_multi_head_weights(d_model, seed=1, n_heads=n_heads, n_kv_heads=n_kv_heads), 2)
    rng = np.random.default_rng(3)
    x_q, x_kv = rng.standard_normal((2, 7, d_model)), rng.standard_normal((2, 5, d_model))  # (batch, n, d)
    grouped = multi_head_attention(x_q, x_kv, x_kv, w, n_heads, n_kv_heads=n_kv_heads)
    plain = multi_head_attention(x_q, x_kv, x_kv, repeated(w, n_heads, n_kv_heads), n_heads)
    np.testing.assert_allclose(grouped.output, plain.output, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grouped.weights, plain.weights, rtol=1e-12, atol=1e-15)


def test_query_heads_of_one_group_share_their_keys_but_not_their_weights():
    w = init_multi_head_weights(16, seed=0, n_heads=4, n_kv_heads=2)
    x = np.random.default_rng(0).standard_normal((6, 16))  # (n, d_model)
    weights = multi_head_attention(x, x, x, w, 4, n_kv_heads=2).weights  # (h, n, n)
    keys = split_heads(x @ w.w_k, 2)  # (n_kv, n, d_head)
    queries = split_heads(x @ w.w_q, 4)  # (h, n, d_head)
    for head in range(4):
        scores = queries[head] @ keys[head // 2].T / 2.0  # d_head = 4
        expected = np.exp(scores - scores.max(axis=-1, keepdims=True))  # (n, n), no mask
        np.testing.assert_allclose(weights[head], expected / expected.sum(axis=-1, keepdims=True), rtol=1e-12)
    assert not np.allclose(weights[0], weights[1])


@pytest.mark.parametrize("mask_kind", ["shared", "per head", "padding"])
def test_grouped_query_attention_takes_every_mask_layout(mask_kind):
    n_heads, n_kv_heads, n, d_model = 4, 2, 5, 8
    w = init_multi_head_weights(d_model, seed=4, n_heads=n_heads, n_kv_heads=n_kv_heads)
    x = np.random.default_rng(5).standard_normal((2, n, d_model))  # (batch, n, d_model)
    rng = np.random.default_rng(6)
    mask = {"shared": causal_mask(n),
            "per head": (rng.random((2, n_heads, n, n)) < 0.7) | np.eye(n, dtype=bool),
            "padding": padding_mask([5, 3], n)}[mask_kind]
    grouped = multi_head_attention(x, x, x, w, n_heads, mask=mask, n_kv_heads=n_kv_heads)
    plain = multi_head_attention(x, x, x, repeated(w, n_heads, n_kv_heads), n_heads, mask=mask)
    np.testing.assert_allclose(grouped.output, plain.output, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grouped.weights, plain.weights, rtol=1e-12, atol=1e-15)


def test_n_kv_heads_equal_to_n_heads_is_multi_head_attention_bit_for_bit():
    w = init_multi_head_weights(8, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(w, init_multi_head_weights(8, seed=0, n_heads=2, n_kv_heads=2)))
    x = np.random.default_rng(1).standard_normal((4, 8))
    a, b = multi_head_attention(x, x, x, w, 2), multi_head_attention(x, x, x, w, 2, n_kv_heads=2)
    assert np.array_equal(a.output, b.output) and np.array_equal(a.weights, b.weights)


def test_grouped_weights_are_as_narrow_as_their_key_value_heads():
    w = init_multi_head_weights(32, seed=0, n_heads=8, n_kv_heads=2)
    assert [a.shape for a in w] == [(32, 32), (32, 8), (32, 8), (32, 32), (32,), (8,), (8,), (32,)]
    assert np.abs(w.w_k).max() <= math.sqrt(6 / 40)


@pytest.mark.parametrize("kwargs, message", [
    ({"n_heads": 4, "n_kv_heads": 3}, "n_heads = 4 is not divisible by n_kv_heads = 3"),
    ({"n_kv_heads": 2}, "n_kv_heads needs n_heads"),
    ({"n_heads": 3, "n_kv_heads": 1}, "d_model = 8 is not divisible by n_heads = 3"),
    ({"n_heads": 4, "n_kv_heads": 0}, "n_kv_heads must be at least 1, got 0"),
])
def test_init_refuses_head_counts_that_do_not_fit(kwargs, message):
    with pytest.raises(ValueError, match=message):
        init_multi_head_weights(8, **kwargs)


def test_attention_refuses_weights_made_for_another_number_of_key_value_heads():
    x = np.ones((3, 8))
    w = init_multi_head_weights(8, seed=0, n_heads=4, n_kv_heads=2)
    with pytest.raises(ValueError, match=r"weights.w_k has shape \(8, 4\) but the inputs have d_model = 8 and "
                                         r"the key and value heads need 2 columns; expected \(8, 2\)"):
        multi_head_attention(x, x, x, w, 4, n_kv_heads=1)
    with pytest.raises(ValueError, match=r"weights.w_k has shape \(8, 4\) but the inputs have d_model = 8; "
                                         r"expected \(8, 8\)"):
        multi_head_attention(x, x, x, w, 4)
    with pytest.raises(ValueError, match="n_heads = 4 is not divisible by n_kv_heads = 3"):
        multi_head_attention(x, x, x, w, 4, n_kv_heads=3)


@pytest.mark.parametrize("n_heads, n_kv_heads", [(8, 1), (8, 2), (8, 4), (8, 8)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.torch
def test_grouped_query_attention_matches_torch_sdpa_with_enable_gqa(n_heads, n_kv_heads, causal):
    d_model, n = 32, 6
    w = random_biases(init_multi_head_weights(d_model, seed=7, n_heads=n_heads, n_kv_heads=n_kv_heads), 8)
    x = np.random.default_rng(9).standard_normal((2, n, d_model))  # (batch, n, d_model)
    ours = multi_head_attention(x, x, x, w, n_heads, mask=causal_mask(n) if causal else None,
                                n_kv_heads=n_kv_heads)
    q = torch.from_numpy(split_heads(x @ w.w_q + w.b_q, n_heads))  # (batch, h, n, d_head)
    k = torch.from_numpy(split_heads(x @ w.w_k + w.b_k, n_kv_heads))  # (batch, n_kv, n, d_head)
    v = torch.from_numpy(split_heads(x @ w.w_v + w.b_v, n_kv_heads))  # (batch, n_kv, n, d_head)
    heads = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True).numpy()  # (batch, h, n, d_head)
    np.testing.assert_allclose(ours.output, merge_heads(heads) @ w.w_o + w.b_o, rtol=1e-10, atol=1e-12)


@pytest.mark.torch
def test_torch_enable_gqa_pairs_query_head_i_with_key_head_i_over_the_group_size():
    rng = np.random.default_rng(10)
    q = rng.standard_normal((1, 4, 3, 2))  # (batch, h, n, d_head)
    k, v = rng.standard_normal((2, 1, 2, 3, 2))  # (batch, n_kv, n, d_head) each
    theirs = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)), enable_gqa=True).numpy()
    for head in range(4):
        single = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q[:, head], k[:, head // 2],
                                                                                 v[:, head // 2]))).numpy()
        np.testing.assert_allclose(theirs[:, head], single, rtol=1e-12)


def test_the_cache_of_grouped_query_attention_is_n_kv_over_n_heads_of_the_full_one():
    full = kv_cache_bytes(4096, n_layers=80, n_heads=64, d_head=128)
    assert kv_cache_bytes(4096, n_layers=80, n_heads=64, d_head=128, n_kv_heads=64) == full
    assert kv_cache_bytes(4096, n_layers=80, n_heads=64, d_head=128, n_kv_heads=8) * 8 == full
    assert kv_cache_bytes(4096, n_layers=80, n_heads=64, d_head=128, n_kv_heads=1) * 64 == full
    with pytest.raises(ValueError, match="n_heads = 64 is not divisible by n_kv_heads = 6"):
        kv_cache_bytes(4096, n_layers=80, n_heads=64, d_head=128, n_kv_heads=6)
