"""Tests of attnbook.efficient.banded: banded attention computed from the band alone equals masked full attention."""

import math

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

from attnbook import banded_mask, scaled_dot_product_attention
from attnbook.efficient.banded import banded_attention
from attnbook.measure.counts import attention_pair_count


# --- banded_attention -------------------------------------------------------------------------------


def _band_to_dense(band, window):
    """Test oracle: scatter band weights (..., n, 2w + 1) into a dense (..., n, n) matrix."""
    n = band.shape[-2]
    dense = np.zeros(band.shape[:-2] + (n, n))
    for i in range(n):
        for slot in range(2 * window + 1):
            j = i + slot - window
            if 0 <= j < n:
                dense[..., i, j] = band[..., i, slot]
            else:
                assert np.all(band[..., i, slot] == 0)
    return dense


@given(n=st.integers(1, 8), window=st.integers(0, 9), causal=st.booleans(), seed=st.integers(0, 2**16))
def test_banded_attention_equals_masked_full_attention(n, window, causal, seed):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n, 3))  # (n, d_k)
    k = rng.standard_normal((n, 3))  # (n, d_k)
    v = rng.standard_normal((n, 2))  # (n, d_v)
    out, band = banded_attention(q, k, v, window, causal=causal)
    full_out, full_weights = scaled_dot_product_attention(q, k, v, mask=banded_mask(n, window, causal=causal))
    assert out.shape == (n, 2) and band.shape == (n, 2 * window + 1)
    np.testing.assert_allclose(out, full_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_band_to_dense(band, window), full_weights, rtol=1e-12, atol=1e-12)


def test_banded_attention_with_batch_and_head_dimensions():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 3, 7, 4))  # (batch, heads, n, d_k)
    k = rng.standard_normal((2, 3, 7, 4))  # (batch, heads, n, d_k)
    v = rng.standard_normal((1, 3, 7, 5))  # (1, heads, n, d_v): broadcast over the batch
    out, band = banded_attention(q, k, v, window=2)
    full = scaled_dot_product_attention(q, k, v, mask=banded_mask(7, 2)).output
    assert out.shape == (2, 3, 7, 5) and band.shape == (2, 3, 7, 5)
    np.testing.assert_allclose(out, full, rtol=1e-12, atol=1e-12)


def test_banded_attention_of_window_zero_returns_the_values():
    v = np.arange(6.0).reshape(3, 2)  # (n, d_v)
    out, band = banded_attention(np.ones((3, 2)), np.ones((3, 2)), v, window=0)
    np.testing.assert_array_equal(out, v)
    np.testing.assert_array_equal(band, np.ones((3, 1)))


def test_banded_attention_rows_sum_to_one():
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((3, 9, 2))  # each (n, 2)
    for causal in (False, True):
        np.testing.assert_allclose(banded_attention(q, k, v, 3, causal=causal).weights.sum(axis=-1), 1.0)


def test_banded_attention_respects_the_scale():
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((3, 5, 4))  # each (n, 4)
    mask = banded_mask(5, 1)
    np.testing.assert_allclose(banded_attention(q, k, v, 1, scale=0.3).output,
                               scaled_dot_product_attention(q, k, v, mask=mask, scale=0.3).output, rtol=1e-12)


def test_banded_attention_keeps_float32():
    x = np.ones((4, 2), dtype=np.float32)  # (n, d)
    out, band = banded_attention(x, x, x, window=1)
    assert out.dtype == np.float32 and band.dtype == np.float32


def test_banded_attention_computes_2w_plus_1_scores_per_query():
    n, window = 1000, 5
    x = np.zeros((n, 2))  # (n, d)
    band = banded_attention(x, x, x, window).weights
    assert band.size == n * (2 * window + 1)  # linear in n, against n * n = 1,000,000 for the full matrix
    assert int((band > 0).sum()) == attention_pair_count(n, window=window)


@pytest.mark.parametrize("shapes, message", [
    (((3, 2), (4, 2), (4, 2)), r"^q has shape \(3, 2\) but k has shape \(4, 2\); banded self-attention needs the same number of positions n$"),
    (((3, 2), (3, 3), (3, 2)), r"^q has shape \(3, 2\) but k has shape \(3, 3\); the last dimensions \(d_k\) must match$"),
    (((3, 2), (3, 2), (4, 2)), r"^k has shape \(3, 2\) but v has shape \(4, 2\); k and v must have the same number of positions n_k \(second-to-last dimension\)$"),
    (((3,), (3, 2), (3, 2)), r"^q has shape \(3,\) but needs at least 2 dimensions, laid out as \(\.\.\., n_q, d_k\)$"),
    (((3, 0), (3, 0), (3, 2)), r"^q and k have d_k = 0"),
    (((2, 3, 2), (3, 3, 2), (3, 3, 2)), r"^the leading \(batch, head\) dimensions do not broadcast: q has \(2,\), k has \(3,\), v has \(3,\)$"),
])
def test_banded_attention_refuses_mismatched_shapes(shapes, message):
    q, k, v = (np.ones(shape) for shape in shapes)
    with pytest.raises(ValueError, match=message):
        banded_attention(q, k, v, window=1)


def test_banded_attention_refuses_bad_window_causal_and_scale():
    x = np.ones((3, 2))
    with pytest.raises(ValueError, match=r"^window must be at least 0, got -1$"):
        banded_attention(x, x, x, window=-1)
    with pytest.raises(TypeError, match=r"^window must be an integer, got 1.0$"):
        banded_attention(x, x, x, window=1.0)
    with pytest.raises(TypeError, match=r"^causal must be True or False, got 1$"):
        banded_attention(x, x, x, window=1, causal=1)
    with pytest.raises(ValueError, match=r"^scale must be a positive finite number, got -1.0$"):
        banded_attention(x, x, x, window=1, scale=-1.0)
    with pytest.raises(TypeError, match=r"^scale must be a real number, got '2'$"):
        banded_attention(x, x, x, window=1, scale="2")


def test_banded_attention_refuses_nan_values():
    x = np.ones((3, 2))
    with pytest.raises(ValueError, match=r"^v contains NaN at index \(1, 0\)"):
        banded_attention(x, x, np.array([[0.0, 0.0], [math.nan, 0.0], [0.0, 0.0]]), window=1)


# --- banded attention: scores that overflow raise like the reference ------------------------------


@pytest.mark.parametrize("sign", [-1, 1], ids=["to -inf", "to +inf"])
@pytest.mark.parametrize("causal", [False, True])
def test_banded_attention_raises_the_reference_error_when_the_scores_of_a_row_overflow(sign, causal):
    q = np.array([[1e30], [1e30], [1e30]], dtype=np.float32)
    k = sign * q  # every score is +-1e60: +-inf in float32
    v = np.ones((3, 2), dtype=np.float32)
    message = r"^the scores overflowed to inf or NaN in float32"
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(q, k, v, mask=banded_mask(3, 1, causal=causal))
    with pytest.raises(ValueError, match=message):
        banded_attention(q, k, v, window=1, causal=causal)


def test_banded_attention_gives_an_overflow_to_minus_inf_beside_finite_scores_weight_zero_like_the_reference():
    q = np.array([[1e30], [1.0], [1.0]], dtype=np.float32)
    k = np.array([[1.0], [-1e30], [1.0]], dtype=np.float32)  # row 0: scores 1e30 (itself), -inf (key 1)
    v = np.arange(6, dtype=np.float32).reshape(3, 2)
    expected = scaled_dot_product_attention(q, k, v, mask=banded_mask(3, 1)).output
    np.testing.assert_allclose(banded_attention(q, k, v, window=1).output, expected, rtol=1e-6)
