"""attnbook.measure.timing: one timer built on timeit, a log-log slope, and the benchmark's shipped figures."""

import json

import numpy as np
import pytest

from attnbook.measure import timing
from attnbook.measure.timing import (
    CLOCKS,
    RESULT_SECTIONS,
    benchmark_results_path,
    load_benchmark_results,
    loglog_slope,
    time_calls,
    time_layers,
)

# --- the timer ---------------------------------------------------------------------------------------


def test_time_calls_calls_each_function_warmup_plus_repeats_times_interleaved():
    order = []
    seconds = time_calls([lambda: order.append("a"), lambda: order.append("b")], repeats=3, warmup=2)
    assert seconds.shape == (2,) and np.all(seconds >= 0)
    assert order == ["a", "b"] * 5  # round by round, never all calls of one function in a row


@pytest.mark.parametrize("clock", list(CLOCKS))
def test_time_calls_measures_busy_work_on_both_clocks(clock):
    busy = lambda: sum(i * i for i in range(20_000))  # noqa: E731
    assert time_calls([busy], repeats=3, clock=clock)[0] > 0


def test_longer_work_takes_longer():
    short, long = time_calls([lambda: sum(range(1_000)), lambda: sum(range(200_000))], repeats=3)
    assert long > short


def test_the_minimum_is_at_most_the_median():
    calls = [lambda: sorted(range(5_000), key=lambda i: -i)]
    fastest = time_calls(calls, repeats=5, statistic="min")[0]
    assert fastest > 0 and fastest <= time_calls(calls, repeats=5, statistic="median")[0] * 10


def test_time_calls_refuses_an_unknown_clock_or_statistic_and_no_calls():
    with pytest.raises(ValueError, match=r"^clock must be one of 'cpu', 'wall', got 'gpu'$"):
        time_calls([len], clock="gpu")
    with pytest.raises(ValueError, match=r"^statistic must be 'min' or 'median', got 'mean'$"):
        time_layers("recurrent", [(4, 2)], statistic="mean")
    with pytest.raises(TypeError, match=r"^calls must be a non-empty sequence of functions"):
        time_calls([])
    with pytest.raises(ValueError, match=r"^repeats must be at least 1, got 0$"):
        time_calls([len], repeats=0)


def test_time_layers_interleaves_the_shapes_and_returns_one_time_each():
    times = time_layers("self-attention", [(8, 4), (16, 4), (32, 4)], repeats=3, statistic="median")
    assert times.shape == (3,) and np.all(times > 0)


@pytest.mark.parametrize("kind", ["self-attention", "attention core", "recurrent"])
def test_time_layers_times_each_layer(kind):
    assert time_layers(kind, [(8, 4)], repeats=2)[0] > 0


def test_time_layers_refuses_shapes_that_are_not_pairs():
    with pytest.raises(ValueError, match=r"^shapes must be a non-empty list of \(n, d\) pairs"):
        time_layers("recurrent", [(4, 2, 1)])
    with pytest.raises(ValueError, match=r"^shapes must be a non-empty list"):
        time_layers("recurrent", [])


# --- the slope ---------------------------------------------------------------------------------------


def test_loglog_slope_recovers_exponents():
    sizes = np.array([16, 32, 64, 128])
    assert loglog_slope(sizes, 5 * sizes**2.0) == pytest.approx(2.0)
    assert loglog_slope(sizes, 0.1 * sizes) == pytest.approx(1.0)
    mixed = loglog_slope(sizes, 3 * sizes * 4 * 4 + 2 * sizes**2 * 4)  # a linear and a quadratic term
    assert 1 < mixed < 2


@pytest.mark.parametrize("sizes, values, message", [
    ([1], [1], r"1-D of the same length >= 2"),
    ([1, 2], [1, 2, 3], r"1-D of the same length >= 2"),
    ([0, 2], [1, 2], r"must be positive"),
    ([2, 2], [1, 2], r"sizes are all equal"),
])
def test_loglog_slope_refuses_bad_data(sizes, values, message):
    with pytest.raises(ValueError, match=message):
        loglog_slope(sizes, values)


# --- the benchmark's figures -------------------------------------------------------------------------


def test_the_package_ships_a_complete_benchmark_record():
    record = load_benchmark_results()
    assert set(RESULT_SECTIONS) <= set(record)
    assert record["plain_vs_matmul"]["plain_over_matmul"] > 0
    assert benchmark_results_path().parent.name == "data"


def test_a_missing_record_names_the_file_and_the_command(tmp_path, monkeypatch):
    monkeypatch.setattr(timing, "benchmark_results_path", lambda: tmp_path / "absent.json")
    with pytest.raises(FileNotFoundError, match=r"absent\.json.*make bench"):
        load_benchmark_results()


def test_an_incomplete_record_names_the_missing_sections(tmp_path, monkeypatch):
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"machine": {}, "plain_vs_matmul": {}}), encoding="utf-8")
    monkeypatch.setattr(timing, "benchmark_results_path", lambda: partial)
    with pytest.raises(ValueError, match="lacks tiled_memory, tiled_time, goals"):
        load_benchmark_results()
