"""The zh-Hant catalogs (locales/zh_TW) are complete, in step with the English, and keep its markup (tools/translations.py).

``make book`` extracts the English pages' messages into templates (_build/i18n/gettext) before it builds the
zh-Hant site; a catalog that lacks a message of today's English, holds one the English dropped, leaves one
untranslated or fuzzy fails here, named. A translated message must keep its English's roles, glued numbers,
math, code and link targets, use no Simplified character and none of the mainland words of
``taiwan_usage.tsv``, and give every glossary link the term list's word.
"""

from __future__ import annotations

import re

import pytest

from tools import ROOT
from tools.execution import figure_catalogs
from tools.translations import FIGURES, TEMPLATES, catalog_problems, catalogs, message_problems, read_catalog, terms

LANGUAGE = "zh_TW"
CATALOGS = catalogs(LANGUAGE)
PAGE_CATALOGS = [path for path in CATALOGS if path.parent.name in ("chapters", "exercises")]
# the words inside the figures (attnbook.figures.languages), one catalog for the book, made from the book's run
FIGURE_CATALOG = figure_catalogs()[LANGUAGE]


def _name(path) -> str:
    return path.relative_to(path.parents[1]).as_posix() if path.parent.name in ("chapters", "exercises") else path.name


def test_every_page_of_the_book_has_a_catalog():
    pages = sorted(p.relative_to(ROOT).with_suffix("").as_posix() for p in ROOT.glob("chapters/*.md")
                   if (p.stem != "references"))
    pages += sorted(p.relative_to(ROOT).with_suffix("").as_posix() for p in ROOT.glob("exercises/*.md"))
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    in_book = [page for page in pages if re.search(rf"\b{re.escape(page)}\b", toc)]
    held = {_name(path).removesuffix(".po") for path in PAGE_CATALOGS}
    assert set(in_book) <= held, f"pages without a catalog (run make translations): {sorted(set(in_book) - held)}"


def test_catalogs_are_in_step_with_todays_english():
    assert TEMPLATES.is_dir(), f"no templates in {TEMPLATES}: `make book` extracts them (tools/translations.py)"
    templates = sorted(TEMPLATES.rglob("*.pot"))
    assert TEMPLATES / f"{FIGURES}.pot" in templates, "no template of the figures' words"
    held = {_name(path).removesuffix(".po") for path in PAGE_CATALOGS + [FIGURE_CATALOG]}
    missing = [t.relative_to(TEMPLATES).with_suffix("").as_posix() for t in templates
               if t.relative_to(TEMPLATES).with_suffix("").as_posix() not in held]
    assert missing == [], f"pages of the English with no catalog (run make translations): {missing}"
    stale = [str(p) for path in PAGE_CATALOGS + [FIGURE_CATALOG] for p in catalog_problems(path)[0]
             if "make translations" in p.what]
    assert stale == [], f"{len(stale)} messages out of step with the English, e.g. {stale[:5]}"


@pytest.mark.parametrize("path", CATALOGS, ids=_name)
def test_every_message_is_translated_and_none_is_fuzzy(path):
    problems, counts = catalog_problems(path)
    left = [str(p) for p in problems if p.what.startswith(("untranslated", "fuzzy"))]
    assert left == [], f"{counts['untranslated']} untranslated, {counts['fuzzy']} fuzzy: {left[:10]}"


@pytest.mark.parametrize("path", CATALOGS, ids=_name)
def test_every_translation_keeps_its_markup_and_writes_as_taiwan_does(path):
    problems, _ = catalog_problems(path)
    wrong = [str(p) for p in problems if not p.what.startswith(("untranslated", "fuzzy")) and "make translations" not in p.what]
    assert wrong == [], f"{len(wrong)} problems: {wrong[:10]}"


def test_the_check_names_each_kind_of_problem():
    english = "The {glue:text}`n` keys of {term}`attention <Attention>` cost $O(n^2)$ in `attend`: see [the paper](https://arxiv.org/abs/1706.03762)."
    good = "{term}`注意力 <Attention>`的 {glue:text}`n` 個鍵在 `attend` 中花費 $O(n^2)$：見[論文](https://arxiv.org/abs/1706.03762)。"
    assert message_problems(english, good) == []
    assert message_problems(english, "") == []  # untranslated: counted by catalog_problems, not a markup problem
    assert message_problems(english, good.replace("{glue:text}`n` ", "")) == ["markup lost: {glue:text}n"]
    assert message_problems(english, good.replace("$O(n^2)$", "$O(n)$")) == ["markup lost: $O(n^2)$", "markup added: $O(n)$"]
    assert message_problems(english, good.replace("<Attention>", "<Mask>")) == ["markup lost: {term}attention",
                                                                                  "markup added: {term}mask"]
    assert message_problems(english, good.replace("論文", "论文")) == ["Simplified characters: 论 in 论文"]
    assert message_problems(english, good.replace("花費", "花費的程序")) == [
        "not Taiwan usage: 程序 in 中花費的程序 (Taiwan: 程式)"]
    assert message_problems("消融實驗 / 消融实验 (not in the sources).", "簡體：消融实验。") == []  # quoted Chinese


def test_the_check_finds_untranslated_fuzzy_and_copied_messages(tmp_path, monkeypatch):
    (tmp_path / "zh_TW" / "LC_MESSAGES").mkdir(parents=True)
    (tmp_path / "zh_TW" / "taiwan_usage.tsv").write_text((ROOT / "locales/zh_TW/taiwan_usage.tsv").read_text("utf-8"), "utf-8")
    path = tmp_path / "zh_TW" / "LC_MESSAGES" / "page.po"
    path.write_text('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
                    'msgid "Masks hide keys."\nmsgstr ""\n\n'
                    '#, fuzzy\nmsgid "A causal mask."\nmsgstr "因果遮罩。"\n\n'
                    'msgid "Padding masks hide the padding."\nmsgstr "Padding masks hide the padding."\n\n'
                    'msgid "$QK^\\\\top$"\nmsgstr "$QK^\\\\top$"\n', encoding="utf-8")
    monkeypatch.setattr("tools.translations.LOCALES", tmp_path)
    problems, counts = catalog_problems(path)
    assert dict(counts) == {"untranslated": 1, "fuzzy": 1, "translated": 2}
    assert sorted(p.what.split(" ")[0] for p in problems) == ["copied,", "fuzzy", "untranslated"]


def _glossary_terms() -> dict[str, str]:
    """Each glossary entry's English term and the first Traditional Chinese term its definition gives, if any."""
    source = (ROOT / "chapters" / "glossary.md").read_text(encoding="utf-8")
    body = source.split("```{glossary}", 1)[1].split("```", 1)[0]
    found = {}
    for term, definition in re.findall(r"^(\S[^\n]*)\n((?:  [^\n]*\n?)+)", body, flags=re.M):
        first = re.match(r"([^./(]+?)\s*(?:/|\(|\.)", " ".join(definition.split()))
        if first and re.search(r"[\u4e00-\u9fff]", first[1]):
            found[term] = first[1].strip()
    return found


def test_the_term_list_has_every_glossary_entry_with_the_glossarys_traditional_term():
    listed = terms(LANGUAGE)
    glossary = _glossary_terms()
    entries = re.findall(r"^(\S[^\n]*)\n  ", (ROOT / "chapters" / "glossary.md").read_text(encoding="utf-8")
                         .split("```{glossary}", 1)[1].split("```", 1)[0], flags=re.M)
    assert sorted(listed) == sorted(entries), "terms.tsv and the glossary list different entries"
    differ = {term: (glossary[term], listed[term]) for term in glossary
              if glossary[term].replace("$", "") != listed[term]}  # the page's Top-$k$ is Top-k in a catalog's term line
    allowed = {"Post-norm and pre-norm"}  # the glossary gives two terms; the list joins them
    assert set(differ) <= allowed, f"the glossary and terms.tsv disagree: {differ}"


def test_every_glossary_link_of_a_translation_says_the_term_lists_word():
    words = {english.lower(): zh for english, zh in terms(LANGUAGE).items()}
    role = re.compile(r"\{term\}`(?P<text>[^`<]*?)\s*<(?P<target>[^`>]+)>`")
    wrong = []
    for path in PAGE_CATALOGS:
        for message in read_catalog(path):
            for link in role.finditer(message.string if isinstance(message.string, str) else ""):
                word = words.get(link["target"].lower())
                if word and word.replace("$", "").lower() not in link["text"].replace("$", "").lower():
                    wrong.append(f"{_name(path)}: {link[0]} (the term list says {word})")
    assert wrong == [], f"{len(wrong)} glossary links with another word, e.g. {wrong[:10]}"


def test_glossary_catalog_gives_each_term_line_the_term_lists_word():
    catalog = {m.id: m.string for m in read_catalog(next(p for p in PAGE_CATALOGS if _name(p) == "chapters/glossary.po"))}
    wrong = [f"{english}: {catalog.get(english)!r}" for english, zh in terms(LANGUAGE).items()
             if catalog.get(english) and not catalog[english].startswith(zh)]
    assert wrong == [], wrong



def test_the_same_english_is_translated_the_same_way_on_every_page():
    # the glossary's term lines say 中文（English）, on purpose; every other page says one message one way
    translations: dict[str, dict[str, list[str]]] = {}
    for path in PAGE_CATALOGS:
        if _name(path) == "chapters/glossary.po":
            continue
        for message in read_catalog(path):
            if message.id and message.string:
                translations.setdefault(message.id, {}).setdefault(message.string, []).append(_name(path))
    differ = {msgid: ways for msgid, ways in translations.items() if len(ways) > 1}
    assert differ == {}, f"{len(differ)} messages translated more than one way, e.g. {list(differ.items())[:3]}"
