"""attnbook.recent.gated against Qwen3NextAttention of Hugging Face transformers: grouped-query attention with
per-head query and key norms, partial rotary positions and a sigmoid gate per head."""

import numpy as np
import pytest

from attnbook import merge_heads, rms_norm, scaled_dot_product_attention
from attnbook.recent.gated import GatedAttentionWeights, gated_attention, init_gated_attention

from .conftest import additive_mask, array, matrix, rotary_tables, torch

D_MODEL, HEADS, KV_HEADS, D_HEAD = 32, 4, 2, 8


def reference_attention():
    from transformers import Qwen3NextConfig
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextAttention, Qwen3NextRotaryEmbedding

    config = Qwen3NextConfig(hidden_size=D_MODEL, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                             head_dim=D_HEAD, num_hidden_layers=1, attn_implementation="eager")
    module = Qwen3NextAttention(config, layer_idx=0).double().eval()
    with torch.no_grad():
        module.q_norm.weight.uniform_(-0.5, 0.5)
        module.k_norm.weight.uniform_(-0.5, 0.5)
    both = matrix(module.q_proj).reshape(D_MODEL, HEADS, 2, D_HEAD)  # each head's query, then its gate
    weights = GatedAttentionWeights(
        both[:, :, 0].reshape(D_MODEL, -1), both[:, :, 1].reshape(D_MODEL, -1), matrix(module.k_proj),
        matrix(module.v_proj), matrix(module.o_proj), 1.0 + array(module.q_norm.weight),
        1.0 + array(module.k_norm.weight))
    rotary = Qwen3NextRotaryEmbedding(config)
    return config, module, weights, rotary.inv_freq.double().numpy()


@pytest.mark.transformers
def test_gated_attention_equals_qwen3_next_attention_in_float64(float64_reference):
    config, module, weights, frequencies = reference_attention()
    rotary_dim = 2 * frequencies.size
    assert rotary_dim == int(D_HEAD * config.rope_parameters["partial_rotary_factor"]) < D_HEAD  # partial rotary
    batch, n = 3, 7
    x = np.random.default_rng(0).standard_normal((batch, n, D_MODEL))
    positions = np.arange(n, dtype=np.float64)
    with torch.no_grad():
        expected, expected_weights = module(torch.tensor(x), rotary_tables(frequencies, positions, batch),
                                            additive_mask(np.tri(n, dtype=bool), batch))
    ours = gated_attention(x, weights, HEADS, KV_HEADS, rotary_dim=rotary_dim, frequencies=frequencies)
    assert np.max(np.abs(ours.output - array(expected))) <= 1e-10
    assert np.max(np.abs(ours.weights - array(expected_weights))) <= 1e-10


def test_without_the_gate_it_is_grouped_query_attention_of_the_normalised_heads():
    w = init_gated_attention(16, 4, n_kv_heads=2, d_head=4, seed=1)
    x = np.random.default_rng(1).standard_normal((2, 5, 16))
    ours = gated_attention(x, w, 4, 2, rotary_dim=0, gated=False)
    q = rms_norm((x @ w.w_q).reshape(2, 5, 4, 4), w.q_norm).transpose(0, 2, 1, 3)  # (batch, h, n, d_head)
    k = rms_norm((x @ w.w_k).reshape(2, 5, 2, 4), w.k_norm).transpose(0, 2, 1, 3)  # (batch, g, n, d_head)
    v = (x @ w.w_v).reshape(2, 5, 2, 4).transpose(0, 2, 1, 3)  # (batch, g, n, d_head)
    k, v = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)  # query heads 0, 1 read key head 0; 2, 3 read 1
    heads, weights = scaled_dot_product_attention(q, k, v, mask=np.tri(5, dtype=bool))
    np.testing.assert_allclose(ours.output, merge_heads(heads) @ w.w_o, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.weights, weights, rtol=0, atol=1e-12)


def test_a_closed_gate_silences_its_head_and_only_it():
    w = init_gated_attention(8, 2, n_kv_heads=2, d_head=4, seed=2)
    x = np.random.default_rng(2).standard_normal((4, 8))
    closed = w._replace(w_gate=np.concatenate([np.zeros((8, 4)), w.w_gate[:, 4:]], axis=1))
    shut = closed._replace(w_o=np.concatenate([w.w_o[:4], np.zeros((4, 8))]))  # head 1 removed from the output
    _, _, gate = gated_attention(x, closed, 2, 2)
    np.testing.assert_array_equal(gate[0], 0.5)  # sigma(0) on every coordinate of head 0
    half = gated_attention(x, shut, 2, 2).output
    plain = gated_attention(x, shut, 2, 2, gated=False).output
    np.testing.assert_allclose(half, plain / 2, rtol=0, atol=1e-12)


def test_the_boundary_names_what_does_not_fit():
    w = init_gated_attention(8, 2, n_kv_heads=1, d_head=4)
    with pytest.raises(ValueError, match="rotary_dim must be even"):
        gated_attention(np.ones((3, 8)), w, 2, 1, rotary_dim=3)
    with pytest.raises(ValueError, match="weights.w_q has 8 columns"):
        gated_attention(np.ones((3, 8)), w, 4, 1)
