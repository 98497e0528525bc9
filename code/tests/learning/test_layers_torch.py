"""attnbook.learning.layers against torch.autograd: the same weights, written out as explicit torch
matmuls in float64 (not nn.Transformer), give the same gradients to rtol 1e-9, and PyTorch's
``F.cross_entropy(..., ignore_index=-100, label_smoothing=eps)`` is token_cross_entropy."""

import math

import numpy as np
import pytest

from attnbook import causal_mask, init_decoder_layer, init_encoder_layer, init_multi_head_weights, padding_mask
from attnbook.learning.gradients import token_cross_entropy
from attnbook.learning.layers import decoder_layer_vjp, encoder_layer_vjp, layer_norm_vjp, multi_head_vjp

pytestmark = pytest.mark.torch

B, N, N_S, D, D_FF, HEADS = 2, 4, 3, 8, 12, 2
RTOL = 1e-9


def randomised(tree, rng):
    if isinstance(tree, tuple):
        branches = [randomised(branch, rng) for branch in tree]
        return type(tree)(*branches) if hasattr(tree, "_fields") else tuple(branches)
    return 0.8 * rng.standard_normal(tree.shape) + (1.0 if tree.ndim == 1 else 0.0)


def to_torch(tree):
    """The tree with every array as a float64 leaf tensor that requires a gradient."""
    import torch

    if isinstance(tree, tuple):
        branches = [to_torch(branch) for branch in tree]
        return type(tree)(*branches) if hasattr(tree, "_fields") else tuple(branches)
    return torch.tensor(tree, dtype=torch.float64, requires_grad=True)


def flat(tree):
    return [leaf for branch in tree for leaf in flat(branch)] if isinstance(tree, tuple) else [tree]


def assert_same_gradients(numpy_grads, torch_tensors):
    for ours, tensor in zip(flat(numpy_grads), flat(torch_tensors), strict=True):
        np.testing.assert_allclose(ours, tensor.grad.numpy(), rtol=RTOL, atol=1e-12)


# the layers, written out in torch


def t_multi_head(query, key, value, w, mask):
    import torch

    def heads(x):  # (..., n, d_model) -> (..., h, n, d_head)
        return x.reshape(*x.shape[:-1], HEADS, D // HEADS).transpose(-3, -2)

    q, k, v = heads(query @ w.w_q + w.b_q), heads(key @ w.w_k + w.b_k), heads(value @ w.w_v + w.b_v)
    scores = q @ k.transpose(-1, -2) / math.sqrt(D // HEADS)  # (..., h, n_q, n_k)
    if mask is not None:
        mask = torch.as_tensor(mask)  # (n_q, n_k) or (batch, n_q | 1, n_k): one mask for every head
        scores = scores.masked_fill(~(mask[:, None] if mask.ndim == 3 else mask), float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v  # (..., h, n_q, d_head)
    return out.transpose(-3, -2).reshape(*out.shape[:-3], out.shape[-2], D) @ w.w_o + w.b_o


def t_layer_norm(x, norm):
    import torch.nn.functional as F

    return F.layer_norm(x, (D,), norm[0], norm[1], eps=1e-5)


def t_feed_forward(x, ff):
    import torch

    return torch.relu(x @ ff.w_1 + ff.b_1) @ ff.w_2 + ff.b_2


def t_encoder(x, w, mask):
    x = t_layer_norm(x + t_multi_head(x, x, x, w.self_attention, mask), w.norm_1)
    return t_layer_norm(x + t_feed_forward(x, w.feed_forward), w.norm_2)


def t_decoder(y, memory, w, memory_mask):
    y = t_layer_norm(y + t_multi_head(y, y, y, w.self_attention, causal_mask(y.shape[-2])), w.norm_1)
    y = t_layer_norm(y + t_multi_head(y, memory, memory, w.cross_attention, memory_mask), w.norm_2)
    return t_layer_norm(y + t_feed_forward(y, w.feed_forward), w.norm_3)


def test_multi_head_attention_with_causal_and_padding_masks():
    import torch

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((B, N, D)) for _ in range(3))
    w, mask = randomised(init_multi_head_weights(D), rng), causal_mask(N) & padding_mask([N, 2], N)
    d_out = rng.standard_normal((B, N, D))
    grads, dq, dk, dv = multi_head_vjp(q, k, v, w, HEADS, mask)[1](d_out)
    tq, tk, tv, tw = to_torch(q), to_torch(k), to_torch(v), to_torch(w)
    (t_multi_head(tq, tk, tv, tw, mask) * torch.tensor(d_out)).sum().backward()
    assert_same_gradients((grads, dq, dk, dv), (tw, tq, tk, tv))


def test_the_encoder_layer_as_a_decoder_only_block():
    import torch

    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((B, N, D)), randomised(init_encoder_layer(D, D_FF), rng)
    mask, dy = causal_mask(N) & padding_mask([3, N], N), rng.standard_normal((B, N, D))
    grads, dx = encoder_layer_vjp(x, w, HEADS, mask)[1](dy)
    tx, tw = to_torch(x), to_torch(w)
    (t_encoder(tx, tw, mask) * torch.tensor(dy)).sum().backward()
    assert_same_gradients((grads, dx), (tw, tx))


def test_the_decoder_layer_with_a_memory_padding_mask():
    import torch

    rng = np.random.default_rng(2)
    y, memory = rng.standard_normal((B, N, D)), rng.standard_normal((B, N_S, D))
    w, memory_mask = randomised(init_decoder_layer(D, D_FF), rng), padding_mask([N_S, 1], N_S)
    dout = rng.standard_normal((B, N, D))
    grads, dy, dmemory = decoder_layer_vjp(y, memory, w, HEADS, memory_mask)[1](dout)
    ty, tm, tw = to_torch(y), to_torch(memory), to_torch(w)
    (t_decoder(ty, tm, tw, memory_mask) * torch.tensor(dout)).sum().backward()
    assert_same_gradients((grads, dy, dmemory), (tw, ty, tm))


def test_layer_norm():
    import torch

    rng = np.random.default_rng(3)
    x, gamma, beta, dy = rng.standard_normal((B, N, D)), *rng.standard_normal((2, D)), rng.standard_normal((B, N, D))
    dx, dgamma, dbeta = layer_norm_vjp(x, gamma, beta)[1](dy)
    tx, tg, tb = to_torch(x), to_torch(gamma), to_torch(beta)
    (t_layer_norm(tx, (tg, tb)) * torch.tensor(dy)).sum().backward()
    assert_same_gradients((dx, dgamma, dbeta), (tx, tg, tb))


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_the_masked_label_smoothed_cross_entropy_is_pytorchs(eps):
    import torch
    import torch.nn.functional as F

    rng = np.random.default_rng(4)
    logits = 3 * rng.standard_normal((B, N, 7))
    targets = np.array([[2, 0, 6, -100], [5, 5, -100, -100]])  # PyTorch's ignore_index where padded
    loss, dlogits = token_cross_entropy(logits, targets, mask=targets != -100, label_smoothing=eps)
    t_logits = to_torch(logits)
    t_loss = F.cross_entropy(t_logits.reshape(-1, 7), torch.tensor(targets).reshape(-1), ignore_index=-100,
                             label_smoothing=eps)
    t_loss.backward()
    assert loss == pytest.approx(t_loss.item(), rel=RTOL)
    np.testing.assert_allclose(dlogits, t_logits.grad.numpy(), rtol=RTOL, atol=1e-15)
