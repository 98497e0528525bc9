"""attnbook.recent.sparse against DeepseekV32Indexer of Hugging Face transformers (the lightning indexer's scores
and its top-k keys), and attention over the selected keys against dense attention under the selection's mask."""

import numpy as np
import pytest

from attnbook import causal_mask, scaled_dot_product_attention
from attnbook.recent.sparse import (
    IndexerWeights,
    Selection,
    indexer_scores,
    selected_attention,
    selection_mask,
    top_k_keys,
)

from .conftest import array, matrix, rotary_tables, torch

D_MODEL, Q_RANK, HEADS, D_INDEX, D_ROPE, TOP_K = 32, 16, 4, 8, 4, 3


@pytest.mark.transformers
def test_the_indexer_equals_deepseek_v32_indexer_scores_and_top_k_in_float64(float64_reference, monkeypatch):
    from transformers import DeepseekV32Config
    from transformers.models.deepseek_v32.modeling_deepseek_v32 import DeepseekV32Indexer, DeepseekV32RotaryEmbedding

    config = DeepseekV32Config(hidden_size=D_MODEL, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=Q_RANK,
                               kv_lora_rank=8, qk_nope_head_dim=6, qk_rope_head_dim=D_ROPE, v_head_dim=5,
                               index_n_heads=HEADS, index_head_dim=D_INDEX, index_topk=TOP_K, num_hidden_layers=1)
    module = DeepseekV32Indexer(config, layer_idx=0).double().eval()
    with torch.no_grad():
        module.k_norm.weight.uniform_(0.5, 1.5)
        module.k_norm.bias.uniform_(-0.5, 0.5)
    weights = IndexerWeights(matrix(module.wq_b), matrix(module.wk), (array(module.k_norm.weight),
                             array(module.k_norm.bias)), matrix(module.weights_proj))
    frequencies = DeepseekV32RotaryEmbedding(config).inv_freq.double().numpy()
    assert frequencies.size == D_ROPE // 2
    batch, n = 2, 9
    rng = np.random.default_rng(0)
    x, q_latent = rng.standard_normal((batch, n, D_MODEL)), rng.standard_normal((batch, n, Q_RANK))
    seen = []
    topk = torch.Tensor.topk
    monkeypatch.setattr(torch.Tensor, "topk", lambda self, *a, **kw: (seen.append(self.clone()), topk(self, *a, **kw))[1])
    mask = torch.tensor(np.broadcast_to(np.tri(n, dtype=bool), (batch, n, n)).copy())
    positions = np.arange(n, dtype=np.float64)
    with torch.no_grad():
        indices = module(torch.tensor(x), torch.tensor(q_latent), rotary_tables(frequencies, positions, batch), mask,
                         torch.arange(n)[None])
    ours = indexer_scores(x, q_latent, weights, HEADS, D_ROPE, frequencies=frequencies)
    expected = array(seen[0])
    finite = np.isfinite(expected)
    assert np.array_equal(finite, np.isfinite(ours)) and np.array_equal(finite[0], np.tri(n, dtype=bool))
    assert np.max(np.abs(ours[finite] - expected[finite])) <= 1e-10
    selection = top_k_keys(ours, TOP_K)
    rows = np.arange(n) >= TOP_K - 1  # queries with at least TOP_K keys to choose from: no ties at -inf
    ordered = np.sort(selection.scores, axis=-1)
    assert np.all(np.diff(ordered[:, rows], axis=-1) != 0)  # no tie inside the top k either
    assert np.array_equal(np.sort(selection.indices[:, rows], -1), np.sort(array(indices)[:, rows], -1))


def test_attention_over_the_selected_keys_equals_dense_attention_under_the_selection_mask():
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((2, 3, 10, 6)), rng.standard_normal((2, 3, 10, 6)), rng.standard_normal((2, 3, 10, 4))
    scores = np.where(causal_mask(10), rng.standard_normal((2, 3, 10, 10)), -np.inf)
    selection = top_k_keys(scores, 4)  # the first three queries see fewer than four keys: -inf picks skipped
    sparse = selected_attention(q, k, v, selection)
    dense = scaled_dot_product_attention(q, k, v, mask=selection_mask(selection, 10))
    np.testing.assert_allclose(sparse.output, dense.output, rtol=0, atol=1e-13)
    np.testing.assert_allclose(sparse.weights, np.take_along_axis(dense.weights, selection.indices, -1), atol=1e-15)
    assert selection_mask(selection, 10).sum(axis=-1).tolist()[0][0] == [1, 2, 3, 4, 4, 4, 4, 4, 4, 4]


def test_keeping_every_key_is_dense_causal_attention():
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((3, 7, 5))
    selection = top_k_keys(np.where(causal_mask(7), 0.0, -np.inf), 7)
    sparse = selected_attention(q, k, v, selection)
    dense = scaled_dot_product_attention(q, k, v, mask=causal_mask(7))
    np.testing.assert_allclose(sparse.output, dense.output, rtol=0, atol=1e-13)


def test_the_indexer_scores_are_relu_heads_weighted_by_the_query_token():
    rng = np.random.default_rng(3)
    x, q_latent = rng.standard_normal((5, 8)), rng.standard_normal((5, 6))
    w = IndexerWeights(rng.standard_normal((6, 2 * 4)), rng.standard_normal((8, 4)), (np.ones(4), np.zeros(4)),
                       rng.standard_normal((8, 2)))
    scores = indexer_scores(x, q_latent, w, n_heads=2, d_rope=0, mask=np.ones((5, 5), dtype=bool))
    k = x @ w.w_k
    k = (k - k.mean(-1, keepdims=True)) / np.sqrt(k.var(-1, keepdims=True) + 1e-6)
    q = (q_latent @ w.w_q).reshape(5, 2, 4)
    expected = sum((x @ w.w_heads)[:, h, None] / np.sqrt(2) * np.maximum(q[:, h] @ k.T / 2.0, 0) for h in range(2))
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-12)


def test_a_selection_of_keys_that_do_not_exist_is_refused():
    with pytest.raises(ValueError, match="selection.indices"):
        selected_attention(np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 3)), Selection(np.array([[0], [2]]),
                                                                                         np.zeros((2, 1))))
