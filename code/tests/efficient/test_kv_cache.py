"""Tests of attnbook.efficient.kv_cache (and the closed-form counts of attnbook.kv_cache): decoding with and without a cache gives the same outputs; the counts are exact."""

import re

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

from attnbook import causal_mask, self_attention
from attnbook.measure.counts import decode_multiply_adds, DECODE_STRATEGIES
from attnbook.efficient.kv_cache import STRATEGIES, DecodeResult, KVCache, decode, decode_step


def problem(seed, t, d_model, d_k, d_v, batch=()):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(batch + (t, d_model))  # (..., t, d_model)
    w_q, w_k = rng.standard_normal((2, d_model, d_k)) / np.sqrt(d_model)  # each (d_model, d_k)
    w_v = rng.standard_normal((d_model, d_v)) / np.sqrt(d_model)  # (d_model, d_v)
    return x, w_q, w_k, w_v


SIZES = {"t": st.integers(1, 9), "d_model": st.integers(1, 6), "d_k": st.integers(1, 5),
         "d_v": st.integers(1, 5), "seed": st.integers(0, 50)}


# --- the outputs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
@given(batched=st.booleans(), **SIZES)
def test_every_strategy_equals_causal_self_attention_over_the_whole_sequence(strategy, batched, t, d_model,
                                                                              d_k, d_v, seed):
    x, w_q, w_k, w_v = problem(seed, t, d_model, d_k, d_v, (2, 3) if batched else ())
    result = decode(x, w_q, w_k, w_v, strategy=strategy)
    assert isinstance(result, DecodeResult) and result.outputs.shape == x.shape[:-1] + (d_v,)
    expected = self_attention(x, w_q, w_k, w_v, mask=causal_mask(t)).output
    np.testing.assert_allclose(result.outputs, expected, rtol=1e-10, atol=1e-12)


@given(**SIZES)
def test_cached_and_uncached_outputs_agree(t, d_model, d_k, d_v, seed):
    x, w_q, w_k, w_v = problem(seed, t, d_model, d_k, d_v)
    cached = decode(x, w_q, w_k, w_v, "cache").outputs
    for strategy in ("recompute_kv", "recompute_all"):
        np.testing.assert_allclose(decode(x, w_q, w_k, w_v, strategy).outputs, cached, rtol=1e-10, atol=1e-12)


def test_later_tokens_do_not_change_earlier_outputs():
    x, w_q, w_k, w_v = problem(3, 6, 4, 3, 3)
    changed = x.copy()
    changed[4:] += 10.0
    before = decode(x, w_q, w_k, w_v).outputs
    after = decode(changed, w_q, w_k, w_v).outputs
    np.testing.assert_array_equal(before[:4], after[:4])
    assert not np.allclose(before[4:], after[4:])


def test_generation_with_feedback_step_by_step_equals_decoding_the_generated_sequence():
    _, w_q, w_k, w_v = problem(4, 1, 4, 4, 4)
    cache = KVCache(capacity=8, d_k=4, d_v=4)
    token = np.ones((1, 4))  # (1, d_model): the first input
    inputs, outputs = [], []
    for _ in range(8):
        inputs.append(token)
        out = decode_step(cache, token, w_q, w_k, w_v)  # (1, d_v)
        outputs.append(out)
        token = np.tanh(3.0 * out)  # the next input is made from the output: autoregressive
    x = np.concatenate(inputs)  # (t, d_model)
    np.testing.assert_allclose(np.concatenate(outputs), decode(x, w_q, w_k, w_v, "recompute_all").outputs,
                               rtol=1e-12, atol=1e-14)
    assert len(cache) == 8


# --- the counts -------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
@given(batched=st.booleans(), **SIZES)
def test_counted_multiply_adds_equal_the_closed_form(strategy, batched, t, d_model, d_k, d_v, seed):
    batch = (2, 3) if batched else ()
    x, w_q, w_k, w_v = problem(seed, t, d_model, d_k, d_v, batch)
    counted = decode(x, w_q, w_k, w_v, strategy=strategy).multiply_adds
    assert counted == decode_multiply_adds(t, d_model, d_k, d_v, strategy, batch=6 if batched else 1)


def test_decode_knows_the_strategies_that_are_counted():
    assert STRATEGIES == DECODE_STRATEGIES


# --- the cache itself -------------------------------------------------------------------------------


def test_cache_appends_rows_in_order_without_copying_the_old_ones():
    cache = KVCache(capacity=3, d_k=2, d_v=1, batch_shape=(2,))
    buffer = cache._keys
    for s in range(3):
        cache.append(np.full((2, 1, 2), float(s)), np.full((2, 1, 1), -float(s)))
    assert cache._keys is buffer  # the same preallocated buffer throughout
    assert cache.keys.shape == (2, 3, 2) and cache.values.shape == (2, 3, 1)
    assert cache.keys[0, :, 0].tolist() == [0.0, 1.0, 2.0]
    assert cache.values[1, :, 0].tolist() == [0.0, -1.0, -2.0]


def test_a_full_cache_refuses_more_tokens():
    cache = KVCache(capacity=1, d_k=1, d_v=1)
    cache.append([[1.0]], [[1.0]])
    with pytest.raises(ValueError, match=re.escape("the cache is full (capacity 1 tokens)")):
        cache.append([[1.0]], [[1.0]])


def test_cache_refuses_rows_of_the_wrong_shape():
    cache = KVCache(capacity=2, d_k=3, d_v=2)
    with pytest.raises(ValueError, match=re.escape("k_new has shape (2, 3); expected (1, 3) (one token)")):
        cache.append(np.ones((2, 3)), np.ones((1, 2)))
    with pytest.raises(ValueError, match=re.escape("v_new has shape (1, 3); expected (1, 2) (one token)")):
        cache.append(np.ones((1, 3)), np.ones((1, 3)))


def test_cache_arguments_are_checked():
    with pytest.raises(ValueError, match="^capacity must be at least 1, got 0$"):
        KVCache(0, 2, 2)
    with pytest.raises(TypeError, match="^dtype must be a floating-point type, got int64$"):
        KVCache(2, 2, 2, dtype=np.int64)


def test_cache_refuses_a_batch_shape_that_is_not_a_tuple_of_non_negative_integers():
    with pytest.raises(TypeError, match=r"^batch_shape\[0\] must be an integer, got 2.5$"):
        KVCache(2, 2, 2, batch_shape=(2.5,))
    with pytest.raises(ValueError, match=r"^batch_shape\[1\] must be at least 0, got -1$"):
        KVCache(2, 2, 2, batch_shape=(2, -1))
    with pytest.raises(TypeError, match=r"^batch_shape must be a tuple of sizes, got 2$"):
        KVCache(2, 2, 2, batch_shape=2)


@pytest.mark.parametrize("name", ["k_new", "v_new"])
def test_a_float16_cache_refuses_at_append_time_a_row_that_overflows_float16(name):
    cache = KVCache(capacity=2, d_k=2, d_v=2, dtype=np.float16)
    rows = {"k_new": np.ones((1, 2)), "v_new": np.ones((1, 2))}
    rows[name] = np.array([[1.0, 1e5]])  # float16 holds at most 65504
    with pytest.raises(ValueError, match=rf"^{name} holds 100000 at index \(0, 1\), which overflows the "
                                         r"cache's float16 \(largest 65504\)"):
        cache.append(rows["k_new"], rows["v_new"])
    assert len(cache) == 0  # nothing was stored
    cache.append(np.full((1, 2), 65504.0), np.full((1, 2), -65504.0))  # the largest float16 fits
    assert np.isfinite(cache.keys).all() and np.isfinite(cache.values).all()


# --- errors -----------------------------------------------------------------------------------------


def test_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match=re.escape(
            "strategy must be one of ('cache', 'recompute_kv', 'recompute_all'), got 'lazy'")):
        decode(np.ones((2, 3)), np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 2)), strategy="lazy")


def test_projection_shapes_are_checked_naming_the_matrix():
    with pytest.raises(ValueError, match=re.escape(
            "x has shape (2, 3) but w_k has shape (4, 2); w_k needs d_model = 3 rows to multiply x")):
        decode(np.ones((2, 3)), np.ones((3, 2)), np.ones((4, 2)), np.ones((3, 2)))
    with pytest.raises(ValueError, match=re.escape(
            "w_q has shape (3, 2) but w_k has shape (3, 4); queries and keys need the same d_k")):
        decode(np.ones((2, 3)), np.ones((3, 2)), np.ones((3, 4)), np.ones((3, 2)))
    with pytest.raises(ValueError, match=re.escape(
            "x has shape (3,) but needs at least 2 dimensions, laid out as (..., n, d_model)")):
        decode(np.ones(3), np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 2)))


def test_decode_step_takes_one_token_and_a_cache():
    w = np.eye(2)
    with pytest.raises(ValueError, match=re.escape(
            "x_new has shape (2, 2); a decoding step takes one token, (..., 1, d_model)")):
        decode_step(KVCache(4, 2, 2), np.ones((2, 2)), w, w, w)
    with pytest.raises(TypeError, match="^cache must be a KVCache, got list$"):
        decode_step([], np.ones((1, 2)), w, w, w)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_decoding_refuses_a_projection_that_overflows_naming_x_and_the_matrix(strategy):
    x = np.full((3, 4), 300.0, dtype=np.float16)
    small, large = np.full((4, 2), 0.01, dtype=np.float16), np.full((4, 2), 100.0, dtype=np.float16)
    with pytest.raises(ValueError, match=r"^x @ w_v overflowed in float16") as error:
        decode(x, small, small, large, strategy=strategy)
    assert "v_new" not in str(error.value) and "contains" not in str(error.value)


def test_a_decoding_step_refuses_a_projection_that_overflows_naming_x_new():
    cache = KVCache(capacity=2, d_k=2, d_v=2, dtype=np.float16)
    x_new = np.full((1, 4), 300.0, dtype=np.float16)
    small, large = np.full((4, 2), 0.01, dtype=np.float16), np.full((4, 2), 100.0, dtype=np.float16)
    with pytest.raises(ValueError, match=r"^x_new @ w_k overflowed in float16"):
        decode_step(cache, x_new, small, large, small)
    assert len(cache) == 0
