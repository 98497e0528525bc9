"""Byte-pair encoding trained from scratch, and the character and word tokenisers it is compared with.

Sennrich et al. (2016), after Gage (1994): :func:`train_bpe` learns the merges, :func:`encode_bpe` applies them.

>>> bpe = train_bpe("low lower lowest", 3)
>>> [bpe.vocab[token] for token in encode_bpe(" lowest", bpe)]
[b' low', b'e', b's', b't']
>>> decode_bpe(encode_bpe("Löwe", bpe), bpe)
'Löwe'
"""

from __future__ import annotations

import heapq
import re
from collections import Counter, defaultdict
from typing import NamedTuple

import numpy as np

from ..validation import boundary, check_positive_int

__all__ = ["BPE", "PATTERN", "UNKNOWN", "char_tokens", "check_text", "decode_bpe", "encode_bpe", "merge_pair", "pair_counts", "pretokenize", "to_ids",
           "token_vocabulary", "train_bpe", "word_tokens"]

#: how text is split into words before any merge: letters, digits or other symbols, each run with the one space
#: before it, and runs of white space (all but the last space of a run before a word)
PATTERN = r" ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+"
_WORDS = re.compile(PATTERN)
UNKNOWN = "<unk>"  #: the token of the character and word tokenisers for what their vocabulary lacks (id 0)


class BPE(NamedTuple):
    """A trained byte-pair encoding: its merges, in the order learned, and the bytes of every token.

    Attributes
    ----------
    merges : tuple of (int, int)
        Merge ``i`` joins the pair ``(left, right)`` of token ids into the new token ``256 + i``.
    vocab : tuple of bytes
        ``vocab[t]``: the bytes token ``t`` stands for; ids 0 to 255 are the single bytes.

    Examples
    --------
    >>> bpe = train_bpe("aaab", 1)
    >>> bpe.merges, bpe.vocab[256], len(bpe.vocab)
    (((97, 97),), b'aa', 257)
    """

    merges: tuple
    vocab: tuple


def check_text(text, name: str = "text") -> str:
    """``text`` if it is a str, else an error naming it.

    Parameters
    ----------
    text : str
        The text.
    name : str, optional
        Its name in the error.

    Returns
    -------
    str
        ``text``.

    Examples
    --------
    >>> check_text(b"bytes")
    Traceback (most recent call last):
    ...
    TypeError: text must be a str, got bytes
    """
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    return text


def _check_bpe(bpe) -> BPE:
    if not isinstance(bpe, BPE):
        raise TypeError(f"bpe must be a BPE (from train_bpe), got {type(bpe).__name__}")
    return bpe


def _check_ids(ids, name: str = "ids", size: int | None = None) -> list:
    try:
        ids = list(ids)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of token ids, got {type(ids).__name__}") from None
    for position, token in enumerate(ids):
        if isinstance(token, bool) or not hasattr(token, "__index__"):
            raise TypeError(f"{name}[{position}] = {token!r} is not an integer token id")
        if token < 0 or (size is not None and token >= size):
            raise ValueError(f"{name}[{position}] = {token} is not a token id of a vocabulary of {size}")
    return [int(token) for token in ids]


@boundary(lambda text: (check_text(text),))
def pretokenize(text) -> list[str]:
    """The words of ``text`` by :data:`PATTERN`, which BPE merges never cross; joined, they give ``text`` back.

    Parameters
    ----------
    text : str
        Any text.

    Returns
    -------
    list of str
        The words in order, each with the space before it.

    Examples
    --------
    >>> pretokenize("To be, or not  to be.")
    ['To', ' be', ',', ' or', ' not', ' ', ' to', ' be', '.']
    """
    return _WORDS.findall(text)


def _merge_arguments(ids, pair, new_id) -> tuple:
    if not (isinstance(pair, tuple) and len(pair) == 2):
        raise TypeError(f"pair must be a tuple of two token ids, got {pair!r}")
    return _check_ids(ids), tuple(_check_ids(pair, "pair")), check_positive_int(new_id, "new_id", minimum=0)


@boundary(_merge_arguments)
def merge_pair(ids, pair, new_id) -> list[int]:
    r"""``ids`` with every occurrence of ``pair``, read left to right without overlap, replaced by ``new_id``.

    .. math:: (\dots, a, b, \dots) \mapsto (\dots, t, \dots) \qquad \text{for } (a, b) = \text{pair},\ t = \text{new\_id}

    Parameters
    ----------
    ids, pair, new_id
        Token ids; the adjacent pair ``(a, b)`` to join; the id ``t`` of the joined token.

    Returns
    -------
    list of int
        The shorter sequence; ``(a, a, a)`` becomes ``(t, a)``.

    Examples
    --------
    >>> merge_pair([1, 2, 3, 1, 2], (1, 2), 9), merge_pair([5, 5, 5], (5, 5), 7)
    ([9, 3, 9], [7, 5])
    """
    merged, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            merged.append(new_id)
            i += 2
        else:
            merged.append(ids[i])
            i += 1
    return merged


def _pair_counts_arguments(ids, vocab_size) -> tuple:
    vocab_size = check_positive_int(vocab_size, "vocab_size")
    return _check_ids(ids, size=vocab_size), vocab_size


@boundary(_pair_counts_arguments)
def pair_counts(ids, vocab_size) -> np.ndarray:
    r"""How often each pair of tokens stands side by side in ``ids``: the counts of one training step, as a matrix.

    .. math:: C[a, b] = \#\{p : (\text{ids}_p, \text{ids}_{p+1}) = (a, b)\}

    Parameters
    ----------
    ids, vocab_size
        Token ids, each below ``vocab_size``; the number of tokens V.

    Returns
    -------
    ndarray
        ``(V, V)`` int64 counts; overlapping pairs count each time, so ``(a, a, a)`` has ``C[a, a] = 2``.

    Examples
    --------
    >>> pair_counts([0, 1, 0, 1, 1], 2)
    array([[0, 2],
           [1, 1]])
    """
    counts = np.zeros((vocab_size, vocab_size), dtype=np.int64)  # (V, V)
    np.add.at(counts, (ids[:-1], ids[1:]), 1)
    return counts


@boundary(lambda text, n_merges: (check_text(text), check_positive_int(n_merges, "n_merges", minimum=0)))
def train_bpe(text, n_merges) -> BPE:
    r"""Learn ``n_merges`` merges from ``text``: each joins the most frequent adjacent pair of tokens into a new one.

    Words (:func:`pretokenize`) start as their UTF-8 bytes. Step ``i`` finds the pair with the largest count

    .. math:: c(a, b) = \sum_{w} \operatorname{count}(w)\, \#\{\text{positions of } (a, b) \text{ in } w\}

    over the distinct words ``w``, the smallest ids ``(a, b)`` among equal counts, and joins it in every word
    into token ``256 + i``; only the words holding the pair are recounted (a heap keeps the counts in order).

    Parameters
    ----------
    text : str
        The training text.
    n_merges : int
        How many merges to learn, at least 0; the vocabulary has ``256 + n_merges`` tokens.

    Returns
    -------
    BPE
        The merges and the vocabulary.

    Examples
    --------
    >>> bpe = train_bpe("aaabdaaabac", 3)   # Gage's example, as one word
    >>> [bpe.vocab[token] for token in bpe.merges[-1]], encode_bpe("aaabdaaabac", bpe)
    ([b'aa', b'ab'], [258, 100, 258, 97, 99])
    >>> train_bpe(b"text", 1)
    Traceback (most recent call last):
    ...
    TypeError: text must be a str, got bytes
    """
    counted = Counter(pretokenize.unchecked(text))
    words = [list(word.encode("utf-8")) for word in counted]  # each distinct word as token ids
    counts = list(counted.values())  # how often each occurs
    pairs, holders = Counter(), defaultdict(set)  # pair -> count; pair -> the words that (may) hold it
    for w, word in enumerate(words):
        for pair in zip(word, word[1:]):
            pairs[pair] += counts[w]
            holders[pair].add(w)
    heap = [(-count, pair) for pair, count in pairs.items()]  # the largest count first, then the smallest pair
    heapq.heapify(heap)
    merges, vocab = [], [bytes([b]) for b in range(256)]
    while len(merges) < n_merges and heap:
        count, pair = heapq.heappop(heap)
        if -count != pairs[pair]:  # fallen since pushed: back in, with its count now
            if pairs[pair] > 0:
                heapq.heappush(heap, (-pairs[pair], pair))
            continue
        new = len(vocab)
        merges.append(pair)
        vocab.append(vocab[pair[0]] + vocab[pair[1]])
        fresh = set()  # the pairs the new token makes
        for w in holders.pop(pair):
            for old in zip(words[w], words[w][1:]):
                pairs[old] -= counts[w]
            words[w] = merge_pair.unchecked(words[w], pair, new)
            for now in zip(words[w], words[w][1:]):
                pairs[now] += counts[w]
                holders[now].add(w)
                if new in now:
                    fresh.add(now)
        for now in sorted(fresh):
            heapq.heappush(heap, (-pairs[now], now))
    return BPE(tuple(merges), tuple(vocab))


def _encode_word(word: str, ranks: dict) -> list[int]:
    """The tokens of one word: its bytes, then, again and again, the earliest-learned merge among its pairs."""
    ids = list(word.encode("utf-8"))
    while len(ids) > 1:
        pair = min(zip(ids, ids[1:]), key=lambda p: ranks.get(p, len(ranks)))
        if pair not in ranks:
            break
        ids = merge_pair.unchecked(ids, pair, 256 + ranks[pair])
    return ids


@boundary(lambda text, bpe: (check_text(text), _check_bpe(bpe)))
def encode_bpe(text, bpe) -> list[int]:
    r"""The token ids of ``text``: each word's bytes, joined by the merges of ``bpe`` in the order learned.

    .. math:: \operatorname{decode}(\operatorname{encode}(s)) = s \quad \text{for every string } s

    Parameters
    ----------
    text : str
        Any text, also with characters the training text lacked (they stay bytes).
    bpe : BPE
        The trained encoding (:func:`train_bpe`).

    Returns
    -------
    list of int
        Token ids, each below ``len(bpe.vocab)``.

    Examples
    --------
    >>> bpe = train_bpe("the then there", 2)
    >>> [bpe.vocab[token] for token in encode_bpe("the theme", bpe)]
    [b'the', b' ', b'the', b'm', b'e']
    """
    ranks = {pair: rank for rank, pair in enumerate(bpe.merges)}
    cache: dict[str, list[int]] = {}
    ids = []
    for word in pretokenize.unchecked(text):
        if word not in cache:
            cache[word] = _encode_word(word, ranks)
        ids += cache[word]
    return ids


@boundary(lambda ids, bpe: (_check_ids(ids, size=len(_check_bpe(bpe).vocab)), bpe))
def decode_bpe(ids, bpe) -> str:
    """The text of token ids: their bytes, joined, read as UTF-8 (bytes that are no character become U+FFFD).

    Parameters
    ----------
    ids, bpe
        Token ids of ``bpe``; as in :func:`encode_bpe`.

    Returns
    -------
    str
        The text; ``decode_bpe(encode_bpe(s, bpe), bpe) == s``.

    Examples
    --------
    >>> bpe = train_bpe("banana", 2)
    >>> decode_bpe([257, 256, 97], bpe)
    'banana'
    >>> decode_bpe([300], bpe)
    Traceback (most recent call last):
    ...
    ValueError: ids[0] = 300 is not a token id of a vocabulary of 258
    """
    return b"".join(bpe.vocab[token] for token in ids).decode("utf-8", errors="replace")


@boundary(lambda text: (check_text(text),))
def char_tokens(text) -> list[str]:
    """The character tokeniser: one token per character.

    Parameters
    ----------
    text : str
        Any text.

    Returns
    -------
    list of str
        ``list(text)``.

    Examples
    --------
    >>> char_tokens("to be")
    ['t', 'o', ' ', 'b', 'e']
    """
    return list(text)


@boundary(lambda text: (check_text(text),))
def word_tokens(text) -> list[str]:
    """The word tokeniser: one token per word of :func:`pretokenize`, the words BPE starts from.

    Parameters
    ----------
    text : str
        Any text.

    Returns
    -------
    list of str
        The words, each with the space before it.

    Examples
    --------
    >>> word_tokens("to be")
    ['to', ' be']
    """
    return pretokenize.unchecked(text)


def _vocabulary_arguments(tokens, max_size=None) -> tuple:
    tokens = list(tokens)
    if not all(isinstance(token, str) for token in tokens):
        raise TypeError("tokens must be strings (from char_tokens or word_tokens)")
    return tokens, None if max_size is None else check_positive_int(max_size, "max_size", minimum=2)


@boundary(_vocabulary_arguments)
def token_vocabulary(tokens, max_size=None) -> dict[str, int]:
    """The vocabulary of a character or word tokeniser: :data:`UNKNOWN` as id 0, then the tokens, most frequent first.

    Parameters
    ----------
    tokens : sequence of str
        The training text's tokens.
    max_size : int, optional
        Keep only the ``max_size - 1`` most frequent tokens (ties: first seen first); default all.

    Returns
    -------
    dict
        Token -> id.

    Examples
    --------
    >>> token_vocabulary(char_tokens("abba"))
    {'<unk>': 0, 'a': 1, 'b': 2}
    """
    kept = Counter(tokens).most_common(None if max_size is None else max_size - 1)
    return {UNKNOWN: 0} | {token: i for i, (token, _) in enumerate(kept, start=1)}


def _to_ids_arguments(tokens, vocabulary) -> tuple:
    if not (isinstance(vocabulary, dict) and vocabulary.get(UNKNOWN) == 0):
        raise TypeError("vocabulary must be a dict from token_vocabulary, with '<unk>' as id 0")
    return list(tokens), vocabulary


@boundary(_to_ids_arguments)
def to_ids(tokens, vocabulary) -> list[int]:
    """The ids of tokens in a character or word vocabulary; a token it lacks becomes id 0, :data:`UNKNOWN`.

    Parameters
    ----------
    tokens, vocabulary
        Tokens; the vocabulary of :func:`token_vocabulary`.

    Returns
    -------
    list of int
        One id per token.

    Examples
    --------
    >>> to_ids(word_tokens("to be or"), token_vocabulary(word_tokens("to be")))
    [1, 2, 0]
    """
    return [vocabulary.get(token, 0) for token in tokens]
