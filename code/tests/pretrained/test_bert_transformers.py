"""all-MiniLM-L6-v2 run by the book's code against Hugging Face's ``BertModel`` (transformers 5.25.0, eager
attention, float32 on the CPU) loaded from the same checked files: on a padded batch of ten sentences of
different lengths, every layer's hidden states on the real tokens within 1e-4 and every head's attention
weights within 1e-5, the sentence embeddings equal to sentence-transformers' pooling of HF's output.

The padded positions' own rows are computed by both and read by neither (no query attends to them, the
pooling skips them): they are compared too, to 1e-3, since rounding grows more on the rarely trained
``[PAD]`` rows (measured: 8e-5 there against 5e-6 on the real tokens)."""

import numpy as np
import pytest

from attnbook.pretrained.bert import encode_sentences, load_minilm, mean_pool, without_heads
from attnbook.pretrained.files import checked_file, model_folder

pytestmark = [pytest.mark.torch, pytest.mark.transformers, pytest.mark.minilm]

SENTENCES = [
    "The trophy didn't fit in the suitcase because it was too big.",
    "The trophy didn't fit in the suitcase because it was too small.",
    "Good night",
    "To be, or not to be: that is the question.",
    "Attention is all you need, they said; then the models grew, layer on layer, until nobody could read them.",
    "Café naïve 注意力 😀",
    "A",
    "The cat sat on the mat.",
    "Wherefore art thou Romeo?",
    "",
]


@pytest.fixture(scope="module")
def bert_model():
    """Hugging Face's BertModel from the installed model's folder, eager attention (it returns the weights)."""
    from transformers import BertModel

    for name in ("model.safetensors", "config.json"):  # the files BertModel reads, checked as the package's are
        checked_file(name)
    return BertModel.from_pretrained(str(model_folder()), attn_implementation="eager", local_files_only=True).eval()


def hugging_face_run(model, ids, mask):
    """``model`` on the batch: hidden states (layers + 1, batch, n, d) and attentions (layers, batch, h, n, n)."""
    import torch

    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask.astype(np.int64)),
                    output_hidden_states=True, output_attentions=True)
    return (np.stack([h.numpy() for h in out.hidden_states]), np.stack([a.numpy() for a in out.attentions]))


@pytest.fixture(scope="module")
def both(bert_model):
    ours = encode_sentences(SENTENCES)
    return ours, hugging_face_run(bert_model, ours.ids, ours.mask)


def test_the_batch_is_padded_and_its_sentences_differ_in_length(both):
    ours, _ = both
    lengths = ours.mask.sum(axis=1)
    assert len(SENTENCES) >= 8 and len(set(lengths.tolist())) >= 8 and ours.mask.shape[1] == lengths.max()


def test_every_layers_hidden_states_equal_bert_models_within_1e_4(both):
    ours, (hidden, _) = both
    assert ours.hidden.shape == hidden.shape == (7, len(SENTENCES), ours.mask.shape[1], 384)
    assert ours.hidden.dtype == np.float32
    real = np.abs(ours.hidden - hidden)[:, ours.mask]  # (layers + 1, real tokens, d)
    assert real.max() < 1e-4, [float(d) for d in real.max(axis=(1, 2))]
    assert np.abs(ours.hidden - hidden).max() < 1e-3  # the padded rows too (see the module's docstring)


def test_every_heads_attention_weights_equal_bert_models_within_1e_5(both):
    ours, (_, attention) = both
    assert ours.attention.shape == attention.shape == (6, len(SENTENCES), 12, ours.mask.shape[1], ours.mask.shape[1])
    real_queries = np.abs(ours.attention - attention).transpose(1, 3, 0, 2, 4)[ours.mask]  # (real, layers, h, n)
    assert real_queries.max() < 1e-5
    assert np.abs(ours.attention - attention).max() < 1e-4
    assert np.all(ours.attention[..., ~ours.mask[0]][:, 0] == 0)  # no weight on padding


def test_the_sentence_embedding_is_sentence_transformers_pooling_of_bert_models_output(both):
    ours, (hidden, _) = both
    mask = ours.mask[..., None]  # (batch, n, 1)
    mean = (hidden[-1] * mask).sum(axis=1) / mask.sum(axis=1)  # (batch, d)
    theirs = mean / np.linalg.norm(mean, axis=1, keepdims=True)  # (batch, d): Pooling, then Normalize
    np.testing.assert_allclose(ours.embedding, theirs, rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(ours.embedding, axis=1), 1, rtol=1e-6)
    np.testing.assert_array_equal(mean_pool(ours.hidden[-1], ours.mask), ours.embedding)


def test_removing_heads_equals_zeroing_their_part_of_bert_models_output_projection(both, bert_model):
    import torch

    ours, _ = both
    removed = [(0, 3), (2, 7), (5, 11)]
    ablated = encode_sentences(SENTENCES[:4], without_heads(load_minilm(), removed))
    kept = {}
    with torch.no_grad():  # transformers 5 has no prune_heads: zero the columns of the output projection
        for layer, head in removed:
            weight = bert_model.encoder.layer[layer].attention.output.dense.weight  # (d_out, d_in): y = x W^T
            kept[layer, head] = weight[:, head * 32:(head + 1) * 32].clone()
            weight[:, head * 32:(head + 1) * 32] = 0
    try:
        hidden, _ = hugging_face_run(bert_model, ablated.ids, ablated.mask)
    finally:
        with torch.no_grad():
            for (layer, head), block in kept.items():
                bert_model.encoder.layer[layer].attention.output.dense.weight[:, head * 32:(head + 1) * 32] = block
    assert np.abs(ablated.hidden - hidden)[:, ablated.mask].max() < 1e-4
    assert np.abs(ablated.embedding - ours.embedding[:4]).max() > 1e-3  # the heads mattered
