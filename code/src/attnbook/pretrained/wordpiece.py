"""WordPiece, BERT's tokeniser, from the model's ``vocab.txt``: the same ids as Hugging Face's ``tokenizers``.

Two steps (Devlin et al. 2019; Wu et al. 2016). The *basic tokeniser* cleans the text (control characters
dropped, white space made spaces), puts spaces around CJK ideographs, strips accents, lower-cases, and splits
on white space and around every punctuation mark. *WordPiece* then cuts each word into the longest piece of
the vocabulary that starts it, then the longest that continues it (written ``##...``), and so on; a word with
no such cut, or longer than 100 characters, becomes ``[UNK]``. Text that spells a special token (``[SEP]``)
is that token, as in ``tokenizers``.

>>> vocabulary = load_vocabulary()
>>> tokenize("Attention, computed!", vocabulary)
['attention', ',', 'computed', '!']
>>> tokenize("Unbelievably embeddings", vocabulary)
['un', '##bel', '##ie', '##va', '##bly', 'em', '##bed', '##ding', '##s']
"""

from __future__ import annotations

import re
import string
import unicodedata
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ..text.bpe import check_text
from ..validation import boundary, check_positive_int
from .files import checked_file

__all__ = ["SPECIAL_TOKENS", "TokenBatch", "Vocabulary", "basic_tokenize", "check_sentences", "encode_batch", "encode_text",
           "load_vocabulary", "normalise", "tokenize", "wordpiece"]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  #: matched in the raw text, as tokenizers does
_SPECIAL = re.compile("(" + "|".join(map(re.escape, SPECIAL_TOKENS)) + ")")
MAX_WORD = 100  # a longer word is [UNK] without trying to cut it
# the CJK ideographs BERT spaces out: the Unicode blocks of Google's tokeniser, but for Extension E, which
# Hugging Face's tokenizers starts at U+2B920 rather than U+2B820 (the model was run with tokenizers')
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


class Vocabulary(NamedTuple):
    """A WordPiece vocabulary: token ``tokens[i]`` has id ``i``, and ``ids`` maps each token to its id.

    Attributes
    ----------
    tokens : tuple of str
        The tokens in the order of ``vocab.txt``.
    ids : dict
        ``{token: id}``.

    Examples
    --------
    >>> vocabulary = load_vocabulary()
    >>> len(vocabulary.tokens), vocabulary.ids["[CLS]"], vocabulary.tokens[102]
    (30522, 101, '[SEP]')
    """

    tokens: tuple
    ids: dict


class TokenBatch(NamedTuple):
    """Sentences as a padded batch of token ids: what the model reads.

    Attributes
    ----------
    ids : ndarray of int64
        ``(batch, n)`` the ids, ``[CLS] ... [SEP]``, padded with ``[PAD]`` (0) to the longest.
    lengths : ndarray of int64
        ``(batch,)`` each sentence's real tokens, ``[CLS]`` and ``[SEP]`` included.
    tokens : list of list of str
        Each sentence's tokens, without the padding.

    Examples
    --------
    >>> batch = encode_batch(["Hi!", "Hello there"], load_vocabulary())
    >>> batch.ids.tolist(), batch.lengths.tolist()
    ([[101, 7632, 999, 102], [101, 7592, 2045, 102]], [4, 4])
    """

    ids: np.ndarray  # (batch, n)
    lengths: np.ndarray  # (batch,)
    tokens: list


@lru_cache(maxsize=4)
def _vocabulary(path) -> Vocabulary:
    tokens = tuple(path.read_text(encoding="utf-8").splitlines())
    return Vocabulary(tokens, {token: i for i, token in enumerate(tokens)})


def load_vocabulary(folder=None) -> Vocabulary:
    """The model's vocabulary, from its ``vocab.txt`` (checked against its SHA-256), one token a line.

    Parameters
    ----------
    folder : str or os.PathLike, optional
        As in :func:`attnbook.pretrained.files.model_folder`; default the installed model.

    Returns
    -------
    Vocabulary
        30,522 tokens for all-MiniLM-L6-v2.

    Examples
    --------
    >>> load_vocabulary().tokens[:2]
    ('[PAD]', '[unused0]')
    """
    return _vocabulary(checked_file("vocab.txt", folder))


def _check_vocabulary(vocabulary) -> Vocabulary:
    if not isinstance(vocabulary, Vocabulary):
        raise TypeError(f"vocabulary must be a Vocabulary (from load_vocabulary), got {type(vocabulary).__name__}")
    return vocabulary


def _is_punctuation(ch: str) -> bool:
    return ch in string.punctuation or unicodedata.category(ch).startswith("P")  # ASCII's symbols ($, +, ^) too


@lru_cache(maxsize=None)
def _cleaned(ch: str) -> str:
    """One character of the text cleaned: dropped, a space, spaced out (a CJK ideograph) or itself."""
    if ch in "\x00\ufffd" or (ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")):
        return ""  # NUL, the replacement character and the controls (Cc, Cf, Cs, Co, Cn)
    if ch.isspace():
        return " "
    return f" {ch} " if any(low <= ord(ch) <= high for low, high in _CJK) else ch


@lru_cache(maxsize=None)
def _unaccented_lower(ch: str) -> str:
    """One character of the decomposed text: dropped if an accent (a nonspacing mark, Mn), else lower-cased."""
    return "" if unicodedata.category(ch) == "Mn" else ch.lower()


@boundary(lambda text: (check_text(text),))
def normalise(text) -> str:
    r"""BERT's normaliser: clean the text, space out CJK ideographs, strip accents, lower-case.

    .. math:: \text{``Café\u00A0ÜBER''} \;\mapsto\; \text{``cafe uber''}

    Control characters (Unicode's C classes but tab, newline, return), NUL and U+FFFD are dropped, white space
    becomes a space; accents are the nonspacing marks (Mn) of the canonical decomposition (NFD).

    Parameters
    ----------
    text : str
        Any text.

    Returns
    -------
    str
        The normalised text.

    Examples
    --------
    >>> normalise("Café\u00a0ÜBER\u200d\x00")
    'cafe uber'
    >>> normalise("注意力")
    ' 注  意  力 '
    """
    text = "".join(map(_cleaned, text))
    # accents after the decomposition; lower case one character at a time, as tokenizers (no final sigma)
    return "".join(map(_unaccented_lower, unicodedata.normalize("NFD", text)))


@boundary(lambda text: (check_text(text),))
def basic_tokenize(text) -> list[str]:
    """BERT's basic tokeniser: :func:`normalise`, then split on white space and around every punctuation mark.

    Parameters
    ----------
    text : str
        Any text (without special tokens: see :func:`tokenize`).

    Returns
    -------
    list of str
        The words, each punctuation mark a word of its own.

    Examples
    --------
    >>> basic_tokenize("Wherefore art thou, Romeo?")
    ['wherefore', 'art', 'thou', ',', 'romeo', '?']
    """
    words = []
    for chunk in normalise.unchecked(text).split():
        word = ""
        for ch in chunk:
            if _is_punctuation(ch):
                words += [word, ch] if word else [ch]
                word = ""
            else:
                word += ch
        if word:
            words.append(word)
    return words


@boundary(lambda word, vocabulary: (check_text(word, "word"), _check_vocabulary(vocabulary)))
def wordpiece(word, vocabulary: Vocabulary) -> list[str]:
    """Greedy longest-match-first WordPiece: the pieces of one word, or ``["[UNK]"]``.

    Parameters
    ----------
    word : str
        One word of :func:`basic_tokenize`.
    vocabulary : Vocabulary
        See :func:`load_vocabulary`.

    Returns
    -------
    list of str
        The longest piece of the vocabulary that starts the word, then the longest ``##`` piece that continues
        it, until the word is used up; ``["[UNK]"]`` when some rest has no piece or the word is longer than
        100 characters.

    Examples
    --------
    >>> vocabulary = load_vocabulary()
    >>> wordpiece("transformers", vocabulary), wordpiece("x" * 101, vocabulary)
    (['transformers'], ['[UNK]'])
    >>> wordpiece("wherefore", vocabulary)                        # greedy, not by morphemes
    ['where', '##for', '##e']
    """
    if len(word) > MAX_WORD:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):  # the longest piece first
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocabulary.ids:
                break
        else:  # no piece continues the word
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


@boundary(lambda text, vocabulary: (check_text(text), _check_vocabulary(vocabulary)))
def tokenize(text, vocabulary: Vocabulary) -> list[str]:
    """The WordPiece tokens of ``text``: special tokens it spells kept, the rest basic-tokenised, then cut.

    Parameters
    ----------
    text : str
        Any text.
    vocabulary : Vocabulary
        See :func:`load_vocabulary`.

    Returns
    -------
    list of str
        The tokens, without ``[CLS]`` and ``[SEP]`` around them.

    Examples
    --------
    >>> tokenize("Who's there?[SEP]Nay, answer me", load_vocabulary())
    ['who', "'", 's', 'there', '?', '[SEP]', 'nay', ',', 'answer', 'me']
    """
    tokens = []
    for part in _SPECIAL.split(text):  # the special tokens are the odd parts
        if part in SPECIAL_TOKENS:
            tokens.append(part)
        else:
            for word in basic_tokenize.unchecked(part):
                tokens += wordpiece.unchecked(word, vocabulary)
    return tokens


def _encode_arguments(text, vocabulary, max_length=256) -> tuple:
    return check_text(text), _check_vocabulary(vocabulary), check_positive_int(max_length, "max_length", minimum=2)


@boundary(_encode_arguments)
def encode_text(text, vocabulary: Vocabulary, max_length: int = 256) -> list[int]:
    """The ids the model reads: ``[CLS]``, the tokens of ``text`` (the first ``max_length - 2``), ``[SEP]``.

    Parameters
    ----------
    text : str
        Any text.
    vocabulary : Vocabulary
        See :func:`load_vocabulary`.
    max_length : int, optional
        At most this many ids (at least 2); default 256, all-MiniLM-L6-v2's ``max_seq_length``.

    Returns
    -------
    list of int
        The ids.

    Examples
    --------
    >>> vocabulary = load_vocabulary()
    >>> encode_text("To be, or not to be", vocabulary)
    [101, 2000, 2022, 1010, 2030, 2025, 2000, 2022, 102]
    >>> encode_text("To be, or not to be", vocabulary, max_length=4), encode_text("", vocabulary)
    ([101, 2000, 2022, 102], [101, 102])
    """
    ids = vocabulary.ids
    return [ids["[CLS]"], *(ids[token] for token in tokenize.unchecked(text, vocabulary)[:max_length - 2]),
            ids["[SEP]"]]


def check_sentences(sentences) -> list[str]:
    """``sentences`` as a list if it is a non-empty list or tuple of str, else an error naming the first wrong one.

    Parameters
    ----------
    sentences : list of str
        The sentences.

    Returns
    -------
    list of str
        The same sentences.

    Examples
    --------
    >>> check_sentences(["Who's there?", None])
    Traceback (most recent call last):
    ...
    TypeError: sentences[1] must be a str, got NoneType
    """
    if isinstance(sentences, str) or not isinstance(sentences, (list, tuple)) or not sentences:
        raise TypeError(f"sentences must be a non-empty list of str, got {sentences!r:.60}")
    return [check_text(sentence, f"sentences[{i}]") for i, sentence in enumerate(sentences)]


def _batch_arguments(sentences, vocabulary, max_length=256) -> tuple:
    return check_sentences(sentences), *_encode_arguments("", vocabulary, max_length)[1:]


@boundary(_batch_arguments)
def encode_batch(sentences, vocabulary: Vocabulary, max_length: int = 256) -> TokenBatch:
    """The ids of several sentences, padded with ``[PAD]`` to the longest: :func:`encode_text` of each.

    Parameters
    ----------
    sentences : list of str
        At least one.
    vocabulary, max_length
        As in :func:`encode_text`.

    Returns
    -------
    TokenBatch
        ``ids`` ``(batch, n)``, ``lengths`` ``(batch,)`` and the ``tokens`` of each sentence.

    Examples
    --------
    >>> batch = encode_batch(["Good night", "Good night, good night! Parting is such sweet sorrow"], load_vocabulary())
    >>> batch.ids.shape, batch.lengths.tolist(), batch.tokens[0]
    ((2, 13), [4, 13], ['[CLS]', 'good', 'night', '[SEP]'])
    """
    encoded = [encode_text.unchecked(sentence, vocabulary, max_length) for sentence in sentences]
    lengths = np.array([len(ids) for ids in encoded], dtype=np.int64)  # (batch,)
    ids = np.zeros((len(encoded), lengths.max()), dtype=np.int64)  # (batch, n): [PAD] is id 0
    for row, sentence in zip(ids, encoded):
        row[:len(sentence)] = sentence
    tokens = [[vocabulary.tokens[i] for i in sentence] for sentence in encoded]
    return TokenBatch(ids, lengths, tokens)
