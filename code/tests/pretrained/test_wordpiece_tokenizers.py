"""attnbook's WordPiece against Hugging Face's ``tokenizers`` (0.23.3) running the model's own tokenizer.json:
the same ids on every line of the book's eight plays and on hostile strings. The tokenizer.json pads and cuts
to 128 tokens; sentence-transformers cuts to the model's max_seq_length, 256, and pads per batch, so the test
does the same."""

import pytest

from attnbook.pretrained.files import checked_file
from attnbook.pretrained.wordpiece import encode_text, load_vocabulary
from attnbook.text.corpus import shakespeare

pytestmark = [pytest.mark.tokenizers, pytest.mark.minilm]

HOSTILE = [
    "Café naïve résumé ÀÉÎÕÜ Ĉ ø Å",  # accents, precomposed
    "e\u0301 a\u0308\u0323 \u0301leading mark",  # combining marks, one at the start
    "😀 emoji 👩\u200d👩\u200d👧 family 👍🏽",  # emoji, zero-width joiners, a skin tone
    "zero\u200dwidth\u200bspace\u200cnon\ufeffbom\u2060joiner",  # zero-width characters (format controls)
    "注意力機制是什麼？「引號」",  # CJK with its punctuation
    "𠀀𪜀𫝀𫠠𬺰 \U0002B820\U0002B91F\U0002B920 \U0002F800",  # CJK extensions B to F (E where tokenizers starts it)
    "かなカナ 한국어 हिन्दी ไทย العربية עברית русский Ελληνικά ΟΔΟΣ",  # mixed scripts, a final sigma
    "tab\tnew\nline\r\x00nul\x07bell\x1bescape\x7fdelete",  # control characters
    "\u2028line\u2029para\u0085nel\u00a0nbsp\u3000ideographic\u1680ogham",  # Unicode white space
    "\ufffd replacement \ue000private unk\U000E0001tag",  # U+FFFD, a private-use and a tag character
    "x" * 500,  # a 500-character word
    "a" * 100 + " " + "a" * 101,  # the longest word cut, one longer
    "", "   ", "\n\t",  # empty input, white space only
    "İstanbul ǅ ß ﬁ ﬀ Ⅻ ① ｆｕｌｌｗｉｄｔｈ １２３",  # case mappings, ligatures, compatibility forms
    "$100+50^2=`x`|~ don't—stop… «quoted» „here“",  # ASCII symbols and Unicode punctuation
    "[CLS] [SEP]x[MASK][PAD] [UNK] [cls] [ SEP ]",  # special tokens spelled in the text
    "word " * 300,  # longer than the 256 tokens the model reads
]


@pytest.fixture(scope="module")
def hugging_face():
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(checked_file("tokenizer.json")))
    tokenizer.no_padding()
    tokenizer.enable_truncation(256)
    return tokenizer


def test_every_line_of_the_eight_plays_gets_the_same_ids_as_tokenizers(hugging_face):
    vocabulary = load_vocabulary()
    lines = shakespeare().splitlines()
    theirs = [encoding.ids for encoding in hugging_face.encode_batch(lines)]
    different = [(line, ours) for line, ours, ids in zip(lines, (encode_text(line, vocabulary) for line in lines), theirs)
                 if ours != ids]
    assert len(lines) > 40000
    assert not different, f"{len(different)} of {len(lines)} lines differ, the first: {different[0]}"


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_strings_get_the_same_ids_as_tokenizers(hugging_face, text):
    assert encode_text(text, load_vocabulary()) == hugging_face.encode(text).ids
