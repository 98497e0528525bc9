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
from tools.translations import (FIGURES, TEMPLATES, catalog_problems, catalogs, message_problems, read_catalog, term_list_problems,
                                terms)

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


def _copy_lists(tmp_path, **replaced):
    """The language's lists (terms, Taiwan usage, one word per concept, calques) in tmp_path/zh_TW, each as in the book
    unless ``replaced`` gives its text (by the file's stem)."""
    for name in ("terms", "taiwan_usage", "one_word", "calques"):
        text = replaced.get(name, (ROOT / "locales" / LANGUAGE / f"{name}.tsv").read_text("utf-8"))
        (tmp_path / LANGUAGE / f"{name}.tsv").write_text(text, "utf-8")


def test_the_check_finds_untranslated_fuzzy_and_copied_messages(tmp_path, monkeypatch):
    (tmp_path / "zh_TW" / "LC_MESSAGES").mkdir(parents=True)
    _copy_lists(tmp_path)
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


# one bad translation per pattern of issue 42, each beside the English it translates, and the problem the check names
ONE_WORD_CASES = {
    "掩碼": ("Masked self-attention needs a causal mask.", "掩碼自注意力需要因果遮罩。", "two words for one concept: 掩碼"),
    "詞嵌入": ("Each token's embedding is a row of $E$.", "每個詞元的詞嵌入是 $E$ 的一列。", "two words for one concept: 個詞元的詞嵌入是"),
    "可學習的位置編碼": ("ViT adds learned position embeddings.", "ViT 加上可學習的位置編碼。", "two words for one concept"),
    "優化器": ("The optimiser is Adam.", "優化器是 Adam。", "two words for one concept: 優化器"),
    "正規化": ("The softmax renormalises each row.", "softmax 重新正規化每一列。", "two words for one concept"),
    "採樣": ("Sampling draws the next token.", "採樣會抽出下一個詞元。", "two words for one concept: 採樣"),
    "抽樣": ("Sampling draws the next token.", "抽樣會抽出下一個詞元。", "two words for one concept: 抽樣"),
    "分布": ("The distribution of the next token.", "下一個詞元的分布。", "two words for one concept"),
    "隱狀態": ("The recurrent network carries a state.", "循環網路帶著隱狀態。", "two words for one concept"),
    "完全遮罩的查詢": ("A fully masked row gives zeros.", "完全遮罩的查詢給出零。", "two words for one concept"),
    "束搜尋": ("Greedy search is beam search with $B = 1$.", "貪婪搜尋就是 $B = 1$ 的束搜尋。", "two words for one concept"),
    "方差": ("The variance of $q \\cdot k$ is $d_k$.", "$q \\cdot k$ 的方差是 $d_k$。", "two words for one concept: 的方差是"),
    "均值": ("Mean 0 and variance 1.", "均值為 0、變異數為 1。", "two words for one concept: 均值"),
    "全局": ("Global: all word pairs.", "全局：所有詞對。", "two words for one concept"),
    "English term": ("Beam search keeps the best prefixes.", "光束搜尋保留最好的前綴。",
                     "two words for one concept: the English says 'Beam search'"),
    "今日": ("Today's block is pre-norm.", "今日的區塊採用前置歸一化。", "calque: 今日"),
    "對步數的圖": ("Training loss against step.", "訓練損失對步數的圖。", "calque: 訓練損失對步數的圖"),
    "諮詢": ("Every word consults every other word.", "每個詞都諮詢其他每個詞。", "calque"),
    "常態": ("Here $n_q \\ne n_k$ is normal.", "這裡 $n_q \\ne n_k$ 是常態。", "calque"),
    "回報": ("We report the average largest weight.", "我們回報最大權重的平均值。", "calque"),
    "每一個下一個": ("It predicts each next word.", "它預測每一個下一個詞。", "calque"),
    "doubled term": ("The gradient almost {term}`vanishes <Vanishing gradient>`.",
                     "梯度幾乎消失（{term}`梯度消失 <Vanishing gradient>`）。", "term doubled in parentheses: 梯度幾乎消失（梯度消失）"),
}


@pytest.mark.parametrize("case", ONE_WORD_CASES, ids=str)
def test_the_check_fails_on_a_catalog_that_says_a_concept_another_way_or_a_calque(case, tmp_path, monkeypatch):
    english, translated, problem = ONE_WORD_CASES[case]
    (tmp_path / LANGUAGE / "LC_MESSAGES").mkdir(parents=True)
    _copy_lists(tmp_path)
    path = tmp_path / LANGUAGE / "LC_MESSAGES" / "page.po"
    path.write_text('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
                    f'msgid "{english}"\nmsgstr "{translated}"\n', encoding="utf-8")
    monkeypatch.setattr("tools.translations.LOCALES", tmp_path)
    problems, counts = catalog_problems(path)
    assert counts["translated"] == 1
    assert [p.what for p in problems if p.what.startswith(problem)] != [], [p.what for p in problems]


def test_the_concept_check_spares_the_books_exceptions():
    # Unicode's own normalisation, a word embedding, a standard normal, a reward, a word named in 「」 and Chinese the
    # English quotes are what they say
    assert message_problems("Names are compared after Unicode normalisation.", "名稱在 Unicode 正規化之後比較。") == []
    assert message_problems("It added a learned embedding to each word embedding.", "它在每個詞嵌入上加上可學習的嵌入。") == []
    assert message_problems("Independent standard normal components.", "獨立的標準常態分量。") == []
    assert message_problems("Time only where the machine rewards it.", "只有在機器給予回報時才省下時間。") == []
    assert message_problems("Variance, not the textbook's word.", "變異數（教科書說「方差」）。") == []
    assert message_problems("The textbook: 方差歸一回 1.", "教科書：「方差歸一回 1」。") == []
    assert message_problems("Restricted ({term}`truncated <Truncated self-attention>`) self-attention.",
                            "局部自注意力，也就是{term}`截斷自注意力 <Truncated self-attention>`。") == []


def test_the_term_list_uses_no_mainland_form_and_the_check_names_one(tmp_path, monkeypatch):
    assert term_list_problems(LANGUAGE) == []
    (tmp_path / LANGUAGE).mkdir()
    _copy_lists(tmp_path, terms="english\tzh_hant\nMasked self-attention\t掩碼自注意力\nBeam search\t束搜索\n"
                                "Top-k sampling\tTop-k 采样\nToken\t詞元\n")
    monkeypatch.setattr("tools.translations.LOCALES", tmp_path)
    found = term_list_problems(LANGUAGE)
    assert found == ["Masked self-attention: 掩碼自注意力 uses another form of 遮罩, the book's word (one_word.tsv)",
                     "Beam search: 束搜索 is not Taiwan usage (Taiwan: 搜尋)",
                     "Top-k sampling: Top-k 采样 has Simplified characters 采样"]
