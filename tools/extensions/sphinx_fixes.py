"""A local Sphinx extension with fixes the book needs on top of Jupyter Book 1.

* sphinx-thebe registers its inline configuration script again whenever Sphinx re-reads the
  environment, so pages can carry ``const THEBE_JS_URL = ...`` twice, which the browser reports as
  "Identifier 'THEBE_JS_URL' has already been declared". Identical script entries are dropped.
* docutils writes a bibliography as ``<div role="list">`` whose entries have ``role="doc-biblioentry"``,
  a role ARIA 1.3 deprecates; a list must hold list items, so axe-core reports the page as critical
  (aria-required-children). The entries are given ``role="listitem"`` instead.
* ``sitemap.xml`` at the site's root lists every page of the book under ``html_baseurl`` (``html.baseurl``
  in _config.yml, the GitHub Pages address), the same addresses as the pages' ``<link rel="canonical">``,
  which the theme writes when ``html_baseurl`` is set.
* The pydata theme's layout loads ``scripts/fontawesome.js`` (1.4 MiB, the heaviest file of every page)
  to turn its ``<i class="fa-...">`` icons into inline SVG; its stylesheet already draws the same icons
  with the Font Awesome web fonts, so the script does nothing a reader sees. Its tag is removed from
  the built pages (the layout writes it, so no Sphinx event can drop it before).
* A chapter's figures are most of what its page weighs, and a reader sees them one screen at a time:
  every ``<img>`` of a page's body is given ``loading="lazy"``, so the browser fetches each picture as
  it comes near the screen rather than all of them before the page has loaded.
* myst-nb reads a page's outputs from the execution cache only when Sphinx reads the page, and Sphinx reads
  again only the pages whose source changed; after a change of the package (or of the figures' catalogs) the
  cache holds new outputs (tools.execution.open_cache), so every page is read again when the package's hash
  differs from the one the environment was read with. Otherwise a build after ``make pdf`` showed the old outputs.
"""

from __future__ import annotations

import re
from pathlib import Path
from xml.sax.saxutils import escape


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


BIBLIOGRAPHY_ENTRY_ROLE = 'role="doc-biblioentry"'


def bibliography_entries_as_list_items(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body")
    if body and BIBLIOGRAPHY_ENTRY_ROLE in body:
        context["body"] = body.replace(BIBLIOGRAPHY_ENTRY_ROLE, 'role="listitem"')


SITEMAP = "sitemap.xml"
SITEMAP_NAMESPACE = "http://www.sitemaps.org/schemas/sitemap/0.9"


def page_urls(app) -> list[str]:
    """The address of every page of the book, under html_baseurl, in a stable order."""
    base = app.config.html_baseurl.rstrip("/") + "/"
    return [base + app.builder.get_target_uri(docname) for docname in sorted(app.env.found_docs)]


def write_sitemap(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    if not app.config.html_baseurl:
        raise RuntimeError("html_baseurl is not set (html.baseurl in _config.yml): no sitemap can be written")
    entries = "".join(f"  <url><loc>{escape(url)}</loc></url>\n" for url in page_urls(app))
    sitemap = f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{SITEMAP_NAMESPACE}">\n{entries}</urlset>\n'
    (Path(app.outdir) / SITEMAP).write_text(sitemap, encoding="utf-8")



FONTAWESOME_SCRIPT = re.compile(r'[ \t]*<script defer src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>\n?')


def drop_fontawesome_script(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    for page in outdir.rglob("*.html"):
        if page.relative_to(outdir).parts[0] in ("lite", "_static"):
            continue
        text = page.read_text(encoding="utf-8")
        if "fontawesome.js" in text:
            page.write_text(FONTAWESOME_SCRIPT.sub("", text), encoding="utf-8")


IMG_TAG = re.compile(r"<img\b(?![^>]*\bloading=)")


def lazy_images(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body")
    if body and "<img" in body:
        context["body"] = IMG_TAG.sub('<img loading="lazy"', body)


def pages_of_another_run(app, env, added, changed, removed) -> list[str]:
    """Every page to read again when the environment was read with another version of the package than now."""
    from tools.execution import package_hash

    current = package_hash()
    before, env.attnbook_package_hash = getattr(env, "attnbook_package_hash", None), current
    if before in (None, current):  # None: a new environment, which reads every page anyway
        return []
    return sorted(env.found_docs - set(added) - set(changed))


def setup(app):
    app.connect("env-get-outdated", pages_of_another_run)
    app.connect("html-page-context", lazy_images, priority=900)
    app.connect("build-finished", drop_fontawesome_script)
    app.connect("build-finished", write_sitemap)
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    app.connect("html-page-context", bibliography_entries_as_list_items, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
