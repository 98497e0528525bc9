"""The benchmark figures ship inside the package and are loaded with clear errors."""

from __future__ import annotations

import json

import pytest

from attnbook import benchmark_record
from attnbook.benchmark_record import RESULT_SECTIONS, benchmark_results_path, load_benchmark_results


def test_the_package_ships_a_complete_benchmark_record():
    record = load_benchmark_results()
    assert set(RESULT_SECTIONS) <= set(record)
    assert record["plain_vs_matmul"]["plain_over_matmul"] > 0
    assert benchmark_results_path().parent.name == "data"


def test_a_missing_record_names_the_file_and_the_command(tmp_path, monkeypatch):
    monkeypatch.setattr(benchmark_record, "benchmark_results_path", lambda: tmp_path / "absent.json")
    with pytest.raises(FileNotFoundError, match=r"absent\.json.*make bench"):
        load_benchmark_results()


def test_an_incomplete_record_names_the_missing_sections(tmp_path, monkeypatch):
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"machine": {}, "plain_vs_matmul": {}}), encoding="utf-8")
    monkeypatch.setattr(benchmark_record, "benchmark_results_path", lambda: partial)
    with pytest.raises(ValueError, match="lacks tiled_memory, tiled_time, goals"):
        load_benchmark_results()
