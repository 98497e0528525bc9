"""Glued numbers survive translation: a local Sphinx extension for the book's other languages (issue #28).

Sphinx translates a page by parsing each translated message again, on its own, into a fresh document
(``sphinx.transforms.i18n.publish_msgstr``). myst-nb's ``{glue:text}`key``` role looks the key up in the
notebook the *document* was made from (``document["nb_renderer"]``), which the fresh document lacks, so
every glued number of a translated paragraph renders empty, with the warning "No key ... found in glue
data for this document" (reported upstream: ``upstream/myst-nb-glue-in-translated-messages.md``).

myst-nb's cross-document form, ``{glue:text}`page.md::key:format```, does not need the renderer: it
leaves a pending reference that a post-transform fills from the glue cache the notebook's reading wrote
(``<docname>.glue.json``). So, before Sphinx parses a translated message, every local glue role in it is
rewritten to that form with the page's own file name: the translator writes ``{glue:text}`key``` as the
English does, and the number on the translated page is the English page's, from the same execution.

The English build never parses a translated message, so the extension changes nothing there.
"""

from __future__ import annotations

import re
from pathlib import PurePath

from sphinx.transforms import i18n

__all__ = ["own_page_glue", "setup"]

# {glue:text}`key` or {glue:text}`key:format`, not already `page::key`
_LOCAL_GLUE = re.compile(r"\{glue:text\}`(?P<key>[^`:]+)(?P<format>:[^`:]*)?`")


def own_page_glue(message: str, page: str) -> str:
    """The translated ``message`` with each local ``{glue:text}`` role pointing at its own ``page`` file.

    >>> own_page_glue("n = {glue:text}`n`, p = {glue:text}`p:.2f`, q = {glue:text}`b.md::q:d`", "a.md")
    'n = {glue:text}`a.md::n:s`, p = {glue:text}`a.md::p:.2f`, q = {glue:text}`b.md::q:d`'
    """
    return _LOCAL_GLUE.sub(lambda m: f"{{glue:text}}`{page}::{m['key']}{m['format'] or ':s'}`", message)


def _publishing_own_page_glue(publish):
    def publish_msgstr(app, source, source_path, source_line, config, settings):
        return publish(app, own_page_glue(source, PurePath(source_path).name), source_path, source_line,
                       config, settings)
    publish_msgstr.__wrapped__ = publish
    return publish_msgstr


def setup(app):
    if not hasattr(i18n.publish_msgstr, "__wrapped__"):  # once per process, however many builds
        i18n.publish_msgstr = _publishing_own_page_glue(i18n.publish_msgstr)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
