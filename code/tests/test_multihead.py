"""Tests of attnbook.multihead: split/merge, head independence, masks, parameter counts, the torch layout, errors."""

import re

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from hypothesis.extra.numpy import arrays

from attnbook import (
    AttentionResult,
    MultiHeadWeights,
    causal_mask,
    init_multi_head_weights,
    merge_heads,
    multi_head_attention,
    multi_head_weights_from_torch,
    padding_mask,
    scaled_dot_product_attention,
    self_attention,
    split_heads,
)

FINITE = st.floats(-5.0, 5.0, allow_nan=False, allow_infinity=False)


def random_weights(d_model, seed=0, bias=True):
    """Random weights with non-zero biases (init_multi_head_weights sets them to 0)."""
    rng = np.random.default_rng(seed)
    w_q, w_k, w_v, w_o = rng.standard_normal((4, d_model, d_model)) / np.sqrt(d_model)  # (d_model, d_model) each
    b_q, b_k, b_v, b_o = rng.standard_normal((4, d_model)) if bias else np.zeros((4, d_model))  # (d_model,) each
    return MultiHeadWeights(w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o)


def random_inputs(shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape)


def loop_over_heads(query, key, value, w, n_heads, mask=None):
    """Oracle: one scaled_dot_product_attention per head on column blocks, concatenated, then W_O."""
    q_full = query @ w.w_q + w.b_q  # (..., n_q, d_model)
    k_full = key @ w.w_k + w.b_k  # (..., n_k, d_model)
    v_full = value @ w.w_v + w.b_v  # (..., n_k, d_model)
    d_head = q_full.shape[-1] // n_heads
    outputs, weights = [], []
    for i in range(n_heads):
        block = slice(i * d_head, (i + 1) * d_head)
        out_i, w_i = scaled_dot_product_attention(q_full[..., block], k_full[..., block], v_full[..., block],
                                                  mask=mask)
        outputs.append(out_i)  # (..., n_q, d_head)
        weights.append(w_i)  # (..., n_q, n_k)
    concat = np.concatenate(outputs, axis=-1)  # (..., n_q, d_model)
    return concat @ w.w_o + w.b_o, np.stack(weights, axis=-3)  # (..., n_q, d_model), (..., h, n_q, n_k)


# --- split_heads and merge_heads ------------------------------------------------------------------


def test_split_heads_gives_head_i_the_columns_i_times_d_head_onwards():
    x = np.arange(24.0).reshape(2, 12)  # (n, d_model) = (2, 12)
    heads = split_heads(x, 3)  # (h, n, d_head) = (3, 2, 4)
    assert heads.shape == (3, 2, 4)
    for i in range(3):
        np.testing.assert_array_equal(heads[i], x[:, 4 * i:4 * (i + 1)])


def test_split_heads_keeps_leading_batch_dimensions():
    x = random_inputs((2, 3, 5, 6))  # (batch1, batch2, n, d_model)
    heads = split_heads(x, 2)
    assert heads.shape == (2, 3, 2, 5, 3)
    np.testing.assert_array_equal(heads[1, 2, 1], x[1, 2, :, 3:])


def test_one_head_is_the_whole_width():
    x = random_inputs((4, 6))
    np.testing.assert_array_equal(split_heads(x, 1)[0], x)


def test_d_model_heads_of_width_one_are_the_single_columns():
    x = random_inputs((4, 6))
    heads = split_heads(x, 6)  # (6, 4, 1)
    np.testing.assert_array_equal(heads[..., 0], x.T)


@st.composite
def splittable(draw):
    """An array (..., n, h * d_head) and its number of heads h."""
    lead = draw(st.lists(st.integers(1, 3), max_size=2))
    n, h, d_head = draw(st.integers(1, 5)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    x = draw(arrays(np.float64, (*lead, n, h * d_head), elements=FINITE))
    return x, h


@given(splittable())
def test_merge_undoes_split(case):
    x, h = case
    np.testing.assert_array_equal(merge_heads(split_heads(x, h)), x)


@st.composite
def head_stacks(draw):
    """An array (..., h, n, d_head)."""
    lead = draw(st.lists(st.integers(1, 3), max_size=2))
    shape = (*lead, draw(st.integers(1, 4)), draw(st.integers(1, 5)), draw(st.integers(1, 4)))
    return draw(arrays(np.float64, shape, elements=FINITE))


@given(head_stacks())
def test_split_undoes_merge(heads):
    h = heads.shape[-3]
    np.testing.assert_array_equal(split_heads(merge_heads(heads), h), heads)


@given(splittable())
def test_split_is_a_permutation_of_the_entries(case):
    x, h = case
    np.testing.assert_array_equal(np.sort(split_heads(x, h), axis=None), np.sort(x, axis=None))


def test_split_and_merge_accept_nested_lists_and_integers():
    heads = split_heads([[1, 2, 3, 4]], 2)  # (2, 1, 2)
    assert heads.dtype == np.float64 and heads.tolist() == [[[1.0, 2.0]], [[3.0, 4.0]]]
    assert merge_heads(heads.tolist()).tolist() == [[1.0, 2.0, 3.0, 4.0]]


# --- multi_head_attention equals a loop over heads --------------------------------------------------


@pytest.mark.parametrize("n_heads", [1, 2, 3, 6])
def test_multi_head_attention_equals_a_loop_over_column_blocks(n_heads):
    w = random_weights(6, seed=n_heads)
    x = random_inputs((5, 6), seed=n_heads + 10)  # (n, d_model)
    out, weights = multi_head_attention(x, x, x, w, n_heads)
    expected_out, expected_weights = loop_over_heads(x, x, x, w, n_heads)
    assert out.shape == (5, 6) and weights.shape == (n_heads, 5, 5)
    np.testing.assert_allclose(out, expected_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-12, atol=1e-14)


def test_cross_attention_with_batches_equals_the_loop():
    w = random_weights(8, seed=3)
    query = random_inputs((2, 3, 8), seed=4)  # (batch, n_q, d_model)
    memory = random_inputs((2, 7, 8), seed=5)  # (batch, n_k, d_model)
    out, weights = multi_head_attention(query, memory, memory, w, n_heads=4)
    assert out.shape == (2, 3, 8) and weights.shape == (2, 4, 3, 7)
    expected_out, expected_weights = loop_over_heads(query, memory, memory, w, 4)
    np.testing.assert_allclose(out, expected_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-12, atol=1e-14)


def test_result_is_an_attention_result():
    w = init_multi_head_weights(4, seed=0)
    result = multi_head_attention(np.ones((2, 4)), np.ones((2, 4)), np.ones((2, 4)), w, 2)
    assert isinstance(result, AttentionResult)


def test_one_head_is_self_attention_followed_by_the_output_projection():
    w = random_weights(5, seed=6, bias=False)
    x = random_inputs((4, 5), seed=7)
    out, weights = multi_head_attention(x, x, x, w, n_heads=1)
    single_out, single_weights = self_attention(x, w.w_q, w.w_k, w.w_v)
    np.testing.assert_allclose(weights[0], single_weights, rtol=1e-12)
    np.testing.assert_allclose(out, single_out @ w.w_o, rtol=1e-12, atol=1e-12)


def test_every_head_has_rows_that_sum_to_one():
    w = random_weights(8, seed=8)
    x = random_inputs((3, 6, 8), seed=9)
    _, weights = multi_head_attention(x, x, x, w, n_heads=4)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)
    assert np.all(weights >= 0)


def test_output_is_the_sum_over_heads_of_head_outputs_times_row_blocks_of_w_o():
    w = random_weights(6, seed=10)
    x = random_inputs((4, 6), seed=11)
    out, weights = multi_head_attention(x, x, x, w, n_heads=3)
    v_heads = split_heads(x @ w.w_v + w.b_v, 3)  # (h, n, d_head)
    head_outputs = weights @ v_heads  # (h, n, d_head)
    total = sum(head_outputs[i] @ w.w_o[2 * i:2 * (i + 1)] for i in range(3)) + w.b_o  # (n, d_model)
    np.testing.assert_allclose(out, total, rtol=1e-12, atol=1e-12)


# --- head independence ------------------------------------------------------------------------------


def test_changing_one_heads_projections_changes_only_that_heads_weights():
    w = random_weights(6, seed=12)
    x = random_inputs((5, 6), seed=13)
    _, before = multi_head_attention(x, x, x, w, n_heads=3)
    changed = w._replace(w_q=w.w_q.copy(), w_k=w.w_k.copy(), b_q=w.b_q.copy())
    changed.w_q[:, 2:4] = random_inputs((6, 2), seed=14)  # head 1's query columns
    changed.w_k[:, 2:4] *= 3.0  # head 1's key columns
    changed.b_q[2:4] = 5.0
    _, after = multi_head_attention(x, x, x, changed, n_heads=3)
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[2], before[2])
    assert not np.allclose(after[1], before[1])


def test_changing_one_heads_value_columns_changes_only_its_block_of_the_concatenation():
    w = random_weights(6, seed=15)._replace(w_o=np.eye(6), b_o=np.zeros(6))  # output = concatenation
    x = random_inputs((5, 6), seed=16)
    before, _ = multi_head_attention(x, x, x, w, n_heads=3)
    changed = w._replace(w_v=w.w_v.copy())
    changed.w_v[:, 4:6] += 1.0  # head 2's value columns
    after, _ = multi_head_attention(x, x, x, changed, n_heads=3)
    np.testing.assert_array_equal(after[:, :4], before[:, :4])
    assert not np.allclose(after[:, 4:], before[:, 4:])


def test_permuting_the_heads_consistently_leaves_the_output_unchanged():
    w = random_weights(6, seed=17)
    x = random_inputs((5, 6), seed=18)
    out, weights = multi_head_attention(x, x, x, w, n_heads=3)
    order = [2, 0, 1]
    columns = np.concatenate([np.arange(2 * i, 2 * i + 2) for i in order])  # (d_model,)
    permuted = MultiHeadWeights(w.w_q[:, columns], w.w_k[:, columns], w.w_v[:, columns], w.w_o[columns],
                                w.b_q[columns], w.b_k[columns], w.b_v[columns], w.b_o)
    out_p, weights_p = multi_head_attention(x, x, x, permuted, n_heads=3)
    np.testing.assert_allclose(out_p, out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weights_p, weights[order], rtol=1e-12)


def test_a_head_with_doubled_keys_is_the_other_head_at_half_the_temperature():
    block = random_inputs((6, 3), seed=19)  # (d_model, d_head)
    w = random_weights(6, seed=20, bias=False)._replace(w_q=np.hstack([block, block]),
                                                        w_k=np.hstack([block, 2 * block]))
    x = random_inputs((4, 6), seed=21)
    _, weights = multi_head_attention(x, x, x, w, n_heads=2)
    # head 2's keys are twice head 1's: the same as head 1 at temperature 1/2
    _, expected = scaled_dot_product_attention(x @ block, x @ block, x, scale=2 / np.sqrt(3))
    np.testing.assert_allclose(weights[1], expected, rtol=1e-12)
    assert not np.allclose(weights[0], weights[1])


# --- masks are shared by all heads ---------------------------------------------------------------


def test_a_causal_mask_applies_to_every_head():
    w = random_weights(8, seed=22)
    x = random_inputs((2, 5, 8), seed=23)
    out, weights = multi_head_attention(x, x, x, w, n_heads=4, mask=causal_mask(5))
    assert weights.shape == (2, 4, 5, 5)
    assert np.all(np.triu(weights, k=1) == 0)
    expected_out, expected_weights = loop_over_heads(x, x, x, w, 4, mask=causal_mask(5))
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out, expected_out, rtol=1e-12, atol=1e-12)


def test_a_padding_mask_with_a_batch_axis_applies_to_every_head_of_its_sequence():
    w = random_weights(6, seed=24)
    x = random_inputs((2, 4, 6), seed=25)  # (batch, n, d_model)
    mask = padding_mask([4, 2], 4)  # (batch, 1, n)
    out, weights = multi_head_attention(x, x, x, w, n_heads=3, mask=mask)
    assert weights.shape == (2, 3, 4, 4)
    assert np.all(weights[1, :, :, 2:] == 0) and np.all(weights[0] > 0)
    expected_out, expected_weights = loop_over_heads(x, x, x, w, 3, mask=mask)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out, expected_out, rtol=1e-12, atol=1e-12)


def test_padded_keys_do_not_influence_the_real_positions():
    w = random_weights(6, seed=26)
    x = random_inputs((1, 4, 6), seed=27)
    mask = padding_mask([2], 4)  # (1, 1, 4)
    out, _ = multi_head_attention(x, x, x, w, n_heads=2, mask=mask)
    changed = x.copy()
    changed[0, 2:] = 100.0  # rewrite the padding
    out_changed, _ = multi_head_attention(changed, changed, changed, w, n_heads=2, mask=mask)
    np.testing.assert_allclose(out_changed[0, :2], out[0, :2], rtol=1e-12, atol=1e-12)
    unpadded, _ = multi_head_attention(x[:, :2], x[:, :2], x[:, :2], w, n_heads=2)
    np.testing.assert_allclose(out[0, :2], unpadded[0], rtol=1e-12, atol=1e-12)


def test_a_per_sequence_mask_of_shape_batch_n_q_n_k_differs_between_sequences():
    w = random_weights(4, seed=28)
    x = random_inputs((2, 3, 4), seed=29)
    mask = np.stack([causal_mask(3), np.ones((3, 3), dtype=bool)])  # (batch, n_q, n_k)
    _, weights = multi_head_attention(x, x, x, w, n_heads=2, mask=mask)
    assert np.all(np.triu(weights[0], k=1) == 0) and np.all(weights[1] > 0)


def test_an_integer_zero_one_mask_is_accepted():
    w = random_weights(4, seed=30)
    x = random_inputs((3, 4), seed=31)
    _, by_int = multi_head_attention(x, x, x, w, 2, mask=causal_mask(3).astype(int))
    _, by_bool = multi_head_attention(x, x, x, w, 2, mask=causal_mask(3))
    np.testing.assert_array_equal(by_int, by_bool)


def test_a_fully_masked_query_gets_zero_weights_in_every_head():
    w = random_weights(4, seed=32)
    x = random_inputs((3, 4), seed=33)
    mask = causal_mask(3).copy()
    mask[0] = False
    out, weights = multi_head_attention(x, x, x, w, 2, mask=mask)
    assert np.all(weights[:, 0] == 0)
    np.testing.assert_allclose(out[0], w.b_o)  # a zero concatenation, then W_O and its bias


# --- init_multi_head_weights --------------------------------------------------------------------


def test_init_is_seeded_glorot_uniform_with_zero_biases():
    a, b = init_multi_head_weights(16, seed=3), init_multi_head_weights(16, seed=3)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.w_q, init_multi_head_weights(16, seed=4).w_q)
    limit = np.sqrt(6 / 32)
    for matrix in a[:4]:
        assert matrix.shape == (16, 16) and np.all(np.abs(matrix) <= limit)
    for bias in a[4:]:
        assert bias.shape == (16,) and np.all(bias == 0)


def test_init_biases_are_separate_arrays():
    w = init_multi_head_weights(4)
    w.b_q[0] = 1.0
    assert w.b_k[0] == 0 and w.b_v[0] == 0 and w.b_o[0] == 0


@pytest.mark.parametrize("d_model, error", [(0, ValueError), (2.0, TypeError), (True, TypeError)])
def test_init_refuses_a_bad_width(d_model, error):
    with pytest.raises(error, match=r"^d_model must be"):
        init_multi_head_weights(d_model)


# --- the PyTorch layout -----------------------------------------------------------------------------


def test_torch_layout_is_stacked_q_k_v_rows_and_transposed():
    d = 2
    a = np.array([[1.0, 2.0], [3.0, 4.0]])  # W_Q as torch stores it: y = x a^T
    b = np.array([[5.0, 6.0], [7.0, 8.0]])  # W_K
    c = np.array([[9.0, 10.0], [11.0, 12.0]])  # W_V
    o = np.array([[0.0, 1.0], [1.0, 0.0]])  # out_proj.weight
    in_w = np.vstack([a, b, c])  # (3 d, d)
    in_b = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])  # (3 d,)
    out_b = np.array([-1.0, 1.0])  # (d,)
    w = multi_head_weights_from_torch(in_w, in_b, o, out_b)
    assert isinstance(w, MultiHeadWeights)
    assert w.w_q.tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert w.w_k.tolist() == [[5.0, 7.0], [6.0, 8.0]]
    assert w.w_v.tolist() == [[9.0, 11.0], [10.0, 12.0]]
    assert w.w_o.tolist() == [[0.0, 1.0], [1.0, 0.0]]
    assert w.b_q.tolist() == [0.1, 0.2] and w.b_k.tolist() == [0.3, 0.4] and w.b_v.tolist() == [0.5, 0.6]
    assert w.b_o.tolist() == [-1.0, 1.0] and w.w_q.shape == (d, d)


def test_converted_weights_reproduce_torch_style_projections():
    rng = np.random.default_rng(34)
    in_w, in_b = rng.standard_normal((12, 4)), rng.standard_normal(12)  # (3 d, d), (3 d,)
    out_w, out_b = rng.standard_normal((4, 4)), rng.standard_normal(4)  # (d, d), (d,)
    x = rng.standard_normal((3, 4))  # (n, d)
    w = multi_head_weights_from_torch(in_w, in_b, out_w, out_b)
    torch_style = x @ in_w.T + in_b  # (n, 3 d): [q | k | v], as torch's F.linear computes it
    np.testing.assert_allclose(np.hstack([x @ w.w_q + w.b_q, x @ w.w_k + w.b_k, x @ w.w_v + w.b_v]),
                               torch_style, rtol=1e-12)
    np.testing.assert_allclose(x @ w.w_o + w.b_o, x @ out_w.T + out_b, rtol=1e-12)


def test_torch_conversion_accepts_nested_lists():
    w = multi_head_weights_from_torch(np.ones((3, 1)).tolist(), [0, 0, 0], [[2]], [1])
    assert w.w_o.tolist() == [[2.0]] and w.b_o.tolist() == [1.0]


@pytest.mark.parametrize("shape", [(8, 4), (12,), (4, 12), (3, 4, 4)])
def test_torch_conversion_refuses_a_bad_in_proj_weight(shape):
    with pytest.raises(ValueError, match=re.escape(f"in_proj_weight has shape {shape}; expected (3 d_model, d_model)")):
        multi_head_weights_from_torch(np.ones(shape), np.zeros(12), np.eye(4), np.zeros(4))


def test_torch_conversion_refuses_a_bad_in_proj_bias():
    with pytest.raises(ValueError, match=re.escape("in_proj_bias has shape (4,); expected (12,)")):
        multi_head_weights_from_torch(np.ones((12, 4)), np.zeros(4), np.eye(4), np.zeros(4))


@pytest.mark.parametrize("out_w, out_b", [((4, 3), (4,)), ((4, 4), (3,)), ((4, 4), (1, 4))])
def test_torch_conversion_refuses_a_bad_out_proj(out_w, out_b):
    message = f"out_proj has weight {out_w} and bias {out_b}; expected (4, 4) and (4,)"
    with pytest.raises(ValueError, match=re.escape(message)):
        multi_head_weights_from_torch(np.ones((12, 4)), np.zeros(12), np.ones(out_w), np.ones(out_b))


def test_torch_conversion_refuses_nan_naming_the_argument():
    bad = np.ones((4, 4))
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match=re.escape("out_proj_weight contains NaN at index (1, 2)")):
        multi_head_weights_from_torch(np.ones((12, 4)), np.zeros(12), bad, np.zeros(4))


# --- error messages of split_heads, merge_heads and multi_head_attention ----------------------


def test_split_refuses_heads_that_do_not_divide_the_width():
    with pytest.raises(ValueError, match=re.escape(
            "d_model = 10 is not divisible by n_heads = 4; each head needs d_model / n_heads dimensions")):
        split_heads(np.ones((3, 10)), 4)


@pytest.mark.parametrize("n_heads, error, message", [
    (0, ValueError, "n_heads must be at least 1, got 0"),
    (-2, ValueError, "n_heads must be at least 1, got -2"),
    (2.0, TypeError, "n_heads must be an integer, got 2.0"),
    (True, TypeError, "n_heads must be an integer, got True"),
    ("2", TypeError, "n_heads must be an integer, got '2'"),
])
def test_split_refuses_a_bad_number_of_heads(n_heads, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        split_heads(np.ones((3, 4)), n_heads)


def test_split_accepts_numpy_integers():
    assert split_heads(np.ones((3, 4)), np.int64(2)).shape == (2, 3, 2)


def test_split_refuses_a_single_vector():
    with pytest.raises(ValueError, match=re.escape(
            "x has shape (4,) but needs at least 2 dimensions, laid out as (..., n, d_model)")):
        split_heads(np.ones(4), 2)


def test_split_refuses_non_numbers():
    with pytest.raises(TypeError, match=r"^x has dtype bool"):
        split_heads(np.ones((2, 4), dtype=bool), 2)


def test_merge_refuses_fewer_than_three_dimensions():
    with pytest.raises(ValueError, match=re.escape(
            "x has shape (3, 4) but needs at least 3 dimensions, laid out as (..., n_heads, n, d_head)")):
        merge_heads(np.ones((3, 4)))


def test_attention_refuses_key_of_another_width():
    w = init_multi_head_weights(6, seed=0)
    with pytest.raises(ValueError, match=re.escape(
            "query has shape (2, 6) but key has shape (3, 4); both need the model width d_model")):
        multi_head_attention(np.ones((2, 6)), np.ones((3, 4)), np.ones((3, 6)), w, 2)


def test_attention_refuses_value_of_another_width():
    w = init_multi_head_weights(6, seed=0)
    with pytest.raises(ValueError, match=re.escape("query has shape (2, 6) but value has shape (3, 5);")):
        multi_head_attention(np.ones((2, 6)), np.ones((3, 6)), np.ones((3, 5)), w, 2)


def test_attention_refuses_keys_and_values_of_different_lengths():
    w = init_multi_head_weights(6, seed=0)
    with pytest.raises(ValueError, match=re.escape(
            "key has shape (3, 6) but value has shape (4, 6); they need the same number of positions n_k")):
        multi_head_attention(np.ones((2, 6)), np.ones((3, 6)), np.ones((4, 6)), w, 2)


@pytest.mark.parametrize("name", ["query", "key", "value"])
def test_attention_refuses_single_vectors_naming_the_argument(name):
    w = init_multi_head_weights(4, seed=0)
    args = {"query": np.ones((2, 4)), "key": np.ones((2, 4)), "value": np.ones((2, 4))}
    args[name] = np.ones(4)
    with pytest.raises(ValueError, match=f"^{name} has shape \\(4,\\) but needs at least 2 dimensions"):
        multi_head_attention(args["query"], args["key"], args["value"], w, 2)


def test_attention_refuses_a_width_the_heads_do_not_divide():
    w = init_multi_head_weights(6, seed=0)
    with pytest.raises(ValueError, match=r"^d_model = 6 is not divisible by n_heads = 4"):
        multi_head_attention(np.ones((2, 6)), np.ones((2, 6)), np.ones((2, 6)), w, 4)


def test_attention_refuses_weights_that_are_not_multi_head_weights():
    with pytest.raises(TypeError, match=re.escape(
            "weights must be a MultiHeadWeights (see init_multi_head_weights), got tuple")):
        multi_head_attention(np.ones((2, 4)), np.ones((2, 4)), np.ones((2, 4)), tuple(range(8)), 2)


@pytest.mark.parametrize("weights, message", [
    (init_multi_head_weights(8, seed=0), "weights.w_q has shape (8, 8) but the inputs have d_model = 4; expected (4, 4)"),
    (init_multi_head_weights(4, seed=0)._replace(b_v=np.zeros(3)),
     "weights.b_v has shape (3,) but the inputs have d_model = 4; expected (4,)"),
], ids=["weights for another width", "a bias of the wrong shape"])
def test_attention_refuses_weights_that_do_not_fit_the_inputs_naming_the_field(weights, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        multi_head_attention(np.ones((2, 4)), np.ones((2, 4)), np.ones((2, 4)), weights, 2)


def test_attention_refuses_nan_in_the_weights_naming_the_field():
    w = init_multi_head_weights(4, seed=0)
    w_o = w.w_o.copy()
    w_o[0, 3] = np.nan
    with pytest.raises(ValueError, match=re.escape("w_o contains NaN at index (0, 3)")):
        multi_head_attention(np.ones((2, 4)), np.ones((2, 4)), np.ones((2, 4)), w._replace(w_o=w_o), 2)


def test_attention_refuses_a_mask_of_the_wrong_size():
    w = init_multi_head_weights(4, seed=0)
    with pytest.raises(ValueError, match=r"^mask has shape \(3, 3\) but the weights have shape \(\.\.\., 2, 2\)"):
        multi_head_attention(np.ones((2, 4)), np.ones((2, 4)), np.ones((2, 4)), w, 2, mask=causal_mask(3))


def test_attention_refuses_a_float_mask():
    w = init_multi_head_weights(4, seed=0)
    with pytest.raises(TypeError, match=r"^mask has dtype float64; expected a boolean array"):
        multi_head_attention(np.ones((2, 4)), np.ones((2, 4)), np.ones((2, 4)), w, 2, mask=np.ones((2, 2)))


def test_a_four_dimensional_mask_gives_each_head_its_own_mask():
    w = init_multi_head_weights(8, seed=3)
    x = np.random.default_rng(3).standard_normal((2, 5, 8))  # (batch, n, d_model)
    per_head = np.stack([np.broadcast_to(causal_mask(5), (2, 5, 5)),
                         np.ones((2, 5, 5), dtype=bool)], axis=1)  # (batch, h, n, n)
    out, weights = multi_head_attention(x, x, x, w, n_heads=2, mask=per_head)
    assert out.shape == (2, 5, 8) and weights.shape == (2, 2, 5, 5)
    assert np.all(np.triu(weights[:, 0], k=1) == 0) and np.all(weights[:, 1] > 0)


def test_a_mask_with_five_dimensions_is_refused():
    w = init_multi_head_weights(8, seed=3)
    x = np.ones((1, 5, 8))
    with pytest.raises(ValueError, match=r"mask has shape \(1, 1, 1, 5, 5\); expected"):
        multi_head_attention(x, x, x, w, n_heads=2, mask=np.ones((1, 1, 1, 5, 5), dtype=bool))


# --- projections that overflow, and errors that name the weights -------------------------------------


def test_a_head_projection_that_overflows_is_refused_naming_the_argument_and_the_weights():
    w = init_multi_head_weights(4, seed=0)
    big = MultiHeadWeights(*(np.full_like(a, 100.0, dtype=np.float16) for a in w))
    x = np.full((2, 4), 300.0, dtype=np.float16)
    with pytest.raises(ValueError, match=re.escape("query @ weights.w_q + weights.b_q overflowed in float16")):
        multi_head_attention(x, x, x, big, n_heads=2)


def test_an_output_projection_that_overflows_is_refused_instead_of_returning_inf():
    w = MultiHeadWeights(*(a.astype(np.float32) for a in init_multi_head_weights(4, seed=0)))
    x = np.ones((2, 4), dtype=np.float32)
    ones = np.ones((4, 4), dtype=np.float32)
    big = w._replace(w_q=ones, w_k=ones, w_v=ones * 1e30, w_o=ones * 1e30)  # each head outputs 4e30
    with pytest.raises(ValueError, match=re.escape("the output projection heads @ weights.w_o + weights.b_o "
                                                   "overflowed in float32")):
        multi_head_attention(x, x, x, big, n_heads=2)


def test_a_weight_with_nan_is_named_as_a_field_of_weights():
    w = init_multi_head_weights(4, seed=0)
    bad = w._replace(b_k=np.array([0.0, np.nan, 0.0, 0.0]))
    with pytest.raises(ValueError, match=re.escape("weights.b_k contains NaN at index (1,)")):
        multi_head_attention(np.ones((2, 4)), np.ones((2, 4)), np.ones((2, 4)), bad, n_heads=2)
