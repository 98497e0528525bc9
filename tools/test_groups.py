"""A pytest plugin (``-p tools.test_groups`` in pytest.ini): how ``make test`` shares the suite among the cores.

``make test`` runs pytest with pytest-xdist (``-n auto --dist loadscope``): one worker per core, each
taking the next *unit* of tests when it runs out of work. This plugin decides the units (pytest-xdist's
own ``loadgroup`` marks do not work with pytest 9, whose node ids they cannot rename). A unit holds the
tests that cannot be separated or that would pay for an expensive fixture twice:

* one notebook's nbval cells (they share one kernel, in order) and the check of its glued values after them
  (tools/nbval_stability.py);
* one test file (its module fixtures: a homework's graded submissions, the built PDF's text, ...);
* the whole of ``tests/artefacts`` (its session fixture installs a reader's environment from the
  notebooks zip, about a minute).

The files of ``SPREAD`` are the exception: their tests are long and independent (each runs one chapter in
the lite kernel, which the chapters of a worker share through a session fixture), so each test is a unit of
its own.

The order decides how evenly the workers finish: a worker takes units in the order below, so the
longest units (``FIRST``) start at once, and the spread tests, short and many, come last and fill
the gaps. Without pytest-xdist (``pytest`` alone, ``make test-package``) only the order applies.
"""

from __future__ import annotations

from pathlib import Path

import pytest

FIRST = ("tests/artefacts/", "tests/site/test_browser.py", "tests/homework/", "tests/pdf/")
SPREAD = ("tests/site/test_lite.py",)
WHOLE_DIRECTORY = ("tests/artefacts/",)


def place(path: str) -> tuple[int, str | None]:
    """Where a test of the file ``path`` (relative to the root, with /) runs: (rank, unit).

    The rank orders the units (0: first, 1: the rest, 2: spread, last); the unit names the group the test
    runs in, None when the test is a unit of its own.

    >>> place("tests/artefacts/test_notebooks_zip.py")
    (0, 'tests/artefacts/')
    >>> place("chapters/masks.ipynb")
    (1, 'chapters/masks.ipynb')
    >>> place("tests/site/test_lite.py")
    (2, None)
    """
    if path.startswith(SPREAD):
        return 2, None
    unit = next((directory for directory in WHOLE_DIRECTORY if path.startswith(directory)), path)
    return (0 if path.startswith(FIRST) else 1), unit


def pytest_collection_modifyitems(config, items) -> None:
    """Run the units in the order of their rank (each worker collects, and sorts, the same way)."""
    root = Path(config.rootpath)
    ranked = sorted(enumerate(items), key=lambda entry: (place(Path(entry[1].path).relative_to(root).as_posix())[0],
                                                          entry[0]))
    items[:] = [item for _, item in ranked]


def unit_of(nodeid: str) -> str:
    """The unit of the test ``nodeid``: its group, or the test itself.

    >>> unit_of("chapters/masks.ipynb::Cell 3"), unit_of("tests/site/test_lite.py::test_x[masks]")
    ('chapters/masks.ipynb', 'tests/site/test_lite.py::test_x[masks]')
    """
    return place(nodeid.split("::")[0])[1] or nodeid


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, called when it runs (-n with --dist loadscope)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False  # the units go in the order the collection has (ranked above)
    return UnitScheduling(config, log)
