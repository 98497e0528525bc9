"""A pytest plugin (``-p tools.test_times`` in pytest.ini): the time each test file took, in the summary.

``--durations`` names the slowest single tests; where a run spends its time is often many short tests
of one file (the browser test visits every page several times). This prints, after the run, the seconds
each test file took (setup, call and teardown of its tests, summed) for the files that took longest, and
their total. Under pytest-xdist the sums add up the workers' seconds: two workers busy for a minute count
two minutes, so the total exceeds the wall-clock time by up to the number of workers.
"""

from __future__ import annotations

from collections import defaultdict

SHOWN = 20  # files listed

_seconds: dict[str, float] = defaultdict(float)
_tests: dict[str, set[str]] = defaultdict(set)


def pytest_runtest_logreport(report) -> None:
    path = report.nodeid.split("::")[0]
    _seconds[path] += report.duration
    _tests[path].add(report.nodeid)


def pytest_terminal_summary(terminalreporter) -> None:
    if not _seconds:
        return
    terminalreporter.section("time per test file (setup + call + teardown, summed over workers)")
    ranked = sorted(_seconds.items(), key=lambda item: item[1], reverse=True)
    for path, seconds in ranked[:SHOWN]:
        terminalreporter.write_line(f"{seconds:8.1f} s  {len(_tests[path]):5d} tests  {path}")
    rest = ranked[SHOWN:]
    if rest:
        terminalreporter.write_line(f"{sum(s for _, s in rest):8.1f} s  {sum(len(_tests[p]) for p, _ in rest):5d} "
                                    f"tests  the other {len(rest)} files")
    terminalreporter.write_line(f"{sum(_seconds.values()):8.1f} s  in all")
