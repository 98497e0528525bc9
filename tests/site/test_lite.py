"""The JupyterLite site ("run in your browser", _build/html/lite) in Chromium, with no internet.

The lite site loads Pyodide from Pyodide's CDN, as readers get it. Here that CDN address is answered from
a Pyodide core assembled from the npm and PyPI registries (tools/pyodide_core.py, run by `make test`):
its lock, and the entries of the lite site's own lock for the same packages, carry the PyPI wheels'
names and digests. Every other request that leaves 127.0.0.1 is recorded and aborted.

Pyodide's numpy and matplotlib wheels are in no registry reachable here, so `import attnbook` cannot
finish offline: the test checks that the lite lock installs the attnbook wheel with no install cell and
that the import then stops at numpy, the only part that could not be served.

The test drives the lite app through its own events, not through timed keystrokes: keys typed while the
app is still activating its plugins are dropped without a trace (the cell is never created, so nothing
runs and nothing fails), which is how this test used to wait 240 s for an output that could not come.
The served ``jupyter-lite.json`` asks the app to expose itself as ``window.jupyterapp`` (JupyterLab's
``exposeAppInBrowser``, as its own browser tests do); the test then waits, each step bounded and named,
for the app to be restored, the chapter to open, its kernel to be ready, and each cell's output.
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tools import ROOT
from tools.built_site import HTML
from tools.extensions.lite_build import pyodide_cdn_url
from tools.install_cell import install_cell_source
from tools.pyodide_core import dependency_closure, lock_substitutions

CORE = ROOT / "_build" / "pyodide-core"
LITE = HTML / "lite"
LITE_LOCK = "lite/static/pyodide-lock/pyodide-lock.json"
CHAPTER = "scaled_dot_product_attention"
KERNEL_SCHEMA = LITE / "extensions/@jupyterlite/pyodide-kernel-extension/static/schema/kernel.v0.schema.json"
CONTENT_TYPES = {".mjs": "text/javascript", ".wasm": "application/wasm", ".json": "application/json"}
KERNEL_START_TIMEOUT = 240_000  # ms: Pyodide compiles its 9 MiB wasm and loads IPython (about 25 s here)
APP_TIMEOUT = 90_000  # ms: the lite app loads its extensions and opens the notebook (about 4 s here)

PYTHON_CELL = 'import sys\nprint("lite kernel", sys.platform, sum(k * k for k in range(10)))'
GLUE_CELL = 'from myst_nb import glue\nglue("lite_answer", 6 * 7)\nglue("lite_hidden", "not shown", display=False)'
IMPORT_CELL = """import importlib.metadata
try:
    import attnbook
    print("attnbook imported")
except ModuleNotFoundError as error:
    print("attnbook", importlib.metadata.version("attnbook"), "installed; import stopped at", error.name)"""
WIDGET_CELL = """import ipywidgets as widgets
slider = widgets.IntSlider(value=3, min=0, max=10, description="k")
seen = widgets.Label("no change yet")
slider.observe(lambda change: setattr(seen, "value", f"callback saw {change['new']}, squared {change['new'] ** 2}"), names="value")
widgets.VBox([slider, seen])"""


def lite_lock() -> dict:
    return json.loads((HTML / LITE_LOCK).read_text(encoding="utf-8"))


def test_lite_site_keeps_pyodide_on_its_cdn_for_readers():
    default = json.loads(KERNEL_SCHEMA.read_text(encoding="utf-8"))["properties"]["pyodideUrl"]["default"]
    assert default == pyodide_cdn_url(ROOT) + "pyodide.mjs", "the pinned npm pyodide is not the kernel's Pyodide"
    settings = json.loads((LITE / "jupyter-lite.json").read_text(encoding="utf-8"))["jupyter-config-data"]
    kernel = settings["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"]
    assert "pyodideUrl" not in kernel
    assert kernel["loadPyodideOptions"]["lockFileURL"] == "./" + LITE_LOCK.removeprefix("lite/")
    extensions = {extension["name"] for extension in settings["federated_extensions"]}
    assert "@jupyter-widgets/jupyterlab-manager" in extensions, "widgets would not render in the lite site"


def test_lite_site_holds_every_chapter_notebook_and_the_package_wheel():
    chapters = sorted(p.name for p in (ROOT / "chapters").glob("*.ipynb"))
    assert sorted(p.name for p in (LITE / "files").glob("*.ipynb")) == chapters
    packages = lite_lock()["packages"]
    entry = packages["attnbook"]
    wheel = HTML / LITE_LOCK.rsplit("/", 1)[0] / entry["file_name"]
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == entry["sha256"]
    assert "attnbook/attention.py" in zipfile.ZipFile(wheel).namelist()
    assert {"numpy", "matplotlib"} <= set(entry["depends"]) and entry["imports"] == ["attnbook"]
    local = {name: p for name, p in packages.items() if not p["file_name"].startswith(pyodide_cdn_url(ROOT))}
    assert set(local) == {"attnbook", "attnbook-lite-shims", "ipywidgets", "comm"}, "Pyodide's own packages must stay on its CDN"
    for name, package in local.items():
        wheel = HTML / LITE_LOCK.rsplit("/", 1)[0] / package["file_name"]
        assert hashlib.sha256(wheel.read_bytes()).hexdigest() == package["sha256"], name
    assert local["attnbook-lite-shims"]["imports"] == ["myst_nb"]


def _answer_from_core(substitutions: dict):
    """A request handler: Pyodide's CDN from the assembled core; the lite lock with its entries rewritten;
    the lite site's settings with the app exposed to the test (``window.jupyterapp``)."""
    cdn = pyodide_cdn_url(ROOT)

    def answer(route) -> bool:
        url = route.request.url.split("?")[0]
        if url.endswith("/lite/jupyter-lite.json"):
            settings = json.loads((LITE / "jupyter-lite.json").read_text(encoding="utf-8"))
            settings["jupyter-config-data"]["exposeAppInBrowser"] = "true"
            route.fulfill(json=settings)
            return True
        if url.endswith("/" + LITE_LOCK):
            lock = lite_lock()
            for name, entry in substitutions.items():
                lock["packages"][name].update(entry, file_name=cdn + entry["file_name"])
            route.fulfill(json=lock, headers={"access-control-allow-origin": "*"})
            return True
        if url.startswith(cdn) and (CORE / url.removeprefix(cdn)).is_file():
            path = CORE / url.removeprefix(cdn)
            content_type = CONTENT_TYPES.get(path.suffix, "application/octet-stream")
            route.fulfill(path=str(path), headers={"access-control-allow-origin": "*", "content-type": content_type})
            return True
        return False

    return answer


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

# In the page: insert a code cell at `index`, give it `code` and run it, with JupyterLab's own commands
_RUN_CELL = """async ([index, code]) => {
  const app = window.jupyterapp, notebook = window.litePanel.content;
  notebook.activeCellIndex = index;
  await app.commands.execute('notebook:insert-cell-above');
  notebook.activeCell.model.sharedModel.setSource(code);
  await app.commands.execute('notebook:run-cell');
}"""


def _wait_for_step(page_visit, step: str, timeout: int, what: str) -> None:
    page = page_visit.page
    try:
        page.wait_for_function(f"() => window.liteSteps && (window.liteSteps.{step} || window.liteSteps.error)",
                               timeout=timeout)
    except PlaywrightTimeout:
        dialogs = page.evaluate("() => [...document.querySelectorAll('.jp-Dialog')].map(d => d.innerText.slice(0, 200))")
        pytest.fail(f"{what} within {timeout / 1000:.0f} s; steps done: {page.evaluate('() => window.liteSteps')}; "
                    f"dialogs shown: {dialogs}; "
                    f"console errors: {page_visit.console_errors[:5]}; aborted requests: "
                    f"{page_visit.external_requests[:5]}; failed: {page_visit.failed_requests[:5]}")
    error = page.evaluate("() => window.liteSteps.error")
    assert error is None, f"the lite app failed before '{step}': {error}"


def _run_new_cell(page, index: int, code: str) -> None:
    """Insert a code cell at position `index` of the notebook, set its source and run it."""
    page.evaluate(_RUN_CELL, [index, code])


def _output(page, index: int, pattern: str, timeout: int = 60_000) -> str:
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    output = cell.locator(".jp-OutputArea-output").filter(has_text=re.compile(pattern))
    try:
        output.first.wait_for(timeout=timeout)
    except PlaywrightTimeout:
        shown = cell.locator(".jp-OutputArea-output").all_inner_texts()
        pytest.fail(f"cell {index} showed no output matching {pattern!r} within {timeout / 1000:.0f} s; "
                    f"its source: {cell.locator('.jp-InputArea-editor').inner_text()[:200]!r}; its outputs: {shown}")
    return output.first.inner_text()


def test_lite_kernel_runs_a_chapter_notebook_with_the_package_and_widgets(visit):
    if not (CORE / "pyodide-lock.json").is_file():
        pytest.fail("the Pyodide core is not assembled: `make test` runs python -m tools.pyodide_core")
    substitutions = lock_substitutions(CORE)
    page_visit = visit(
        f"lite/notebooks/index.html?path={CHAPTER}.ipynb",
        answer_request=_answer_from_core(substitutions),
    )
    page = page_visit.page
    try:
        page.wait_for_function("() => window.jupyterapp !== undefined", timeout=APP_TIMEOUT)
    except PlaywrightTimeout:
        pytest.fail(f"the lite app did not start within {APP_TIMEOUT / 1000:.0f} s; console errors: "
                    f"{page_visit.console_errors[:5]}; failed requests: {page_visit.failed_requests[:5]}")
    page.evaluate(_FOLLOW_APP, f"{CHAPTER}.ipynb")
    _wait_for_step(page_visit, "restored", APP_TIMEOUT, "the lite app did not restore its layout")
    _wait_for_step(page_visit, "opened", APP_TIMEOUT, f"the lite app did not open {CHAPTER}.ipynb")
    _wait_for_step(page_visit, "kernel", KERNEL_START_TIMEOUT, "the notebook's Pyodide kernel did not start")
    assert page.evaluate("() => window.liteSteps.kernel") == "python"

    _run_new_cell(page, 0, PYTHON_CELL)
    assert _output(page, 0, "lite kernel").strip() == "lite kernel emscripten 285"

    # every notebook's first cell (the Colab install cell) must do nothing here: no pip, no subprocess
    _run_new_cell(page, 1, install_cell_source() + '\nprint("install cell finished")')
    assert _output(page, 1, "install cell", 60_000).strip() == "install cell finished"

    _run_new_cell(page, 2, GLUE_CELL)  # the chapters' `from myst_nb import glue`, from the lite shims wheel
    outputs = page.locator(".jp-Notebook .jp-Cell").nth(2).locator(".jp-OutputArea-output")
    assert _output(page, 2, "42", 60_000).strip() == "42"
    assert "not shown" not in " ".join(outputs.all_inner_texts()), "a glue with display=False was shown"

    _run_new_cell(page, 3, IMPORT_CELL)
    printed = _output(page, 3, "attnbook", 120_000).strip()
    assert printed == "attnbook 0.1.0 installed; import stopped at numpy", printed

    _run_new_cell(page, 4, WIDGET_CELL)
    widget = page.locator(".jp-Notebook .jp-Cell").nth(4)
    widget.locator(".widget-slider").first.wait_for(timeout=60_000)
    label = widget.locator(".jp-OutputArea-output .widget-label")
    label.filter(has_text="no change yet").wait_for()
    widget.locator(".noUi-handle").first.focus()
    page.keyboard.press("ArrowRight")
    label.filter(has_text="callback saw 4, squared 16").wait_for(timeout=30_000)

    # nothing left the machine but what the core could not hold: attnbook's compiled dependencies
    packages = lite_lock()["packages"]
    unservable = {packages[name]["file_name"] for name in set(dependency_closure(packages, ["attnbook"])) - {"attnbook"}}
    assert page_visit.external_requests, "numpy was never requested: was `import attnbook` run?"
    assert set(page_visit.external_requests) <= unservable, page_visit.external_requests
    assert any("/numpy-" in url for url in page_visit.external_requests)
    unloaded = {packages[name]["name"] for name in set(dependency_closure(packages, ["attnbook"]))}
    for error in page_visit.console_errors:  # Pyodide reports each package it could not fetch, and only that
        loading = re.fullmatch(r"The following error occurred while loading (\S+):", error)
        assert error == "Failed to fetch" or (loading and loading.group(1) in unloaded), error
    assert page_visit.failed_requests == [], "some local requests failed"
