"""Reader notebooks opened in JupyterLab, as a learner who unzipped the notebooks opens them: the prose reads
like the page, the boxes' formulas reach MathJax whole, the book's hidden code is folded, an interactive figure
shows its picture before it runs, and opening a notebook changes nothing.

JupyterLab (the version the notebooks zip's README installs) serves a folder holding two chapters of the zip
on 127.0.0.1, with no token, no news, no update check and no autosave; Chromium opens a notebook there with
every request that leaves 127.0.0.1 recorded and aborted. The tests wait for JupyterLab's own signals (the
document's and the kernel's promises, reached through ``window.jupyterapp``) or for what it renders, each with
a bound. Screenshots (a folded solution, a definition with display math, an exercise, an interactive figure
before it runs) are left in _build/test-artefacts/.
"""

from __future__ import annotations

import html
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
import zipfile

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tools.build_book import BUILD
from tools.built_site import HTML
from tools.extensions.notebooks_zip import JUPYTERLAB_VERSION, NOTEBOOKS_ZIP

CHAPTER = "scaled_dot_product_attention"
BOXES = "masks"  # Definition 4.1 (display math in a box), Exercise 4.2, hide-input cells, an interactive figure
ARTEFACTS = BUILD / "test-artefacts"
SERVER_TIMEOUT_S = 120  # JupyterLab builds its page list and starts in a few seconds here
RENDER_TIMEOUT_MS = 120_000  # the app loads its extensions and renders every cell (no windowing)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """JupyterLab serving a folder with the chapter's downloaded reader notebook; yields its base URL."""
    import jupyterlab

    assert jupyterlab.__version__ == JUPYTERLAB_VERSION, (
        f"JupyterLab {jupyterlab.__version__} here, the zip's README installs {JUPYTERLAB_VERSION}")
    root = tmp_path_factory.mktemp("jupyterlab")
    folder, settings = root / "notebooks", root / "settings"
    (folder / "chapters").mkdir(parents=True)
    with zipfile.ZipFile(HTML / NOTEBOOKS_ZIP) as archive:
        for name in (CHAPTER, BOXES):
            (folder / "chapters" / f"{name}.ipynb").write_bytes(archive.read(f"chapters/{name}.ipynb"))
    # every cell in the page (no windowing), so that the test finds the folded solutions far down; no autosave,
    # which would save (and so hide) a change that opening a notebook made
    for plugin, values in (("notebook-extension/tracker", {"windowingMode": "none"}),
                           ("docmanager-extension/plugin", {"autosave": False})):
        path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")
    port = free_port()
    environment = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTER_CONFIG_DIR": str(root / "config"),
                   "JUPYTER_RUNTIME_DIR": str(root / "runtime")}
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.root_dir={folder}",
               "--ServerApp.ip=127.0.0.1", "--allow-root", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
               "--IdentityProvider.token=", "--ServerApp.password=", "--LabApp.news_url=None",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
               "--LabApp.extension_manager=readonly",  # the "pypi" one asks the package index at start
               "--LabApp.expose_app_in_browser=True"]  # window.jupyterapp: the document's and kernel's signals
    server = subprocess.Popen(command, cwd=folder, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in server.stderr], daemon=True).start()
    log, deadline = [], time.monotonic() + SERVER_TIMEOUT_S
    try:
        while not any(f"127.0.0.1:{port}/lab" in line for line in log):
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not say it serves 127.0.0.1:{port} within {SERVER_TIMEOUT_S} s:\n"
                            + "".join(log[-20:]))
            try:
                log.append(lines.get(timeout=1))  # a line of its log, or a second passed: has it exited?
            except queue.Empty:
                pass
            if server.poll() is not None and lines.empty():
                pytest.fail("JupyterLab exited:\n" + "".join(log[-20:]))
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        server.stderr.close()


def glued_value() -> str:
    """The longest of the first numbers the chapter's page glues (the least likely to occur in its prose by chance;
    the first ones stand in the prose, not in a solution, which JupyterLab must show folded)."""
    article = (HTML / "chapters" / f"{CHAPTER}.html").read_text(encoding="utf-8")
    values = [html.unescape(v) for v in re.findall(r'<span class="pasted-text">([^<]+)</span>', article)]
    assert values, f"chapters/{CHAPTER}.html glues no number"
    return max(values[:10], key=len)


# In the page: what JupyterLab rendered from the notebook's Markdown cells
_RENDERED = """() => {
  const markdown = [...document.querySelectorAll('.jp-MarkdownCell .jp-RenderedMarkdown')];
  return {cells: markdown.length, text: markdown.map(m => m.innerText).join('\\n'),
          solutions: [...document.querySelectorAll('.jp-RenderedMarkdown details')].map(d => ({
            open: d.open, summary: d.querySelector('summary') ? d.querySelector('summary').innerText : null,
            bodyShown: [...d.children].some(c => c.tagName !== 'SUMMARY' && c.checkVisibility())}))};
}"""


def test_jupyterlab_shows_the_reader_notebooks_glued_numbers_and_folded_solutions(visit_server, jupyterlab):
    value = glued_value()
    visit = visit_server(jupyterlab, f"lab/tree/chapters/{CHAPTER}.ipynb")
    page = visit.page
    try:
        page.wait_for_function(
            "() => [...document.querySelectorAll('.jp-RenderedMarkdown details')].length > 0",
            timeout=RENDER_TIMEOUT_MS, polling=200)
    except PlaywrightTimeout:
        pytest.fail(f"JupyterLab rendered no folded solution of {CHAPTER}.ipynb within {RENDER_TIMEOUT_MS / 1000:.0f} s; "
                    f"console errors: {visit.console_errors[:5]}; requests that left 127.0.0.1: "
                    f"{visit.external_requests[:5]}")
    rendered = page.evaluate(_RENDERED)
    assert rendered["cells"] > 20, f"only {rendered['cells']} Markdown cells rendered"
    assert value in rendered["text"], f"the glued number {value} is not in the rendered Markdown"
    assert "{glue" not in rendered["text"] and "{prf:" not in rendered["text"]
    solutions = rendered["solutions"]
    assert solutions and all(not s["open"] and not s["bodyShown"] for s in solutions), solutions[:3]
    assert solutions[0]["summary"].startswith("Solution to Exercise"), solutions[0]
    first = page.locator(".jp-RenderedMarkdown details").first
    first.scroll_into_view_if_needed()
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTEFACTS / "reader-notebook-in-jupyterlab.png"
    page.screenshot(path=str(shot))
    print(f"screenshot of {CHAPTER}.ipynb in JupyterLab: {shot}")
    assert visit.external_requests == [], f"JupyterLab asked for addresses outside 127.0.0.1: {visit.external_requests[:5]}"


def zipped(name: str):
    import nbformat

    with zipfile.ZipFile(HTML / NOTEBOOKS_ZIP) as archive:
        return nbformat.reads(archive.read(f"chapters/{name}.ipynb").decode("utf-8"), as_version=4)


def screenshot(locator, name: str) -> None:
    locator.scroll_into_view_if_needed()
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    locator.screenshot(path=str(ARTEFACTS / name))
    print(f"screenshot: {ARTEFACTS / name}")


def wait_until(page, condition: str, failure) -> None:
    """Wait (bounded) until the page's JavaScript ``condition`` holds; on time-out fail saying ``failure()``."""
    try:
        page.wait_for_function(condition, timeout=RENDER_TIMEOUT_MS, polling=200)
    except PlaywrightTimeout:
        pytest.fail(failure())


def open_notebook(visit_server, jupyterlab, name: str):
    """The notebook chapters/<name>.ipynb open in JupyterLab, its document loaded (JupyterLab's promise)."""
    visit = visit_server(jupyterlab, f"lab/tree/chapters/{name}.ipynb?reset")  # not the last test's open notebooks
    try:
        visit.page.wait_for_function(
            """name => window.jupyterapp && jupyterapp.shell.currentWidget
                       && jupyterapp.shell.currentWidget.context && jupyterapp.shell.currentWidget.context.path
                       === `chapters/${name}.ipynb`""", arg=name, timeout=RENDER_TIMEOUT_MS, polling=200)
        visit.page.evaluate("() => jupyterapp.shell.currentWidget.context.ready.then(() => true)")
    except PlaywrightTimeout:
        pytest.fail(f"JupyterLab did not open chapters/{name}.ipynb within {RENDER_TIMEOUT_MS / 1000:.0f} s; "
                    f"console errors: {visit.console_errors[:5]}")
    return visit


# the display formulas inside quoted boxes, as MathJax typeset them: how many, and the > operators in them
_BOXED_MATH = """() => {
  const boxed = [...document.querySelectorAll('.jp-RenderedMarkdown blockquote mjx-container[display="true"]')];
  return {count: boxed.length, greater: boxed.map(m => [...m.querySelectorAll('mjx-assistive-mml mo')]
            .filter(o => o.textContent === '>').length).reduce((a, b) => a + b, 0)};
}"""


def boxed_display_math(notebook) -> list[str]:
    """The display formulas written inside a quote of the notebook's Markdown."""
    return [tex for cell in notebook.cells if cell.cell_type == "markdown"
            for line in cell.source.splitlines() if line.startswith(">")
            for tex in re.findall(r"\$\$(.+?)\$\$", line)]


def test_a_boxs_display_math_reaches_mathjax_with_no_quote_marker_in_it(visit_server, jupyterlab):
    formulas = boxed_display_math(zipped(BOXES))
    assert len(formulas) >= 2, f"only {len(formulas)} display formulas in the boxes of {BOXES}"
    expected = sum(tex.count(">") + tex.count("\\gt") for tex in formulas)
    page = open_notebook(visit_server, jupyterlab, BOXES).page
    wait_until(page, f"() => ({_BOXED_MATH})().count >= {len(formulas)}", lambda: (
        f"MathJax typeset {page.evaluate(_BOXED_MATH)['count']} of the {len(formulas)} display formulas in the boxes "
        f"of {BOXES} within {RENDER_TIMEOUT_MS / 1000:.0f} s"))
    typeset = page.evaluate(_BOXED_MATH)
    assert typeset == {"count": len(formulas), "greater": expected}, (
        f"{typeset['greater']} '>' in the boxes' formulas as MathJax read them, {expected} in the notebook")
    boxes = page.locator(".jp-RenderedMarkdown blockquote >> visible=true")
    screenshot(boxes.filter(has_text="Definition 4.1").first, "reader-definition-in-jupyterlab.png")
    screenshot(boxes.filter(has_text="Exercise 4.2").first, "reader-exercise-in-jupyterlab.png")


# a code cell of the open notebook as JupyterLab shows it (cells counted as in the notebook file)
_CELL = """index => {
  const cell = jupyterapp.shell.currentWidget.content.widgets[index];
  const shown = selector => [...cell.node.querySelectorAll(selector)].some(e => e.checkVisibility());
  return {inputHidden: cell.inputHidden, editorShown: shown('.jp-InputArea-editor'),
          placeholderShown: shown('.jp-InputPlaceholder'),
          images: [...cell.node.querySelectorAll('.jp-OutputArea-output img')].map(i => ({
            loaded: i.complete && i.naturalWidth > 0, shown: i.checkVisibility()})),
          outputText: [...cell.node.querySelectorAll('.jp-OutputArea-output')].map(o => o.innerText).join('\\n')};
}"""


def test_hidden_code_is_folded_and_an_interactive_figure_shows_its_picture_before_it_runs(visit_server, jupyterlab):
    notebook = zipped(BOXES)
    hidden = next(index for index, cell in enumerate(notebook.cells) if cell.cell_type == "code"
                  and "hide-input" in cell.metadata.get("tags", []))
    figure = next(index for index, cell in enumerate(notebook.cells) if cell.cell_type == "code"
                  and "with_static_page(" in cell.source)
    page = open_notebook(visit_server, jupyterlab, BOXES).page
    wait_until(page, f"() => ({_CELL})({figure}).images.some(i => i.loaded)", lambda: (
        f"the interactive figure (cell {figure}) of {BOXES} shows no picture before it runs: "
        f"{page.evaluate(_CELL, figure)}"))
    folded = page.evaluate(_CELL, hidden)
    assert folded["inputHidden"] and not folded["editorShown"] and folded["placeholderShown"], folded
    shown = page.evaluate(_CELL, figure)
    assert any(image["loaded"] and image["shown"] for image in shown["images"]), shown["images"]
    assert "VBox(" not in shown["outputText"] and "HBox(" not in shown["outputText"], shown["outputText"][:200]
    page.evaluate("i => jupyterapp.shell.currentWidget.content.widgets[i].node"
                  ".setAttribute('data-reader-test', 'figure')", figure)
    screenshot(page.locator("[data-reader-test=figure]"), "reader-interactive-figure-in-jupyterlab.png")


# once the kernel has started and JupyterLab has written what it learnt of it (its promises, which JupyterLab's own
# handlers awaited first), whether the document is modified; then close it
_AFTER_THE_KERNEL_STARTS = """async () => {
  const panel = jupyterapp.shell.currentWidget;
  await panel.context.ready;
  await panel.sessionContext.ready;
  const kernel = panel.sessionContext.session.kernel;
  await kernel.info;
  await kernel.spec;
  await Promise.all(panel.content.widgets.map(cell => cell.ready));
  window.readerPanel = panel;
  return {dirty: panel.context.model.dirty, kernel: kernel.name,
          metadata: panel.context.model.toJSON().metadata};
}"""


def test_opening_an_untouched_notebook_and_closing_it_changes_nothing(visit_server, jupyterlab):
    page = open_notebook(visit_server, jupyterlab, BOXES).page
    opened = page.evaluate(_AFTER_THE_KERNEL_STARTS)
    assert opened["kernel"] == "python3"
    metadata = zipped(BOXES).metadata
    assert not opened["dirty"], (f"JupyterLab modified the notebook on opening it: kernelspec "
                                 f"{opened['metadata'].get('kernelspec')} (the file: {metadata.get('kernelspec')})")
    page.evaluate("() => window.readerPanel.close()")
    try:
        page.wait_for_function("() => window.readerPanel.isDisposed || !!document.querySelector('.jp-Dialog')",
                               timeout=RENDER_TIMEOUT_MS, polling=100)
    except PlaywrightTimeout:
        pytest.fail("JupyterLab neither closed the notebook nor asked about it")
    assert page.evaluate("() => !document.querySelector('.jp-Dialog')"), "closing the untouched notebook asks to save"
