"""One execution of every notebook, shared by the website, the PDF and ``make notebooks``.

The book builds its pages from the MyST sources (chapters/*.md, exercises/*.md) and takes their outputs
from jupyter-cache (``execute_notebooks: cache`` in _config.yml, the cache in _build/.jupyter_cache).
Left to itself, myst-nb executes each notebook there, one after the other, the first time a build
reads it. This module fills that cache before Sphinx starts, so that the build finds every notebook
already executed:

* :func:`fill_cache` executes every notebook the cache lacks, several at once (one kernel per core), with
  ``ATTNBOOK_STATIC_FIGURES=1`` (the interactive figures then draw the states the website shows;
  attnbook.book.static_widgets), printing its progress, and stores each under the key myst-nb looks it up
  by (its code cells and their metadata, as myst-nb reads the .md). The cache is so keyed on the code of
  the source, and :func:`open_cache` clears it when the package changed: a notebook is executed again
  exactly when its code or the package changed. ``make book`` and ``make pdf`` both call it, and they share
  the cache, so a build of both executes each notebook at most once; ``make notebooks`` stores its runs there
  too (tools/execute_notebooks.py). The repository keeps no rendered output but nbval's reference text (the
  paired .ipynb, tools/site_outputs.py): a fresh clone's first build executes every notebook.

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
from jupytext.myst import myst_to_notebook

from tools import ROOT, display_path, site_outputs

CACHE = ROOT / "_build" / ".jupyter_cache"  # where jupyter-book puts it (execute.cache unset in _config.yml)
STAMP = ROOT / "_build" / ".package-hash"  # the package hash the cache's notebooks were executed with
STATIC_ENV = "ATTNBOOK_STATIC_FIGURES"  # attnbook.book.static_widgets.STATIC_ENV (not imported: no numpy here)
FIGURE_TRANSLATIONS_ENV = "ATTNBOOK_FIGURE_TRANSLATIONS"  # attnbook.figures.languages.ENV
RECORD_ENV = "ATTNBOOK_GLUE_RECORD"  # attnbook.book.prose.RECORD_ENV: where the kernel records its glued values
GLUE_RECORDS = ROOT / "_build" / ".glue-records"
SOURCE_DIRS = ("chapters", "exercises")


class NotebookCellFailed(RuntimeError):
    """A cell raised (or timed out, or killed the kernel); the message says where in the .md."""


def is_notebook_source(path: Path) -> bool:
    """A .md is a notebook source when its front matter declares a jupytext pairing."""
    head = path.read_text(encoding="utf-8")[:400]
    return head.startswith("---") and "jupytext:" in head


def notebook_sources(root: Path = ROOT) -> list[Path]:
    """The notebook sources the book executes: every paired MyST notebook of chapters/ and exercises/."""
    return sorted(p for d in SOURCE_DIRS for p in (root / d).glob("*.md") if is_notebook_source(p))


def measures_time(source: Path) -> bool:
    """Whether ``source`` glues a time it measures (a glue named ``measured_…``, tools/nbval_stability.py): it then
    runs alone, so that no other kernel competes with what it measures."""
    return "measured_" in source.read_text(encoding="utf-8")


def cell_location(source: Path, index: int) -> str:
    """Where cell ``index`` of the MyST notebook ``source`` is: ``chapters/masks.md, code cell 7 (line 123)``.

    The code cell is counted from 1 among code cells; the line (from 1) is that of its ``{code-cell}``
    fence, from the source map of jupytext's MyST reader.
    """
    notebook = myst_to_notebook(source.read_text(encoding="utf-8"), add_source_map=True)
    place = display_path(source)
    if index >= len(notebook.cells) or notebook.cells[index].cell_type != "code":
        return f"{place}, cell {index + 1}"
    number = sum(cell.cell_type == "code" for cell in notebook.cells[: index + 1])
    return f"{place}, code cell {number} (line {notebook.metadata['source_map'][index]})"


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
    # the figures' words in the other languages are drawn by the run (figure_catalogs): a change draws them again
    catalogs = [path for path in figure_catalogs().values() if path.exists()]
    # the pins of the kernel's packages and of the tool-chain that runs and reads it (myst-nb, nbclient)
    pins = [ROOT / "requirements.txt", ROOT / "requirements-build.txt"]
    for path in sorted(package_files) + pins + catalogs:
        digest.update(path.relative_to(ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def figure_catalogs() -> dict[str, Path]:
    """Each other language's catalog of the words inside figures, ``locales/<language>/LC_MESSAGES/figures.po``."""
    languages = _book_execute_config()["sphinx"]["config"]["book_languages"]
    return {code: ROOT / "locales" / code / "LC_MESSAGES" / "figures.po"
            for code, language in languages.items() if language["folder"]}


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
    the glued values are recorded; ``ATTNBOOK_FIGURE_TRANSLATIONS``: every figure is drawn in the other languages
    too, from their catalogs (:func:`figure_catalogs`), so that their pages show the numbers of this run. Yields ``keep``: call it when the run succeeded, and the record is kept at
    ``record`` (the notebook's :func:`glue_record_path`), replacing the records of the notebook's older
    versions; otherwise it is dropped.
    """
    partial = record.with_name(record.name + ".partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_text("", encoding="utf-8")
    succeeded = []
    try:
        translations = ";".join(f"{code}={path}" for code, path in figure_catalogs().items())
        with environment_set({STATIC_ENV: "1", RECORD_ENV: str(partial), FIGURE_TRANSLATIONS_ENV: translations}):
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
    with cache_lock():  # `make notebooks` stores from one process per kernel
        _cache_bundle(open_cache(), source, notebook, seconds)


@contextlib.contextmanager
def cache_lock():
    """Hold the execution cache for this process alone while the block runs (an advisory file lock)."""
    import fcntl

    CACHE.parent.mkdir(parents=True, exist_ok=True)
    with open(CACHE.with_name(CACHE.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


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


def cell_timeout() -> int:
    """The seconds a cell may take (``execute.timeout`` of _config.yml, as myst-nb's own runs would)."""
    return int(_book_execute_config().get("execute", {}).get("timeout", 120))


def execute(source: Path, write_pair: bool = False, record: Path | None = None,
            store: bool = True) -> tuple[float, nbformat.NotebookNode]:
    """Execute ``source`` as the book does and (``store``) keep the run in the build's execution cache; with
    ``write_pair``, also write its paired .ipynb (nbval's reference, :func:`tools.site_outputs.nbval_reference`).

    The glued values are recorded at ``record`` (by default the source's :func:`glue_record_path`). Returns the
    execution's seconds and the notebook the book shows (:func:`tools.site_outputs.book_notebook`). Raises
    :class:`NotebookCellFailed` naming the failing cell's place in the .md.
    """
    notebook = jupytext.read(source)
    for index, cell in enumerate(notebook.cells):  # stable ids: jupytext draws random ones
        cell.id = hashlib.sha1(f"{index}:{cell.source}".encode()).hexdigest()[:8]
    notebook.metadata.setdefault("jupytext", {})["formats"] = "md:myst,ipynb"
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    start = time.perf_counter()
    running: list[int] = []  # the index of the cell being executed
    # the kernel inherits the book's environment: the figures draw their website states, the glue is recorded
    with book_kernel_environment(record or glue_record_path(source)) as keep, \
            ipc_kernel(notebook.metadata.get("kernelspec", {}).get("name", "python3")) as kernel:
        client = NotebookClient(notebook, km=kernel, timeout=cell_timeout(),
                                resources={"metadata": {"path": str(source.parent)}}, record_timing=False,
                                store_widget_state=True,  # needed by Output widgets; the state is stripped
                                on_cell_execute=lambda cell, cell_index: running.append(cell_index))
        try:
            client.execute(cleanup_kc=True)  # close the client's sockets; ipc_kernel stops the kernel
        except (CellExecutionError, CellTimeoutError, DeadKernelError) as error:
            where = cell_location(source, running[-1]) if running else display_path(source)
            raise NotebookCellFailed(f"{where} failed:\n{error}") from error
        keep()
    seconds = time.perf_counter() - start
    reader, extras = site_outputs.reader_notebook(notebook)
    if write_pair:
        paired = site_outputs.nbval_reference(reader)
        nbformat.validate(paired)
        jupytext.write(paired, source.with_suffix(".ipynb"), fmt="ipynb")
    book = site_outputs.book_notebook(reader, extras)
    if store:
        store_in_cache(source, book, seconds)
    return seconds, book


def _execute_in_worker(source: str, write_pair: bool, record: str) -> tuple[str, float, dict | None, str]:
    """In a worker process: :func:`execute` ``source``; (source, seconds, the book's notebook or None, error).

    The parent stores the run: the cache and the record's place are the parent's (a test moves them)."""
    try:
        seconds, book = execute(Path(source), write_pair, Path(record), store=False)
    except NotebookCellFailed as failure:
        return source, 0.0, None, str(failure)
    return source, seconds, book, ""


def execute_all(sources: list[Path], write_pair: bool = False, jobs: int | None = None):
    """:func:`execute` every source in worker processes, largest first, and store each run in the cache; yields
    (source, seconds, error) as each ends (error "" when it succeeded).

    ``jobs`` kernels run at once (by default ``ATTNBOOK_JOBS``, else one per CPU); the sources that measure
    times (:func:`measures_time`) run alone after the others.
    """
    jobs = max(1, jobs or int(os.environ.get("ATTNBOOK_JOBS", 0)) or os.cpu_count() or 1)
    ordered = longest_first(sources)
    context = multiprocessing.get_context("spawn")
    for batch, workers in (([s for s in ordered if not measures_time(s)], jobs), ([s for s in ordered if measures_time(s)], 1)):
        if not batch:
            continue
        with concurrent.futures.ProcessPoolExecutor(max_workers=min(workers, len(batch)), mp_context=context) as pool:
            futures = [pool.submit(_execute_in_worker, str(source), write_pair, str(glue_record_path(source)))
                       for source in batch]
            for future in concurrent.futures.as_completed(futures):
                source, seconds, book, error = future.result()
                if book is not None:
                    store_in_cache(Path(source), nbformat.from_dict(book), seconds)
                yield Path(source), seconds, error


def progress(done: int, total: int, elapsed: float, what: str) -> str:
    """One line of a progress bar: ``[#####.....]  5/27  1:40 elapsed, about 5:30 left  <what>``."""
    width = 20
    filled = round(width * done / total)
    left = elapsed / done * (total - done)

    def clock(seconds: float) -> str:
        return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"

    return (f"[{'#' * filled}{'.' * (width - filled)}] {done:>{len(str(total))}}/{total}  {clock(elapsed)} elapsed"
            f"{f', about {clock(left)} left' if done < total else ''}  {what}")


def fill_cache(sources: list[Path] | None = None, jobs: int | None = None) -> tuple[int, float]:
    """Execute, several at once (:func:`execute_all`), the notebooks the cache lacks, and store them in it.

    Returns (how many were executed, wall-clock seconds). Raises RuntimeError naming the notebook, with
    the failing cell and its traceback, when one fails, as the build would.
    """
    sources = notebook_sources() if sources is None else sources
    cache = open_cache()
    todo = [source for source in sources if not is_cached(cache, read_as_myst_nb(source))]
    if not todo:
        return 0, 0.0
    print(f"executing {len(todo)} notebook(s) for the book (jupyter-cache: {display_path(CACHE)}; each is executed "
          "again only when its code or the package changes)", flush=True)
    start = time.perf_counter()
    failures = []
    for done, (source, seconds, error) in enumerate(execute_all(todo, jobs=jobs), start=1):
        if error:
            failures.append(error)
        print(progress(done, len(todo), time.perf_counter() - start,
                       f"{'FAILED' if error else 'executed'} {display_path(source)} in {seconds:.1f} s"), flush=True)
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
