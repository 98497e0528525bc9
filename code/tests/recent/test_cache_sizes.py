"""The cache bytes per token of attnbook.measure.counts against the caches themselves: the package's latent cache and
the one DeepseekV3Attention of transformers fills, and DeepSeek-V3's sizes against transformers' configuration."""

import numpy as np
import pytest

from attnbook.measure.counts import CACHE_KINDS, DEEPSEEK_V3, kv_cache_bytes_per_token
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
