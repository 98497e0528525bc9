"""attnbook.measure.counts: every closed-form count equals what a computation performs, allocates or keeps.

The multiply-add counts are checked against scalar loops that count as they go, the pair counts against
the number of True entries of the masks, the path lengths against the reach measured by perturbing real
layers, the parameter counts against the numbers the package allocates, and the decoding counts against
the counter of ``attnbook.kv_cache.decode``.
"""

import math

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

from attnbook import (
    banded_mask,
    causal_mask,
    init_decoder_layer,
    init_encoder_layer,
    init_multi_head_weights,
    rnn_forward,
    self_attention,
)
from attnbook.measure.counted import Counted, counted_conv1d, counted_rnn, counted_self_attention
from attnbook.measure.counts import (
    attention_pair_count,
    conv1d_macs,
    decode_multiply_adds,
    DECODE_STRATEGIES,
    LAYER_KINDS,
    path_length,
    restricted_attention_macs,
    rnn_macs,
    self_attention_macs,
    sequential_operations,
)
from attnbook.measure.parameters import (
    count_multi_head_parameters,
    kv_cache_bytes,
    self_attention_parameter_count,
    transformer_parameter_count,
)
from attnbook.beyond.modalities import conv1d
from attnbook.measure.probes import dependency_reach, steps_to_reach

SIZES = st.integers(1, 5)


# --- closed-form counts ----------------------------------------------------------------------------


def test_self_attention_count_is_projections_plus_scores_plus_weighted_sum():
    assert self_attention_macs(10, 4) == 3 * 10 * 4 * 4 + 10 * 10 * 4 + 10 * 10 * 4
    assert self_attention_macs(10, 4, projections=False) == 2 * 10 * 10 * 4


def test_rnn_count_is_input_projection_plus_recurrence():
    assert rnn_macs(10, 4) == 2 * 10 * 4 * 4
    assert rnn_macs(10, 3, 5) == 10 * 3 * 5 + 10 * 5 * 5


def test_conv_count_is_kernel_width_times_positions_times_channels():
    assert conv1d_macs(10, 4, k=3) == 3 * 10 * 4 * 4
    assert conv1d_macs(10, 4, k=3, d_out=2) == 3 * 10 * 4 * 2


def test_attention_core_is_cheaper_than_the_rnn_exactly_when_n_is_smaller_than_d():
    for n in range(1, 40):
        for d in (8, 16, 32):
            core, rnn = self_attention_macs(n, d, projections=False), rnn_macs(n, d)
            assert (core < rnn) == (n < d) and (core == rnn) == (n == d)


def test_self_attention_with_projections_always_costs_more_than_the_rnn():
    assert all(self_attention_macs(n, d) > rnn_macs(n, d) for n in range(1, 30) for d in range(1, 30))


def test_restricted_attention_counts_the_band_only():
    n, d, window = 50, 8, 3
    r = 2 * window + 1
    assert restricted_attention_macs(n, d, window) == 2 * d * (n * r - window * (window + 1))
    assert restricted_attention_macs(n, d, window) < 2 * r * n * d
    assert restricted_attention_macs(4, d, 10) == self_attention_macs(4, d, projections=False)  # band covers all


def test_restricted_attention_with_window_zero_attends_to_itself_only():
    assert restricted_attention_macs(7, 3, 0) == 2 * 7 * 3


@pytest.mark.parametrize("call", [lambda: self_attention_macs(0, 2), lambda: rnn_macs(3, 0),
                                  lambda: conv1d_macs(3, 2, k=0), lambda: restricted_attention_macs(3, 2, -1)])
def test_sizes_below_their_minimum_are_refused(call):
    with pytest.raises(ValueError, match=r"must be at least"):
        call()


def test_non_integer_sizes_are_refused_naming_them():
    with pytest.raises(TypeError, match=r"^d must be an integer, got 2.5$"):
        self_attention_macs(3, 2.5)


# --- counting loops: same outputs as the package, counts equal to the formulas -----------------------


@given(SIZES, SIZES, SIZES, st.integers(0, 10**6))
def test_counted_self_attention_matches_the_package_and_the_formula(n, d, d_k, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))  # (n, d_model)
    w_q, w_k, w_v = rng.standard_normal((3, d, d_k))  # (d_model, d_k) each
    counted = counted_self_attention(x, w_q, w_k, w_v)
    np.testing.assert_allclose(counted.output, self_attention(x, w_q, w_k, w_v).output, atol=1e-12)
    assert counted.macs == 3 * n * d * d_k + 2 * n * n * d_k
    assert counted.nonlinear == n * n
    if d_k == d:
        assert counted.macs == self_attention_macs(n, d)


@given(SIZES, SIZES, SIZES, st.integers(0, 10**6))
def test_counted_rnn_matches_rnn_forward_and_the_formula(n, d_in, d_h, seed):
    rng = np.random.default_rng(seed)
    x, b = rng.standard_normal((n, d_in)), rng.standard_normal(d_h)  # (n, d_in), (d_h,)
    w_x, w_h = rng.standard_normal((d_in, d_h)), rng.standard_normal((d_h, d_h))  # (d_in, d_h), (d_h, d_h)
    counted = counted_rnn(x, w_x, w_h, b)
    np.testing.assert_allclose(counted.output, rnn_forward(x, w_x, w_h, b), atol=1e-12)
    assert (counted.macs, counted.nonlinear) == (rnn_macs(n, d_in, d_h), n * d_h)


@given(SIZES, SIZES, SIZES, st.integers(1, 3), st.integers(1, 3), st.integers(0, 10**6))
def test_counted_conv1d_matches_the_causal_conv1d_and_the_formula(n, d_in, d_out, k, dilation, seed):
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal((n, d_in)), rng.standard_normal((k, d_in, d_out))  # (n, d_in), (k, d_in, d_out)
    counted = counted_conv1d(x, w, dilation)
    np.testing.assert_allclose(counted.output, conv1d(x, w, causal=True, dilation=dilation), atol=1e-12)
    assert counted.macs == conv1d_macs(n, d_in, k, d_out) and counted.nonlinear == 0


def test_counted_results_are_named_tuples():
    counted = counted_rnn(np.ones((2, 1)), np.ones((1, 1)), np.ones((1, 1)), np.zeros(1))
    assert isinstance(counted, Counted) and counted._fields == ("output", "macs", "nonlinear")


def test_counted_self_attention_refuses_mismatched_query_and_key_widths():
    with pytest.raises(ValueError, match=r"w_q and w_k must have the same number of columns"):
        counted_self_attention(np.ones((3, 2)), np.ones((2, 2)), np.ones((2, 3)), np.ones((2, 2)))


def test_counted_rnn_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match=r"x has shape \(3, 2\); expected w_x \(2, d_h\)"):
        counted_rnn(np.ones((3, 2)), np.ones((3, 2)), np.eye(2), np.zeros(2))


def test_counted_loops_refuse_a_batch():
    with pytest.raises(ValueError, match=r"^x has shape \(1, 3, 2\); expected a matrix$"):
        counted_conv1d(np.ones((1, 3, 2)), np.ones((2, 2, 2)))


# --- sequential operations and path lengths ---------------------------------------------------------


def test_one_vocabulary_of_layer_kinds():
    assert LAYER_KINDS == ("self-attention", "restricted self-attention", "recurrent", "convolutional",
                           "dilated convolutional")


def test_only_the_recurrent_layer_needs_n_sequential_operations():
    assert [sequential_operations(kind, 12) for kind in LAYER_KINDS] == [1, 1, 12, 1, 1]


def test_path_lengths_against_their_formulas():
    for distance in range(0, 200):
        assert path_length("self-attention", distance) == 1
        assert path_length("recurrent", distance) == distance + 1
        for reach in (1, 2, 4, 7):
            expected = max(1, math.ceil(distance / reach))
            assert path_length("convolutional", distance, reach=reach) == expected
            assert path_length("restricted self-attention", distance, reach=reach) == expected
            k = reach + 1  # a dilated stack of kernel width k bridges k**L - 1 positions with L layers
            layers = path_length("dilated convolutional", distance, reach=reach)
            assert k**layers - 1 >= distance and (layers == 1 or k ** (layers - 1) - 1 < distance)


def test_a_dilated_stack_needs_ceil_log_k_n_layers():
    assert path_length("dilated convolutional", 999, reach=2) == math.ceil(math.log(1000, 3)) == 7
    assert path_length("convolutional", 999, reach=2) == 500


@pytest.mark.parametrize(
    ("distance", "kind", "reach", "expected"),
    [
        (0, "recurrent", None, 1),
        (37, "recurrent", None, 38),
        (37, "self-attention", None, 1),
        (0, "self-attention", None, 1),
        (37, "convolutional", 1, 37),
        (37, "convolutional", 2, 19),
        (0, "convolutional", 2, 1),
        (1000, "restricted self-attention", 50, 20),
        (1001, "restricted self-attention", 50, 21),
    ],
)
def test_path_length_between_positions(distance, kind, reach, expected):
    assert path_length(kind, distance, reach=reach) == expected


def test_path_length_errors():
    with pytest.raises(ValueError, match=r"^kind must be one of 'self-attention', 'restricted self-attention', .*; got 'lstm'$"):
        path_length("lstm", 4)
    with pytest.raises(ValueError, match=r"^kind 'restricted self-attention' needs reach="):
        path_length("restricted self-attention", 3)
    with pytest.raises(ValueError, match=r"^reach must be at least 1, got 0$"):
        path_length("convolutional", 3, reach=0)
    with pytest.raises(ValueError, match=r"^distance must be at least 0, got -1$"):
        path_length("recurrent", -1)


def make_runs(n, d, k, window, seed=0):
    """Stacks of real layers: run(x, s) = outputs after s layers (or s steps of the recurrence)."""
    rng = np.random.default_rng(seed)
    kernels = rng.standard_normal((n, k, d, d)) / np.sqrt(k * d)  # one (k, d, d) kernel per layer
    heads = rng.standard_normal((n, 3, d, d)) / np.sqrt(d)  # one (3, d, d) set of projections per layer
    w_x, w_h = rng.standard_normal((2, d, d)) / np.sqrt(d)  # (d, d) each

    def recurrent(x, s):
        out = np.zeros_like(x)  # (n, d): states not yet computed are zeros
        out[:s] = rnn_forward(x[:s], w_x, w_h, np.zeros(d))
        return out

    def convolutional(x, s, dilated=False):
        for layer in range(s):
            x = np.tanh(conv1d(x, kernels[layer], causal=True, dilation=k ** layer if dilated else 1))
        return x

    def attention(x, s, mask=None):
        for layer in range(s):
            x = self_attention(x, *heads[layer], mask=mask).output
        return x

    return {
        "self-attention": attention,
        "recurrent": recurrent,
        "convolutional": convolutional,
        "dilated convolutional": lambda x, s: convolutional(x, s, dilated=True),
        "restricted self-attention": lambda x, s: attention(x, s, mask=banded_mask(n, window)),
    }


@pytest.mark.parametrize("n, k, window", [(9, 3, 2), (16, 2, 3), (12, 4, 1)])
def test_measured_reach_of_real_layers_equals_the_path_length(n, k, window):
    x = np.random.default_rng(1).standard_normal((n, 3))  # (n, d)
    reach_of = {"convolutional": k - 1, "dilated convolutional": k - 1, "restricted self-attention": window}
    for kind, run in make_runs(n, 3, k, window).items():
        reach = dependency_reach(run, x, n_steps=n)
        assert steps_to_reach(reach) == path_length(kind, n - 1, reach=reach_of.get(kind)), kind


def test_reach_of_a_causal_convolution_grows_by_k_minus_one_per_layer():
    n, k = 12, 3
    run = make_runs(n, 2, k, 1)["convolutional"]
    reach = dependency_reach(run, np.random.default_rng(2).standard_normal((n, 2)), n_steps=4)
    for layer, row in enumerate(reach, start=1):
        assert np.flatnonzero(row).tolist() == list(range(min(n, layer * (k - 1) + 1)))


# --- (query, key) pairs: one closed form, equal to the sum of the mask ----------------------------


@given(n=st.integers(1, 30), window=st.integers(0, 35))
def test_pair_counts_equal_the_number_of_true_entries_of_the_masks(n, window):
    assert attention_pair_count(n) == n * n
    assert attention_pair_count(n, causal=True) == int(causal_mask(n).sum())
    assert attention_pair_count(n, window=window) == int(banded_mask(n, window).sum())
    assert attention_pair_count(n, window=window, causal=True) == int(banded_mask(n, window, causal=True).sum())


def test_pair_counts_of_long_inputs_are_exact_integers():
    assert attention_pair_count(224 * 224) == 2_517_630_976
    assert attention_pair_count(160_000) == 25_600_000_000
    assert isinstance(attention_pair_count(10**6, window=10), int)


def test_pair_count_errors():
    with pytest.raises(TypeError, match=r"^causal must be True or False, got 'yes'$"):
        attention_pair_count(3, causal="yes")
    with pytest.raises(ValueError, match=r"^window must be at least 0, got -1$"):
        attention_pair_count(3, window=-1)



@given(n=st.integers(1, 40), window=st.integers(0, 45), causal=st.booleans())
def test_band_count_counts_the_true_entries_of_the_mask(n, window, causal):
    assert attention_pair_count(n, window, causal) == int(banded_mask(n, window, causal=causal).sum())


def test_band_count_without_a_band_limit_is_the_full_or_the_triangle():
    assert attention_pair_count(10, window=9) == 100 and attention_pair_count(10, window=50) == 100
    assert attention_pair_count(10, window=9, causal=True) == 55


def test_band_count_of_width_zero_is_n():
    assert attention_pair_count(7, window=0) == 7 and attention_pair_count(7, window=0, causal=True) == 7


def test_band_count_grows_linearly_in_n():
    # the same window, ten times the length: about ten times the entries (not a hundred)
    small, large = attention_pair_count(1_000, window=50), attention_pair_count(10_000, window=50)
    assert large - 10 * small == 9 * 50 * 51  # exact: only the end corrections differ
    assert attention_pair_count(60_000, window=50) < 60_000 * 101


def test_band_count_returns_a_python_int():
    assert type(attention_pair_count(np.int64(5), np.int32(2), np.bool_(True))) is int


def test_band_count_refuses_bad_arguments():
    with pytest.raises(ValueError, match=r"^n must be at least 1, got 0$"):
        attention_pair_count(0, window=1)
    with pytest.raises(TypeError, match=r"^window must be an integer, got 1.5$"):
        attention_pair_count(3, window=1.5)
    with pytest.raises(TypeError, match=r"^causal must be True or False, got 'yes'$"):
        attention_pair_count(3, window=1, causal="yes")


# --- parameters ------------------------------------------------------------------------------------


@given(st.integers(1, 64), st.integers(1, 32), st.integers(1, 32))
def test_head_parameter_count_equals_the_sizes_of_the_three_matrices(d_model, d_k, d_v):
    w_q, w_k, w_v = np.zeros((d_model, d_k)), np.zeros((d_model, d_k)), np.zeros((d_model, d_v))
    assert self_attention_parameter_count(d_model, d_k, d_v) == w_q.size + w_k.size + w_v.size
    assert self_attention_parameter_count(d_model, d_k, d_v) == d_model * (2 * d_k + d_v)


def test_head_parameter_count_with_biases_adds_one_number_per_output_column():
    assert self_attention_parameter_count(512, 64, 64, bias=True) == 98_304 + 192
    assert self_attention_parameter_count(2, 2, 3, bias=True) == 14 + 7


def test_head_parameter_count_d_v_defaults_to_d_k():
    assert self_attention_parameter_count(512, 64) == self_attention_parameter_count(512, 64, 64) == 98_304


def test_head_parameter_count_of_the_chapter_examples():
    assert self_attention_parameter_count(2, 2, 3) == 14  # the worked example
    assert self_attention_parameter_count(512, 512, 512) == 3 * 512 * 512  # one full-width head
    assert 8 * self_attention_parameter_count(512, 64) == self_attention_parameter_count(512, 512)


def test_head_parameter_count_returns_a_python_int_even_for_numpy_integers():
    count = self_attention_parameter_count(np.int64(4), np.int32(2), np.int64(3))
    assert type(count) is int and count == 28


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((0, 2, 2), ValueError, "d_model must be at least 1, got 0"),
        ((4, 0, 2), ValueError, "d_k must be at least 1, got 0"),
        ((4, 2, -1), ValueError, "d_v must be at least 1, got -1"),
        ((4.0, 2, 2), TypeError, "d_model must be an integer, got 4.0"),
        ((4, True, 2), TypeError, "d_k must be an integer, got True"),
    ],
)
def test_head_parameter_count_refuses_bad_sizes_naming_the_argument(args, error, message):
    with pytest.raises(error, match=message):
        self_attention_parameter_count(*args)


def test_head_parameter_count_refuses_a_non_boolean_bias():
    with pytest.raises(TypeError, match="bias must be True or False, got 1"):
        self_attention_parameter_count(4, 2, 2, bias=1)


def test_multi_head_parameter_count_of_the_original_transformer_layer():
    assert count_multi_head_parameters(512, 8) == 4 * 512 * 512 + 4 * 512 == 1_050_624
    assert count_multi_head_parameters(512, 8, bias=False) == 1_048_576


@pytest.mark.parametrize("d_model", [1, 4, 12, 64, 512])
def test_multi_head_parameter_count_does_not_depend_on_the_number_of_heads(d_model):
    counts = {count_multi_head_parameters(d_model, h) for h in range(1, d_model + 1) if d_model % h == 0}
    assert counts == {4 * d_model**2 + 4 * d_model}


@pytest.mark.parametrize("d_model", [4, 6, 12])
def test_multi_head_parameter_count_equals_the_number_of_stored_weights(d_model):
    w = init_multi_head_weights(d_model, seed=0)
    assert sum(array.size for array in w) == count_multi_head_parameters(d_model, 1)
    assert sum(array.size for array in w[:4]) == count_multi_head_parameters(d_model, 1, bias=False)


def test_per_head_blocks_hold_the_parameters_of_one_full_width_head():
    d_model, h = 512, 8
    per_head = 3 * (d_model * (d_model // h) + d_model // h)  # W_Q, W_K, W_V of one head with biases
    assert h * per_head + d_model * d_model + d_model == count_multi_head_parameters(d_model, h)


def test_multi_head_parameter_count_refuses_heads_that_do_not_divide_the_width():
    with pytest.raises(ValueError, match=r"^d_model = 10 is not divisible by n_heads = 4; "):
        count_multi_head_parameters(10, 4)


@pytest.mark.parametrize("d_model", [0, -3])
def test_multi_head_parameter_count_refuses_a_non_positive_width(d_model):
    with pytest.raises(ValueError, match=rf"^d_model must be at least 1, got {d_model}$"):
        count_multi_head_parameters(d_model, 1)


def test_multi_head_parameter_count_bias_flag_must_be_boolean():
    with pytest.raises(TypeError, match="bias must be True or False, got 1"):
        count_multi_head_parameters(8, 2, bias=1)


PARTS = ("attention per layer", "feed-forward per layer", "encoder layer", "decoder layer", "encoder",
         "decoder", "embeddings", "output projection", "total")


def n_params(tree) -> int:
    """Number of numbers in a (nested) tuple of arrays, such as the weights of a layer."""
    if isinstance(tree, np.ndarray):
        return tree.size
    return sum(n_params(part) for part in tree)


# --- known values --------------------------------------------------------------------------------------


def test_base_model_with_37000_shared_tied_tokens():
    counts = transformer_parameter_count(d_model=512, d_ff=2048, n_heads=8, n_layers=6, vocab_size=37000)
    assert counts == {
        "attention per layer": 1_050_624,
        "feed-forward per layer": 2_099_712,
        "encoder layer": 3_152_384,
        "decoder layer": 4_204_032,
        "encoder": 18_914_304,
        "decoder": 25_224_192,
        "embeddings": 18_944_000,
        "output projection": 0,
        "total": 63_082_496,
    }
    assert round(counts["total"] / 1e6, 1) == 63.1


def test_big_model_with_37000_shared_tied_tokens():
    counts = transformer_parameter_count(d_model=1024, d_ff=4096, n_heads=16, n_layers=6, vocab_size=37000)
    assert counts["encoder layer"] == 12_596_224
    assert counts["decoder layer"] == 16_796_672
    assert counts["embeddings"] == 37_888_000
    assert counts["total"] == 214_245_376
    assert round(counts["total"] / 1e6, 1) == 214.2


def test_the_counts_are_close_to_but_not_the_papers_65m_and_213m():
    base = transformer_parameter_count(512, 2048, 8, 6, 37000)["total"]
    big = transformer_parameter_count(1024, 4096, 16, 6, 37000)["total"]
    assert round(base / 1e6) == 63 and abs(base / 65e6 - 1) < 0.03
    assert round(big / 1e6) == 214 and abs(big / 213e6 - 1) < 0.006


def test_result_has_every_part_as_a_python_int():
    counts = transformer_parameter_count(8, 16, 2, 2, 10)
    assert tuple(counts) == PARTS
    assert all(type(value) is int for value in counts.values())


# --- formulas ----------------------------------------------------------------------------------------------


@given(d_head=st.integers(1, 8), n_heads=st.integers(1, 4), d_ff=st.integers(1, 64),
       n_layers=st.integers(1, 8), vocab=st.integers(1, 5000))
def test_parts_follow_the_closed_form_formulas(d_head, n_heads, d_ff, n_layers, vocab):
    d = d_head * n_heads
    counts = transformer_parameter_count(d, d_ff, n_heads, n_layers, vocab)
    attention = 4 * d * d + 4 * d
    ffn = 2 * d * d_ff + d_ff + d
    assert counts["attention per layer"] == attention == count_multi_head_parameters(d, n_heads)
    assert counts["feed-forward per layer"] == ffn
    assert counts["encoder layer"] == attention + ffn + 2 * 2 * d
    assert counts["decoder layer"] == 2 * attention + ffn + 3 * 2 * d
    assert counts["encoder"] == n_layers * counts["encoder layer"]
    assert counts["decoder"] == n_layers * counts["decoder layer"]
    assert counts["embeddings"] == vocab * d
    assert counts["total"] == counts["encoder"] + counts["decoder"] + counts["embeddings"]


@given(d_model=st.integers(1, 24), d_ff=st.integers(1, 48))
def test_layer_counts_equal_the_numbers_the_package_allocates(d_model, d_ff):
    counts = transformer_parameter_count(d_model, d_ff, 1, 1, 1)
    assert counts["encoder layer"] == n_params(init_encoder_layer(d_model, d_ff, seed=0))
    assert counts["decoder layer"] == n_params(init_decoder_layer(d_model, d_ff, seed=0))


def test_whole_model_count_equals_the_sum_of_array_sizes_of_initialised_layers_and_embeddings():
    d_model, d_ff, n_heads, n_layers, vocab = 16, 40, 4, 3, 23
    encoder = [init_encoder_layer(d_model, d_ff, seed=s) for s in range(n_layers)]
    decoder = [init_decoder_layer(d_model, d_ff, seed=10 + s) for s in range(n_layers)]
    embedding = np.zeros((vocab, d_model))  # (vocab, d_model): shared by source, target and output
    allocated = n_params(encoder) + n_params(decoder) + embedding.size
    assert transformer_parameter_count(d_model, d_ff, n_heads, n_layers, vocab)["total"] == allocated


def test_base_layers_as_allocated_match_the_count():
    counts = transformer_parameter_count(512, 2048, 8, 6, 37000)
    assert n_params(init_encoder_layer(512, 2048, seed=0)) == counts["encoder layer"]
    assert n_params(init_decoder_layer(512, 2048, seed=0)) == counts["decoder layer"]


@pytest.mark.parametrize("n_heads", [1, 2, 4, 8, 16])
def test_the_number_of_heads_does_not_change_the_count(n_heads):
    assert transformer_parameter_count(64, 256, n_heads, 2, 100) == transformer_parameter_count(64, 256, 1, 2, 100)


@given(vocab=st.integers(1, 10**6))
def test_one_more_token_adds_one_row_of_d_model_numbers(vocab):
    a = transformer_parameter_count(512, 2048, 8, 6, vocab)["total"]
    b = transformer_parameter_count(512, 2048, 8, 6, vocab + 1)["total"]
    assert b - a == 512


def test_separate_source_and_target_embeddings_double_the_embedding_count():
    shared = transformer_parameter_count(512, 2048, 8, 6, 37000)
    separate = transformer_parameter_count(512, 2048, 8, 6, 37000, shared_embeddings=False)
    assert separate["embeddings"] == 2 * shared["embeddings"] == 2 * 37000 * 512
    assert separate["total"] - shared["total"] == 37000 * 512


def test_an_untied_output_projection_adds_a_matrix_and_a_bias():
    tied = transformer_parameter_count(512, 2048, 8, 6, 37000)
    untied = transformer_parameter_count(512, 2048, 8, 6, 37000, tied_output=False)
    assert untied["output projection"] == 37000 * 512 + 37000
    assert untied["total"] - tied["total"] == 37000 * 513


def test_a_different_number_of_decoder_layers():
    counts = transformer_parameter_count(8, 16, 2, 3, 10, n_decoder_layers=1)
    assert counts["encoder"] == 3 * counts["encoder layer"]
    assert counts["decoder"] == counts["decoder layer"]
    same = transformer_parameter_count(8, 16, 2, 3, 10, n_decoder_layers=3)
    assert same == transformer_parameter_count(8, 16, 2, 3, 10)


def test_the_implied_vocabularies_for_65m_and_213m_differ():
    # With shared, tied embeddings the total is (non-embedding part) + V d_model: solve for V.
    implied = {}
    for name, (d, d_ff, h, reported) in {"base": (512, 2048, 8, 65e6), "big": (1024, 4096, 16, 213e6)}.items():
        non_embedding = transformer_parameter_count(d, d_ff, h, 6, 1)["total"] - d
        implied[name] = (reported - non_embedding) / d
    assert round(implied["base"]) == 40745 and round(implied["big"]) == 35784


def test_numpy_integers_are_accepted():
    assert (transformer_parameter_count(np.int64(8), np.int32(16), np.int64(2), np.int8(2), np.int64(10))
            == transformer_parameter_count(8, 16, 2, 2, 10))


# --- errors ------------------------------------------------------------------------------------------------


def test_zero_vocabulary_is_refused():
    with pytest.raises(ValueError, match=r"^vocab_size must be at least 1, got 0$"):
        transformer_parameter_count(512, 2048, 8, 6, 0)


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"d_model": 512.0}, TypeError, r"^d_model must be an integer, got 512\.0$"),
    ({"d_model": 0}, ValueError, r"^d_model must be at least 1, got 0$"),
    ({"d_ff": "2048"}, TypeError, r"^d_ff must be an integer, got '2048'$"),
    ({"n_layers": 0}, ValueError, r"^n_layers must be at least 1, got 0$"),
    ({"n_layers": True}, TypeError, r"^n_layers must be an integer, got True$"),
    ({"vocab_size": -5}, ValueError, r"^vocab_size must be at least 1, got -5$"),
    ({"n_decoder_layers": 0}, ValueError, r"^n_decoder_layers must be at least 1, got 0$"),
    ({"n_heads": 0}, ValueError, r"^n_heads must be at least 1, got 0$"),
    ({"n_heads": 2.0}, TypeError, r"^n_heads must be an integer, got 2\.0$"),
    ({"n_heads": 3}, ValueError, r"^d_model = 512 is not divisible by n_heads = 3; "
                                 r"each head needs d_model / n_heads dimensions$"),
])
def test_bad_sizes_are_refused_with_a_message_naming_the_argument(kwargs, error, message):
    arguments = {"d_model": 512, "d_ff": 2048, "n_heads": 8, "n_layers": 6, "vocab_size": 37000} | kwargs
    with pytest.raises(error, match=message):
        transformer_parameter_count(**arguments)


@pytest.mark.parametrize("flag", ["shared_embeddings", "tied_output"])
def test_sharing_flags_must_be_booleans(flag):
    with pytest.raises(TypeError, match=rf"{flag} must be True or False, got 1"):
        transformer_parameter_count(512, 2048, 8, 6, 37000, **{flag: 1})
# --- decoding and the KV cache ------------------------------------------------------------------


def test_closed_forms_for_one_set_of_sizes_by_hand():
    t, d_model, d_k, d_v = 10, 8, 4, 4
    # cache: 10 tokens x 8 x (4 + 4 + 4) projections, and sum_{s=1}^{10} s (4 + 4) = 55 * 8 for attention
    assert decode_multiply_adds(t, d_model, d_k, d_v, "cache") == 10 * 96 + 55 * 8 == 1400
    # recompute_kv: queries 10 x 8 x 4; keys and values of s tokens at step s: 55 x 8 x 8; attention 55 x 8
    assert decode_multiply_adds(t, d_model, d_k, d_v, "recompute_kv") == 320 + 55 * 64 + 55 * 8 == 4280
    # recompute_all: projections of s tokens at step s: 55 x 96; s x s attention: sum s^2 = 385, x 8
    assert decode_multiply_adds(t, d_model, d_k, d_v, "recompute_all") == 55 * 96 + 385 * 8 == 8360


def test_growth_is_quadratic_with_the_cache_and_cubic_when_recomputing_everything():
    d_model, d_k, d_v = 64, 64, 64
    cache = [decode_multiply_adds(t, d_model, d_k, d_v, "cache") for t in (10_000, 20_000)]
    full = [decode_multiply_adds(t, d_model, d_k, d_v, "recompute_all") for t in (10_000, 20_000)]
    assert 3.9 < cache[1] / cache[0] < 4.1  # doubling t: x4
    assert 7.9 < full[1] / full[0] < 8.1  # doubling t: x8


def test_zero_tokens_cost_nothing():
    assert all(decode_multiply_adds(0, 4, 2, 2, s) == 0 for s in DECODE_STRATEGIES)


def test_an_unknown_decoding_strategy_is_refused():
    with pytest.raises(ValueError, match="strategy must be one of"):
        decode_multiply_adds(2, 3, 2, 2, "lazy")


def test_kv_cache_bytes_counts_a_key_and_a_value_per_token_head_and_layer():
    assert kv_cache_bytes(1, 1, 1, 1, itemsize=4) == 8
    assert kv_cache_bytes(2048, 32, 32, 128, itemsize=2) == 2 * 32 * 32 * 2048 * 128 * 2 == 2**30
    assert kv_cache_bytes(0, 2, 2, 2) == 0
    with pytest.raises(ValueError, match="^n_layers must be at least 1, got 0$"):
        kv_cache_bytes(4, 0, 2, 2)
