"""The glossary shipped for the pretrained chapter's search: equal to chapters/glossary.md, read with no download."""

import pytest

from attnbook.pretrained.glossary import glossary_entries
from tools import make_glossary


def test_the_shipped_glossary_equals_what_the_glossary_page_says():
    source = make_glossary.SOURCE.read_text(encoding="utf-8")
    assert glossary_entries() == tuple(make_glossary.glossary_entries(source))
    assert make_glossary.main(["--check"]) == 0, "glossary.tsv is stale: run `python -m tools.make_glossary`"


def test_every_entry_has_a_term_and_an_english_definition_without_roles_or_pointers():
    entries = glossary_entries()
    assert len(entries) > 100 and len({term for term, _ in entries}) == len(entries)
    for term, definition in entries:
        assert term and definition[0].isupper(), (term, definition)
        assert "{term}" not in definition and "{doc}" not in definition and " See " not in definition, term
        assert not any("\u3000" <= char <= "\u9fff" for char in definition), term  # no Chinese terms left


def test_the_tool_cuts_chinese_terms_roles_and_the_pointer_to_a_chapter():
    source = ("# Glossary\n\n```{glossary}\nKey\n  鍵 / 键 (the textbook). What a {term}`query <Query>` is\n"
              "  compared with. See {doc}`masks`.\n\nQuery\n  查詢 / 查询 (not in the sources). A vector.\n```\n")
    assert make_glossary.glossary_entries(source) == [("Key", "What a query is compared with."),
                                                       ("Query", "A vector.")]


def test_the_tool_refuses_a_page_without_a_glossary_and_a_stale_file(tmp_path):
    with pytest.raises(ValueError, match="source"):
        make_glossary.glossary_entries("# Glossary\n")
    stale = tmp_path / "glossary.tsv"
    stale.write_text("Key\tsomething else\n", encoding="utf-8")
    assert make_glossary.main(["--check"], out=stale) == 1
    assert make_glossary.main([], out=stale) == 0 and make_glossary.main(["--check"], out=stale) == 0
