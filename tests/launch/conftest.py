"""What the launch tests (Binder, Colab) share: a clean copy of the repository, as a launch service fetches it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tools import ROOT


def copy_tracked_files(destination: Path, under: str = ".") -> Path:
    """Copy the files git tracks below `under` into destination (no .venv, no _build, no egg-info)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--", under], cwd=ROOT, check=True,
                            capture_output=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is not part of the copy
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


@pytest.fixture(scope="session")
def tracked_copy():
    """``tracked_copy(destination, under=".")``: the tracked files below `under`, copied into destination."""
    return copy_tracked_files
