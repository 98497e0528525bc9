"""Tests of attnbook.transformer: layer norm, the feed-forward network, encoder and decoder layers.

The layers are checked against a composition of the package's own building blocks written out here,
and for the properties the Transformer chapter relies on: padding is invisible to real positions,
an encoder layer without positions is permutation-equivariant, and the decoder never looks ahead.
"""

import math
import re

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from hypothesis.extra.numpy import arrays

from attnbook import (
    DecoderLayerWeights,
    EncoderLayerWeights,
    FeedForwardWeights,
    MultiHeadWeights,
    causal_mask,
    decoder_layer,
    encoder_layer,
    feed_forward,
    init_decoder_layer,
    init_encoder_layer,
    init_feed_forward,
    init_multi_head_weights,
    layer_norm,
    multi_head_attention,
    padding_mask,
)

FINITE = st.floats(-5.0, 5.0, allow_nan=False, allow_infinity=False)
EPS = 1e-5  # layer_norm's default


def n_params(tree) -> int:
    """Number of numbers in a (nested) tuple of arrays, such as the weights of a layer."""
    if isinstance(tree, np.ndarray):
        return tree.size
    return sum(n_params(part) for part in tree)


def random_layer_norm_params(d, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(0.5, 2.0, d), rng.standard_normal(d)  # gamma (d,), beta (d,)


def randomise(weights, seed):
    """The same structure with every array redrawn: non-zero biases and non-trivial layer norms."""
    rng = np.random.default_rng(seed)

    def redraw(tree):
        if isinstance(tree, np.ndarray):
            return 0.3 * rng.standard_normal(tree.shape)
        return type(tree)(*(redraw(part) for part in tree)) if hasattr(tree, "_fields") else \
            tuple(redraw(part) for part in tree)

    return redraw(weights)


# --- layer_norm ----------------------------------------------------------------------------------------


def test_layer_norm_of_one_two_three_matches_the_docstring():
    np.testing.assert_allclose(layer_norm([[1.0, 2.0, 3.0]]), [[-math.sqrt(1.5), 0.0, math.sqrt(1.5)]],
                               rtol=1e-5)


@given(x=arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(2, 8)), elements=FINITE))
def test_layer_norm_rows_have_mean_zero_and_variance_var_over_var_plus_eps(x):
    out = layer_norm(x)
    variance = x.var(axis=-1)  # (n,)
    np.testing.assert_allclose(out.mean(axis=-1), 0.0, atol=1e-9)
    np.testing.assert_allclose(out.var(axis=-1), variance / (variance + EPS), atol=1e-9)


def test_layer_norm_rows_of_spread_data_have_unit_variance():
    x = np.random.default_rng(0).normal(3.0, 5.0, (6, 16))  # (n, d)
    out = layer_norm(x)
    np.testing.assert_allclose(out.mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(out.var(axis=-1), 1.0, atol=1e-6)


def test_layer_norm_normalises_over_the_last_axis_of_a_batch():
    x = np.random.default_rng(1).standard_normal((2, 3, 5))  # (batch, n, d)
    out = layer_norm(x)
    assert out.shape == (2, 3, 5)
    for b in range(2):
        np.testing.assert_allclose(out[b], layer_norm(x[b]))


def test_layer_norm_of_a_single_vector_is_allowed():
    np.testing.assert_allclose(layer_norm([1.0, 2.0, 3.0]), layer_norm([[1.0, 2.0, 3.0]])[0])


def test_gamma_scales_and_beta_shifts_the_normalised_rows():
    x = np.random.default_rng(2).standard_normal((4, 6))  # (n, d)
    gamma, beta = random_layer_norm_params(6, seed=3)
    np.testing.assert_allclose(layer_norm(x, gamma, beta), layer_norm(x) * gamma + beta)


def test_default_gamma_and_beta_are_one_and_zero():
    x = np.random.default_rng(4).standard_normal((3, 5))
    np.testing.assert_allclose(layer_norm(x), layer_norm(x, np.ones(5), np.zeros(5)))


def test_layer_norm_is_the_manual_formula():
    x = np.random.default_rng(5).standard_normal((3, 7))
    gamma, beta = random_layer_norm_params(7, seed=6)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)  # population variance, not n - 1
    np.testing.assert_allclose(layer_norm(x, gamma, beta, eps=1e-3), (x - mean) / np.sqrt(var + 1e-3) * gamma + beta)


@given(scale=st.floats(0.5, 20.0), shift=st.floats(-10.0, 10.0))
def test_layer_norm_ignores_a_positive_scale_and_a_shift_of_each_row(scale, shift):
    x = np.random.default_rng(7).standard_normal((3, 8))
    np.testing.assert_allclose(layer_norm(scale * x + shift, eps=1e-12), layer_norm(x, eps=1e-12), atol=1e-8)


def test_constant_row_becomes_beta_instead_of_nan():
    beta = np.array([0.5, -1.0, 2.0])
    out = layer_norm([[4.0, 4.0, 4.0]], beta=beta)
    np.testing.assert_allclose(out, [beta])


def test_two_dimensional_rows_collapse_to_plus_minus_one():
    out = layer_norm([[2.436, 0.564], [-3.0, 5.0]])
    np.testing.assert_allclose(np.abs(out), 1.0, atol=1e-4)
    np.testing.assert_array_equal(np.sign(out), [[1, -1], [-1, 1]])


def test_layer_norm_accepts_integers():
    np.testing.assert_allclose(layer_norm([[1, 2, 3]]), layer_norm([[1.0, 2.0, 3.0]]))


@pytest.mark.parametrize("name", ["gamma", "beta"])
def test_layer_norm_parameter_of_the_wrong_shape_is_refused(name):
    with pytest.raises(ValueError, match=rf"^{name} has shape \(4,\) but x has shape \(2, 3\); expected \(3,\)$"):
        layer_norm(np.ones((2, 3)), **{name: np.ones(4)})


@pytest.mark.parametrize("eps", [0.0, -1e-5, "small", None])
def test_layer_norm_eps_must_be_a_positive_number(eps):
    with pytest.raises(ValueError, match=rf"^eps must be a positive number, got {eps!r}$"):
        layer_norm(np.ones((2, 3)), eps=eps)


def test_layer_norm_refuses_a_scalar():
    with pytest.raises(ValueError, match=r"^x has shape \(\) but needs at least 1 dimensions, laid out as \(\.\.\., d\)$"):
        layer_norm(3.0)


def test_layer_norm_refuses_nan():
    with pytest.raises(ValueError, match=r"^x contains NaN at index \(0, 1\)"):
        layer_norm([[1.0, float("nan")]])


def test_layer_norm_refuses_nan_in_gamma():
    with pytest.raises(ValueError, match=r"^gamma contains NaN at index \(0,\)"):
        layer_norm([[1.0, 2.0]], gamma=[float("nan"), 1.0])


def test_float16_rows_with_a_spread_above_256_are_normalised_not_zeroed():
    # the variance of the first row, 666667, overflows float16 (largest 65504)
    x = np.array([[-1000.0, 0.0, 1000.0], [-300.0, 300.0, 0.0]], dtype=np.float16)
    out = layer_norm(x)
    np.testing.assert_allclose(out, layer_norm(x.astype(np.float64)), rtol=1e-3)
    gamma, beta = np.full(3, 2.0, dtype=np.float16), np.full(3, 0.5, dtype=np.float16)
    out16 = layer_norm(x, gamma, beta)
    assert out16.dtype == np.float16  # computed in float32, returned in the type of x, gamma and beta
    np.testing.assert_allclose(out16, 2 * layer_norm(x.astype(np.float64)) + 0.5, rtol=2e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float32_and_float64_rows_are_normalised_in_their_own_type(dtype):
    rng = np.random.default_rng(8)
    x = (300 * rng.standard_normal((4, 9))).astype(dtype)
    gamma, beta = (p.astype(dtype) for p in random_layer_norm_params(9, seed=9))
    mean, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
    out = layer_norm(x, gamma, beta)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, (x - mean) / np.sqrt(var + EPS) * gamma + beta)


# --- feed_forward ----------------------------------------------------------------------------------------


def test_init_feed_forward_shapes_zero_biases_and_glorot_bound():
    ff = init_feed_forward(6, 10, seed=0)
    assert isinstance(ff, FeedForwardWeights)
    assert ff.w_1.shape == (6, 10) and ff.b_1.shape == (10,)
    assert ff.w_2.shape == (10, 6) and ff.b_2.shape == (6,)
    assert not ff.b_1.any() and not ff.b_2.any()
    limit = math.sqrt(6.0 / 16)
    assert np.abs(ff.w_1).max() <= limit and np.abs(ff.w_2).max() <= limit


def test_init_feed_forward_is_seeded():
    a, b, c = init_feed_forward(4, 8, seed=1), init_feed_forward(4, 8, seed=1), init_feed_forward(4, 8, seed=2)
    np.testing.assert_array_equal(a.w_1, b.w_1)
    assert not np.allclose(a.w_1, c.w_1)


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"d_model": 0, "d_ff": 4}, ValueError, r"^d_model must be at least 1, got 0$"),
    ({"d_model": 4, "d_ff": 2.0}, TypeError, r"^d_ff must be an integer, got 2\.0$"),
])
def test_init_feed_forward_refuses_bad_sizes(kwargs, error, message):
    with pytest.raises(error, match=message):
        init_feed_forward(**kwargs)


def test_feed_forward_equals_the_manual_formula():
    ff = randomise(init_feed_forward(5, 12, seed=0), seed=1)
    x = np.random.default_rng(2).standard_normal((4, 5))  # (n, d_model)
    manual = np.maximum(x @ ff.w_1 + ff.b_1, 0.0) @ ff.w_2 + ff.b_2
    np.testing.assert_allclose(feed_forward(x, ff), manual)


def test_feed_forward_treats_each_position_separately():
    ff = randomise(init_feed_forward(5, 12, seed=3), seed=4)
    x = np.random.default_rng(5).standard_normal((2, 4, 5))  # (batch, n, d_model)
    out = feed_forward(x, ff)
    assert out.shape == (2, 4, 5)
    for b in range(2):
        for i in range(4):
            np.testing.assert_allclose(out[b, i], feed_forward(x[b, i:i + 1], ff)[0])


def test_feed_forward_relu_zeroes_negative_hidden_units():
    ff = FeedForwardWeights(-np.eye(2), np.zeros(2), np.eye(2), np.zeros(2))
    np.testing.assert_allclose(feed_forward([[1.0, -2.0]], ff), [[0.0, 2.0]])


def test_feed_forward_width_mismatch_is_refused():
    with pytest.raises(ValueError, match=r"^x has shape \(3, 5\) but weights\.w_1 has shape \(4, 8\); "
                                         r"x needs d_model = 4 columns$"):
        feed_forward(np.ones((3, 5)), init_feed_forward(4, 8))


def test_feed_forward_refuses_other_weights():
    with pytest.raises(TypeError, match=r"^weights must be FeedForwardWeights, got tuple$"):
        feed_forward(np.ones((2, 4)), tuple(init_feed_forward(4, 8)))


# --- initialisation of whole layers ------------------------------------------------------------------------


def test_init_encoder_layer_structure_and_sizes():
    layer = init_encoder_layer(8, 32, seed=0)
    assert isinstance(layer, EncoderLayerWeights)
    assert isinstance(layer.self_attention, MultiHeadWeights)
    assert isinstance(layer.feed_forward, FeedForwardWeights)
    for gamma, beta in (layer.norm_1, layer.norm_2):
        np.testing.assert_array_equal(gamma, np.ones(8))
        np.testing.assert_array_equal(beta, np.zeros(8))
    assert n_params(layer) == 4 * 8 * 8 + 4 * 8 + 2 * 8 * 32 + 32 + 8 + 2 * 2 * 8


def test_init_decoder_layer_structure_and_sizes():
    layer = init_decoder_layer(8, 32, seed=0)
    assert isinstance(layer, DecoderLayerWeights)
    assert len(layer) == 6
    assert n_params(layer) == 2 * (4 * 8 * 8 + 4 * 8) + 2 * 8 * 32 + 32 + 8 + 3 * 2 * 8


def test_decoder_self_and_cross_attention_get_different_weights():
    layer = init_decoder_layer(8, 16, seed=0)
    assert not np.allclose(layer.self_attention.w_q, layer.cross_attention.w_q)


def test_layer_initialisation_is_seeded():
    a, b = init_encoder_layer(8, 16, seed=4), init_encoder_layer(8, 16, seed=4)
    np.testing.assert_array_equal(a.self_attention.w_v, b.self_attention.w_v)
    np.testing.assert_array_equal(a.feed_forward.w_2, b.feed_forward.w_2)
    c = init_decoder_layer(8, 16, seed=5)
    assert not np.allclose(a.self_attention.w_v, c.self_attention.w_v)


# --- encoder_layer ---------------------------------------------------------------------------------------


def manual_encoder_layer(x, w, n_heads, mask=None):
    """Post-norm: LayerNorm(x + MHA(x)), then LayerNorm(z + FFN(z)), from the package's parts."""
    attended, attention = multi_head_attention(x, x, x, w.self_attention, n_heads, mask=mask)
    z = layer_norm(x + attended, *w.norm_1)
    return layer_norm(z + feed_forward(z, w.feed_forward), *w.norm_2), attention


def test_encoder_layer_shapes_for_one_sentence_and_a_batch():
    layer = init_encoder_layer(8, 16, seed=0)
    out, attention = encoder_layer(np.ones((5, 8)), layer, n_heads=2)
    assert out.shape == (5, 8) and attention.shape == (2, 5, 5)
    out, attention = encoder_layer(np.zeros((3, 5, 8)), layer, n_heads=4)
    assert out.shape == (3, 5, 8) and attention.shape == (3, 4, 5, 5)


def test_encoder_layer_equals_its_composition_from_package_parts():
    layer = randomise(init_encoder_layer(8, 16, seed=0), seed=1)
    x = np.random.default_rng(2).standard_normal((6, 8))
    out, attention = encoder_layer(x, layer, n_heads=2)
    expected_out, expected_attention = manual_encoder_layer(x, layer, 2)
    np.testing.assert_allclose(out, expected_out)
    np.testing.assert_allclose(attention, expected_attention)


def test_encoder_layer_output_rows_are_normalised_and_attention_rows_sum_to_one():
    layer = init_encoder_layer(16, 32, seed=3)
    x = np.random.default_rng(4).standard_normal((2, 6, 16))
    out, attention = encoder_layer(x, layer, n_heads=4)
    np.testing.assert_allclose(out.mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(out.var(axis=-1), 1.0, atol=1e-3)
    np.testing.assert_allclose(attention.sum(axis=-1), 1.0)


@given(seed=st.integers(0, 2**16), length=st.integers(1, 6))
def test_padded_positions_never_influence_real_positions_in_an_encoder_layer(seed, length):
    rng = np.random.default_rng(seed)
    layer = randomise(init_encoder_layer(8, 16, seed=0), seed=seed)
    x = rng.standard_normal((2, 6, 8))  # (batch, n, d_model): sequence 1 is padded after `length`
    mask = padding_mask([6, length], 6)  # (batch, 1, n)
    out, attention = encoder_layer(x, layer, n_heads=2, mask=mask)
    x_other = x.copy()
    x_other[1, length:] = 50.0 * rng.standard_normal((6 - length, 8))  # different padding content
    out_other, _ = encoder_layer(x_other, layer, n_heads=2, mask=mask)
    np.testing.assert_allclose(out_other[1, :length], out[1, :length], atol=1e-10)
    np.testing.assert_allclose(out_other[0], out[0])
    assert np.all(attention[1, :, :, length:] == 0)


def test_real_positions_of_a_padded_sentence_match_the_unpadded_sentence():
    layer = randomise(init_encoder_layer(8, 16, seed=0), seed=9)
    sentence = np.random.default_rng(10).standard_normal((4, 8))  # (n, d_model)
    padded = np.vstack([sentence, np.full((3, 8), 7.0)])[None]  # (1, 7, d_model)
    alone, _ = encoder_layer(sentence, layer, n_heads=2)
    batched, _ = encoder_layer(padded, layer, n_heads=2, mask=padding_mask([4], 7))
    np.testing.assert_allclose(batched[0, :4], alone, atol=1e-12)


@given(seed=st.integers(0, 2**16))
def test_encoder_layer_without_positions_is_permutation_equivariant(seed):
    rng = np.random.default_rng(seed)
    layer = randomise(init_encoder_layer(8, 16, seed=1), seed=seed)
    x = rng.standard_normal((6, 8))  # (n, d_model)
    perm = rng.permutation(6)  # (n,)
    out, attention = encoder_layer(x, layer, n_heads=2)
    out_perm, attention_perm = encoder_layer(x[perm], layer, n_heads=2)
    np.testing.assert_allclose(out_perm, out[perm], atol=1e-10)
    np.testing.assert_allclose(attention_perm, attention[:, perm][:, :, perm], atol=1e-12)


def test_encoder_layer_with_a_causal_mask_is_causal():
    layer = randomise(init_encoder_layer(8, 16, seed=0), seed=11)
    x = np.random.default_rng(12).standard_normal((5, 8))
    out, _ = encoder_layer(x, layer, n_heads=2, mask=causal_mask(5))
    x[3:] += 10.0
    changed, _ = encoder_layer(x, layer, n_heads=2, mask=causal_mask(5))
    np.testing.assert_allclose(changed[:3], out[:3], atol=1e-12)
    assert not np.allclose(changed[3:], out[3:])


def test_encoder_layer_refuses_decoder_weights():
    with pytest.raises(TypeError, match=r"^weights must be EncoderLayerWeights, got DecoderLayerWeights$"):
        encoder_layer(np.ones((3, 8)), init_decoder_layer(8, 16), n_heads=2)


def test_encoder_layer_refuses_heads_that_do_not_divide_the_width():
    with pytest.raises(ValueError, match=r"^d_model = 8 is not divisible by n_heads = 3"):
        encoder_layer(np.ones((3, 8)), init_encoder_layer(8, 16), n_heads=3)


def test_encoder_layer_refuses_input_of_the_wrong_width_naming_the_weight_by_its_place():
    with pytest.raises(ValueError, match=r"^weights\.self_attention\.w_q has shape \(8, 8\) but x has "
                                         r"d_model = 6; expected \(6, 6\)$"):
        encoder_layer(np.ones((3, 6)), init_encoder_layer(8, 16), n_heads=2)


def test_encoder_layer_refuses_nan_input():
    x = np.ones((3, 8))
    x[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"^x contains NaN at index \(1, 2\)"):
        encoder_layer(x, init_encoder_layer(8, 16), n_heads=2)


# --- decoder_layer ---------------------------------------------------------------------------------------


def manual_decoder_layer(y, memory, w, n_heads, memory_mask=None):
    """Masked self-attention, cross-attention, feed-forward; each wrapped as LayerNorm(x + sublayer(x))."""
    attended, self_w = multi_head_attention(y, y, y, w.self_attention, n_heads, mask=causal_mask(y.shape[-2]))
    y = layer_norm(y + attended, *w.norm_1)
    crossed, cross_w = multi_head_attention(y, memory, memory, w.cross_attention, n_heads, mask=memory_mask)
    y = layer_norm(y + crossed, *w.norm_2)
    return layer_norm(y + feed_forward(y, w.feed_forward), *w.norm_3), self_w, cross_w


def test_cross_attention_shapes_with_different_source_and_target_lengths():
    n_s, n_t, d_model, h = 7, 4, 8, 2
    layer = init_decoder_layer(d_model, 16, seed=0)
    rng = np.random.default_rng(0)
    out, self_w, cross_w = decoder_layer(rng.standard_normal((n_t, d_model)),
                                         rng.standard_normal((n_s, d_model)), layer, n_heads=h)
    assert out.shape == (4, 8)
    assert self_w.shape == (2, 4, 4)
    assert cross_w.shape == (2, 4, 7)
    np.testing.assert_allclose(cross_w.sum(axis=-1), 1.0)


def test_decoder_layer_batched_shapes():
    layer = init_decoder_layer(8, 16, seed=0)
    out, self_w, cross_w = decoder_layer(np.ones((3, 4, 8)), np.ones((3, 9, 8)), layer, n_heads=4)
    assert out.shape == (3, 4, 8) and self_w.shape == (3, 4, 4, 4) and cross_w.shape == (3, 4, 4, 9)


def test_decoder_layer_equals_its_composition_from_package_parts():
    layer = randomise(init_decoder_layer(8, 16, seed=0), seed=1)
    rng = np.random.default_rng(2)
    y, memory = rng.standard_normal((5, 8)), rng.standard_normal((3, 8))
    for got, expected in zip(decoder_layer(y, memory, layer, n_heads=2),
                             manual_decoder_layer(y, memory, layer, 2)):
        np.testing.assert_allclose(got, expected)


def test_decoder_self_attention_weights_are_lower_triangular():
    layer = init_decoder_layer(8, 16, seed=3)
    rng = np.random.default_rng(4)
    _, self_w, _ = decoder_layer(rng.standard_normal((6, 8)), rng.standard_normal((2, 8)), layer, n_heads=2)
    assert np.all(np.triu(self_w, k=1) == 0)
    np.testing.assert_allclose(self_w.sum(axis=-1), 1.0)
    np.testing.assert_array_equal(self_w[:, 0, 0], 1.0)


@given(seed=st.integers(0, 2**16), t=st.integers(0, 4))
def test_changing_targets_after_t_never_changes_decoder_outputs_up_to_t(seed, t):
    rng = np.random.default_rng(seed)
    layer = randomise(init_decoder_layer(8, 16, seed=0), seed=seed)
    y, memory = rng.standard_normal((5, 8)), rng.standard_normal((7, 8))
    out, _, cross_w = decoder_layer(y, memory, layer, n_heads=2)
    y_other = y.copy()
    y_other[t + 1:] = 20.0 * rng.standard_normal((4 - t, 8))
    out_other, _, cross_other = decoder_layer(y_other, memory, layer, n_heads=2)
    np.testing.assert_allclose(out_other[:t + 1], out[:t + 1], atol=1e-10)
    np.testing.assert_allclose(cross_other[:, :t + 1], cross_w[:, :t + 1], atol=1e-12)


def test_a_stack_of_decoder_layers_stays_causal():
    rng = np.random.default_rng(5)
    layers = [randomise(init_decoder_layer(8, 16, seed=s), seed=10 + s) for s in range(3)]
    y, memory = rng.standard_normal((6, 8)), rng.standard_normal((4, 8))

    def stack(targets):
        for layer in layers:
            targets, _, _ = decoder_layer(targets, memory, layer, n_heads=2)
        return targets

    out = stack(y)
    for t in range(5):
        y_other = y.copy()
        y_other[t + 1:] = rng.standard_normal((5 - t, 8))
        out_other = stack(y_other)
        np.testing.assert_allclose(out_other[:t + 1], out[:t + 1], atol=1e-10)
        assert not np.allclose(out_other[t + 1:], out[t + 1:])


def test_every_target_position_sees_the_whole_source():
    rng = np.random.default_rng(6)
    layer = randomise(init_decoder_layer(8, 16, seed=0), seed=7)
    y, memory = rng.standard_normal((4, 8)), rng.standard_normal((7, 8))
    out, _, cross_w = decoder_layer(y, memory, layer, n_heads=2)
    assert np.all(cross_w > 0)  # no mask on the cross-attention: every target sees every source position
    memory_other = memory.copy()
    memory_other[-1] += 5.0  # change the last source position only
    out_other, _, _ = decoder_layer(y, memory_other, layer, n_heads=2)
    assert np.all(np.abs(out_other - out).max(axis=-1) > 1e-6)  # every target position moves, also t = 0


@given(seed=st.integers(0, 2**16), length=st.integers(1, 6))
def test_padded_source_positions_never_influence_the_decoder(seed, length):
    rng = np.random.default_rng(seed)
    layer = randomise(init_decoder_layer(8, 16, seed=0), seed=seed)
    y, memory = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 6, 8))
    mask = padding_mask([6, length], 6)  # (batch, 1, n_s)
    out, _, cross_w = decoder_layer(y, memory, layer, n_heads=2, memory_mask=mask)
    memory_other = memory.copy()
    memory_other[1, length:] = 30.0 * rng.standard_normal((6 - length, 8))
    out_other, _, _ = decoder_layer(y, memory_other, layer, n_heads=2, memory_mask=mask)
    np.testing.assert_allclose(out_other, out, atol=1e-10)
    assert np.all(cross_w[1, ..., length:] == 0)


def test_decoder_layer_refuses_encoder_weights():
    with pytest.raises(TypeError, match=r"^weights must be DecoderLayerWeights, got EncoderLayerWeights$"):
        decoder_layer(np.ones((3, 8)), np.ones((4, 8)), init_encoder_layer(8, 16), n_heads=2)


def test_decoder_layer_refuses_a_single_target_vector():
    with pytest.raises(ValueError, match=r"^y has shape \(8,\) but needs at least 2 dimensions, "
                                         r"laid out as \(\.\.\., n_t, d_model\)$"):
        decoder_layer(np.ones(8), np.ones((4, 8)), init_decoder_layer(8, 16), n_heads=2)


def test_decoder_layer_refuses_memory_of_another_width_naming_y_and_memory():
    with pytest.raises(ValueError, match=r"^y has shape \(3, 8\) but memory has shape \(4, 6\); "
                                         r"both need the model width d_model in the last dimension$"):
        decoder_layer(np.ones((3, 8)), np.ones((4, 6)), init_decoder_layer(8, 16), n_heads=2)


def test_decoder_layer_refuses_nan_memory():
    memory = np.ones((4, 8))
    memory[2, 0] = np.nan
    with pytest.raises(ValueError, match=r"^memory contains NaN at index \(2, 0\)"):
        decoder_layer(np.ones((3, 8)), memory, init_decoder_layer(8, 16), n_heads=2)


def test_layers_return_named_results():
    from attnbook.transformer import DecoderLayerResult, EncoderLayerResult

    x = np.random.default_rng(0).standard_normal((3, 8))  # (n, d_model)
    encoded = encoder_layer(x, init_encoder_layer(8, 16, seed=0), n_heads=2)
    assert isinstance(encoded, EncoderLayerResult) and encoded.weights.shape == (2, 3, 3)
    decoded = decoder_layer(x[:2], encoded.output, init_decoder_layer(8, 16, seed=1), n_heads=2)
    assert isinstance(decoded, DecoderLayerResult)
    assert decoded.self_weights.shape == (2, 2, 2) and decoded.cross_weights.shape == (2, 2, 3)


def test_encoder_layer_refuses_a_single_vector_naming_x():
    with pytest.raises(ValueError, match=r"x has shape \(8,\) but needs at least 2 dimensions"):
        encoder_layer(np.ones(8), init_encoder_layer(8, 16, seed=0), n_heads=2)


def test_layer_norm_refuses_a_boolean_eps():
    with pytest.raises(ValueError, match="eps must be a positive number, got True"):
        layer_norm(np.ones((2, 4)), eps=True)


# --- the weights of a layer are checked at the boundary, named by their place in weights ------------


def _encoder_weights_with(path, value):
    """init_encoder_layer(8, 16) with the array at ``path`` (e.g. "norm_1[0]", "feed_forward.w_1") replaced."""
    layer = init_encoder_layer(8, 16, seed=0)
    field, _, rest = path.partition(".")
    if field.startswith("norm_"):
        field, index = field[:-3], int(field[-2])
        pair = list(getattr(layer, field))
        pair[index] = value
        return layer._replace(**{field: tuple(pair)})
    return layer._replace(**{field: getattr(layer, field)._replace(**{rest: value})})


@pytest.mark.parametrize("path, value, message", [
    ("norm_1[0]", np.array([np.nan] + [1.0] * 7), r"^weights\.norm_1\[0\] contains NaN at index \(0,\)"),
    ("norm_2[1]", np.zeros(7), r"^weights\.norm_2\[1\] has shape \(7,\) but x has d_model = 8; expected \(8,\)$"),
    ("feed_forward.w_1", np.ones((7, 16)),
     r"^weights\.feed_forward\.w_1 has shape \(7, 16\) but x has d_model = 8; expected \(8, d_ff\)$"),
    ("feed_forward.b_2", np.ones(16),
     r"^weights\.feed_forward\.b_2 has shape \(16,\) but x has d_model = 8; expected \(8,\)$"),
    ("self_attention.b_k", np.full(8, np.nan), r"^weights\.self_attention\.b_k contains NaN at index \(0,\)"),
])
def test_encoder_layer_names_a_bad_weight_by_its_place_in_weights(path, value, message):
    x = np.random.default_rng(0).standard_normal((3, 8))
    with pytest.raises(ValueError, match=message):
        encoder_layer(x, _encoder_weights_with(path, value), n_heads=2)


def test_a_layer_norm_that_is_not_a_gamma_beta_pair_is_refused_instead_of_completed_with_zeros():
    layer = init_encoder_layer(8, 16, seed=0)._replace(norm_1=(np.ones(8),))
    with pytest.raises(TypeError, match=r"^weights\.norm_1 must be a pair \(gamma, beta\), got a tuple of 1$"):
        encoder_layer(np.ones((3, 8)), layer, n_heads=2)


def test_decoder_layer_names_a_bad_cross_attention_weight_by_its_place_in_weights():
    layer = init_decoder_layer(8, 16, seed=0)
    layer = layer._replace(cross_attention=layer.cross_attention._replace(w_q=np.ones((8, 7))))
    with pytest.raises(ValueError, match=r"^weights\.cross_attention\.w_q has shape \(8, 7\) but y has "
                                         r"d_model = 8; expected \(8, 8\)$"):
        decoder_layer(np.ones((3, 8)), np.ones((4, 8)), layer, n_heads=2)


def test_a_sub_layer_of_the_wrong_kind_is_refused_naming_it():
    layer = init_encoder_layer(8, 16, seed=0)
    layer = layer._replace(feed_forward=layer.self_attention)
    with pytest.raises(TypeError, match=r"^weights\.feed_forward must be FeedForwardWeights, got MultiHeadWeights$"):
        encoder_layer(np.ones((3, 8)), layer, n_heads=2)


# --- BERT's feed-forward network: GELU, and the layer norms' eps ----------------------------------------------


def test_gelu_is_x_times_the_normal_cdf_within_the_erf_approximations_bound():
    from attnbook import gelu

    x = np.linspace(-10, 10, 4001)
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x])
    assert np.max(np.abs(gelu(x) - exact) / np.maximum(np.abs(x), 1)) < 1.5e-7
    assert gelu(np.float32([-20.0, 20.0])).tolist() == [0.0, 20.0]  # no subnormal tail: 1 + erf is 0 in float32
    assert gelu(np.ones(3, dtype=np.float32)).dtype == np.float32


def test_the_feed_forward_network_takes_gelu_in_place_of_relu():
    from attnbook import gelu

    x, ff = np.random.default_rng(0).standard_normal((3, 4)), init_feed_forward(4, 8, seed=1)
    hidden = x @ ff.w_1 + ff.b_1  # (3, 8)
    np.testing.assert_allclose(feed_forward(x, ff, activation="gelu"), gelu(hidden) @ ff.w_2 + ff.b_2)
    np.testing.assert_array_equal(feed_forward(x, ff), feed_forward(x, ff, activation="relu"))


def test_an_encoder_layer_with_gelu_and_eps_is_its_pieces_with_them():
    x, w = np.random.default_rng(0).standard_normal((2, 3, 8)), init_encoder_layer(8, 16, seed=2)
    out, weights = encoder_layer(x, w, 2, None, "gelu", 1e-12)
    attended, expected_weights = multi_head_attention(x, x, x, w.self_attention, 2)
    middle = layer_norm(x + attended, *w.norm_1, eps=1e-12)
    expected = layer_norm(middle + feed_forward(middle, w.feed_forward, "gelu"), *w.norm_2, eps=1e-12)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    assert not np.allclose(out, encoder_layer(x, w, 2).output)  # ReLU differs


@pytest.mark.parametrize("call, message", [
    (lambda: feed_forward(np.ones((2, 4)), init_feed_forward(4, 8), activation="tanh"),
     "activation must be one of 'relu', 'gelu', got 'tanh'"),
    (lambda: encoder_layer(np.ones((2, 4)), init_encoder_layer(4, 8), 2, activation="GELU"),
     "activation must be one of 'relu', 'gelu', got 'GELU'"),
    (lambda: encoder_layer(np.ones((2, 4)), init_encoder_layer(4, 8), 2, eps=-1.0), "eps must be a positive number"),
])
def test_a_bad_activation_or_eps_is_named(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()
