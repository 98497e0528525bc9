"""attnbook.recent.sinks: a learned sink logit equals a virtual token of value zero, and gpt-oss's layer equals
GptOssAttention of Hugging Face transformers (full and sliding-window layers)."""

import numpy as np
import pytest

from attnbook import banded_mask, causal_mask, scaled_dot_product_attention
from attnbook.recent.sinks import SinkAttentionWeights, init_sink_attention, sink_attention, sink_grouped_attention

from .conftest import additive_mask, array, matrix, rotary_tables, torch

D_MODEL, HEADS, KV_HEADS, D_HEAD, WINDOW = 32, 4, 2, 8, 3


@pytest.mark.transformers
@pytest.mark.parametrize("layer", ["full_attention", "sliding_attention"])
def test_sink_attention_equals_gpt_oss_attention_in_float64(layer, float64_reference):
    from transformers import GptOssConfig
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssAttention, GptOssRotaryEmbedding

    config = GptOssConfig(hidden_size=D_MODEL, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                          head_dim=D_HEAD, num_hidden_layers=1, layer_types=[layer], sliding_window=WINDOW,
                          rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                          attn_implementation="eager")
    module = GptOssAttention(config, layer_idx=0).double().eval()
    with torch.no_grad():
        module.sinks.normal_(0.0, 2.0)
        for linear in (module.q_proj, module.k_proj, module.v_proj, module.o_proj):
            linear.bias.normal_(0.0, 0.1)
    weights = SinkAttentionWeights(*(a for linear in (module.q_proj, module.k_proj, module.v_proj, module.o_proj)
                                     for a in (matrix(linear), array(linear.bias))), array(module.sinks))
    frequencies = GptOssRotaryEmbedding(config).inv_freq.double().numpy()
    window = WINDOW if layer == "sliding_attention" else None
    assert (module.sliding_window is not None) == (window is not None)
    batch, n = 3, 7
    x = np.random.default_rng(0).standard_normal((batch, n, D_MODEL))
    allowed = causal_mask(n) if window is None else banded_mask(n, window - 1, causal=True)
    with torch.no_grad():
        expected, expected_weights = module(torch.tensor(x), rotary_tables(frequencies, np.arange(n, dtype=float),
                                                                           batch, twice=False),
                                            additive_mask(allowed, batch))
    ours = sink_grouped_attention(x, weights, HEADS, KV_HEADS, window=window, frequencies=frequencies)
    assert np.max(np.abs(ours.output - array(expected))) <= 1e-10
    assert np.max(np.abs(ours.weights - array(expected_weights))) <= 1e-10


def test_a_sink_logit_is_a_virtual_token_with_a_zero_value():
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((2, 3, 5, 4)), rng.standard_normal((2, 3, 6, 4)), rng.standard_normal((2, 3, 6, 2))
    sinks, scale = rng.standard_normal(3), 0.5
    ours = sink_attention(q, k, v, sinks, mask=causal_mask(5, 6), scale=scale)
    # one more coordinate: queries carry 1 there, real keys 0, the virtual key s_h, so its logit is s_h for every query
    q_plus = np.concatenate([scale * q, np.ones((2, 3, 5, 1))], axis=-1)
    k_plus = np.concatenate([np.concatenate([k, np.zeros((2, 3, 6, 1))], axis=-1),
                             np.concatenate([np.zeros((2, 3, 1, 4)), np.broadcast_to(sinks[:, None, None], (2, 3, 1, 1))],
                                            axis=-1)], axis=-2)
    v_plus = np.concatenate([v, np.zeros((2, 3, 1, 2))], axis=-2)
    mask_plus = np.concatenate([causal_mask(5, 6), np.ones((5, 1), dtype=bool)], axis=-1)
    virtual = scaled_dot_product_attention(q_plus, k_plus, v_plus, mask=mask_plus, scale=1.0)
    np.testing.assert_allclose(ours.output, virtual.output, rtol=0, atol=1e-14)
    np.testing.assert_allclose(ours.weights, virtual.weights[..., :-1], rtol=0, atol=1e-15)


def test_a_very_negative_sink_is_plain_attention_and_the_weights_lost_are_the_sinks_share():
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((3, 4, 4)), rng.standard_normal((3, 4, 4)), rng.standard_normal((3, 4, 2))
    plain = scaled_dot_product_attention(q, k, v, mask=causal_mask(4))
    np.testing.assert_allclose(sink_attention(q, k, v, [-800.0] * 3, mask=causal_mask(4)).output, plain.output,
                               rtol=0, atol=1e-15)
    sinks = np.array([-1.0, 0.0, 2.0])
    shares = 1.0 - sink_attention(q, k, v, sinks, mask=causal_mask(4)).weights.sum(axis=-1)  # (heads, n)
    scores = np.where(causal_mask(4), q @ np.swapaxes(k, -1, -2) / 2.0, -np.inf)
    expected = np.exp(sinks)[:, None] / (np.exp(sinks)[:, None] + np.exp(scores).sum(axis=-1))
    np.testing.assert_allclose(shares, expected, rtol=1e-13)


def test_the_layer_without_sinks_at_minus_infinity_is_grouped_query_attention_of_its_heads():
    w = init_sink_attention(8, 2, n_kv_heads=1, d_head=4, seed=3)
    x = np.random.default_rng(3).standard_normal((5, 8))
    out, weights = sink_grouped_attention(x, w._replace(sinks=np.full(2, -1e4)), 2, 1, frequencies=np.zeros(2))
    q, k, v = (x @ w.w_q).reshape(5, 2, 4).swapaxes(0, 1), x @ w.w_k, x @ w.w_v
    heads, expected = scaled_dot_product_attention(q, k, v, mask=causal_mask(5))
    np.testing.assert_allclose(weights, expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(out, heads.swapaxes(0, 1).reshape(5, 8) @ w.w_o, rtol=0, atol=1e-14)


def test_sinks_that_do_not_broadcast_against_the_heads_are_refused():
    with pytest.raises(ValueError, match="sinks"):
        sink_attention(np.ones((3, 2, 4)), np.ones((3, 2, 4)), np.ones((3, 2, 4)), sinks=np.zeros(2))
