"""Assemble a Pyodide core from registries, for the lite browser test to serve in place of Pyodide's CDN.

Usage (`make test` runs it once): python -m tools.pyodide_core OUT_DIR

* The core files (pyodide.mjs, pyodide.asm.mjs/.wasm, python_stdlib.zip, pyodide-lock.json) come from the
  npm package `pyodide`, pinned in web/package.json at the version the pinned jupyterlite-pyodide-kernel
  loads by default (web/node_modules, installed by `npm ci`).
* The pure-Python wheels the kernel loads while it starts (micropip, then IPython and jedi, with every
  dependency the lock lists for them) are downloaded from PyPI at the versions of the lock.
* Pyodide repackages its wheels, so PyPI's files differ from the CDN's: the lock's entries for those
  packages get the PyPI file names and sha256 digests. `lock_substitutions` gives the same rewrite to
  the lite site's own lock, whose entries point at the CDN.

Pyodide's compiled wheels (numpy, matplotlib, ...) are in no registry reachable here; the core has none.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from tools import ROOT

PYODIDE_NPM = ROOT / "web" / "node_modules" / "pyodide"
CORE_FILES = ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip"]
LOCK = "pyodide-lock.json"
# what the pyodide kernel's worker loads from the lock as it starts: micropip (loadPackage), then
# `piplite.install` of jedi and ipython (ipykernel, comm and pyodide-kernel come from the lite site)
KERNEL_START_PACKAGES = ["micropip", "jedi", "ipython"]


def dependency_closure(packages: dict, roots: list[str]) -> list[str]:
    """The lock entries of `roots` and of everything they depend on, in a stable order."""
    seen: list[str] = []
    todo = list(roots)
    while todo:
        name = todo.pop(0).lower().replace("_", "-")
        if name not in seen:
            seen.append(name)
            todo += packages[name]["depends"]
    return sorted(seen)


def download_wheels(packages: dict, names: list[str], python: str, out: Path) -> dict[str, Path]:
    """Download the PyPI wheel of each package at the lock's version (for Pyodide's Python); name -> path."""
    specs = [f"{name}=={packages[name]['version']}" for name in names]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--python-version", python, "--dest", str(out), *specs],
        check=True,
    )
    wheels = {}
    for name in names:
        stem = name.replace("-", "_").lower()
        found = [w for w in out.glob("*.whl") if w.name.lower().startswith(f"{stem}-{packages[name]['version']}-")]
        if len(found) != 1:
            raise RuntimeError(f"no single PyPI wheel of {name} {packages[name]['version']} in {out}: {found}")
        wheels[name] = found[0]
    return wheels


def lock_substitutions(core_dir: Path) -> dict[str, dict]:
    """Package name -> the file name and sha256 its entry has in the assembled core's lock."""
    return json.loads((core_dir / "substitutions.json").read_text(encoding="utf-8"))


def assemble(out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name in CORE_FILES + [LOCK]:
        shutil.copy2(PYODIDE_NPM / name, out / name)
    lock = json.loads((out / LOCK).read_text(encoding="utf-8"))
    packages = lock["packages"]
    names = dependency_closure(packages, KERNEL_START_PACKAGES)
    python = ".".join(lock["info"]["python"].split(".")[:2])  # e.g. 3.14
    wheels = download_wheels(packages, names, python, out)
    substitutions = {}
    for name, wheel in wheels.items():
        entry = {"file_name": wheel.name, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}
        packages[name].update(entry)
        substitutions[name] = entry
    (out / LOCK).write_text(json.dumps(lock, indent=1), encoding="utf-8")
    (out / "substitutions.json").write_text(json.dumps(substitutions, indent=1, sort_keys=True), encoding="utf-8")
    size = sum(p.stat().st_size for p in out.iterdir()) / 2**20
    print(f"assembled a Pyodide {lock['info']['python']} core with {len(wheels)} PyPI wheels in {out} ({size:.1f} MiB)")


if __name__ == "__main__":
    assemble(Path(sys.argv[1]))
