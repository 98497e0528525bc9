"""More tests of attnbook.masks: the padding, banded and graph masks, their errors, their properties,
and what they guarantee inside attention (a padded batch equals the sequences run alone)."""

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from hypothesis.extra.numpy import arrays

from attnbook import (
    banded_mask,
    causal_mask,
    graph_mask,
    padding_mask,
    scaled_dot_product_attention,
    self_attention,
)

FINITE = st.floats(-3.0, 3.0, allow_nan=False, allow_infinity=False)
LENGTHS = st.lists(st.integers(1, 6), min_size=1, max_size=4)


# --- padding_mask: shapes and values ----------------------------------------------------------------


def test_padding_mask_marks_the_real_tokens_of_each_sequence():
    mask = padding_mask([3, 1, 4], 4)
    assert mask.dtype == np.bool_
    assert mask.shape == (3, 1, 4)
    assert mask.astype(int).tolist() == [[[1, 1, 1, 0]], [[1, 0, 0, 0]], [[1, 1, 1, 1]]]


def test_padding_mask_defaults_to_the_longest_length():
    np.testing.assert_array_equal(padding_mask([2, 5, 3]), padding_mask([2, 5, 3], 5))


def test_padding_mask_accepts_numpy_integer_lengths_of_any_width():
    for dtype in (np.int8, np.int32, np.int64, np.uint16):
        np.testing.assert_array_equal(padding_mask(np.array([2, 1], dtype=dtype), 3), padding_mask([2, 1], 3))


def test_padding_mask_with_a_tuple_of_lengths():
    np.testing.assert_array_equal(padding_mask((1, 2)), padding_mask([1, 2]))


def test_padding_mask_pads_beyond_the_longest_sequence_when_n_is_larger():
    assert padding_mask([2], 5).astype(int).tolist() == [[[1, 1, 0, 0, 0]]]


@given(lengths=LENGTHS, extra=st.integers(0, 3))
def test_padding_mask_entry_is_true_exactly_before_the_length(lengths, extra):
    n = max(lengths) + extra
    mask = padding_mask(lengths, n)
    assert mask.shape == (len(lengths), 1, n)
    for b, length in enumerate(lengths):
        assert mask[b, 0].tolist() == [j < length for j in range(n)]
        assert int(mask[b].sum()) == length  # one True per real token


@given(lengths=LENGTHS)
def test_padding_mask_rows_are_prefixes(lengths):
    # a padding mask never lets a later key in while shutting out an earlier one
    mask = padding_mask(lengths)[:, 0, :]  # (batch, n)
    assert np.all(mask[:, :-1] >= mask[:, 1:])


@given(lengths=LENGTHS)
def test_padding_mask_broadcasts_over_the_queries(lengths):
    n = max(lengths)
    full = np.broadcast_to(padding_mask(lengths), (len(lengths), n, n))  # (batch, n_q, n_k)
    for b, length in enumerate(lengths):
        assert np.all(full[b, :, :length]) and not np.any(full[b, :, length:])


# --- padding_mask: errors ---------------------------------------------------------------------------


def test_padding_mask_refuses_a_length_longer_than_n():
    with pytest.raises(ValueError, match=r"^lengths\[1\] = 5 is longer than the padded length n = 4$"):
        padding_mask([2, 5], 4)


@pytest.mark.parametrize("length, index", [([0], 0), ([3, 0], 1), ([2, -1], 1)])
def test_padding_mask_refuses_empty_or_negative_lengths(length, index):
    with pytest.raises(ValueError, match=rf"^lengths\[{index}\] must be at least 1, got "):
        padding_mask(length, 4)


@pytest.mark.parametrize("lengths, shape", [([], r"\(0,\)"), (3, r"\(\)"), ([[1, 2]], r"\(1, 2\)")])
def test_padding_mask_needs_a_non_empty_1d_list(lengths, shape):
    with pytest.raises(ValueError, match=rf"^lengths must be a non-empty 1-D list of sequence lengths, got shape {shape}$"):
        padding_mask(lengths)


@pytest.mark.parametrize("lengths, dtype", [([1.0, 2.0], "float64"), ([True], "bool"), (["2"], "<U1")])
def test_padding_mask_refuses_non_integer_lengths(lengths, dtype):
    with pytest.raises(TypeError, match=rf"^lengths must be integers, got dtype {dtype}$"):
        padding_mask(lengths)


@pytest.mark.parametrize("n", [2.0, "4", True])
def test_padding_mask_refuses_a_non_integer_n(n):
    with pytest.raises(TypeError, match=r"^n must be an integer, got "):
        padding_mask([1], n)


def test_padding_mask_refuses_n_below_one():
    with pytest.raises(ValueError, match=r"^n must be at least 1, got 0$"):
        padding_mask([1], 0)


# --- banded_mask: shapes and values -----------------------------------------------------------------


def test_banded_mask_of_width_one_is_tridiagonal():
    assert banded_mask(4, 1).astype(int).tolist() == [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]]


def test_banded_mask_of_width_zero_is_the_identity():
    np.testing.assert_array_equal(banded_mask(5, 0), np.eye(5, dtype=bool))


def test_causal_banded_mask_keeps_the_past_half():
    assert banded_mask(4, 2, causal=True).astype(int).tolist() == [
        [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1]]


@given(n=st.integers(1, 9), window=st.integers(0, 10))
def test_banded_mask_entry_is_true_exactly_within_the_window(n, window):
    mask = banded_mask(n, window)
    assert mask.shape == (n, n) and mask.dtype == np.bool_
    for i in range(n):
        assert mask[i].tolist() == [abs(i - j) <= window for j in range(n)]


@given(n=st.integers(1, 9), window=st.integers(0, 10))
def test_banded_mask_is_symmetric_and_contains_the_diagonal(n, window):
    mask = banded_mask(n, window)
    np.testing.assert_array_equal(mask, mask.T)
    assert np.all(np.diag(mask))


@given(n=st.integers(1, 9), window=st.integers(0, 10))
def test_causal_band_is_the_band_intersected_with_the_causal_mask(n, window):
    np.testing.assert_array_equal(banded_mask(n, window, causal=True), banded_mask(n, window) & causal_mask(n))


@given(n=st.integers(1, 9), window=st.integers(0, 10))
def test_band_equals_numpy_triangles(n, window):
    ones = np.ones((n, n), dtype=bool)
    np.testing.assert_array_equal(banded_mask(n, window), np.tril(ones, window) & np.triu(ones, -window))


@given(n=st.integers(1, 9), window=st.integers(0, 9))
def test_wider_bands_contain_narrower_ones(n, window):
    assert np.all(banded_mask(n, window) <= banded_mask(n, window + 1))


@given(n=st.integers(1, 9), extra=st.integers(0, 5))
def test_a_band_at_least_n_minus_one_wide_allows_everything(n, extra):
    assert np.all(banded_mask(n, n - 1 + extra))
    np.testing.assert_array_equal(banded_mask(n, n - 1 + extra, causal=True), causal_mask(n))


@given(n=st.integers(1, 12), window=st.integers(0, 12))
def test_banded_mask_keeps_at_most_2w_plus_1_keys_per_query(n, window):
    counts = banded_mask(n, window).sum(axis=1)  # (n,)
    assert np.all(counts <= 2 * window + 1) and np.all(counts >= 1)
    assert np.all(banded_mask(n, window, causal=True).sum(axis=1) <= window + 1)


def test_banded_mask_accepts_numpy_integers():
    np.testing.assert_array_equal(banded_mask(np.int64(4), np.int32(1)), banded_mask(4, 1))


# --- banded_mask: errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, -2])
def test_banded_mask_refuses_n_below_one(n):
    with pytest.raises(ValueError, match=rf"^n must be at least 1, got {n}$"):
        banded_mask(n, 1)


def test_banded_mask_refuses_a_negative_window():
    with pytest.raises(ValueError, match=r"^window must be at least 0, got -1$"):
        banded_mask(3, -1)


@pytest.mark.parametrize("window", [1.0, "1", None, True])
def test_banded_mask_refuses_a_non_integer_window(window):
    with pytest.raises(TypeError, match=r"^window must be an integer, got "):
        banded_mask(3, window)


@pytest.mark.parametrize("n", [3.0, "3", None])
def test_banded_mask_refuses_a_non_integer_n(n):
    with pytest.raises(TypeError, match=r"^n must be an integer, got "):
        banded_mask(n, 1)


# --- graph_mask: shapes and values ------------------------------------------------------------------


def test_graph_mask_follows_the_edges_and_adds_self_loops():
    path = [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    assert graph_mask(path).astype(int).tolist() == [[1, 1, 0], [1, 1, 1], [0, 1, 1]]


def test_graph_mask_without_self_loops_keeps_the_adjacency():
    path = [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    assert graph_mask(path, self_loops=False).astype(int).tolist() == path


def test_graph_mask_accepts_booleans():
    adjacency = np.array([[False, True], [False, False]])
    assert graph_mask(adjacency).tolist() == [[True, True], [False, True]]


def test_graph_mask_keeps_directed_edges_directed():
    # node 0 may attend to node 1, not the other way round: the mask is not symmetrised
    mask = graph_mask([[0, 1], [0, 0]], self_loops=False)
    assert mask[0, 1] and not mask[1, 0]


def test_graph_mask_of_a_path_is_the_band_of_width_one():
    n = 6
    path = np.eye(n, k=1, dtype=int) + np.eye(n, k=-1, dtype=int)  # (n, n)
    np.testing.assert_array_equal(graph_mask(path), banded_mask(n, 1))


def test_graph_mask_of_the_complete_graph_allows_everything():
    assert np.all(graph_mask(np.ones((4, 4), dtype=int) - np.eye(4, dtype=int)))


def test_graph_mask_does_not_change_its_input():
    adjacency = np.zeros((3, 3), dtype=bool)
    graph_mask(adjacency)
    assert not adjacency.any()


def test_graph_mask_without_self_loops_returns_a_new_array():
    adjacency = np.zeros((3, 3), dtype=bool)
    assert graph_mask(adjacency, self_loops=False) is not adjacency


@given(adjacency=arrays(np.bool_, st.integers(1, 6).map(lambda n: (n, n))))
def test_graph_mask_is_the_adjacency_or_the_identity(adjacency):
    n = adjacency.shape[0]
    np.testing.assert_array_equal(graph_mask(adjacency), adjacency | np.eye(n, dtype=bool))
    np.testing.assert_array_equal(graph_mask(adjacency, self_loops=False), adjacency)
    assert np.all(np.diag(graph_mask(adjacency)))


# --- graph_mask: errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("adjacency, shape", [([[0, 1, 0], [1, 0, 1]], r"\(2, 3\)"), ([1, 0], r"\(2,\)"),
                                              (np.zeros((2, 2, 2), dtype=int), r"\(2, 2, 2\)")])
def test_graph_mask_needs_a_square_matrix(adjacency, shape):
    with pytest.raises(ValueError, match=rf"^adjacency has shape {shape}; expected a square matrix \(n_nodes, n_nodes\)$"):
        graph_mask(adjacency)


def test_graph_mask_refuses_float_adjacency():
    with pytest.raises(TypeError, match=r"^adjacency has dtype float64; expected a boolean array"):
        graph_mask([[0.0, 1.0], [1.0, 0.0]])


def test_graph_mask_refuses_edge_weights_other_than_0_and_1():
    with pytest.raises(ValueError, match=r"^adjacency has integer values other than 0 and 1"):
        graph_mask([[0, 2], [1, 0]])


def test_graph_mask_refuses_ragged_lists():
    with pytest.raises(TypeError, match=r"^adjacency could not be read as a rectangular array"):
        graph_mask([[0, 1], [1]])


# --- inside attention -------------------------------------------------------------------------------


@given(lengths=LENGTHS, extra=st.integers(0, 2), seed=st.integers(0, 2**16))
def test_padded_batch_with_the_padding_mask_equals_each_sequence_alone(lengths, extra, seed):
    rng = np.random.default_rng(seed)
    d_k, d_v, n = 3, 2, max(lengths) + extra
    q = rng.standard_normal((len(lengths), n, d_k))  # (batch, n, d_k)
    k = rng.standard_normal((len(lengths), n, d_k))  # (batch, n, d_k)
    v = rng.standard_normal((len(lengths), n, d_v))  # (batch, n, d_v)
    out, weights = scaled_dot_product_attention(q, k, v, mask=padding_mask(lengths, n))
    for b, length in enumerate(lengths):
        alone, alone_weights = scaled_dot_product_attention(q[b, :length], k[b, :length], v[b, :length])
        np.testing.assert_allclose(out[b, :length], alone, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(weights[b, :length, :length], alone_weights, rtol=1e-12, atol=1e-12)
        assert np.all(weights[b, :, length:] == 0)  # no query, real or padded, looks at padding


@given(lengths=LENGTHS, seed=st.integers(0, 2**16))
def test_padding_mask_makes_the_padding_content_irrelevant(lengths, seed):
    rng = np.random.default_rng(seed)
    n, d = max(lengths) + 1, 3
    x = rng.standard_normal((len(lengths), n, d))  # (batch, n, d)
    x2 = x.copy()
    for b, length in enumerate(lengths):
        x2[b, length:] = rng.standard_normal((n - length, d)) * 100  # new, wild padding
    w = rng.standard_normal((3, d, d))  # W_Q, W_K, W_V
    mask = padding_mask(lengths, n)
    out = self_attention(x, *w, mask=mask).output  # (batch, n, d)
    out2 = self_attention(x2, *w, mask=mask).output  # (batch, n, d)
    for b, length in enumerate(lengths):
        np.testing.assert_array_equal(out[b, :length], out2[b, :length])


def test_without_the_padding_mask_the_real_tokens_see_the_padding():
    rng = np.random.default_rng(0)
    lengths, n, d = [2, 4], 4, 3
    q, k, v = rng.standard_normal((3, 2, n, d))  # each (batch, n, d)
    unmasked = scaled_dot_product_attention(q, k, v).output  # (batch, n, d)
    alone = scaled_dot_product_attention(q[0, :2], k[0, :2], v[0, :2]).output  # (2, d)
    assert not np.allclose(unmasked[0, :2], alone)
    np.testing.assert_allclose(unmasked[1], scaled_dot_product_attention(q[1], k[1], v[1]).output)


@given(lengths=LENGTHS, seed=st.integers(0, 2**16))
def test_padding_and_causal_masks_combine_to_causal_attention_of_each_sequence(lengths, seed):
    rng = np.random.default_rng(seed)
    n, d = max(lengths), 2
    x = rng.standard_normal((len(lengths), n, d))  # (batch, n, d)
    mask = padding_mask(lengths, n) & causal_mask(n)  # (batch, n, n)
    assert mask.shape == (len(lengths), n, n)
    out = scaled_dot_product_attention(x, x, x, mask=mask).output  # (batch, n, d)
    for b, length in enumerate(lengths):
        alone = scaled_dot_product_attention(x[b, :length], x[b, :length], x[b, :length],
                                             mask=causal_mask(length)).output
        np.testing.assert_allclose(out[b, :length], alone, rtol=1e-12, atol=1e-12)


def test_query_and_key_padding_together_give_zero_outputs_for_padded_queries():
    lengths, n = [3, 1], 3
    keys = padding_mask(lengths, n)  # (batch, 1, n)
    pairs = keys & np.swapaxes(keys, -1, -2)  # (batch, n, n): both the query and the key are real
    x = np.arange(2 * n * 2, dtype=float).reshape(2, n, 2) / 10  # (batch, n, d)
    out, weights = scaled_dot_product_attention(x, x, x, mask=pairs)
    assert np.all(out[1, 1:] == 0) and np.all(weights[1, 1:] == 0)
    assert not np.any(np.isnan(out))
    np.testing.assert_allclose(weights[0].sum(axis=-1), 1.0)


@given(n=st.integers(1, 7), window=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_banded_attention_ignores_keys_outside_the_window(n, window, seed):
    rng = np.random.default_rng(seed)
    q, k, v = rng.standard_normal((3, n, 2))  # each (n, 2)
    out, weights = scaled_dot_product_attention(q, k, v, mask=banded_mask(n, window))
    i = int(rng.integers(n))
    far = [j for j in range(n) if abs(i - j) > window]
    k2, v2 = k.copy(), v.copy()
    k2[far], v2[far] = 50.0, -50.0
    out2 = scaled_dot_product_attention(q, k2, v2, mask=banded_mask(n, window)).output
    np.testing.assert_array_equal(out2[i], out[i])
    assert np.all(weights[np.abs(np.subtract.outer(np.arange(n), np.arange(n))) > window] == 0)


def test_graph_mask_without_self_loops_gives_an_isolated_node_a_zero_output():
    adjacency = [[0, 1, 0], [1, 0, 0], [0, 0, 0]]  # node 2 has no edges
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (n, d)
    out, weights = scaled_dot_product_attention(x, x, x, mask=graph_mask(adjacency, self_loops=False))
    np.testing.assert_array_equal(out[2], [0.0, 0.0])
    np.testing.assert_array_equal(weights[:2], [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    with_loops = scaled_dot_product_attention(x, x, x, mask=graph_mask(adjacency)).output
    np.testing.assert_array_equal(with_loops[2], x[2])  # with a self loop it sees only itself


@given(seed=st.integers(0, 2**16))
def test_graph_masked_attention_only_mixes_neighbours(seed):
    rng = np.random.default_rng(seed)
    n = 5
    adjacency = rng.integers(0, 2, (n, n))  # (n, n), a random directed graph
    mask = graph_mask(adjacency)
    q, k, v = rng.standard_normal((3, n, 2))  # each (n, 2)
    weights = scaled_dot_product_attention(q, k, v, mask=mask).weights
    assert np.all(weights[~mask] == 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0)  # self loops: no row is empty


@pytest.mark.parametrize(("call", "name"), [(lambda: banded_mask(4, 1, causal=1), "causal"),
                                            (lambda: graph_mask(np.eye(2), self_loops="yes"), "self_loops")])
def test_mask_flags_must_be_booleans(call, name):
    with pytest.raises(TypeError, match=rf"{name} must be True or False"):
        call()
