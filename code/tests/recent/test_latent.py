"""attnbook.recent.latent against DeepseekV3Attention of Hugging Face transformers, and its two forms against each
other: plain and absorbed, whole and cached.

A tiny random configuration without YaRN (``rope_type`` "default", so the softmax scale is
``1 / sqrt(d_nope + d_rope)`` and no mscale enters), DeepSeek's interleaved rotary layout (``rope_interleave``).
"""

import numpy as np
import pytest

from attnbook.recent.latent import (
    LatentAttentionWeights,
    LatentCache,
    absorbed_latent_attention,
    init_latent_attention,
    latent_attention,
    latent_softmax_scale,
)

from .conftest import additive_mask, array, matrix, rotary_tables, torch

HEADS, Q_RANK, KV_RANK, D_NOPE, D_ROPE, D_V, D_MODEL = 4, 16, 8, 6, 4, 5, 32


def reference_attention():
    """A seeded DeepseekV3Attention in float64 with random norm gains, its weights as the package's."""
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention, DeepseekV3RotaryEmbedding

    config = DeepseekV3Config(hidden_size=D_MODEL, num_attention_heads=HEADS, num_key_value_heads=HEADS,
                              q_lora_rank=Q_RANK, kv_lora_rank=KV_RANK, qk_nope_head_dim=D_NOPE,
                              qk_rope_head_dim=D_ROPE, v_head_dim=D_V, num_hidden_layers=1,
                              attn_implementation="eager")
    module = DeepseekV3Attention(config, layer_idx=0).double().eval()
    with torch.no_grad():
        module.q_a_layernorm.weight.uniform_(0.5, 1.5)
        module.kv_a_layernorm.weight.uniform_(0.5, 1.5)
    weights = LatentAttentionWeights(
        matrix(module.q_a_proj), array(module.q_a_layernorm.weight), matrix(module.q_b_proj),
        matrix(module.kv_a_proj_with_mqa), array(module.kv_a_layernorm.weight), matrix(module.kv_b_proj),
        matrix(module.o_proj))
    frequencies = DeepseekV3RotaryEmbedding(config).inv_freq.double().numpy()
    return config, module, weights, frequencies


def causal(n_q, n_k):
    return np.arange(n_k)[None, :] <= np.arange(n_k - n_q, n_k)[:, None]


@pytest.mark.transformers
def test_latent_attention_equals_deepseek_v3_attention_in_float64(float64_reference):
    _, module, weights, frequencies = reference_attention()
    batch, n = 3, 7
    x = np.random.default_rng(0).standard_normal((batch, n, D_MODEL))
    positions = np.arange(n, dtype=np.float64)
    with torch.no_grad():
        expected, expected_weights = module(torch.tensor(x), rotary_tables(frequencies, positions, batch),
                                            additive_mask(causal(n, n), batch))
    ours = latent_attention(x, weights, HEADS, frequencies=frequencies)
    assert np.max(np.abs(ours.output - array(expected))) <= 1e-10
    assert np.max(np.abs(ours.weights - array(expected_weights))) <= 1e-10


@pytest.mark.transformers
def test_absorbed_latent_attention_equals_deepseek_v3_attention_in_float64(float64_reference):
    _, module, weights, frequencies = reference_attention()
    batch, n = 2, 6
    x = np.random.default_rng(1).standard_normal((batch, n, D_MODEL))
    with torch.no_grad():
        expected, _ = module(torch.tensor(x), rotary_tables(frequencies, np.arange(n, dtype=np.float64), batch),
                             additive_mask(causal(n, n), batch))
    ours = absorbed_latent_attention(x, weights, HEADS, frequencies=frequencies)
    assert np.max(np.abs(ours.output - array(expected))) <= 1e-10


@pytest.mark.transformers
def test_decoding_with_the_latent_cache_equals_deepseek_v3_attention_with_its_cache(float64_reference):
    from transformers import DynamicCache

    config, module, weights, frequencies = reference_attention()
    batch, n_prompt, n_new = 2, 5, 3
    x = np.random.default_rng(2).standard_normal((batch, n_prompt + n_new, D_MODEL))
    cache = DynamicCache(config=config)
    ours, outputs, expected = None, [], []
    with torch.no_grad():
        for start, stop in [(0, n_prompt)] + [(t, t + 1) for t in range(n_prompt, n_prompt + n_new)]:
            positions = np.arange(start, stop, dtype=np.float64)
            out, _ = module(torch.tensor(x[:, start:stop]), rotary_tables(frequencies, positions, batch),
                            additive_mask(causal(stop - start, stop), batch), cache=cache)
            expected.append(array(out))
            ours = absorbed_latent_attention(x[:, start:stop], weights, HEADS, cache=None if ours is None else ours.cache,
                                             frequencies=frequencies)
            outputs.append(ours.output)
    assert np.max(np.abs(np.concatenate(outputs, axis=1) - np.concatenate(expected, axis=1))) <= 1e-10
    latent, rope_key = (array(t)[:, 0] for t in (cache.layers[0].keys, cache.layers[0].values))
    assert ours.cache.latent.shape == (batch, n_prompt + n_new, KV_RANK) == latent.shape
    np.testing.assert_allclose(ours.cache.latent, latent, rtol=0, atol=1e-12)
    # transformers keeps the turned rotary key in the half-split layout: evens first, then odds
    np.testing.assert_allclose(np.concatenate([ours.cache.rope_key[..., 0::2], ours.cache.rope_key[..., 1::2]], -1),
                               rope_key, rtol=0, atol=1e-12)


@pytest.mark.transformers
def test_the_softmax_scale_with_yarn_is_deepseek_v3_attentions():
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention

    yarn = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1}
    config = DeepseekV3Config(hidden_size=D_MODEL, num_attention_heads=HEADS, num_key_value_heads=HEADS,
                              q_lora_rank=Q_RANK, kv_lora_rank=KV_RANK, qk_nope_head_dim=D_NOPE,
                              qk_rope_head_dim=D_ROPE, v_head_dim=D_V, num_hidden_layers=1, rope_parameters=yarn)
    module = DeepseekV3Attention(config, layer_idx=0)
    assert module.scaling == pytest.approx(latent_softmax_scale(D_NOPE + D_ROPE, 40.0, 1.0), rel=1e-15)
    assert module.scaling > 1.8 * (D_NOPE + D_ROPE) ** -0.5  # (0.1 ln 40 + 1)^2 = 1.87


def test_the_absorbed_form_equals_the_plain_form_weights_and_cache_included():
    w = init_latent_attention(24, 3, q_rank=10, kv_rank=7, d_nope=5, d_rope=6, d_v=4, seed=3)
    x = np.random.default_rng(3).standard_normal((2, 9, 24))
    plain, absorbed = latent_attention(x, w, 3), absorbed_latent_attention(x, w, 3)
    np.testing.assert_allclose(absorbed.output, plain.output, rtol=0, atol=1e-12)
    np.testing.assert_allclose(absorbed.weights, plain.weights, rtol=0, atol=1e-13)
    assert all(np.array_equal(a, b) for a, b in zip(absorbed.cache, plain.cache))


def test_decoding_token_by_token_with_the_cache_equals_attending_to_the_whole_sequence():
    w = init_latent_attention(16, 2, q_rank=6, kv_rank=5, d_nope=3, d_rope=4, d_v=3, seed=4)
    x = np.random.default_rng(4).standard_normal((6, 16))
    whole = latent_attention(x, w, 2)
    cache, rows = None, []
    for t in range(6):
        step = latent_attention(x[t:t + 1], w, 2, cache=cache)
        cache = step.cache
        rows.append(step.output)
    np.testing.assert_allclose(np.concatenate(rows), whole.output, rtol=0, atol=1e-12)
    assert cache.latent.shape == (6, 5) and cache.rope_key.shape == (6, 4)


def test_no_token_sees_a_later_one():
    w = init_latent_attention(16, 2, q_rank=6, kv_rank=5, d_nope=3, d_rope=4, d_v=3, seed=5)
    x = np.random.default_rng(5).standard_normal((5, 16))
    changed = x.copy()
    changed[3:] += 1.0
    np.testing.assert_array_equal(latent_attention(x, w, 2).output[:3], latent_attention(changed, w, 2).output[:3])
    assert np.all(np.triu(latent_attention(x, w, 2).weights, k=1) == 0)


def test_the_boundary_names_what_does_not_fit():
    w = init_latent_attention(16, 4, q_rank=8, kv_rank=6, d_nope=4, d_rope=2, d_v=3)
    with pytest.raises(ValueError, match="not divisible by n_heads = 3"):
        latent_attention(np.ones((2, 16)), w, 3)
    with pytest.raises(ValueError, match="weights.w_dq has shape"):
        latent_attention(np.ones((2, 15)), w, 4)
    with pytest.raises(ValueError, match="cache has latent"):
        latent_attention(np.ones((2, 16)), w, 4, cache=LatentCache(np.ones((3, 5)), np.ones((3, 2))))
    with pytest.raises(ValueError, match="frequencies has shape"):
        latent_attention(np.ones((2, 16)), w, 4, frequencies=[1.0, 2.0])
