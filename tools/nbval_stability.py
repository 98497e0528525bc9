"""A pytest plugin (``-p tools.nbval_stability`` in pytest.ini): strict nbval runs the book's notebooks as
another processor would, and checks the numbers they glue.

Strict nbval compares each stored output with a fresh run as text. A number stored with more digits than its
computation keeps across processors passes on the machine that wrote it and fails on the next one. To find
such numbers on one machine, every notebook of the book (``chapters/``, ``exercises/``) runs under nbval in
a kernel that computes like another processor (tests/stability/perturb_kernel.py, an IPython startup file of
the kernel): its random inputs and its ``exp``/``matmul``/``einsum`` results are moved by a few units in the
last place. So:

* every stored text output (printed arrays, reprs, HTML, alt text in it) must equal the perturbed run's, after
  nbval's sanitising: nbval's own strict comparison, cell by cell;
* after the notebook's last cell, one more test of its unit (``<notebook>::glued values``) compares what the
  perturbed run glued with the build's run of the same source and package (tools/execution.py records it;
  ``make test`` builds first), and, when no build recorded it, with an unperturbed run of its own:

  - every number glued with ``attnbook.book.prose.glue_number`` moves, relative to its size, by less than a
    hundredth of the rounding step its precision allows (``10**-(digits + 2)``): it keeps a margin;
  - every other glued value (counts, text) is identical in the two runs;
  - except a glue named ``measured_…``: a time measured by the run that built the page, which the prose
    presents as that run's measurement, from a cell tagged ``nbval-ignore-output`` (glued, not compared);
  - the prose shows each glued number as the unrounded value would show: no format in the text asks for
    more digits than the glue keeps.

One run per notebook serves both nbval and these checks. What they cannot catch: a difference that a real
processor makes and this perturbation does not imitate (a library that takes another algorithm on another
processor, not just another rounding), and a value that happens not to move under this one perturbation though
it would under another. The margin of a hundred covers the second for glued numbers; printed arrays have none.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from tools import ROOT
from tools.execution import RECORD_ENV, environment_set, glue_record_path

STABILITY = ROOT / "tests" / "stability"
PERTURB_ENV = "ATTNBOOK_PERTURB"  # "1": the kernel's startup file perturbs it (perturb_kernel.py)
MEASURED_PREFIX = "measured_"  # glued timings of the building run: glued in both runs, values not compared
GLUE_CHECK = "glued values"  # the name of each notebook's check, after its cells
REFERENCE_TIMEOUT_S = 600  # an unperturbed run of one notebook, when no build recorded one
_state = pytest.StashKey[dict]()


def book_notebooks() -> set[Path]:
    """The paired notebooks of the book: ``chapters/*.ipynb`` and ``exercises/*.ipynb``."""
    return {path for folder in ("chapters", "exercises") for path in (ROOT / folder).glob("*.ipynb")}


def round_significant(value: float, digits: int) -> float:
    from attnbook.book.prose import round_significant as rounded  # imported late: numpy stays out of collection

    return rounded(value, digits)


GLUE_ROLE = re.compile(r"\{glue:text\}`([A-Za-z0-9_]+):([^`]+)`")


def prose_formats(source: Path) -> list[tuple[str, str]]:
    """The (name, format) of every ``{glue:text}`name:format``` in a notebook's MyST source."""
    return GLUE_ROLE.findall(source.read_text(encoding="utf-8"))


def glued(record: Path) -> dict[str, dict]:
    """The glued values of a record, by name (one JSON line per glue, tools/execution.py)."""
    entries = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    return {entry["name"]: entry for entry in entries}


def relative_change(reference: float, perturbed: float) -> float:
    if reference == perturbed:
        return 0.0
    if reference == 0.0:
        return float("inf")
    return abs(perturbed - reference) / abs(reference)


def glue_problems(reference: dict[str, dict], perturbed: dict[str, dict], formats: list[tuple[str, str]]) -> list[str]:
    """What is wrong with the glued values of a perturbed run against the reference run's (empty: nothing).

    >>> entry = lambda value: {"via": "glue_number", "value": value, "digits": 3}
    >>> glue_problems({"x": entry(0.12345)}, {"x": entry(0.12345000001)}, [("x", ".3f")])
    []
    >>> glue_problems({"x": entry(0.12345)}, {"x": entry(0.1235)}, [])[0].split(":")[0]
    'too sensitive'
    >>> glue_problems({"x": entry(0.12345)}, {"x": entry(0.12345)}, [("x", ".4f")])[0].split(":")[0]
    'overstated'
    """
    if set(perturbed) != set(reference):
        return [f"other names: the perturbed run glued {sorted(set(perturbed) ^ set(reference))} in only one run"]
    problems = []
    for name, entry in sorted(reference.items()):
        other = perturbed[name]
        if name.startswith(MEASURED_PREFIX):
            continue
        if entry["via"] == "glue_number":
            change = relative_change(entry["value"], other["value"])
            if change > 10.0 ** -(entry["digits"] + 2):
                problems.append(f"too sensitive: {name} {entry['value']!r} -> {other['value']!r} (relative change "
                                f"{change:.1e}, {entry['digits']} digits kept; glue it with fewer, e.g. "
                                "attnbook.book.prose.AMPLIFIED)")
        elif entry["value"] != other["value"]:
            problems.append(f"changed: {name} {entry['value']} -> {other['value']} (not a number)")
    for name, spec in formats:
        entry = reference.get(name)
        if entry is None or entry["via"] != "glue_number":
            continue
        stored, exact = format(round_significant(entry["value"], entry["digits"]), spec), format(entry["value"], spec)
        if stored != exact:
            problems.append(f"overstated: {name}:{spec} shows {stored}, the unrounded value {exact} "
                            f"({entry['digits']} digits kept)")
    return problems


def reference_run(notebook: Path, workdir: Path) -> Path:
    """Run ``notebook`` unperturbed in a child process (tests/stability/run_notebook.py); its glue record."""
    record, executed = workdir / f"{notebook.stem}.reference.jsonl", workdir / f"{notebook.stem}.reference.ipynb"
    record.write_text("", encoding="utf-8")
    stored = nbformat.read(notebook, as_version=4)
    stored.cells.insert(0, nbformat.v4.new_code_cell(f"import os\nos.environ[{RECORD_ENV!r}] = {str(record)!r}"))
    nbformat.write(stored, executed)
    try:
        done = subprocess.run([sys.executable, str(STABILITY / "run_notebook.py"), str(executed), str(notebook.parent)],
                              capture_output=True, text=True, timeout=REFERENCE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{notebook.name}: the unperturbed reference run did not finish within {REFERENCE_TIMEOUT_S} s")
    assert done.returncode == 0, f"{notebook.name}: the unperturbed reference run failed:\n{done.stdout[-3000:]}"
    return record


class GluedValues(pytest.Item):
    """After a notebook's cells: its perturbed run's glued values against the reference run's."""

    def __init__(self, *, record: Path, **kwargs):
        super().__init__(**kwargs)
        self.record = record

    def runtest(self) -> None:
        notebook = Path(self.path)
        assert Path(f"{self.record}.perturbed").exists(), f"{notebook.name}: nbval's kernel was not perturbed"
        built = glue_record_path(notebook.with_suffix(".md"))
        reference = built if built.exists() else reference_run(notebook, self.record.parent)
        problems = glue_problems(glued(reference), glued(self.record), prose_formats(notebook.with_suffix(".md")))
        assert not problems, f"{notebook.name}: glued values under the perturbation:\n" + "\n".join(problems)

    def reportinfo(self):
        return self.path, None, f"{Path(self.path).name}::{GLUE_CHECK}"


def _is_book_cell(item, state) -> bool:
    return type(item).__name__ == "IPyNbCell" and Path(item.path) in state["notebooks"]


def pytest_configure(config) -> None:
    folder = Path(tempfile.mkdtemp(prefix="attnbook-perturbed-"))
    startup = folder / "ipython" / "profile_default" / "startup" / "00-perturb.py"
    startup.parent.mkdir(parents=True)
    startup.write_text((STABILITY / "perturb_kernel.py").read_text(encoding="utf-8"), encoding="utf-8")
    config.stash[_state] = {"folder": folder, "notebooks": book_notebooks(), "records": {}}


@pytest.hookimpl(trylast=True)  # after tools.test_groups has ordered the units
def pytest_collection_modifyitems(session, config, items) -> None:
    state = config.stash[_state]
    last_cell = {}
    for index, item in enumerate(items):
        if _is_book_cell(item, state):
            last_cell[item.parent] = index
    for notebook, index in sorted(last_cell.items(), key=lambda entry: -entry[1]):  # from the end: indices hold
        record = state["folder"] / f"{Path(notebook.path).stem}-{len(state['records'])}.perturbed.jsonl"
        state["records"][notebook] = record
        items.insert(index + 1, GluedValues.from_parent(notebook, name=GLUE_CHECK, record=record))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """Start each book notebook's kernel perturbed, recording its glued values (nbval starts it in the setup
    of the notebook's first cell, from this process's environment)."""
    state = item.config.stash[_state]
    if not _is_book_cell(item, state) or getattr(item.parent, "kernel", None) is not None:
        return (yield)
    record = state["records"][item.parent]
    record.write_text("", encoding="utf-8")
    with environment_set({"IPYTHONDIR": str(state["folder"] / "ipython"), PERTURB_ENV: "1", RECORD_ENV: str(record)}):
        return (yield)


def pytest_unconfigure(config) -> None:
    import shutil

    state = config.stash.get(_state, None)
    if state is not None:
        shutil.rmtree(state["folder"], ignore_errors=True)
