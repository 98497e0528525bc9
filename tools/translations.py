"""The book's translations: gettext catalogs made from the English pages, and what a catalog must hold.

The English ``.md`` sources are the one source of every edition. Sphinx's gettext builder extracts their
messages (paragraphs, headings, list items, table cells, captions, exercise titles) into one template per
page; ``sphinx-intl`` merges each template into the language's catalog,
``locales/<language>/LC_MESSAGES/<page>.po``, keeping what is translated, marking a message whose English
changed a little *fuzzy* and adding new ones untranslated. A translated build reads those catalogs
(``locale_dirs``) and parses each translated message again as MyST.

``python -m tools.translations update`` (``make translations``) does the extraction and the merge;
``python -m tools.translations check`` prints every problem :func:`catalog_problems` finds and each
catalog's count of translated, fuzzy and untranslated messages (``sphinx-intl stat`` counts fuzzy ones as
translated, ``upstream/sphinx-intl-stat-counts-fuzzy.md``, so the counts are read from the ``.po`` files here).

A translated message must keep its English's markup: the same roles with the same targets (a ``{term}``,
``{doc}`` or ``{ref}`` may say its text in the language, not point elsewhere), the same glued numbers,
inline math, code and link targets. It must read as Taiwan writes: no Simplified character (OpenCC's ``s2tw`` conversion,
character by character, leaves it unchanged) and none of the mainland words of ``locales/<language>/taiwan_usage.tsv``, except in
Chinese the English itself quotes (the glossary gives the sources' Simplified terms). It says one concept one way: the
term list's word wherever the English says a term of two or more words, none of the other forms of a concept of
``one_word.tsv`` and none of the calques of ``calques.tsv`` (a word in 「」 is named, not used), and no term said a second
time in parentheses for its glossary link. The term list itself may use no Simplified character, mainland word or other
form (:func:`term_list_problems`). :mod:`tests.test_translations` holds every catalog to these rules.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from tools import ROOT, display_path


def _book_languages() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["sphinx"]["config"]["book_languages"]


# every language but English, by gettext's code (book_languages of _config.yml): its site folder, also its hreflang
LANGUAGES = {code: language["folder"].rstrip("/") for code, language in _book_languages().items() if language["folder"]}
LOCALES = ROOT / "locales"
I18N = ROOT / "_build" / "i18n"
TEMPLATES = I18N / "gettext" / "_build" / "gettext"  # jupyter-book puts a build under <path-output>/_build
CACHE = ROOT / "_build" / ".jupyter_cache"  # the English build's execution cache, shared by every language

# --- the book's configuration for another builder or language ------------------------------------------------


def generated_config(name: str, adjust=None, **sphinx_config) -> Path:
    """_config.yml with ``sphinx_config`` added and the English build's execution cache, written to I18N/_config-<name>.yml.

    Jupyter Book 1 takes no ``-D`` option; a second configuration file is how a build of the same sources
    differs. Pointing ``execute.cache`` at the English build's cache means no language executes a notebook
    the English build has executed. ``adjust(config)``, if given, changes the rest before it is written.
    """
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config.setdefault("execute", {})["cache"] = str(CACHE)
    config["sphinx"]["config"].update(sphinx_config)
    config["sphinx"]["config"].setdefault("project", config["title"])  # the catalogs' Project-Id-Version
    if adjust is not None:
        adjust(config)
    I18N.mkdir(parents=True, exist_ok=True)
    path = I18N / f"_config-{name}.yml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def extract() -> Path:
    """Every page's message template (``.pot``) in TEMPLATES, from the English sources; returns TEMPLATES."""
    from tools.execution import STATIC_ENV, fill_cache

    fill_cache()  # the pages' glued values and outputs, from the English build's cache
    # one catalog per page; no source lines in the catalogs (they would change with every English edit)
    # and the outputs as the website shows them, so that their figures' alt texts are messages too (myst-nb
    # knows no output priorities for the gettext builder: it would render no output at all)
    from myst_nb.core.render import base_render_priority

    english = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["sphinx"]["config"]
    as_website = [["gettext", mime, priority] for mime, priority in base_render_priority()["html"].items()]
    as_website += [["gettext", mime, priority] for builder, mime, priority in english["nb_mime_priority_overrides"]
                   if builder == "html"]
    config = generated_config("gettext", gettext_compact=False, gettext_uuid=False, gettext_location=False,
                              nb_mime_priority_overrides=english["nb_mime_priority_overrides"] + as_website)
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    run = subprocess.run([str(jupyter_book), "build", str(ROOT), "--config", str(config),
                          "--path-output", str(I18N / "gettext"), "--builder", "custom",
                          "--custom-builder", "gettext", "-W", "-n", "--keep-going", "--quiet"],
                         cwd=ROOT, env={**os.environ, STATIC_ENV: "1"})
    if run.returncode != 0:
        raise RuntimeError("the gettext build failed (its messages are above)")
    figure_template()
    return TEMPLATES


FIGURES = "figures"  # the catalog of the words inside figures (attnbook.figures.languages), one for the book


def figure_template() -> Path:
    """The template of the words inside the figures, ``figures.pot`` in TEMPLATES: every message the book's run
    looked up while it drew its figures in the other languages (tools.site_outputs.translation_messages), read
    from the execution cache; each message's comment names the pages it is on."""
    from babel.messages.catalog import Catalog

    from tools.execution import executed_from_cache, notebook_sources
    from tools.site_outputs import translation_messages

    pages: dict[str, list[str]] = {}
    for source in notebook_sources():
        executed = executed_from_cache(source)
        if executed is None:
            raise RuntimeError(f"the execution cache holds no run of {display_path(source)}: build the book first")
        for message in translation_messages(executed):
            pages.setdefault(message, []).append(source.relative_to(ROOT).with_suffix("").as_posix())
    catalog = Catalog(project="Attention, computed", fuzzy=False)
    for message in sorted(pages):
        catalog.add(message, auto_comments=["on " + ", ".join(pages[message])])
    TEMPLATES.mkdir(parents=True, exist_ok=True)
    path = TEMPLATES / f"{FIGURES}.pot"
    write_catalog(catalog, path)
    return path


def update(language: str) -> None:
    """Merge the templates into ``locales/<language>``: new messages untranslated, changed ones fuzzy, gone ones dropped."""
    before = {po: po.read_bytes() for po in catalogs(language)}
    sphinx_intl = Path(sys.executable).parent / "sphinx-intl"
    subprocess.run([str(sphinx_intl), "update", "-p", str(TEMPLATES), "-l", language, "-d", str(LOCALES),
                    "-w", "0"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    for po in (LOCALES / language / "LC_MESSAGES").rglob("*.po"):  # obsolete entries: the English is gone
        catalog = read_catalog(po)
        if catalog.obsolete:
            catalog.obsolete.clear()
            write_catalog(catalog, po)
        if po in before and _messages(po.read_bytes()) == _messages(before[po]):
            po.write_bytes(before[po])  # only the header's dates changed: keep the file as it was


def _messages(po_bytes: bytes) -> list[str]:
    """A catalog's text without its header: what a translator changes."""
    return po_bytes.decode("utf-8").split("\n\n", 1)[1:]


def _table(path: Path) -> list[list[str]]:
    """The rows of one of the language's tab-separated lists, without its comment lines and its header."""
    return [list(row) for row in _rows(path, path.stat().st_mtime_ns)]


@functools.lru_cache(maxsize=64)
def _rows(path: Path, mtime: int) -> tuple[tuple[str, ...], ...]:  # read once per version: every message is checked against them
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    return tuple(tuple(row) for row in rows[1:])


def terms(language: str = "zh_TW") -> dict[str, str]:
    """The book's term list, ``locales/<language>/terms.tsv``: each glossary entry's English term and its one term in the language."""
    return dict(_table(LOCALES / language / "terms.tsv"))


def search_dictionary(language: str = "zh_TW") -> Path:
    """A Traditional Chinese word list for the search index's segmenter (jieba), written to I18N; returns its path.

    jieba's dictionary is Simplified, so Traditional text falls apart into single characters. Its words are
    converted with OpenCC (``s2tw``: characters only, each word keeps its frequency), and the book's terms are
    added as whole words, so that 位置編碼 or 注意力機制 is one entry of the index as well as its parts.
    """
    import jieba
    from opencc import OpenCC

    words = (Path(jieba.__file__).parent / "dict.txt").read_text(encoding="utf-8").splitlines()
    converted = OpenCC("s2tw").convert("\n".join(words)).splitlines()
    lines = [tw for cn, tw in zip(words, converted) if tw != cn and len(tw.split(" ", 1)[0]) >= 2]
    book = {term for term in terms(language).values() if _CJK_RUN.search(term)} | {"注意力機制"}
    lines += [f"{term.replace(' ', '')} 100000 n" for term in sorted(book)]
    path = I18N / f"search-words-{language}.txt"
    I18N.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --- reading a catalog ----------------------------------------------------------------------------------------


def read_catalog(path: Path):
    from babel.messages.pofile import read_po

    with path.open("rb") as stream:
        return read_po(stream, abort_invalid=True)


def write_catalog(catalog, path: Path) -> None:
    from babel.messages.pofile import write_po

    with path.open("wb") as stream:
        write_po(stream, catalog, width=0, omit_header=False)


def catalogs(language: str) -> list[Path]:
    """The language's catalogs, one per page, in a fixed order."""
    return sorted((LOCALES / language / "LC_MESSAGES").rglob("*.po"))


# --- what a translated message must keep ------------------------------------------------------------------

# a role whose text may be translated: {term}`text <target>` keeps its target only
_TITLED_ROLES = {"term", "doc", "ref", "numref", "prf:ref", "download", "any"}
_ROLE = re.compile(r"\{(?P<name>[\w:.+-]+)\}`(?P<body>[^`]*)`")
_CODE = re.compile(r"``.+?``|`[^`\n]+`")
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.S)
_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)|<(?P<auto>https?://[^>\s]+)>")
_FOOTNOTE = re.compile(r"\[\^[\w-]+\]")
_SUBSTITUTION = re.compile(r"\{\{.+?\}\}")
_PLACEHOLDER = re.compile(r"\{\d+\}")  # a value in a figure's words (attnbook.figures.languages.message_of)
_TARGET = re.compile(r"<(?P<target>[^<>]+)>\s*$")


def markup(message: str) -> tuple[Counter, str]:
    """The markup tokens of a MyST ``message`` a translation must keep, and the text left without them.

    >>> tokens, text = markup("A {term}`mask <Mask>` of $n$ keys; see {doc}`masks`, `m & c` and [PyTorch](https://pytorch.org).")
    >>> sorted(tokens)
    ['$n$', '[link](https://pytorch.org)', '`m & c`', '{doc}masks', '{term}mask']
    >>> markup("一個 {term}`遮罩 <Mask>`")[0] == Counter({"{term}mask": 1})
    True
    """
    tokens: Counter = Counter()

    def role(match: re.Match) -> str:
        name, body = match["name"], match["body"]
        if name in _TITLED_ROLES:
            titled = _TARGET.search(body)
            body = titled["target"] if titled else body
            body = body.lower() if name == "term" else body  # Sphinx matches glossary terms case-insensitively
        tokens[f"{{{name}}}{body}"] += 1
        return " "

    def keep(match: re.Match) -> str:
        tokens[match[0]] += 1
        return " "

    def link(match: re.Match) -> str:
        tokens[f"[link]({match['target'] or match['auto']})"] += 1
        return "]" if match["target"] else " "

    text = _ROLE.sub(role, message)
    for pattern in (_CODE, _MATH, _FOOTNOTE, _SUBSTITUTION, _PLACEHOLDER):
        text = pattern.sub(keep, text)
    text = _LINK.sub(link, text)
    return tokens, text


_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_ENGLISH_WORD = re.compile(r"[A-Za-z]{2,}")
_LOWER_WORD = re.compile(r"\b[a-z]{2,}\b")


# characters that are the Simplified form of another character and also standard Traditional characters in
# Taiwan (干擾, 划船, 游泳, 占卜, 公里, 只, 台, ...): without the word around them a character check cannot judge them
_BOTH_FORMS = set("干划游占里只台后面系松才斗谷丑云范表卷征制志余折朴冬凶卜")


def simplified_characters(text: str) -> list[str]:
    """The characters of ``text`` that Taiwan writes otherwise (OpenCC's ``s2tw``, one character at a time, so that
    no word of Traditional text is rewritten: 分布, 說明了 stay), in order, each once.

    >>> simplified_characters("这个注意力機制的权重分布")
    ['这', '个', '权']
    """
    from opencc import OpenCC

    if not hasattr(simplified_characters, "converter"):
        simplified_characters.converter = OpenCC("s2tw")
    convert = simplified_characters.converter.convert
    found = []
    for character in text:
        if (_CJK_RUN.fullmatch(character) and character not in _BOTH_FORMS and character not in found
                and convert(character) != character):
            found.append(character)
    return found


def taiwan_usage(language: str = "zh_TW") -> list[tuple[re.Pattern, str]]:
    """The mainland words of ``locales/<language>/taiwan_usage.tsv`` (patterns) and the Taiwan word for each."""
    return [(re.compile(mainland), taiwan) for mainland, taiwan in _table(LOCALES / language / "taiwan_usage.tsv")]


def one_word(language: str = "zh_TW") -> list[tuple[str, re.Pattern, re.Pattern | None]]:
    """Each concept of ``locales/<language>/one_word.tsv``: the book's word, a pattern of the other forms it does not
    use, and the English in which another form is wrong (a pattern; None: in any English)."""
    return [(word, re.compile(other), re.compile(english) if english else None)
            for word, other, english in _table(LOCALES / language / "one_word.tsv")]


def calques(language: str = "zh_TW") -> list[tuple[re.Pattern, re.Pattern | None, str]]:
    """The calques of ``locales/<language>/calques.tsv`` (patterns), the English each copies (None: any) and what a
    page says instead."""
    return [(re.compile(calque), re.compile(english) if english else None, instead)
            for calque, english, instead in _table(LOCALES / language / "calques.tsv")]


_QUOTED = re.compile(r"「[^「」]*」")


def _unquoted(pattern: re.Pattern, text: str, msgid: str) -> list[str]:
    """The matches of ``pattern`` in ``text``, each with a few characters around it, but those the English ``msgid``
    itself quotes and those in 「」, a word named, not used (the textbook says 「方差」).

    >>> _unquoted(re.compile("方差"), "變異數（教科書說「方差」）；這裡的方差", "")
    ['；這裡的方差']
    """
    quoted = [m.span() for m in _QUOTED.finditer(text)]
    return [text[max(0, m.start() - 4):m.end() + 4].strip() for m in pattern.finditer(text)
            if m[0] not in msgid and not any(start < m.start() and m.end() < end for start, end in quoted)]


# a term link in parentheses right after the words it repeats (梯度幾乎消失（{term}`梯度消失 <Vanishing gradient>`）):
# the term said twice so that the link has the term list's word
_DOUBLED_TERM = re.compile(r"(?P<before>[^（(，。；：]{1,8})[（(]\{term\}`(?P<text>[^`<]+?)\s*<[^`>]+>`[）)]")


def _doubled_terms(msgstr: str) -> list[str]:
    """The term links of ``msgstr`` in parentheses after words that already say two of the term's characters in a row.

    >>> _doubled_terms("梯度幾乎消失（{term}`梯度消失 <Vanishing gradient>`）"), _doubled_terms("難以學習（{term}`梯度消失 <Vanishing gradient>`）")
    (['梯度幾乎消失（梯度消失）'], [])
    """
    found = []
    for match in _DOUBLED_TERM.finditer(msgstr):
        term = match["text"]
        if any(term[i:i + 2] in match["before"] for i in range(len(term) - 1) if _CJK_RUN.fullmatch(term[i:i + 2])):
            found.append(f"{match['before']}（{term}）")
    return found


def term_list_problems(language: str = "zh_TW") -> list[str]:
    """What is wrong with the term list, ``locales/<language>/terms.tsv``: an entry in a Simplified character, a
    mainland word (taiwan_usage.tsv) or another form of a concept than the book's word (one_word.tsv).

    >>> term_list_problems()
    []
    """
    found = []
    for english, term in terms(language).items():
        if simplified := simplified_characters(term):
            found.append(f"{english}: {term} has Simplified characters {''.join(simplified)}")
        for mainland, taiwan in taiwan_usage(language):
            if mainland.search(term):
                found.append(f"{english}: {term} is not Taiwan usage (Taiwan: {taiwan})")
        for word, other, _ in one_word(language):
            if other.search(term):
                found.append(f"{english}: {term} uses another form of {word}, the book's word (one_word.tsv)")
    return found


def _literal_asterisks(text: str) -> int:
    """How many asterisks of the MyST ``text`` CommonMark shows as asterisks, not emphasis (an asterisk of math
    or code counts in the English and its translation alike).

    A closing ``**`` after punctuation and before a letter does not close (``**粗體。**後文``), so MyST prints it.

    >>> _literal_asterisks("**粗體**。"), _literal_asterisks("**粗體。**後文")
    (0, 4)
    """
    from markdown_it import MarkdownIt

    if not hasattr(_literal_asterisks, "parser"):
        _literal_asterisks.parser = MarkdownIt("commonmark")
    return re.sub(r"<[^>]+>", "", _literal_asterisks.parser.renderInline(text)).count("*")


@dataclass(frozen=True)
class Problem:
    catalog: Path
    msgid: str
    what: str

    def __str__(self) -> str:
        shown = self.msgid if len(self.msgid) <= 90 else self.msgid[:87] + "..."
        return f"{display_path(self.catalog)}: {self.what}: {shown!r}"


def message_problems(msgid: str, msgstr: str) -> list[str]:
    """What is wrong with ``msgstr`` as the translation of ``msgid`` (nothing when it is empty: untranslated).

    >>> message_problems("The {glue:text}`n` keys of {term}`attention <Attention>`.", "{term}`注意力 <Attention>`的 {glue:text}`n` 個鍵。")
    []
    >>> message_problems("The {glue:text}`n` keys.", "鍵。")
    ['markup lost: {glue:text}n']
    >>> message_problems("Default values of the program.", "程序的默認值。")
    ['not Taiwan usage: 程序 in 程序的默認值 (Taiwan: 程式)', 'not Taiwan usage: 默認 in 程序的默認值 (Taiwan: 預設)']
    >>> message_problems("The algorithm.", "演算法與这个算法。")
    ['Simplified characters: 这个 in 演算法與这个算法', 'not Taiwan usage: (?<!演)算法 in 演算法與这个算法 (Taiwan: 演算法)']
    """
    if not msgstr:
        return []
    found = []
    english, _ = markup(msgid)
    translated, text = markup(msgstr)
    if lost := english - translated:
        found.append("markup lost: " + ", ".join(sorted(lost.elements())))
    if added := translated - english:
        found.append("markup added: " + ", ".join(sorted(added.elements())))
    if _literal_asterisks(msgstr) > _literal_asterisks(msgid):
        found.append("emphasis that shows its asterisks (CommonMark: put the punctuation outside **...**)")
    quoted = set(_CJK_RUN.findall(msgid))  # Chinese the English quotes stays as written
    for run in _CJK_RUN.findall(text):
        if run in quoted:
            continue
        if simplified := simplified_characters(run):
            found.append(f"Simplified characters: {''.join(simplified)} in {run}")
        for mainland, taiwan in taiwan_usage():
            if mainland.search(run):
                found.append(f"not Taiwan usage: {mainland.pattern} in {run} (Taiwan: {taiwan})")
    for word, other, when in one_word():
        if when is None or when.search(msgid):
            found += [f"two words for one concept: {form} (the book's word: {word})" for form in _unquoted(other, text, msgid)]
    for calque, when, instead in calques():
        if when is None or when.search(msgid):
            found += [f"calque: {form} (say: {instead})" for form in _unquoted(calque, text, msgid)]
    found += [f"term doubled in parentheses: {doubled} (say it once, as the link's text)" for doubled in _doubled_terms(msgstr)]
    # the sources' own words, LaTeX and a message left in English (the copy check's) are as they are
    if not _CJK_RUN.search(msgid) and not msgid.startswith("\n") and _CJK_RUN.search(msgstr):
        found += [f"two words for one concept: the English says {english!r}, the translation not {term}"
                  for english, term in _terms_said(msgid) if term.replace(" ", "").lower() not in msgstr.replace(" ", "").lower()]
    return found


def _terms_said(msgid: str, language: str = "zh_TW") -> list[tuple[str, str]]:
    """The term list's entries of two or more words (one word, such as *value* or *frame*, has other senses) that the
    English ``msgid`` says, in the singular or plural, not after an adverb (*causally masked self-attention*), and each
    one's term in the language.

    >>> _terms_said("Beam search keeps the $B$ best prefixes; causally masked self-attention and two attention scores.")
    [('Attention score', '注意力分數'), ('Beam search', '集束搜尋')]
    """
    said = []
    for english, term in terms(language).items():
        if len(english.split()) < 2 or " and " in english:
            continue
        words = re.escape(english.lower()).replace("normalisation", "normali[sz]ation")
        if re.search(rf"(?<![\w-])(?<!ly ){words}(?:e?s)?(?![\w-])", msgid.lower()):
            said.append((english, term))
    return said


def catalog_problems(path: Path) -> tuple[list[Problem], Counter]:
    """Every problem of one catalog, and its counts of ``translated``, ``fuzzy`` and ``untranslated`` messages."""
    counts: Counter = Counter()
    problems = []
    catalog = read_catalog(path)
    language = path.relative_to(LOCALES).parts[0]
    template = (TEMPLATES / path.relative_to(LOCALES / language / "LC_MESSAGES")).with_suffix(".pot")
    if template.exists():  # after an extraction: the catalog holds the English of today, no more, no less
        english = {m.id for m in read_catalog(template) if m.id}
        held = {m.id for m in catalog if m.id}
        problems += [Problem(path, msgid, "not in the catalog (run make translations)") for msgid in english - held]
        problems += [Problem(path, msgid, "no longer in the English (run make translations)") for msgid in held - english]
    for message in catalog:
        if not message.id:
            continue
        if message.fuzzy:
            counts["fuzzy"] += 1
            problems.append(Problem(path, message.id, "fuzzy (its English changed: check and clear the flag)"))
        elif not message.string:
            counts["untranslated"] += 1
            problems.append(Problem(path, message.id, "untranslated"))
        else:
            counts["translated"] += 1
            _, text = markup(message.id)
            display_math = message.id.startswith("\n")  # a $$ block: LaTeX, which may stay as it is
            # a figure's label may be names only (RMS·RoPE-GQA·SwiGLU): there, words are lower-case ones
            words = _LOWER_WORD if path.stem == FIGURES else _ENGLISH_WORD
            if message.string == message.id and not display_math and len(words.findall(text)) >= 3:
                problems.append(Problem(path, message.id, "copied, not translated"))
        problems += [Problem(path, message.id, what) for what in message_problems(message.id, message.string)]
    return problems, counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["update", "check"])
    parser.add_argument("--language", default="zh_TW", choices=sorted(LANGUAGES))
    parser.add_argument("--no-extract", action="store_true", help="update from the templates already in " +
                        display_path(TEMPLATES))
    parser.add_argument("catalogs", nargs="*", type=Path, help="check only these .po files")
    args = parser.parse_args(argv)
    if args.command == "update":
        if not args.no_extract:
            extract()
        update(args.language)
    total: Counter = Counter()
    every = []
    for path in [p.resolve() for p in args.catalogs] or catalogs(args.language):
        problems, counts = catalog_problems(path)
        total += counts
        every += problems
        print(f"{display_path(path)}: {counts['translated']} translated, {counts['fuzzy']} fuzzy, "
              f"{counts['untranslated']} untranslated")
    print(f"all: {total['translated']} translated, {total['fuzzy']} fuzzy, {total['untranslated']} untranslated")
    if args.command == "check":
        term_list = [f"{display_path(LOCALES / args.language / 'terms.tsv')}: {what}" for what in term_list_problems(args.language)]
        for problem in every:
            print(problem)
        for what in term_list:
            print(what)
        return 1 if every or term_list else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
