"""The book's languages on every page: a switcher that keeps the reader's place, and ``hreflang`` alternates.

The English site is ``_build/html``; each other language's site is a folder inside it (``zh-Hant/``, issue
#28), built from the same sources by ``tools.build_book`` with that language's catalogs (``locales/``), so
every page exists in every language under the same name. ``book_languages`` (``sphinx.config`` of
_config.yml) maps each Sphinx language code to its folder and the name a reader knows it by.

Each page gets, for every language, ``<link rel="alternate" hreflang="..." href="...">`` (the address under
``html_baseurl``, as the canonical link) and, in its header, a button for each other language that opens the
same page there at the same section (its ``#fragment``): the pages of two languages carry the same anchors.
"""

from __future__ import annotations

import html

__all__ = ["site_folder", "to_english_root", "setup"]

CONFIG = "book_languages"


def site_folder(app) -> str:
    """This build's folder inside the English site: "" for English, "zh-Hant/" for Traditional Chinese."""
    return app.config[CONFIG][app.config.language or "en"]["folder"]


def to_english_root(app) -> str:
    """The relative way from this build's root up to the English site's root: "" for English, "../" for zh-Hant."""
    return "../" * site_folder(app).count("/")


def _hreflang(language: dict) -> str:
    return language["folder"].rstrip("/") or "en"  # a language's folder is its tag: zh-Hant/


def add_language_links(app, pagename, templatename, context, doctree) -> None:
    languages = app.config[CONFIG]
    here = site_folder(app)
    base = app.config.html_baseurl.rstrip("/") + "/"
    english_base = base[: len(base) - len(here)] if here else base
    page = f"{pagename}.html"
    links = [f'<link rel="alternate" hreflang="{_hreflang(lang)}" href="{html.escape(english_base + lang["folder"] + page)}" />'
             for code, lang in languages.items()]
    links.append(f'<link rel="alternate" hreflang="x-default" href="{html.escape(english_base + page)}" />')
    context["metatags"] = context.get("metatags", "") + "\n".join(links)
    buttons = context.get("header_buttons")
    if buttons is None:
        return
    for code, lang in languages.items():
        if code == (app.config.language or "en"):
            continue
        target = context["pathto"](to_english_root(app) + lang["folder"] + page, 1)
        buttons.insert(0, {
            "type": "javascript",
            "javascript": f"window.location.assign('{target}' + window.location.hash)",
            "text": lang["name"],
            "tooltip": lang["tooltip"],
            "icon": "fas fa-language",
            "label": f"language-{_hreflang(lang)}-button",
        })


def setup(app):
    app.add_config_value(CONFIG, {"en": {"folder": "", "name": "English", "tooltip": "This page in English"}},
                         "html", dict)
    app.connect("html-page-context", add_language_links, priority=600)  # after the theme's buttons (501)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
