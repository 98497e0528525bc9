"""attnbook.multi_head_attention against torch.nn.MultiheadAttention, the reference implementation.

PyTorch is optional: readers never need it. Without it these tests are skipped with a reason,
except in CI (environment variable CI=true), where a missing torch is a failure: the comparison
with the reference is the authoritative check of the package's multi-head attention.
Install the CPU build with ``pip install torch==2.13.0``.

Conventions that differ between the two (each is exercised below):

* torch computes ``y = x W^T + b`` and stacks W_Q, W_K, W_V in ``in_proj_weight``;
  ``multi_head_weights_from_torch`` converts to this package's ``y = x W + b``;
* torch's boolean ``attn_mask`` and ``key_padding_mask`` are True where attention is *forbidden*;
  this package's masks are True where it is *allowed*;
* torch returns weights averaged over the heads unless ``average_attn_weights=False``;
  this package always returns them per head, ``(batch, heads, n_q, n_k)``.
"""

import numpy as np
import pytest

from attnbook import (
    causal_mask,
    merge_heads,
    multi_head_attention,
    multi_head_weights_from_torch,
    padding_mask,
    scaled_dot_product_attention,
    split_heads,
)

try:
    import torch
except ImportError:  # torch is optional for readers; CI must have it (the torch marker, conftest.py)
    torch = None

pytestmark = pytest.mark.torch  # every test compares with torch.nn.MultiheadAttention


def torch_layer(d_model=512, n_heads=8, seed=0, dtype=None, random_biases=True):  # dtype: "float64" or None
    """A seeded nn.MultiheadAttention in eval mode (no dropout); torch initialises the biases to 0,
    so random ones are drawn to make sure the conversion places them correctly. Every test starts here."""
    torch.manual_seed(seed)
    layer = torch.nn.MultiheadAttention(embed_dim=d_model, num_heads=n_heads, batch_first=True)
    if dtype is not None:
        layer = layer.to(getattr(torch, dtype))
    if random_biases:
        with torch.no_grad():
            layer.in_proj_bias.normal_()
            layer.out_proj.bias.normal_()
    return layer.eval()


def converted(layer):
    """The layer's parameters in this package's layout."""
    as_numpy = {name: p.detach().cpu().numpy() for name, p in layer.named_parameters()}
    return multi_head_weights_from_torch(as_numpy["in_proj_weight"], as_numpy["in_proj_bias"],
                                         as_numpy["out_proj.weight"], as_numpy["out_proj.bias"])


def run_torch(layer, query, key, value, **kwargs):
    with torch.no_grad():
        out, weights = layer(torch.from_numpy(query), torch.from_numpy(key), torch.from_numpy(value), **kwargs)
    return out.numpy(), (None if weights is None else weights.numpy())


def embeddings(shape, seed=1, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_the_source_example_shapes_and_values_agree_in_float32():
    # The blog post's call: embed_dim=512, num_heads=8, batch_first=True on X of shape [1, 10, 512].
    layer = torch_layer()
    x = embeddings((1, 10, 512))  # (batch, n, d_model)
    torch_out, torch_weights = run_torch(layer, x, x, x)
    assert torch_out.shape == (1, 10, 512) and torch_weights.shape == (1, 10, 10)
    out, weights = multi_head_attention(x, x, x, converted(layer), n_heads=8)
    assert out.shape == (1, 10, 512) and weights.shape == (1, 8, 10, 10)
    np.testing.assert_allclose(out, torch_out, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(weights.mean(axis=1), torch_weights, rtol=1e-4, atol=1e-6)


def test_float64_agreement_is_at_rounding_level():
    layer = torch_layer(dtype="float64", seed=2)
    x = embeddings((1, 10, 512), seed=3, dtype=np.float64)
    torch_out, torch_weights = run_torch(layer, x, x, x)
    out, weights = multi_head_attention(x, x, x, converted(layer), n_heads=8)
    np.testing.assert_allclose(out, torch_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights.mean(axis=1), torch_weights, rtol=1e-10, atol=1e-14)


def test_per_head_weights_agree_with_average_attn_weights_false():
    layer = torch_layer(dtype="float64", seed=4)
    x = embeddings((2, 10, 512), seed=5, dtype=np.float64)
    torch_out, torch_weights = run_torch(layer, x, x, x, average_attn_weights=False)
    assert torch_weights.shape == (2, 8, 10, 10)
    out, weights = multi_head_attention(x, x, x, converted(layer), n_heads=8)
    np.testing.assert_allclose(weights, torch_weights, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(out, torch_out, rtol=1e-10, atol=1e-12)


def test_torchs_default_weights_are_the_mean_of_the_per_head_weights():
    layer = torch_layer(dtype="float64", seed=6)
    x = embeddings((1, 10, 512), seed=7, dtype=np.float64)
    _, averaged = run_torch(layer, x, x, x)
    _, per_head = run_torch(layer, x, x, x, average_attn_weights=False)
    np.testing.assert_allclose(averaged, per_head.mean(axis=1), rtol=1e-12, atol=1e-15)


def test_causal_attn_mask_agrees_once_its_meaning_is_inverted():
    layer = torch_layer(dtype="float64", seed=8)
    x = embeddings((1, 10, 512), seed=9, dtype=np.float64)
    forbidden = torch.from_numpy(~causal_mask(10))  # torch: True = may NOT attend
    torch_out, torch_weights = run_torch(layer, x, x, x, attn_mask=forbidden, average_attn_weights=False)
    out, weights = multi_head_attention(x, x, x, converted(layer), n_heads=8, mask=causal_mask(10))
    assert np.all(np.triu(torch_weights, k=1) == 0) and np.all(np.triu(weights, k=1) == 0)
    np.testing.assert_allclose(weights, torch_weights, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(out, torch_out, rtol=1e-10, atol=1e-12)


def test_key_padding_mask_agrees_with_padding_mask():
    layer = torch_layer(dtype="float64", seed=10)
    lengths = [10, 6, 3]
    x = embeddings((3, 10, 512), seed=11, dtype=np.float64)
    allowed = padding_mask(lengths, 10)  # (batch, 1, n): True = real token
    torch_out, torch_weights = run_torch(layer, x, x, x, key_padding_mask=torch.from_numpy(~allowed[:, 0]),
                                         average_attn_weights=False)
    out, weights = multi_head_attention(x, x, x, converted(layer), n_heads=8, mask=allowed)
    assert np.all(weights[1, :, :, 6:] == 0) and np.all(weights[2, :, :, 3:] == 0)
    np.testing.assert_allclose(weights, torch_weights, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(out, torch_out, rtol=1e-10, atol=1e-12)


def test_padding_and_causal_masks_together_agree():
    layer = torch_layer(dtype="float64", seed=12)
    lengths = [10, 7]
    x = embeddings((2, 10, 512), seed=13, dtype=np.float64)
    allowed = padding_mask(lengths, 10) & causal_mask(10)  # (batch, n, n)
    torch_out, torch_weights = run_torch(layer, x, x, x, attn_mask=torch.from_numpy(~causal_mask(10)),
                                         key_padding_mask=torch.from_numpy(~padding_mask(lengths, 10)[:, 0]),
                                         average_attn_weights=False)
    out, weights = multi_head_attention(x, x, x, converted(layer), n_heads=8, mask=allowed)
    np.testing.assert_allclose(weights, torch_weights, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(out, torch_out, rtol=1e-10, atol=1e-12)


def test_cross_attention_with_different_lengths_agrees():
    layer = torch_layer(dtype="float64", seed=14)
    decoder = embeddings((2, 4, 512), seed=15, dtype=np.float64)  # (batch, n_q, d_model)
    encoder = embeddings((2, 9, 512), seed=16, dtype=np.float64)  # (batch, n_k, d_model)
    torch_out, torch_weights = run_torch(layer, decoder, encoder, encoder, average_attn_weights=False)
    out, weights = multi_head_attention(decoder, encoder, encoder, converted(layer), n_heads=8)
    assert weights.shape == torch_weights.shape == (2, 8, 4, 9)
    np.testing.assert_allclose(weights, torch_weights, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(out, torch_out, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n_heads", [1, 2, 4, 16])
def test_other_numbers_of_heads_agree(n_heads):
    layer = torch_layer(d_model=64, n_heads=n_heads, dtype="float64", seed=17 + n_heads)
    x = embeddings((2, 5, 64), seed=18, dtype=np.float64)
    torch_out, torch_weights = run_torch(layer, x, x, x, average_attn_weights=False)
    out, weights = multi_head_attention(x, x, x, converted(layer), n_heads=n_heads)
    np.testing.assert_allclose(weights, torch_weights, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(out, torch_out, rtol=1e-10, atol=1e-12)


def test_output_without_weights_agrees_on_torchs_fast_path():
    # need_weights=False in eval mode lets torch use its fused kernel: a different code path.
    layer = torch_layer(seed=19)
    x = embeddings((2, 10, 512), seed=20)
    torch_out, torch_weights = run_torch(layer, x, x, x, need_weights=False)
    assert torch_weights is None
    out, _ = multi_head_attention(x, x, x, converted(layer), n_heads=8)
    np.testing.assert_allclose(out, torch_out, rtol=1e-4, atol=1e-5)


def test_torch_heads_are_the_column_blocks_of_the_projections():
    # The per-head loop of the chapter, written with split_heads, reproduces torch head by head.
    layer = torch_layer(d_model=16, n_heads=4, dtype="float64", seed=21)
    x = embeddings((1, 6, 16), seed=22, dtype=np.float64)
    torch_out, torch_weights = run_torch(layer, x, x, x, average_attn_weights=False)
    w = converted(layer)
    q = split_heads(x @ w.w_q + w.b_q, 4)  # (batch, h, n, d_head)
    k = split_heads(x @ w.w_k + w.b_k, 4)  # (batch, h, n, d_head)
    v = split_heads(x @ w.w_v + w.b_v, 4)  # (batch, h, n, d_head)
    for i in range(4):
        _, head_weights = scaled_dot_product_attention(q[:, i], k[:, i], v[:, i])  # (batch, n, n)
        np.testing.assert_allclose(head_weights, torch_weights[:, i], rtol=1e-10, atol=1e-14)
    heads, _ = scaled_dot_product_attention(q, k, v)  # (batch, h, n, d_head)
    np.testing.assert_allclose(merge_heads(heads) @ w.w_o + w.b_o, torch_out, rtol=1e-10, atol=1e-12)


def test_a_query_with_no_allowed_key_is_nan_in_torch_and_zero_here():
    # A documented difference of convention: torch 2.13 returns NaN for a fully masked row,
    # attnbook returns all-zero weights (and so the output bias b_O alone).
    layer = torch_layer(d_model=8, n_heads=2, dtype="float64", seed=23)
    x = embeddings((1, 3, 8), seed=24, dtype=np.float64)
    allowed = causal_mask(3).copy()
    allowed[0] = False
    torch_out, torch_weights = run_torch(layer, x, x, x, attn_mask=torch.from_numpy(~allowed),
                                         average_attn_weights=False)
    out, weights = multi_head_attention(x, x, x, converted(layer), n_heads=2, mask=allowed)
    assert np.all(np.isnan(torch_weights[0, :, 0])) and np.all(np.isnan(torch_out[0, 0]))
    assert np.all(weights[0, :, 0] == 0)
    np.testing.assert_allclose(out[0, 0], converted(layer).b_o)
    np.testing.assert_allclose(weights[0, :, 1:], torch_weights[0, :, 1:], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(out[0, 1:], torch_out[0, 1:], rtol=1e-10, atol=1e-12)
