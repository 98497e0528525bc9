import hashlib
from importlib import resources

from attnbook.text.corpus import PLAYS, SHA256, shakespeare


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
