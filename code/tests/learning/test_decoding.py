"""Tests of attnbook.learning.decoding on toy models whose answers are known exactly: bigram tables (a Markov
chain), and a model whose next token depends on the whole prefix, run with a cache and from scratch.

Greedy search is the argmax path; beam search wide enough is exhaustive search, and of width 1 is greedy;
sampling is reproducible, draws from the softmax (a chi-square bound), respects top-k and the nucleus, and
turns greedy as the temperature falls."""

import itertools
import math

import numpy as np
import pytest

from attnbook.efficient.kv_cache import KVCache
from attnbook.learning.decoding import (
    beam_search,
    bigram_step,
    greedy_decode,
    length_normalisation,
    nucleus_filter,
    sample,
    top_k_filter,
)
from attnbook.learning.gradients import log_softmax
from attnbook.learning.tasks import BOS, EOS, PAD

SAME = lambda state, index: state  # noqa: E731  the reorder of a model without state


def random_table(vocab: int, seed: int, concentration: float = 1.0) -> np.ndarray:
    """A random transition table (rows are Dirichlet draws): no ties, almost surely."""
    return np.random.default_rng(seed).dirichlet(np.full(vocab, concentration), size=vocab)  # (V, V)


def sequence_log_prob(table: np.ndarray, tokens, bos: int = BOS) -> float:
    previous = [bos, *tokens[:-1]]
    return float(sum(math.log(table[u, v]) for u, v in zip(previous, tokens)))


# --- greedy search ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_greedy_is_the_argmax_path(seed):
    table = random_table(5, seed)
    out = greedy_decode(bigram_step(table), None, batch_size=3, max_length=8)
    expected, token = [], BOS
    while len(expected) < 8 and (not expected or expected[-1] != EOS):
        token = int(table[token].argmax())
        expected.append(token)
    assert out.tokens.tolist() == [expected] * 3
    assert out.lengths.tolist() == [len(expected)] * 3
    np.testing.assert_allclose(out.log_probs, sequence_log_prob(table, expected))


def test_greedy_pads_finished_rows_and_returns_once_every_row_has_ended():
    calls = []

    def step(state, tokens):  # row 0 ends at once, row 1 after two tokens; then EOS is certain
        calls.append(tokens.copy())
        logits = np.full((2, 4), -np.inf)
        logits[:, EOS] = 0.0
        if len(calls) == 1:
            logits[1] = [-np.inf, -np.inf, -np.inf, 0.0]
        return logits, state

    out = greedy_decode(step, None, batch_size=2, max_length=10)
    assert out.tokens.tolist() == [[EOS, PAD], [3, EOS]]
    assert out.lengths.tolist() == [1, 2] and out.log_probs.tolist() == [0.0, 0.0]
    assert len(calls) == 2 and calls[0].tolist() == [BOS, BOS] and calls[1].tolist() == [EOS, 3]


def test_greedy_stops_at_max_length_without_eos():
    table = np.full((4, 4), 0.01)
    table[:, 3] = 0.97
    out = greedy_decode(bigram_step(table), None, 1, 3)
    assert out.tokens.tolist() == [[3, 3, 3]] and out.lengths.tolist() == [3]


# --- beam search ------------------------------------------------------------------------------------------


def brute_force(table: np.ndarray, max_length: int, alpha: float):
    """Every hypothesis beam search may return: ended by EOS within max_length tokens, or cut at max_length."""
    others = [v for v in range(table.shape[0]) if v != EOS]
    candidates = [list(p) + [EOS] for n in range(max_length) for p in itertools.product(others, repeat=n)]
    candidates += [list(p) for p in itertools.product(others, repeat=max_length)]
    scored = [(sequence_log_prob(table, c) / length_normalisation(len(c), alpha), c) for c in candidates]
    return max(scored, key=lambda pair: pair[0])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_a_beam_wide_enough_finds_the_most_probable_sequence(seed, alpha):
    # vocabulary 4, up to 4 tokens: a beam of 64 holds every prefix (at most 3^3 = 27 without EOS)
    table = random_table(4, seed, concentration=0.7)
    out = beam_search(bigram_step(table), SAME, None, max_length=4, beam_width=64, length_penalty=alpha)
    score, tokens = brute_force(table, 4, alpha)
    assert out.best.tokens.tolist() == tokens
    assert out.best.score == pytest.approx(score, rel=1e-12)
    assert out.best.log_prob == pytest.approx(sequence_log_prob(table, tokens), rel=1e-12)
    scores = [h.score for h in out.hypotheses]
    assert scores == sorted(scores, reverse=True) and out.best is out.hypotheses[0]


@pytest.mark.parametrize("seed", range(8))
def test_a_beam_of_width_one_is_greedy_search(seed):
    table = random_table(6, seed)
    greedy = greedy_decode(bigram_step(table), None, 1, 7)
    beam = beam_search(bigram_step(table), SAME, None, max_length=7, beam_width=1)
    assert beam.best.tokens.tolist() == greedy.tokens[0, : greedy.lengths[0]].tolist()
    assert beam.best.log_prob == pytest.approx(float(greedy.log_probs[0]), rel=1e-12)


def test_beam_search_beats_greedy_when_the_first_step_misleads():
    table = [[0, 0, 1, 0, 0], [0, 0, .1, .5, .4], [0, 0, 1, 0, 0], [0, 0, .4, .3, .3], [0, 0, .9, .05, .05]]
    step = bigram_step(table)
    assert greedy_decode(step, None, 1, 5).tokens.tolist() == [[3, 2]]  # 0.5 * 0.4 = 0.20
    out = beam_search(step, SAME, None, 5, beam_width=2)
    assert out.best.tokens.tolist() == [4, 2] and math.exp(out.best.log_prob) == pytest.approx(0.36)


def test_the_length_penalty_favours_longer_hypotheses():
    # EOS right away has probability 0.4; a long sequence has a lower probability but a higher mean
    table = np.array([[.25, .25, .25, .25], [.05, .05, .4, .5], [.25, .25, .25, .25], [.01, .01, .08, .9]])
    plain = beam_search(bigram_step(table), SAME, None, 6, beam_width=4, length_penalty=0.0)
    long = beam_search(bigram_step(table), SAME, None, 6, beam_width=4, length_penalty=2.0)
    assert plain.best.tokens.tolist() == [EOS]
    assert len(long.best.tokens) > 1
    assert length_normalisation(1, 0.6) == 1.0 and length_normalisation([1, 7], 1.0).tolist() == [1.0, 2.0]


# --- sampling ---------------------------------------------------------------------------------------------


def test_sampling_is_reproducible_from_its_seed():
    step = bigram_step(random_table(6, 0))
    a, b = sample(step, None, 20, 10, seed=5), sample(step, None, 20, 10, seed=np.random.default_rng(5))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.tokens, sample(step, None, 20, 10, seed=6).tokens)


def one_step_frequencies(logits, n, **options):
    """Frequencies of the first token over ``n`` samples from constant ``logits`` (EOS out of reach: vocab 5)."""
    step = lambda state, tokens: (np.broadcast_to(logits, (len(tokens), len(logits))), state)  # noqa: E731
    first = sample(step, None, n, 1, seed=0, eos=99, **options).tokens[:, 0]
    return np.bincount(first, minlength=len(logits))


CHI2_999 = {1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47}  # the 0.999 quantile of chi-square with these degrees of freedom


def chi_square(counts, probs):
    expected = probs * counts.sum()
    seen = probs > 0
    return float(((counts[seen] - expected[seen]) ** 2 / expected[seen]).sum()), int(seen.sum()) - 1


@pytest.mark.parametrize("options", [{}, {"temperature": 2.0}, {"temperature": 0.5}, {"top_k": 3}, {"top_p": 0.7},
                                     {"top_p": 0.8, "temperature": 1.2}])
def test_one_step_samples_follow_the_tempered_and_truncated_softmax(options):
    logits = np.array([1.0, -0.5, 0.3, 2.0, 0.0])
    z = logits / options.get("temperature", 1.0)
    if "top_k" in options:
        z = top_k_filter(z, options["top_k"])
    if "top_p" in options:
        z = nucleus_filter(z, options["top_p"])
    probs = np.exp(log_softmax(z))
    counts = one_step_frequencies(logits, 20000, **options)
    assert np.all(counts[probs == 0] == 0)
    statistic, dof = chi_square(counts, probs)
    assert statistic < CHI2_999[dof], f"chi-square {statistic:.1f} with {dof} degrees of freedom"
    # and the check has power: the untempered softmax fails it when the temperature is not 1
    if options.get("temperature", 1.0) != 1.0:
        assert chi_square(counts, np.exp(log_softmax(logits)))[0] > 100


@pytest.mark.parametrize("seed", range(4))
def test_top_k_never_emits_a_token_outside_the_top_k(seed):
    table = random_table(8, seed)
    out = sample(bigram_step(table), None, 200, 6, top_k=2, seed=seed)
    top2 = np.argsort(-table, axis=1)[:, :2]
    for row, n in zip(out.tokens, out.lengths):
        for previous, token in zip([BOS, *row[: n - 1]], row[:n]):
            assert token in top2[previous]


def test_the_nucleus_is_the_smallest_most_probable_set_reaching_p():
    rng = np.random.default_rng(0)
    for p in (0.05, 0.3, 0.5, 0.9, 0.999, 1.0):
        logits = 2 * rng.standard_normal((50, 9))
        kept = np.isfinite(nucleus_filter(logits, p))
        probs = np.exp(log_softmax(logits))
        for row_kept, row_p, row_z in zip(kept, probs, logits):
            assert row_z[row_kept].min() >= row_z[~row_kept].max(initial=-np.inf)  # the most probable ones
            assert row_p[row_kept].sum() >= p - 1e-12  # reach p
            assert row_p[row_kept].sum() - row_p[row_kept].min() < p  # one fewer does not
            assert np.array_equal(nucleus_filter(logits, p)[0][kept[0]], logits[0][kept[0]])
    assert np.isfinite(nucleus_filter(np.array([[5.0, 0.0, 0.0]]), 1e-9)).tolist() == [[True, False, False]]
    # masked entries stay masked and count for nothing
    assert np.isfinite(nucleus_filter(np.array([-np.inf, 0.0, 0.0]), 0.6)).tolist() == [False, True, True]


def test_top_k_keeps_exactly_k_entries_even_with_ties():
    kept = np.isfinite(top_k_filter(np.array([[1.0, 1.0, 1.0, 0.0], [3.0, 2.0, 1.0, 0.0]]), 2))
    assert kept.tolist() == [[True, True, False, False], [True, True, False, False]]
    assert np.isfinite(top_k_filter(np.zeros((1, 3)), 10)).all()


@pytest.mark.parametrize("seed", range(4))
def test_a_small_temperature_samples_the_greedy_tokens(seed):
    step = bigram_step(random_table(6, seed))
    greedy = greedy_decode(step, None, 30, 8)
    cold = sample(step, None, 30, 8, temperature=1e-3, seed=seed)
    np.testing.assert_array_equal(cold.tokens, greedy.tokens)
    np.testing.assert_allclose(cold.log_probs, greedy.log_probs)  # the model's log-probabilities, not tempered


# --- a model that reads the whole prefix: with a cache and from scratch -----------------------------------


class TinyAttention:
    """One causal attention layer over token embeddings; the next token's logits come from the newest row."""

    def __init__(self, vocab=6, d=8, seed=0):
        rng = np.random.default_rng(seed)
        self.embed = rng.standard_normal((vocab, d))  # (V, d)
        self.w_q, self.w_k, self.w_v = 0.8 * rng.standard_normal((3, d, d))  # (d, d) each
        self.w_o = 1.5 * rng.standard_normal((d, vocab))  # (d, V)

    def attend(self, q, k, v):
        scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # (B, 1, t)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return (weights / weights.sum(axis=-1, keepdims=True)) @ v  # (B, 1, d)

    def cached_step(self, cache, tokens):
        """The state is a KVCache of the keys and values so far: only the new token is projected."""
        x = self.embed[tokens][:, None, :]  # (B, 1, d)
        cache.append(x @ self.w_k, x @ self.w_v)
        return (self.attend(x @ self.w_q, cache.keys, cache.values) @ self.w_o)[:, 0], cache

    def prefix_step(self, prefix, tokens):
        """The state is the prefix of tokens: everything is recomputed from it at every step."""
        prefix = np.concatenate([prefix, tokens[:, None]], axis=1)  # (B, t)
        x = self.embed[prefix]  # (B, t, d)
        out = self.attend(x[:, -1:] @ self.w_q, x @ self.w_k, x @ self.w_v)  # (B, 1, d)
        return (out @ self.w_o)[:, 0], prefix

    @staticmethod
    def reorder_cache(cache, index):
        fresh = KVCache(cache.capacity, cache.keys.shape[-1], cache.values.shape[-1], batch_shape=index.shape)
        for s in range(len(cache)):
            fresh.append(cache.keys[index, s: s + 1], cache.values[index, s: s + 1])
        return fresh

    @staticmethod
    def reorder_prefix(prefix, index):
        return prefix[index]


def test_a_cached_model_and_a_model_that_rereads_its_prefix_decode_alike():
    model, batch, length = TinyAttention(), 5, 9
    empty = np.zeros((batch, 0), dtype=np.int64)
    for decode in (lambda step, state: greedy_decode(step, state, batch, length),
                   lambda step, state: sample(step, state, batch, length, temperature=1.5, top_p=0.9, seed=3)):
        cached = decode(model.cached_step, KVCache(length, 8, 8, batch_shape=(batch,)))
        scratch = decode(model.prefix_step, empty)
        np.testing.assert_array_equal(cached.tokens, scratch.tokens)
        np.testing.assert_allclose(cached.log_probs, scratch.log_probs, rtol=1e-12)
    # the whole prefix matters (this is no bigram): the same newest token after different prefixes
    after_3 = model.prefix_step(np.array([[BOS]]), np.array([3]))[0]
    after_4_3 = model.prefix_step(np.array([[BOS, 4]]), np.array([3]))[0]
    assert np.abs(after_3 - after_4_3).max() > 0.1


def test_beam_search_reorders_a_cache_like_a_prefix():
    model, length = TinyAttention(seed=1), 6
    cached = beam_search(model.cached_step, model.reorder_cache, KVCache(length, 8, 8, batch_shape=(1,)),
                         length, beam_width=3, length_penalty=0.6)
    scratch = beam_search(model.prefix_step, model.reorder_prefix, np.zeros((1, 0), dtype=np.int64), length,
                          beam_width=3, length_penalty=0.6)
    assert [h.tokens.tolist() for h in cached.hypotheses] == [h.tokens.tolist() for h in scratch.hypotheses]
    np.testing.assert_allclose([h.score for h in cached.hypotheses], [h.score for h in scratch.hypotheses])
    # the prefix model's score of the best hypothesis, recomputed token by token, is what beam search reports
    prefix, total = np.zeros((1, 0), dtype=np.int64), 0.0
    for token in [BOS, *scratch.best.tokens[:-1]]:
        logits, prefix = model.prefix_step(prefix, np.array([token]))
        total += float(log_softmax(logits)[0, scratch.best.tokens[prefix.shape[1] - 1]])
    assert total == pytest.approx(scratch.best.log_prob, rel=1e-12)


# --- the boundary -----------------------------------------------------------------------------------------


STEP = bigram_step(np.full((4, 4), 0.25))


@pytest.mark.parametrize("call, error, message", [
    (lambda: greedy_decode("model", None, 1, 3), TypeError, "step must be a callable"),
    (lambda: greedy_decode(STEP, None, 0, 3), ValueError, "batch_size must be at least 1"),
    (lambda: greedy_decode(STEP, None, 1, 2.5), TypeError, "max_length must be an integer"),
    (lambda: greedy_decode(STEP, None, 1, 3, eos=-1), ValueError, "eos must be at least 0"),
    (lambda: beam_search(STEP, None, None, 3, 2), TypeError, "reorder must be a callable"),
    (lambda: beam_search(STEP, SAME, None, 3, 0), ValueError, "beam_width must be at least 1"),
    (lambda: beam_search(STEP, SAME, None, 3, 2, length_penalty=-1), ValueError, "length_penalty must be"),
    (lambda: sample(STEP, None, 1, 3, temperature=0), ValueError, "use greedy_decode"),
    (lambda: sample(STEP, None, 1, 3, temperature=float("inf")), ValueError, "temperature must be a finite"),
    (lambda: sample(STEP, None, 1, 3, top_k=0), ValueError, "top_k must be at least 1"),
    (lambda: sample(STEP, None, 1, 3, top_p=0.0), ValueError, "top_p must be a finite number > 0"),
    (lambda: sample(STEP, None, 1, 3, top_p=1.5), ValueError, r"top_p must be in \(0, 1\]"),
    (lambda: sample(STEP, None, 1, 3, seed=1.5), ValueError, "seed must be"),
    (lambda: greedy_decode(lambda s, t: (np.zeros((3, 4)), s), None, 2, 3), ValueError,
     r"logits of shape \(2, vocab\)"),
    (lambda: greedy_decode(lambda s, t: (np.full((1, 4), np.nan), s), None, 1, 3), ValueError, "NaN"),
    (lambda: bigram_step([[0.5, 0.6], [0.5, 0.5]]), ValueError, "summing to 1"),
    (lambda: bigram_step(np.ones((2, 3)) / 3), ValueError, "square"),
])
def test_arguments_are_refused_with_errors_that_name_them(call, error, message):
    with pytest.raises(error, match=message):
        call()
