"""Tests of attnbook.efficient.streaming: the sink-and-window mask, the rolling cache and streamed decoding."""

import numpy as np
import pytest

from attnbook import banded_mask, causal_mask, scaled_dot_product_attention
from attnbook.efficient.streaming import SinkCache, sink_inputs, sink_window_mask, stream_attention


def test_mask_without_sinks_is_the_causal_band():
    for n in range(1, 9):
        for window in range(0, 10):
            np.testing.assert_array_equal(sink_window_mask(n, window), banded_mask(n, window, causal=True))


def test_mask_with_sinks_adds_the_first_columns_below_the_diagonal():
    mask = sink_window_mask(10, 2, sinks=3)  # (10, 10)
    expected = banded_mask(10, 2, causal=True) | (causal_mask(10) & (np.arange(10)[None, :] < 3))
    np.testing.assert_array_equal(mask, expected)
    assert np.all(mask.sum(axis=1) <= 3 + 2 + 1)


@pytest.mark.parametrize("window, sinks", [(0, 0), (2, 0), (3, 1), (1, 4), (20, 2)])
def test_streamed_outputs_equal_masked_attention(window, sinks):
    rng = np.random.default_rng(window + 10 * sinks)
    q, k, v = rng.standard_normal((3, 2, 15, 4))  # (batch, n, d) each
    run = stream_attention(q, k, v, window=window, sinks=sinks)
    mask = sink_window_mask(15, window, sinks)
    np.testing.assert_allclose(run.outputs, scaled_dot_product_attention(q, k, v, mask=mask).output, rtol=1e-12,
                               atol=1e-12)
    assert run.cache_size == min(15, sinks + window + 1)


def test_cache_keeps_the_sinks_and_the_most_recent_tokens_in_order():
    cache = SinkCache(window=2, sinks=2, d_k=1, d_v=1)
    for p in range(9):
        cache.append(np.full((1, 1), float(p)), np.full((1, 1), -float(p)))
        kept = cache.positions
        assert kept.tolist() == sorted(set(range(min(p + 1, 2))) | set(range(max(0, p - 2), p + 1)))
        np.testing.assert_array_equal(cache.keys[:, 0], kept)
        np.testing.assert_array_equal(cache.values[:, 0], -kept)
    assert len(cache) == cache.capacity == 5


def test_cache_refuses_more_than_one_token():
    with pytest.raises(ValueError, match="one token"):
        SinkCache(1, 1, 2, 2).append(np.ones((2, 2)), np.ones((2, 2)))


def test_constructed_sink_takes_most_of_the_weight_and_keeping_it_keeps_the_outputs():
    n, window = 64, 7
    q, k, v = sink_inputs(n, 8, sink_logit=6.0, seed=1)  # (n, d) each
    full, weights = scaled_dot_product_attention(q, k, v, mask=causal_mask(n))
    assert weights[window + 1 :, 0].min() > 0.5
    late = slice(window + 1, n)
    error = {}
    for sinks in (0, 1):
        out = stream_attention(q, k, v, window=window, sinks=sinks).outputs
        error[sinks] = np.linalg.norm(out[late] - full[late]) / np.linalg.norm(full[late])
    assert error[1] < error[0] / 3


def test_sink_inputs_give_every_query_the_sink_logit():
    q, k, _ = sink_inputs(6, 5, sink_logit=2.5, seed=3)
    np.testing.assert_allclose(q @ k[0] / np.sqrt(5), 2.5)
    with pytest.raises(ValueError, match="finite"):
        sink_inputs(6, 5, sink_logit=float("inf"))
