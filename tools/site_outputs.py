"""What one run of a notebook gives each of its readers: the website, a reader's Jupyter and nbval.

Every run of a notebook for the book (``make notebooks``, and the builds' own runs, tools/execution.py) is
made with the book's environment (``book_kernel_environment``): the interactive figures then also draw every
state the website shows without a kernel (attnbook.book.static_widgets), and every glued value is recorded
unrounded. From that run:

* :func:`reader_notebook` takes out what only the website needs (each figure's static form, the widget views)
  and leaves what a reader's Jupyter shows: the build's execution cache keeps the run whole
  (:func:`book_notebook` puts the website's part back), and the notebooks handed out are written from it
  (tools/extensions/reader_notebooks.py);
* :func:`nbval_reference` is what the paired ``.ipynb`` keeps, the reference outputs strict nbval compares:
  the reader's notebook without the pictures and their metadata, which nbval's comparison never reads. The
  repository so carries no rendered picture: the builds draw them again (tools/execution.py).
"""

from __future__ import annotations

import copy
import html
import re

import nbformat

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# each figure drawn in the book's other languages (attnbook.figures.languages.MIME, not imported: no numpy here)
TRANSLATIONS = "application/vnd.attnbook.translations+json"
STATIC_FORM = 'class="attn-static-widget"'
# what stands in for a widget view in the book's notebook: the website does not show widget views
# (_config.yml's mime priority), the PDF renders them as nothing, and their model ids change every run
VIEW_PLACEHOLDER = {"model_id": "", "version_major": 2, "version_minor": 0}


# the picture a static form opens with (attnbook.book.static_widgets._page_html writes it)
FIRST_PICTURE = re.compile(r'<img class="attn-static-picture" src="data:(?P<mime>[\w.+/-]+);base64,(?P<data>[^"]+)"'
                           r' alt="(?P<alt>[^"]*)"')


def first_picture(static_form: str) -> dict[str, str]:
    """The picture of an interactive figure's first state, from its static form, as a Jupyter MIME bundle:
    ``{image type: base64 data, "text/plain": its alt text}`` (what a notebook shows before the figure runs).

    >>> first_picture('<div class="attn-static-widget"><img class="attn-static-picture" '
    ...               'src="data:image/png;base64,iVBO" alt="3 dots &amp; a line" style="max-width: 100%">')
    {'image/png': 'iVBO', 'text/plain': '3 dots & a line'}
    """
    match = FIRST_PICTURE.search(static_form)
    if match is None:
        raise ValueError("the static form holds no picture of its first state")
    return {match["mime"]: html.unescape(match["data"]), "text/plain": html.unescape(match["alt"])}


def merge_streams(outputs: list) -> list:
    """Join consecutive stdout (or stderr) chunks: how the kernel splits them depends on timing."""
    merged: list = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (output.output_type == "stream" and previous is not None
                and previous.output_type == "stream" and previous.name == output.name):
            previous.text += output.text
        else:
            merged.append(output)
    return merged


def reader_notebook(executed: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, list[dict]]:
    """Split a book run into the notebook a reader's Jupyter shows and what only the website needs.

    The reader's notebook has no widget state or views (fresh random model ids on every run would make
    git noise), no precomputed static form of an interactive figure (every state's picture: Jupyter
    shows the live widget), no drawing in another language (:func:`in_language` puts a language's in
    place first), no execution metadata, and its consecutive stream chunks joined. ``executed`` is changed
    in place and returned with the website's part: one entry per output that held a widget view or drawings
    in other languages, ``{"cell": n, "output": k, "html": ..., "translations": ...}`` (n counts code cells
    from 0; ``html`` is the static form or None, ``translations`` the drawings or None).
    """
    executed.metadata.pop("widgets", None)
    extras = []
    for cell in executed.cells:
        cell.metadata.pop("execution", None)
    code = [cell for cell in executed.cells if cell.cell_type == "code"]
    for number, cell in enumerate(code):
        cell.outputs = merge_streams(cell.outputs)
        for index, output in enumerate(cell.outputs):
            data = output.get("data", {})
            translations = data.pop(TRANSLATIONS, None)
            view = data.pop(WIDGET_VIEW, None)
            if view is None and translations is None:
                continue
            html = data.get("text/html", "")
            html = "".join(html) if isinstance(html, list) else html
            static = view is not None and STATIC_FORM in html
            if static:
                data.pop("text/html")
            extras.append({"cell": number, "output": index, "html": html if static else None,
                           "view": view is not None, "translations": translations})
    return executed, extras


def book_notebook(reader: nbformat.NotebookNode, extras: list[dict]) -> nbformat.NotebookNode:
    """The inverse of :func:`reader_notebook` for the book: the reader's notebook with each widget view
    (a placeholder, :data:`VIEW_PLACEHOLDER`), each static form and each output's drawings in other languages put back."""
    code = [cell for cell in reader.cells if cell.cell_type == "code"]
    for extra in extras:
        data = code[extra["cell"]].outputs[extra["output"]].setdefault("data", {})
        if extra["view"]:
            data[WIDGET_VIEW] = dict(VIEW_PLACEHOLDER)
        if extra["html"] is not None:
            data["text/html"] = extra["html"]
        if extra["translations"] is not None:
            data[TRANSLATIONS] = extra["translations"]
    return reader


def in_language(executed: nbformat.NotebookNode, language: str | None) -> nbformat.NotebookNode:
    """``executed`` (a book run, changed in place) as the pages in ``language`` show it: each output that was drawn
    in that language holds that drawing (its picture, its static page) instead of the English one; no output keeps
    the drawings of any language (``language`` None: the English book)."""
    for cell in executed.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            entry = data.pop(TRANSLATIONS, None)
            if entry is not None and language is not None:
                data.update(entry["languages"].get(language, {}))
    return executed


def translation_messages(executed: nbformat.NotebookNode) -> set[str]:
    """Every message the figures of a book run looked up in the catalogs of the other languages."""
    return {message for cell in executed.cells for output in cell.get("outputs", [])
            for message in output.get("data", {}).get(TRANSLATIONS, {}).get("messages", [])}


# what nbval never compares (nbval 0.11 skips these keys of an output unless run with --nbdime, which the book is
# not; the pictures' metadata sits under "metadata", which it always skips): left out of the paired .ipynb
PICTURES = ("image/png", "image/jpeg")  # not SVG: nbval compares it as text


def nbval_reference(reader: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of the reader's notebook for the paired ``.ipynb``: every output kept, but the pictures and the
    metadata of the outputs that held one (what strict nbval compares is unchanged)."""
    paired = copy.deepcopy(reader)
    for cell in paired.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if any(key in data for key in PICTURES):
                for key in PICTURES:
                    data.pop(key, None)
                output["metadata"] = {}
    return paired
