"""Build the book into _build/html with warnings as errors, and say where it is and how long it took.

jupyter-cache keys its executed outputs on the notebooks' code cells only, so a change in the
attnbook package would leave stale outputs in the site: the cache is cleared whenever the hash of the
package sources changes (tools/execution.py, :func:`~tools.execution.open_cache`).

Before Sphinx starts, every notebook the cache lacks is executed into it (tools/execution.py), one kernel
per core, with ATTNBOOK_STATIC_FIGURES=1: the interactive figures then also draw the states the website
shows without a kernel (attnbook.book.static_widgets). A fresh clone's first build executes every notebook
(the repository keeps no rendered output, only nbval's reference text); later builds execute a notebook
again only when its code or the package changed. Sphinx then finds every notebook in the cache, and the
website and the PDF share it. Outside these runs (a reader's kernel, nbval) the figures
do not spend the time.

Each other language's site is built first, from its catalogs, into its folder of the site
(:func:`build_translation`; the zh-Hant site in _build/html/zh-Hant), so that the English site's JupyterLite
holds its chapters too; then the English site; then the English pages' messages are extracted
(tools/translations.py), which tests/test_translations.py holds the catalogs to.

Each build prints its phases' times and records them in _build/build-times.json (``make build-times``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tools import ROOT
from tools.execution import STATIC_ENV, cached_sources, fill_cache

BUILD = ROOT / "_build"
TIMES = BUILD / "build-times.json"


def build(options: list[str], product: Path, what: str, after: str) -> int:
    """Run `jupyter-book build` with `options` and warnings as errors, every notebook executed first.

    `product` is the file the build must leave, `what` names it in the messages, `after` is the line
    printed under a successful build.
    """
    start = time.perf_counter()
    try:
        executed, execute_seconds = fill_cache()
    except RuntimeError as failure:
        print(f"\nthe {what} build FAILED: a notebook failed to execute\n{failure}", file=sys.stderr)
        return 1
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    command = [str(jupyter_book), "build", str(ROOT), *options, "-W", "-n", "--keep-going"]
    sphinx_start = time.perf_counter()
    before = cached_sources()
    result = subprocess.run(command, cwd=ROOT, env={**os.environ, STATIC_ENV: "1"})
    sphinx_seconds = time.perf_counter() - sphinx_start
    seconds = time.perf_counter() - start
    if result.returncode != 0 or not product.exists():
        print(f"\nthe {what} build FAILED after {seconds:.1f} s (warnings count as errors)", file=sys.stderr)
        return result.returncode or 1
    again = cached_sources() - before
    if again:  # myst-nb did not find them under the key tools/execution.py stored them by
        print(f"\nthe {what} build FAILED: Sphinx executed {len(again)} notebook(s) again that tools/execution.py "
              f"had executed (their cache keys differ): {', '.join(sorted(uri for _, uri in again))}", file=sys.stderr)
        return 1
    record_times(what, {"total_s": seconds, "notebooks_executed": executed, "execute_s": execute_seconds,
                        "sphinx_s": sphinx_seconds})
    print(f"\nThe {what} is built: {product}")
    print(f"Build time: {seconds:.1f} s ({executed} notebook(s) executed in {execute_seconds:.1f} s, "
          f"then Sphinx {sphinx_seconds:.1f} s). {after}")
    return 0


def record_times(what: str, times: dict) -> None:
    """Keep the latest build's phase times in TIMES, with the machine's load when it finished."""
    recorded = json.loads(TIMES.read_text(encoding="utf-8")) if TIMES.exists() else {}
    recorded[what] = {**{k: round(v, 1) if isinstance(v, float) else v for k, v in times.items()},
                      "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()}
    TIMES.write_text(json.dumps(recorded, indent=1) + "\n", encoding="utf-8")


def translated_config(language: str) -> Path:
    """The configuration of the book in ``language`` (a code of tools.translations.LANGUAGES), for any builder.

    The same sources and execution cache as the English book, with the language's catalogs
    (``locales/<language>``), its words that live in the configuration (``locales/<language>/site.yml``: the
    footer, the code and toggle prompts, the PDF's fonts and heads), its own address under ``html.baseurl``
    and its search's word list. It has no JupyterLite site of its own: its chapters are in the English site's
    (``jupyterlite_contents``), which hosts Pyodide once; so it is built before the English site.
    """
    from tools.translations import LANGUAGES, LOCALES, generated_config, search_dictionary

    english = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    site = yaml.safe_load((LOCALES / language / "site.yml").read_text(encoding="utf-8"))

    def without_a_lite_site(config: dict) -> None:  # the English site hosts the lite site
        config["sphinx"]["extra_extensions"] = [name for name in config["sphinx"]["extra_extensions"]
                                                if name != "jupyterlite_sphinx"]
        config["sphinx"]["config"] = {key: value for key, value in config["sphinx"]["config"].items()
                                      if not key.startswith("jupyterlite_")}
        config["html"].update(site["html"])

    return generated_config(language, without_a_lite_site, language=language, locale_dirs=[str(LOCALES)],
                            gettext_compact=False,
                            html_baseurl=english["html"]["baseurl"].rstrip("/") + f"/{LANGUAGES[language]}/",
                            html_search_options={"dict": str(search_dictionary(language))}, **site["sphinx"])


def translation_output(language: str) -> Path:
    """Where the book in ``language`` is built (its own environment, doctrees, site and LaTeX): _build/i18n/<language>."""
    from tools.translations import I18N

    return I18N / language


def build_translation(language: str) -> int:
    """The site of ``language`` from its catalogs, built in :func:`translation_output` and copied to its folder of the site."""
    import shutil

    from tools.translations import LANGUAGES

    folder = LANGUAGES[language]
    built = translation_output(language) / "_build" / "html"
    result = build(["--config", str(translated_config(language)), "--path-output", str(translation_output(language))],
                   built / "index.html", f"{folder} site", f"It is the folder {folder}/ of the site.")
    if result == 0:
        target = BUILD / "html" / folder
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(built, target)
    return result


def main() -> int:
    from tools.translations import LANGUAGES

    result = 0
    for language in LANGUAGES:  # first: the English site's lite site holds their chapters too
        result = result or build_translation(language)
    result = result or build([], BUILD / "html" / "index.html", "book",
                             "Serve it offline with `make serve` (http://127.0.0.1:8000).")
    if result == 0:  # the English's messages today, which tests/test_translations.py holds the catalogs to
        from tools.translations import extract

        start = time.perf_counter()
        extract()
        record_times("message templates", {"total_s": time.perf_counter() - start})
    return result


if __name__ == "__main__":
    raise SystemExit(main())
