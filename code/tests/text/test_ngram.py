"""attnbook.text.ngram: the counts are the text's, the probabilities of a context sum to 1, add-k as written;
Kneser–Ney as computed by hand, summing to 1 for every context, and as nltk computes it."""

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from attnbook.learning.characters import encode_chars, splits, vocabulary
from attnbook.text.ngram import (
    count_of_counts_discounts,
    fit_kneser_ney,
    fit_ngram,
    kneser_ney_distribution,
    ngram_bits_per_character,
    ngram_character_bits,
    ngram_coverage,
    ngram_probability,
)


def test_probabilities_are_the_smoothed_counts_and_sum_to_one():
    rng = np.random.default_rng(0)
    tokens, V, k = rng.integers(0, 4, 300), 4, 0.3
    model = fit_ngram(tokens, order=3, vocab_size=V, k=k)
    pairs = [tuple(tokens[t - 2:t + 1]) for t in range(2, len(tokens))]
    for context in [(0, 1), (3, 3), (2, 0)]:
        n_context = sum(p[:2] == context for p in pairs)
        probs = [ngram_probability(model, context, c) for c in range(V)]
        assert sum(probs) == pytest.approx(1.0)
        for c in range(V):
            assert probs[c] == pytest.approx((sum(p == (*context, c) for p in pairs) + k) / (n_context + k * V))


def test_an_unseen_context_is_uniform_and_bits_are_the_mean_of_minus_log2():
    model = fit_ngram(np.array([0, 1, 0, 1]), order=2, vocab_size=3, k=0.5)
    assert ngram_probability(model, [2], 1) == pytest.approx(1 / 3)
    p = [ngram_probability(model, [0], 1), ngram_probability(model, [1], 2)]
    assert ngram_bits_per_character(model, [0, 1, 2]) == pytest.approx(-np.mean(np.log2(p)))


def test_character_bits_are_minus_log2_of_each_characters_probability_for_both_models():
    rng = np.random.default_rng(1)
    train, text, V = rng.integers(0, 4, 200), rng.integers(0, 4, 30), 4
    add_k, kn = fit_ngram(train, 3, V, k=0.2), fit_kneser_ney(train, 3, V)
    for t in range(2, len(text)):
        expected = -np.log2(ngram_probability(add_k, text[t - 2:t], text[t]))
        assert ngram_character_bits(add_k, text)[t - 2] == pytest.approx(expected)
        expected = -np.log2(kneser_ney_distribution(kn, text[t - 2:t])[text[t]])
        assert ngram_character_bits(kn, text)[t - 2] == pytest.approx(expected)
    assert ngram_character_bits(kn, text).shape == (len(text) - 2,)
    assert np.mean(ngram_character_bits(kn, text)) == ngram_bits_per_character(kn, text)


def test_coverage_says_which_contexts_and_pairs_were_counted():
    model = fit_ngram(np.array([0, 1, 2, 0, 1]), order=3, vocab_size=3)  # contexts 01, 12, 20
    context_seen, pair_seen = ngram_coverage(model, [0, 1, 2, 1, 2, 2, 0])  # contexts 01, 12, 21, 12, 22
    assert context_seen.tolist() == [True, True, False, True, False]
    assert pair_seen.tolist() == [True, False, False, False, False]  # 012 counted; 121, 212, 122, 220 not


def test_refusals():
    with pytest.raises(ValueError, match="ids in 0 .. 1"):
        fit_ngram(np.array([0, 2]), 1, 2)
    with pytest.raises(ValueError, match="needs at least 3"):
        fit_ngram(np.array([0, 1]), 3, 2)


# --- interpolated modified Kneser–Ney -------------------------------------------------------------------


def test_kneser_ney_matches_the_recursion_computed_by_hand():
    # 0 1 0 1 0 1 over V = 3: bigrams 01 three times (class 3+), 10 twice (class 2); each id follows one other.
    model = fit_kneser_ney(np.array([0, 1, 0, 1, 0, 1]), 2, 3, discounts=[[0.2, 0.4, 0.6], [0.5, 1.0, 1.5]])
    # order 1: T = 2, both continuation counts 1: (1 - 0.2) / 2 + (0.2 + 0.2) / 2 / 3 = 7/15; the unseen id 1/15
    assert kneser_ney_distribution(model, []) == pytest.approx([7 / 15, 7 / 15, 1 / 15], abs=1e-15)
    # after 0: (3 - 1.5) / 3 + (1.5 / 3) p_1; after 1: (2 - 1.0) / 2 + (1.0 / 2) p_1; after 2 (unseen): p_1
    assert kneser_ney_distribution(model, [0]) == pytest.approx([7 / 30, 11 / 15, 1 / 30], abs=1e-15)
    assert kneser_ney_distribution(model, [1]) == pytest.approx([11 / 15, 7 / 30, 1 / 30], abs=1e-15)
    assert kneser_ney_distribution(model, [1, 2]) == pytest.approx([7 / 15, 7 / 15, 1 / 15], abs=1e-15)
    assert ngram_bits_per_character(model, [0, 1, 2]) == pytest.approx(-np.log2([11 / 15, 1 / 30]).mean())


def test_kneser_ney_default_discounts_are_each_orders_count_of_counts_estimate():
    tokens = np.random.default_rng(1).integers(0, 5, 2000)
    model = fit_kneser_ney(tokens, 3, 5)
    for j in range(3):
        assert model.discounts[j] == pytest.approx(count_of_counts_discounts(model.counts[j]))
    # n_1 .. n_4 = 4, 2, 1, 1: Y = 1/2, D_1 = 1 - 2 Y 2/4, D_2 = 2 - 3 Y 1/2, D_3+ = 3 - 4 Y 1/1
    assert count_of_counts_discounts([1, 1, 1, 1, 2, 2, 3, 4]) == pytest.approx([0.5, 1.25, 1.0])
    assert model.counts[2].sum() == len(tokens) - 2  # raw trigram counts at the top order
    assert model.counts[1].sum() == len(model.keys[2])  # one continuation per distinct trigram


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 5), st.integers(1, 4), st.data())
def test_kneser_ney_distributions_sum_to_one_for_every_context(V, order, data):
    tokens = np.array(data.draw(st.lists(st.integers(0, V - 1), min_size=order, max_size=40)))
    discounts = data.draw(st.one_of(st.none(), st.floats(0.0, 1.0)))
    model = fit_kneser_ney(tokens, order, V, discounts)
    context = data.draw(st.lists(st.integers(0, V - 1), max_size=order + 1))  # shorter, longer, often unseen
    p = kneser_ney_distribution(model, context)
    assert p.shape == (V,) and np.all(p >= 0)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    if len(context) >= order - 1:  # the bits read the same distribution
        c = data.draw(st.integers(0, V - 1))
        window = np.array(context[len(context) - order + 1:] if order > 1 else []).astype(int)
        assert ngram_bits_per_character(model, np.r_[window, c]) == pytest.approx(-np.log2(p[c]))


def _start_of(tokens: np.ndarray, bigram) -> int:
    """The first position of ``bigram``: a text that starts there has no bigram seen only at its start."""
    return int(np.flatnonzero((tokens[:-1] == bigram[0]) & (tokens[1:] == bigram[1]))[0])


def test_kneser_ney_agrees_with_nltk_given_its_one_discount_and_no_unigram_smoothing():
    from nltk.lm import KneserNeyInterpolated
    from nltk.util import everygrams

    train, held_out = splits()
    V, order, D = len(vocabulary()), 3, 0.75
    # (2000,): a text that starts with a common bigram, since nltk counts the followers at the start differently
    text = train[_start_of(train, encode_chars("e ")):][:2000]
    reference = KneserNeyInterpolated(order, discount=D)
    reference.fit([list(everygrams([str(t) for t in text], max_len=order))], [str(v) for v in range(V)])
    # nltk: one discount for every order and count, and unigrams by continuation count alone (no D, no uniform)
    model = fit_kneser_ney(text, order, V, np.r_[[[0.0] * 3], np.full((order - 1, 3), D)])
    contexts = [held_out[t:t + order - 1] for t in range(0, 160, 16)] + [text[5:7], held_out[:1], []]
    gap = max(np.abs(kneser_ney_distribution(model, h)
                     - [reference.score(str(c), [str(t) for t in h]) for c in range(V)]).max() for h in contexts)
    assert gap < 1e-12


def test_kneser_ney_refusals():
    with pytest.raises(ValueError, match=r"shape \(2, 3\)"):
        fit_kneser_ney(np.array([0, 1, 0]), 2, 2, discounts=np.ones((3, 3)) / 2)
    with pytest.raises(ValueError, match="D_1 <= 1"):
        fit_kneser_ney(np.array([0, 1, 0]), 2, 2, discounts=1.5)
    with pytest.raises(ValueError, match="needs at least 3"):
        fit_kneser_ney(np.array([0, 1]), 3, 2)
    model = fit_kneser_ney(np.array([0, 1, 0]), 2, 2)
    with pytest.raises(ValueError, match="context must be ids in 0 .. 1"):
        kneser_ney_distribution(model, [2])
    with pytest.raises(ValueError, match="at least order = 2"):
        ngram_bits_per_character(model, [0])
