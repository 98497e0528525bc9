"""A local Sphinx extension with fixes the book needs on top of Jupyter Book 1.

* sphinx-thebe registers its inline configuration script again whenever Sphinx re-reads the
  environment, so pages can carry ``const THEBE_JS_URL = ...`` twice, which the browser reports as
  "Identifier 'THEBE_JS_URL' has already been declared". Identical script entries are dropped.
"""

from __future__ import annotations


def _script_key(script) -> tuple:
    filename = getattr(script, "filename", script) or ""  # inline scripts: None or ""
    attributes = getattr(script, "attributes", {}) or {}
    return (str(filename), tuple(sorted((k, str(v)) for k, v in attributes.items())))


def drop_duplicate_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple] = set()
    unique = []
    for script in scripts:
        key = _script_key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app):
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
