"""Binder: the Dockerfile repo2docker would build from this repository installs Python 3.11 and the book.

mybinder.org builds the image with repo2docker from `runtime.txt` (python-3.11) and `requirements.txt`
(the pins and `-e ./code`). The test runs the real `jupyter-repo2docker --no-build` on a clean copy of
the tracked files. `--no-build` renders the Dockerfile and prints it without contacting a container
engine (DOCKER_HOST points nowhere to prove it), so no Docker daemon is needed.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import time
import tomllib
import warnings
from pathlib import Path

import jupytext
import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

with warnings.catch_warnings():  # repo2docker 2026.4.0 imports python-json-logger's deprecated module path
    warnings.simplefilter("ignore", DeprecationWarning)
    import repo2docker
    from repo2docker.buildpacks.base import BuildPack

from tools import ROOT
from tools.execution import notebook_sources

REPO2DOCKER = Path(sys.executable).parent / "jupyter-repo2docker"
BINDER_UID, BINDER_USER = "1000", "jovyan"  # the user mybinder.org builds images for
FULL_COPY = f"COPY --chown={BINDER_UID}:{BINDER_UID} src/ ${{REPO_DIR}}/"
PIP_REQUIREMENTS = 'RUN ${KERNEL_PYTHON_PREFIX}/bin/pip install --no-cache-dir -r "requirements.txt"'


def instructions(dockerfile: str) -> list[str]:
    """The Dockerfile's instructions, one string each: continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", dockerfile)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, tracked_copy) -> tuple[list[str], str]:
    """The Dockerfile instructions repo2docker prints for a clean copy of the repository, and its log."""
    repo = tracked_copy(tmp_path_factory.mktemp("binder") / "repo")
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    start = time.perf_counter()
    result = subprocess.run(
        [str(REPO2DOCKER), "--no-build", "--user-id", BINDER_UID, "--user-name", BINDER_USER, str(repo)],
        capture_output=True, text=True, env=env, timeout=120,
    )
    print(f"jupyter-repo2docker --no-build took {time.perf_counter() - start:.1f} s")
    assert result.returncode == 0, result.stderr
    return instructions(result.stdout), result.stderr


def test_repo2docker_picks_the_python_buildpack_for_python_3_11(rendered):
    _, log = rendered
    assert (ROOT / "runtime.txt").read_text().strip() == "python-3.11"
    assert "Building conda environment for python=3.11" in log


def test_the_dockerfile_installs_a_locked_python_3_11_environment(rendered):
    lines, _ = rendered
    lock = Path(repo2docker.__file__).parent / "buildpacks/conda/environment.py-3.11-linux-64.lock"
    context_name, _ = BuildPack.generate_build_context_filename(str(lock))
    assert f"COPY --chown={BINDER_UID}:{BINDER_UID} {context_name} /tmp/env/environment.lock" in lines
    assert any(line.startswith("RUN") and "time /tmp/install-base-env.bash" in line for line in lines)
    pinned = re.findall(r"/python-(\d+\.\d+)\.\d+-[^/]*cpython\.conda", lock.read_text())
    assert pinned == ["3.11"], f"the lock file repo2docker copies pins Python {pinned}"


def test_the_whole_repository_is_copied_before_requirements_are_installed(rendered):
    """`-e ./code` needs the package's folder in the image: pip must run after the full copy, in REPO_DIR."""
    lines, _ = rendered
    assert lines.count(PIP_REQUIREMENTS) == 1, "requirements.txt is not installed exactly once"
    pip_at, copy_at = lines.index(PIP_REQUIREMENTS), lines.index(FULL_COPY)
    assert copy_at < pip_at, "requirements.txt would be installed before the repository is in the image"
    workdir_at = max(i for i, line in enumerate(lines[:pip_at]) if line.startswith("WORKDIR"))
    assert lines[workdir_at] == "WORKDIR ${REPO_DIR}", "pip would not run in the repository's folder"
    user_at = max(i for i, line in enumerate(lines[:pip_at]) if line.startswith("USER"))
    assert lines[user_at] == "USER ${NB_USER}", "pip would run as root, not as the owner of the copy"


def test_requirements_install_the_attnbook_package_from_code():
    requirements = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    assert "-e ./code" in requirements
    project = tomllib.loads((ROOT / "code" / "pyproject.toml").read_text())["project"]
    assert project["name"] == "attnbook"
    assert "3.11" in SpecifierSet(project["requires-python"]), "the package refuses Binder's Python 3.11"


# the build's tool-chain (requirements-build.txt): none of it may reach a reader's kernel; jupyterlite-pyodide-kernel's
# JupyterLab extension fails on every page load of a local Jupyter, and its pins would replace Binder's server packages
BUILD_TOOLS = {"jupyter-book", "sphinx", "myst-nb", "myst-parser", "jupyterlite-core", "jupyterlite-sphinx",
               "jupyterlite-pyodide-kernel", "jupytext", "nbval", "pytest", "hypothesis", "jupyter-cache"}


def reader_requirements() -> list[str]:
    """The distributions requirements.txt names (`-e ./code` is the package, attnbook)."""
    names = []
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line == "-e ./code":
            names.append("attnbook")
        elif line:
            assert not line.startswith("-"), f"requirements.txt: {line!r} (a reader installs pins and the package)"
            names.append(Requirement(line).name)
    return names


def installed_closure(names: list[str]) -> set[str]:
    """The distributions that installing ``names`` brings, read from this environment's metadata (no extras)."""
    seen, queue = set(), [canonicalize_name(name) for name in names]
    while queue:
        name = queue.pop()
        if name in seen:
            continue
        seen.add(name)
        for line in importlib.metadata.distribution(name).requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                queue.append(canonicalize_name(requirement.name))
    return seen


def optional(node: ast.AST, parents: dict) -> bool:
    """Whether an import sits in a ``try`` that catches its ImportError (the notebook runs without it)."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.Try) and any(
                isinstance(handler.type, ast.Name) and handler.type.id in ("ImportError", "ModuleNotFoundError")
                for handler in node.handlers):
            return True
    return False


def notebook_imports() -> dict[str, str]:
    """Top-level module -> a source importing it, for every import in the code cells of the chapters and the
    homework (all a reader or a student runs), outside the standard library and optional imports."""
    found = {}
    for source in notebook_sources():
        for cell in jupytext.read(source).cells:
            if cell.cell_type != "code":
                continue
            tree = ast.parse(cell.source)
            parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    modules = [node.module]
                else:
                    continue
                for module in modules:
                    top = module.split(".")[0]
                    if top not in sys.stdlib_module_names and not optional(node, parents):
                        found.setdefault(top, source.relative_to(ROOT).as_posix())
    return found


def test_the_reader_requirements_bring_every_package_the_notebooks_import():
    closure = installed_closure(reader_requirements())
    providers = importlib.metadata.packages_distributions()
    imports = notebook_imports()
    assert {"numpy", "matplotlib", "ipywidgets", "attnbook"} <= set(imports), imports
    missing = {module: source for module, source in imports.items()
               if not {canonicalize_name(name) for name in providers.get(module, [])} & closure}
    assert missing == {}, "imported by a notebook but not installed by requirements.txt"


def test_the_reader_requirements_hold_none_of_the_build_tool_chain():
    """requirements.txt is what a reader's kernel needs; the build's tool-chain is in requirements-build.txt."""
    assert installed_closure(reader_requirements()) & BUILD_TOOLS == set()
    build = (ROOT / "requirements-build.txt").read_text(encoding="utf-8").splitlines()
    assert "-r requirements.txt" in build and "-r requirements-build.txt" in (
        ROOT / "requirements-test.txt").read_text(encoding="utf-8").splitlines()


def test_binder_opens_jupyter_where_the_readme_lies(rendered):
    """A learner who opens `main` itself on Binder lands in the repository's folder, whose README says where the
    notebooks are (the test below): the image's last WORKDIR, where Jupyter starts, is the copy's root."""
    lines, _ = rendered
    workdirs = [line for line in lines if line.startswith("WORKDIR")]
    assert workdirs[-1] == "WORKDIR ${REPO_DIR}"
    assert (ROOT / "README.md").is_file()


def test_the_readme_sends_a_learner_on_main_to_the_notebooks_branch_on_binder():
    """`main` holds MyST sources, which Jupyter shows raw: the README's opening opens the reader notebooks (the
    branch `make publish` writes and the pages' buttons open) on the Binder the book's config names."""
    from tools.extensions.reader_notebooks import book_config, launch_branch

    config = book_config()
    repository = config["repository"]["url"].removeprefix("https://github.com/")
    opening = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## ")[0]
    binder = f"{config['launch_buttons']['binderhub_url']}/v2/gh/{repository}/{launch_branch()}?urlpath=tree/chapters"
    assert f"]({binder})" in opening, f"the README's opening does not link {binder}"
    assert f"<{config['html']['baseurl']}>" in opening and f"`{launch_branch()}` branch" in opening
