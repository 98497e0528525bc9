"""Byte-pair encoding from scratch: the merge step, training by the most frequent pair, encoding, decoding."""

from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnbook.text.bpe import (BPE, UNKNOWN, char_tokens, decode_bpe, encode_bpe, merge_pair, pretokenize, to_ids,
                               token_vocabulary, train_bpe, word_tokens)
from attnbook.text.corpus import shakespeare

SLICE = shakespeare()[:60_000]


@pytest.fixture(scope="module")
def trained():
    return train_bpe(SLICE, 300)


def _pair_counts(words: Counter, bpe: BPE, n: int) -> Counter:
    """Pair counts after the first n merges, recounted from scratch (the slow, obvious way)."""
    counts = Counter()
    for word, count in words.items():
        ids = list(word.encode())
        for i, pair in enumerate(bpe.merges[:n]):
            ids = merge_pair(ids, pair, 256 + i)
        for pair in zip(ids, ids[1:]):
            counts[pair] += count
    return counts


def test_merge_pair_joins_left_to_right_without_overlap():
    assert merge_pair([1, 2, 1, 2, 2], (1, 2), 7) == [7, 7, 2]
    assert merge_pair([3, 3, 3, 3, 3], (3, 3), 9) == [9, 9, 3]
    assert merge_pair([], (1, 2), 7) == [] and merge_pair([1], (1, 2), 7) == [1]


def test_each_merge_is_the_most_frequent_pair_then_the_smallest():
    # the incremental counts agree with counting from scratch before every merge (checked at a few merges)
    bpe = train_bpe(SLICE[:8000], 60)
    words = Counter(pretokenize(SLICE[:8000]))
    for n in (0, 1, 7, 30, 59):
        counts = _pair_counts(words, bpe, n)
        best = max(counts.values())
        assert bpe.merges[n] == min(pair for pair, count in counts.items() if count == best), n


def test_the_vocabulary_is_the_bytes_then_one_token_per_merge(trained):
    assert len(trained.merges) == 300 and len(trained.vocab) == 556
    assert trained.vocab[:256] == tuple(bytes([b]) for b in range(256))
    for i, (left, right) in enumerate(trained.merges):
        assert left < 256 + i and right < 256 + i  # a merge joins tokens that exist before it
        assert trained.vocab[256 + i] == trained.vocab[left] + trained.vocab[right]


def test_merges_never_cross_a_word():
    bpe = train_bpe("ab ab ab ab", 10)
    assert all(b" " not in token[1:] for token in bpe.vocab)


def test_training_stops_when_no_pair_is_left():
    bpe = train_bpe("abab", 10)
    assert [bpe.vocab[256 + i] for i in range(len(bpe.merges))] == [b"ab", b"abab"]
    assert train_bpe("", 5) == BPE((), tuple(bytes([b]) for b in range(256)))


def test_encoding_the_training_text_applies_the_merges_in_order(trained):
    text = SLICE[:5000]
    by_training = []
    for word in pretokenize(text):
        ids = list(word.encode())
        for i, pair in enumerate(trained.merges):
            ids = merge_pair(ids, pair, 256 + i)
        by_training += ids
    assert encode_bpe(text, trained) == by_training
    assert len(by_training) < 0.6 * len(text)  # 300 merges already shorten the sequence by 40 %


@given(st.text(max_size=200))
def test_decode_inverts_encode_on_any_string(trained, text):
    assert decode_bpe(encode_bpe(text, trained), trained) == text


@given(st.text(alphabet="ab c\n", max_size=60), st.integers(0, 40), st.text(alphabet="abc d\né", max_size=40))
def test_decode_inverts_encode_for_any_training_text(training, n_merges, text):
    bpe = train_bpe(training, n_merges)
    assert decode_bpe(encode_bpe(text, bpe), bpe) == text
    assert "".join(pretokenize(text)) == text


def test_character_and_word_tokenisers():
    assert char_tokens("to be") == ["t", "o", " ", "b", "e"]
    assert word_tokens("To be, or not") == ["To", " be", ",", " or", " not"]
    vocabulary = token_vocabulary(word_tokens("to be or not to be"))
    assert vocabulary == {UNKNOWN: 0, " be": 1, "to": 2, " or": 3, " not": 4, " to": 5}
    assert to_ids(word_tokens("to be, to"), vocabulary) == [2, 1, 0, 5]  # most frequent first
    assert token_vocabulary(char_tokens("aab"), max_size=2) == {UNKNOWN: 0, "a": 1}


@pytest.mark.parametrize("call, error, message", [
    (lambda: train_bpe(b"abc", 3), TypeError, "text must be a str, got bytes"),
    (lambda: train_bpe("abc", -1), ValueError, "n_merges must be at least 0, got -1"),
    (lambda: train_bpe("abc", 2.0), TypeError, "n_merges must be an integer, got 2.0"),
    (lambda: encode_bpe("abc", (1, 2)), TypeError, "bpe must be a BPE"),
    (lambda: decode_bpe([1, 999], train_bpe("ab", 1)), ValueError, r"ids\[1\] = 999 is not a token id of a vocabulary of 257"),
    (lambda: decode_bpe([1.0], train_bpe("ab", 1)), TypeError, r"ids\[0\] = 1.0 is not an integer token id"),
    (lambda: merge_pair([1, 2], [1, 2], 3), TypeError, "pair must be a tuple of two token ids"),
    (lambda: merge_pair([1, 2], (1, 2), -3), ValueError, "new_id must be at least 0"),
    (lambda: to_ids(["a"], {"a": 0}), TypeError, "vocabulary must be a dict from token_vocabulary"),
    (lambda: token_vocabulary([1, 2]), TypeError, "tokens must be strings"),
])
def test_arguments_are_checked_at_the_boundary_with_their_names(call, error, message):
    with pytest.raises(error, match=message):
        call()


@given(st.lists(st.integers(0, 4), max_size=30))
def test_pair_counts_are_the_counts_of_a_training_step(ids):
    from attnbook.text.bpe import pair_counts

    counts = pair_counts(ids, 5)
    assert counts.shape == (5, 5) and counts.dtype == np.int64 and counts.sum() == max(len(ids) - 1, 0)
    assert {(a, b): int(counts[a, b]) for a, b in zip(*np.nonzero(counts))} == Counter(zip(ids, ids[1:]))
