"""Visible prose per page: the words a reader reads, outside code.

``python -m tools.visible_words [--base REV] [FILE ...]`` prints, for each MyST source (default: every
``chapters/*.md``), the number of words in its Markdown: code cells, literal includes, code and math
fences, directive options (``:label: ...``), comments and label targets do not count; the bodies of
prose directives (admonitions, proofs, exercises, figure captions) do, and inline math or a role
(``{ref}`x```) counts as one word. With ``--base REV`` it also prints the count at that git revision
and the change, the measure of issue #11 ("at least 25% less visible prose"). With ``--main-path`` it
counts only each chapter's main path, from ``## Overview`` to the end of ``## Summary`` (the section before
``## History`` or ``## Exercises``), the length issue #27 bounds at about 2,500 words; pages without an
overview are left out. ``make words`` runs it (``MAIN=1`` for the main path).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from tools import ROOT, file_at_revision

__all__ = ["main_path", "visible_words"]

_FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
_PROSE_DIRECTIVE = re.compile(r"^\{(?!code-cell|literalinclude|code|math|raw|glue)")
_WORD = re.compile(r"[A-Za-z0-9][\w'’.-]*|\$[^$]+\$")


def visible_words(text: str) -> int:
    """Number of words a reader sees in the MyST Markdown ``text`` (see the module docstring)."""
    if text.startswith("---"):  # the jupytext header
        text = text[text.find("\n---", 3) + 4:]
    kept: list[str] = []
    fence, prose_fence = "", False
    for line in text.splitlines():
        stripped = line.strip()
        opening = _FENCE.match(stripped)
        if fence:
            if opening and opening.group(1).startswith(fence) and not opening.group(2).strip():
                fence = ""
            elif prose_fence and not re.match(r"^:[\w-]+:", stripped):
                kept.append(line)
            continue
        if opening:
            fence, prose_fence = opening.group(1), bool(_PROSE_DIRECTIVE.match(opening.group(2).strip()))
            continue
        if stripped.startswith(("+++", "<!--")) or re.match(r"^\([\w:-]+\)=$", stripped):
            continue
        kept.append(line)
    prose = re.sub(r"<!--.*?-->", " ", "\n".join(kept), flags=re.S)
    prose = re.sub(r"\$\$.*?\$\$(?:[ \t]*\([\w:-]+\))?", " MATH ", prose, flags=re.S)  # a display and its label
    prose = re.sub(r"\{[\w:-]+\}`[^`]*`", " REF ", prose)
    return len(_WORD.findall(prose))


def main_path(text: str) -> str | None:
    """The chapter's main path in ``text``: from ``## Overview`` up to the section after ``## Summary``."""
    start = re.search(r"^## Overview\s*$", text, flags=re.M)
    if start is None:
        return None
    end = re.search(r"^## (History|Exercises|Supplement|Sources)\s*$", text[start.end():], flags=re.M)
    return text[start.start(): start.end() + end.start()] if end else text[start.start():]


def _at_revision(path: Path, revision: str) -> str | None:
    return file_at_revision(path.resolve().relative_to(ROOT).as_posix(), revision)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--base", help="a git revision to compare with")
    parser.add_argument("--main-path", action="store_true", help="count only each chapter's main path")
    args = parser.parse_args(argv)
    files = args.files or sorted((ROOT / "chapters").glob("*.md"))

    def count(text: str | None) -> int | None:
        if text is not None and args.main_path:
            text = main_path(text)
        return None if text is None else visible_words(text)

    total_now = total_then = 0
    for path in files:
        now = count(path.read_text(encoding="utf-8"))
        if now is None:
            continue
        total_now += now
        if args.base is None:
            print(f"{now:7d}  {path.name}")
            continue
        then = count(_at_revision(path, args.base)) or 0
        total_then += then
        change = f"{(now - then) / then:+7.1%}" if then else "    new"
        print(f"{then:7d} {now:7d} {change}  {path.name}")
    if args.base is None:
        print(f"{total_now:7d}  total")
    else:
        print(f"{total_then:7d} {total_now:7d} {(total_now - total_then) / max(total_then, 1):+7.1%}  total"
              f"  (words at {args.base}, now, change)")


if __name__ == "__main__":
    main()
