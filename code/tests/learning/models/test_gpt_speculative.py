"""Speculative decoding with the book's GPT as the target and its stored draft (attnbook.learning.analysis.gpt_decoder):
the block step on the KV cache computes what one position at a time computes, the caches after a round are a plain
run's on the text kept, the text follows the target's distribution (chi-square at alpha = 0.001), is the target's
greedy text at temperature 0, and the draft is the small model its record says."""

import numpy as np
import pytest

from attnbook.learning.analysis.gpt_decoder import (
    Cache,
    cached_block_step,
    cached_step,
    continuation_probabilities,
    empty_cache,
    gpt_model,
    read_prompt,
    speculative_generate,
)
from attnbook.learning.characters import decode_chars, encode_chars, splits, vocabulary
from attnbook.learning.decoding import greedy_decode
from attnbook.learning.models import gpt
from attnbook.learning.optim import tree_map
from attnbook.learning.speculative import speculative_round, speculative_sample
from attnbook.learning.store import trained_path
from attnbook.measure.statistics import chi_square_test

# A float32 model scored over the held-out play: another CPU's BLAS kernel (AVX2 against AVX-512) moves the
# mean by a few 1e-9 (measured with OPENBLAS_CORETYPE=Haswell and Sandybridge), far inside this tolerance.
FLOAT32_REL = 1e-6

ALPHA = 0.001  # the level of the sampling test: a correct sampler fails one seed in a thousand
PROMPT = "ROMEO:\nWhat"


@pytest.fixture(scope="module")
def models():
    return gpt.load_gpt(), gpt.load_gpt_draft()


def one_at_a_time(params, config, ids) -> Cache:
    """The plain run: the cache after reading ids one position at a time (cached_step, as generate reads)."""
    step, cache = cached_step(params, config), empty_cache(config, 1, params.embedding.dtype)
    for token in ids:
        cache = step(cache, np.array([token]))[1]
    return cache


def assert_caches_equal(a: Cache, b: Cache):
    for x, y in zip([*a.keys, *a.values], [*b.keys, *b.values]):
        assert x.shape == y.shape
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


def test_a_block_read_in_one_pass_gives_the_logits_and_cache_of_one_position_at_a_time(models):
    (params, config, _), _ = models
    params = tree_map(lambda a: a.astype(np.float64), params)
    ids = encode_chars("To be, or not to be")
    block = cached_block_step(params, config)
    cache = read_prompt(params, config, ids[:7])
    logits, cache = block(cache, ids[None, 7:])  # (1, 12, V)
    full = gpt.gpt_forward(params, ids[None], config).logits[0, 7:]  # (12, V)
    np.testing.assert_allclose(logits[0], full, rtol=1e-10, atol=1e-10)
    assert_caches_equal(cache, one_at_a_time(params, config, ids))


@pytest.mark.parametrize("seed", range(6))
def test_after_a_round_both_caches_are_a_plain_runs_on_the_text_kept(models, seed):
    (params, config, _), (d_params, d_config, _) = models
    params, d_params = (tree_map(lambda a: a.astype(np.float64), p) for p in (params, d_params))
    ids = encode_chars(PROMPT)
    target, draft = gpt_model(params, config), gpt_model(d_params, d_config)
    gamma = 4
    new, accepted, target_cache, draft_cache, _ = speculative_round(
        target, draft, read_prompt(params, config, ids[:-1]), read_prompt(d_params, d_config, ids[:-1]), int(ids[-1]),
        gamma, 1.0, np.random.default_rng(seed))
    kept = np.concatenate([ids, np.array(new[:-1], dtype=np.int64)])  # the text but its newest token, new[-1]
    assert_caches_equal(target_cache, one_at_a_time(params, config, kept))
    assert_caches_equal(draft_cache, one_at_a_time(d_params, d_config, kept))


def test_the_seeds_above_include_a_rejection_and_a_round_with_every_proposal_kept(models):
    """So the test above checks the rollback after a rejection and the draft's catching up after none."""
    (params, config, _), (d_params, d_config, _) = models
    ids = encode_chars(PROMPT)
    target, draft = gpt_model(params, config), gpt_model(d_params, d_config)
    accepted = [speculative_round(target, draft, read_prompt(params, config, ids[:-1]),
                                  read_prompt(d_params, d_config, ids[:-1]), int(ids[-1]), 4, 1.0,
                                  np.random.default_rng(seed))[1] for seed in range(6)]
    assert min(accepted) < 4 and max(accepted) == 4, accepted


@pytest.mark.parametrize("prompt", [PROMPT, "KING.\nI", "To be, or not to be, that is"])
def test_at_temperature_zero_the_text_is_the_targets_greedy_text(models, prompt):
    (params, config, _), (d_params, d_config, _) = models
    ids, n_new = encode_chars(prompt), 60
    greedy = greedy_decode(cached_step(params, config), read_prompt(params, config, ids[:-1]), 1, n_new,
                           bos=int(ids[-1]), eos=len(vocabulary())).tokens[0]
    draft_greedy = greedy_decode(cached_step(d_params, d_config), read_prompt(d_params, d_config, ids[:-1]), 1,
                                 n_new, bos=int(ids[-1]), eos=len(vocabulary())).tokens[0]
    for gamma in (1, 3, 6):
        out = speculative_generate(params, config, d_params, d_config, prompt, n_new, gamma, temperature=0)
        assert out.text == decode_chars(greedy)
    assert decode_chars(draft_greedy) != decode_chars(greedy)  # the draft alone writes another text


def test_the_first_three_characters_follow_the_targets_distribution_chi_square(models):
    """1,500 seeded runs of gamma = 2: the first three characters against the target's exact joint distribution
    (continuation_probabilities), cells expected below 5 pooled; and the draft's distribution fails the test."""
    (params, config, _), (d_params, d_config, _) = models
    ids, n, k = encode_chars(PROMPT), 1500, 3
    target, draft = gpt_model(params, config), gpt_model(d_params, d_config)
    target_cache, draft_cache = read_prompt(params, config, ids[:-1]), read_prompt(d_params, d_config, ids[:-1])
    vocab = len(vocabulary())
    counts = np.zeros((vocab,) * k)
    for seed in range(n):
        out = speculative_sample(target, draft, target_cache, draft_cache, int(ids[-1]), k, gamma=2, seed=seed)
        counts[tuple(out.tokens)] += 1
    test = chi_square_test(counts, continuation_probabilities(params, config, PROMPT, k))
    assert test.p_value > ALPHA, test
    assert chi_square_test(counts, continuation_probabilities(d_params, d_config, PROMPT, k)).p_value < ALPHA


def test_the_draft_is_the_small_model_of_its_record(models):
    (_, config, record), (d_params, d_config, d_record) = models
    assert d_config == gpt.DRAFT_CONFIG and (d_config.d_model, d_config.n_layers) == (32, 1)
    assert trained_path("gpt_draft", ".npz").stat().st_size <= 200_000
    bpc = gpt.bits_per_character(d_params, splits()[1], d_config)
    assert bpc == pytest.approx(d_record["metrics"]["held_out_bits_per_character"], rel=FLOAT32_REL)
    assert record["metrics"]["held_out_bits_per_character"] < bpc  # the target predicts better
    assert d_record["seconds"] < 240  # trains within two minutes on an idle machine (four at a load of 6)


def test_the_continuations_probabilities_are_the_product_of_the_next_character_distributions(models):
    (params, config, _), _ = models
    joint = continuation_probabilities(params, config, PROMPT, 2, temperature=0.8)
    ids = encode_chars(PROMPT)
    first = np.exp(gpt.gpt_forward(params, ids[None], config).logits[0, -1].astype(np.float64) / 0.8)
    first /= first.sum()
    np.testing.assert_allclose(joint.sum(axis=1), first, rtol=1e-5)
    assert joint.sum() == pytest.approx(1.0, rel=1e-12)


def test_the_continuations_sum_to_one_when_the_texts_round_their_shared_prompt_differently(models, monkeypatch):
    """Each text repeats the prompt; a BLAS kernel may round it differently row by row (OpenBLAS on AVX2 did, by
    ~1e-7). Noise of 1e-5 per row stands in for it: each conditional is still one distribution."""
    (params, config, _), _ = models
    exact = gpt.taped

    def row_dependent(params, texts, config):
        forward, back = exact(params, texts, config)
        noise = np.random.default_rng(0).normal(scale=1e-5, size=forward.logits.shape)  # (texts, n, V)
        return forward._replace(logits=forward.logits + noise.astype(forward.logits.dtype)), back

    monkeypatch.setattr(gpt, "taped", row_dependent)
    joint = continuation_probabilities(params, config, PROMPT, 2)
    assert joint.sum() == pytest.approx(1.0, rel=1e-12)


def test_invalid_arguments_are_refused_naming_them(models):
    (params, config, _), (d_params, d_config, _) = models
    with pytest.raises(ValueError, match="n_new"):
        speculative_generate(params, config, d_params, d_config, PROMPT, config.context)
    with pytest.raises(ValueError, match="gamma"):
        speculative_generate(params, config, d_params, d_config, PROMPT, 5, gamma=0)
    with pytest.raises(ValueError, match="temperature"):
        speculative_generate(params, config, d_params, d_config, PROMPT, 5, temperature=-1)
    with pytest.raises(ValueError, match="draft_config.context = 12"):
        speculative_generate(params, config, d_params, d_config._replace(context=12), PROMPT, 5)
    with pytest.raises(ValueError, match="k must be 1, 2 or 3"):
        continuation_probabilities(params, config, PROMPT, 4)
