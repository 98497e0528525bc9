"""Tests of attnbook.efficient.flash: the IO simulator against its closed forms, and the backward pass
from the log-sum-exp against the reference backward, finite differences and torch.autograd."""

import tracemalloc

import numpy as np
import pytest

from attnbook import causal_mask, scaled_dot_product_attention
from attnbook.efficient.flash import (
    blocks_for_sram,
    flash_backward,
    flash_forward,
    simulate_hbm_traffic,
    sram_footprint,
    standard_hbm_traffic,
    tiled_hbm_traffic,
)
from attnbook.efficient.tiled import tiled_attention
from attnbook.learning.gradients import attention_backward
from attnbook.measure.probes import numerical_jacobian


def _inputs(seed, shape_q, n_k=None, d_v=None):
    rng = np.random.default_rng(seed)
    *batch, n_q, d = shape_q
    n_k = n_q if n_k is None else n_k
    d_v = d if d_v is None else d_v
    q = rng.standard_normal((*batch, n_q, d))  # (..., n_q, d)
    k = rng.standard_normal((*batch, n_k, d))  # (..., n_k, d)
    v = rng.standard_normal((*batch, n_k, d_v))  # (..., n_k, d_v)
    g = rng.standard_normal((*batch, n_q, d_v))  # (..., n_q, d_v)
    return q, k, v, g


# ------------------------------------------------------------------------------------------ IO counts


@pytest.mark.parametrize("n, d, block_q, block_k", [(64, 8, 8, 8), (100, 4, 7, 3), (33, 16, 32, 5), (5, 2, 8, 8)])
def test_simulator_without_spare_sram_matches_the_closed_form(n, d, block_q, block_k):
    sram = sram_footprint(block_q, block_k, d)
    assert simulate_hbm_traffic(n, d, block_q, block_k, sram) == tiled_hbm_traffic(n, d, block_q)


def test_simulator_reads_keys_and_values_once_when_they_all_fit():
    n, d, block_q, block_k = 64, 8, 8, 8
    sram = sram_footprint(block_q, block_k, d) + 2 * n * d
    traffic = simulate_hbm_traffic(n, d, block_q, block_k, sram)
    assert traffic.reads == n * d + 2 * n * d and traffic.writes == n * d


def test_simulator_lru_gains_nothing_until_every_key_block_fits():
    """A cyclic scan thrashes an LRU cache that holds all but one block: the count is the closed form."""
    n, d, block_q, block_k = 64, 8, 8, 8
    base = sram_footprint(block_q, block_k, d)
    almost = base + 2 * (n - block_k) * d
    assert simulate_hbm_traffic(n, d, block_q, block_k, almost) == tiled_hbm_traffic(n, d, block_q)


def test_simulator_causal_reads_only_the_tiles_on_and_below_the_diagonal():
    n, d, block = 64, 4, 8
    tiles = n // block
    traffic = simulate_hbm_traffic(n, d, block, block, sram_footprint(block, block, d), causal=True)
    assert traffic.reads == n * d + 2 * block * d * tiles * (tiles + 1) // 2


def test_simulator_refuses_an_sram_that_cannot_hold_one_step():
    with pytest.raises(ValueError, match="cannot hold one step"):
        simulate_hbm_traffic(64, 8, 8, 8, sram_footprint(8, 8, 8) - 1)


@pytest.mark.parametrize("n, d", [(512, 16), (2048, 64), (1000, 32)])
def test_theorem_blocks_fit_and_traffic_lies_between_the_bounds(n, d):
    for sram in (7 * d, 50 * d, 7 * d * 40, n * d):
        block_q, block_k = blocks_for_sram(sram, d)
        assert sram_footprint(block_q, block_k, d) <= sram
        total = simulate_hbm_traffic(n, d, block_q, block_k, sram).total
        bound = n * n * d * d / sram
        assert 14 * bound <= total <= 32 * bound


def test_standard_traffic_is_quadratic_and_above_tiled_for_a_large_sram():
    n, d = 4096, 64
    assert standard_hbm_traffic(n, d).total == 4 * n * d + 4 * n * n
    block_q, block_k = blocks_for_sram(100_000, d)
    assert simulate_hbm_traffic(n, d, block_q, block_k, 100_000).total < standard_hbm_traffic(n, d).total / 3


# --------------------------------------------------------------------------------- forward, backward


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("blocks", [(1, 1), (3, 5), (64, 64)])
def test_forward_output_equals_attention_and_logsumexp_is_the_row_normaliser(causal, blocks):
    q, k, v, _ = _inputs(1, (2, 3, 11, 4))
    out, lse = flash_forward(q, k, v, causal=causal, block_q=blocks[0], block_k=blocks[1])
    mask = causal_mask(11) if causal else None
    np.testing.assert_allclose(out, scaled_dot_product_attention(q, k, v, mask=mask).output, rtol=1e-12, atol=1e-12)
    scores = q @ np.swapaxes(k, -1, -2) / 2.0  # (2, 3, 11, 11)
    if causal:
        scores = np.where(mask, scores, -np.inf)
    np.testing.assert_allclose(lse, np.log(np.exp(scores).sum(axis=-1)), rtol=1e-12)
    np.testing.assert_allclose(out, tiled_attention(q, k, v, causal=causal, block_q=3, block_k=4), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_equals_the_reference_backward_with_stored_weights(causal):
    q, k, v, g = _inputs(2, (2, 9, 3), n_k=13, d_v=5)
    mask = causal_mask(9, 13) if causal else None
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    _, lse = flash_forward(q, k, v, causal=causal, block_q=4, block_k=3)
    flash = flash_backward(q, k, v, out, lse, g, causal=causal, block_q=2, block_k=5)
    reference = attention_backward(q, k, v, weights, g, mask=mask)
    for ours, theirs in zip(flash, reference):
        np.testing.assert_allclose(ours, theirs, rtol=1e-11, atol=1e-12)


def test_backward_matches_finite_differences():
    q, k, v, g = _inputs(3, (5, 3), d_v=2)

    def loss_of(which):
        def loss(x):
            args = [q, k, v]
            args[which] = x
            return np.sum(flash_forward(*args, causal=True, block_q=2, block_k=2).output * g)
        return loss

    out, lse = flash_forward(q, k, v, causal=True, block_q=2, block_k=2)
    grads = flash_backward(q, k, v, out, lse, g, causal=True, block_q=3, block_k=2)
    for which, grad in enumerate(grads):
        numeric = numerical_jacobian(loss_of(which), (q, k, v)[which])  # shape of the input
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_equals_torch_autograd(causal):
    torch = pytest.importorskip("torch")
    q, k, v, g = _inputs(4, (2, 2, 10, 8), d_v=6)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    t_out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
    t_out.backward(torch.tensor(g))
    out, lse = flash_forward(q, k, v, causal=causal, block_q=3, block_k=4)
    np.testing.assert_allclose(out, t_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    grads = flash_backward(q, k, v, out, lse, g, causal=causal, block_q=4, block_k=3)
    for ours, tensor in zip(grads, (tq, tk, tv)):
        np.testing.assert_allclose(ours, tensor.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_backward_never_holds_the_weights():
    rng = np.random.default_rng(5)
    n, d = 1024, 16
    q, k, v, g = rng.standard_normal((4, n, d))  # each (n, d)
    out, lse = flash_forward(q, k, v, block_q=64, block_k=64)
    tracemalloc.start()
    try:
        flash_backward(q, k, v, out, lse, g, block_q=64, block_k=64)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < n * n * 8 / 8


def test_backward_refuses_a_logsumexp_of_the_wrong_shape():
    q, k, v, g = _inputs(6, (4, 2))
    out, lse = flash_forward(q, k, v)
    with pytest.raises(ValueError, match="logsumexp has shape"):
        flash_backward(q, k, v, out, lse[:3], g)


def test_forward_refuses_different_leading_shapes():
    with pytest.raises(ValueError, match="same \\(batch, head\\) shape"):
        flash_forward(np.ones((2, 3, 4)), np.ones((1, 3, 4)), np.ones((1, 3, 4)))
