"""Tests of attnbook.learning.models.seq2seq, the encoder-decoder that reverses strings.

The gradient is checked against central differences; a shortened retraining reproduces the stored loss
curve; the stored weights reproduce the stored metrics. Decoding with the key-value cache and without it
gives the same logits, so the same tokens, for greedy search, beam search and sampling, and the cached
step equals the teacher-forced forward pass at every position. Then the chapter's claims, on the stored
model: it reverses held-out strings, a cross-attention head reads the mirrored source position, beam
search never finds a less probable sequence than greedy search, cold sampling is greedy search, and the
cache makes long decodings several times faster.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from attnbook.learning.decoding import beam_search, greedy_decode, sample
from attnbook.learning.gradcheck import gradient_errors
from attnbook.learning.gradients import token_cross_entropy
from attnbook.learning.optim import tree_leaves
from attnbook.learning.analysis.seq2seq import cross_attention_alignment, decoding_speed
from attnbook.learning.analysis.seq2seq_decoder import reversal_accuracy, reversal_decoder
from attnbook.learning.models.seq2seq import (
    held_out_batch,
    init_reversal,
    load_reversal,
    MODEL,
    reversal_forward,
    reversal_loss_and_gradients,
    ReversalConfig,
    ReversalParameters,
    taped,
)
from attnbook.learning.models.scaffold import loss_and_gradients
from attnbook.learning.tasks import BOS, PAD, Seq2SeqBatch, alignment_agreement, reversal_batch

TINY = ReversalConfig(n_symbols=3, min_length=2, max_length=4, d_model=4, n_heads=2, d_ff=8, n_encoder_layers=1,
                      n_decoder_layers=1)


@pytest.fixture(scope="module")
def trained():
    return load_reversal()


def recording(step, log: list):
    """``step``, appending every logits array it returns to ``log``."""

    def recorded(state, tokens):
        logits, state = step(state, tokens)
        log.append(np.array(logits))
        return logits, state

    return recorded


# --- the gradient --------------------------------------------------------------------------------------


def test_the_full_gradient_matches_central_differences_in_float64():
    params = init_reversal(TINY, seed=3)
    batch = reversal_batch(3, TINY.n_symbols, TINY.min_length, TINY.max_length, seed=0)  # padded sources
    assert not batch.source_mask.all()
    loss, grads = reversal_loss_and_gradients(params, batch, TINY)
    errors = gradient_errors(lambda p: loss_and_gradients(MODEL, p, batch, TINY)[0],
                             params, grads)
    assert len(errors) == len(tree_leaves(params)) == 1 + 16 + 26  # every leaf: embedding, encoder, decoder
    assert max(errors.values()) <= 1e-6, max(errors, key=errors.get)


def test_the_loss_is_the_masked_smoothed_cross_entropy_of_the_forward_logits():
    params = init_reversal(TINY, seed=1)
    batch = reversal_batch(4, TINY.n_symbols, TINY.min_length, TINY.max_length, seed=2)
    out = reversal_forward(params, batch.source, batch.target_in, TINY)
    taped_ = taped(params, batch.source, batch.target_in, TINY.n_heads)[0]
    np.testing.assert_array_equal(taped_.logits, out.logits)  # training and inference run the same numbers
    loss, _ = reversal_loss_and_gradients(params, batch, TINY)
    expected, _ = token_cross_entropy(out.logits, batch.target_out, batch.target_mask, TINY.label_smoothing)
    assert loss == pytest.approx(expected, rel=1e-12)


def test_padding_changes_nothing_the_loss_sees():
    params = init_reversal(TINY, seed=1)
    batch = reversal_batch(1, TINY.n_symbols, 3, 3, seed=5)
    padded = Seq2SeqBatch(*(np.pad(a, ((0, 0), (0, 2)), constant_values=PAD if a.dtype != bool else False)
                            for a in batch))
    (loss, grads), (loss_padded, grads_padded) = (reversal_loss_and_gradients(params, b, TINY)
                                                  for b in (batch, padded))
    assert loss_padded == pytest.approx(loss, rel=1e-12)
    for g, g_padded in zip(tree_leaves(grads), tree_leaves(grads_padded)):
        np.testing.assert_allclose(g_padded, g, rtol=1e-9, atol=1e-13)


# --- the stored model ----------------------------------------------------------------------------------


def test_a_shortened_retraining_reproduces_the_stored_loss_curve(trained):
    # The stored curve was computed by `python -m tools.train`, which sets OPENBLAS_NUM_THREADS=1 before
    # numpy loads. A subprocess with the same setting runs the first K steps in the same summation order
    # whatever thread count this pytest process has, so the numbers agree to the last bit on the same
    # machine; rtol=1e-6 leaves room for another BLAS build or processor, not for a changed computation.
    k = 100
    code = ("import json; from attnbook.learning.models.scaffold import train; "
            "from attnbook.learning.models.seq2seq import MODEL, ReversalConfig; "
            f"print(json.dumps(train(MODEL, ReversalConfig(), {trained.record['seed']}, False, {k})[1]['losses']))")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    np.testing.assert_allclose(json.loads(done.stdout), trained.record["losses"][:k], rtol=1e-6)


def test_the_stored_weights_reproduce_the_stored_metrics(trained):
    config, batch = trained.config, held_out_batch(trained.config)
    metrics, alignment = MODEL.evaluate(trained.params, config), cross_attention_alignment(trained.params, batch, config)
    metrics.update(accuracy=reversal_accuracy(trained.params, batch, config), alignment=alignment.agreement.tolist(),
                   alignment_weight=alignment.weight.tolist(),
                   clearest_head={"layer": alignment.clearest[0], "head": alignment.clearest[1]})
    stored = trained.record["metrics"]
    for name in ("accuracy", "token_accuracy", "alignment", "clearest_head"):  # ratios of counts: exact
        assert metrics[name] == stored[name], name
    assert metrics["test_loss"] == pytest.approx(stored["test_loss"], rel=1e-12)
    np.testing.assert_allclose(metrics["alignment_weight"], stored["alignment_weight"], rtol=1e-12)


def test_the_record_is_that_of_the_default_training_run(trained):
    record = trained.record
    assert trained.config == ReversalConfig() and record["config"] == ReversalConfig()._asdict()
    assert len(record["losses"]) == record["n_steps"] == trained.config.n_steps
    assert record["metrics"]["final_loss"] == pytest.approx(np.mean(record["losses"][-50:]), rel=1e-12)
    assert record["metrics"]["final_loss"] < record["losses"][0] / 3
    assert 0 < record["seconds"] < 180  # a few minutes at most on two cores
    speeds = record["decoding_speed"]  # measured when the model was trained; the chapter may quote them
    assert speeds["untrained_64_sequences_32_tokens"]["speedup"] > speeds["trained_64_sequences_8_tokens"]["speedup"] > 1


def test_loading_and_a_forward_pass_need_no_training_libraries():
    # not timed (a timed test fails on a busy machine): only what the reader's kernel must import is asserted
    code = ("import sys, json; from attnbook.learning.models.seq2seq import load_reversal, reversal_forward; "
            "from attnbook.learning.tasks import reversal_batch; t = load_reversal(); "
            "b = reversal_batch(64, 10, 3, 8, seed=0); reversal_forward(t.params, b.source, b.target_in, t.config); "
            "print(json.dumps([m for m in ('tqdm', 'torch', 'sklearn') if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    assert json.loads(done.stdout) == []


# --- decoding with and without the cache ----------------------------------------------------------------


def test_the_cached_step_equals_the_forward_pass_at_every_position(trained):
    batch = reversal_batch(16, 10, 3, 8, seed=4)
    full = reversal_forward(trained.params, batch.source, batch.target_in, trained.config).logits  # (B, n_tgt, V)
    for cache in (True, False):
        decoder = reversal_decoder(trained.params, batch.source, trained.config, cache=cache)
        state = decoder.state
        for t in range(batch.target_in.shape[1]):
            logits, state = decoder.step(state, batch.target_in[:, t])
            np.testing.assert_allclose(logits, full[:, t], rtol=0, atol=1e-10)


def test_greedy_decoding_with_and_without_the_cache_gives_the_same_logits_and_tokens(trained):
    config = trained.config
    for params, never_ends in ((trained.params, False), (init_reversal(config, seed=9), True)):
        source = reversal_batch(12, 10, 3, 8, seed=6).source
        eos = config.vocab_size if never_ends else 2  # an untrained model decoded for the full 20 steps
        outputs, logs = [], []
        for cache in (True, False):
            decoder = reversal_decoder(params, source, config, cache=cache, max_length=20)
            log = []
            outputs.append(greedy_decode(recording(decoder.step, log), decoder.state, 12, 20, eos=eos))
            logs.append(np.stack(log))
        np.testing.assert_array_equal(outputs[0].tokens, outputs[1].tokens)
        np.testing.assert_allclose(logs[0], logs[1], rtol=0, atol=1e-10)
        np.testing.assert_allclose(outputs[0].log_probs, outputs[1].log_probs, rtol=0, atol=1e-10)
        assert logs[0].shape[0] == (20 if never_ends else 9)


def test_beam_search_with_and_without_the_cache_finds_the_same_hypotheses(trained):
    for params in (trained.params, init_reversal(trained.config, seed=2)):
        for source in reversal_batch(4, 10, 3, 8, seed=8).source:
            found, logs = [], []
            for cache in (True, False):
                decoder = reversal_decoder(params, source[None], trained.config, cache=cache)
                log = []
                found.append(beam_search(recording(decoder.step, log), decoder.reorder, decoder.state,
                                         decoder.max_length, beam_width=3))
                logs.append(log)
            assert len(found[0].hypotheses) == len(found[1].hypotheses)
            for a, b in zip(found[0].hypotheses, found[1].hypotheses):
                np.testing.assert_array_equal(a.tokens, b.tokens)
                assert a.log_prob == pytest.approx(b.log_prob, rel=0, abs=1e-10)
            assert len(logs[0]) == len(logs[1])
            for a, b in zip(*logs):
                np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)


def test_seeded_sampling_with_and_without_the_cache_draws_the_same_sequences(trained):
    for params in (trained.params, init_reversal(trained.config, seed=4)):
        source = reversal_batch(16, 10, 3, 8, seed=10).source
        drawn, logs = [], []
        for cache in (True, False):
            decoder = reversal_decoder(params, source, trained.config, cache=cache)
            log = []
            drawn.append(sample(recording(decoder.step, log), decoder.state, 16, decoder.max_length,
                                temperature=1.5, seed=3))
            logs.append(np.stack(log))
        np.testing.assert_array_equal(drawn[0].tokens, drawn[1].tokens)
        np.testing.assert_allclose(logs[0], logs[1], rtol=0, atol=1e-10)


def test_the_cache_makes_long_decodings_faster():
    config = ReversalConfig()
    speed = decoding_speed(init_reversal(config, seed=0), config, n_sequences=16, n_tokens=32, repeats=2)
    assert speed.n_tokens == 32 and speed.cached_tokens_per_second > speed.uncached_tokens_per_second
    assert speed.speedup > 1.5  # about 9 when measured (64 sequences of 32 tokens); a margin for busy machines


# --- the chapter's claims, on the stored weights ------------------------------------------------------------


def test_the_trained_model_reverses_held_out_strings(trained):
    assert trained.record["metrics"]["accuracy"] >= 0.99
    fresh = reversal_batch(300, 10, 3, 8, seed=123)
    assert reversal_accuracy(trained.params, fresh, trained.config) >= 0.99


def test_a_cross_attention_head_reads_the_mirrored_source_position(trained):
    batch = held_out_batch(trained.config)
    alignment = cross_attention_alignment(trained.params, batch, trained.config)
    assert alignment.agreement.shape == alignment.weight.shape == (trained.config.n_decoder_layers,
                                                                     trained.config.n_heads)
    stored = trained.record["metrics"]
    np.testing.assert_array_equal(alignment.agreement, stored["alignment"])
    np.testing.assert_allclose(alignment.weight, stored["alignment_weight"], rtol=1e-12)
    assert stored["clearest_head"] == {"layer": alignment.clearest[0], "head": alignment.clearest[1]}
    # most target positions: nearly all of them, with nearly all the head's weight
    assert alignment.agreement[alignment.clearest] >= 0.95 and alignment.weight[alignment.clearest] >= 0.9
    # the shares are those of learning.tasks.alignment_agreement, head by head
    cross = reversal_forward(trained.params, batch.source, batch.target_in, trained.config).cross_weights
    lengths = batch.source_mask.sum(axis=1)
    for layer, weights in enumerate(cross):
        for head in range(trained.config.n_heads):
            assert alignment.agreement[layer, head] == pytest.approx(alignment_agreement(weights[:, head], lengths),
                                                                     rel=1e-12)


def test_an_untrained_model_has_no_such_head():
    config = ReversalConfig()
    alignment = cross_attention_alignment(init_reversal(config, seed=0), held_out_batch(config), config)
    assert alignment.agreement.max() < 0.5


def test_beam_search_finds_sequences_at_least_as_probable_as_greedy_search(trained):
    sources = reversal_batch(40, 10, 3, 8, seed=17).source
    decoder = reversal_decoder(trained.params, sources, trained.config)
    greedy = greedy_decode(decoder.step, decoder.state, 40, decoder.max_length)
    for row, source in enumerate(sources):
        one = reversal_decoder(trained.params, source[None], trained.config)
        best = beam_search(one.step, one.reorder, one.state, one.max_length, beam_width=4).best
        assert best.log_prob >= greedy.log_probs[row] - 1e-12


def test_cold_sampling_is_greedy_search_and_top_1_sampling_exactly_so(trained):
    sources = reversal_batch(200, 10, 3, 8, seed=19).source

    def decode(**options):
        decoder = reversal_decoder(trained.params, sources, trained.config)
        if not options:
            return greedy_decode(decoder.step, decoder.state, 200, decoder.max_length)
        return sample(decoder.step, decoder.state, 200, decoder.max_length, seed=5, **options)

    greedy, cold, top_1 = decode(), decode(temperature=0.1), decode(top_k=1)
    np.testing.assert_array_equal(top_1.tokens, greedy.tokens)
    np.testing.assert_array_equal(top_1.log_probs, greedy.log_probs)
    same = np.all(cold.tokens == greedy.tokens, axis=1) if cold.tokens.shape == greedy.tokens.shape else None
    assert same is not None and same.mean() >= 0.95


# --- the boundary ------------------------------------------------------------------------------------------


def test_inputs_that_do_not_fit_are_refused_naming_the_argument(trained):
    batch = reversal_batch(2, 10, 3, 8, seed=0)
    with pytest.raises(TypeError, match="config must be a ReversalConfig"):
        reversal_forward(trained.params, batch.source, batch.target_in, {"d_model": 32})
    with pytest.raises(ValueError, match="params.embedding has shape"):
        reversal_forward(trained.params._replace(embedding=np.zeros((12, 32))), batch.source, batch.target_in,
                         trained.config)
    with pytest.raises(ValueError, match="source holds tokens outside 0 .. 12"):
        reversal_forward(trained.params, batch.source + 13, batch.target_in, trained.config)
    with pytest.raises(ValueError, match="source has a row of padding only"):
        reversal_decoder(trained.params, np.zeros((1, 3), dtype=int), trained.config)
    with pytest.raises(ValueError, match="batch.source_mask must be True exactly"):
        reversal_loss_and_gradients(trained.params, batch._replace(source_mask=~batch.source_mask), trained.config)
    with pytest.raises(TypeError, match="params must be ReversalParameters"):
        reversal_accuracy(tuple(trained.params), batch, trained.config)
    with pytest.raises(ValueError, match="config.d_model = 9 is odd"):
        init_reversal(ReversalConfig(d_model=9, n_heads=3))
    assert isinstance(init_reversal(TINY), ReversalParameters)


def test_the_cached_steps_rows_stacked_are_the_full_passs_causal_self_attention():
    trained = load_reversal()
    source = np.array([[3, 9, 4, 7, 5]])
    decoder = reversal_decoder(trained.params, source, trained.config)
    state, fed, rows = decoder.state, [BOS], []
    for _ in range(6):
        logits, state = decoder.step(state, np.array(fed[-1:]))
        rows.append(state.self_rows)
        fed.append(int(logits.argmax()))
    full = reversal_forward(trained.params, source, np.array([fed[:-1]]), trained.config).self_weights
    for layer, weights in enumerate(full):  # (1, h, 6, 6)
        for t, step_rows in enumerate(rows):
            np.testing.assert_allclose(step_rows[layer][0], weights[0, :, t, : t + 1], rtol=1e-12, atol=1e-14)
            assert np.all(weights[0, :, t, t + 1:] == 0)
