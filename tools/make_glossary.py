"""Copy the glossary's terms and English definitions into the package, so "Attention in a pretrained model" can
search them with no download (Colab opens a notebook without the book's other pages).

    python -m tools.make_glossary            # write code/src/attnbook/data/text/glossary.tsv
    python -m tools.make_glossary --check    # exit 1 if the shipped file differs from what this would write

The source is the ``{glossary}`` directive of chapters/glossary.md. Each entry's definition is kept in English
only: the Chinese terms before it, the cross-reference roles around its words (``{term}`keys <Key>```
becomes ``keys``) and the closing "See ..." pointer to a chapter are cut. The file has one line per entry,
``term<TAB>definition``, in the glossary's order; ``attnbook.pretrained.glossary.glossary_entries`` reads it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tools import ROOT, display_path

SOURCE = ROOT / "chapters" / "glossary.md"
OUT = ROOT / "code" / "src" / "attnbook" / "data" / "text" / "glossary.tsv"


def english(definition: str) -> str:
    """A definition without its Chinese terms, cross-reference roles or pointer to a chapter."""
    text = " ".join(definition.split())
    text = re.split(r"(?<=[)\u3000-\u9fff])\.\s", text, maxsplit=1)[-1]  # after the Chinese terms
    text = re.sub(r"\{\w+\}`([^`<]*?)(?:\s*<[^>]*>)?`", r"\1", text)  # {term}`keys <Key>` -> keys
    return re.sub(r"\s*See [^.]*\.$", "", text)


def glossary_entries(source: str) -> list[tuple[str, str]]:
    """The (term, English definition) pairs of a glossary page's MyST source, in its order."""
    if "```{glossary}" not in source:
        raise ValueError("source: no ```{glossary} directive in it")
    body = source.split("```{glossary}", 1)[1].split("```", 1)[0]
    entries = re.findall(r"^(\S[^\n]*)\n((?:  [^\n]*\n?)+)", body, flags=re.M)  # (term, indented definition)
    return [(term.strip(), english(definition)) for term, definition in entries]


def tsv_text(entries: list[tuple[str, str]]) -> str:
    """The file's text: ``term<TAB>definition`` per line."""
    for term, definition in entries:
        if "\t" in term + definition or "\n" in term + definition:
            raise ValueError(f"entries: a tab or newline in the entry {term!r}")
    return "".join(f"{term}\t{definition}\n" for term, definition in entries)


def main(argv: list[str] | None = None, out: Path = OUT) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--check"]):
        print(__doc__, file=sys.stderr)
        return 2
    text = tsv_text(glossary_entries(SOURCE.read_text(encoding="utf-8")))
    if args == ["--check"]:
        if out.is_file() and out.read_text(encoding="utf-8") == text:
            print(f"{display_path(out)} is up to date")
            return 0
        print(f"{display_path(out)} is missing or stale: run `python -m tools.make_glossary`", file=sys.stderr)
        return 1
    out.write_text(text, encoding="utf-8")
    print(f"wrote {display_path(out)} ({text.count(chr(10))} entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
