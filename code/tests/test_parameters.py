"""Tests of attnbook.parameters: the parameter count of an encoder-decoder Transformer, part by part.

The count is checked against the number of numbers the package actually allocates when it initialises
layers, against the closed-form formulas, against the known totals for the sizes of Vaswani et al.
(2017), Table 3 (base and big) with a shared, tied vocabulary of 37,000 tokens, and for its errors.
"""

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

from attnbook import (
    count_multi_head_parameters,
    init_decoder_layer,
    init_encoder_layer,
    transformer_parameter_count,
)

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
