"""all-MiniLM-L6-v2 in the package's types, run by its layers: the sizes come from the checked config, the
weights fit the package's layouts, padding changes nothing a real token sees, the embeddings have length 1 and
rank a paraphrase above an unrelated sentence, heads are removed by their rows of W_O, bad arguments are named."""

import numpy as np
import pytest

from attnbook import EncoderLayerWeights
from attnbook.pretrained.bert import (BertConfig, bert_forward, bert_weights, encode_sentences, load_minilm,
                                      mean_pool, without_heads)

pytestmark = pytest.mark.minilm


@pytest.fixture(scope="module")
def model():
    return load_minilm()


def test_the_configuration_is_read_from_the_models_files(model):
    assert model.config == BertConfig(n_layers=6, n_heads=12, d_model=384, d_ff=1536, vocab_size=30522,
                                      max_positions=512, n_token_types=2, eps=1e-12, activation="gelu",
                                      max_length=256)


def test_the_weights_are_the_packages_encoder_layers_in_float32(model):
    assert all(isinstance(layer, EncoderLayerWeights) for layer in model.weights.layers)
    leaves = [model.weights.embeddings.words, *model.weights.layers[5].self_attention, *model.weights.layers[5].feed_forward]
    assert {leaf.dtype for leaf in leaves} == {np.dtype(np.float32)}
    assert model.weights.layers[0].feed_forward.w_2.shape == (1536, 384)  # (d_ff, d_model): x W, not x W^T


def test_a_sentence_in_a_padded_batch_gets_what_it_gets_alone(model):
    alone = encode_sentences(["Good night, sweet prince"], model)
    batch = encode_sentences(["Good night, sweet prince", "And flights of angels sing thee to thy rest! Why does the"
                              " drum come hither?"], model)
    n = alone.mask.shape[1]
    assert batch.mask.shape[1] > n
    np.testing.assert_allclose(batch.hidden[:, 0, :n], alone.hidden[:, 0], atol=2e-5)
    np.testing.assert_allclose(batch.attention[:, 0, :, :n, :n], alone.attention[:, 0], atol=2e-6)
    assert np.all(batch.attention[:, 0, :, :, n:] == 0)  # no query looks at the padding


def test_every_attention_row_sums_to_one_over_the_real_tokens(model):
    result = encode_sentences(["Who's there?", "Nay, answer me: stand, and unfold yourself."], model)
    np.testing.assert_allclose(result.attention.sum(axis=-1), 1, atol=1e-5)


def test_embeddings_have_length_one_and_rank_a_paraphrase_above_an_unrelated_sentence(model):
    result = encode_sentences(["A man is playing a guitar.", "Someone plays the guitar.",
                               "The stock market fell sharply today."], model)
    np.testing.assert_allclose(np.linalg.norm(result.embedding, axis=1), 1, rtol=1e-6)
    similarity = result.embedding @ result.embedding.T  # (3, 3): cosines
    assert similarity[0, 1] > 0.5 > similarity[0, 2]


def test_mean_pooling_skips_the_padding():
    hidden = np.array([[[1.0, 1.0], [3.0, 3.0], [100.0, -100.0]]], dtype=np.float32)  # (1, 3, 2)
    pooled = mean_pool(hidden, np.array([[True, True, False]]))
    np.testing.assert_allclose(pooled, [[2 ** -0.5, 2 ** -0.5]], rtol=1e-6)


def test_removing_a_head_zeroes_its_rows_of_w_o_and_leaves_the_model_unchanged(model):
    ablated = without_heads(model, [(1, 0)])
    w_o, original = ablated.weights.layers[1].self_attention.w_o, model.weights.layers[1].self_attention.w_o
    assert np.all(w_o[:32] == 0) and np.array_equal(w_o[32:], original[32:]) and np.any(original[:32] != 0)
    assert ablated.weights.layers[0] is model.weights.layers[0]
    removed_everywhere = without_heads(model, [(layer, head) for layer in range(6) for head in range(12)])
    hidden, _ = bert_forward([[101, 102]], [2], removed_everywhere.weights, model.config)
    assert not np.allclose(hidden[-1], encode_sentences([""], model).hidden[-1], atol=1e-3)


def test_the_arguments_are_checked_naming_them(model):
    with pytest.raises(TypeError, match="sentences must be a non-empty list of str"):
        encode_sentences("one sentence", model)
    with pytest.raises(TypeError, match=r"sentences\[0\] must be a str"):
        encode_sentences([None], model)
    with pytest.raises(TypeError, match="model must be a Pretrained"):
        encode_sentences(["a"], model.weights)
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 30522\)"):
        bert_forward([[101, 30522]], [2], model.weights, model.config)
    with pytest.raises(ValueError, match="lengths has shape"):
        bert_forward([[101, 102]], [2, 2], model.weights, model.config)
    with pytest.raises(ValueError, match=r"is longer than the padded length"):
        bert_forward([[101, 102]], [3], model.weights, model.config)
    with pytest.raises(ValueError, match=r"head \(6, 0\) is not in a model of 6 layers of 12 heads"):
        without_heads(model, [(6, 0)])
    with pytest.raises(ValueError, match="tensors lacks"):
        bert_weights({}, model.config)
    broken = model.weights._replace(layers=model.weights.layers[:5])
    with pytest.raises(ValueError, match="weights.layers must hold n_layers = 6"):
        bert_forward([[101, 102]], [2], broken, model.config)


def test_the_fast_path_equals_the_reference_forward_pass(model):
    from attnbook.pretrained.bert import bert_forward
    from attnbook.pretrained.fast import bert_forward_fast
    from attnbook.pretrained.wordpiece import encode_batch

    batch = encode_batch(["Good night, sweet prince", "Who's there?", "Nay, answer me: stand, and unfold yourself."],
                         model.vocabulary)
    hidden, attention = bert_forward(batch.ids, batch.lengths, model.weights, model.config)
    fast_hidden, fast_attention = bert_forward_fast(batch.ids, batch.lengths, model.weights, model.config)
    assert fast_hidden.shape == hidden.shape and fast_attention.shape == attention.shape
    assert fast_hidden.dtype == fast_attention.dtype == np.float32
    np.testing.assert_allclose(fast_hidden, hidden, rtol=0, atol=2e-5)
    np.testing.assert_allclose(fast_attention, attention, rtol=0, atol=2e-6)
    with pytest.raises(ValueError, match="lengths has shape"):  # the reference's check
        bert_forward_fast(batch.ids, [3], model.weights, model.config)
