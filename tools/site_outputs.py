"""What the website takes from a notebook's run beyond its paired .ipynb, kept beside it in the repository.

``make notebooks`` executes each notebook once, with the book's environment (tools/execution.py:
``book_kernel_environment``): the interactive figures then also draw every state the website shows
without a kernel (attnbook.book.static_widgets), and every glued value is recorded unrounded. The
paired .ipynb keeps what a reader's Jupyter shows; :func:`split` takes out the rest, and :func:`save`
keeps it in ``web/site-outputs/``:

* ``<notebook>.json``: the digest of the source and the package the run was made from
  (:func:`tools.execution.source_digest`), the HTML of each interactive figure's static form with its
  pictures replaced by ``state:<name>`` references, and the run's glue record;
* ``states/<name>.png``: each state's picture once, named by its content (as the site names it,
  :func:`tools.extensions.static_figures.state_file_name`), so a regeneration that changes one picture
  adds one file.

A build (:func:`tools.execution.fill_cache`) then :func:`load`\\ s a notebook whose outputs are those of
the current source and package instead of executing it: a fresh clone builds the book with no kernel.
A notebook whose source or package changed since (its digest differs, or its pair is stale) is executed
as before, so the site is never built from another version's outputs; tests/test_pairing.py fails
until ``make notebooks`` has brought them up to date, and strict nbval re-executes every .ipynb in CI.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import nbformat

from tools import ROOT
from tools.extensions.static_figures import DATA_URL, state_file_name

SITE_OUTPUTS = ROOT / "web" / "site-outputs"
STATE_REFERENCE = re.compile(r"state:([0-9a-f]{20}\.png)")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
STATIC_FORM = 'class="attn-static-widget"'
# what stands in for a widget view in the book's notebook: the website does not show widget views
# (_config.yml's mime priority), the PDF renders them as nothing, and their model ids change every run
VIEW_PLACEHOLDER = {"model_id": "", "version_major": 2, "version_minor": 0}


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
    shows the live widget), no execution metadata, and its consecutive stream chunks joined. ``executed``
    is changed in place and returned with the website's part: one entry per output that held a widget
    view, ``{"cell": n, "output": k, "html": ...}`` (n counts code cells from 0; ``html`` is the static
    form, or None).
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
            if data.pop(WIDGET_VIEW, None) is None:
                continue
            html = data.get("text/html", "")
            html = "".join(html) if isinstance(html, list) else html
            static = STATIC_FORM in html
            if static:
                data.pop("text/html")
            extras.append({"cell": number, "output": index, "html": html if static else None})
    return executed, extras


def book_notebook(reader: nbformat.NotebookNode, extras: list[dict]) -> nbformat.NotebookNode:
    """The inverse of :func:`reader_notebook` for the book: the reader's notebook with each widget view
    (a placeholder, :data:`VIEW_PLACEHOLDER`) and each static form put back."""
    code = [cell for cell in reader.cells if cell.cell_type == "code"]
    for extra in extras:
        data = code[extra["cell"]].outputs[extra["output"]].setdefault("data", {})
        data[WIDGET_VIEW] = dict(VIEW_PLACEHOLDER)
        if extra["html"] is not None:
            data["text/html"] = extra["html"]
    return reader


def _path(stem: str) -> Path:
    return SITE_OUTPUTS / f"{stem}.json"


def save(stem: str, digest: str, extras: list[dict], glue_record: str) -> Path:
    """Keep the website's part of a run (``extras`` from :func:`reader_notebook`, the glue record's text)
    as ``<stem>.json``, its pictures under ``states/``; returns the JSON's path."""
    states = SITE_OUTPUTS / "states"
    states.mkdir(parents=True, exist_ok=True)

    def to_reference(match: re.Match) -> str:
        data = base64.b64decode(match.group(1))
        name = state_file_name(data)
        if not (states / name).exists():
            (states / name).write_bytes(data)
        return f"state:{name}"

    kept = [{**extra, "html": None if extra["html"] is None else DATA_URL.sub(to_reference, extra["html"])}
            for extra in extras]
    glue = [json.loads(line) for line in glue_record.splitlines() if line.strip()]
    path = _path(stem)
    path.write_text(json.dumps({"source_and_package": digest, "outputs": kept, "glue": glue},
                               indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def load(stem: str, digest: str) -> tuple[list[dict], str] | None:
    """The website's part of the run of the source and package ``digest`` names, as :func:`save` kept it:
    (extras with their pictures inlined again, the glue record's text), or None when none was kept for them."""
    path = _path(stem)
    if not path.exists():
        return None
    kept = json.loads(path.read_text(encoding="utf-8"))
    if kept["source_and_package"] != digest:
        return None
    states = SITE_OUTPUTS / "states"

    def inline(match: re.Match) -> str:
        return "data:image/png;base64," + base64.b64encode((states / match.group(1)).read_bytes()).decode("ascii")

    extras = [{**extra, "html": None if extra["html"] is None else STATE_REFERENCE.sub(inline, extra["html"])}
              for extra in kept["outputs"]]
    glue = "".join(json.dumps(entry) + "\n" for entry in kept["glue"])
    return extras, glue


def recorded_digest(stem: str) -> str | None:
    """The digest of the source and package whose run ``<stem>.json`` keeps, or None when there is none."""
    path = _path(stem)
    return json.loads(path.read_text(encoding="utf-8"))["source_and_package"] if path.exists() else None


def referenced_states() -> set[str]:
    """The picture files the kept outputs refer to."""
    return {name for path in SITE_OUTPUTS.glob("*.json")
            for name in STATE_REFERENCE.findall(path.read_text(encoding="utf-8"))}


def prune_states() -> int:
    """Delete the pictures no kept output refers to any more; returns how many."""
    referenced = referenced_states()
    unused = [path for path in (SITE_OUTPUTS / "states").glob("*.png") if path.name not in referenced]
    for path in unused:
        path.unlink()
    return len(unused)
