"""A local Sphinx extension with fixes the PDF (LaTeX) build of the book needs.

* sphinx-proof and sphinx-exercise write their theorems, proofs, exercises and solutions as LaTeX
  ``sphinxadmonition`` boxes, but unlike Sphinx's own admonitions they do not tell the LaTeX writer
  that it is inside a box. A figure made by a code cell in a solution then comes out as a floating
  ``figure`` inside the box, and LaTeX stops with "Not in outer par mode". Their LaTeX visitors are
  wrapped so that, inside these boxes, figures are placed where they stand (``[H]``), as Sphinx does
  for its own admonitions.
* sphinx-exercise labels a numbered exercise ``exercise:<label>`` and rewrites references to it from
  the same chapter only; a reference from another chapter becomes Sphinx's numbered reference to
  ``<chapter>:<label>``, which nothing defines, so the PDF printed "Exercise ??". Each numbered
  exercise also gets that label, carrying the exercise's number (the one the HTML shows).
* sphinx-jupyterbook-latex numbers figures, theorems and exercises by section (Exercise 2.7.5) when
  the toc has parts; the website numbers them by chapter (Exercise 2.5). The book's own setting is
  put back, so that the PDF and the website give every exercise and theorem the same number.
* A saved ipywidget has no printed form. _config.yml makes myst-nb pick the widget view over its
  text form (``VBox(children=(HBox(...``) for LaTeX; the view is HTML, which LaTeX drops, so it is
  replaced here by a short note telling the reader where the interactive figure works.
* The cheat sheet appendix prints on one page: its chapter is set in landscape, its tables in three columns
  of small type (:class:`OnePageCheatSheet`), as the website prints it (web/src/book.css).
"""

from __future__ import annotations

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

from sphinx_exercise import nodes as exercise_nodes
from sphinx_proof import nodes as proof_nodes

# the LaTeX visitors that open a sphinxadmonition box
BOX_VISITORS = {
    proof_nodes.visit_enumerable_node,
    proof_nodes.visit_unenumerable_node,
    exercise_nodes.visit_exercise_node,
    exercise_nodes.visit_exercise_enumerable_node,
    exercise_nodes.visit_solution_node,
}


def without_floats(visit, depart):
    """Return visit and depart functions that also keep figures from floating inside the box."""

    def visit_box(translator, node):
        translator.no_latex_floats += 1
        visit(translator, node)

    def depart_box(translator, node):
        depart(translator, node)
        translator.no_latex_floats -= 1

    return visit_box, depart_box


def with_chapter_label(visit):
    """Return a visit function that also defines ``<chapter>:<label>`` with the exercise's number."""

    def visit_exercise(translator, node):
        label = node.get("label", "")
        entry = translator.builder.env.sphinx_exercise_registry.get(label)
        numbers = translator.builder.env.toc_fignumbers.get(entry["docname"], {}) if entry else {}
        number = ".".join(map(str, numbers.get("exercise", {}).get(node["ids"][0], ())))
        if number:  # before the box: the text right after its start is the box's title
            target = translator.idescape(f"{entry['docname']}:{label}")
            translator.body.append(
                rf"\phantomsection{{\expandafter\def\csname @currentlabel\endcsname{{{number}}}"
                rf"\label{{{target}}}}}"
            )
        visit(translator, node)

    return visit_exercise


def remember_numbering_depth(app, config) -> None:
    """Keep the book's numfig_secnum_depth before sphinx-jupyterbook-latex changes it."""
    app.book_numfig_secnum_depth = config.numfig_secnum_depth


def fix_latex_writer(app) -> None:
    """For LaTeX builds: the book's numbering depth, and the wrapped box visitors (see above)."""
    if app.builder.format != "latex":
        return
    app.config.numfig_secnum_depth = app.book_numfig_secnum_depth
    handlers = app.registry.translation_handlers.get("latex", {})
    for node_name, (visit, depart) in list(handlers.items()):
        if visit not in BOX_VISITORS:
            continue
        if visit is exercise_nodes.visit_exercise_enumerable_node:
            visit = with_chapter_label(visit)
        handlers[node_name] = without_floats(visit, depart)


WIDGET_VIEW_START = '<script type="application/vnd.jupyter.widget-view+json">'
WIDGET_NOTE = (
    "[Interactive figure: its controls work on the book's website and in the notebook "
    "(Binder, Colab, JupyterLite or a local Jupyter); the code above builds it.]"
)


class WidgetViewsToNotes(SphinxPostTransform):
    """Replace each saved widget view, which only a browser can show, by a printed note."""

    default_priority = 900
    formats = ("latex",)

    def run(self, **kwargs) -> None:
        for raw in list(self.document.findall(nodes.raw)):
            if raw.get("format") == "html" and raw.astext().startswith(WIDGET_VIEW_START):
                raw.replace_self(nodes.paragraph("", "", nodes.emphasis(WIDGET_NOTE, WIDGET_NOTE)))


CHEAT_SHEET = "cheat-sheet"  # the cheat sheet's label (chapters/cheat_sheet.md): its section's id


class OnePageCheatSheet(SphinxPostTransform):
    """The cheat sheet on one landscape page: its chapter in ``landscape`` with a compact head, its tables in
    three columns of small type (tools/extensions/cheatsheet.sty), as its page prints from the website
    (web/src/book.css)."""

    default_priority = 900
    formats = ("latex",)

    def run(self, **kwargs) -> None:
        for section in list(self.document.findall(nodes.section)):
            if CHEAT_SHEET not in section["ids"]:
                continue
            begin = nodes.raw("", "\\begin{landscape}\\cheatsheetcompact\n", format="latex")
            section.parent.insert(section.parent.index(section), begin)
            section.insert(1, nodes.raw("", "\\begin{cheatsheetcolumns}\n", format="latex"))
            section.append(nodes.raw("", "\\end{cheatsheetcolumns}\n", format="latex"))
            section.parent.insert(section.parent.index(section) + 1,
                                  nodes.raw("", "\\end{landscape}\n", format="latex"))


def setup(app):
    app.add_latex_package("cheatsheet")  # tools/extensions/cheatsheet.sty (latex_additional_files in _config.yml)
    app.add_post_transform(OnePageCheatSheet)
    # sphinx-jupyterbook-latex is loaded after this extension: run before (config) and after (builder) it
    app.connect("config-inited", remember_numbering_depth, priority=100)
    app.connect("builder-inited", fix_latex_writer, priority=900)
    app.add_post_transform(WidgetViewsToNotes)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
