r"""A Markdown cell as JupyterLab renders it: which text reaches MathJax, and the HTML around it.

JupyterLab (``@jupyterlab/rendermime``'s ``renderMarkdown``, the same in JupyterLite) takes the math out of a
cell's raw text before it reads the Markdown (``removeMath``: each formula becomes ``@@n@@``), renders the
rest, and puts each formula back, escaped, into the HTML (``replaceMath``), where MathJax typesets it. Because
the math is found in the raw text, whatever the Markdown syntax puts inside a formula (a block quote's ``> ``
on each line of a multi-line ``$$``) reaches MathJax as part of it. :func:`remove_math` and
:func:`replace_math` are JupyterLab 4's functions (``packages/rendermime/src/latex.ts``), line for line;
:func:`mathjax_inputs` is what MathJax reads from a cell: each formula with its delimiters, as text.

>>> quoted = "> **Definition 1**\n>\n> $$\n> a = b\n> $$"
>>> mathjax_inputs(quoted)
['$$\n> a = b\n> $$']
>>> mathjax_inputs("> **Definition 1**\n>\n> $$a = b$$ and $c$, not `$d$`")
['$$a = b$$', '$c$']
"""

from __future__ import annotations

import html
import re

INLINE = "$"
# the pieces JupyterLab splits a cell's text at (MATHSPLIT)
MATH_SPLIT = re.compile(r"(\$\$?|\\(?:begin|end)\{[a-z]*\*?\}|\\[{}$]|[{}]|(?:\n\s*)+|@@\d+@@|\\\\[()\[\]])", re.I)
FENCE = re.compile(r"^(?P<fence>`{3,}|(~T){3,})[^`\n]*\n([\s\S]*?)^(?P=fence)`*$", re.M)
CODE_SPAN = re.compile(r"(^|[^\\])(`+)([^\n]*?[^`\n])\2(?!`)", re.M)


def _process_math(i: int, j: int, pre_process, math: list[str], blocks: list[str]) -> list[str]:
    block = "".join(blocks[i:j + 1]).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    while j > i:
        blocks[j] = ""
        j -= 1
    blocks[i] = f"@@{len(math)}@@"
    math.append(pre_process(block))
    return blocks


def remove_math(text: str) -> tuple[str, list[str]]:
    """``text`` with each formula replaced by ``@@n@@``, and the formulas (HTML-escaped), as JupyterLab's
    ``removeMath`` does."""
    math: list[str] = []
    start = end = last = None
    braces = 0
    if "`" in text or "~~~" in text:  # a $ in code is no math: ~D while the math is found
        text = text.replace("~", "~T")
        text = FENCE.sub(lambda m: m.group(0).replace("$", "~D"), text)
        text = CODE_SPAN.sub(lambda m: m.group(0).replace("$", "~D"), text)

        def de_tilde(part: str) -> str:
            return re.sub(r"~([TD])", lambda m: "~" if m.group(1) == "T" else INLINE, part)
    else:
        def de_tilde(part: str) -> str:
            return part
    blocks = MATH_SPLIT.split(re.sub(r"\r\n?", "\n", text))
    i = 1
    while i < len(blocks):
        block = blocks[i]
        if block[:1] == "@":
            blocks[i] = f"@@{len(math)}@@"
            math.append(block)
        elif start is not None:
            if block == end:
                if braces:
                    last = i
                else:
                    blocks = _process_math(start, i, de_tilde, math, blocks)
                    start = end = last = None
            elif re.search(r"\n.*\n", block):
                if last is not None:
                    i = last
                    blocks = _process_math(start, i, de_tilde, math, blocks)
                start = end = last = None
                braces = 0
            elif block == "{":
                braces += 1
            elif block == "}" and braces:
                braces -= 1
        elif block in (INLINE, "$$"):
            start, end, braces = i, block, 0
        elif block in ("\\\\(", "\\\\["):
            start, end, braces = i, "\\\\)" if block[-1] == "(" else "\\\\]", 0
        elif block[1:6] == "begin":
            start, end, braces = i, "\\end" + block[6:], 0
        i += 2
    if start is not None and last is not None:
        blocks = _process_math(start, last, de_tilde, math, blocks)
    return de_tilde("".join(blocks)), math


def replace_math(text: str, math: list[str]) -> str:
    """``text`` (the rendered HTML) with each ``@@n@@`` put back, as JupyterLab's ``replaceMath`` does."""
    def put_back(match: re.Match) -> str:
        group = math[int(match.group(1))]
        if group[:3] == "\\\\(" and group[-3:] == "\\\\)":
            group = "\\(" + group[3:-3] + "\\)"
        elif group[:3] == "\\\\[" and group[-3:] == "\\\\]":
            group = "\\[" + group[3:-3] + "\\]"
        return group

    return re.sub(r"@@(\d+)@@", put_back, text)


def mathjax_inputs(text: str) -> list[str]:
    """Each formula MathJax reads from the Markdown cell ``text`` in JupyterLab, as text (its delimiters kept).

    A formula reaches MathJax only where the Markdown left its placeholder in the text of the page (not in a
    code span or block, where MathJax does not look): one that does not is not returned.
    """
    from markdown_it import MarkdownIt

    stripped, math = remove_math(text)
    # JupyterLab's marked reads CommonMark and GitHub's tables
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(stripped)
    rendered = re.sub(r"<(pre|code)\b.*?</\1>", "", rendered, flags=re.S)
    return [html.unescape(math[int(n)]) for n in re.findall(r"@@(\d+)@@", rendered)]
