"""Every number a notebook stores survives the last-bit differences between processors.

Strict nbval compares each stored output with a fresh run as text. A number stored with more digits
than its computation keeps across processors passes on the machine that wrote it and fails on the
next one. These tests find such numbers on one machine: each notebook runs twice, once as it is and
once with its random inputs and its ``exp``/``matmul``/``einsum`` results moved by a few units in the
last place (``perturb_kernel.py``), and

* every number glued with ``attnbook.book.prose.glue_number`` moves, relative to its size, by less than a
  hundredth of the rounding step its precision allows (``10**-(digits + 2)``): it keeps a margin;
* every other glued value (counts, text) is identical in the two runs;
* except a glue named ``measured_…``: a time measured by the run that built the page, which the prose
  presents as that run's measurement, from a cell tagged ``nbval-ignore-output`` (it is glued in both
  runs, not compared);
* the prose shows each glued number as the unrounded value would show: no format in the text asks
  for more digits than the glue keeps;
* every text output of the perturbed run (printed arrays, reprs, HTML, alt text in it) equals the stored
  one, after the same sanitising as nbval.

The run "as it is" is the book's own: every build records each notebook's glued values, unrounded
(tools/execution.py, ``glue_record_path``), and ``make test`` builds first, so only the perturbed run
is new. When no record of the current notebook and package exists (a test run without a build, or
after an edit), the test runs the reference itself, at the same time as the perturbed one.

What they cannot catch: a difference that a real processor makes and this perturbation does not imitate
(a library that takes another algorithm on another processor, not just another rounding), and a value
that happens not to move under this one perturbation though it would under another. The margin of a
hundred in the first check covers the second for glued numbers; printed arrays have no such margin.
"""

from __future__ import annotations

import configparser
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from attnbook.book.prose import round_significant
from tools import ROOT
from tools.execute_notebooks import notebook_sources
from tools.site_outputs import merge_streams
from tools.execution import RECORD_ENV, glue_record_path

HERE = Path(__file__).resolve().parent
KERNEL_CELL = (HERE / "perturb_kernel.py").read_text(encoding="utf-8")
NOTEBOOKS = [source.with_suffix(".ipynb") for source in notebook_sources()]
IDS = [notebook.relative_to(ROOT).as_posix() for notebook in NOTEBOOKS]
NOTEBOOK_TIMEOUT_S = 600  # a chapter runs in about 10 s; two at once on a loaded machine in well under this
MEASURED_PREFIX = "measured_"  # glued timings of the building run: glued in both runs, values not compared
NOT_COMPARED = {"image/png", "image/jpeg", "application/vnd.jupyter.widget-view+json"}  # as nbval


def sanitizers() -> list[tuple[re.Pattern, str]]:
    """The (regex, replacement) pairs of tests/nbval_sanitize.cfg, which nbval applies too."""
    config = configparser.ConfigParser()
    config.read(ROOT / "tests" / "nbval_sanitize.cfg", encoding="utf-8")
    return [(re.compile(config[section]["regex"]), config[section]["replace"]) for section in config.sections()]


SANITIZERS = sanitizers()


def sanitize(text: str) -> str:
    for pattern, replacement in SANITIZERS:
        text = pattern.sub(replacement, text)
    return text


def ignored_by_nbval(cell) -> bool:
    """nbval does not compare this cell's outputs (its tags or first-line markers say so)."""
    tags = set(cell.metadata.get("tags", []))
    first_line = cell.source.splitlines()[0] if cell.source else ""
    return bool(tags & {"nbval-ignore-output", "nbval-skip", "raises-exception"}) or first_line.strip() in (
        "# NBVAL_IGNORE_OUTPUT", "# NBVAL_SKIP", "# NBVAL_RAISES_EXCEPTION")


def comparable(outputs: list) -> list:
    """The parts of a cell's outputs that strict nbval compares, as sanitised text."""
    shown = []
    for output in merge_streams(outputs):
        if output.output_type == "stream":
            shown.append(("stream", output.name, sanitize(output.text)))
        elif output.output_type in ("execute_result", "display_data"):
            data = {key: value for key, value in output.data.items() if key not in NOT_COMPARED}
            if data:
                shown.append((output.output_type, {key: sanitize(str(value)) for key, value in sorted(data.items())}))
        elif output.output_type == "error":
            shown.append(("error", output.ename, output.evalue))
    return shown


def start_run(notebook_path: Path, workdir: Path, perturb: bool) -> tuple[subprocess.Popen, Path, Path]:
    """Start executing a stored notebook, with the recording (and perturbing) cell in front of its first cell.

    The notebook runs in a child process (run_notebook.py), so a reference and a perturbed run can go on at
    once; it returns the process, the file the glued values are recorded in and the executed notebook's path.
    """
    kind = "perturbed" if perturb else "reference"
    record, executed = workdir / f"{kind}.jsonl", workdir / f"{kind}.ipynb"
    record.touch()
    notebook = nbformat.read(notebook_path, as_version=4)
    prelude = (f"import os\nos.environ[{RECORD_ENV!r}] = {str(record)!r}\n"
               f"os.environ['ATTNBOOK_PERTURB'] = {'1' if perturb else '0'!r}\n")
    notebook.cells.insert(0, nbformat.v4.new_code_cell(prelude + KERNEL_CELL))
    nbformat.write(notebook, executed)
    process = subprocess.Popen([sys.executable, str(HERE / "run_notebook.py"), str(executed), str(notebook_path.parent)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return process, record, executed


def finish_run(process: subprocess.Popen, executed: Path) -> nbformat.NotebookNode:
    try:
        output, _ = process.communicate(timeout=NOTEBOOK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail(f"{executed.name}: the notebook did not finish within {NOTEBOOK_TIMEOUT_S} s")
    assert process.returncode == 0, f"{executed.name}: the notebook failed to run:\n{output[-3000:]}"
    notebook = nbformat.read(executed, as_version=4)
    notebook.cells.pop(0)
    return notebook


def glued(record: Path) -> dict[str, dict]:
    entries = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    return {entry["name"]: entry for entry in entries}


GLUE_ROLE = re.compile(r"\{glue:text\}`([A-Za-z0-9_]+):([^`]+)`")


def prose_formats(source: Path) -> list[tuple[str, str]]:
    """The (name, format) of every ``{glue:text}`name:format``` in a notebook's MyST source."""
    return GLUE_ROLE.findall(source.read_text(encoding="utf-8"))


def relative_change(reference: float, perturbed: float) -> float:
    if reference == perturbed:
        return 0.0
    if reference == 0.0:
        return float("inf")
    return abs(perturbed - reference) / abs(reference)


@pytest.mark.parametrize("notebook_path", NOTEBOOKS, ids=IDS)
def test_stored_outputs_do_not_depend_on_the_last_bits(notebook_path: Path, tmp_path: Path):
    built = glue_record_path(notebook_path.with_suffix(".md"))
    perturbed_process, perturbed_record, perturbed_notebook = start_run(notebook_path, tmp_path, perturb=True)
    if built.exists():  # the build's run is the reference
        reference_record = built
    else:
        reference_process, reference_record, reference_notebook = start_run(notebook_path, tmp_path, perturb=False)
        finish_run(reference_process, reference_notebook)
    perturbed = finish_run(perturbed_process, perturbed_notebook)

    reference_glue, perturbed_glue = glued(reference_record), glued(perturbed_record)
    assert set(perturbed_glue) == set(reference_glue), "the perturbed run glued other names"
    too_sensitive, changed = [], []
    for name, entry in sorted(reference_glue.items()):
        other = perturbed_glue[name]
        if name.startswith(MEASURED_PREFIX):
            continue
        if entry["via"] == "glue_number":
            change = relative_change(entry["value"], other["value"])
            if change > 10.0 ** -(entry["digits"] + 2):
                too_sensitive.append(f"{name}: {entry['value']!r} -> {other['value']!r} (relative change {change:.1e}, "
                                     f"{entry['digits']} digits kept)")
        elif entry["value"] != other["value"]:
            changed.append(f"{name}: {entry['value']} -> {other['value']}")
    assert not too_sensitive, ("glued numbers that keep more digits than their computation guarantees "
                               "(glue them with fewer, e.g. attnbook.book.prose.AMPLIFIED):\n" + "\n".join(too_sensitive))
    assert not changed, "glued values that are not numbers and changed:\n" + "\n".join(changed)

    overstated = []
    for name, spec in prose_formats(notebook_path.with_suffix(".md")):
        entry = reference_glue.get(name)
        if entry is None or entry["via"] != "glue_number":
            continue
        stored, exact = format(round_significant(entry["value"], entry["digits"]), spec), format(entry["value"], spec)
        if stored != exact:
            overstated.append(f"{name}:{spec} shows {stored}, the unrounded value {exact} ({entry['digits']} digits kept)")
    assert not overstated, "the prose shows more digits than the glue keeps:\n" + "\n".join(overstated)

    stored = nbformat.read(notebook_path, as_version=4)
    differing = []
    for index, (old, new) in enumerate(zip(stored.cells, perturbed.cells)):
        if old.cell_type != "code" or ignored_by_nbval(old):
            continue
        if comparable(old.outputs) != comparable(new.outputs):
            differing.append(f"cell {index}: {comparable(old.outputs)!r:.300} != {comparable(new.outputs)!r:.300}")
    assert not differing, "stored outputs that change under a last-bit perturbation:\n" + "\n".join(differing)
