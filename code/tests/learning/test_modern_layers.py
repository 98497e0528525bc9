"""attnbook.learning.modern_layers: each backward pass against central finite differences (float64), its
forward equal to the core's, and float32 against float64."""

import numpy as np
import pytest

from attnbook import apply_rotary, decoder_block, init_decoder_block, init_multi_head_weights, rms_norm
from attnbook.learning.gradcheck import gradient_errors
from attnbook.learning.modern_layers import gqa_attention_vjp, rms_norm_vjp, rotary_block_vjp, rotary_vjp, swiglu_vjp
from attnbook.learning.optim import tree_map
from attnbook.modern import init_swiglu_feed_forward, swiglu_feed_forward

B, N, D, D_FF, HEADS, KV = 2, 5, 8, 12, 4, 2
TOLERANCE = 1e-7


def randomised(tree, rng, scale=0.8):
    return tree_map(lambda a: scale * rng.standard_normal(a.shape) + (1.0 if a.ndim == 1 else 0.0), tree)


def as_float32(tree):
    return tree_map(lambda a: np.asarray(a, dtype=np.float32), tree)


def check(loss, point, grads):
    errors = gradient_errors(loss, point, grads)
    assert max(errors.values()) < TOLERANCE, errors


def test_rms_norm_gradients_and_forward():
    rng = np.random.default_rng(0)
    x, gamma, dy = rng.standard_normal((B, N, D)), rng.standard_normal(D), rng.standard_normal((B, N, D))
    y, back = rms_norm_vjp(x, gamma)
    np.testing.assert_array_equal(y, rms_norm(x, gamma))
    check(lambda t: float(np.sum(rms_norm(*t) * dy)), (x, gamma), back(dy))


def test_swiglu_gradients_and_forward():
    rng = np.random.default_rng(1)
    x, ff, dy = rng.standard_normal((B, N, D)), randomised(init_swiglu_feed_forward(D, D_FF), rng), rng.standard_normal((B, N, D))
    y, back = swiglu_vjp(x, ff)
    np.testing.assert_array_equal(y, swiglu_feed_forward(x, ff))
    grads, dx = back(dy)
    check(lambda t: float(np.sum(swiglu_feed_forward(t[0], t[1]) * dy)), (x, ff), (dx, grads))


def test_rotary_gradients_and_forward():
    rng = np.random.default_rng(2)
    x, dy, positions = rng.standard_normal((B, N, D)), rng.standard_normal((B, N, D)), np.array([0, 3, 1.5, 7, 2])
    y, back = rotary_vjp(x, positions)
    np.testing.assert_array_equal(y, apply_rotary(x, positions))
    check(lambda t: float(np.sum(apply_rotary(t, positions) * dy)), x, back(dy))


@pytest.mark.parametrize("n_kv_heads", [1, KV, HEADS])
def test_grouped_query_attention_gradients(n_kv_heads):
    rng = np.random.default_rng(3)
    x, dy = rng.standard_normal((B, N, D)), rng.standard_normal((B, N, D))
    w = randomised(init_multi_head_weights(D, n_heads=HEADS, n_kv_heads=n_kv_heads), rng)
    (out, attention), back = gqa_attention_vjp(x, w, HEADS, n_kv_heads)
    assert np.all(np.triu(attention, 1) == 0)
    grads, dx = back(dy)
    check(lambda t: float(np.sum(gqa_attention_vjp(t[0], t[1], HEADS, n_kv_heads)[0].output * dy)), (x, w), (dx, grads))


def test_the_block_gradients_and_its_forward_without_turns_is_the_cores():
    rng = np.random.default_rng(4)
    x, dy = rng.standard_normal((B, N, D)), rng.standard_normal((B, N, D))
    block = randomised(init_decoder_block(D, D_FF, HEADS, KV), rng, scale=0.5)
    block = block._replace(attention=block.attention._replace(
        **{f: np.zeros_like(getattr(block.attention, f)) for f in ("b_q", "b_k", "b_v", "b_o")}))
    (out, _), back = rotary_block_vjp(x, block, HEADS, KV)
    grads, dx = back(dy)
    check(lambda t: float(np.sum(rotary_block_vjp(t[0], t[1], HEADS, KV)[0].output * dy)), (x, block), (dx, grads))
    still = np.zeros(D // HEADS // 2)  # frequencies 0: no position is turned, the core's pre-norm block
    np.testing.assert_allclose(rotary_block_vjp(x, block, HEADS, KV, still)[0].output,
                               decoder_block(x, block, HEADS, KV).output, rtol=1e-12, atol=1e-12)


def test_float32_follows_the_inputs_and_agrees_with_float64():
    rng = np.random.default_rng(5)
    x, dy = rng.standard_normal((B, N, D)), rng.standard_normal((B, N, D))
    block = randomised(init_decoder_block(D, D_FF, HEADS, KV), rng, scale=0.5)
    (out64, _), back64 = rotary_block_vjp(x, block, HEADS, KV)
    (out32, _), back32 = rotary_block_vjp(as_float32(x), as_float32(block), HEADS, KV)
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, out64, rtol=1e-4, atol=1e-5)
    grads64, grads32 = back64(dy), back32(dy.astype(np.float32))
    leaves = []
    tree_map(lambda a, b: leaves.append((a, b)), grads32, grads64)
    for a, b in leaves:
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4 * max(1.0, np.abs(b).max()))
    y, back = rms_norm_vjp(x.astype(np.float32), np.ones(D, np.float32))
    assert y.dtype == back(y)[0].dtype == back(y)[1].dtype == np.float32
    y, back = rotary_vjp(x.astype(np.float32))
    assert y.dtype == back(y).dtype == np.float32


def test_refusals():
    w = init_multi_head_weights(6, n_heads=2)
    with pytest.raises(ValueError, match="odd"):
        gqa_attention_vjp(np.ones((3, 6)), w, 2)
    with pytest.raises(ValueError, match="dy has shape"):
        rms_norm_vjp(np.ones((2, 4)))[1](np.ones((2, 3)))
