"""Helpers of the launch tests: a clean copy of the repository, as a launch service would fetch it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tracked_copy(destination: Path, under: str = ".") -> Path:
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
