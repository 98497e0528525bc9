"""Tests of attnbook.attention: the book's worked example, every error, and the properties of attention."""

import math
import re
import warnings

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from hypothesis.extra.numpy import arrays

from attnbook import AttentionResult, attention_scores, scaled_dot_product_attention

SQRT2 = math.sqrt(2.0)
FINITE = st.floats(-5.0, 5.0, allow_nan=False, allow_infinity=False)


def matrix(n_rows, n_cols, elements=FINITE, dtype=np.float64):
    return arrays(dtype, (n_rows, n_cols), elements=elements)


@st.composite
def qkv(draw, with_mask=False):
    """q (n_q, d_k), k (n_k, d_k), v (n_k, d_v) with small sizes, and optionally a random mask (n_q, n_k)."""
    n_q, n_k = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    d_k, d_v = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    q = draw(matrix(n_q, d_k))
    k = draw(matrix(n_k, d_k))
    v = draw(matrix(n_k, d_v))
    mask = draw(arrays(np.bool_, (n_q, n_k))) if with_mask else None
    return q, k, v, mask


def reference_attention(q, k, v, mask=None, scale=None):
    """Oracle: softmax(q k^T * scale) v written as plain loops with math.exp (small inputs: no overflow)."""
    q, k, v = q.tolist(), k.tolist(), v.tolist()
    n_q, n_k, d_k, d_v = len(q), len(k), len(q[0]), len(v[0])
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale
    weights = [[0.0] * n_k for _ in range(n_q)]
    output = [[0.0] * d_v for _ in range(n_q)]
    for i in range(n_q):
        exps = []
        for j in range(n_k):
            if mask is not None and not mask[i][j]:
                exps.append(0.0)
                continue
            score = sum(q[i][c] * k[j][c] for c in range(d_k)) * scale
            exps.append(math.exp(score))
        total = sum(exps)
        for j in range(n_k):
            weights[i][j] = exps[j] / total if total > 0 else 0.0
        for c in range(d_v):
            output[i][c] = sum(weights[i][j] * v[j][c] for j in range(n_k))
    return np.array(output), np.array(weights)


# --- the worked example of the book: Q = I, K = 2I, V = I, d_k = 2 --------------------------------


def test_worked_example_scores_are_sqrt2_on_the_diagonal():
    scores = attention_scores(np.eye(2), 2 * np.eye(2))
    np.testing.assert_allclose(scores, [[SQRT2, 0.0], [0.0, SQRT2]], rtol=1e-15)


def test_worked_example_weights_are_softmax_of_sqrt2_and_zero():
    e = math.exp(SQRT2)
    high, low = e / (e + 1), 1 / (e + 1)
    _, weights = scaled_dot_product_attention(np.eye(2), 2 * np.eye(2), np.eye(2))
    np.testing.assert_allclose(weights, [[high, low], [low, high]], rtol=1e-14)
    assert round(high, 4) == 0.8044 and round(low, 4) == 0.1956  # the rounded values the chapter quotes


def test_worked_example_output_equals_weights_because_values_are_identity():
    output, weights = scaled_dot_product_attention(np.eye(2), 2 * np.eye(2), np.eye(2))
    np.testing.assert_array_equal(output, weights)


def test_worked_example_with_second_key_two_two_gives_half_half_first_row():
    e = math.exp(SQRT2)
    k = np.array([[2.0, 0.0], [2.0, 2.0]])  # (2, 2)
    output, weights = scaled_dot_product_attention(np.eye(2), k, np.eye(2))
    expected = [[0.5, 0.5], [1 / (1 + e), e / (1 + e)]]
    np.testing.assert_allclose(weights, expected, rtol=1e-14)
    np.testing.assert_allclose(output, expected, rtol=1e-14)


# --- basic behaviour ------------------------------------------------------------------------------


def test_result_is_a_named_tuple_of_output_and_weights():
    result = scaled_dot_product_attention(np.eye(2), np.eye(2), np.eye(2))
    assert isinstance(result, AttentionResult)
    output, weights = result
    assert output is result.output and weights is result.weights


def test_shapes_follow_n_q_n_k_d_v():
    output, weights = scaled_dot_product_attention(np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 6)))
    assert output.shape == (3, 6)
    assert weights.shape == (3, 5)


def test_default_scale_is_one_over_sqrt_d_k():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))  # (3, 4), (5, 4)
    np.testing.assert_allclose(attention_scores(q, k), q @ k.T / 2.0, rtol=1e-14)
    np.testing.assert_allclose(attention_scores(q, k, scale=1.0), q @ k.T, rtol=1e-14)


def test_explicit_scale_replaces_the_default():
    q, k, v = np.eye(2), 2 * np.eye(2), np.eye(2)
    _, weights = scaled_dot_product_attention(q, k, v, scale=1.0)
    e2 = math.exp(2.0)
    np.testing.assert_allclose(weights[0], [e2 / (e2 + 1), 1 / (e2 + 1)], rtol=1e-14)


def test_integer_inputs_give_float64_results():
    output, weights = scaled_dot_product_attention([[1, 0]], [[1, 0], [0, 1]], [[1], [2]])
    assert output.dtype == np.float64 and weights.dtype == np.float64


def test_float32_inputs_give_float32_results():
    x = np.eye(3, dtype=np.float32)
    output, weights = scaled_dot_product_attention(x, x, x)
    assert output.dtype == np.float32 and weights.dtype == np.float32


def test_integer_zero_one_mask_is_accepted():
    _, weights = scaled_dot_product_attention(np.eye(2), np.eye(2), np.eye(2), mask=[[1, 0], [1, 1]])
    assert weights[0].tolist() == [1.0, 0.0]


def test_padding_mask_of_shape_one_by_n_k_broadcasts_over_queries():
    _, weights = scaled_dot_product_attention(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 1)),
                                              mask=np.array([[True, True, False, True]]))
    np.testing.assert_allclose(weights, np.tile([1 / 3, 1 / 3, 0.0, 1 / 3], (3, 1)), rtol=1e-15)


def test_mask_with_batch_dimensions_broadcasts_against_unbatched_q_and_k():
    q, k, v = np.zeros((3, 2)), np.zeros((4, 2)), np.arange(8.0).reshape(4, 2)  # (3, 2), (4, 2), (4, 2)
    mask = np.ones((2, 3, 4), dtype=bool)  # (2, 3, 4)
    mask[1, :, 2:] = False
    output, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert weights.shape == (2, 3, 4) and output.shape == (2, 3, 2)
    np.testing.assert_allclose(weights[0], np.full((3, 4), 0.25), rtol=1e-15)
    np.testing.assert_allclose(weights[1], np.tile([0.5, 0.5, 0.0, 0.0], (3, 1)), rtol=1e-15)
    np.testing.assert_allclose(output[1], np.tile([1.0, 2.0], (3, 1)), rtol=1e-15)


def test_fully_masked_row_gets_zero_weights_and_zero_output():
    mask = np.array([[False, False, False], [True, False, True]])  # (2, 3)
    v = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])  # (3, 2)
    with warnings.catch_warnings(), np.errstate(divide="warn", over="warn", invalid="warn"):
        warnings.simplefilter("error")
        output, weights = scaled_dot_product_attention(np.ones((2, 2)), np.ones((3, 2)), v, mask=mask)
    assert weights[0].tolist() == [0.0, 0.0, 0.0]
    assert output[0].tolist() == [0.0, 0.0]
    np.testing.assert_allclose(output[1], [3.0, 4.0], rtol=1e-15)


def test_zero_keys_behave_like_a_fully_masked_row():
    with warnings.catch_warnings(), np.errstate(divide="warn", over="warn", invalid="warn"):
        warnings.simplefilter("error")
        output, weights = scaled_dot_product_attention(np.ones((3, 2)), np.ones((0, 2)), np.ones((0, 4)))
    assert weights.shape == (3, 0)
    np.testing.assert_array_equal(output, np.zeros((3, 4)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scores_of_plus_minus_ten_thousand_stay_finite(dtype):
    q = np.array([[100.0], [-100.0]], dtype=dtype)  # (2, 1)
    k = np.array([[100.0], [-100.0], [0.0]], dtype=dtype)  # (3, 1)
    v = np.array([[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]], dtype=dtype)  # (3, 2)
    scores = attention_scores(q, k)
    assert scores.max() == 1e4 and scores.min() == -1e4
    output, weights = scaled_dot_product_attention(q, k, v)
    assert output.dtype == dtype and weights.dtype == dtype
    assert weights.tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    assert output.tolist() == [[1.0, 0.0], [0.0, 1.0]]


# --- properties -----------------------------------------------------------------------------------


@given(data=qkv())
def test_weights_are_non_negative_and_rows_sum_to_one(data):
    q, k, v, _ = data
    _, weights = scaled_dot_product_attention(q, k, v)
    assert np.all(weights >= 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)


@given(data=qkv(with_mask=True))
def test_masked_weights_are_zero_and_rows_with_an_allowed_key_sum_to_one(data, assert_masked_distribution):
    q, k, v, mask = data
    _, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert_masked_distribution(weights, mask)


@given(data=qkv(with_mask=True), use_mask=st.booleans())
def test_each_output_row_lies_in_the_convex_hull_of_the_values(data, use_mask):
    q, k, v, mask = data
    if not use_mask:
        mask = np.ones((q.shape[0], k.shape[0]), dtype=bool)
    output, weights = scaled_dot_product_attention(q, k, v, mask=mask if use_mask else None)
    # the output is the weighted sum of the value rows ...
    np.testing.assert_allclose(output, weights @ v, rtol=1e-12, atol=1e-12)
    for i in range(q.shape[0]):
        allowed = mask[i]
        if not allowed.any():
            continue
        # ... with convex weights on the allowed rows ...
        assert np.all(weights[i] >= 0)
        assert np.all(weights[i, ~allowed] == 0)
        np.testing.assert_allclose(weights[i].sum(), 1.0, rtol=1e-12)
        # ... so, checked independently of weights @ v, every coordinate lies between the
        # smallest and largest value of that coordinate over the rows the query may see.
        lo, hi = v[allowed].min(axis=0), v[allowed].max(axis=0)  # (d_v,), (d_v,)
        assert np.all(output[i] >= lo - 1e-9), (output[i], lo)
        assert np.all(output[i] <= hi + 1e-9), (output[i], hi)


@given(data=st.data())
def test_self_attention_is_permutation_equivariant(data):
    n, d = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 5))
    x = data.draw(matrix(n, d))
    perm = np.array(data.draw(st.permutations(range(n))), dtype=int)
    output, weights = scaled_dot_product_attention(x, x, x)
    output_p, weights_p = scaled_dot_product_attention(x[perm], x[perm], x[perm])
    np.testing.assert_allclose(output_p, output[perm], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights_p, weights[perm][:, perm], rtol=1e-10, atol=1e-12)


@given(data=qkv(), perm_data=st.data())
def test_reordering_key_value_pairs_together_does_not_change_the_output(data, perm_data):
    q, k, v, _ = data
    perm = np.array(perm_data.draw(st.permutations(range(k.shape[0]))), dtype=int)
    output, weights = scaled_dot_product_attention(q, k, v)
    output_p, weights_p = scaled_dot_product_attention(q, k[perm], v[perm])
    np.testing.assert_allclose(output_p, output, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights_p, weights[:, perm], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@given(data=st.data())
def test_scores_up_to_ten_thousand_give_finite_results(dtype, data):
    # q = S, k = I and scale 1 make the scores exactly S, any matrix with entries in [-1e4, 1e4]
    n_q, n_k, d_v = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6)), data.draw(st.integers(1, 5))
    width = 32 if dtype == np.float32 else 64
    s = data.draw(matrix(n_q, n_k, st.floats(-1e4, 1e4, width=width), dtype))
    v = data.draw(matrix(n_k, d_v, st.floats(-5, 5, width=width), dtype))
    k = np.eye(n_k, dtype=dtype)  # (n_k, n_k)
    np.testing.assert_array_equal(attention_scores(s, k, scale=1.0), s)
    output, weights = scaled_dot_product_attention(s, k, v, scale=1.0)
    assert output.dtype == dtype and weights.dtype == dtype
    assert np.all(np.isfinite(weights)) and np.all(np.isfinite(output))
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-5 if dtype == np.float32 else 1e-12)


@given(data=st.data(), with_mask=st.booleans(), shared_kv=st.booleans())
def test_batch_and_head_dimensions_equal_a_loop_of_2d_calls(data, with_mask, shared_kv):
    b, h = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    n_q, n_k = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    d_k, d_v = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    kv_heads = 1 if shared_kv else h  # one key/value head shared by all query heads, or one per head
    q = data.draw(arrays(np.float64, (b, h, n_q, d_k), elements=FINITE))
    k = data.draw(arrays(np.float64, (b, kv_heads, n_k, d_k), elements=FINITE))
    v = data.draw(arrays(np.float64, (b, kv_heads, n_k, d_v), elements=FINITE))
    mask = data.draw(arrays(np.bool_, (b, 1, n_q, n_k))) if with_mask else None  # same for all heads
    output, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert output.shape == (b, h, n_q, d_v) and weights.shape == (b, h, n_q, n_k)
    for i in range(b):
        for j in range(h):
            jk = 0 if shared_kv else j
            out_ij, w_ij = scaled_dot_product_attention(
                q[i, j], k[i, jk], v[i, jk], mask=None if mask is None else mask[i, 0]
            )
            np.testing.assert_allclose(output[i, j], out_ij, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(weights[i, j], w_ij, rtol=1e-12, atol=1e-12)


@given(data=qkv(with_mask=True), use_mask=st.booleans(),
       scale=st.none() | st.floats(0.01, 3.0))
def test_agrees_with_a_loop_reference_implementation(data, use_mask, scale):
    q, k, v, mask = data
    mask = mask if use_mask else None
    output, weights = scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)
    expected_output, expected_weights = reference_attention(q, k, v, mask=mask, scale=scale)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(output, expected_output, rtol=1e-10, atol=1e-12)


@given(data=qkv(with_mask=True), row=st.integers(0, 5))
def test_fully_masked_rows_give_zero_output_without_nan_or_warnings(data, row):
    q, k, v, mask = data
    row = row % q.shape[0]
    mask = mask.copy()
    mask[row] = False
    with warnings.catch_warnings(), np.errstate(divide="warn", over="warn", invalid="warn"):
        warnings.simplefilter("error")
        output, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert not np.any(np.isnan(output)) and not np.any(np.isnan(weights))
    empty = ~mask.any(axis=-1)
    assert np.all(weights[empty] == 0)
    assert np.all(output[empty] == 0)


# --- errors ---------------------------------------------------------------------------------------


def sdpa_args(**overrides):
    """Valid q (3, 4), k (5, 4), v (5, 2) with some replaced."""
    args = {"q": np.ones((3, 4)), "k": np.ones((5, 4)), "v": np.ones((5, 2))}
    args.update(overrides)
    return args


def test_last_dimensions_of_q_and_k_must_match_and_both_shapes_are_named():
    message = re.escape("q has shape (3, 4) but k has shape (5, 3); the last dimensions (d_k) must match")
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(np.ones((3, 4)), np.ones((5, 3)), np.ones((5, 2)))
    with pytest.raises(ValueError, match=message):
        attention_scores(np.ones((3, 4)), np.ones((5, 3)))


def test_k_and_v_must_have_the_same_number_of_positions():
    with pytest.raises(ValueError, match=re.escape(
        "k has shape (5, 4) but v has shape (6, 2); k and v must have the same number of positions n_k "
        "(second-to-last dimension)"
    )):
        scaled_dot_product_attention(**sdpa_args(v=np.ones((6, 2))))


def test_d_k_of_zero_is_refused():
    message = re.escape("q and k have d_k = 0 (shapes (3, 0), (5, 0)); d_k must be at least 1")
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(np.ones((3, 0)), np.ones((5, 0)), np.ones((5, 2)))
    with pytest.raises(ValueError, match=message):
        attention_scores(np.ones((3, 0)), np.ones((5, 0)))


@pytest.mark.parametrize("mask_shape", [(3, 4), (2, 5), (5, 3), (3, 2)])
def test_mask_whose_last_two_dimensions_do_not_fit_is_refused(mask_shape):
    with pytest.raises(ValueError, match=re.escape(
        f"mask has shape {mask_shape} but the weights have shape (..., 3, 5) "
        "(q has shape (3, 4), k has shape (5, 4)); the mask must broadcast to them"
    )):
        scaled_dot_product_attention(**sdpa_args(), mask=np.ones(mask_shape, dtype=bool))


def test_mask_with_too_few_dimensions_is_refused():
    with pytest.raises(ValueError, match=re.escape(
        "mask has shape (5,) but needs at least 2 dimensions, laid out as (..., n_q, n_k)"
    )):
        scaled_dot_product_attention(**sdpa_args(), mask=np.ones(5, dtype=bool))


def test_float_mask_is_refused():
    with pytest.raises(TypeError, match=re.escape(
        "mask has dtype float64; expected a boolean array (True where attention is allowed)"
    )):
        scaled_dot_product_attention(**sdpa_args(), mask=np.ones((3, 5)))


def test_integer_mask_with_a_two_is_refused():
    mask = np.ones((3, 5), dtype=int)
    mask[0, 0] = 2
    with pytest.raises(ValueError, match=r"^mask has integer values other than 0 and 1; expected a boolean array$"):
        scaled_dot_product_attention(**sdpa_args(), mask=mask)


def test_mask_batch_dimensions_that_do_not_broadcast_are_refused():
    with pytest.raises(ValueError, match=re.escape(
        "the leading (batch, head) dimensions do not broadcast: q has (2,), k has (2,), v has (2,), mask has (3,)"
    )):
        scaled_dot_product_attention(np.ones((2, 3, 4)), np.ones((2, 5, 4)), np.ones((2, 5, 2)),
                                     mask=np.ones((3, 3, 5), dtype=bool))


def test_batch_dimensions_that_do_not_broadcast_are_refused():
    with pytest.raises(ValueError, match=re.escape(
        "the leading (batch, head) dimensions do not broadcast: q has (2,), k has (3,), v has ()"
    )):
        scaled_dot_product_attention(np.ones((2, 3, 4)), np.ones((3, 5, 4)), np.ones((5, 2)))
    with pytest.raises(ValueError, match=re.escape(
        "the leading (batch, head) dimensions do not broadcast: q has (2, 4), k has (3, 4)"
    )):
        attention_scores(np.ones((2, 4, 3, 4)), np.ones((3, 4, 5, 4)))


@pytest.mark.parametrize("name", ["q", "k", "v"])
@pytest.mark.parametrize(("bad", "label"), [(np.nan, "NaN"), (np.inf, r"\+inf"), (-np.inf, "-inf")])
def test_non_finite_inputs_are_refused_naming_argument_and_index(name, bad, label):
    array = sdpa_args()[name].copy()
    array[1, 0] = bad
    with pytest.raises(ValueError, match=rf"^{name} contains {label} at index \(1, 0\); attention inputs must be finite"):
        scaled_dot_product_attention(**sdpa_args(**{name: array}))


def test_negative_infinity_in_q_points_to_the_mask_argument():
    q = np.ones((3, 4))
    q[0, 1] = -np.inf
    with pytest.raises(ValueError, match=re.escape("(to exclude positions, pass mask=)")):
        scaled_dot_product_attention(**sdpa_args(q=q))


@pytest.mark.parametrize("name", ["q", "k", "v"])
@pytest.mark.parametrize(("dtype", "label"), [(np.bool_, "bool"), (np.complex128, "complex128"), ("U1", "<U1")])
def test_non_real_dtypes_are_refused(name, dtype, label):
    array = sdpa_args()[name].astype(int).astype(dtype)  # ones as True, 1+0j or "1"
    with pytest.raises(TypeError, match=rf"^{name} has dtype {re.escape(label)}; expected real numbers"):
        scaled_dot_product_attention(**sdpa_args(**{name: array}))


@pytest.mark.parametrize("name", ["q", "k", "v"])
def test_ragged_lists_are_refused(name):
    with pytest.raises(TypeError, match=rf"^{name} could not be read as a rectangular array"):
        scaled_dot_product_attention(**sdpa_args(**{name: [[1.0, 2.0], [3.0]]}))


@pytest.mark.parametrize(("name", "layout"), [("q", "(..., n_q, d_k)"), ("k", "(..., n_k, d_k)"),
                                              ("v", "(..., n_k, d_v)")])
def test_inputs_with_fewer_than_two_dimensions_are_refused(name, layout):
    with pytest.raises(ValueError, match=re.escape(
        f"{name} has shape (4,) but needs at least 2 dimensions, laid out as {layout}"
    )):
        scaled_dot_product_attention(**sdpa_args(**{name: np.ones(4)}))


def test_scalar_query_is_refused():
    with pytest.raises(ValueError, match=re.escape("q has shape () but needs at least 2 dimensions")):
        attention_scores(1.0, np.ones((5, 4)))


@pytest.mark.parametrize("scale", [0, 0.0, -1.0, -2, float("nan"), float("inf"), np.float64(-0.5)])
def test_scale_that_is_not_positive_and_finite_is_refused(scale):
    message = rf"^scale must be a positive finite number, got {re.escape(repr(scale))}$"
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(**sdpa_args(), scale=scale)
    with pytest.raises(ValueError, match=message):
        attention_scores(np.ones((3, 4)), np.ones((5, 4)), scale=scale)


@pytest.mark.parametrize("scale", [True, np.True_, "2", [1.0], 1j])
def test_scale_that_is_not_a_real_number_is_refused(scale):
    message = rf"^scale must be a real number, got {re.escape(repr(scale))}$"
    with pytest.raises(TypeError, match=message):
        scaled_dot_product_attention(**sdpa_args(), scale=scale)
    with pytest.raises(TypeError, match=message):
        attention_scores(np.ones((3, 4)), np.ones((5, 4)), scale=scale)


@pytest.mark.parametrize("scale", [2, np.int32(2), np.float32(0.5), 0.25])
def test_numpy_and_python_numbers_are_accepted_as_scale(scale):
    scores = attention_scores(np.ones((1, 4)), np.ones((1, 4)), scale=scale)
    np.testing.assert_allclose(scores, [[4.0 * float(scale)]], rtol=1e-7)


# --- dtypes of the computation -------------------------------------------------------------------


def test_float16_inputs_are_computed_in_float32_so_large_dot_products_do_not_overflow():
    q = np.full((2, 64), 40.0, dtype=np.float16)  # q.k = 64 * 1600 = 102400 > float16 max 65504
    out, weights = scaled_dot_product_attention(q, q, np.eye(2, dtype=np.float16))
    assert out.dtype == np.float32 and weights.dtype == np.float32
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(weights, 0.5)


def test_mixed_float32_and_float64_inputs_are_computed_in_float64():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 3, 4)).astype(np.float32)  # (n, d) each
    v = rng.standard_normal((3, 5))  # (n, d_v), float64
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.dtype == np.float64 and weights.dtype == np.float64
    np.testing.assert_allclose(out, weights @ v, rtol=1e-12)


def test_scores_that_overflow_float32_raise_a_clear_error_instead_of_nan():
    q = np.full((2, 4), 1e20, dtype=np.float32)  # q.k = 4e40 > float32 max 3.4e38
    with pytest.raises(ValueError, match=r"the scores overflowed to inf or NaN in float32"):
        scaled_dot_product_attention(q, q, np.ones((2, 3), dtype=np.float32))


def test_scores_that_overflow_to_minus_inf_in_every_allowed_position_raise_even_with_a_mask():
    # every score of row 0 is -1e60 in float32, i.e. -inf: the weights are unknown, not "masked"
    q = np.array([[1e30], [1.0]], dtype=np.float32)
    k = np.array([[-1e30], [-1e30]], dtype=np.float32)
    v = np.ones((2, 3), dtype=np.float32)
    for mask in (None, np.ones((2, 2), dtype=bool), np.array([[True, False], [True, True]])):
        with pytest.raises(ValueError, match=r"the scores overflowed to inf or NaN in float32"):
            scaled_dot_product_attention(q, k, v, mask=mask)


def test_a_row_whose_overflowing_scores_are_all_masked_out_is_a_fully_masked_row():
    q = np.array([[1e30], [1.0]], dtype=np.float32)
    k = np.array([[-1e30], [-1e30]], dtype=np.float32)
    v = np.ones((2, 3), dtype=np.float32)
    out, weights = scaled_dot_product_attention(q, k, v, mask=np.array([[False, False], [True, True]]))
    np.testing.assert_array_equal(weights, [[0, 0], [0.5, 0.5]])
    np.testing.assert_array_equal(out, [[0, 0, 0], [1, 1, 1]])
