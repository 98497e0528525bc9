"""attnbook.text.ngram: the counts are the text's, the probabilities of a context sum to 1, add-k as written."""

import numpy as np
import pytest

from attnbook.text.ngram import fit_ngram, ngram_bits_per_character, ngram_probability


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


def test_refusals():
    with pytest.raises(ValueError, match="ids in 0 .. 1"):
        fit_ngram(np.array([0, 2]), 1, 2)
    with pytest.raises(ValueError, match="needs at least 3"):
        fit_ngram(np.array([0, 1]), 3, 2)
