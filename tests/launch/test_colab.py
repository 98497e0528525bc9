"""Colab: every notebook opens with the install cell, and that cell makes a bare kernel able to run the book.

The cell (tools/install_cell.py renders it from `_config.yml`) installs `attnbook` from the repository
when the kernel lacks it. The fallback is tested for real: a fresh virtual environment shaped like a Colab
kernel (the scientific stack present, attnbook and myst-nb missing: the notebooks need no myst-nb) runs the
cell's exact code with ATTNBOOK_INSTALL_FROM pointing at a clean copy of the package, and then imports and
uses the package.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import time
import tomllib
from pathlib import Path

import jupytext
import yaml
from packaging.requirements import Requirement

from tools import ROOT, install_cell
from tools.execution import notebook_sources

MISSING_ON_COLAB = ("attnbook", "myst_nb")  # importable names; the rest of the stack is on Colab (myst-nb: never needed)
USE_THE_PACKAGE = """
import importlib.util

import numpy as np

import attnbook
from attnbook import scaled_dot_product_attention, softmax

weights = softmax(np.array([[0.0, np.log(3.0)]]))  # (1, 2)
assert np.allclose(weights, [[0.25, 0.75]]), weights
output, _ = scaled_dot_product_attention(np.eye(2), np.eye(2), np.arange(4.0).reshape(2, 2))  # (2, 2)
assert output.shape == (2, 2)
assert importlib.util.find_spec("myst_nb") is None, "the install cell brought myst-nb, which no notebook imports"
print(attnbook.__file__)
"""


def bare_python_env() -> dict[str, str]:
    """The environment of a child interpreter: no PYTHONPATH leaking the checkout in."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", install_cell.OVERRIDE_VARIABLE)}


def hides_a_missing_package(entry: str) -> bool:
    """Whether a site-packages entry belongs to a package a Colab kernel lacks (module, dist-info, editable hook)."""
    name = entry.lower().replace("-", "_")
    return any(name.startswith(missing) or f"_{missing}_" in name or f".{missing}_" in name
               for missing in MISSING_ON_COLAB)


def colab_like_interpreter(folder: Path) -> Path:
    """A fresh venv that borrows this environment's packages, except attnbook and myst-nb.

    The borrowed packages are symlinks in a folder that a .pth file puts on sys.path (its own .pth
    files are not run, so the checkout's editable hook is not loaded either); pip comes with them.
    """
    venv, borrowed = folder / "venv", folder / "borrowed"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    borrowed.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not hides_a_missing_package(entry.name):
            (borrowed / entry.name).symlink_to(entry)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    (Path(purelib) / "borrowed-packages.pth").write_text(f"{borrowed}\n")
    return python


def test_every_notebook_and_its_pair_open_with_the_install_cell():
    assert len(notebook_sources()) >= 18, "chapters and homework sources not found"
    assert install_cell.stale() == [], "run python -m tools.install_cell, then make notebooks"


def test_the_cell_installs_from_the_repository_named_in_the_config():
    with open(ROOT / "_config.yml", encoding="utf-8") as config:
        repository = yaml.safe_load(config)["repository"]
    code = jupytext.read(ROOT / "chapters" / "masks.ipynb").cells
    cell = next(c for c in code if c.cell_type == "code").source
    requirement = Requirement(f"attnbook @ {install_cell.default_source()}")
    assert requirement.url == f"git+{repository['url']}@{repository['branch']}#subdirectory=code"
    assert f'"{requirement.url}"' in cell, "the notebook installs from another address than _config.yml names"
    project = tomllib.loads((ROOT / "code" / "pyproject.toml").read_text())["project"]
    assert project["name"] == requirement.name


def test_the_cell_does_nothing_where_the_book_is_installed():
    env = {**bare_python_env(), install_cell.OVERRIDE_VARIABLE: "file:///nonexistent/attnbook"}
    result = subprocess.run([sys.executable, "-c", install_cell.install_cell_source()], env=env,
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", ""), result.stderr


def test_the_cell_installs_the_package_into_a_kernel_without_it(tmp_path, tracked_copy):
    python = colab_like_interpreter(tmp_path)
    for name in MISSING_ON_COLAB:
        probe = subprocess.run([str(python), "-c", f"import {name}"], env=bare_python_env(),
                               capture_output=True, text=True)
        assert "ModuleNotFoundError" in probe.stderr, f"the bare interpreter can import {name}"
    package = tracked_copy(tmp_path / "clean", under="code") / "code"
    env = {**bare_python_env(), install_cell.OVERRIDE_VARIABLE: package.as_uri()}
    notebook = jupytext.read(ROOT / "exercises" / "hw_masks.ipynb")
    cell = next(c for c in notebook.cells if c.cell_type == "code").source  # exactly what a student runs
    start = time.perf_counter()
    result = subprocess.run([str(python), "-c", cell + "\n" + USE_THE_PACKAGE], env=env, capture_output=True,
                            text=True, timeout=600)
    seconds = time.perf_counter() - start
    print(f"the install cell installed attnbook and ran it in {seconds:.1f} s")
    assert result.returncode == 0, result.stderr[-3000:]
    venv = python.parent.parent
    for imported in result.stdout.split():
        assert Path(imported).is_relative_to(venv), f"{imported} was not installed by the cell into the venv"
