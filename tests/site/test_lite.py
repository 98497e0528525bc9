"""The JupyterLite site ("run in your browser", _build/html/lite) in Chromium, with no internet.

The lite site hosts its own Pyodide (tools/pyodide_dist.py): npm's Pyodide core and the packages the
kernel and the chapters load, each verified against npm's lock. So the test serves nothing but the built
site from 127.0.0.1, and every request that leaves it is recorded, aborted and fails the test.

The lite site holds the chapters' reader notebooks (tools/extensions/reader_notebooks.py: what a learner is
handed, tests/site/test_reader_notebooks.py), so those are what run here. Every chapter notebook runs top to
bottom in the lite kernel, each code cell in turn, and the test fails
naming the notebook and the cell on an error or when a cell does not finish within its bound. The chapters
one test worker runs share one page and one Pyodide kernel (:class:`SharedLiteKernel`): starting a kernel
and importing numpy, matplotlib and the package take about as long as a chapter's own cells, every time.
The worker's first chapter is opened as a reader opens it (its address); each next one is read from the lite
site's own files into the same notebook panel after the kernel's namespace is cleared (``%reset -f``, every
figure and widget closed), so its cells run top to bottom as in a kernel of its own, but for the modules
already imported. After a chapter fails, the next one gets a new page and kernel; with
``ATTNBOOK_LITE_KERNEL_PER_CHAPTER=1`` every chapter does. No cell is
skipped: what did not run in Pyodide was fixed at its source (attnbook.measure.timing's processor clock, which
is the wall clock there; "Source notes"' int64 counts). After the last cell, the first control of the
notebook's first interactive figure is clicked, as a reader would, and its Python callback must redraw
what it drives. A chapter that reads the pretrained model (Pyodide has no ``safetensors``) must instead stop at
its second setup cell, showing and raising ``attnbook.pretrained.files.NATIVE_KERNEL_NOTE`` with its links to
Colab and Binder. With windowing on, JupyterLab hides the cells out of view, so the test turns it off.

The test drives the lite app through its own events, not through timed keystrokes: keys typed while the
app is still activating its plugins are dropped without a trace. The served ``jupyter-lite.json`` asks the
app to expose itself as ``window.jupyterapp`` (JupyterLab's ``exposeAppInBrowser``, as its own browser
tests do); the test then waits, each step bounded and named, for the app to be restored, the notebook to
open, its kernel to be ready, and each cell's execution to be answered by the kernel (the promise of
JupyterLab's ``notebook:run-cell``, which settles on the kernel's execute reply).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import zipfile

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from attnbook.pretrained.files import NATIVE_KERNEL_NOTE
from tools import ROOT, pyodide_dist
from tools.built_site import HTML
from tools.extensions.lite_build import PYODIDE_DIR

LITE = HTML / "lite"
HOSTED = LITE / PYODIDE_DIR
KERNEL_SCHEMA = LITE / "extensions/@jupyterlite/pyodide-kernel-extension/static/schema/kernel.v0.schema.json"
CHAPTERS = sorted(p.stem for p in (ROOT / "chapters").glob("*.ipynb"))
# the chapters that read the pretrained model, which Pyodide cannot: they stop with a note (tests/test_native_kernel.py)
NATIVE_KERNEL_CHAPTERS = {p.stem for p in (ROOT / "chapters").glob("*.md") if "attnbook.pretrained" in p.read_text(encoding="utf-8")}
KERNEL_START_TIMEOUT = 180_000  # ms: Pyodide compiles its 10 MiB wasm and loads IPython (about 20 s here)
APP_TIMEOUT = 90_000  # ms: the lite app loads its extensions and opens the notebook (about 4 s here)
CELL_TIMEOUT = 180_000  # ms: one cell, the first importing numpy and matplotlib (the slowest takes about 40 s)
WIDGET_TIMEOUT = 60_000  # ms: a figure's callback redraws after its slider moved


def hosted_lock() -> dict:
    return json.loads((HOSTED / pyodide_dist.LOCK).read_text(encoding="utf-8"))


def test_lite_site_hosts_a_pyodide_verified_against_npms_lock():
    settings = json.loads((LITE / "jupyter-lite.json").read_text(encoding="utf-8"))["jupyter-config-data"]
    kernel = settings["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"]
    assert kernel["pyodideUrl"] == f"./{PYODIDE_DIR}/pyodide.js", "the kernel must load the hosted Pyodide"
    assert "loadPyodideOptions" not in kernel, "its lock is the one beside it (indexURL)"
    npm = pyodide_dist.npm_lock()
    version = npm["info"]["version"]
    default = json.loads(KERNEL_SCHEMA.read_text(encoding="utf-8"))["properties"]["pyodideUrl"]["default"]
    made_for = default.split("/pyodide/v")[1].split("/")[0]
    assert made_for.split(".")[:2] == version.split(".")[:2], f"the kernel is made for Pyodide {made_for}, not {version}"
    for name in pyodide_dist.CORE_FILES:
        assert (HOSTED / name).read_bytes() == (pyodide_dist.PYODIDE_NPM / name).read_bytes(), name
    lock = hosted_lock()
    assert lock["info"] == npm["info"]
    hosted = {name: entry for name, entry in lock["packages"].items() if "://" not in entry["file_name"]}
    for name, entry in hosted.items():
        digest = hashlib.sha256((HOSTED / entry["file_name"]).read_bytes()).hexdigest()
        assert digest == entry["sha256"], f"{entry['file_name']} does not match the lock"
        if name in npm["packages"]:
            assert entry == npm["packages"][name], f"{name}: the hosted lock must be npm's, unchanged"
    needed = pyodide_dist.dependency_closure(lock["packages"], pyodide_dist.HOSTED_ROOTS + ["attnbook", "ipywidgets"])
    assert set(needed) <= set(hosted), f"not hosted: {sorted(set(needed) - set(hosted))}"
    elsewhere = {entry["file_name"] for name, entry in lock["packages"].items() if name not in hosted}
    assert all(f.startswith(pyodide_dist.cdn_url(version)) for f in elsewhere)
    extensions = {extension["name"] for extension in settings["federated_extensions"]}
    assert "@jupyter-widgets/jupyterlab-manager" in extensions, "widgets would not render in the lite site"


def test_lite_site_holds_every_chapter_notebook_and_the_package_wheel():
    # each chapter in English and in zh-Hant (tests/site/test_translated_site.py opens the zh-Hant ones)
    assert sorted(p.stem for p in (LITE / "files").glob("*.ipynb")) == sorted(CHAPTERS + [f"{c}.zh-Hant" for c in CHAPTERS])
    packages = hosted_lock()["packages"]
    entry = packages["attnbook"]
    wheel = HOSTED / entry["file_name"]
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == entry["sha256"]
    assert "attnbook/attention.py" in zipfile.ZipFile(wheel).namelist()
    assert {"numpy", "matplotlib", "attnbook-lite-shims"} <= set(entry["depends"]) and entry["imports"] == ["attnbook"]
    local = set(packages) - set(pyodide_dist.npm_lock()["packages"])
    assert local == {"attnbook", "attnbook-lite-shims", "ipywidgets", "comm"}
    assert packages["attnbook-lite-shims"]["imports"] == ["myst_nb"]


def _expose_app(route) -> bool:
    """Answer the lite site's settings with the app exposed to the test (``window.jupyterapp``), no windowing."""
    if route.request.url.split("?")[0].endswith("/lite/jupyter-lite.json"):
        settings = json.loads((LITE / "jupyter-lite.json").read_text(encoding="utf-8"))
        settings["jupyter-config-data"]["exposeAppInBrowser"] = "true"
        # every cell in the page: with JupyterLab's windowing, cells out of view are not displayed, and a
        # figure's controls there can be neither seen nor moved
        settings["jupyter-config-data"]["settingsOverrides"] = {
            "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"}}
        route.fulfill(json=settings)
        return True
    return False


# In the page: follow the lite app as it opens, each step recorded in window.liteSteps when it has happened.
_FOLLOW_APP = """notebookPath => {
  window.liteSteps = {};
  const steps = window.liteSteps;
  (async () => {
    const app = window.jupyterapp;
    await app.restored; steps.restored = true;
    let panel = app.shell.currentWidget;
    while (!(panel && panel.context && panel.context.path === notebookPath)) {
      await new Promise(resolve => app.shell.currentChanged.connect(resolve));
      panel = app.shell.currentWidget;
    }
    await panel.context.ready; steps.opened = true;
    await panel.sessionContext.ready;
    if (!panel.sessionContext.session) {  // e.g. a kernel-selection dialog was dismissed
      const dialogs = [...document.querySelectorAll('.jp-Dialog')].map(d => d.innerText.slice(0, 200));
      throw new Error(`the notebook opened with no kernel; dialogs shown: ${JSON.stringify(dialogs)}`);
    }
    const kernel = panel.sessionContext.session.kernel;
    await kernel.info; steps.kernel = kernel.name;
    window.litePanel = panel;
  })().catch(error => { steps.error = String(error); });
}"""

# In the page: the notebook's cells (type, source, tags)
_CELLS = """() => window.litePanel.content.widgets.map(cell => ({
  type: cell.model.type, source: cell.model.sharedModel.getSource(),
  tags: cell.model.getMetadata('tags') || []}))"""

# In the page: run cell `index` with JupyterLab's own command; window.liteCell says when the kernel answered,
# and window.liteCellDone resolves to it then
_RUN_CELL = """index => {
  const app = window.jupyterapp, notebook = window.litePanel.content;
  window.liteCell = {index, status: 'running'};
  notebook.activeCellIndex = index;
  notebook.deselectAll();
  window.liteCellDone = app.commands.execute('notebook:run-cell').then(ok => {
    const cell = notebook.widgets[index];
    const errors = cell.model.outputs.toJSON().filter(o => o.output_type === 'error')
      .map(o => `${o.ename}: ${o.evalue}`);
    return window.liteCell = {index, status: 'done', ok, errors, count: cell.model.executionCount};
  }, error => window.liteCell = {index, status: 'done', ok: false, errors: [String(error)]});
}"""

# In the page: resolves when the cell's run is answered, or after `timeout` ms with the cell still running. The
# test waits on this promise rather than polling a condition in every animation frame, which keeps the page's
# main thread busy (a tenth of a core, measured) while Pyodide computes in its worker.
_CELL_ANSWERED = """([index, timeout]) => Promise.race([window.liteCellDone,
  new Promise(resolve => setTimeout(() => resolve({index, status: 'running'}), timeout))])"""


# In the page: what an interactive figure's callback draws (its output area, without the controls themselves)
# In the page: the rendered Markdown output of cell `index`, its text and the labels of its links
_OUTPUT_LINKS = """index => {
  const output = window.litePanel.content.widgets[index].node.querySelector('.jp-OutputArea .jp-RenderedMarkdown');
  return output ? {text: output.innerText.trim(), links: [...output.querySelectorAll('a')].map(a => a.innerText)}
                : {text: '', links: []};
}"""

_FIGURE_STATE = """index => {
  const output = window.litePanel.content.widgets[index].node.querySelector('.jp-OutputArea');
  const drawn = [...output.querySelectorAll('.widget-html-content, .widget-label, img')]
    .filter(e => !e.closest('.widget-slider, .widget-dropdown, .widget-checkbox, button'));
  return drawn.map(e => e.tagName === 'IMG' ? e.src.slice(-200) : e.innerHTML).join('|').slice(-4000);
}"""


def _wait_for_step(page_visit, step: str, timeout: int, what: str) -> None:
    page = page_visit.page
    try:
        page.wait_for_function(f"() => window.liteSteps && (window.liteSteps.{step} || window.liteSteps.error)",
                               timeout=timeout, polling=100)  # a step takes seconds: no need to look every frame
    except PlaywrightTimeout:
        dialogs = page.evaluate("() => [...document.querySelectorAll('.jp-Dialog')].map(d => d.innerText.slice(0, 200))")
        pytest.fail(f"{what} within {timeout / 1000:.0f} s; steps done: {page.evaluate('() => window.liteSteps')}; "
                    f"dialogs shown: {dialogs}; console errors: {page_visit.console_errors[:5]}; "
                    f"requests that left 127.0.0.1: {page_visit.external_requests[:5]}; "
                    f"failed: {page_visit.failed_requests[:5]}")
    error = page.evaluate("() => window.liteSteps.error")
    assert error is None, f"the lite app failed before '{step}': {error}"


def _open_notebook(open_page, chapter: str):
    page_visit = open_page(f"lite/notebooks/index.html?path={chapter}.ipynb", answer_request=_expose_app)
    page = page_visit.page
    try:
        page.wait_for_function("() => window.jupyterapp !== undefined", timeout=APP_TIMEOUT)
    except PlaywrightTimeout:
        pytest.fail(f"the lite app did not start within {APP_TIMEOUT / 1000:.0f} s; console errors: "
                    f"{page_visit.console_errors[:5]}; failed requests: {page_visit.failed_requests[:5]}")
    page.evaluate(_FOLLOW_APP, f"{chapter}.ipynb")
    _wait_for_step(page_visit, "restored", APP_TIMEOUT, "the lite app did not restore its layout")
    _wait_for_step(page_visit, "opened", APP_TIMEOUT, f"the lite app did not open {chapter}.ipynb")
    _wait_for_step(page_visit, "kernel", KERNEL_START_TIMEOUT, f"{chapter}.ipynb: its Pyodide kernel did not start")
    assert page.evaluate("() => window.liteSteps.kernel") == "python"
    return page_visit


def _run_cell(page_visit, chapter: str, index: int, source: str, fails: bool = False) -> dict:
    page = page_visit.page
    page.evaluate(_RUN_CELL, index)
    where = f"{chapter}.ipynb, cell {index} ({source.strip().splitlines()[0][:80]!r})"
    result = page.evaluate(_CELL_ANSWERED, [index, CELL_TIMEOUT])
    if result["status"] != "done":
        pytest.fail(f"{where}: the kernel did not finish it within {CELL_TIMEOUT / 1000:.0f} s; console errors: "
                    f"{page_visit.console_errors[-5:]}; requests that left 127.0.0.1: {page_visit.external_requests[:5]}")
    if not fails:
        assert result["ok"] and not result["errors"], f"{where} failed in the lite kernel: {result['errors']}"
    return result


def _stops_with_the_native_kernel_note(page_visit, chapter: str, cells: list[dict]) -> None:
    """A chapter that reads the pretrained model (tests/test_native_kernel.py): its cells run until the one that
    shows NATIVE_KERNEL_NOTE, which must show it, with its Colab and Binder links, and stop there with it."""
    code = [index for index, cell in enumerate(cells) if cell["type"] == "code"]
    stop = next(index for index in code if "NATIVE_KERNEL_NOTE" in cells[index]["source"])
    for index in code:
        result = _run_cell(page_visit, chapter, index, cells[index]["source"], fails=index == stop)
        if index == stop:
            break
    # the Pyodide kernel names an exception by its class's repr: "<class 'RuntimeError'>: ..."
    assert len(result["errors"]) == 1, f"{chapter}.ipynb did not stop with one error: {result['errors']}"
    name, _, text = result["errors"][0].partition(": ")
    assert name in ("RuntimeError", "<class 'RuntimeError'>") and text == NATIVE_KERNEL_NOTE, \
        f"{chapter}.ipynb did not stop with the note: {result['errors']}"
    shown = page_visit.page.evaluate(_OUTPUT_LINKS, stop)
    assert shown["text"].startswith("This chapter needs another kernel."), shown["text"][:200]
    assert {"Colab", "Binder"} <= set(shown["links"]), f"{chapter}.ipynb shows no link to Colab and Binder"
    assert page_visit.external_requests == [], f"{chapter}.ipynb asked for files outside the lite site"


# In the page: the first control of the figure in cell `index` (a slider's track, else a button, else a
# drop-down menu), and where to click it: on a slider, far from where its handle is now; null when its output
# holds no such control
_FIRST_CONTROL = """index => {
  const node = window.litePanel.content.widgets[index].node;
  const handle = node.querySelector('.jp-OutputArea .widget-slider .noUi-handle');
  if (handle) {
    const [now, min, max] = ['aria-valuenow', 'aria-valuemin', 'aria-valuemax'].map(a => Number(handle.getAttribute(a)));
    const where = max > min && (now - min) / (max - min) > 0.5 ? 0.15 : 0.85;
    return {kind: 'slider', element: handle.closest('.noUi-base') || handle.parentElement, where};
  }
  const button = node.querySelector('.jp-OutputArea button.jupyter-button:not(.mod-active)');  // not the chosen one
  if (button) return {kind: 'button', element: button, where: 0.5};
  const menu = node.querySelector('.jp-OutputArea .widget-dropdown select');
  return menu ? {kind: 'menu', element: menu, where: 0.5} : null;
}"""


def _move_first_figure(page_visit, chapter: str, cells: list[dict]) -> bool:
    """Move the first control of the notebook's first interactive figure, as a reader would (click a slider's
    track far from its handle, else the first button, else pick another menu entry); the figure's Python
    callback must redraw."""
    page = page_visit.page
    for index, cell in enumerate(cells):
        if cell["type"] != "code":
            continue
        control = page.evaluate_handle(_FIRST_CONTROL, index)
        kind = control.evaluate("c => c && c.kind")
        if kind is None:
            continue
        before = page.evaluate(_FIGURE_STATE, index)
        assert before, f"{chapter}.ipynb, cell {index}: the figure shows nothing beside its controls"
        element = control.get_property("element").as_element()
        element.scroll_into_view_if_needed()
        box = element.bounding_box()
        where = control.evaluate("c => c.where")
        if kind == "menu":  # a reader picks another entry of the drop-down menu
            other = element.evaluate("s => [...s.options].map(o => o.value).find(v => v !== s.value)")
            assert other is not None, f"{chapter}.ipynb, cell {index}: its figure's menu offers one entry only"
            element.select_option(other)
        else:
            element.click(position={"x": box["width"] * where, "y": box["height"] / 2})
        try:
            page.wait_for_function(f"([i, before]) => ({_FIGURE_STATE})(i) !== before", arg=[index, before],
                                   timeout=WIDGET_TIMEOUT)
        except PlaywrightTimeout:
            pytest.fail(f"{chapter}.ipynb, cell {index}: clicking its figure's {kind} redrew nothing within "
                        f"{WIDGET_TIMEOUT / 1000:.0f} s; console errors: {page_visit.console_errors[-5:]}")
        return True
    return False


# In the page: clear the kernel for the next chapter (its namespace, figures and widgets), then read the
# chapter's notebook from the lite site's files into the open panel; window.liteLoad says how it went
_NEXT_CHAPTER = """([path, code]) => {
  window.liteLoad = {status: 'running'};
  (async () => {
    const app = window.jupyterapp, panel = window.litePanel;
    const reply = await panel.sessionContext.session.kernel.requestExecute({code, store_history: false}).done;
    if (reply.content.status !== 'ok') throw new Error(`${reply.content.ename}: ${reply.content.evalue}`);
    const file = await app.serviceManager.contents.get(path, {content: true});
    panel.context.model.fromJSON(file.content);
    window.liteLoad = {status: 'done', cells: file.content.cells.length, shown: panel.content.widgets.length};
  })().catch(error => { window.liteLoad = {status: 'failed', error: String(error)}; });
}"""
_CLEAR_KERNEL = """import matplotlib.pyplot
matplotlib.pyplot.close("all")
import ipywidgets
ipywidgets.Widget.close_all()
%reset -f
"""
LOAD_TIMEOUT = 60_000  # ms: clearing the kernel and reading a notebook from the browser's storage (about 1 s)


class SharedLiteKernel:
    """The lite app open in one page, whose notebook panel and Pyodide kernel the chapters of one test worker share."""

    def __init__(self, open_page):
        self.open_page = open_page
        self.page_visit = None
        self.fresh = os.environ.get("ATTNBOOK_LITE_KERNEL_PER_CHAPTER") == "1"

    def open(self, chapter: str):
        """The page with ``chapter`` in its panel and a kernel ready to run it from its first cell."""
        if self.page_visit is None:
            self.page_visit = _open_notebook(self.open_page, chapter)
            return self.page_visit
        page = self.page_visit.page
        page.evaluate(_NEXT_CHAPTER, [f"{chapter}.ipynb", _CLEAR_KERNEL])
        try:
            page.wait_for_function("() => window.liteLoad.status !== 'running'", timeout=LOAD_TIMEOUT, polling=100)
        except PlaywrightTimeout:
            pytest.fail(f"{chapter}.ipynb: the kernel was not cleared and the notebook not loaded within "
                        f"{LOAD_TIMEOUT / 1000:.0f} s; console errors: {self.page_visit.console_errors[-5:]}")
        load = page.evaluate("() => window.liteLoad")
        assert load["status"] == "done", f"{chapter}.ipynb could not follow the previous chapter: {load.get('error')}"
        assert load["shown"] == load["cells"] > 0, f"{chapter}.ipynb: {load['shown']} of its {load['cells']} cells shown"
        return self.page_visit

    def done(self, succeeded: bool) -> None:
        """After a chapter: a failed one (or any, when each chapter is to have its own) leaves the page closed."""
        if self.page_visit is not None and (self.fresh or not succeeded):
            self.close()

    def close(self) -> None:
        if self.page_visit is not None:
            self.page_visit.close()
            self.page_visit = None


@pytest.fixture(scope="session")
def lite_kernel(open_page):
    shared = SharedLiteKernel(open_page)
    yield shared
    shared.close()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_lite_kernel_runs_every_cell_of_the_chapter_and_its_figure_responds(lite_kernel, chapter):
    succeeded = False
    try:
        _run_chapter(lite_kernel.open(chapter), chapter)
        succeeded = True
    finally:
        lite_kernel.done(succeeded)


def _run_chapter(page_visit, chapter: str) -> None:
    cells = page_visit.page.evaluate(_CELLS)
    if chapter in NATIVE_KERNEL_CHAPTERS:
        _stops_with_the_native_kernel_note(page_visit, chapter, cells)
        return
    code = [index for index, cell in enumerate(cells) if cell["type"] == "code"]
    assert code, f"{chapter}.ipynb has no code cell"
    start = time.perf_counter()
    for index in code:
        _run_cell(page_visit, chapter, index, cells[index]["source"])
    seconds = time.perf_counter() - start
    has_figure = any("ipywidgets" in cells[index]["source"] for index in code)
    assert _move_first_figure(page_visit, chapter, cells) == has_figure, \
        f"{chapter}.ipynb imports ipywidgets, but no control of its figure rendered" if has_figure else "unexpected control"
    assert page_visit.external_requests == [], f"{chapter}.ipynb asked for files outside the lite site"
    assert page_visit.failed_requests == [], f"{chapter}.ipynb: some requests of the lite site failed"
    print(f"{chapter}.ipynb: {len(code)} code cells ran in the lite kernel in {seconds:.0f} s")
