"""attnbook.learning.fast_block: the GPT's fast path equals the reference block (modern_layers.rotary_block_vjp)
forward and backward, in float64 to 1e-12 and in float32 to its round-off, for multi-head, grouped-query and
multi-query attention; its two threads give the bytes of one piece; and its embedding gradient is the reference's."""

import numpy as np
import pytest

from attnbook import init_decoder_block
from attnbook.learning.fast_block import embedding_gradient, fast_block_vjp
from attnbook.learning.layers import embedding_vjp
from attnbook.learning.modern_layers import rotary_block_vjp
from attnbook.learning.optim import tree_leaves, tree_map
from attnbook.positional import sinusoidal_frequencies

B, N, D, D_FF = 3, 7, 16, 24


def both(dtype, n_heads, n_kv_heads, seed=0):
    rng = np.random.default_rng(seed)
    x, dy = (rng.standard_normal((B, N, D)).astype(dtype) for _ in range(2))
    block = init_decoder_block(D, D_FF, n_heads, n_kv_heads, seed=seed)
    block = tree_map(lambda a: (a + 0.3 * rng.standard_normal(a.shape)).astype(dtype), block)  # biases too
    theta = sinusoidal_frequencies(D // n_heads)
    (fast, fast_a), fast_back = fast_block_vjp(x, block, n_heads, n_kv_heads, theta, 1e-6)
    (slow, slow_a), slow_back = rotary_block_vjp.unchecked(x, block, n_heads, n_kv_heads, theta, 1e-6)
    fast_grads, fast_dx = fast_back(dy)
    slow_grads, slow_dx = slow_back(dy)
    return [fast, fast_a, fast_dx, *tree_leaves(fast_grads)], [slow, slow_a, slow_dx, *tree_leaves(slow_grads)]


@pytest.mark.parametrize("n_heads, n_kv_heads", [(4, 4), (4, 2), (4, 1), (2, 1)])
def test_float64_equals_the_reference(n_heads, n_kv_heads):
    for fast, slow in zip(*both(np.float64, n_heads, n_kv_heads), strict=True):
        assert fast.shape == slow.shape and fast.dtype == np.float64
        np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(slow).max()))


@pytest.mark.parametrize("n_heads, n_kv_heads", [(4, 2), (4, 1)])
def test_float32_stays_float32_and_agrees_to_round_off(n_heads, n_kv_heads):
    for fast, slow in zip(*both(np.float32, n_heads, n_kv_heads, seed=1), strict=True):
        assert fast.dtype == np.float32
        np.testing.assert_allclose(fast, slow, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(slow).max()))


def test_the_attention_is_written_into_the_given_array():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((B, N, D))
    block, theta = init_decoder_block(D, D_FF, 4, 2), sinusoidal_frequencies(D // 4)
    out = np.full((B, 4, N, N), np.nan)
    (_, attention), _ = fast_block_vjp(x, block, 4, 2, theta, 1e-6, out)
    assert np.shares_memory(attention, out) and np.allclose(out.sum(axis=-1), 1.0)
    assert np.all(np.triu(out[0, 0], k=1) == 0)  # causal


def test_the_embedding_gradient_is_the_reference_scatter():
    rng = np.random.default_rng(3)
    tokens, dx = rng.integers(0, 5, (2, 6)), rng.standard_normal((2, 6, 3))
    _, back = embedding_vjp(np.zeros((5, 3)), tokens)
    np.testing.assert_allclose(embedding_gradient(tokens, dx, 5), back(dx), rtol=1e-13)


@pytest.mark.parametrize("dtype, batch", [(np.float32, 4), (np.float64, 3)])
def test_two_threads_give_the_bytes_of_one_piece(monkeypatch, dtype, batch):
    import attnbook.learning.fast_block as fast_block

    rng = np.random.default_rng(4)
    x, dy = (rng.standard_normal((batch, 16, 32)).astype(dtype) for _ in range(2))
    block = tree_map(lambda a: a.astype(dtype), init_decoder_block(32, 48, 4, 2, seed=4))
    theta = sinusoidal_frequencies(32 // 4)
    results = []
    for halves in (1, 2):
        monkeypatch.setattr(fast_block, "_halves", lambda halves=halves: halves)
        (y, attention), back = fast_block_vjp(x, block, 4, 2, theta, 1e-6)
        grads, dx = back(dy)
        results.append([y, attention, dx, *tree_leaves(grads)])
    for one_piece, two_threads in zip(*results, strict=True):
        assert one_piece.tobytes() == two_threads.tobytes()
