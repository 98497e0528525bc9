"""attnbook.learning.modern_layers against torch.autograd: RMSNorm, SwiGLU, rotary positions and causal
grouped-query attention written out as explicit torch operations in float64 give the same gradients to
rtol 1e-9 (PyTorch's own ``F.rms_norm`` and ``scaled_dot_product_attention(..., enable_gqa=True)`` where
they exist)."""

import math

import numpy as np
import pytest

from attnbook import init_decoder_block, init_multi_head_weights
from attnbook.learning.modern_layers import gqa_attention_vjp, rms_norm_vjp, rotary_block_vjp, rotary_vjp, swiglu_vjp
from attnbook.learning.optim import tree_map
from attnbook.modern import init_swiglu_feed_forward
from attnbook.positional import sinusoidal_frequencies

pytestmark = pytest.mark.torch

B, N, D, D_FF, HEADS, KV = 2, 5, 8, 12, 4, 2
RTOL = 1e-9


def randomised(tree, rng, scale=0.8):
    return tree_map(lambda a: scale * rng.standard_normal(a.shape) + (1.0 if a.ndim == 1 else 0.0), tree)


def to_torch(tree):
    import torch

    return tree_map(lambda a: torch.tensor(a, dtype=torch.float64, requires_grad=True), tree)


def assert_same_gradients(numpy_grads, torch_tensors):
    pairs = []
    tree_map(lambda ours, tensor: pairs.append((ours, tensor)), numpy_grads, torch_tensors)
    for ours, tensor in pairs:
        np.testing.assert_allclose(ours, tensor.grad.numpy(), rtol=RTOL, atol=1e-12)


def t_rms_norm(x, gamma, eps=1e-6):
    import torch.nn.functional as F

    return F.rms_norm(x, (x.shape[-1],), gamma, eps=eps)


def t_swiglu(x, ff):
    import torch.nn.functional as F

    return (F.silu(x @ ff.w_gate) * (x @ ff.w_up)) @ ff.w_down


def t_rotary(x, positions):
    import torch

    angles = torch.tensor(positions[:, None] * sinusoidal_frequencies(x.shape[-1])[None, :])  # (n, d / 2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)  # interleaved


def t_attention(x, w, n_heads, n_kv_heads):
    import torch.nn.functional as F

    d_head = x.shape[-1] // n_heads

    def heads(y, h):  # (..., n, h d_head) -> (..., h, n, d_head)
        return y.reshape(*y.shape[:-1], h, d_head).transpose(-3, -2)

    positions = np.arange(x.shape[-2], dtype=np.float64)
    q = t_rotary(heads(x @ w.w_q + w.b_q, n_heads), positions)
    k = t_rotary(heads(x @ w.w_k + w.b_k, n_kv_heads), positions)
    v = heads(x @ w.w_v + w.b_v, n_kv_heads)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / math.sqrt(d_head), enable_gqa=True)
    return out.transpose(-3, -2).reshape(*x.shape) @ w.w_o + w.b_o


def t_block(x, w):
    z = x + t_attention(t_rms_norm(x, w.norm_1), w.attention, HEADS, KV)
    return z + t_swiglu(t_rms_norm(z, w.norm_2), w.feed_forward)


def test_rms_norm():
    import torch

    rng = np.random.default_rng(0)
    x, gamma, dy = rng.standard_normal((B, N, D)), rng.standard_normal(D), rng.standard_normal((B, N, D))
    dx, dgamma = rms_norm_vjp(x, gamma)[1](dy)
    tx, tg = to_torch((x, gamma))
    (t_rms_norm(tx, tg) * torch.tensor(dy)).sum().backward()
    assert_same_gradients((dx, dgamma), (tx, tg))


def test_swiglu():
    import torch

    rng = np.random.default_rng(1)
    x, ff, dy = rng.standard_normal((B, N, D)), randomised(init_swiglu_feed_forward(D, D_FF), rng), rng.standard_normal((B, N, D))
    grads, dx = swiglu_vjp(x, ff)[1](dy)
    tx, tff = to_torch((x, ff))
    (t_swiglu(tx, tff) * torch.tensor(dy)).sum().backward()
    assert_same_gradients((grads, dx), (tff, tx))


def test_rotary():
    import torch

    rng = np.random.default_rng(2)
    x, dy, positions = rng.standard_normal((B, N, D)), rng.standard_normal((B, N, D)), np.array([0, 3, 1.5, 7, 2])
    y, back = rotary_vjp(x, positions)
    tx = to_torch(x)
    ty = t_rotary(tx, positions)
    (ty * torch.tensor(dy)).sum().backward()
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=RTOL, atol=1e-12)
    assert_same_gradients(back(dy), tx)


@pytest.mark.parametrize("n_kv_heads", [1, KV, HEADS])
def test_causal_grouped_query_attention_with_rotary(n_kv_heads):
    import torch

    rng = np.random.default_rng(3)
    x, dy = rng.standard_normal((B, N, D)), rng.standard_normal((B, N, D))
    w = randomised(init_multi_head_weights(D, n_heads=HEADS, n_kv_heads=n_kv_heads), rng)
    (out, _), back = gqa_attention_vjp(x, w, HEADS, n_kv_heads)
    grads, dx = back(dy)
    tx, tw = to_torch((x, w))
    t_out = t_attention(tx, tw, HEADS, n_kv_heads)
    (t_out * torch.tensor(dy)).sum().backward()
    np.testing.assert_allclose(out, t_out.detach().numpy(), rtol=RTOL, atol=1e-12)
    assert_same_gradients((grads, dx), (tw, tx))


def test_the_pre_norm_rotary_block():
    import torch

    rng = np.random.default_rng(4)
    x, dy = rng.standard_normal((B, N, D)), rng.standard_normal((B, N, D))
    block = randomised(init_decoder_block(D, D_FF, HEADS, KV), rng, scale=0.5)
    grads, dx = rotary_block_vjp(x, block, HEADS, KV)[1](dy)
    tx, tw = to_torch((x, block))
    (t_block(tx, tw) * torch.tensor(dy)).sum().backward()
    assert_same_gradients((grads, dx), (tw, tx))
