import hashlib
from importlib import resources

import pytest

from attnbook.learning.characters import decode_chars, splits
from attnbook.text.corpus import CHARACTER_KINDS, PLAYS, SHA256, character_kinds, shakespeare


def test_the_shipped_corpus_is_the_recorded_copy():
    data = resources.files("attnbook").joinpath("data/text/shakespeare.txt").read_bytes()
    assert hashlib.sha256(data).hexdigest() == SHA256, "the corpus changed: remake it with tools/make_corpus.py"


def test_the_corpus_holds_every_play_in_order_within_the_size_limit():
    text = shakespeare()
    assert text.isascii() and len(text.encode()) <= 1_500_000
    titles = ["HAMLET", "KING LEAR", "MACBETH", "OTHELLO", "ROMEO AND JULIET", "JULIUS CAESAR", "TEMPEST",
              "TWELFTH NIGHT"]
    assert len(titles) == len(PLAYS)
    starts = [text.find(title) for title in titles]
    assert -1 not in starts and starts == sorted(starts), starts


def test_its_provenance_is_shipped_beside_it():
    provenance = resources.files("attnbook").joinpath("data/text/PROVENANCE.md").read_text(encoding="utf-8")
    assert "CC BY" in provenance or "Creative Commons Attribution" in provenance
    assert "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be" in provenance


def test_character_kinds_follow_their_rules_in_order():
    text = "ACT I.\n\nSIR TOBY.\nO, 'tis he.\n"
    kinds = [CHARACTER_KINDS[k] for k in character_kinds(text)]
    assert kinds[:6] == ["line start", "inside a word", "inside a word", "other", "first letter of a word",
                         "other"]  # ACT I. names no speaker
    assert kinds[6:8] == ["other", "other"]  # an empty line has no start
    assert kinds[8:17] == ["speaker name"] * 9 and kinds[17] == "other"  # the name with its full stop
    assert kinds[18:22] == ["line start", "other", "other", "other"]  # "O, '"
    assert kinds[22:25] == ["first letter of a word", "inside a word", "inside a word"]  # "tis"
    with pytest.raises(TypeError, match="text"):
        character_kinds(b"VIOLA.")


def test_every_speaker_line_of_the_held_out_play_is_a_name_and_nothing_else_is():
    text = decode_chars(splits()[1])
    kinds = character_kinds(text)
    lines = text.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    named = {line for line, start in zip(lines, starts) if line and kinds[start] == 0}
    assert {"VIOLA.", "SIR TOBY.", "MALVOLIO.", "FIRST OFFICER."} <= named
    assert all(line.isupper() and line.endswith(".") and not line.startswith("ACT ") for line in named)
    assert all(kinds[start:start + len(line)].tolist() == [0] * len(line) for line, start in zip(lines, starts)
               if line in named)
