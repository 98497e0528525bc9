"""What the book's other languages need of Sphinx's translation (issue #28), a local Sphinx extension.

**Glued numbers survive translation.** Sphinx translates a page by parsing each translated message again, on its own, into a fresh document
(``sphinx.transforms.i18n.publish_msgstr``). myst-nb's ``{glue:text}`key``` role looks the key up in the
notebook the *document* was made from (``document["nb_renderer"]``), which the fresh document lacks, so
every glued number of a translated paragraph renders empty, with the warning "No key ... found in glue
data for this document" (``upstream/myst-nb-glue-in-translated-messages.md``).

myst-nb's cross-document form, ``{glue:text}`page.md::key:format```, does not need the renderer: it
leaves a pending reference that a post-transform fills from the glue cache the notebook's reading wrote
(``<docname>.glue.json``). So, before Sphinx parses a translated message, every local glue role in it is
rewritten to that form with the page's own file name: the translator writes ``{glue:text}`key``` as the
English does, and the number on the translated page is the English page's, from the same execution.

**Exercise titles are translatable.** sphinx-exercise builds an exercise's title (the directive's
argument) without the source position and raw text that Sphinx's message extraction asks of a node, so
``make translations`` would never offer "Scale the scores" to a translator, and a solution, whose title
repeats its exercise's, would stay English too (``upstream/sphinx-exercise-titles-not-extracted.md``).
The directive is wrapped to give the title node its source, line and raw text, which the read-time
translation needs; and since the gettext builder extracts from the resolved page, where sphinx-exercise has
replaced that node by "Exercise n (title)", the resolved title is given the same, for the gettext builder only.
A solution's title repeats its exercise's from sphinx-exercise's registry, which holds the exercise as it was
before the page was translated; after translation the registry is pointed at the translated exercise.

**The extensions' own words.** sphinx-exercise and sphinx-proof ship no zh_TW catalog (their zh_CN one is not
read for zh_TW), so the book's ``locales/zh_TW/LC_MESSAGES/exercise.po`` and ``proof.po`` are registered after
theirs; the theme's strings come from the book's ``sphinx.po``, which Sphinx reads before the theme's own.

**The parts' captions.** sphinx-external-toc adds the root page's toctrees after the page was translated, so the
navigation's part captions ("Beyond the basics") are translated from the root page's catalog once they are there.

**Theorem heads in the PDF.** sphinx-proof writes a theorem's LaTeX head as the English type name ("Theorem
1.1"), though its HTML head is translated; the LaTeX head is given the same translation.

**The copy buttons' words.** sphinx-copybutton's script has its own table of words by page language, with zh-CN but
no zh-TW, so its tooltips would say "Copy"; after a translated build the language's words (``site.yml``,
``copybutton``) are added to that table.

**The figures' own words.** The book's run draws every figure in each other language as well
(attnbook.figures.languages), as one more entry of the output; myst-nb's notebook from the execution cache
gets, for a build in that language, each output's drawing in it instead of the English one, and, for the
English build, no other language's (tools.site_outputs.in_language).

The English build never parses a translated message, and the exercise titles render as before, so the
extension changes nothing a reader of the English pages sees.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePath

from docutils import nodes
from sphinx.transforms import i18n
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx_exercise.directive import ExerciseDirective, ExerciseStartDirective
from sphinx_exercise.nodes import exercise_enumerable_node, exercise_node, exercise_subtitle

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


class _Words(set):
    """A set with the list method sphinx.search.zh calls (``latin_terms.extend``)."""

    def extend(self, words) -> None:
        self.update(words)


def _with_translatable_title(run):
    def run_with_translatable_title(self):
        result = run(self)
        for node in result:
            for subtitle in node.findall(exercise_subtitle):
                subtitle.source, subtitle.line = self.state_machine.get_source_and_line(self.lineno)
                subtitle.rawsource = self.arguments[0]
                node["title_message"] = (subtitle.source, subtitle.line, subtitle.rawsource)
        return result
    run_with_translatable_title.__wrapped__ = run
    return run_with_translatable_title


class ImageAltIsTranslatable(SphinxTransform):
    """A figure's alt text is translatable: myst-nb's image of a code cell's output has no source position, which
    Sphinx's message extraction and translation ask of a node; it gets its cell's."""

    default_priority = 19  # before Sphinx's Locale (20) translates the page

    def apply(self, **kwargs) -> None:
        for image in self.document.findall(nodes.image):
            if image.get("alt") and not image.source:
                holder = image.parent
                while holder is not None and not holder.source:
                    holder = holder.parent
                if holder is not None:
                    image.source, image.line = holder.source, holder.line


class TranslatedNodesInTheirPage(SphinxTransform):
    """Every translated node belongs to its page's document, not to the one-message document it was parsed in.

    docutils gives each node the document it was made in; Sphinx's translation moves the nodes of a message's own
    document into the page, so each kept a reference to a document whose settings hold the build environment,
    and every page's pickled doctree held copies of it: 60-75 MB a page, 1.9 GB for the zh-Hant book (145 MB in
    English), and Sphinx spent minutes loading them (upstream/sphinx-translated-nodes-keep-their-document.md).
    """

    default_priority = 22  # after Sphinx's Locale (20) and the exercises' registry (21)

    def apply(self, **kwargs) -> None:
        if book_language(self.config) is None:
            return
        for node in self.document.findall():
            if node is not self.document and getattr(node, "_document", None) not in (None, self.document):
                node.document = self.document


class TranslatedTocCaptions(SphinxTransform):
    """The captions of the book's parts (Attention, Homework, ...) in the page's language: sphinx-external-toc adds
    the root page's toctrees (its transform, priority 100) after Sphinx's Locale (20) translated the page, so the
    navigation's part captions stayed English although the root page's catalog holds them
    (upstream/sphinx-external-toc-captions-not-translated.md)."""

    default_priority = 101  # after sphinx-external-toc's InsertToctrees (100), before the toctrees are collected

    def apply(self, **kwargs) -> None:
        from sphinx import addnodes
        from sphinx.locale import init as init_locale
        from sphinx.util.i18n import docname_to_domain

        if book_language(self.config) is None:
            return
        toctrees = [t for t in self.document.findall(addnodes.toctree) if t.get("caption")]
        if not toctrees:
            return
        domain = docname_to_domain(self.env.docname, self.config.gettext_compact)
        folders = [str(Path(self.env.srcdir) / folder) for folder in self.config.locale_dirs]
        catalog, found = init_locale(folders, self.config.language, domain)
        if not found:
            return
        for toctree in toctrees:
            translated = catalog.gettext(toctree["caption"])
            toctree["caption"] = toctree["rawcaption"] = translated


class RegisterTranslatedExercises(SphinxTransform):
    """After the page's translation (Sphinx's ``Locale``, priority 20), its solutions' titles repeat the translated exercise."""

    default_priority = 21

    def apply(self, **kwargs) -> None:
        if book_language(self.config) is None:
            return  # nothing was translated: the registry holds the page's exercises as they are
        registry = getattr(self.env, "sphinx_exercise_registry", {})
        for exercise in self.document.findall(lambda n: isinstance(n, (exercise_node, exercise_enumerable_node))):
            entry = registry.get(exercise.get("label"))
            if entry is not None and entry.get("docname") == self.env.docname:
                entry["node"] = exercise.deepcopy()  # the page resolves its own copy later


class OfferResolvedExerciseTitles(SphinxPostTransform):
    """For the gettext builder: the resolved title of an exercise offers its title's message."""

    default_priority = 25  # after sphinx-exercise resolves the titles (20 and 21)
    builders = ("gettext",)

    def run(self, **kwargs) -> None:
        for exercise in self.document.findall(lambda n: isinstance(n, (exercise_node, exercise_enumerable_node))):
            if "title_message" in exercise and isinstance(exercise.children[0], nodes.title):
                title = exercise.children[0]
                title.source, title.line, title.rawsource = exercise["title_message"]
                title.uid = ""  # the gettext catalog takes only nodes with a uid (it is for versioning)


def _outputs_in_language(start_client):
    def start_client_in_language(self):
        start_client(self)
        from tools.site_outputs import in_language

        in_language(self._notebook, _BUILD_LANGUAGE.get("language"))
    start_client_in_language.__wrapped__ = start_client
    return start_client_in_language


_BUILD_LANGUAGE: dict[str, str | None] = {}  # the language of this process's build (one Sphinx app a process)


def book_language(config) -> str | None:
    """The language of the build with Sphinx configuration ``config``, as the catalogs name it (``zh_TW``); None
    for the English book."""
    language = config.language
    return None if language in (None, "", "en") else language


def _copybutton_words(app, exception) -> None:
    """sphinx-copybutton's script in the page's language: its own table knows zh-CN, not zh-TW, so its
    tooltips would say "Copy"; the words come from ``locales/<language>/site.yml`` (``copybutton``)."""
    import json

    import yaml
    from tools.translations import LOCALES

    language = book_language(app.config)
    script = Path(app.outdir) / "_static" / "copybutton.js"
    if exception is not None or language is None or app.builder.format != "html" or not script.exists():
        return
    site = yaml.safe_load((LOCALES / language / "site.yml").read_text(encoding="utf-8"))
    tag = language.replace("_", "-")  # the page's <html lang>
    source = script.read_text(encoding="utf-8")
    table = "const messages = {\n"
    if table not in source:
        raise RuntimeError(f"{script}: sphinx-copybutton's table of words ({table.strip()!r}) is not where it was")
    if f"'{tag}':" not in source:
        entry = f"  '{tag}': {json.dumps(site['copybutton'], ensure_ascii=False)},\n"
        script.write_text(source.replace(table, table + entry, 1), encoding="utf-8")


def _translated_latex_head(depart):
    """sphinx-proof's LaTeX head of a theorem ("Theorem 1.1") in the build's language, as its HTML head is
    (upstream/sphinx-proof-latex-heads-not-translated.md)."""
    from sphinx.writers.latex import LaTeXTranslator
    from sphinx_proof.nodes import _ as translate, latex_admonition_start, list_rindex

    def depart_translated(self, node) -> None:
        depart(self, node)
        english = node.attributes.get("realtype", "").title()
        if isinstance(self, LaTeXTranslator) and english:
            at = list_rindex(self.body, latex_admonition_start) + 2
            if self.body[at] == english or self.body[at].startswith(english + " "):
                self.body[at] = translate(english) + self.body[at][len(english):]
    depart_translated.__wrapped__ = depart
    return depart_translated


def _translate_latex_heads(app) -> None:
    from sphinx_proof import nodes as proof

    if book_language(app.config) is None:
        return
    handlers = app.registry.translation_handlers.get("latex", {})
    for name, (visit, depart) in handlers.items():
        if depart in (proof.depart_enumerable_node, proof.depart_unenumerable_node):
            handlers[name] = (visit, _translated_latex_head(depart))


def _compile_catalog(locales: Path, language: str | None, domain: str) -> None:
    """Compile ``<locales>/<language>/LC_MESSAGES/<domain>.po`` to its ``.mo`` when that is missing or older.

    Sphinx compiles the catalogs of ``locale_dirs`` while it builds, after the extensions' setup has read theirs,
    and compiles its own ``sphinx`` domain first; the extensions' words come from the book's catalogs only if
    they are compiled here, or the first build of a fresh clone (the zh-Hant PDF in ``make test``) prints
    "Theorem 1.1" and "Exercise 1.1" where the later ones print 定理 1.1 and 練習 1.1.
    """
    from sphinx.util.i18n import CatalogInfo

    if language is None:
        return
    catalog = CatalogInfo(str(locales / language / "LC_MESSAGES"), domain, "utf-8")
    if Path(catalog.po_path).exists() and catalog.is_outdated():
        catalog.write_mo(language)


def setup(app):
    from myst_nb.core.execute.cache import NotebookClientCache

    app.connect("config-inited", lambda app, config: _BUILD_LANGUAGE.update(language=book_language(config)))
    if not hasattr(NotebookClientCache.start_client, "__wrapped__"):
        NotebookClientCache.start_client = _outputs_in_language(NotebookClientCache.start_client)
    app.connect("build-finished", _copybutton_words)
    app.connect("builder-inited", _translate_latex_heads)
    # the book's own catalogs of sphinx-exercise's and sphinx-proof's strings ("Exercise", "Theorem", ...), which
    # ship none in zh_TW (upstream/sphinx-exercise-and-proof-no-zh-tw.md); read after theirs, so only where they lack one
    from tools.translations import LOCALES

    for catalog in ("exercise", "proof", "booktheme"):  # booktheme: the words of the book's own header buttons
        _compile_catalog(LOCALES, book_language(app.config), catalog)
        app.add_message_catalog(catalog, str(LOCALES))
    # the Chinese search's Latin words: a list Sphinx searches for every word it stems, so the index took minutes
    # (upstream/sphinx-chinese-search-latin-terms-list.md); a set answers the same membership at once
    from sphinx.search import zh

    if not isinstance(zh.SearchChinese.latin_terms, set):
        zh.SearchChinese.latin_terms = _Words()
    # once per process, however many builds it runs
    if not hasattr(i18n.publish_msgstr, "__wrapped__"):
        i18n.publish_msgstr = _publishing_own_page_glue(i18n.publish_msgstr)
    for directive in (ExerciseDirective, ExerciseStartDirective):
        if not hasattr(directive.run, "__wrapped__"):
            directive.run = _with_translatable_title(directive.run)
    app.add_transform(ImageAltIsTranslatable)
    app.add_transform(RegisterTranslatedExercises)
    app.add_transform(TranslatedNodesInTheirPage)
    app.add_transform(TranslatedTocCaptions)
    app.add_post_transform(OfferResolvedExerciseTitles)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
