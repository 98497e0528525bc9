"""The pretrained chapter's measurements: shares and offsets counted as defined, Spearman on ranks, the
leave-one-out drop equal to re-encoding the shorter sentence, head importance from partial passes equal to
whole passes, the ranking quality as the share of couples ranked right, bad arguments named."""

import numpy as np
import pytest

from attnbook.pretrained.analysis import (head_importance, leave_one_out, offset_weight, pair_similarities,
                                          ranking_quality, sentence_embeddings, spearman, weight_share)
from attnbook.pretrained.bert import encode_sentences, load_minilm, without_heads
from attnbook.pretrained.fast import bert_forward_fast, encoder_layers_fast

FIRSTS = ["The cat sat on the mat.", "The soup is too salty.", "The cat sat on the mat."]
SECONDS = ["A cat was sitting on a rug.", "The soup is too cold.", "The stock market fell sharply today."]


@pytest.fixture(scope="module")
def model():
    return load_minilm()


def test_the_weight_share_counts_the_marked_keys_over_real_queries_only():
    attention = np.zeros((1, 1, 1, 3, 3))  # (layers, batch, heads, n, n)
    attention[0, 0, 0] = [[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]  # the last query is padding
    mask, keys = np.array([[True, True, False]]), np.array([[True, False, False]])
    assert weight_share(attention, mask, keys).tolist() == [[0.75]]
    with pytest.raises(ValueError, match="keys must be booleans"):
        weight_share(attention, mask, np.array([[1, 0, 0]]))


def test_the_offset_weight_finds_a_previous_token_head_and_skips_cls_and_sep():
    n = 6
    attention = np.stack([np.eye(n, k=-1), np.eye(n, k=1)])[:, None, None]  # (2 layers, 1, 1 head, n, n)
    assert offset_weight(attention, [n], -1).ravel().tolist() == [1.0, 0.0]
    assert offset_weight(attention, [n], 1).ravel().tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="offset 3"):
        offset_weight(attention[:, :, :, :4, :4], [4], 3)  # two word tokens: none three apart
    with pytest.raises(TypeError, match="offset"):
        offset_weight(attention, [n], 1.0)


def test_spearman_compares_ranks_not_values():
    x = np.array([0.1, 0.7, 0.3, 2.0])
    assert spearman(x, np.exp(x)) == pytest.approx(1.0) and spearman(x, -x ** 3) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="x and y"):
        spearman([1, 2, 3], [1, 2])


def test_the_ranking_quality_is_the_share_of_couples_ranked_right():
    assert ranking_quality([0.9, 0.8, 0.1, 0.2], [True, True, False, False]) == 1.0
    assert ranking_quality([0.1, 0.2, 0.9, 0.8], [True, True, False, False]) == 0.0
    assert ranking_quality([0.9, 0.3, 0.5, 0.2], [True, True, False, False]) == 0.75
    with pytest.raises(ValueError, match="paraphrase"):
        ranking_quality([0.9, 0.8], [True, True])


@pytest.mark.minilm
def test_the_layers_after_a_point_continue_the_whole_pass(model):
    ids, lengths = [[101, 7592, 2088, 999, 102], [101, 7592, 102, 0, 0]], [5, 3]
    hidden, attention = bert_forward_fast(ids, lengths, model.weights, model.config)
    rest, rest_attention = encoder_layers_fast(hidden[2], lengths, model.weights.layers[2:], model.config)
    np.testing.assert_allclose(rest[-1][0], hidden[-1][0], atol=1e-5)
    np.testing.assert_allclose(rest[-1][1, :3], hidden[-1][1, :3], atol=1e-5)
    np.testing.assert_allclose(rest_attention, attention[2:], atol=1e-6)
    none, no_attention = encoder_layers_fast(hidden[6], lengths, (), model.config)
    assert np.array_equal(none[0], hidden[6]) and no_attention.shape == (0, 2, 12, 5, 5)
    with pytest.raises(ValueError, match="x must be float states"):
        encoder_layers_fast(hidden[2][..., :100], lengths, model.weights.layers[2:], model.config)


@pytest.mark.minilm
def test_the_embeddings_in_length_sorted_batches_equal_the_reference(model):
    sentences = ["Exit", "Good night, sweet prince: and flights of angels sing thee to thy rest!", "To be, or not to be"]
    reference = encode_sentences(sentences, model).embedding
    for batch_size in (1, 2, 16):
        np.testing.assert_allclose(sentence_embeddings(sentences, model, batch_size), reference, atol=1e-5)
    with pytest.raises(ValueError, match="batch_size"):
        sentence_embeddings(sentences, model, 0)


@pytest.mark.minilm
def test_the_leave_one_out_drop_is_the_similarity_lost_by_deleting_the_word(model):
    result = leave_one_out("A man plays a guitar.", "Someone strums a guitar.", model)
    assert result.tokens == ["a", "man", "plays", "a", "guitar", "."]
    whole, shorter, second = encode_sentences(["A man plays a guitar.", "A plays a guitar.",
                                               "Someone strums a guitar."], model).embedding
    assert result.similarity == pytest.approx(float(whole @ second), abs=1e-5)
    assert result.drop[1] == pytest.approx(float(whole @ second - shorter @ second), abs=1e-5)
    reference = encode_sentences(["A man plays a guitar."], model).attention[:, 0].mean(axis=(0, 1, 2))[1:-1]
    np.testing.assert_allclose(result.received, reference, atol=1e-6)


@pytest.mark.minilm
def test_pair_similarities_embed_each_distinct_sentence_once_and_pair_them(model):
    embedding = encode_sentences(FIRSTS + SECONDS, model).embedding
    expected = (embedding[:3] * embedding[3:]).sum(axis=1)
    np.testing.assert_allclose(pair_similarities(FIRSTS, SECONDS, model), expected, atol=1e-5)
    with pytest.raises(ValueError, match="pair up one to one"):
        pair_similarities(FIRSTS, SECONDS[:2], model)


@pytest.mark.minilm
def test_head_importance_from_partial_passes_equals_whole_passes(model):
    importance = head_importance(FIRSTS, SECONDS, model)
    base = pair_similarities(FIRSTS, SECONDS, model)
    for layer, head in [(0, 2), (3, 7), (5, 5)]:
        ablated = pair_similarities(FIRSTS, SECONDS, without_heads(model, [(layer, head)]))
        assert importance[layer, head] == pytest.approx(np.abs(ablated - base).mean(), abs=1e-6)
    assert importance.shape == (6, 12) and importance.min() >= 0
