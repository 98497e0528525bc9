"""A reader notebook opened in JupyterLab, as a learner who downloaded it opens it: the prose reads like the page.

JupyterLab (the version the notebooks zip's README installs) serves a folder holding one chapter's download
on 127.0.0.1, with no token, no news and no update check; Chromium opens the notebook there with every
request that leaves 127.0.0.1 recorded and aborted. JupyterLab's own Markdown renderer must then show a number
the chapter's page glues, and the chapter's solutions folded (a closed ``<details>`` whose content is not
shown). A screenshot of the first folded solution is left in _build/test-artefacts/.
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
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tools.build_book import BUILD
from tools.built_site import HTML
from tools.extensions.notebooks_zip import JUPYTERLAB_VERSION

CHAPTER = "scaled_dot_product_attention"
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
    folder.mkdir()
    (folder / f"{CHAPTER}.ipynb").write_bytes((HTML / "_sources" / "chapters" / f"{CHAPTER}.ipynb").read_bytes())
    # every cell in the page (no windowing), so that the test finds the folded solutions far down
    tracker = settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}), encoding="utf-8")
    port = free_port()
    environment = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTER_CONFIG_DIR": str(root / "config"),
                   "JUPYTER_RUNTIME_DIR": str(root / "runtime")}
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.root_dir={folder}",
               "--ServerApp.ip=127.0.0.1", "--allow-root", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
               "--IdentityProvider.token=", "--ServerApp.password=", "--LabApp.news_url=None",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
               "--LabApp.extension_manager=readonly"]  # the "pypi" one asks the package index at start
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
    visit = visit_server(jupyterlab, f"lab/tree/{CHAPTER}.ipynb")
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
