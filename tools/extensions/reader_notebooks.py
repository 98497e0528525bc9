"""A local Sphinx extension: the notebook a learner is handed, written from the page's resolved doctree.

The `.md` sources and their paired `.ipynb` are MyST: glue roles, cross-reference roles, directive fences,
for authors and nbval. What a learner opens (a page's download, the notebooks zip, JupyterLite, Colab and
Binder) is the *reader notebook* this extension writes while the website is built, one per notebook page,
from the doctree Sphinx has resolved for that page (the ``doctree-resolved`` event), so that its Markdown
says what the page says:

* glued values as the page shows them (myst-nb has already put their text in the tree);
* cross-references, glossary terms and citations as links to the website's page and anchor, with the
  page's text ("Theorem 3.1", "(3.2)", "(Vaswani et al., 2017)"); :func:`localised` turns the links
  between notebooks of one collection into relative links (the zip, JupyterLite);
* each item a link may lead to (a section, theorem, definition, exercise, equation) starting a Markdown cell
  named after its anchor, and a link to an anchor of a notebook naming the cell that holds it
  (``masks.ipynb#cell-id=def-masks-masked-attention``, :func:`cell_ids`), which JupyterLab scrolls to;
* theorems, definitions and exercises as quoted blocks labelled with their numbers, a formula inside one
  written on one line (:func:`one_line`: Jupyter finds the math before it reads the Markdown, so the quote's
  ``>`` would land inside a multi-line one), proofs ending in ∎, equation numbers as ``\\tag{n}``,
  admonitions as quotes, every solution folded in ``<details>``;
* each figure's caption, numbered, under the code cell that draws it.

Its code cells are the executed notebook's (tools/execution.py: the build's run), in order, with their
outputs: a cell the page hides (``hide-input``) folded (``jupyter.source_hidden``, which JupyterLab, Jupyter
Notebook and Colab read); a cell the page removes (``remove-cell``: the asserts that check the prose, whose
values the Markdown shows, and the glue calls) left out, but for the install cell (``setup``, which Colab
needs) and any that computes what a later cell reads (:func:`cells_left_out`: folded, without its outputs),
so that the notebook runs top to bottom. An interactive figure's output is the picture of its first state
(the website's) until it runs. The notebook's metadata are written as JupyterLab writes them, so that opening
it changes nothing. The text comes from the tree the page was written from, so a translated build
(Sphinx's gettext catalogs, applied to the doctree) writes translated reader notebooks with no more work.

The Markdown of each node kind comes from sphinx-markdown-builder's translator (paragraphs, lists, tables,
emphasis, literals, code blocks, escaping); :class:`ReaderMarkdown` adds what a notebook needs on top: cells,
links to the website, math for Jupyter's MathJax, and the nodes of myst-nb, sphinx-proof, sphinx-exercise and
sphinxcontrib-bibtex. A node kind it does not know is a warning, so an error of the book's build (-W).

At the end of the build (``build-finished``, before jupyterlite-sphinx builds the lite site) every page's
``_sources/<page>.ipynb`` download is replaced by its reader notebook, and the JupyterLite copies of the
chapters are written (:data:`LITE` in :func:`reader_folder`); the zip (tools/extensions/notebooks_zip.py) and ``make publish``
(the launch buttons' branch, tools/publish.py) take theirs from :func:`reader_folder` too (one folder per language). A reader notebook
holding a MyST role or directive fence (:func:`raw_myst`) stops the build, naming it.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from pathlib import Path
from types import SimpleNamespace

import nbformat
from docutils import nodes
from sphinx.util import logging
from sphinx.util.math import get_node_equation_number
from sphinx_markdown_builder.contexts import (IndentContext, SubContext, SubContextParams, TableContext,
                                             WrappedContext)
from sphinx_markdown_builder.translator import MarkdownTranslator, pushing_context, pushing_status
from tabulate import tabulate

from tools import ROOT

logger = logging.getLogger(__name__)

# what a box title is wrapped in where the page shows it: the reader notebook writes its own brackets around it
# (a zh-Hant title comes from its catalog in full-width ones, （遮罩注意力）)
TITLE_BRACKETS = " ()（）"
SOLUTION_IN_CODE = "in the folded code cell below (click it to show it)."
READER_FOLDER = ROOT / "_build" / "reader-notebooks"  # <docname>.ipynb: links to the website
LITE = "lite"  # inside a reader folder: the chapters as JupyterLite holds them (_config.yml jupyterlite_contents)
# the kernel as JupyterLab names it in a notebook it saves (ipykernel's kernel.json): opening one changes nothing
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LITE_KERNELSPEC = {"display_name": "Python (Pyodide)", "language": "python", "name": "python"}  # JupyterLite's
LITE_PAGES = "chapters/"  # the pages whose notebooks the zip and the lite site hold (not exercises/: hidden tests)

# what a reader notebook's Markdown must never show: a MyST role, a directive fence, a target or an equation label
RAW_MYST = {
    "role": re.compile(r"\{[A-Za-z][\w:.+-]*\}`"),
    "directive fence": re.compile(r"^[ \t>]*(`{3,}|~{3,}|:{3,})[ \t]*\{[A-Za-z][\w:.+-]*\}", re.M),
    "target": re.compile(r"^[ \t]*\([\w.:-]+\)=[ \t]*$", re.M),
    "equation label": re.compile(r"\$\$[ \t]*\([\w.:-]+\)[ \t]*$", re.M),
}
ANCHOR = re.compile(r'<a id="([^"]+)"></a>')  # what the reader notebook writes at each anchor of the page
CELL_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # a cell id, as nbformat 4.5 allows it

CODE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


def prose_of(markdown: str) -> str:
    """``markdown`` with the content of its code blocks (but for a directive's fence) and code spans blanked:
    what a reader sees as Markdown rather than as code."""
    from markdown_it import MarkdownIt

    lines = markdown.splitlines()
    for token in MarkdownIt("commonmark").parse(markdown):
        if token.type in ("fence", "code_block") and token.map and not token.info.strip().startswith("{"):
            for line in range(*token.map):
                lines[line] = ""
    return CODE_SPAN.sub(lambda match: match.group(1) * 2, "\n".join(lines))


def raw_myst(markdown: str) -> list[str]:
    """Every MyST role, directive fence, target and equation label in ``markdown`` (outside its code), as
    ``kind: text``."""
    prose = prose_of(markdown)
    return [f"{kind}: {match.group(0).strip()}" for kind, pattern in RAW_MYST.items()
            for match in pattern.finditer(prose)]


def notebook_raw_myst(notebook) -> list[str]:
    """:func:`raw_myst` of every Markdown cell of ``notebook``, each finding prefixed by its cell's number."""
    return [f"cell {index}: {finding}" for index, cell in enumerate(notebook.cells) if cell.cell_type == "markdown"
            for finding in raw_myst(cell.source)]


def reader_folder(config) -> Path:
    """The reader notebooks of a build in ``config.language``: READER_FOLDER for English, a sibling per other language."""
    language = config.language or "en"
    return READER_FOLDER if language == "en" else READER_FOLDER.with_name(f"{READER_FOLDER.name}-{language}")


def reader_path(app, docname: str) -> Path:
    return reader_folder(app.config) / f"{docname}.ipynb"


class _Page(SimpleNamespace):
    """What the number helpers of Sphinx, sphinx-proof and sphinx-exercise read from a writer: the builder's
    name, config and environment, and the page's figure numbers (the HTML builder sets them only as it writes)."""


def page_numbers(app, docname: str) -> _Page:
    builder = SimpleNamespace(name=app.builder.name, config=app.config, env=app.env,
                              fignumbers=app.env.toc_fignumbers.get(docname, {}))
    return _Page(builder=builder, docnames=[docname])


class TextTable(TableContext):
    """A table whose cells stay as the page writes them: tabulate reads numbers by default ("14.0" -> "14")."""

    def make(self):
        ctx = SubContext()
        prefix = self.internal_context.make()
        if prefix:
            ctx.add(prefix)
        content = [*self.headers, *self.body]
        if content:
            rows = [self.make_row(row) for row in content]
            ctx.add(tabulate(rows[1:], headers=rows[0], tablefmt="github", disable_numparse=True), prefix_eol=2)
        return ctx.make()


class ReaderMarkdown(MarkdownTranslator):
    """The Markdown of one page's doctree, cut into notebook cells at its code cells and headings.

    ``code_cells`` are the executed notebook's code cells by index and ``code_lines`` the line of each in the
    source; :attr:`cells` is the reader notebook's cells once the tree has been walked.
    """

    @pushing_context
    def visit_table(self, _node):
        self._push_context(TextTable(params=SubContextParams(2, 1)))

    def __init__(self, document, app, docname: str, code_cells: dict[int, dict], code_lines: dict[int, int]):
        super().__init__(document, SimpleNamespace(config=app.config, current_doc_name=docname,
                                                   get_target_uri=app.builder.get_target_uri))
        self.app, self.docname = app, docname
        self.page = page_numbers(app, docname)
        self.base_url = app.config.html_baseurl.rstrip("/") + "/"
        self.code_cells, self.code_lines = code_cells, code_lines
        self.pending = sorted(code_cells)  # code cells not yet emitted, by index
        self.cells: list[dict] = []
        self.anchors: set[str] = set()
        self.open_solutions: list[list] = []  # [summary, shown in a cell yet] of each <details> open at this point

    # ---- cells ----
    def _root_only(self, node) -> None:
        if len(self._ctx_queue) != 1:
            raise ValueError(f"{self.docname}: a notebook cell inside a {node.parent.tagname} (line {node.line}) "
                             "cannot be handed out as a cell of its own")

    def flush(self) -> None:
        """End the Markdown cell being written (when it holds anything)."""
        text = self._ctx_queue[0].make().strip()
        self._ctx_queue[0] = SubContext()
        text = re.sub(r"<details>\s*<summary>[^<]*</summary>\s*</details>", "", text).strip()
        if text:
            self.cells.append(nbformat.v4.new_markdown_cell(text))

    def start_cell(self) -> None:
        """End the Markdown cell being written unless it holds only anchors (those of what starts here)."""
        if ANCHOR.sub("", self._ctx_queue[0].make()).strip():
            self.flush()

    def emit_code_cells(self, up_to: int) -> None:
        """Emit every code cell not yet emitted up to index ``up_to`` (the page removed the earlier ones).

        A code cell inside a solution ends the solution's Markdown cell (its <details> closed before the cell and
        opened again after it) and is folded itself (JupyterLab's and Jupyter Notebook's ``source_hidden`` and
        ``outputs_hidden``); a solution that starts with code is announced by its title.
        """
        while self.pending and self.pending[0] <= up_to:
            index = self.pending.pop(0)
            cell = self.code_cells[index]
            if self.open_solutions:
                self.add("</details>", prefix_eol=2, suffix_eol=2)
                summary, started = self.open_solutions[-1]
                self.flush()
                started = started or bool(self.cells) and f"<summary>{summary}</summary>" in self.cells[-1].source
                if not started:
                    self.cells.append(nbformat.v4.new_markdown_cell(f"**{summary}**: {SOLUTION_IN_CODE}"))
                self.open_solutions[-1][1] = True
                cell = nbformat.from_dict(json.loads(json.dumps(cell)))
                fold(cell, outputs=True)
                self.cells.append(cell)
                self._open_details(summary + " (continued)")
            else:
                self.flush()
                self.cells.append(cell)

    def dispatch_visit(self, node):
        # a code cell the page does not show (removed) goes back where it stands in the source
        if self.pending and isinstance(node.parent, (nodes.section, nodes.document)) and node.line \
                and len(self._ctx_queue) == 1:
            before = [index for index in self.pending if self.code_lines[index] < node.line]
            if before:
                self.emit_code_cells(before[-1])
        handler = self._box_handler(node)
        if handler is not None:
            return getattr(self, f"visit_{handler}")(node)
        return super().dispatch_visit(node)

    def finish(self) -> list[dict]:
        if self.pending:
            self.emit_code_cells(self.pending[-1])
        self.flush()
        return self.cells

    def visit_container(self, node):
        if node.get("nb_element") != "cell_code":
            return
        self._root_only(node)
        self.emit_code_cells(node["cell_index"])
        captions = [figure for figure in node.findall(nodes.figure)]
        for figure in captions:
            self._anchors(figure)
            caption = next(iter(figure.findall(nodes.caption)), None)
            if caption is not None:
                number = self._figure_number(figure)
                self.add(f"*{number}* " if number else "", prefix_eol=2)
                for child in caption.children:
                    child.walkabout(self)
                self.ensure_eol(2)  # the next Markdown cell opens with the caption, under the figure
        raise nodes.SkipNode

    def depart_container(self, node):
        pass

    def _figure_number(self, figure) -> str:
        numbers = self.page.builder.fignumbers.get("figure", {}).get(figure["ids"][0], ()) if figure["ids"] else ()
        return self.app.config.numfig_format["figure"] % ".".join(map(str, numbers)) if numbers else ""

    # ---- anchors ----
    def _add_anchor(self, anchor: str):
        if anchor not in self.anchors:
            self.anchors.add(anchor)
            self.add(f'<a id="{anchor}"></a>', prefix_eol=2, suffix_eol=2)

    def _anchors(self, node) -> None:
        if node.get("ids") and len(self._ctx_queue) == 1 and not self.open_solutions:
            self.start_cell()  # an item others link to starts a cell, which a link opens by its id (cell_ids)
        for anchor in node.get("ids", []):
            self._add_anchor(anchor)

    @pushing_status
    def visit_section(self, node):
        if not isinstance(node.parent, (nodes.section, nodes.document)):
            self._push_status()  # the body of a box (theorem-content, solution-content...): no heading, no anchor
            return
        if len(self._ctx_queue) == 1:
            self.start_cell()  # each heading starts a cell (with the anchors just before it)
        self._anchors(node)
        self._push_status(section_level=self.status.section_level + 1)

    def visit_target(self, node):
        if node.get("refid"):
            if len(self._ctx_queue) == 1 and not self.open_solutions:
                self.start_cell()
            self._add_anchor(node["refid"])
        self._anchors(node)

    def visit_comment(self, node):
        raise nodes.SkipNode

    def visit_raw(self, node):
        # a script never runs in a notebook's Markdown (sphinx-thebe appends its config and kernel name as two)
        if "html" in node.get("format", "").split() and not node.astext().lstrip().startswith("<script"):
            self.add(node.astext())
        raise nodes.SkipNode

    # ---- text and math ----
    def visit_Text(self, node):  # noqa: N802 - docutils' name
        text = node.astext().replace("\r", "")
        if not self.status.preserve_line_breaks:
            text = text.replace("\n", " ")  # one line per paragraph: a wrapped line never starts a Markdown block
        if self.status.escape_text:
            text = super_escape(text)
        if getattr(self, "proof_starts", False) and text.startswith("Proof."):
            text = "*Proof.*" + text[len("Proof."):]
        self.proof_starts = False
        self.add(text)

    def visit_math_block(self, node):
        self._anchors(node)
        latex = node.astext().strip()
        if node.get("number"):
            latex += f"\n\\tag{{{get_node_equation_number(self.page, node)}}}"
        latex = re.sub(r"\n\s*\n", "\n", latex)  # a blank line would end the formula in a Markdown cell
        if len(self._ctx_queue) > 1:  # in a box (a quote) or a list: see one_line
            self.add(f"$${one_line(latex)}$$", prefix_eol=2, suffix_eol=2)
        else:
            self.add(f"$$\n{latex}\n$$", prefix_eol=2, suffix_eol=2)
        raise nodes.SkipNode

    # ---- links ----
    def _fetch_ref_uri(self, node):
        if node.get("refid"):
            return f"#{node['refid']}"
        uri = node.get("refuri", "")
        if not node.get("internal") and re.match(r"[a-z][a-z0-9+.-]*:", uri):
            return uri  # an external address
        page = posixpath.normpath(posixpath.join(posixpath.dirname(self.docname), uri)) if uri else \
            self.app.builder.get_target_uri(self.docname)
        return self.base_url + page

    @pushing_context
    def visit_reference(self, node):
        self._push_context(WrappedContext("[", f"]({self._fetch_ref_uri(node)})"))

    # ---- boxes: admonitions, theorems, proofs, exercises, solutions ----
    def _quote(self, node, label: str) -> None:
        """A quoted block opened by ``label`` in bold (its title follows the label, in brackets)."""
        self._anchors(node)
        self._push_context(IndentContext("> ", empty=True, params=SubContextParams(2, 2)))
        title = node.children[0] if node.children and isinstance(node.children[0], nodes.title) else None
        self.add(f"**{label}", prefix_eol=1)
        if title is not None and title.children:
            self.add(" (" if label else "")
            for child in title.children:
                child.walkabout(self)
            self.add(")" if label else "")
        self.add("**", suffix_eol=2)

    def _skip_title(self, node) -> None:
        if node.children and isinstance(node.children[0], nodes.title):
            node.children[0]["reader_done"] = True

    def visit_title(self, node):
        if node.get("reader_done"):
            raise nodes.SkipNode
        super().visit_title(node)

    visit_title.__pushing_context__ = True

    def visit_admonition(self, node):
        if "proof" in node.get("classes", []):  # sphinx-proof's proof: its text starts "Proof. "; it ends with ∎
            self.proof_starts = True
            self._push_context(SubContext(SubContextParams(2, 2)))
            return
        self._quote(node, "")
        self._skip_title(node)

    def depart_admonition(self, node):
        if "proof" in node.get("classes", []):
            self.add(" ∎")
        self._pop_context()

    def _named_admonition(self, node):
        """note, warning, tip...: a quote labelled with the kind's name."""
        self._quote(node, type(node).__name__.title())
        self._skip_title(node)

    _named_admonition.__pushing_context__ = True  # its context is popped on departure (sphinx-markdown-builder)
    visit_note = visit_warning = visit_important = visit_tip = visit_hint = _named_admonition
    visit_caution = visit_danger = visit_error = visit_attention = visit_seealso = _named_admonition

    def _proof_label(self, node) -> str:
        from sphinx_proof.nodes import _, get_node_number

        realtype = node.get("realtype", "")
        if isinstance(node, self._proof_nodes()[1]):  # unenumerable
            return _(realtype.title())
        return f"{_(realtype.title())} {get_node_number(self.page, node, node.get('countertype', ''))}"

    @staticmethod
    def _proof_nodes():
        from sphinx_proof import nodes as proof

        return proof.proof_node, proof.unenumerable_node

    def visit_proof_statement(self, node):
        """A sphinx-proof theorem, definition, lemma...: quoted, labelled with its number and its title."""
        label = self._proof_label(node)
        title = node.children[0] if node.children and isinstance(node.children[0], nodes.title) else None
        if title is not None:  # sphinx-proof's title holds "<type> <number> " then "(name)"
            kept = [child for child in title.children if not isinstance(child, nodes.Text)
                    or not re.fullmatch(r"\s*\w+ [\d.]*\s*", child.astext())]
            title.children = [nodes.Text(c.astext().strip(TITLE_BRACKETS)) if isinstance(c, nodes.Text) else c for c in kept]
        self._quote(node, label)
        self._skip_title(node)

    def visit_proof(self, node):
        pass  # sphinx-proof's proof_node holds the proof's admonition (visit_admonition)

    def depart_proof(self, node):
        pass

    def visit_exercise(self, node):
        from sphinx_exercise.utils import get_node_number

        number = get_node_number(self.page, node, "exercise") if node.get("ids") else ""
        label = self.app.config.numfig_format["exercise"] % number if number else "Exercise"
        title = node.children[0]
        extra = [c for c in title.children if not (isinstance(c, nodes.Text) and c.astext().strip() in ("", "Exercise"))]
        title.children = [nodes.Text(c.astext().strip(TITLE_BRACKETS)) if isinstance(c, nodes.Text) else c for c in extra]
        self._quote(node, label)
        self._skip_title(node)

    def _open_details(self, summary: str) -> None:
        self.add(f"<details>\n<summary>{summary}</summary>", prefix_eol=2, suffix_eol=2)

    def visit_solution(self, node):
        self._anchors(node)
        title = node.children[0]
        summary = "".join(f"${c.astext()}$" if isinstance(c, nodes.math) else c.astext() for c in title.findall(
            lambda n: isinstance(n, (nodes.Text, nodes.math)) and not isinstance(n.parent, nodes.math)))
        summary = summary.replace("&", "&amp;").replace("<", "&lt;").strip()
        self.open_solutions.append([summary, False])
        self._open_details(summary)
        self._skip_title(node)

    def depart_solution(self, node):
        self.open_solutions.pop()
        self.add("</details>", prefix_eol=2, suffix_eol=2)

    def depart_proof_statement(self, node):
        self._pop_context()

    depart_exercise = depart_proof_statement

    def dispatch_departure(self, node):
        handler = self._box_handler(node)
        if handler is not None:
            return getattr(self, f"depart_{handler}")(node)
        return super().dispatch_departure(node)

    def _box_handler(self, node) -> str | None:
        from sphinx_exercise.nodes import exercise_enumerable_node, exercise_node, solution_node
        from sphinx_proof import nodes as proof

        if isinstance(node, solution_node):
            return "solution"
        if isinstance(node, (exercise_node, exercise_enumerable_node)):
            return "exercise"
        if isinstance(node, proof.proof_node):
            return "proof"
        if type(node).__module__ == proof.__name__ and isinstance(node, nodes.Admonition):
            return "proof_statement"
        return None



def one_line(latex: str) -> str:
    r"""``latex`` on one line: how a formula inside a quoted box (or a list) is written.

    Jupyter (JupyterLab, Lite, Colab) takes the math out of a Markdown cell's raw text before it reads the
    Markdown, so every line of a multi-line ``$$`` in a quote would reach MathJax with its ``> `` marker. On one
    line, the marker stays before the ``$$``; to TeX a line break is a space, so the formula is the same (its
    ``%`` comments dropped, which would otherwise swallow the rest of it).

    >>> one_line("a &= b \\\\ % first\n c &= d")
    'a &= b \\\\ c &= d'
    """
    return " ".join(re.sub(r"(?<!\\)%.*", "", line).strip() for line in latex.splitlines()).strip()


def super_escape(text: str) -> str:
    """Text escaped for a Markdown cell: sphinx-markdown-builder's escapes, and ``$`` (math to Jupyter), ``<`` and
    ``&`` (HTML)."""
    from sphinx_markdown_builder.escape import escape_markdown_chars

    text = text.replace("&", "&amp;").replace("<", "&lt;")
    return escape_markdown_chars(text).replace("$", "\\$")




# ---- which code cells a reader gets ----
GENERATORS = ("default_rng", "RandomState", "Generator")  # calls that make a random generator
MUTATORS = frozenset({"append", "extend", "insert", "update", "pop", "popitem", "remove", "clear", "setdefault",
                      "sort", "reverse", "fill", "resize", "shuffle", "put", "itemset", "add", "discard"})


def _names(source: str) -> tuple[set[str], set[str], set[str], set[str], set[str]]:
    """What the code of a cell binds, reads, the names whose method it calls (``rng.normal(...)``: a random
    generator it advances), those it binds to a new random generator, and those whose object it changes (an
    item or attribute set, a changing method called); IPython's ``%`` and ``!`` lines left out."""
    import ast
    import symtable

    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    table = symtable.symtable(code, "<cell>", "exec")
    bound = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    read = {s.get_name() for s in table.get_symbols() if s.is_referenced()}

    def nested(scope):
        for child in scope.get_children():
            read.update(s.get_name() for s in child.get_symbols() if s.is_referenced() and s.is_global())
            nested(child)

    nested(table)
    tree = ast.parse(code)
    # a loop variable of the cell's own top-level loop, not read before the loop: the loop's, not read from outside
    for loop in (node for node in tree.body if isinstance(node, ast.For)):
        earlier = {n.id for n in ast.walk(ast.Module(body=tree.body[:tree.body.index(loop)], type_ignores=[]))
                   if isinstance(n, ast.Name)} | {n.id for n in ast.walk(loop.iter) if isinstance(n, ast.Name)}
        read -= {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)} - earlier
    calls = [node.func for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and isinstance(node.func.value, ast.Name)]
    called = {func.value.id for func in calls}
    # an object the cell changes: an item or attribute it sets, a method of a list, dict or array that changes it
    changed = {func.value.id for func in calls if func.attr in MUTATORS} | {
        node.value.id for node in ast.walk(tree) if isinstance(node, (ast.Subscript, ast.Attribute))
        and isinstance(node.ctx, (ast.Store, ast.Del)) and isinstance(node.value, ast.Name)}
    made = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func).endswith(GENERATORS) for target in node.targets
            if isinstance(target, ast.Name)}
    return bound, read, called, made, changed


def fold(cell, outputs: bool) -> None:
    """Fold ``cell``'s code (and its outputs) as JupyterLab, Jupyter Notebook and Colab read it, written as
    JupyterLab writes it (``collapsed`` beside ``outputs_hidden``), so that opening the notebook changes nothing."""
    cell.metadata["jupyter"] = {"source_hidden": True, **({"outputs_hidden": True} if outputs else {})}
    if outputs:
        cell.metadata["collapsed"] = True


def book_internal(cell) -> bool:
    """A cell the page removes (``remove-cell``: the asserts that check the prose, the glue calls), but for the
    install cell (``setup``), which Colab needs."""
    tags = cell.metadata.get("tags", [])
    return "remove-cell" in tags and "setup" not in tags


def cells_left_out(cells) -> tuple[set[int], set[int]]:
    """The code cells of ``cells`` (index: cell) that a reader notebook leaves out, and the book-internal ones it
    must keep because a later cell needs them: one binds a name a later kept cell reads, or changes an object a
    later kept cell uses (sets an item of it, calls a changing method, draws from its random generator: left
    out, the numbers after it would differ).

    >>> from nbformat.v4 import new_code_cell as code
    >>> internal = {"tags": ["remove-cell"]}
    >>> cells = dict(enumerate([code("rng = np.random.default_rng(0)"), code("x = 2", metadata=internal),
    ...                         code("assert x == 2", metadata=internal), code("y = rng.normal()", metadata=internal),
    ...                         code("print(x, rng.normal())")]))
    >>> cells_left_out(cells)
    ({2}, {1, 3})
    """
    names = {index: _names(cell.source) for index, cell in cells.items()}
    generators = set().union(*(made for _, _, _, made, _ in names.values()))
    left_out, needed, live = set(), set(), set()
    for index in sorted(cells, reverse=True):  # backwards: the names read after each cell
        bound, read, called, _, changed = names[index]
        if book_internal(cells[index]) and not (bound & live or (called & generators | changed) & live):
            left_out.add(index)
            continue
        if book_internal(cells[index]):
            needed.add(index)
        live = (live - bound) | read
    return left_out, needed


# ---- the build's events ----
def is_notebook_page(app, docname: str) -> bool:
    from tools.execution import is_notebook_source

    source = Path(app.srcdir) / f"{docname}.md"
    return source.is_file() and is_notebook_source(source)


def reader_notebook_of(app, doctree, docname: str) -> nbformat.NotebookNode:
    """The reader notebook of the notebook page ``docname`` from its resolved ``doctree`` (left unchanged)."""
    from tools.execution import executed_from_cache
    from tools.extensions.translation_fixes import book_language
    from tools.site_outputs import first_picture, in_language, reader_notebook

    source = Path(app.srcdir) / f"{docname}.md"
    executed = executed_from_cache(source)
    if executed is None:
        raise RuntimeError(f"{docname}: the build's execution cache holds no run of {source.name}")
    executed = in_language(executed, book_language(app.config))  # the figures drawn in the page's language
    executed, extras = reader_notebook(executed)  # without the website's static forms and widget views
    code = [cell for cell in executed.cells if cell.cell_type == "code"]
    for extra in extras:  # an interactive figure shows its first state until it runs (then the live widget)
        if extra["html"] is not None:
            code[extra["cell"]].outputs[extra["output"]]["data"] = first_picture(extra["html"])
    lines = executed.metadata.get("source_map", [])
    code_cells, code_lines = {}, {}
    for index, cell in enumerate(executed.cells):
        if cell.cell_type == "code":
            code_cells[index] = nbformat.v4.new_code_cell(cell.source, metadata=cell.metadata, outputs=cell.outputs,
                                                          execution_count=cell.get("execution_count"))
            code_lines[index] = lines[index] if index < len(lines) else 0
    left_out, needed = cells_left_out(code_cells)
    for index in left_out:
        del code_cells[index], code_lines[index]
    for index, cell in code_cells.items():
        if index in needed:  # book-internal, but a later cell reads what it computes: folded, its glue records gone
            cell.outputs = []
            fold(cell, outputs=False)
        elif "hide-input" in cell.metadata.get("tags", []):
            fold(cell, outputs=False)
    translator = ReaderMarkdown(doctree.deepcopy(), app, docname, code_cells, code_lines)
    translator.document.walkabout(translator)
    cells = translator.finish()
    name_cells(cells)
    ids = cell_ids(cells)
    for cell in cells:  # a link to an anchor of the page opens the cell that holds it
        if cell.cell_type == "markdown":
            cell.source = SAME_NOTEBOOK_LINK.sub(lambda match: cell_link(match, "", ids), cell.source)
    metadata = {"kernelspec": KERNELSPEC, "language_info": executed.metadata["language_info"]}
    notebook = nbformat.v4.new_notebook(cells=cells, metadata=metadata)
    nbformat.validate(notebook)
    return notebook


def write_reader_notebook(app, doctree, docname: str) -> None:
    if app.builder.format != "html" or not is_notebook_page(app, docname):
        return
    notebook = reader_notebook_of(app, doctree, docname)
    found = notebook_raw_myst(notebook)
    if found:
        logger.warning(f"the reader notebook of {docname} shows raw MyST: {found[:5]}", location=docname)
    path = reader_path(app, docname)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(notebook), encoding="utf-8")


def pages_without_reader_notebook(app, env, added, changed, removed) -> list[str]:
    """Pages to read again: notebook pages whose reader notebook is missing (an earlier build wrote the page)."""
    if app.builder.format != "html":
        return []
    return [docname for docname in env.found_docs - set(added) - set(changed)
            if is_notebook_page(app, docname) and not reader_path(app, docname).is_file()]


LINK = re.compile(r"\]\((?P<url>[^)\s]+)\)")
SAME_NOTEBOOK_LINK = re.compile(r"\]\((?P<url>#[^)\s]+)\)")


def name_cells(cells) -> None:
    """Give each cell a stable id (the same page gives the same notebook): a cell that starts with an anchor is
    named after it when the anchor is a valid cell id (``thm-sdpa-convex``), any other after its number and text."""
    taken = set()
    for number, cell in enumerate(cells):
        first = ANCHOR.match(cell.source) if cell.cell_type == "markdown" else None
        cell.id = first.group(1) if first and CELL_ID.fullmatch(first.group(1)) else \
            hashlib.sha1(f"{number}:{cell.source}".encode()).hexdigest()[:8]
        while cell.id in taken:
            cell.id = hashlib.sha1(f"{cell.id}:{number}".encode()).hexdigest()[:8]
        taken.add(cell.id)


def cell_ids(cells) -> dict[str, str]:
    """The id of the cell holding each anchor of ``cells``: ``{anchor: cell id}``.

    JupyterLab looks a link's fragment up as the notebook opens: an ``<a id>`` in a Markdown cell it has not yet
    rendered (a long notebook renders the cells in view) is not found, and the notebook stays at its top; a
    ``#cell-id=<id>`` fragment is found in the notebook's model, and the cell scrolled into view.

    >>> from nbformat.v4 import new_markdown_cell as markdown
    >>> cells = [markdown("# Top"), markdown('<a id="thm-a"></a>\\n\\n> **Theorem 1.1**'), markdown('<a id="x/y"></a>')]
    >>> name_cells(cells)
    >>> [cell.id for cell in cells][1], cell_ids(cells)["thm-a"]
    ('thm-a', 'thm-a')
    >>> cell_ids(cells)["x/y"] == cells[2].id != "x/y"
    True
    """
    return {anchor: cell.id for cell in cells if cell.cell_type == "markdown" for anchor in ANCHOR.findall(cell.source)}


def cell_link(match: re.Match, target: str, ids: dict[str, str]) -> str:
    """The link of ``match`` (``](#anchor)``) to ``target`` (a notebook's path, or "" for the same notebook) and
    the cell holding the anchor (``ids``: :func:`cell_ids` of the target), as JupyterLab opens it."""
    anchor = match.group("url").partition("#")[2]
    if anchor not in ids:
        return f"]({target}{'#' + anchor if anchor else ''})"
    return f"]({target}#cell-id={ids[anchor]})"


def localised(notebook, docname: str, placed: dict[str, str], base_url: str,
              notebooks: dict[str, nbformat.NotebookNode]) -> nbformat.NotebookNode:
    """A copy of ``notebook`` (the reader notebook of ``docname``) for a collection of notebooks that holds each
    page of ``placed`` at the path it gives (``chapters/masks.ipynb``): a link to one of them becomes relative,
    to the cell of ``notebooks[page]`` that holds its anchor (``masks.ipynb#cell-id=def-masks-masked-attention``,
    :func:`cell_ids`); a link to any other page stays the website's address."""
    here = posixpath.dirname(placed[docname])
    pages = {f"{base_url}{page}.html": page for page in placed}
    ids = {page: cell_ids(notebooks[page].cells) for page in placed}

    def relative(match: re.Match) -> str:
        url = match.group("url").partition("#")[0]
        if url not in pages:
            return match.group(0)
        page = pages[url]
        return cell_link(match, posixpath.relpath(placed[page], here or "."), ids[page])

    copy = nbformat.from_dict(json.loads(json.dumps(notebook)))
    for cell in copy.cells:
        if cell.cell_type == "markdown":
            cell.source = LINK.sub(relative, cell.source)
    return copy


def reader_notebooks(app) -> dict[str, nbformat.NotebookNode]:
    """The reader notebook of every notebook page of the book, by docname; a missing one stops the build."""
    pages = sorted(docname for docname in app.env.found_docs if is_notebook_page(app, docname))
    missing = [docname for docname in pages if not reader_path(app, docname).is_file()]
    if missing:
        raise RuntimeError(f"no reader notebook was written for {missing}: build again")
    return {docname: nbformat.read(reader_path(app, docname), as_version=4) for docname in pages}


def lite_name(docname: str, folder: str = "") -> str:
    """The file name of a chapter in the lite site (jupyterlite-sphinx puts every file at its root); another
    language's chapter is named after its site folder: ``masks.ipynb``, ``masks.zh-Hant.ipynb``."""
    language = f".{folder.strip('/')}" if folder else ""
    return f"{Path(docname).name}{language}.ipynb"


def hand_out(app, exception) -> None:
    """Every page's .ipynb download becomes its reader notebook; the chapters' lite copies are written."""
    if exception is not None or app.builder.format != "html":
        return
    notebooks = reader_notebooks(app)
    base_url = app.config.html_baseurl.rstrip("/") + "/"
    for docname, notebook in notebooks.items():
        download = Path(app.outdir) / "_sources" / f"{docname}.ipynb"
        download.parent.mkdir(parents=True, exist_ok=True)
        download.write_text(nbformat.writes(notebook), encoding="utf-8")
    from tools.extensions.languages import site_folder

    lite = {docname: lite_name(docname, site_folder(app)) for docname in notebooks if docname.startswith(LITE_PAGES)}
    lite_folder = reader_folder(app.config) / LITE
    lite_folder.mkdir(parents=True, exist_ok=True)
    for stale in lite_folder.glob("*.ipynb"):
        stale.unlink()
    for docname, name in lite.items():
        notebook = localised(notebooks[docname], docname, lite, base_url, notebooks)
        notebook.metadata["kernelspec"] = LITE_KERNELSPEC
        (lite_folder / name).write_text(nbformat.writes(notebook), encoding="utf-8")


LAUNCH_BRANCH_CONFIG = "reader_notebooks_launch_branch"  # sphinx.config of _config.yml


def book_config() -> dict:
    import yaml

    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def launch_branch() -> str:
    """The branch of the repository that Colab and Binder open (``make publish`` writes it, tools/publish.py)."""
    return book_config()["sphinx"]["config"][LAUNCH_BRANCH_CONFIG]


def launch_on_reader_branch(app, pagename, templatename, context, doctree) -> None:
    """Point the page's Colab and Binder buttons at the launch branch, which holds the reader notebooks, instead
    of the source branch (``repository.branch``), whose paired notebooks are MyST."""
    from tools.extensions.languages import site_folder

    source, target = app.config.html_theme_options.get("repository_branch", "main"), app.config[LAUNCH_BRANCH_CONFIG]
    folder = site_folder(app)
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            url = button.get("url", "")
            if url.startswith("https://mybinder.org/") or "colab.research.google.com" in url:
                url = url.replace(f"/{source}?", f"/{target}?").replace(f"/blob/{source}/", f"/blob/{target}/")
                if folder:  # another language's notebooks lie in its folder of the branch (tools/publish.py)
                    url = url.replace("urlpath=tree/", f"urlpath=tree/{folder}").replace(f"/blob/{target}/",
                                                                                          f"/blob/{target}/{folder}")
                button["url"] = url


def setup(app):
    app.add_config_value(LAUNCH_BRANCH_CONFIG, "notebooks", "html", str)
    app.connect("html-page-context", launch_on_reader_branch, priority=600)  # after the theme's buttons (501)
    app.setup_extension("sphinx_markdown_builder")  # its config values, which its translator reads
    app.connect("doctree-resolved", write_reader_notebook)
    app.connect("env-get-outdated", pages_without_reader_notebook)
    app.connect("build-finished", hand_out, priority=400)  # before jupyterlite-sphinx's lite build (500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
