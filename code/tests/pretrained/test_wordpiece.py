"""WordPiece as BERT's tokeniser does it: the basic tokeniser's cleaning, accents, case, punctuation and CJK, then
greedy longest-match-first pieces, [UNK] and the [CLS] ... [SEP] frame, on the model's vocabulary."""

import numpy as np
import pytest

from attnbook.pretrained.wordpiece import (basic_tokenize, encode_batch, encode_text, load_vocabulary, normalise,
                                           tokenize, wordpiece)

pytestmark = pytest.mark.minilm


@pytest.fixture(scope="module")
def vocabulary():
    return load_vocabulary()


def test_the_vocabulary_is_the_models_30522_tokens_with_the_special_ones_at_their_ids(vocabulary):
    assert len(vocabulary.tokens) == len(vocabulary.ids) == 30522
    assert [vocabulary.ids[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [0, 100, 101, 102, 103]


def test_normalising_drops_controls_makes_white_space_spaces_strips_accents_and_lower_cases():
    assert normalise("A\x00b\ufffdc\x07d\u200de\tf\u00a0g") == "abcde f g"
    assert normalise("Ĉafé ÑANDÚ") == "cafe nandu"
    assert normalise("e\u0301") == "e"  # a combining accent, already decomposed


def test_cjk_ideographs_become_words_of_their_own_but_kana_and_hangul_do_not():
    assert basic_tokenize("注意力機制") == ["注", "意", "力", "機", "制"]
    # kana stay one word; Hangul syllables too, decomposed into their letters (jamo) by NFD
    assert basic_tokenize("かな한국") == ["かな한국"]


def test_every_punctuation_mark_is_a_word_of_its_own():
    assert basic_tokenize("don't—stop!!") == ["don", "'", "t", "—", "stop", "!", "!"]
    assert basic_tokenize("$5+3^2") == ["$", "5", "+", "3", "^", "2"]  # ASCII symbols count as punctuation


def test_pieces_are_the_longest_match_first_and_continue_with_hashes(vocabulary):
    pieces = wordpiece("unbelievably", vocabulary)
    assert pieces == ["un", "##bel", "##ie", "##va", "##bly"]
    assert all(piece in vocabulary.ids for piece in pieces)
    assert "".join(piece.removeprefix("##") for piece in pieces) == "unbelievably"
    assert "unbel" not in vocabulary.ids  # the first piece is the longest that exists


def test_a_word_longer_than_100_characters_or_without_a_cut_is_unknown(vocabulary):
    assert wordpiece("a" * 100, vocabulary) != ["[UNK]"]
    assert wordpiece("a" * 101, vocabulary) == ["[UNK]"]
    assert "🜁" not in vocabulary.ids and tokenize("🜁", vocabulary) == ["[UNK]"]
    assert tokenize("ab🜁", vocabulary) == ["[UNK]"]  # no piece continues the word: all of it is unknown


def test_text_that_spells_a_special_token_is_that_token(vocabulary):
    assert tokenize("a[SEP]b [MASK]", vocabulary) == ["a", "[SEP]", "b", "[MASK]"]
    assert tokenize("[sep]", vocabulary) == ["[", "sep", "]"]  # only as written


def test_encoding_frames_the_tokens_and_truncates_to_the_maximum_length(vocabulary):
    ids = encode_text("word " * 300, vocabulary)
    assert len(ids) == 256 and ids[0] == 101 and ids[-1] == 102
    assert encode_text("", vocabulary) == [101, 102]
    assert encode_text("one two three", vocabulary, max_length=3) == [101, vocabulary.ids["one"], 102]


def test_a_batch_is_padded_with_zeros_to_its_longest_sentence(vocabulary):
    batch = encode_batch(["a b c d", "a"], vocabulary)
    assert batch.ids.shape == (2, 6) and batch.lengths.tolist() == [6, 3]
    assert np.all(batch.ids[1, 3:] == 0)
    assert batch.tokens[1] == ["[CLS]", "a", "[SEP]"]


def test_the_arguments_are_checked_naming_them(vocabulary):
    with pytest.raises(TypeError, match="text must be a str"):
        tokenize(b"bytes", vocabulary)
    with pytest.raises(TypeError, match="vocabulary must be a Vocabulary"):
        tokenize("text", {"text": 1})
    with pytest.raises(ValueError, match="max_length"):
        encode_text("text", vocabulary, max_length=1)
    with pytest.raises(TypeError, match="sentences must be a non-empty list of str"):
        encode_batch("one sentence", vocabulary)
    with pytest.raises(TypeError, match=r"sentences\[1\] must be a str"):
        encode_batch(["one", 2], vocabulary)
