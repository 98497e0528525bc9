"""attnbook's BPE against a maintained trainer: Hugging Face's ``tokenizers`` (0.23.3), set up the same way.

The same setup: the same words (``tokenizers``' ``Split`` pre-tokeniser on :data:`PATTERN`, "isolated"), no
normaliser and no special tokens, the same 256 starting symbols (``initial_alphabet``: the characters U+0000 to
U+00FF, which for this ASCII corpus are its bytes, in the same order, so that a symbol has the same id in both)
and the same vocabulary size, 256 + the number of merges. ``tokenizers`` breaks a tie between pairs of equal count
in favour of the smallest pair of ids, as ``train_bpe`` does. The result: the same merges in the same order, the
same vocabulary with the same ids, and the same encodings, with no difference to explain.
"""

import json

import pytest

from attnbook.text.bpe import PATTERN, encode_bpe, train_bpe
from attnbook.text.corpus import shakespeare

pytestmark = pytest.mark.tokenizers

TEXT = shakespeare()
TRAIN, HELD_OUT = TEXT[:TEXT.find("TWELFTH NIGHT")], TEXT[TEXT.find("TWELFTH NIGHT"):]  # as the chapter splits it
N_MERGES = 8000  # the chapter's MAX_MERGES


def hugging_face_bpe(text: str, n_merges: int):
    """``tokenizers``' BPE trained on ``text`` with attnbook's setup (see the module's docstring)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(PATTERN), behavior="isolated")
    trainer = trainers.BpeTrainer(vocab_size=256 + n_merges, min_frequency=0, special_tokens=[],
                                  initial_alphabet=[chr(b) for b in range(256)], show_progress=False)
    tokenizer.train_from_iterator([text], trainer=trainer)
    return tokenizer


def _merges_and_vocab(tokenizer):
    model = json.loads(tokenizer.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    return merges, model["vocab"]


@pytest.fixture(scope="module")
def both():
    return train_bpe(TRAIN, N_MERGES), hugging_face_bpe(TRAIN, N_MERGES)


def test_tokenizers_pre_tokenises_as_attnbook_does():
    from tokenizers import Regex, pre_tokenizers

    from attnbook.text.bpe import pretokenize

    split = pre_tokenizers.Split(Regex(PATTERN), behavior="isolated")
    sample = TEXT[:20_000]
    assert [word for word, _ in split.pre_tokenize_str(sample)] == pretokenize(sample)


def test_the_merges_are_the_same_in_the_same_order(both):
    ours, theirs = both
    merges, _ = _merges_and_vocab(theirs)
    as_text = [(ours.vocab[a].decode("latin-1"), ours.vocab[b].decode("latin-1")) for a, b in ours.merges]
    assert len(merges) == len(as_text) == N_MERGES
    assert merges == as_text


def test_every_token_has_the_same_id(both):
    ours, theirs = both
    _, vocab = _merges_and_vocab(theirs)
    assert vocab == {token.decode("latin-1"): i for i, token in enumerate(ours.vocab)}


def test_the_encodings_are_the_same(both):
    ours, theirs = both
    held_out = HELD_OUT + " Unseen words: zyxwvut, qqq 12345."  # the play neither trainer saw
    assert theirs.encode(held_out).ids == encode_bpe(held_out, ours)


@pytest.mark.parametrize("seed", range(6))
def test_ties_are_broken_alike_on_small_texts_full_of_them(seed):
    # few letters, short words: many pairs share the largest count at every step
    import random

    generator = random.Random(seed)
    text = " ".join("".join(generator.choice("abc") for _ in range(generator.randint(1, 6))) for _ in range(200))
    ours, theirs = train_bpe(text, 40), hugging_face_bpe(text, 40)
    merges, _ = _merges_and_vocab(theirs)
    assert merges == [(ours.vocab[a].decode(), ours.vocab[b].decode()) for a, b in ours.merges]
    assert theirs.encode(text).ids == encode_bpe(text, ours)
