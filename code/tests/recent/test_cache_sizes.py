"""The cache bytes per token of attnbook.measure.counts against the caches themselves: the package's latent cache and
the one DeepseekV3Attention of transformers fills, and DeepSeek-V3's sizes against transformers' configuration; the
hybrid cache of full and delta-rule layers against the delta rule's memory, and Qwen3-Next's sizes."""

import numpy as np
import pytest

from attnbook.measure.counts import CACHE_KINDS, DEEPSEEK_V3, QWEN3_NEXT, hybrid_cache_bytes, kv_cache_bytes_per_token
from attnbook.recent.delta import delta_rule_recurrent
from attnbook.recent.latent import init_latent_attention, latent_attention

from .conftest import torch

V3 = dict(n_layers=61, d_k=128 + 64, d_v=128, n_heads=128)


@pytest.mark.transformers
def test_deepseek_v3_sizes_are_those_of_transformers_configuration():
    from transformers import DeepseekV3Config

    config = DeepseekV3Config()
    assert DEEPSEEK_V3 == {"n_layers": config.num_hidden_layers, "n_heads": config.num_attention_heads,
                           "d_nope": config.qk_nope_head_dim, "d_rope": config.qk_rope_head_dim,
                           "d_v": config.v_head_dim, "kv_rank": config.kv_lora_rank, "q_rank": config.q_lora_rank}


@pytest.mark.transformers
def test_the_latent_count_is_what_deepseek_v3_attention_caches_per_token():
    from transformers import DeepseekV3Config, DynamicCache
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention, DeepseekV3RotaryEmbedding

    config = DeepseekV3Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=16,
                              kv_lora_rank=8, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5,
                              num_hidden_layers=1, attn_implementation="eager")
    module = DeepseekV3Attention(config, layer_idx=0).double().eval()
    batch, n = 2, 5
    x = torch.randn(batch, n, 32, dtype=torch.float64)
    cache = DynamicCache(config=config)
    with torch.no_grad():
        module(x, DeepseekV3RotaryEmbedding(config)(x, torch.arange(n)[None]), None, cache=cache)
    layer = cache.layers[0]
    cached = (layer.keys.nbytes + layer.values.nbytes) // (batch * n)
    assert cached == kv_cache_bytes_per_token("mla", n_layers=1, d_k=10, d_v=5, n_heads=4, kv_rank=8, d_rope=4,
                                              bytes_per_number=8)


def test_the_latent_count_is_what_the_package_caches_per_token():
    w = init_latent_attention(16, 4, q_rank=8, kv_rank=6, d_nope=4, d_rope=2, d_v=3)
    cache = latent_attention(np.ones((7, 16)), w, 4).cache
    assert (cache.latent.nbytes + cache.rope_key.nbytes) // 7 == kv_cache_bytes_per_token(
        "mla", n_layers=1, d_k=6, d_v=3, n_heads=4, kv_rank=6, d_rope=2, bytes_per_number=8)


def test_deepseek_v3_cache_bytes_per_token_in_bfloat16():
    figures = {kind: kv_cache_bytes_per_token(kind, **V3, n_kv_heads=8, kv_rank=512, d_rope=64) for kind in CACHE_KINDS}
    assert figures == {"mha": 61 * 128 * 320 * 2, "gqa": 61 * 8 * 320 * 2, "mqa": 61 * 320 * 2, "mla": 61 * 576 * 2}
    assert figures["mha"] / figures["mla"] == pytest.approx(71.1, abs=0.05)
    assert figures["mqa"] < figures["mla"] < figures["gqa"]  # the latent costs 1.8 MQA caches, a ninth of 8 groups'


def test_kinds_and_missing_sizes_are_refused_naming_them():
    with pytest.raises(ValueError, match="kind must be one of"):
        kv_cache_bytes_per_token("gqa8", **V3)
    with pytest.raises(ValueError, match="needs kv_rank and d_rope"):
        kv_cache_bytes_per_token("mla", **V3, kv_rank=512)
    with pytest.raises(ValueError, match="does not divide"):
        kv_cache_bytes_per_token("gqa", **V3, n_kv_heads=7)


@pytest.mark.transformers
def test_qwen3_next_sizes_are_those_of_transformers_configuration():
    from transformers import Qwen3NextConfig

    config = Qwen3NextConfig()
    full = [i for i, kind in enumerate(config.layer_types) if kind == "full_attention"]
    assert full == list(range(QWEN3_NEXT["full_every"] - 1, config.num_hidden_layers, QWEN3_NEXT["full_every"]))
    assert QWEN3_NEXT == {"n_layers": config.num_hidden_layers, "full_every": QWEN3_NEXT["full_every"],
                          "n_kv_heads": config.num_key_value_heads, "d_head": config.head_dim,
                          "n_k_heads": config.linear_num_key_heads, "n_v_heads": config.linear_num_value_heads,
                          "d_k": config.linear_key_head_dim, "d_v": config.linear_value_head_dim,
                          "kernel": config.linear_conv_kernel_dim}


HYBRID = dict(n_layers=8, n_kv_heads=2, d_head=4, n_k_heads=1, n_v_heads=3, d_k=5, d_v=2, bytes_per_number=8)


def test_a_linear_layer_caches_the_delta_rules_memory_whatever_the_length():
    rng = np.random.default_rng(0)
    for n in (1, 9):
        q, k = rng.standard_normal((2, 3, n, 5))  # (v heads, n, d_k): one memory per value head
        memory = delta_rule_recurrent(q, k, rng.standard_normal((3, n, 2)), np.full((3, n), 0.5)).state  # (3, 5, 2)
        sizes = dict(HYBRID, n_layers=2)
        assert hybrid_cache_bytes(n, full_every=2, **sizes) - 2 * n * 2 * 4 * 8 == memory.nbytes


def test_full_attention_in_every_layer_is_the_grouped_query_cache():
    per_token = kv_cache_bytes_per_token("gqa", n_layers=8, d_k=4, d_v=4, n_heads=4, n_kv_heads=2, bytes_per_number=8)
    assert [hybrid_cache_bytes(t, full_every=1, **HYBRID) for t in (0, 1, 100)] == [0, per_token, 100 * per_token]


def test_one_full_layer_in_four_grows_a_quarter_as_fast_from_a_fixed_start():
    full = [hybrid_cache_bytes(t, full_every=1, **HYBRID) for t in (10, 11)]
    hybrid = [hybrid_cache_bytes(t, full_every=4, **HYBRID) for t in (10, 11)]
    assert 4 * (hybrid[1] - hybrid[0]) == full[1] - full[0]
    assert hybrid_cache_bytes(0, full_every=4, **HYBRID) == 6 * 3 * 5 * 2 * 8  # six memories, nothing per token
    convolution = hybrid_cache_bytes(0, full_every=4, **HYBRID, kernel=4) - hybrid_cache_bytes(0, 8, 4, **{
        k: v for k, v in HYBRID.items() if k != "n_layers"})
    assert convolution == 6 * 3 * (2 * 1 * 5 + 3 * 2) * 8  # kernel 4: three inputs per channel of q, k and v


def test_hybrid_sizes_are_refused_naming_them():
    with pytest.raises(ValueError, match="full_every = 9 must be at most n_layers = 8"):
        hybrid_cache_bytes(1, full_every=9, **HYBRID)
    with pytest.raises(ValueError, match="n_tokens"):
        hybrid_cache_bytes(-1, full_every=4, **HYBRID)
    with pytest.raises(ValueError, match="kernel"):
        hybrid_cache_bytes(1, full_every=4, **HYBRID, kernel=0)
