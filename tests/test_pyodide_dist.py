"""tools/pyodide_dist.py: the lite site's Pyodide takes a file only if npm's lock vouches for it."""

from __future__ import annotations

import hashlib
import json
import zipfile

import pytest

from tools import pyodide_dist
from tools.pyodide_dist import UnverifiedFile


def _package(name: str, file_name: str, data: bytes, depends=()) -> dict:
    return {"name": name, "version": "1.0", "file_name": file_name, "sha256": hashlib.sha256(data).hexdigest(),
            "depends": list(depends), "imports": [name], "install_dir": "site", "package_type": "package"}


@pytest.fixture
def release(tmp_path):
    """A miniature npm package `pyodide` (core files, lock) and a source wheel carrying its packages."""
    npm = tmp_path / "npm"
    npm.mkdir()
    for name in pyodide_dist.CORE_FILES:
        (npm / name).write_bytes(f"core {name}".encode())
    files = {"numpy-1.0-wasm32.whl": b"numpy bytes", "micropip-1.0.whl": b"micropip", "packaging-1.0.whl": b"pkg",
             "jedi-1.0.whl": b"jedi", "ipython-1.0.whl": b"ipython", "ssl-1.0.whl": b"ssl", "matplotlib-1.0-wasm32.whl": b"mpl",
             "scipy-1.0-wasm32.whl": b"scipy"}
    packages = {
        "numpy": _package("numpy", "numpy-1.0-wasm32.whl", files["numpy-1.0-wasm32.whl"]),
        "micropip": _package("micropip", "micropip-1.0.whl", b"micropip", ["packaging"]),
        "packaging": _package("packaging", "packaging-1.0.whl", b"pkg"),
        "jedi": _package("jedi", "jedi-1.0.whl", b"jedi"),
        "ipython": _package("ipython", "ipython-1.0.whl", b"ipython"),
        "ssl": _package("ssl", "ssl-1.0.whl", b"ssl"),
        "matplotlib": _package("matplotlib", "matplotlib-1.0-wasm32.whl", b"mpl", ["numpy"]),
        "scipy": _package("scipy", "scipy-1.0-wasm32.whl", b"scipy", ["numpy"]),
    }
    lock = {"info": {"version": "0.27.7", "python": "3.12.7"}, "packages": packages}
    (npm / pyodide_dist.LOCK).write_text(json.dumps(lock))
    sources = tmp_path / "sources"
    sources.mkdir()

    def make_source(**replaced: bytes) -> None:
        with zipfile.ZipFile(sources / "carrier-1.0-py3-none-any.whl", "w") as archive:
            for file_name, data in files.items():
                if file_name != "scipy-1.0-wasm32.whl":  # not needed: it must stay on the CDN
                    archive.writestr(pyodide_dist.SOURCE_PREFIX + file_name, replaced.get(file_name, data))

    return npm, sources, make_source, files


def test_assemble_copies_npm_core_and_the_verified_closure_and_points_the_rest_at_the_cdn(release, tmp_path):
    npm, sources, make_source, files = release
    make_source()
    out = tmp_path / "out"
    lock = pyodide_dist.assemble(out, npm, sources)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        pyodide_dist.CORE_FILES + [pyodide_dist.LOCK] + [f for f in files if not f.startswith("scipy")])
    assert (out / "numpy-1.0-wasm32.whl").read_bytes() == b"numpy bytes"
    assert lock["packages"]["numpy"]["file_name"] == "numpy-1.0-wasm32.whl"
    assert lock["packages"]["scipy"]["file_name"] == "https://cdn.jsdelivr.net/pyodide/v0.27.7/full/scipy-1.0-wasm32.whl"
    assert json.loads((out / pyodide_dist.LOCK).read_text()) == lock


def test_a_file_that_differs_from_npms_lock_is_refused_by_name(release, tmp_path):
    npm, sources, make_source, _ = release
    make_source(**{"numpy-1.0-wasm32.whl": b"numpy bytes, altered"})
    out = tmp_path / "out"
    with pytest.raises(UnverifiedFile, match=r"numpy-1\.0-wasm32\.whl in carrier-1\.0-py3-none-any\.whl has sha256"):
        pyodide_dist.assemble(out, npm, sources)
    assert not out.exists(), "nothing is written before every file is verified"


def test_a_file_the_sources_lack_is_named(release, tmp_path):
    npm, sources, make_source, _ = release
    make_source()
    lock = json.loads((npm / pyodide_dist.LOCK).read_text())
    lock["packages"]["numpy"]["depends"] = ["scipy"]  # now needed, but the carrier has no scipy
    (npm / pyodide_dist.LOCK).write_text(json.dumps(lock))
    with pytest.raises(UnverifiedFile, match=r"scipy-1\.0-wasm32\.whl"):
        pyodide_dist.assemble(tmp_path / "out", npm, sources)
