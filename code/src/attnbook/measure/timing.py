r"""Timing: one timer built on ``timeit``, the slope of a log-log fit, and the benchmark's stored figures.

:func:`time_calls` (and :func:`time_layers` with it), :func:`loglog_slope`; the figures of ``make bench``
ship in the package (:func:`load_benchmark_results`) so the chapters show them wherever they run.

Examples
--------
>>> seconds = time_calls([lambda: sorted(range(100)), lambda: sorted(range(1000))], repeats=3)
>>> seconds.shape, bool(np.all(seconds > 0))
((2,), True)
>>> round(loglog_slope([1, 2, 4, 8], [3, 12, 48, 192]), 6)
2.0
"""

from __future__ import annotations

import json
import sys
import time
import timeit
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path

import numpy as np

from ..attention import scaled_dot_product_attention, self_attention
from ..recurrent import rnn_forward
from ..validation import as_float_array, check_positive_int

__all__ = [
    "CLOCKS",
    "RESULT_SECTIONS",
    "TIMED_LAYERS",
    "benchmark_results_path",
    "load_benchmark_results",
    "loglog_slope",
    "processor_clock",
    "time_calls",
    "time_layers",
]


def processor_clock(platform: str = sys.platform) -> Callable[[], float]:
    """The processor time of this process, all its threads together (``time.process_time``).

    In a browser (Pyodide: ``sys.platform == "emscripten"``) that clock stays at 0, so elapsed time
    (``time.perf_counter``), the one thread's work there, is returned.

    Parameters
    ----------
    platform : str, optional
        The platform to choose for, as ``sys.platform`` names it. Default: this one.

    Returns
    -------
    callable
        A function of no argument returning seconds, as ``timeit.Timer`` takes for its ``timer``.

    Examples
    --------
    >>> processor_clock("linux") is time.process_time, processor_clock("emscripten") is time.perf_counter
    (True, True)
    """
    return time.perf_counter if platform == "emscripten" else time.process_time


#: The clocks a timing can run on: the processor time of this process (``processor_clock``), or
#: elapsed time (``time.perf_counter``).
CLOCKS = {"cpu": processor_clock(), "wall": time.perf_counter}

#: The layers ``time_layers`` can time.
TIMED_LAYERS = ("self-attention", "attention core", "recurrent")

#: The sections of a complete benchmark record (the file ``make bench`` writes).
RESULT_SECTIONS = ("machine", "plain_vs_matmul", "tiled_memory", "tiled_time", "goals", "training_throughput")
RESULTS_FILE = "benchmark_results.json"


# --- the timer -----------------------------------------------------------------------------------


def time_calls(calls: Sequence[Callable[[], object]], repeats: int = 7, warmup: int = 1,
               statistic: str = "min", clock: str = "cpu") -> np.ndarray:
    r"""Seconds taken by each of several zero-argument calls: one ``timeit`` measurement per call and round.

    Each of ``repeats`` rounds times every call once (``timeit``, garbage collection paused), so a
    burst of other activity slows a few calls of several sizes, not one size; each call keeps

    .. math:: t_i = \min_r t_{r,i} \quad\text{or}\quad t_i = \operatorname{median}_r t_{r,i}.

    Parameters
    ----------
    calls : sequence of callables
        The calls to time, each taking no argument; at least one.
    repeats : int, optional
        Timed rounds, at least 1. Default 7.
    warmup : int, optional
        Untimed rounds first, at least 0 (first calls allocate and load code). Default 1.
    statistic : {"min", "median"}, optional
        What to keep of each call's ``repeats`` times. Default ``"min"``.
    clock : {"cpu", "wall"}, optional
        The clock, a key of ``CLOCKS``. Default ``"cpu"``.

    Returns
    -------
    ndarray, shape (len(calls),)
        Seconds per call.

    Examples
    --------
    >>> made = []
    >>> seconds = time_calls([lambda: made.append(1)], repeats=5, warmup=2, statistic="median")
    >>> len(made), seconds.shape
    (7, (1,))
    >>> time_calls([len], statistic="mean")
    Traceback (most recent call last):
    ...
    ValueError: statistic must be 'min' or 'median', got 'mean'
    """
    if statistic not in ("min", "median"):
        raise ValueError(f"statistic must be 'min' or 'median', got {statistic!r}")
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {', '.join(repr(c) for c in CLOCKS)}, got {clock!r}")
    repeats = check_positive_int(repeats, "repeats")
    warmup = check_positive_int(warmup, "warmup", minimum=0)
    calls = list(calls)
    if not calls or not all(callable(call) for call in calls):
        raise TypeError(f"calls must be a non-empty sequence of functions without arguments, got {calls!r}")
    timers = [timeit.Timer(call, timer=CLOCKS[clock]) for call in calls]
    for _ in range(warmup):
        for call in calls:
            call()
    times = np.empty((repeats, len(timers)))  # (repeats, calls)
    for r in range(repeats):
        for i, timer in enumerate(timers):
            times[r, i] = timer.timeit(number=1)
    return times.min(axis=0) if statistic == "min" else np.median(times, axis=0)  # (calls,)


def _layer_call(kind: str, n: int, d: int, seed: int) -> Callable[[], object]:
    """A zero-argument call of one forward pass of ``kind`` on a seeded random sequence ``(n, d)``."""
    if kind not in TIMED_LAYERS:
        raise ValueError(f"kind must be one of {', '.join(repr(k) for k in TIMED_LAYERS)}; got {kind!r}")
    n, d = check_positive_int(n, "n"), check_positive_int(d, "d")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))  # (n, d)
    w = rng.standard_normal((3, d, d)) / np.sqrt(d)  # (3, d, d): keeps activations of order 1
    if kind == "self-attention":
        return lambda: self_attention(x, w[0], w[1], w[2])
    if kind == "attention core":
        q, k, v = x @ w[0], x @ w[1], x @ w[2]  # (n, d) each
        return lambda: scaled_dot_product_attention(q, k, v)
    w_h, b = 0.5 * w[1], np.zeros(d)  # (d, d), (d,)
    return lambda: rnn_forward(x, w[0], w_h, b)


def time_layers(kind: str, shapes, repeats: int = 7, seed: int = 0, statistic: str = "min",
                clock: str = "cpu") -> np.ndarray:
    """Seconds of one forward pass of a sequence layer for each ``(n, d)`` in ``shapes``.

    Parameters
    ----------
    kind : str
        One of ``TIMED_LAYERS``: ``attnbook.self_attention`` with ``(d, d)`` projections, the
        ``"attention core"`` (``scaled_dot_product_attention``), ``attnbook.rnn_forward``.
    shapes : sequence of (int, int)
        The sizes ``(n, d)`` to time; at least one.
    repeats, seed, statistic, clock : optional
        As in :func:`time_calls`; ``seed`` seeds the random inputs.

    Returns
    -------
    ndarray, shape (len(shapes),)
        Seconds per forward pass.

    Examples
    --------
    >>> times = time_layers("recurrent", [(4, 2), (8, 2)], repeats=2)
    >>> times.shape, bool(np.all(times > 0))
    ((2,), True)
    >>> time_layers("convolution", [(4, 2)])
    Traceback (most recent call last):
    ...
    ValueError: kind must be one of 'self-attention', 'attention core', 'recurrent'; got 'convolution'
    """
    shapes = [tuple(shape) for shape in shapes]
    if not shapes or any(len(shape) != 2 for shape in shapes):
        raise ValueError(f"shapes must be a non-empty list of (n, d) pairs, got {shapes!r}")
    calls = [_layer_call(kind, n, d, seed) for n, d in shapes]
    return time_calls(calls, repeats=repeats, statistic=statistic, clock=clock)


# --- fitting an exponent -------------------------------------------------------------------------


def loglog_slope(sizes, values) -> float:
    r"""The exponent ``p`` of ``values ~ c sizes^p``: the slope of a least-squares line on log scales.

    .. math:: \log v_i \approx \log c + p \log s_i

    Parameters
    ----------
    sizes, values : array_like, shape (m,)
        Positive numbers, ``m >= 2``, with at least two different sizes.

    Returns
    -------
    float
        The fitted slope ``p``.

    Examples
    --------
    >>> round(loglog_slope([1, 2, 4, 8], [3, 12, 48, 192]), 6)
    2.0
    >>> loglog_slope([1, 2], [1, -1])
    Traceback (most recent call last):
    ...
    ValueError: sizes and values must be positive (they are put on a log scale)
    """
    sizes = as_float_array(sizes, "sizes")  # (m,)
    values = as_float_array(values, "values")  # (m,)
    if sizes.ndim != 1 or sizes.shape != values.shape or sizes.size < 2:
        raise ValueError(f"sizes and values must be 1-D of the same length >= 2; got {sizes.shape} and {values.shape}")
    if np.any(sizes <= 0) or np.any(values <= 0):
        raise ValueError("sizes and values must be positive (they are put on a log scale)")
    if np.all(sizes == sizes[0]):
        raise ValueError("sizes are all equal; a slope needs at least two different sizes")
    slope, _ = np.polyfit(np.log(sizes), np.log(values), 1)
    return float(slope)


# --- the benchmark's stored figures --------------------------------------------------------------


def benchmark_results_path() -> Path:
    """Where the package keeps the benchmark's figures, the file ``make bench`` writes.

    Returns
    -------
    pathlib.Path
        ``attnbook/data/benchmark_results.json`` inside the installed package.

    Examples
    --------
    >>> benchmark_results_path().name
    'benchmark_results.json'
    """
    return Path(str(resources.files("attnbook").joinpath("data", RESULTS_FILE)))


def load_benchmark_results() -> dict:
    """The last figures of the efficient-attention benchmark, with the sections ``make bench`` writes.

    Returns
    -------
    dict
        The record, with at least the sections of ``RESULT_SECTIONS``.

    Raises
    ------
    FileNotFoundError
        When the file is missing (it names the file).
    ValueError
        When the file lacks sections of a complete record (it names them).

    Examples
    --------
    >>> record = load_benchmark_results()
    >>> sorted(key for key in record if key in ("machine", "plain_vs_matmul", "tiled_memory"))
    ['machine', 'plain_vs_matmul', 'tiled_memory']
    """
    path = benchmark_results_path()
    if not path.is_file():
        raise FileNotFoundError(f"no benchmark figures at {path}: run `make bench` to measure them")
    record = json.loads(path.read_text(encoding="utf-8"))
    missing = [section for section in RESULT_SECTIONS if section not in record]
    if missing:
        raise ValueError(f"{path} is not a complete benchmark record: it lacks {', '.join(missing)}")
    return record
