"""``myst_nb.glue`` for the JupyterLite kernel, where myst-nb itself (Sphinx, docutils, ...) cannot be installed.

The chapters call ``glue(name, value, display=False)`` so that the book build can quote computed values in
the prose. In a notebook, myst-nb's ``glue`` shows the value's display data (``display=True``) or keeps it
under prefixed MIME types that no front end renders (``display=False``); this stand-in does the same with
IPython's display machinery, so a chapter's cells run unchanged in the browser.
"""

from __future__ import annotations

from typing import Any

from IPython.core.formatters import format_display_data
from IPython.display import display as show

#: the MIME-type prefix of values glued with display=False (the book build reads them; readers don't see them)
HIDDEN_PREFIX = "application/papermill.record/"


def glue(name: str, variable: Any, display: bool = True) -> None:
    """Show `variable` (or keep it hidden, `display=False`) as output tagged with `name`."""
    data, metadata = format_display_data(variable)
    prefix = "" if display else HIDDEN_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    show({prefix + mime: value for mime, value in data.items()}, raw=True, metadata=metadata)
