"""attnbook.modern: RMSNorm, the SwiGLU network and the decoder-only block, against PyTorch where it has them.

PyTorch is optional for readers: without it the PyTorch tests are skipped, except in CI (CI=true).
"""


import numpy as np
import pytest

from attnbook import causal_mask, layer_norm, multi_head_attention
from attnbook.measure.parameters import decoder_block_parameter_count, transformer_parameter_count
from attnbook.modern import (
    DecoderBlockWeights,
    SwiGLUWeights,
    decoder_block,
    init_decoder_block,
    init_swiglu_feed_forward,
    rms_norm,
    swiglu_feed_forward,
)

try:
    import torch
except ImportError:  # torch is optional for readers; CI must have it (the torch marker, conftest.py)
    torch = None


@pytest.mark.parametrize("eps", [1e-6, 1e-5, 0.0])
@pytest.mark.torch
def test_rms_norm_matches_torch_rmsnorm(eps):
    rng = np.random.default_rng(0)
    x, gamma = rng.normal(2.0, 3.0, (3, 5, 16)), rng.standard_normal(16)  # (batch, n, d), (d,)
    layer = torch.nn.RMSNorm(16, eps=eps, dtype=torch.float64)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(gamma))
        theirs = layer(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(rms_norm(x, gamma, eps=eps), theirs, rtol=1e-13, atol=1e-14)


@pytest.mark.torch
def test_rms_norm_in_float32_matches_torch_with_its_default_eps():
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)  # (n, d)
    theirs = torch.nn.RMSNorm(8)(torch.from_numpy(x)).detach().numpy()  # eps: the float32 machine epsilon
    ours = rms_norm(x, np.ones(8, dtype=np.float32), eps=float(np.finfo(np.float32).eps))
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_rms_norm_gives_rows_of_root_mean_square_one_and_keeps_the_mean():
    x = np.random.default_rng(2).normal(5.0, 1.0, (6, 32))  # (n, d): rows far from mean 0
    normed = rms_norm(x, eps=0.0)
    np.testing.assert_allclose(np.sqrt(np.mean(normed**2, axis=-1)), 1.0, rtol=1e-12)
    assert np.all(normed.mean(axis=-1) > 0.9)  # no centring: unlike layer norm, the mean survives
    centred = x - x.mean(axis=-1, keepdims=True)  # (n, d)
    np.testing.assert_allclose(rms_norm(centred, eps=0.0), layer_norm(centred, eps=1e-300), rtol=1e-10)


def test_rms_norm_refuses_a_gain_or_eps_that_does_not_fit():
    with pytest.raises(ValueError, match=r"gamma has shape \(3,\) but x has shape \(2, 4\); expected \(4,\)"):
        rms_norm(np.ones((2, 4)), gamma=np.ones(3))
    with pytest.raises(ValueError, match="eps must be a number at least 0, got -1"):
        rms_norm(np.ones((2, 4)), eps=-1)


@pytest.mark.torch
def test_swiglu_matches_a_torch_implementation():
    ff = init_swiglu_feed_forward(8, 12, seed=3)
    x = np.random.default_rng(4).standard_normal((2, 5, 8))  # (batch, n, d_model)
    gate = torch.nn.Linear(8, 12, bias=False, dtype=torch.float64)
    up = torch.nn.Linear(8, 12, bias=False, dtype=torch.float64)
    down = torch.nn.Linear(12, 8, bias=False, dtype=torch.float64)
    with torch.no_grad():  # torch's Linear computes x W^T: its weights are the transposes
        gate.weight.copy_(torch.from_numpy(ff.w_gate.T.copy()))
        up.weight.copy_(torch.from_numpy(ff.w_up.T.copy()))
        down.weight.copy_(torch.from_numpy(ff.w_down.T.copy()))
        t = torch.from_numpy(x)
        theirs = down(torch.nn.functional.silu(gate(t)) * up(t)).numpy()
    np.testing.assert_allclose(swiglu_feed_forward(x, ff), theirs, rtol=1e-12, atol=1e-14)


def test_swiglu_silu_is_stable_for_large_inputs():
    ff = SwiGLUWeights(np.eye(2), np.eye(2), np.eye(2))
    with np.errstate(all="raise"):  # no overflow in exp: SiLU(1000) = 1000, SiLU(-1000) = -0
        out = swiglu_feed_forward([[1000.0, -1000.0]], ff)
    np.testing.assert_allclose(out, [[1e6, 0.0]], rtol=1e-15, atol=1e-300)


def test_swiglu_refuses_weights_that_do_not_fit():
    ff = init_swiglu_feed_forward(4, 6)
    with pytest.raises(ValueError, match=r"weights.w_up has shape \(4, 5\) but weights.w_gate has shape \(4, 6\)"):
        swiglu_feed_forward(np.ones((2, 4)), ff._replace(w_up=np.ones((4, 5))))
    with pytest.raises(TypeError, match="weights must be SwiGLUWeights, got tuple"):
        swiglu_feed_forward(np.ones((2, 4)), tuple(ff))


@pytest.mark.parametrize("pre_norm", [True, False])
def test_the_block_is_its_equations_written_with_the_public_parts(pre_norm):
    block = init_decoder_block(16, 24, n_heads=4, n_kv_heads=2, seed=5)
    block = block._replace(norm_1=np.linspace(0.5, 1.5, 16), norm_2=np.linspace(1.5, 0.5, 16))
    x = np.random.default_rng(6).standard_normal((2, 5, 16))  # (batch, n, d_model)

    def attention(h):
        return multi_head_attention(h, h, h, block.attention, 4, mask=causal_mask(5), n_kv_heads=2).output

    if pre_norm:
        z = x + attention(rms_norm(x, block.norm_1))
        expected = z + swiglu_feed_forward(rms_norm(z, block.norm_2), block.feed_forward)
    else:
        z = rms_norm(x + attention(x), block.norm_1)
        expected = rms_norm(z + swiglu_feed_forward(z, block.feed_forward), block.norm_2)
    out, weights = decoder_block(x, block, n_heads=4, n_kv_heads=2, pre_norm=pre_norm)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    assert weights.shape == (2, 4, 5, 5) and np.all(np.triu(weights, k=1) == 0)


def test_a_pre_norm_block_with_silent_sub_layers_is_the_identity():
    block = init_decoder_block(8, 16, n_heads=2, seed=0)
    silent = block._replace(attention=block.attention._replace(w_o=np.zeros((8, 8))),
                            feed_forward=block.feed_forward._replace(w_down=np.zeros((16, 8))))
    x = np.random.default_rng(7).normal(3.0, 2.0, (4, 8))
    np.testing.assert_array_equal(decoder_block(x, silent, 2).output, x)
    np.testing.assert_allclose(decoder_block(x, silent, 2, pre_norm=False).output, rms_norm(rms_norm(x)))


def test_the_block_is_causal():
    block = init_decoder_block(8, 16, n_heads=4, n_kv_heads=1, seed=1)
    x = np.random.default_rng(8).standard_normal((6, 8))
    moved = x.copy()
    moved[4] += 3.0
    for pre_norm in (True, False):
        a = decoder_block(x, block, 4, 1, pre_norm=pre_norm).output
        b = decoder_block(moved, block, 4, 1, pre_norm=pre_norm).output
        np.testing.assert_array_equal(a[:4], b[:4])
        assert not np.allclose(a[4:], b[4:])


def test_the_block_refuses_arguments_that_do_not_fit():
    block = init_decoder_block(8, 16, n_heads=4, n_kv_heads=2)
    x = np.ones((3, 8))
    with pytest.raises(ValueError, match=r"weights.attention.w_k has shape \(8, 4\) but x has d_model = 8 and "
                                         r"the key and value heads need 8 columns"):
        decoder_block(x, block, n_heads=4)
    with pytest.raises(ValueError, match=r"weights.norm_2 has shape \(3,\) but x has d_model = 8"):
        decoder_block(x, block._replace(norm_2=np.ones(3)), 4, 2)
    with pytest.raises(TypeError, match="pre_norm"):
        decoder_block(x, block, 4, 2, pre_norm="yes")
    with pytest.raises(TypeError, match="weights must be DecoderBlockWeights"):
        decoder_block(x, tuple(block), 4, 2)


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_the_block_count_equals_the_arrays_init_allocates(n_kv_heads):
    block = init_decoder_block(16, 40, n_heads=4, n_kv_heads=n_kv_heads)
    a = block.attention
    allocated = sum(m.size for m in (a.w_q, a.w_k, a.w_v, a.w_o)) + sum(m.size for m in block.feed_forward)
    allocated += block.norm_1.size + block.norm_2.size  # the biases are zero and not counted
    assert decoder_block_parameter_count(16, 40, 4, n_kv_heads)["block"] == allocated


def test_published_block_counts():
    # Mistral 7B, Table 1 of Jiang et al. (2023); Llama 2 70B, its configuration
    assert decoder_block_parameter_count(4096, 14336, 32, 8)["block"] == 218_112_000
    assert decoder_block_parameter_count(8192, 28672, 64, 8)["block"] == 855_654_400
    # without grouping and with a ReLU network of 4 d the weights equal the 2017 block's, less its biases and shifts
    d, d_ff = 512, 2048
    modern = decoder_block_parameter_count(d, d_ff, 8, gated=False)["block"]
    old = transformer_parameter_count(d, d_ff, 8, 1, 1)["encoder layer"]
    assert old - modern == 4 * d + d_ff + d + 2 * d  # attention biases, feed-forward biases, layer-norm shifts
