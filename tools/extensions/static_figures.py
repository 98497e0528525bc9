"""A local Sphinx extension: the book's interactive figures on the static website (attnbook.book.static_widgets).

* Each figure's precomputed states arrive as data URLs inside the page. On the website they are
  written once to ``_images/static-figures/<hash>.png`` and the page refers to those files, so a
  reader downloads only the states they look at (the JSON holds their addresses, not their bytes).
* The page that shows a figure loads web/src/static-widgets.js (a few lines, vendored as
  ``_static/static-widgets.js``); other pages load nothing for it.
* The website shows no ipywidgets view (_config.yml's mime priority), so myst-nb's saved widget state
  (a large JSON of every widget model) is of no use there and is dropped from the page.
* The page's download button offers its reader notebook (tools/extensions/reader_notebooks.py), which
  has no static form: it shows the picture of the figure's first state until it runs, then the live widget.
"""

from __future__ import annotations

import base64
import hashlib
import posixpath
import re
from pathlib import Path


FIGURE = re.compile(r'<div class="attn-static-widget".*?</script></div>', re.S)
DATA_URL = re.compile(r"data:image/png;base64,([A-Za-z0-9+/=]+)")
IMAGE_FOLDER = "_images/static-figures"
SCRIPT = "static-widgets.js"


def state_file_name(data: bytes) -> str:
    """The file name of a state's picture (PNG bytes ``data``): named by its content, so each is stored once."""
    return hashlib.sha256(data).hexdigest()[:20] + ".png"


def _drop_widget_state(app, pagename: str) -> None:
    metadata = getattr(app.env, "nb_metadata", {}).get(pagename, {})
    js_files = metadata.get("js_files", {})
    for key in [k for k in js_files if k.startswith("ipywidgets")]:
        del js_files[key]


def static_figures(app, pagename, templatename, context, doctree) -> None:
    if app.builder.format != "html":
        return
    _drop_widget_state(app, pagename)
    body = context.get("body") or ""
    if 'class="attn-static-widget"' not in body:
        return
    folder = Path(app.outdir) / IMAGE_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    prefix = posixpath.relpath(IMAGE_FOLDER, posixpath.dirname(pagename) or ".")

    def to_file(match: re.Match) -> str:
        data = base64.b64decode(match.group(1))
        name = state_file_name(data)
        target = folder / name
        if not target.exists():
            target.write_bytes(data)
        return f"{prefix}/{name}"

    context["body"] = FIGURE.sub(lambda figure: DATA_URL.sub(to_file, figure.group(0)), body)
    app.add_js_file(SCRIPT, defer="defer")


def setup(app):
    # before myst-nb's own html-page-context handler (priority 500), which adds the saved widget state
    app.connect("html-page-context", static_figures, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
