"""Tests of attnbook.efficient.tiled: tiled attention equals the package's attention, never holds n x n, skips empty tiles."""

import re
import tracemalloc
import warnings

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from hypothesis.extra.numpy import arrays

from attnbook import causal_mask, padding_mask, scaled_dot_product_attention
from attnbook.efficient.tiled import FULL, PARTIAL, SKIPPED, tile_plan, tiled_attention

TOLERANCE = {np.float32: {"rtol": 2e-5, "atol": 2e-5}, np.float64: {"rtol": 1e-11, "atol": 1e-12}}


@st.composite
def attention_inputs(draw, dtype=np.float64):
    """q, k, v with batch and head dimensions, a mask of one of several kinds, and block sizes."""
    batch, heads = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    n_q, n_k = draw(st.integers(1, 13)), draw(st.integers(1, 13))
    d_k, d_v = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    width = 32 if dtype == np.float32 else 64
    elements = st.floats(-4, 4, width=width)
    q = draw(arrays(dtype, (batch, heads, n_q, d_k), elements=elements))
    k = draw(arrays(dtype, (batch, heads, n_k, d_k), elements=elements))
    v = draw(arrays(dtype, (batch, heads, n_k, d_v), elements=elements))
    kind = draw(st.sampled_from(["none", "random", "padding", "causal", "causal+padding", "empty row"]))
    if kind.startswith("causal") and n_k < n_q:
        kind = "random"
    mask, causal = None, kind.startswith("causal")
    if kind in ("random", "empty row"):
        mask = draw(arrays(np.bool_, (batch, 1, n_q, n_k)))  # the same mask for every head
        if kind == "empty row":
            mask[:, :, draw(st.integers(0, n_q - 1))] = False
    if kind.endswith("padding"):
        lengths = draw(st.lists(st.integers(1, n_k), min_size=batch, max_size=batch))
        mask = padding_mask(lengths, n_k)[:, None]  # (batch, 1, 1, n_k)
    block_q, block_k = draw(st.integers(1, 15)), draw(st.integers(1, 15))
    return q, k, v, mask, causal, block_q, block_k


def reference(q, k, v, mask, causal, scale=None):
    if causal:
        future = causal_mask(q.shape[-2], k.shape[-2])  # (n_q, n_k)
        mask = future if mask is None else mask & future
    return scaled_dot_product_attention(q, k, v, mask=mask, scale=scale).output


# --- equality with the package's attention (the property the chapter relies on) -------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@given(data=st.data())
def test_tiled_attention_equals_scaled_dot_product_attention(dtype, data):
    q, k, v, mask, causal, block_q, block_k = data.draw(attention_inputs(dtype))
    with warnings.catch_warnings(), np.errstate(divide="warn", over="warn", invalid="warn"):
        warnings.simplefilter("error")
        out = tiled_attention(q, k, v, mask=mask, causal=causal, block_q=block_q, block_k=block_k)
    expected = reference(q, k, v, mask, causal)
    assert out.dtype == expected.dtype == dtype and out.shape == expected.shape
    np.testing.assert_allclose(out, expected, **TOLERANCE[dtype])


@given(data=st.data())
def test_queries_with_no_allowed_key_get_a_zero_output(data):
    q, k, v, mask, causal, block_q, block_k = data.draw(attention_inputs())
    full_shape = q.shape[:-1] + (k.shape[-2],)  # (batch, heads, n_q, n_k)
    mask = np.ones(full_shape, dtype=bool) if mask is None else np.broadcast_to(mask, full_shape).copy()
    row = data.draw(st.integers(0, q.shape[-2] - 1))
    mask[..., row, :] = False
    out = tiled_attention(q, k, v, mask=mask, block_q=block_q, block_k=block_k)
    assert np.all(out[..., row, :] == 0)


@given(data=st.data(), scale=st.floats(0.05, 3.0))
def test_an_explicit_scale_is_used(data, scale):
    q, k, v, mask, causal, block_q, block_k = data.draw(attention_inputs())
    out = tiled_attention(q, k, v, mask=mask, scale=scale, causal=causal, block_q=block_q, block_k=block_k)
    np.testing.assert_allclose(out, reference(q, k, v, mask, causal, scale), **TOLERANCE[np.float64])


@given(n_q=st.integers(1, 9), extra=st.integers(0, 9), block_q=st.integers(1, 6), block_k=st.integers(1, 6))
def test_causal_with_more_keys_than_queries_aligns_queries_with_the_last_keys(n_q, extra, block_q, block_k):
    rng = np.random.default_rng(n_q * 100 + extra)
    q = rng.standard_normal((n_q, 3))  # (n_q, d_k)
    k, v = rng.standard_normal((2, n_q + extra, 3))  # each (n_k, d)
    out = tiled_attention(q, k, v, causal=True, block_q=block_q, block_k=block_k)
    expected = scaled_dot_product_attention(q, k, v, mask=causal_mask(n_q, n_q + extra)).output
    np.testing.assert_allclose(out, expected, **TOLERANCE[np.float64])


def test_unbatched_queries_broadcast_against_batched_keys_and_mask():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((4, 3))  # (n_q, d_k)
    k, v = rng.standard_normal((2, 2, 6, 3))  # each (batch, n_k, d)
    mask = padding_mask([6, 2], 6)  # (batch, 1, n_k)
    out = tiled_attention(q, k, v, mask=mask, block_q=3, block_k=4)
    assert out.shape == (2, 4, 3)
    np.testing.assert_allclose(out, scaled_dot_product_attention(q, k, v, mask=mask).output, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scores_of_ten_thousand_stay_finite(dtype):
    q = np.array([[100.0], [-100.0]], dtype=dtype)  # (2, 1)
    k = np.array([[100.0], [-100.0], [0.0]], dtype=dtype)  # (3, 1)
    v = np.array([[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]], dtype=dtype)  # (3, 2)
    out = tiled_attention(q, k, v, block_q=1, block_k=1)
    assert out.dtype == dtype and out.tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_mixed_precision_follows_the_package():
    q = np.ones((2, 3), np.float32)  # (n_q, d_k)
    k, v = np.ones((4, 3)), np.ones((4, 2), np.float32)  # float64 keys, float32 values
    out = tiled_attention(q, k, v)
    assert out.dtype == scaled_dot_product_attention(q, k, v).output.dtype == np.float64
    assert tiled_attention(q, q, v[:2]).dtype == np.float32
    half = np.ones((2, 3), np.float16)  # (n, d): float16 is promoted, as in the package
    assert tiled_attention(half, half, half).dtype == scaled_dot_product_attention(half, half, half).output.dtype
    assert tiled_attention(half, half, half).dtype == np.float32


def test_no_keys_gives_zeros_and_no_queries_gives_an_empty_output():
    assert tiled_attention(np.ones((3, 2)), np.ones((0, 2)), np.ones((0, 4))).tolist() == [[0.0] * 4] * 3
    assert tiled_attention(np.ones((0, 2)), np.ones((5, 2)), np.ones((5, 4))).shape == (0, 4)


def test_inputs_are_not_modified():
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((3, 5, 2))  # each (n, d)
    copies = [a.copy() for a in (q, k, v)]
    tiled_attention(q, k, v, block_q=2, block_k=2, scale=1.0)
    for before, after in zip(copies, (q, k, v)):
        np.testing.assert_array_equal(before, after)


# --- memory: the point of tiling --------------------------------------------------------------------


def test_peak_memory_stays_far_below_the_weight_matrix():
    n, d = 2048, 16
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((3, n, d))  # each (n, d), float64
    weight_bytes = n * n * 8  # 32 MiB for the weights alone
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        tiled_attention(q, k, v, block_q=64, block_k=256, causal=True)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert peak < weight_bytes / 16, (peak, weight_bytes)


# --- the tile plan ---------------------------------------------------------------------------------


def test_causal_plan_skips_every_tile_above_the_diagonal():
    plan = tile_plan(8, 8, 3, 3, causal=True)
    assert plan.tolist() == [[PARTIAL, SKIPPED, SKIPPED], [FULL, PARTIAL, SKIPPED], [FULL, FULL, PARTIAL]]


@given(n_q=st.integers(1, 20), n_k=st.integers(1, 20), block_q=st.integers(1, 8), block_k=st.integers(1, 8),
       causal=st.booleans(), seed=st.integers(0, 10))
def test_plan_codes_describe_the_combined_mask_of_each_tile(n_q, n_k, block_q, block_k, causal, seed):
    if causal and n_k < n_q:
        n_k = n_q
    mask = np.random.default_rng(seed).random((2, n_q, n_k)) < 0.3  # (batch, n_q, n_k)
    plan = tile_plan(n_q, n_k, block_q, block_k, causal=causal, mask=mask)
    future = causal_mask(n_q, n_k) if causal else np.ones((n_q, n_k), dtype=bool)  # (n_q, n_k)
    anywhere = mask.any(axis=0) & future  # (n_q, n_k): allowed in some sequence of the batch
    everywhere = mask.all(axis=0) & future  # (n_q, n_k): allowed in every sequence
    assert plan.shape == (-(-n_q // block_q), -(-n_k // block_k))
    for a in range(plan.shape[0]):
        for b in range(plan.shape[1]):
            rows, cols = slice(a * block_q, (a + 1) * block_q), slice(b * block_k, (b + 1) * block_k)
            expected = (SKIPPED if not anywhere[rows, cols].any()
                        else FULL if everywhere[rows, cols].all() else PARTIAL)
            assert plan[a, b] == expected


def test_skipped_tiles_are_never_computed(monkeypatch):
    import attnbook.efficient.tiled as tiled

    calls = []
    real_update = tiled.fold

    def counting_update(state, scores, values, allowed):
        calls.append(scores.shape)
        return real_update(state, scores, values, allowed)

    monkeypatch.setattr(tiled, "fold", counting_update)
    q = np.ones((6, 2))  # (n, d)
    tiled_attention(q, q, q, causal=True, block_q=2, block_k=2)
    plan = tile_plan(6, 6, 2, 2, causal=True)
    assert len(calls) == int((plan != SKIPPED).sum()) == 6  # 3 diagonal + 3 below, of 9 tiles


def test_a_padding_mask_skips_the_key_blocks_of_padding_only():
    mask = padding_mask([3, 5], 8)  # (batch, 1, n_k)
    plan = tile_plan(4, 8, 4, 2, mask=mask)  # the pair counts if allowed in any sequence
    assert plan.tolist() == [[FULL, PARTIAL, PARTIAL, SKIPPED]]


# --- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["block_q", "block_k"])
def test_block_sizes_must_be_positive_integers(name):
    args = (np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2)))
    with pytest.raises(ValueError, match=f"^{name} must be at least 1, got 0$"):
        tiled_attention(*args, **{name: 0})
    with pytest.raises(TypeError, match=f"^{name} must be an integer, got 2.5$"):
        tiled_attention(*args, **{name: 2.5})


def test_causal_must_be_a_boolean():
    with pytest.raises(TypeError, match="^causal must be True or False, got 'yes'$"):
        tiled_attention(np.ones((3, 4)), np.ones((3, 4)), np.ones((3, 2)), causal="yes")


def test_causal_needs_at_least_as_many_keys_as_queries():
    with pytest.raises(ValueError, match=re.escape(
            "n_k=2 is smaller than n_q=3; a causal mask needs at least as many keys as queries")):
        tiled_attention(np.ones((3, 4)), np.ones((2, 4)), np.ones((2, 2)), causal=True)


def test_shape_errors_name_both_arguments():
    with pytest.raises(ValueError, match=re.escape(
            "q has shape (3, 4) but k has shape (5, 3); the last dimensions (d_k) must match")):
        tiled_attention(np.ones((3, 4)), np.ones((5, 3)), np.ones((5, 2)))
    with pytest.raises(ValueError, match=re.escape(
            "k has shape (5, 4) but v has shape (6, 2); k and v must have the same number of positions n_k")):
        tiled_attention(np.ones((3, 4)), np.ones((5, 4)), np.ones((6, 2)))
    with pytest.raises(ValueError, match=re.escape(
            "v has shape (5,) but needs at least 2 dimensions, laid out as (..., n_k, d_v)")):
        tiled_attention(np.ones((3, 4)), np.ones((5, 4)), np.ones(5))


def test_mask_errors_are_clear():
    args = (np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2)))
    with pytest.raises(ValueError, match=re.escape(
            "mask has shape (3, 4) but the weights have shape (..., 3, 5) (q has shape (3, 4), k has shape (5, 4)); "
            "the mask must broadcast to them")):
        tiled_attention(*args, mask=np.ones((3, 4), dtype=bool))
    with pytest.raises(TypeError, match=re.escape("mask has dtype float64; expected a boolean array")):
        tiled_attention(*args, mask=np.ones((3, 5)))
    with pytest.raises(ValueError, match=re.escape(
            "the leading (batch, head) dimensions do not broadcast: q has (2,), k has (2,), v has (2,), mask has (3,)")):
        tiled_attention(np.ones((2, 3, 4)), np.ones((2, 5, 4)), np.ones((2, 5, 2)),
                        mask=np.ones((3, 3, 5), dtype=bool))


def test_non_finite_inputs_and_bad_scales_are_refused():
    with pytest.raises(ValueError, match=re.escape("k contains NaN at index (1, 0)")):
        tiled_attention(np.ones((3, 4)), np.array([[1.0] * 4, [np.nan] + [1.0] * 3]), np.ones((2, 2)))
    with pytest.raises(ValueError, match="scale must be a positive finite number, got -1.0"):
        tiled_attention(np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2)), scale=-1.0)


# --- scores and sums that overflow: the same clear error as the reference -------------------------

OVERFLOW = r"the scores overflowed to inf or NaN in float32"


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mask", [None, np.ones((2, 2), dtype=bool)], ids=["no mask", "mask"])
def test_a_row_whose_scores_all_overflow_to_minus_inf_raises_like_the_reference(mask, causal):
    q = np.array([[1e30], [1e30]], dtype=np.float32)
    k = np.array([[-1e30], [-1e30]], dtype=np.float32)  # every score is -1e60: -inf in float32
    v = np.ones((2, 3), dtype=np.float32)
    reference_mask = causal_mask(2) if causal else mask
    with pytest.raises(ValueError, match=OVERFLOW):
        scaled_dot_product_attention(q, k, v, mask=reference_mask)
    with pytest.raises(ValueError, match=OVERFLOW):
        tiled_attention(q, k, v, mask=mask, causal=causal, block_q=1, block_k=1)


def test_scores_that_overflow_to_plus_inf_raise_like_the_reference_and_name_no_internal_variable():
    q = np.array([[1e30], [1.0]], dtype=np.float32)
    k = np.array([[1e30], [1.0], [2.0]], dtype=np.float32)  # q_0 . k_0 = 1e60: +inf in float32
    v = np.ones((3, 2), dtype=np.float32)
    with pytest.raises(ValueError, match=OVERFLOW):
        scaled_dot_product_attention(q, k, v)
    for block_k in (1, 2, 3):
        with pytest.raises(ValueError, match=OVERFLOW) as error:
            tiled_attention(q, k, v, block_k=block_k)
        assert "state" not in str(error.value)


def test_scores_that_overflow_only_where_the_mask_forbids_are_harmless():
    q = np.array([[1e30], [1.0]], dtype=np.float32)
    k = np.array([[1e30], [-1e30], [2.0]], dtype=np.float32)
    v = np.arange(6, dtype=np.float32).reshape(3, 2)
    mask = np.array([[False, False, True], [True, False, True]])
    expected = scaled_dot_product_attention(q, k, v, mask=mask).output
    for block_k in (1, 2, 3):
        np.testing.assert_allclose(tiled_attention(q, k, v, mask=mask, block_k=block_k), expected, rtol=1e-6)


def test_values_so_large_that_their_running_sum_overflows_raise_an_error_naming_v():
    v = np.full((4, 1), 2e38, dtype=np.float32)  # the unnormalised sum 8e38 overflows float32
    q, k = np.zeros((1, 2), dtype=np.float32), np.zeros((4, 2), dtype=np.float32)
    with pytest.raises(ValueError, match=r"\bv\b.*float32") as error:
        tiled_attention(q, k, v, block_k=4)
    assert "state" not in str(error.value)
