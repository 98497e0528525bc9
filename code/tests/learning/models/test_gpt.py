"""attnbook.learning.models.gpt: the gradient is exact in float64, training runs in float32, the KV cache
writes what recomputing writes, the stored model reproduces its record and beats its n-gram baseline, and each
character's bits are the model's prediction from the characters its window gave it."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from attnbook.learning.analysis.gpt import gpt_character_bits, gpt_head_scores, most_context
from attnbook.learning.analysis.gpt_decoder import Cache, cached_step, generate
from attnbook.learning.characters import decode_chars, encode_chars, splits, vocabulary
from attnbook.learning.gradcheck import gradient_errors
from attnbook.learning.models import gpt
from attnbook.learning.models.scaffold import loss_and_gradients
from attnbook.learning.optim import tree_leaves, tree_map
from attnbook.text.ngram import fit_ngram, ngram_bits_per_character

# A float32 model scored over the held-out play: another CPU's BLAS kernel (AVX2 against AVX-512) moves the
# mean by a few 1e-9 (measured with OPENBLAS_CORETYPE=Haswell and Sandybridge), far inside this tolerance.
FLOAT32_REL = 1e-6

SRC = Path(__file__).resolve().parents[3] / "src"
SMALL = gpt.GPTConfig(d_model=8, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=12, context=8, batch_size=2)


@pytest.fixture(scope="module")
def stored():
    return gpt.load_gpt()


def test_the_gradient_of_every_weight_matches_central_differences_in_float64():
    params = tree_map(lambda a: a.astype(np.float64), gpt.init_gpt(SMALL, seed=2))
    params = params._replace(layers=tuple(layer._replace(attention=layer.attention._replace(
        w_o=layer.attention.w_o * 3)) for layer in params.layers))  # larger, so attention matters
    tokens = gpt.gpt_batch(np.random.default_rng(0), SMALL)  # (batch, context + 1)
    loss, grads = loss_and_gradients(gpt.MODEL, params, tokens, SMALL)
    errors = gradient_errors(lambda p: loss_and_gradients(gpt.MODEL, p, tokens, SMALL)[0], params, grads)
    biases = {path for path in errors if path.split(".")[-1] in ("b_q", "b_k", "b_v", "b_o")}
    assert max(errors[p] for p in errors if p not in biases) < 1e-6, max(errors, key=errors.get)
    assert all(not np.any(g) for g in tree_leaves(tuple(l.attention[4:] for l in grads.layers)))  # kept at 0


def test_float32_in_and_out_and_close_to_float64():
    params = gpt.init_gpt(SMALL, seed=1)
    tokens = gpt.gpt_batch(np.random.default_rng(1), SMALL)
    loss32, grads32 = loss_and_gradients(gpt.MODEL, params, tokens, SMALL)
    loss64, grads64 = loss_and_gradients(gpt.MODEL, tree_map(lambda a: a.astype(np.float64), params), tokens, SMALL)
    assert all(g.dtype == np.float32 for g in tree_leaves(grads32))
    assert loss32 == pytest.approx(loss64, rel=1e-5)
    for a, b in zip(tree_leaves(grads32), tree_leaves(grads64)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


def test_the_kv_cache_computes_the_logits_of_recomputing():
    config = SMALL._replace(context=24)
    params = gpt.init_gpt(config, seed=3)
    kwargs = dict(temperature=1.5, top_k=20, top_p=0.95, seed=4, rows=3)
    assert generate(params, config, "KING:", 19, **kwargs) == generate(params, config, "KING:", 19,
                                                                            cache=False, **kwargs)
    ids = encode_chars("To be, or not to be")
    step, state = cached_step(params, config), None
    empty = np.zeros((1, config.n_kv_heads, 0, config.d_model // config.n_heads), np.float32)
    state = Cache([empty] * config.n_layers, [empty] * config.n_layers)
    cached = []
    for t in ids:
        logits, state = step(state, np.array([t]))
        cached.append(logits[0])
    full = gpt.gpt_forward(params, ids[None], config).logits[0]  # (n, V)
    np.testing.assert_allclose(np.array(cached), full, rtol=1e-5, atol=1e-5)


def test_generation_refuses_more_than_the_context():
    with pytest.raises(ValueError, match="must together fit"):
        generate(gpt.init_gpt(SMALL), SMALL, "abc", 6)


def test_the_splits_are_the_first_seven_plays_and_twelfth_night():
    train, held_out = splits()
    assert decode_chars(held_out[:13]) == "TWELFTH NIGHT" and "TWELFTH NIGHT" not in decode_chars(train[-50_000:])
    assert 0.10 < len(held_out) / (len(train) + len(held_out)) < 0.12


def test_the_stored_model_reproduces_its_record_and_beats_the_ngram(stored):
    params, config, record = stored
    assert params.embedding.dtype == np.float32
    metrics = record["metrics"]
    bpc = gpt.bits_per_character(params, splits()[1], config)
    assert bpc == pytest.approx(metrics["held_out_bits_per_character"], rel=FLOAT32_REL)
    baseline = fit_ngram(splits()[0], gpt.NGRAM_ORDER, len(vocabulary()), gpt.NGRAM_K)
    ngram = ngram_bits_per_character(baseline, splits()[1])
    assert ngram == pytest.approx(metrics["ngram_held_out_bits_per_character"], rel=1e-12)
    assert bpc < ngram
    assert record["seconds"] < 600  # trained within ten minutes on this machine


def test_a_shortened_retraining_reproduces_the_stored_loss_curve(stored):
    _, config, record = stored
    steps = 20
    code = textwrap.dedent(f"""
        import json
        from attnbook.learning.models.gpt import MODEL, GPTConfig
        from attnbook.learning.models.scaffold import train
        config = GPTConfig(**json.loads({json.dumps(json.dumps(record["config"]))}))
        _, record = train(MODEL, config, seed={record["seed"]}, progress=False, n_steps={steps})
        print(json.dumps(record["losses"]))
    """)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(SRC)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    np.testing.assert_allclose(json.loads(result.stdout), record["losses"][:steps], rtol=1e-5)


def test_the_head_scores_are_weights(stored):
    params, config, _ = stored
    s = gpt_head_scores(params, config, n_windows=4)
    for scores in (s.previous_token, s.induction, s.first_token):
        assert scores.shape == (config.n_layers, config.n_heads) and np.all((scores >= 0) & (scores <= 1))


def test_each_characters_bits_are_the_prediction_from_the_characters_its_window_gave_it():
    params, text = gpt.init_gpt(SMALL, seed=3), splits()[1][:40]
    for offset in (0, 3):
        scored = gpt_character_bits(params, text, SMALL, offset=offset)
        starts = offset + np.arange((len(text) - offset) // (SMALL.context + 1)) * (SMALL.context + 1)
        assert set(np.flatnonzero(scored.seen == 0)) == set(range(offset)) | set(starts) | set(
            range(starts[-1] + SMALL.context + 1, len(text)))  # before the offset, window starts, the rest
        for t in np.flatnonzero(scored.seen):
            read = text[t - scored.seen[t]:t]  # the characters the prediction read, from the window's start
            log_p = np.log(np.exp(gpt.gpt_forward(params, read[None], SMALL).logits[0, -1].astype(np.float64)))
            log_p -= np.log(np.exp(log_p).sum())
            assert scored.bits[t] == pytest.approx(-log_p[text[t]] / np.log(2), rel=1e-5)


def test_character_bits_from_offset_zero_average_to_bits_per_character():
    params, text = gpt.init_gpt(SMALL, seed=4), splits()[1][:100]
    assert np.nanmean(gpt_character_bits(params, text, SMALL).bits) == pytest.approx(
        gpt.bits_per_character(params, text, SMALL), rel=1e-12)


def test_two_offsets_half_a_window_apart_give_every_later_character_half_a_window():
    params, text = gpt.init_gpt(SMALL, seed=5), splits()[1][:60]
    half = SMALL.context // 2
    first, second = (gpt_character_bits(params, text, SMALL, offset=a) for a in (0, half))
    merged = most_context(first, second)
    later = merged.seen[half:]
    assert later[later > 0].min() == half
    assert np.all(merged.seen == np.maximum(first.seen, second.seen))
    from_second = second.seen > first.seen
    np.testing.assert_array_equal(merged.bits[from_second], second.bits[from_second])
    np.testing.assert_array_equal(merged.bits[~from_second], first.bits[~from_second])


def test_character_bits_refuse_an_offset_outside_the_window_and_a_short_text():
    params, text = gpt.init_gpt(SMALL), splits()[1][:30]
    for offset in (-1, SMALL.context + 1, 1.5):
        with pytest.raises(ValueError, match="offset"):
            gpt_character_bits(params, text, SMALL, offset=offset)
    with pytest.raises(ValueError, match="characters"):
        gpt_character_bits(params, text[:SMALL.context], SMALL)
    with pytest.raises(ValueError, match="windows"):
        gpt.window_bits(params, text[None, :SMALL.context + 2], SMALL)  # one character too many


@pytest.fixture(scope="module")
def wide():
    return gpt.load_gpt_wide()


def test_the_wide_model_reproduces_its_record_and_its_checkpoints_count_the_compute_spent(wide):
    params, config, record = wide
    assert config == gpt.WIDE and params.embedding.dtype == np.float32
    assert sum(leaf.nbytes for leaf in tree_leaves(params)) <= 4 * 2**20  # the weights stay under 4 MB
    bpc = gpt.bits_per_character(params, splits()[1], config)
    assert bpc == pytest.approx(record["metrics"]["held_out_bits_per_character"], rel=FLOAT32_REL)
    checkpoints = record["checkpoints"]
    assert checkpoints["step"] == list(range(1000, config.n_steps + 1, 1000))
    assert checkpoints["flops"] == [step * gpt.training_step_flops(config) for step in checkpoints["step"]]
    assert checkpoints["held_out_bits_per_character"][-1] == pytest.approx(bpc, rel=FLOAT32_REL)  # the last is the end


def test_a_shortened_retraining_of_the_wide_model_takes_the_first_steps_of_its_schedule(wide):
    _, config, record = wide
    steps = 12
    code = textwrap.dedent(f"""
        import json
        from attnbook.learning.models.gpt import MODEL, WIDE
        from attnbook.learning.models.scaffold import train
        _, record = train(MODEL, WIDE, seed={record["seed"]}, progress=False, n_steps={steps})
        print(json.dumps(record["losses"]))
    """)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(SRC)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    np.testing.assert_allclose(json.loads(result.stdout), record["losses"][:steps], rtol=1e-5)


def test_the_validation_run_is_the_long_run_fitted_without_the_validation_slice_and_scored_on_it():
    from attnbook.learning.characters import validation_splits

    run, long_run = gpt.load_scaling()["validation"], gpt.load_scaling()["sizes"]["wide_long"]
    fitted, validation = validation_splits()
    assert run["config"] == long_run["config"] and run["seed"] == long_run["seed"]
    assert run["split"]["fitted_characters"] == len(fitted) and run["split"]["validation_characters"] == len(validation)
    checkpoints = run["checkpoints"]
    assert checkpoints["step"] == long_run["checkpoints"]["step"] and checkpoints["flops"] == long_run["checkpoints"]["flops"]
    assert checkpoints["validation_bits_per_character"][-1] == run["metrics"]["validation_bits_per_character"]
    # a different text scored: no checkpoint equals the held-out play's score at the same step
    assert all(a != b for a, b in zip(checkpoints["validation_bits_per_character"],
                                      long_run["checkpoints"]["held_out_bits_per_character"]))


def test_the_scaling_record_holds_smaller_gpts_and_a_longer_wide_one_of_the_wide_recipe():
    scaling = gpt.load_scaling()
    wide_size = sum(leaf.size for leaf in tree_leaves(gpt.init_gpt(gpt.WIDE)))
    for name, size in scaling["sizes"].items():
        config = gpt.GPTConfig(**size["config"])
        assert config._replace(d_model=gpt.WIDE.d_model, n_layers=gpt.WIDE.n_layers, n_heads=gpt.WIDE.n_heads,
                               n_kv_heads=gpt.WIDE.n_kv_heads, d_ff=gpt.WIDE.d_ff,
                               n_steps=gpt.WIDE.n_steps) == gpt.WIDE, name  # only the size and length differ
        assert size["parameters"] == sum(leaf.size for leaf in tree_leaves(gpt.init_gpt(config)))
        checkpoints = size["checkpoints"]
        assert checkpoints["step"][-1] == config.n_steps
        assert checkpoints["flops"] == [step * gpt.training_step_flops(config) for step in checkpoints["step"]]
        assert checkpoints["held_out_bits_per_character"][-1] == size["metrics"]["held_out_bits_per_character"]
        if name == "wide_long":
            assert config == gpt.WIDE._replace(n_steps=3 * gpt.WIDE.n_steps)
        else:
            assert config.n_steps == scaling["steps"] == gpt.WIDE.n_steps and size["parameters"] < wide_size
