"""The efficient-attention benchmark's figures, as last measured for the book.

`make bench` (benchmarks/run.py) measures plain, tiled and PyTorch attention and writes its figures,
with a description of the machine, to ``attnbook/data/benchmark_results.json``. The file ships inside
the package, so the chapter "Efficient attention" can show the figures wherever it runs: in the book's
build, on Binder, on Colab and in JupyterLite, where the repository's other folders are not at hand.

Example:
    >>> record = load_benchmark_results()
    >>> sorted(key for key in record if key in ("machine", "plain_vs_matmul", "tiled_memory"))
    ['machine', 'plain_vs_matmul', 'tiled_memory']
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

RESULTS_FILE = "benchmark_results.json"
RESULT_SECTIONS = ("machine", "plain_vs_matmul", "tiled_memory", "tiled_time", "goals")


def benchmark_results_path() -> Path:
    """Where the package keeps the benchmark's figures (the file `make bench` writes)."""
    return Path(str(resources.files("attnbook").joinpath("data", RESULTS_FILE)))


def load_benchmark_results() -> dict:
    """The last benchmark figures, as a dict with the sections `make bench` writes.

    Raises FileNotFoundError naming the file when it is missing, and ValueError naming the missing
    sections when the file is not a complete benchmark record.
    """
    path = benchmark_results_path()
    if not path.is_file():
        raise FileNotFoundError(f"no benchmark figures at {path}: run `make bench` to measure them")
    record = json.loads(path.read_text(encoding="utf-8"))
    missing = [section for section in RESULT_SECTIONS if section not in record]
    if missing:
        raise ValueError(f"{path} is not a complete benchmark record: it lacks {', '.join(missing)}")
    return record
