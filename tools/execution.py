"""One execution of every notebook, shared by the website, the PDF and ``make notebooks``.

The book builds its pages from the MyST sources (chapters/*.md, exercises/*.md) and takes their outputs
from jupyter-cache (``execute_notebooks: cache`` in _config.yml, the cache in _build/.jupyter_cache).
Left to itself, myst-nb executes each notebook there, one after the other, the first time a build
reads it. This module fills that cache before Sphinx starts, so that the build finds every notebook
already executed:

* :func:`fill_cache` first takes, for each notebook the cache lacks, the run ``make notebooks`` kept
  (:func:`take_kept_run`: the paired .ipynb and web/site-outputs, tools/site_outputs.py) when it is a
  run of the current source and package: a fresh clone builds the book without starting a kernel.
* It executes the rest, several at once (one kernel per core), with ``ATTNBOOK_STATIC_FIGURES=1`` (the
  interactive figures then draw the states the website shows; attnbook.book.static_widgets), and stores
  each under the key myst-nb looks it up by (its code cells and their metadata, as myst-nb reads the
  .md). ``make book`` and ``make pdf`` both call it, and they share the cache, so a build of both
  executes each notebook at most once, and a notebook ``make notebooks`` executed is not executed again.

Strict nbval (``make test``) re-executes the stored .ipynb on purpose, perturbed (tools/nbval_stability.py):
it checks that a fresh run reproduces it, so it never reads this cache. Each build's run also records every
glued value unrounded (:func:`book_kernel_environment`, :func:`glue_record_path`): nbval's check of the glued
values takes that record as its unperturbed reference instead of running the notebook again.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import jupytext
import nbformat
import yaml

from tools import ROOT, display_path, site_outputs

CACHE = ROOT / "_build" / ".jupyter_cache"  # where jupyter-book puts it (execute.cache unset in _config.yml)
STAMP = ROOT / "_build" / ".package-hash"  # the package hash the cache's notebooks were executed with
STATIC_ENV = "ATTNBOOK_STATIC_FIGURES"  # attnbook.book.static_widgets.STATIC_ENV (not imported: no numpy here)
RECORD_ENV = "ATTNBOOK_GLUE_RECORD"  # attnbook.book.prose.RECORD_ENV: where the kernel records its glued values
GLUE_RECORDS = ROOT / "_build" / ".glue-records"
IGNORE_KEPT_RUNS_ENV = "ATTNBOOK_IGNORE_KEPT_RUNS"  # "1": execute every notebook (benchmarks/build_times.py)


def _book_execute_config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def read_as_myst_nb(source: Path) -> nbformat.NotebookNode:
    """The notebook myst-nb reads from the MyST source ``source``: the cells the cache is keyed on."""
    from myst_nb.core.read import read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    extensions = set(_book_execute_config().get("parse", {}).get("myst_enable_extensions", []))
    config = MdParserConfig(enable_extensions=extensions)
    return read_myst_markdown_notebook(source.read_text(encoding="utf-8"), config=config,
                                       add_source_map=True, path=str(source))


def package_hash() -> str:
    digest = hashlib.sha256()
    package_files = [p for p in (ROOT / "code" / "src").rglob("*") if p.suffix in (".py", ".json")]
    for path in sorted(package_files) + [ROOT / "requirements.txt"]:
        digest.update(path.relative_to(ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def source_digest(source: Path) -> str:
    """A digest of the source's text and of the package (:func:`package_hash`): which version of both a run ran."""
    return hashlib.sha256(source.read_bytes() + package_hash().encode()).hexdigest()[:16]


def longest_first(sources: list[Path]) -> list[Path]:
    """``sources`` ordered for running in parallel: the largest stored notebook (it draws the most) first, so
    the last one to start is short."""
    def stored_size(source: Path) -> int:
        stored = source.with_suffix(".ipynb")
        return stored.stat().st_size if stored.exists() else 0

    return sorted(sources, key=stored_size, reverse=True)


def glue_record_path(source: Path) -> Path:
    """Where a build's run of ``source`` leaves its glued values, unrounded, one JSON line per glue.

    The name carries :func:`source_digest`: a record of another version of the source or the package is
    not found, and nbval's check of the glued values then runs its own reference (tools/nbval_stability.py).
    """
    return GLUE_RECORDS / f"{record_stem(source)}-{source_digest(source)}.jsonl"


def record_stem(source: Path) -> str:
    """``source``'s path in the repository as one file name: ``chapters--masks``."""
    path = source.resolve()
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else Path(path.name)
    return where.with_suffix("").as_posix().replace("/", "--")


@contextlib.contextmanager
def environment_set(values: dict[str, str]):
    """This process's environment variables ``values`` set while the block runs (the kernels it starts then
    inherit them), and restored after, as they were or unset."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def book_kernel_environment(record: Path):
    """The environment a kernel started inside inherits while the book runs a notebook.

    ``ATTNBOOK_STATIC_FIGURES=1``: the interactive figures draw their website states; ``ATTNBOOK_GLUE_RECORD``:
    the glued values are recorded. Yields ``keep``: call it when the run succeeded, and the record is kept at
    ``record`` (the notebook's :func:`glue_record_path`), replacing the records of the notebook's older
    versions; otherwise it is dropped.
    """
    partial = record.with_name(record.name + ".partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_text("", encoding="utf-8")
    succeeded = []
    try:
        with environment_set({STATIC_ENV: "1", RECORD_ENV: str(partial)}):
            yield lambda: succeeded.append(True)
    finally:
        if succeeded:
            stem = record.name[:-len("-0123456789abcdef.jsonl")]
            for older in record.parent.glob(f"{stem}-{'?' * 16}.jsonl"):
                older.unlink()
            partial.replace(record)
        else:
            partial.unlink(missing_ok=True)


def open_cache():
    """The execution cache, cleared first if the attnbook package changed since it was filled.

    jupyter-cache keys a notebook on its code cells only: a change in the package would otherwise leave
    stale outputs in the site. STAMP records the package hash the cache's notebooks were executed with.
    """
    from jupyter_cache import get_cache

    current = package_hash()
    if CACHE.exists() and (not STAMP.exists() or STAMP.read_text() != current):
        print("the attnbook package changed since the execution cache was filled: clearing it", flush=True)
        shutil.rmtree(CACHE)
    STAMP.parent.mkdir(parents=True, exist_ok=True)
    STAMP.write_text(current)
    return get_cache(str(CACHE))


def executed_from_cache(source: Path) -> nbformat.NotebookNode | None:
    """The executed notebook of ``source`` as the cache holds it (outputs and execution counts), or None.

    myst-nb writes the page's notebook (``_sources/*.ipynb``, the download) with the outputs only when it
    executed the notebook itself; when the outputs come from this cache it writes the notebook unexecuted.
    The build puts this one in its place (:mod:`tools.extensions.static_figures`).
    """
    if not CACHE.exists():
        return None
    from jupyter_cache import get_cache

    try:
        return get_cache(str(CACHE)).merge_match_into_notebook(read_as_myst_nb(source))[1]
    except KeyError:
        return None


def is_cached(cache, notebook: nbformat.NotebookNode) -> bool:
    try:
        cache.match_cache_notebook(notebook)
    except KeyError:
        return False
    return True


def store_in_cache(source: Path, executed: nbformat.NotebookNode, seconds: float) -> None:
    """Store ``executed`` (a run of ``source``, read by jupytext or myst-nb) as myst-nb's executed ``source``.

    The outputs are moved, code cell by code cell, onto the notebook as myst-nb reads the .md (the cache
    key); the two readings must agree on every code cell's source.
    """
    notebook = read_as_myst_nb(source)
    theirs = [cell for cell in executed.cells if cell.cell_type == "code"]
    ours = [cell for cell in notebook.cells if cell.cell_type == "code"]
    if len(theirs) != len(ours) or any(a.source.strip() != b.source.strip() for a, b in zip(ours, theirs)):
        raise ValueError(f"{display_path(source)}: the executed notebook's code cells are not those of its source")
    for cell, run in zip(ours, theirs):
        cell.outputs = run.outputs
        cell.execution_count = run.get("execution_count")
    for key in ("language_info", "widgets"):
        if key in executed.metadata:
            notebook.metadata[key] = executed.metadata[key]
    _cache_bundle(open_cache(), source, notebook, seconds)


def cached_sources() -> set[tuple[int, str]]:
    """(record id, source) of every notebook in the cache: a new id means a new execution was stored."""
    if not CACHE.exists():
        return set()
    from jupyter_cache import get_cache

    return {(record.pk, record.uri) for record in get_cache(str(CACHE)).list_cache_records()}


def _cache_bundle(cache, source: Path, notebook: nbformat.NotebookNode, seconds: float) -> None:
    from jupyter_cache.base import CacheBundleIn

    cache.cache_notebook_bundle(CacheBundleIn(notebook, str(source), data={"execution_seconds": seconds}),
                                check_validity=False, overwrite=True)


@contextlib.contextmanager
def ipc_kernel(kernel_name: str):
    """A kernel manager for one notebook run, its kernel on Unix sockets, not TCP (two kernels started at
    once can be handed the same free port); the kernel is shut down afterwards (nbclient leaves a kernel it
    was handed running)."""
    from jupyter_client.manager import KernelManager

    with tempfile.TemporaryDirectory(prefix="attnbook-kernel-") as sockets:
        kernel = KernelManager(kernel_name=kernel_name, transport="ipc", ip=str(Path(sockets) / "kernel"))
        try:
            yield kernel
        finally:
            if kernel.has_kernel:
                kernel.shutdown_kernel(now=True)


def _execute_for_the_book(source: str, timeout: int, record: str) -> tuple[str, dict | None, float, str]:
    """In a worker process: execute ``source`` as myst-nb would, its glue recorded in ``record``;
    (source, notebook or None, seconds, error)."""
    from jupyter_cache.executors.utils import single_nb_execution

    path = Path(source)
    notebook = read_as_myst_nb(path)
    # the kernel inherits this process's environment
    with book_kernel_environment(Path(record)) as keep, \
            ipc_kernel(notebook.metadata.get("kernelspec", {}).get("name", "python3")) as kernel:
        result = single_nb_execution(notebook, cwd=str(path.parent), timeout=timeout, allow_errors=False,
                                     meta_override=True, km=kernel)
        if result.err is None:
            keep()
    if result.err is not None:
        return source, None, result.time, result.exc_string or repr(result.err)
    # the notebook the book shows, as if it came from web/site-outputs: the same page either way
    reader, extras = site_outputs.reader_notebook(nbformat.from_dict(notebook))
    return source, site_outputs.book_notebook(reader, extras), result.time, ""


def take_kept_run(source: Path) -> bool:
    """Store in the cache the run of ``source`` that ``make notebooks`` kept (its paired .ipynb and
    web/site-outputs, tools/site_outputs.py) and put its glue record in place, when that run is of the
    current source and package and the pair is fresh; returns whether it did."""
    from tools.execute_notebooks import stale_cells  # (that module imports this one)

    kept = site_outputs.load(record_stem(source), source_digest(source))
    if kept is None or stale_cells(source):
        return False
    extras, glue = kept
    store_in_cache(source, site_outputs.book_notebook(jupytext.read(source.with_suffix(".ipynb")), extras), 0.0)
    record = glue_record_path(source)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(glue, encoding="utf-8")
    return True


def book_notebooks() -> list[Path]:
    """The notebook sources the book executes: every paired MyST notebook (tools/execute_notebooks.py)."""
    from tools.execute_notebooks import notebook_sources

    return notebook_sources()


def fill_cache(sources: list[Path] | None = None, jobs: int | None = None) -> tuple[int, float]:
    """Execute, several at once, the notebooks the cache lacks, and store them in it.

    ``jobs`` kernels run at once: by default the environment variable ``ATTNBOOK_JOBS``, else one per CPU.
    Returns (how many were executed, wall-clock seconds). Raises RuntimeError naming the notebook, with
    the failing cell and its traceback, when one fails, as the build would.
    """
    sources = book_notebooks() if sources is None else sources
    cache = open_cache()
    todo = [source for source in sources if not is_cached(cache, read_as_myst_nb(source))]
    ignore_kept = os.environ.get(IGNORE_KEPT_RUNS_ENV) == "1"
    kept = [] if ignore_kept else [source for source in todo if take_kept_run(source)]
    if kept:
        print(f"{len(kept)} notebook(s) taken from the runs `make notebooks` kept "
              f"({display_path(site_outputs.SITE_OUTPUTS)}), not executed", flush=True)
    todo = [source for source in todo if source not in kept]
    if not todo:
        return 0, 0.0
    todo = longest_first(todo)
    jobs = max(1, min(len(todo), jobs or int(os.environ.get("ATTNBOOK_JOBS", 0)) or os.cpu_count() or 1))
    timeout = int(_book_execute_config().get("execute", {}).get("timeout", 120))
    print(f"executing {len(todo)} notebook(s) for the book, {jobs} at a time (jupyter-cache: {display_path(CACHE)})",
          flush=True)
    start = time.perf_counter()
    failures = []
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = [pool.submit(_execute_for_the_book, str(source), timeout, str(glue_record_path(source)))
                   for source in todo]
        for future in concurrent.futures.as_completed(futures):
            source, notebook, seconds, error = future.result()
            if notebook is None:
                failures.append(f"{display_path(Path(source))} failed after {seconds:.1f} s:\n{error}")
                print(f"FAILED {display_path(Path(source))}", flush=True)
                continue
            _cache_bundle(cache, Path(source), notebook, seconds)
            print(f"executed {display_path(Path(source))} in {seconds:.1f} s", flush=True)
    wall = time.perf_counter() - start
    if failures:
        raise RuntimeError("\n\n".join(failures))
    return len(todo), wall


def main(argv: list[str]) -> int:
    sources = [Path(a).resolve() for a in argv] or None
    try:
        count, seconds = fill_cache(sources)
    except RuntimeError as failure:
        print(f"error: {failure}", file=sys.stderr)
        return 1
    print(f"{count} notebook(s) executed in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
