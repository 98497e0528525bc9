"""Fixtures of the artefact tests: what the built site offers for download, fetched and used as a reader does.

The site in _build/html (`make book`; `make test` runs `make pdf` first, so the site carries the PDF) is
served on 127.0.0.1, and every artefact is downloaded through the link a page shows for it. The notebooks
zip is unzipped into a fresh folder and the install commands of the README at its root run there,
verbatim, in bash: that reader environment is made once per session (the `reader` fixture) and shared
by every test. pip may reach the package index, as CI's does; nothing comes from this repository (the
environment's `attnbook` must be the zip's), and the notebooks' install cell, which would fetch `attnbook`
from GitHub, is pointed at an address that fails. The terminal summary prints how long the install and
each notebook took.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tools.built_site import HTML
from tools.extensions.notebooks_zip import NOTEBOOKS_ZIP

INSTALL_TIMEOUT_S = 900  # a cold pip cache downloads jupyterlab, matplotlib and their dependencies
TIMINGS: list[str] = []  # printed in the terminal summary


def page_links(page: str) -> list[str]:
    """The href of every <a> of a built page, in order."""
    return re.findall(r'<a\b[^>]*\bhref="([^"]+)"', (HTML / page).read_text(encoding="utf-8"))


def download(site_url: str, page: str, href: str) -> bytes:
    """What a reader gets by following the link `href` of `page` (a path in the site) from the served site."""
    url = urllib.request.urljoin(f"{site_url}/{page}", href)
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.read()
    except OSError as error:
        pytest.fail(f"the link {href} of {page} does not download ({url}): {error}")


def readme_block(readme: str, heading: str) -> str:
    """The first ```bash block of the README's section `## heading`."""
    section = re.search(rf"^## {re.escape(heading)}\b.*?(?=^## |\Z)", readme, re.MULTILINE | re.DOTALL)
    assert section, f"the zip's README has no section '## {heading}'"
    block = re.search(r"^```bash\n(.*?)^```", section.group(0), re.MULTILINE | re.DOTALL)
    assert block, f"the section '## {heading}' of the zip's README shows no ```bash commands"
    return block.group(1)


def outside_any_virtual_environment() -> dict[str, str]:
    """This process's environment as a reader's shell has it: no virtual environment active, no
    PYTHONPATH, no variable of the book's build (ATTNBOOK_*)."""
    environment = {name: value for name, value in os.environ.items()
                   if name not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not name.startswith("ATTNBOOK_")}
    folders = [folder for folder in environment.get("PATH", "").split(os.pathsep)
               if folder and not (Path(folder).parent / "pyvenv.cfg").is_file()]
    environment["PATH"] = os.pathsep.join(folders)
    return environment


@dataclass
class Reader:
    """The folder a reader unzipped the notebooks into, and the environment its README installed."""

    folder: Path
    readme: str
    environment: dict[str, str] = field(default_factory=dict)  # the shell's, with the venv activated

    def commands(self, heading: str) -> str:
        """The shell commands the README gives under `## heading`."""
        return readme_block(self.readme, heading)

    @property
    def python(self) -> Path:
        return self.folder / ".venv" / "bin" / "python"

    def run(self, command: list[str], timeout: float, what: str, cwd: Path | None = None):
        """Run `command` in the activated environment; fail naming `what` if it outlasts `timeout` s."""
        try:
            return subprocess.run(command, cwd=cwd or self.folder, env=self.environment, capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{what} did not finish within {timeout:.0f} s")


@pytest.fixture(scope="session")
def fetch(site_url):
    """fetch(page, href) -> bytes: what following the link `href` of the built `page` downloads."""
    return lambda page, href: download(site_url, page, href)


@pytest.fixture(scope="session")
def notebooks_zip(site_url) -> bytes:
    """The zip a reader downloads through the introduction's link."""
    links = [href for href in page_links("chapters/intro.html") if href.endswith(NOTEBOOKS_ZIP)]
    assert links, f"the introduction does not link {NOTEBOOKS_ZIP}"
    return download(site_url, "chapters/intro.html", links[0])


@pytest.fixture(scope="session")
def timings() -> list[str]:
    """Lines for the terminal summary: how long what a reader waits for took."""
    return TIMINGS


@pytest.fixture(scope="session")
def unzipped(notebooks_zip, tmp_path_factory):
    """The zip unzipped in a fresh folder, with the README at its root; nothing installed yet. The folder,
    with the environment `reader` installs in it (some hundreds of MB), is removed after the session."""
    folder = tmp_path_factory.mktemp("reader") / "attention-computed-notebooks"
    archive = folder.parent / NOTEBOOKS_ZIP
    archive.write_bytes(notebooks_zip)
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(folder)
    readme_path = folder / "README.md"
    assert readme_path.is_file(), f"{NOTEBOOKS_ZIP} has no README.md at its root: a reader is not told what to do"
    yield Reader(folder=folder, readme=readme_path.read_text(encoding="utf-8"))
    shutil.rmtree(folder.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def reader(unzipped) -> Reader:
    """The unzipped folder with the README's install commands run there, verbatim, in bash."""
    folder, readme = unzipped.folder, unzipped.readme
    shell = outside_any_virtual_environment()
    version = subprocess.run(["python3", "-c", "import sys; print(sys.version_info >= (3, 11), sys.executable)"],
                             env=shell, capture_output=True, text=True)
    assert version.stdout.startswith("True"), (
        f"the README's `python3` is not Python 3.11 or newer here ({version.stdout or version.stderr}): "
        "put one first on PATH")
    install = readme_block(readme, "Install")
    start = time.perf_counter()
    try:
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", install], cwd=folder, env=shell,
                                capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the README's install commands did not finish within {INSTALL_TIMEOUT_S} s:\n{install}")
    seconds = time.perf_counter() - start
    assert result.returncode == 0, (
        f"the README's install commands failed (exit {result.returncode}):\n{install}\n{result.stderr[-3000:]}")
    TIMINGS.append(f"reader environment installed from the zip's README in {seconds:.0f} s")

    environment = dict(shell, VIRTUAL_ENV=str(folder / ".venv"),
                       PATH=os.pathsep.join([str(folder / ".venv" / "bin"), shell["PATH"]]),
                       # the notebooks' install cell installs attnbook from this address when the kernel
                       # lacks it: here that must not happen, and would fail loudly if it did
                       ATTNBOOK_INSTALL_FROM="file:///attnbook-must-come-from-the-notebooks-zip")
    return Reader(folder=folder, readme=readme, environment=environment)


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.section("artefacts: what a reader waits for")
        for line in TIMINGS:
            terminalreporter.write_line(line)
