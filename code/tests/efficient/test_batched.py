"""Tests of attnbook.efficient.batched: the chunked multi-core fast path returns exactly what the reference
scaled_dot_product_attention returns, over shapes, masks and dtypes, threaded or not, and survives fork."""

import multiprocessing

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import attnbook.efficient.batched as batched
from attnbook import causal_mask, scaled_dot_product_attention, softmax
from attnbook.efficient.batched import batched_attention, softmax_rows_in_place

DTYPES = st.sampled_from([np.float16, np.float32, np.float64])


@st.composite
def attention_problems(draw):
    """q, k, v (and maybe a mask) whose leading (batch, head) shapes broadcast, in one of three dtypes."""
    dtype = draw(DTYPES)
    n_q, n_k, d_k, d_v = (draw(st.integers(1, 6)) for _ in range(4))
    batch = draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    def lead():  # each input broadcasts its own subset of the batch shape
        return tuple(draw(st.sampled_from([size, 1])) for size in batch)
    elements = st.floats(-4, 4, allow_nan=False, allow_infinity=False, width=16)
    q = draw(hnp.arrays(dtype, lead() + (n_q, d_k), elements=elements))
    k = draw(hnp.arrays(dtype, lead() + (n_k, d_k), elements=elements))
    v = draw(hnp.arrays(dtype, lead() + (n_k, d_v), elements=elements))
    mask = None
    if draw(st.booleans()):  # rows may be fully masked
        mask = draw(hnp.arrays(np.bool_, lead() + (draw(st.sampled_from([1, n_q])), n_k)))
    scale = draw(st.one_of(st.none(), st.floats(0.1, 3.0)))
    return q, k, v, mask, scale


@given(attention_problems())
def test_the_fast_path_equals_the_reference(problem):
    q, k, v, mask, scale = problem
    reference = scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)
    fast = batched_attention(q, k, v, mask=mask, scale=scale)
    assert fast.output.dtype == reference.output.dtype and fast.weights.dtype == reference.weights.dtype
    np.testing.assert_array_equal(fast.weights, reference.weights)
    np.testing.assert_array_equal(fast.output, reference.output)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_threaded_chunked_path_equals_the_reference(monkeypatch, dtype):
    monkeypatch.setattr(batched, "worker_count", lambda: 2)  # the threaded path, whatever the machine
    monkeypatch.setattr(batched, "CHUNK_SCORES", 1 << 16)  # several chunks of the batch
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 4, 256, 16)).astype(dtype) for _ in range(3))
    mask = causal_mask(256)
    reference = scaled_dot_product_attention(q, k, v, mask=mask)
    fast = batched_attention(q, k, v, mask=mask)
    np.testing.assert_array_equal(fast.weights, reference.weights)
    np.testing.assert_array_equal(fast.output, reference.output)


def test_fully_masked_rows_give_zero_weights_and_zero_output():
    mask = np.array([[False, False, False], [True, False, True]])  # (n_q, n_k): the first query sees nothing
    out, weights = batched_attention(np.ones((2, 4)), np.ones((3, 4)), np.ones((3, 5)), mask=mask)
    assert not weights[0].any() and not out[0].any()
    np.testing.assert_allclose(weights[1], [0.5, 0.0, 0.5])


def test_huge_logits_stay_finite_and_float16_is_computed_in_float32():
    q = np.full((2, 4), 200.0, dtype=np.float16)  # q k^T = 160000: beyond float16's 65504
    out, weights = batched_attention(q, q, np.eye(2, 4, dtype=np.float16))
    assert weights.dtype == np.float32 and np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights, 0.5)


def test_overflowing_scores_are_refused_as_the_reference_refuses_them():
    q = np.full((2, 2), 1e30, dtype=np.float32)  # q k^T overflows float32
    with pytest.raises(ValueError, match=r"^the scores overflowed to inf or NaN in float32"):
        scaled_dot_product_attention(q, q, q)
    with pytest.raises(ValueError, match=r"^the scores overflowed to inf or NaN in float32"):
        batched_attention(q, q, q)


def test_arguments_are_checked_as_the_reference_checks_them():
    with pytest.raises(ValueError, match=r"^q has shape \(3, 4\) but k has shape \(5, 3\); the last dimensions"):
        batched_attention(np.ones((3, 4)), np.ones((5, 3)), np.ones((5, 2)))


def test_softmax_rows_in_place_equals_softmax_when_threaded(monkeypatch):
    monkeypatch.setattr(batched, "worker_count", lambda: 2)
    x = np.random.default_rng(1).standard_normal((64, 1 << 12))  # 2**18 entries: the threaded path
    allowed = x > -1.0  # (64, 4096)
    got = x.copy()
    softmax_rows_in_place(got, allowed)
    np.testing.assert_array_equal(got, softmax(x, mask=allowed))


# --- the thread pool and fork -------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_the_fast_path_works_in_a_process_forked_after_the_thread_pool_started(monkeypatch):
    # two workers whatever the machine, so that the large inputs below take the threaded path
    monkeypatch.setattr(batched, "worker_count", lambda: 2)
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((3, 512, 8))  # 512 x 512 = 2**18 scores
    expected = batched_attention(q, k, v)  # in the parent: this starts the thread pool
    assert batched._POOL, "the parent did not start the thread pool; the test checks nothing"
    with multiprocessing.get_context("fork").Pool(1) as pool:
        try:
            got = pool.apply_async(batched_attention, (q, k, v)).get(timeout=60)
        except multiprocessing.TimeoutError:
            pytest.fail("the forked child hung for 60 s in batched_attention: the parent's "
                        "thread pool does not survive fork")
    np.testing.assert_array_equal(got.output, expected.output)
    np.testing.assert_array_equal(got.weights, expected.weights)
