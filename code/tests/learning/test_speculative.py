"""Tests of attnbook.learning.speculative on toy models whose every probability is known: the theorem that
speculative sampling draws from the target, exactly (by enumerating every proposal of a round), the same by
sampling (a chi-square test at a stated level), greedy at temperature 0, and the checks at the boundary."""

import itertools
from collections import defaultdict

import numpy as np
import pytest

from attnbook.learning.speculative import (
    CachedModel,
    acceptance,
    residual,
    speculative_round,
    speculative_sample,
    table_model,
    tempered,
)
from attnbook.measure.statistics import chi_square_test

VOCAB = 4
ALPHA = 0.001  # the level of every sampling test: a correct sampler fails one in a thousand seeds


def prefix_model(seed: int, sharpness: float = 1.5):
    """A model whose next token depends on the last two tokens and the length's parity; its cache is the text
    read, so a wrong rollback changes every later distribution. Returns the model and ``logits_after(text)``."""
    table = sharpness * np.random.default_rng(seed).standard_normal((VOCAB, VOCAB, 2, VOCAB))  # (V, V, 2, V)

    def logits_after(text):
        return table[text[-2] if len(text) > 1 else 0, text[-1], len(text) % 2]  # (V,)

    def step(cache, tokens):
        rows = []
        for token in tokens:
            cache = (*cache, int(token))
            rows.append(logits_after(cache))
        return np.array(rows), cache  # (m, V)

    return CachedModel(step, lambda cache, n: cache[:len(cache) - n]), logits_after


def round_distribution(target_after, draft_after, text, gamma, temperature):
    """The exact distribution of what one round writes after ``text``, by enumerating the draft's proposals:
    {new tokens: probability}, from the acceptance rule and the residual alone."""
    p_of = lambda t: tempered(target_after(t), temperature)  # noqa: E731
    q_of = lambda t: tempered(draft_after(t), temperature)  # noqa: E731
    out = defaultdict(float)
    for proposal in itertools.product(range(VOCAB), repeat=gamma):
        q = [q_of((*text, *proposal[:i])) for i in range(gamma)]
        weight = np.prod([q[i][x] for i, x in enumerate(proposal)])  # the draft proposes it
        if weight == 0:
            continue
        p = [p_of((*text, *proposal[:i])) for i in range(gamma + 1)]
        kept = weight  # probability that the first i proposals were kept
        for i, x in enumerate(proposal):
            a = acceptance(p[i], q[i], x)
            if a < 1:
                for y, r in enumerate(residual(p[i], q[i])):
                    out[(*proposal[:i], y)] += kept * (1 - a) * r
            kept *= a
        for y, r in enumerate(p[gamma]):
            out[(*proposal, y)] += kept * r
    return out


def first_tokens_distribution(target_after, draft_after, text, gamma, temperature, k):
    """The exact distribution of the first k tokens written (k = 1, 2), over as many rounds as it takes."""
    joint = np.zeros((VOCAB,) * k)
    for new, prob in round_distribution(target_after, draft_after, text, gamma, temperature).items():
        if len(new) >= k:
            joint[new[:k]] += prob
        else:  # one token written: the second comes from the next round
            following = first_tokens_distribution(target_after, draft_after, (*text, *new), gamma, temperature, 1)
            joint[new[0]] += prob * following
    return joint


CASES = [(gamma, temperature, seeds) for gamma in (1, 2, 3) for temperature in (1.0, 0.6, 2.0)
         for seeds in ((0, 1), (2, 3))]


@pytest.mark.parametrize("gamma, temperature, seeds", CASES)
def test_the_first_token_of_a_round_has_the_targets_distribution_exactly(gamma, temperature, seeds):
    _, target_after = prefix_model(seeds[0])
    _, draft_after = prefix_model(seeds[1])
    text = (1, 3, 0)
    exact = first_tokens_distribution(target_after, draft_after, text, gamma, temperature, 1)
    np.testing.assert_allclose(exact, tempered(target_after(text), temperature), rtol=0, atol=1e-12)
    # and the draft's distribution is another: the check would see a sampler that kept every proposal
    assert np.abs(tempered(draft_after(text), temperature) - exact).max() > 0.01


@pytest.mark.parametrize("gamma, temperature, seeds", CASES)
def test_the_first_two_tokens_have_the_targets_joint_distribution_exactly(gamma, temperature, seeds):
    _, target_after = prefix_model(seeds[0])
    _, draft_after = prefix_model(seeds[1])
    text = (2, 2)
    exact = first_tokens_distribution(target_after, draft_after, text, gamma, temperature, 2)
    p1 = tempered(target_after(text), temperature)  # (V,)
    target = np.array([p1[a] * tempered(target_after((*text, a)), temperature) for a in range(VOCAB)])  # (V, V)
    np.testing.assert_allclose(exact, target, rtol=0, atol=1e-12)


def test_a_wrong_acceptance_rule_breaks_the_theorem():
    """The enumeration has power: accepting with min(1, q/p) instead leaves the draft's bias in the output."""
    _, target_after = prefix_model(0)
    _, draft_after = prefix_model(1)
    text, gamma = (1, 3, 0), 2
    p, q = tempered(target_after(text), 1.0), tempered(draft_after(text), 1.0)
    wrong = sum(q[x] * (min(1, q[x] / p[x]) * np.eye(VOCAB)[x] + (1 - min(1, q[x] / p[x])) * residual(p, q))
                for x in range(VOCAB))  # a round of gamma = 1 with the ratio upside down
    assert np.abs(wrong - p).max() > 0.01
    np.testing.assert_allclose(first_tokens_distribution(target_after, draft_after, text, gamma, 1.0, 1), p,
                               rtol=0, atol=1e-12)


def test_a_round_samples_what_the_enumeration_says_chi_square():
    """The sampler itself: 5,000 rounds of gamma = 2, their outputs counted against round_distribution."""
    target, target_after = prefix_model(4)
    draft, draft_after = prefix_model(5)
    text, gamma, n = (0, 1, 2), 2, 5000
    exact = round_distribution(target_after, draft_after, text, gamma, 1.0)
    outcomes = sorted(exact)
    index = {outcome: i for i, outcome in enumerate(outcomes)}
    counts = np.zeros(len(outcomes))
    rng = np.random.default_rng(0)
    for _ in range(n):
        new, accepted, target_cache, draft_cache, _ = speculative_round(target, draft, text[:-1], text[:-1], text[-1],
                                                                        gamma, 1.0, rng)
        counts[index[tuple(new)]] += 1
        assert accepted == len(new) - 1
        assert target_cache == draft_cache == (*text, *new[:-1])  # both hold the text but its newest token
    test = chi_square_test(counts, [exact[o] for o in outcomes])
    assert test.p_value > ALPHA, test


@pytest.mark.parametrize("gamma, temperature", [(1, 1.0), (4, 0.7)])
def test_the_first_two_tokens_sampled_follow_the_target_chi_square(gamma, temperature):
    target, target_after = prefix_model(6)
    draft, _ = prefix_model(7)
    text, n = (3, 1), 3000
    counts = np.zeros((VOCAB, VOCAB))
    for seed in range(n):
        out = speculative_sample(target, draft, text[:-1], text[:-1], text[-1], 2, gamma, temperature, seed)
        counts[tuple(out.tokens)] += 1
    p1 = tempered(target_after(text), temperature)  # (V,)
    joint = np.array([p1[a] * tempered(target_after((*text, a)), temperature) for a in range(VOCAB)])  # (V, V)
    assert chi_square_test(counts, joint).p_value > ALPHA
    # and the draft's joint distribution fails the same test: it has power
    _, draft_after = prefix_model(7)
    q1 = tempered(draft_after(text), temperature)
    draft_joint = np.array([q1[a] * tempered(draft_after((*text, a)), temperature) for a in range(VOCAB)])
    assert chi_square_test(counts, draft_joint).p_value < ALPHA


def test_at_temperature_zero_the_output_is_the_targets_greedy_path():
    target, target_after = prefix_model(8)
    draft, _ = prefix_model(9)
    text = [2]
    for _ in range(30):
        text.append(int(target_after(tuple(text)).argmax()))
    for gamma in (1, 2, 5):
        out = speculative_sample(target, draft, (), (), 2, 30, gamma, temperature=0, seed=gamma)
        assert out.tokens.tolist() == text[1:]
        assert out.accepted < out.proposed  # the draft's greedy path is another: some proposals were rejected


def test_the_same_model_as_draft_keeps_every_proposal():
    model, _ = prefix_model(10)
    out = speculative_sample(model, model, (), (), 0, 41, gamma=4, seed=0)
    assert (out.proposed, out.accepted, out.target_passes, len(out.tokens)) == (32, 32, 9, 41)  # 8 rounds of 4 kept and 1, then 1


def test_counts_add_up_and_the_same_seed_writes_the_same_tokens():
    target = table_model(np.random.default_rng(11).standard_normal((VOCAB, VOCAB)))
    draft = table_model(np.random.default_rng(12).standard_normal((VOCAB, VOCAB)))
    a = speculative_sample(target, draft, None, None, 0, 50, gamma=3, seed=13)
    b = speculative_sample(target, draft, None, None, 0, 50, gamma=3, seed=13)
    assert a.tokens.tolist() == b.tokens.tolist() and len(a.tokens) == 50
    assert len(a.tokens) == a.accepted + a.target_passes  # each target pass writes its kept proposals and one more
    assert a.draft_passes >= a.proposed


def test_the_residual_and_acceptance_are_those_of_the_rule():
    p, q = np.array([0.5, 0.3, 0.2, 0.0]), np.array([0.25, 0.25, 0.25, 0.25])
    np.testing.assert_allclose(residual(p, q), [0.25 / 0.30, 0.05 / 0.30, 0.0, 0.0], rtol=1e-14)
    assert [acceptance(p, q, x) for x in range(4)] == [1.0, 1.0, pytest.approx(0.8), 0.0]
    np.testing.assert_array_equal(tempered(np.array([1.0, 5.0, 5.0, 2.0]), 0), [0, 1, 0, 0])


@pytest.mark.parametrize("change, message", [
    (dict(target=lambda c, t: (t, c)), "target must be a CachedModel"),
    (dict(draft=CachedModel(None, lambda c, n: c)), "draft.step must be a callable"),
    (dict(draft=CachedModel(lambda c, t: (t, c), 3)), "draft.rollback must be a callable"),
    (dict(last=-1), "last"),
    (dict(n_new=0), "n_new"),
    (dict(gamma=0), "gamma"),
    (dict(gamma=2.5), "gamma"),
    (dict(temperature=-0.5), "temperature"),
    (dict(temperature=float("nan")), "temperature"),
    (dict(seed=-3), "seed"),
])
def test_invalid_arguments_are_refused_naming_them(change, message):
    model = table_model(np.zeros((3, 3)))
    arguments = dict(target=model, draft=model, target_cache=None, draft_cache=None, last=0, n_new=5, gamma=2,
                     temperature=1.0, seed=0) | change
    with pytest.raises((TypeError, ValueError), match=message):
        speculative_sample(**arguments)


def test_a_table_that_is_not_square_or_not_finite_is_refused():
    with pytest.raises(ValueError, match="logits must be a square"):
        table_model(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="logits contains -inf"):
        table_model([[0.0, 1.0], [-np.inf, 0.0]])
