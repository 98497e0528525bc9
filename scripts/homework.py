"""Homework tooling: student notebooks, grading of submitted notebooks, and an nbgrader export.

    python scripts/homework.py check [HOMEWORK ...]                 # validate the instructor sources
    python scripts/homework.py student [--out DIR] [HOMEWORK ...]   # student notebooks -> _build/student/
    python scripts/homework.py grade HOMEWORK SUBMISSIONS OUT [--timeout 10] [--jobs 2]
    python scripts/homework.py nbgrader OUT [HOMEWORK ...]          # nbgrader source notebooks -> OUT/source/

HOMEWORK is a name such as ``hw_masks`` or a path such as ``exercises/hw_masks.md``; without one, every
``exercises/hw_*.md`` is used.

Each homework is one MyST notebook source whose cells carry exactly one role tag:

- ``instructions`` (markdown), ``setup`` (imports every version runs),
- ``stub`` (the student's starting code) directly followed by its ``solution`` (same names),
- ``public-check`` (calls into ``attnbook.checks`` and prints a verdict),
- ``hidden-test`` (asserts; metadata ``grade_id`` and ``points``).

Code cells other than setup name their ``task`` in the metadata, which ties a hidden test to the
stub it grades. The student version keeps instructions, setup, stubs and public checks (no outputs).
Grading runs each submission in its own worker process and kernel, with the hidden tests put back
after the cells of their task, a per-cell timeout and ``allow_errors``; a hidden test scores its
points when its cell runs without an error.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import copy
import csv
import hashlib
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "exercises"
STUDENT_DIR = ROOT / "_build" / "student"

ROLES = ("instructions", "setup", "stub", "solution", "public-check", "hidden-test")
STUDENT_ROLES = ("instructions", "setup", "stub", "public-check")
TASK_ROLES = ("stub", "solution", "public-check", "hidden-test")
BOOK_TAGS = ("remove-cell", "remove-input", "remove-output", "hide-input", "hide-output", "hide-cell")
REQUIRED_BOOK_TAGS = {"stub": "remove-cell", "solution": "hide-input", "hidden-test": "remove-cell"}

CELL_TIMEOUT_S = 10
PROBE_TIMEOUT_S = 2  # after an interrupt, an idle kernel answers a `pass` at once
IOPUB_GRACE_S = 2  # how long outputs may trail a reply (nbclient waits this long after a stuck cell)
DEADLINE_S = 180  # a whole submission; the per-cell timeout normally stops it long before
KERNEL = "python3"


class HomeworkError(Exception):
    """A homework source breaks the conventions, or a submission cannot be read; the message says how."""


# --- reading and validating the instructor sources ---------------------------------------------------


def homework_sources(root: Path = ROOT) -> list[Path]:
    """Every homework source, ``exercises/hw_*.md``, sorted by name."""
    return sorted((root / "exercises").glob("hw_*.md"))


def resolve(homework: str | Path) -> Path:
    """``hw_masks``, ``hw_masks.md`` or a path -> the path of the instructor source."""
    path = Path(homework)
    if path.suffix == ".md" and path.exists():
        return path.resolve()
    candidate = EXERCISES / f"{path.stem}.md"
    if candidate.exists():
        return candidate
    known = ", ".join(p.stem for p in homework_sources()) or "none"
    raise HomeworkError(f"no homework {str(homework)!r}: expected a name such as hw_masks (known: {known})")


def role(cell) -> str | None:
    """The role tag of a cell, or None when it has none (more than one is a validation error)."""
    roles = [tag for tag in cell.metadata.get("tags", []) if tag in ROLES]
    return roles[0] if len(roles) == 1 else None


def defined_names(source: str) -> set[str]:
    """Names a cell defines at top level: functions, classes and assigned variables."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def problems(notebook, name: str) -> list[str]:
    """Every way the instructor notebook breaks the conventions (empty when it is well formed)."""
    found: list[str] = []
    grade_ids: set[str] = set()
    cells = notebook.cells
    for index, cell in enumerate(cells):
        where = f"{name} cell {index}"
        tags = cell.metadata.get("tags", [])
        roles = [tag for tag in tags if tag in ROLES]
        if len(roles) != 1:
            found.append(f"{where} has role tags {roles}; expected exactly one of {', '.join(ROLES)}")
            continue
        cell_role = roles[0]
        if (cell.cell_type == "markdown") != (cell_role == "instructions"):
            found.append(f"{where} is a {cell.cell_type} cell tagged {cell_role}; "
                         "instructions are markdown, every other role is code")
        required = REQUIRED_BOOK_TAGS.get(cell_role)
        if required and required not in tags:
            found.append(f"{where} ({cell_role}) lacks the book tag {required}")
        if cell_role in TASK_ROLES and not cell.metadata.get("task"):
            found.append(f"{where} ({cell_role}) has no task in its metadata")
        if cell_role == "stub":
            following = cells[index + 1] if index + 1 < len(cells) else None
            if following is None or role(following) != "solution":
                found.append(f"{where} is a stub not directly followed by its solution")
            elif following.metadata.get("task") != cell.metadata.get("task"):
                found.append(f"{where}: the stub and the solution after it name different tasks")
            elif not defined_names(cell.source) or defined_names(cell.source) - defined_names(following.source):
                found.append(f"{where}: the stub defines {sorted(defined_names(cell.source))}; its solution must "
                             f"define them all, and defines {sorted(defined_names(following.source))}")
        if cell_role == "solution" and (index == 0 or role(cells[index - 1]) != "stub"):
            found.append(f"{where} is a solution without a stub right before it")
        if cell_role == "hidden-test":
            grade_id, points = cell.metadata.get("grade_id"), cell.metadata.get("points")
            if not isinstance(grade_id, str) or not grade_id:
                found.append(f"{where} is a hidden test without a grade_id")
            elif grade_id in grade_ids:
                found.append(f"{where} repeats the grade_id {grade_id!r}")
            else:
                grade_ids.add(grade_id)
            if isinstance(points, bool) or not isinstance(points, (int, float)) or points <= 0:
                found.append(f"{where} is a hidden test whose points ({points!r}) are not a positive number")
    if not grade_ids:
        found.append(f"{name} has no hidden tests")
    return found


def load(homework: str | Path):
    """Read and validate an instructor source; returns ``(path, notebook)``."""
    import jupytext  # the instructor side only: submissions are plain .ipynb files

    path = resolve(homework)
    notebook = jupytext.read(path)
    found = problems(notebook, path.stem)
    if found:
        raise HomeworkError("\n".join(found))
    return path, notebook


def stable_id(name: str, index: int, source: str) -> str:
    return hashlib.sha1(f"{name}:{index}:{source}".encode()).hexdigest()[:8]


# --- student notebooks -------------------------------------------------------------------------------


def student_notebook(homework: str | Path):
    """The student version: instructions, setup, stubs and public checks; no outputs, no counts."""
    path, source = load(homework)
    cells = []
    for cell in source.cells:
        if role(cell) not in STUDENT_ROLES:
            continue
        tags = [tag for tag in cell.metadata.get("tags", []) if tag not in BOOK_TAGS]
        metadata = {"tags": tags}
        if cell.metadata.get("task"):
            metadata["task"] = cell.metadata["task"]
        if cell.cell_type == "markdown":
            new = nbformat.v4.new_markdown_cell(cell.source, metadata=metadata)
        else:
            new = nbformat.v4.new_code_cell(cell.source, metadata=metadata)
        new.id = stable_id(path.stem, len(cells), cell.source)
        cells.append(new)
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "attnbook": {"homework": path.stem},
    }
    nbformat.validate(notebook)
    return notebook


def write_student_notebooks(out: Path, homeworks: list[str]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for homework in homeworks or homework_sources():
        notebook = student_notebook(homework)
        target = out / f"{resolve(homework).stem}.ipynb"
        nbformat.write(notebook, target)
        written.append(target)
    return written


# --- grading -----------------------------------------------------------------------------------------


def grading_plan(homework: str | Path) -> dict:
    """What grading needs from the instructor source, as JSON-ready data for the workers."""
    path, notebook = load(homework)
    tasks: list[str] = []
    names: dict[str, list[str]] = {}
    hidden = []
    for cell in notebook.cells:
        task = cell.metadata.get("task")
        if role(cell) == "stub":
            tasks.append(task)
            names[task] = sorted(defined_names(cell.source))
        elif role(cell) == "hidden-test":
            hidden.append({"grade_id": cell.metadata["grade_id"], "points": cell.metadata["points"],
                           "task": task, "source": cell.source})
    return {"homework": path.stem, "tasks": tasks, "names": names, "hidden": hidden}


def read_submission(path: Path):
    """A submitted notebook as nbformat v4, or a HomeworkError saying why it cannot be graded."""
    try:
        notebook = nbformat.read(path, as_version=4)
    except nbformat.reader.NotJSONError:
        raise HomeworkError("not a valid notebook: the file is not valid JSON (cut off, or edited outside "
                            "Jupyter?)") from None
    except nbformat.ValidationError as error:
        message = _first_line(error, 200)
        raise HomeworkError(f"not a valid notebook: it does not follow nbformat 4 ({message})") from None
    except Exception as error:  # an unknown nbformat version, an unreadable file, JSON that is no notebook
        raise HomeworkError(f"not a valid notebook: {type(error).__name__}: {_first_line(error, 200)}") from None
    try:
        nbformat.validate(notebook)
    except Exception as error:
        message = _first_line(error, 200)
        raise HomeworkError(f"not a valid notebook: it does not follow nbformat 4 ({message})") from None
    return notebook


def claims_hidden_test(cell, hidden_ids: set[str]) -> bool:
    """A submitted cell that looks like a hidden test (tag, points, grade_id or nbgrader grade flag)."""
    metadata = cell.get("metadata", {})
    tags = metadata.get("tags", [])
    nbgrader = metadata.get("nbgrader", {})
    return ("hidden-test" in tags or "points" in metadata or metadata.get("grade_id") in hidden_ids
            or (isinstance(nbgrader, dict) and nbgrader.get("grade") is True))


def prepare_submission(notebook, plan: dict) -> tuple[object, list[str]]:
    """The submission with claimed hidden tests dropped and the real ones inserted; plus notes."""
    hidden_ids = {test["grade_id"] for test in plan["hidden"]}
    notes: list[str] = []
    cells = []
    for cell in notebook.cells:
        if cell.cell_type not in ("code", "markdown"):
            continue
        if claims_hidden_test(cell, hidden_ids):
            notes.append("a submitted cell that claimed to be a hidden test was removed")
            continue
        cells.append(cell)
    defined: set[str] = set()
    for cell in cells:
        if cell.cell_type == "code":
            defined |= defined_names(cell.source)
    for task in plan["tasks"]:
        missing = [n for n in plan["names"][task] if n not in defined]
        if missing:
            notes.append(f"no cell defines {', '.join(missing)} (deleted or renamed?)")

    def stub_position(task: str) -> int | None:
        for index, cell in enumerate(cells):
            if cell.metadata.get("task") == task and "stub" in cell.metadata.get("tags", []):
                return index
        return None

    # a task's hidden tests go right before the stub of the next task still present, else at the end
    positions = {task: stub_position(task) for task in plan["tasks"]}
    before: dict[int, list] = {}
    for test in plan["hidden"]:
        task = test["task"]
        order = plan["tasks"].index(task) if task in plan["tasks"] else len(plan["tasks"])
        own = positions.get(task)
        later = [p for t in plan["tasks"][order + 1:] if (p := positions[t]) is not None
                 and (own is None or p > own)]
        new = nbformat.v4.new_code_cell(test["source"], metadata={
            "tags": ["hidden-test"], "grade_id": test["grade_id"], "points": test["points"]})
        new.id = "hidden-" + hashlib.sha1(test["grade_id"].encode()).hexdigest()[:8]
        position = min(later) if later else len(cells)
        while position > (own if own is not None else 0) + 1 and cells[position - 1].cell_type == "markdown":
            position -= 1  # before the next task's instructions, not between them and its stub
        before.setdefault(position, []).append(new)
    result = []
    for index, cell in enumerate(cells):
        result.extend(before.get(index, []))
        result.append(cell)
    result.extend(before.get(len(cells), []))
    prepared = nbformat.v4.new_notebook(cells=result)
    prepared.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": KERNEL}}
    return prepared, list(dict.fromkeys(notes))


def _first_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


async def _execute(notebook, timeout: float, deadline: float, workdir: str) -> dict[int, dict]:
    """Run every code cell in a fresh kernel; returns {cell index: {status, ename, evalue, stdout}}.

    A cell that runs past ``timeout`` is interrupted. If the kernel ignores the interrupt (code that
    catches KeyboardInterrupt), it is restarted and the cells that had run cleanly are run again, so
    the rest of the notebook is graded with the state it had before the stuck cell.
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError
    from traitlets.config import Config

    config = Config()  # unix sockets in this submission's own folder: parallel workers never race for a
    config.KernelManager.transport = "ipc"  # TCP port, which can stop a kernel from starting
    config.KernelManager.ip = str(Path(workdir) / "kernel")  # absolute: the kernel runs in workdir
    statuses: dict[int, dict] = {}
    replies: dict[int, dict] = {}

    def on_cell_executed(cell, cell_index, execute_reply):
        content = (execute_reply or {}).get("content", {})
        replies[cell_index] = {"status": content.get("status", "error"), "ename": content.get("ename", ""),
                               "evalue": content.get("evalue", "")}

    client = NotebookClient(
        notebook, timeout=timeout, kernel_name=KERNEL, allow_errors=True, interrupt_on_timeout=True,
        error_on_timeout={"ename": "Timeout", "evalue": f"the cell ran longer than {timeout:g} s and was "
                          "interrupted", "traceback": []},
        record_timing=False, resources={"metadata": {"path": workdir}}, on_cell_executed=on_cell_executed,
        skip_cells_with_tag="",  # a submission cannot exempt its own cells from running
        timeout_func=lambda cell: PROBE_TIMEOUT_S if cell.metadata.get("probe") else timeout,
        iopub_timeout=IOPUB_GRACE_S, config=config,
    )

    async def run(cell, index: int) -> dict:
        replies.pop(index, None)
        await client.async_execute_cell(cell, index)
        return replies.get(index, {"status": "ok", "ename": "", "evalue": ""})  # empty cells are skipped

    async def kernel_is_stuck() -> bool:
        probe = nbformat.v4.new_code_cell("pass", metadata={"probe": True})
        notebook.cells.append(probe)  # nbclient stores an executed cell back into the notebook by index
        try:
            return (await run(notebook.cells[-1], len(notebook.cells) - 1))["ename"] == "Timeout"
        finally:
            notebook.cells.pop()

    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}  # the kernel's own log, not the cells'

    async def restart_and_replay(earlier: list[int]) -> None:
        """A fresh kernel that has run again the cells that had run cleanly before."""
        await client.km.restart_kernel(now=True, **quiet)
        await client.kc.wait_for_ready(timeout=60)
        for index in earlier:
            await run(copy.deepcopy(notebook.cells[index]), index)

    start = time.monotonic()
    ran_cleanly: list[int] = []
    async with client.async_setup_kernel(**quiet):
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code":
                continue
            if time.monotonic() - start > deadline:
                statuses[index] = {"status": "not run", "ename": "Deadline",
                                   "evalue": f"grading stopped after {deadline:g} s"}
                continue
            try:
                statuses[index] = await run(cell, index)
                if statuses[index]["ename"] == "Timeout" and await kernel_is_stuck():
                    statuses[index]["evalue"] += "; the kernel ignored the interrupt and was restarted"
                    await restart_and_replay(ran_cleanly)
            except DeadKernelError:
                statuses[index] = {"status": "error", "ename": "DeadKernel",
                                   "evalue": "the kernel died; it was restarted"}
                try:
                    await restart_and_replay(ran_cleanly)
                except Exception as error:  # no kernel any more: the cells after this one cannot run
                    for later in range(index + 1, len(notebook.cells)):
                        statuses[later] = {"status": "not run", "ename": "DeadKernel",
                                           "evalue": f"the kernel died in cell {index} and could not be "
                                                     f"restarted ({type(error).__name__})"}
                    break
            if statuses[index]["status"] == "ok" and "hidden-test" not in cell.metadata.get("tags", []):
                ran_cleanly.append(index)
            texts = [o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream"
                     and o.get("name") == "stdout"]
            statuses[index]["stdout"] = "".join(texts)[-2000:]
    return statuses


def _execute_with_retry(prepared, timeout: float, deadline: float) -> dict[int, dict]:
    """Execute in a scratch folder; a kernel that fails to start is tried once more before giving up."""
    for attempt in (1, 2):
        try:
            with tempfile.TemporaryDirectory(prefix="grade-") as workdir:
                return asyncio.run(_execute(copy.deepcopy(prepared), timeout, deadline, workdir))
        except Exception:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def grade_submission(plan: dict, path: Path, timeout: float = CELL_TIMEOUT_S, deadline: float = DEADLINE_S) -> dict:
    """Grade one file; never raises: a file that cannot be run gets 0 points and a reason."""
    started = time.monotonic()
    result = _grade_file(plan, path, timeout, deadline)
    result["seconds"] = round(time.monotonic() - started, 2)
    return result


def _grade_file(plan: dict, path: Path, timeout: float, deadline: float) -> dict:
    result = {"student": path.stem, "file": path.name, "points": {}, "feedback": [], "notes": []}
    for test in plan["hidden"]:
        result["points"][test["grade_id"]] = 0
    try:
        notebook = read_submission(path)
        prepared, notes = prepare_submission(notebook, plan)
        result["notes"].extend(notes)
        statuses = _execute_with_retry(prepared, timeout, deadline)
    except HomeworkError as error:
        result["status"] = "invalid"
        result["reason"] = str(error)
        return _finish_result(result, plan)
    except Exception as error:  # a kernel that would not start, and anything else: a reason, not a crash
        result["status"] = "error"
        result["reason"] = f"could not be run: {type(error).__name__}: {_first_line(error, 200)}"
        return _finish_result(result, plan)
    result["status"] = "graded"
    hidden = {test["grade_id"]: test for test in plan["hidden"]}
    for index, cell in enumerate(prepared.cells):
        grade_id = cell.metadata.get("grade_id")
        status = statuses.get(index, {"status": "not run", "ename": "", "evalue": "the cell did not run"})
        if grade_id in hidden and "hidden-test" in cell.metadata.get("tags", []):
            passed = status["status"] == "ok"
            result["points"][grade_id] = hidden[grade_id]["points"] if passed else 0
            message = "" if passed else _first_line(f"{status['ename']}: {status['evalue']}".strip(": "))
            result["feedback"].append({"grade_id": grade_id, "passed": passed, "points": result["points"][grade_id],
                                       "max": hidden[grade_id]["points"], "output": status.get("stdout", ""),
                                       "error": message})
        elif status["status"] != "ok" and cell.cell_type == "code":
            if status["ename"] == "Timeout":
                result["notes"].append(f"cell {index}: {status['evalue']}")
            elif status["ename"] in ("DeadKernel", "Deadline") and status["status"] == "error":
                result["notes"].append(f"cell {index}: {status['evalue']}")
            elif status["status"] == "error":
                result["notes"].append(f"cell {index} raised {status['ename']}")
    for status in statuses.values():
        if status["ename"] in ("DeadKernel", "Deadline") and status["status"] == "not run":
            result["notes"].append(status["evalue"])
            break
    return _finish_result(result, plan)


def _finish_result(result: dict, plan: dict) -> dict:
    result["total"] = sum(result["points"].values())
    result["max_total"] = sum(test["points"] for test in plan["hidden"])
    if result.get("status") == "graded":
        failed = [f["grade_id"] for f in result["feedback"] if not f["passed"]]
        count = len(plan["hidden"])
        summary = (f"all {count} hidden tests passed" if not failed
                   else f"{len(failed)} of {count} hidden tests failed ({', '.join(failed)})")
        result["reason"] = "; ".join([summary] + list(dict.fromkeys(result["notes"])))
    return result


def submissions_in(folder: Path) -> list[tuple[str, Path]]:
    """``(student, file)`` for every ``*.ipynb`` in the folder, or in one sub-folder per student.

    A name that comes twice (``alice.ipynb`` and ``alice/hw.ipynb``) gets a suffix, ``alice-2``.
    """
    found = [(p.stem, p) for p in sorted(folder.glob("*.ipynb"))]
    found += [(p.parent.name, p) for p in sorted(folder.glob("*/*.ipynb"))
              if ".ipynb_checkpoints" not in p.parts]
    seen: dict[str, int] = {}
    unique = []
    for student, path in found:
        seen[student] = seen.get(student, 0) + 1
        unique.append((student if seen[student] == 1 else f"{student}-{seen[student]}", path))
    return unique


def _worker(connection, plan: dict, student: str, path: Path, timeout: float, deadline: float) -> None:
    """The body of one grading process: grade a file, send the result back, exit."""
    def stop(signum, frame):  # the parent's SIGTERM: unwind, so that the kernel is shut down
        raise SystemExit(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    result = grade_submission(plan, path, timeout, deadline)
    result["student"] = student
    connection.send(result)
    connection.close()


def _failed(student: str, path: Path, reason: str) -> dict:
    return {"student": student, "file": path.name, "status": "error", "points": {}, "feedback": [], "notes": [],
            "reason": reason}


def grade_in_workers(plan: dict, found: list[tuple[str, Path]], timeout: float, jobs: int,
                     deadline: float) -> list[dict]:
    """Grade each file in its own forked process (its kernel is a child of that process), ``jobs`` at once.

    A worker that overruns ``deadline`` (plus a margin for starting and stopping its kernel) is sent
    SIGTERM, then SIGKILL; its kernel exits with it. A worker that dies gives a row with a reason.
    """
    import multiprocessing
    from multiprocessing.connection import wait

    context = multiprocessing.get_context("fork")  # the parent's imports are reused: no start-up per file
    results: dict[int, dict] = {}
    pending = list(enumerate(found))
    running: dict = {}  # the connection a worker sends its result on -> (index, process, started)
    while pending or running:
        while pending and len(running) < max(1, jobs):
            index, (student, path) = pending.pop(0)
            receive, send = context.Pipe(duplex=False)
            process = context.Process(target=_worker, args=(send, plan, student, path, timeout, deadline),
                                      daemon=True)
            process.start()
            send.close()  # the worker holds the only sending end: its exit makes the connection readable
            running[receive] = (index, process, time.monotonic())
        for receive in wait(list(running), timeout=1.0):  # a result, or the end of a worker that sent none
            index, process, _ = running.pop(receive)
            student, path = found[index]
            try:
                results[index] = receive.recv()
            except (EOFError, OSError):
                process.join()
                results[index] = _failed(student, path, f"the grading worker died (exit code {process.exitcode})")
            receive.close()
            process.join()
        for receive, (index, process, started) in list(running.items()):
            if time.monotonic() - started > deadline + 60:
                process.terminate()
                process.join(10)
                if process.is_alive():
                    process.kill()
                    process.join()
                del running[receive]
                receive.close()
                student, path = found[index]
                results[index] = _failed(student, path, f"grading took longer than {deadline + 60:g} s and was stopped")
    return [results[index] for index in range(len(found))]


def grade(homework: str, submissions: Path, out: Path, timeout: float = CELL_TIMEOUT_S, jobs: int = 2,
          deadline: float = DEADLINE_S) -> list[dict]:
    """Grade every submission in a folder; write ``grades.csv`` and ``feedback/<student>.md`` to ``out``."""
    plan = grading_plan(homework)
    if not submissions.is_dir():
        raise HomeworkError(f"{submissions} is not a folder of submitted notebooks")
    for name, value in (("timeout", timeout), ("deadline", deadline)):
        if not value > 0:
            raise HomeworkError(f"{name} must be a positive number of seconds, got {value!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise HomeworkError(f"jobs must be a positive integer, got {jobs!r}")
    found = submissions_in(submissions)
    out.mkdir(parents=True, exist_ok=True)
    results = grade_in_workers(plan, found, timeout, jobs, deadline)
    for result in results:
        for test in plan["hidden"]:
            result["points"].setdefault(test["grade_id"], 0)
        result["total"] = sum(result["points"].values())
        result["max_total"] = sum(test["points"] for test in plan["hidden"])
    write_csv(out / "grades.csv", plan, results)
    feedback = out / "feedback"
    feedback.mkdir(exist_ok=True)
    for result in results:
        (feedback / f"{result['student']}.md").write_text(feedback_markdown(plan, result), encoding="utf-8")
    return results


def write_csv(path: Path, plan: dict, results: list[dict]) -> None:
    ids = [test["grade_id"] for test in plan["hidden"]]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", *ids, "total", "max", "reason"])
        for result in sorted(results, key=lambda r: r["student"]):
            writer.writerow([result["student"], *(_number(result["points"].get(i, 0)) for i in ids),
                             _number(result["total"]), _number(result["max_total"]), result["reason"]])


def _number(value) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def feedback_markdown(plan: dict, result: dict) -> str:
    """Per-student feedback: the score, each question's points and, for failures, what the tests said."""
    lines = [f"# Feedback: {plan['homework']} for {result['student']}", "",
             f"**Score: {_number(result['total'])} / {_number(result['max_total'])}**", ""]
    if result.get("status") != "graded":
        lines += [f"Your notebook could not be graded: {result['reason'].rstrip('.')}.", "",
                  "Every question scores 0. Check that you submitted the .ipynb file from Jupyter, saved, "
                  "and that it opens there.", ""]
        return "\n".join(lines)
    lines += ["| question | points | result |", "| --- | --- | --- |"]
    for item in result["feedback"]:
        verdict = "passed" if item["passed"] else "failed"
        lines.append(f"| {item['grade_id']} | {_number(item['points'])} / {_number(item['max'])} | {verdict} |")
    lines.append("")
    failures = [item for item in result["feedback"] if not item["passed"]]
    for item in failures:
        lines += [f"## {item['grade_id']}", ""]
        said = [line for line in item["output"].splitlines() if line.strip()]
        if said:
            lines += ["The checks said:", "", "```text", *said, "```", ""]
        repeated = item["error"].removeprefix("AssertionError: ")
        if item["error"] and not any(repeated in line for line in said):
            lines += [f"The test stopped with: `{item['error']}`", ""]
    if result["notes"]:
        lines += ["## Notes", ""] + [f"- {note}" for note in dict.fromkeys(result["notes"])] + [""]
    if not failures:
        lines += ["Every hidden test passed. Well done.", ""]
    return "\n".join(lines)


# --- nbgrader ----------------------------------------------------------------------------------------


def _solution_with_markers(stub: str, solution: str) -> str:
    """The solution with each part that differs from the stub between nbgrader's solution markers.

    nbgrader's ``generate_assignment`` replaces every marked region by its code stub, so the student
    still sees what the solution shares with the stub: signatures and docstrings.
    """
    import difflib

    stub_lines, solution_lines = stub.splitlines(), solution.splitlines()
    out: list[str] = []
    matcher = difflib.SequenceMatcher(a=stub_lines, b=solution_lines, autojunk=False)
    for operation, _, _, start, end in matcher.get_opcodes():
        region = solution_lines[start:end]
        if operation == "equal" or not any(line.strip() for line in region):
            out.extend(region)
            continue
        indent = min(len(line) - len(line.lstrip()) for line in region if line.strip())
        pad = " " * indent
        out.extend([f"{pad}### BEGIN SOLUTION", *region, f"{pad}### END SOLUTION"])
    return "\n".join(out)


def nbgrader_notebook(homework: str | Path):
    """The nbgrader source notebook: solution cells with markers, hidden tests, locked read-only cells."""
    path, source = load(homework)
    name = path.stem
    cells = []
    counters: dict[str, int] = {}

    def meta(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
        data = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
                "solution": solution, "task": False}
        if points is not None:
            data["points"] = points
        return {"nbgrader": data}

    for index, cell in enumerate(source.cells):
        cell_role = role(cell)
        task = cell.metadata.get("task", "")
        if cell_role == "stub":
            continue  # merged into the solution cell that follows it
        if cell_role == "solution":
            text = _solution_with_markers(source.cells[index - 1].source, cell.source)
            new = nbformat.v4.new_code_cell(text, metadata=meta(f"{task}-solution", solution=True))
        elif cell_role == "hidden-test":
            grade_id = cell.metadata["grade_id"]
            points = cell.metadata["points"]
            worth = f"{_number(points)} point{'' if points == 1 else 's'}"
            text = (f"# Hidden tests: {grade_id} ({worth}), run when graded\n"
                    f"### BEGIN HIDDEN TESTS\n{cell.source}\n### END HIDDEN TESTS")
            new = nbformat.v4.new_code_cell(text, metadata=meta(grade_id, grade=True, locked=True,
                                                                points=cell.metadata["points"]))
        else:
            counters[cell_role] = counters.get(cell_role, 0) + 1
            grade_id = f"{cell_role}-{task + '-' if task else ''}{counters[cell_role]}"
            factory = nbformat.v4.new_markdown_cell if cell.cell_type == "markdown" else nbformat.v4.new_code_cell
            new = factory(cell.source, metadata=meta(grade_id, locked=True))
        new.metadata["tags"] = [cell_role]
        new.id = stable_id(name, len(cells), new.source)
        cells.append(new)
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": KERNEL},
                         "language_info": {"name": "python"}}
    nbformat.validate(notebook)
    return notebook


def write_nbgrader(out: Path, homeworks: list[str]) -> list[Path]:
    """``OUT/source/<homework>/<homework>.ipynb``: the layout of an nbgrader course directory."""
    written = []
    for homework in homeworks or homework_sources():
        name = resolve(homework).stem
        target = out / "source" / name / f"{name}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbgrader_notebook(homework), target)
        written.append(target)
    return written


# --- command line ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="validate the cell roles of the instructor sources")
    check.add_argument("homework", nargs="*")
    student = commands.add_parser("student", help="write the student notebooks")
    student.add_argument("homework", nargs="*")
    student.add_argument("--out", type=Path, default=STUDENT_DIR)
    grading = commands.add_parser("grade", help="grade a folder of submitted notebooks")
    grading.add_argument("homework")
    grading.add_argument("submissions", type=Path)
    grading.add_argument("out", type=Path)
    grading.add_argument("--timeout", type=float, default=CELL_TIMEOUT_S, help="seconds per cell")
    grading.add_argument("--jobs", type=int, default=2, help="submissions graded in parallel")
    grading.add_argument("--deadline", type=float, default=DEADLINE_S, help="seconds per submission")
    export = commands.add_parser("nbgrader", help="write nbgrader source notebooks to OUT/source/")
    export.add_argument("out", type=Path)
    export.add_argument("homework", nargs="*")
    args = parser.parse_args(argv)

    try:
        if args.command == "check":
            for homework in args.homework or homework_sources():
                plan = grading_plan(homework)  # validates the source on the way
                points = sum(t["points"] for t in plan["hidden"])
                print(f"{plan['homework']}: {len(plan['tasks'])} tasks, {len(plan['hidden'])} hidden tests, "
                      f"{_number(points)} points")
        elif args.command == "student":
            for target in write_student_notebooks(args.out, args.homework):
                print(f"wrote {_relative(target)}")
        elif args.command == "grade":
            start = time.perf_counter()
            results = grade(args.homework, args.submissions, args.out, args.timeout, args.jobs, args.deadline)
            seconds = time.perf_counter() - start
            for result in sorted(results, key=lambda r: r["student"]):
                print(f"{result['student']}: {_number(result['total'])} / {_number(result['max_total'])}  "
                      f"{result['reason']}")
            print(f"graded {len(results)} submission(s) in {seconds:.1f} s: {_relative(args.out / 'grades.csv')}, "
                  f"feedback in {_relative(args.out / 'feedback')}")
        elif args.command == "nbgrader":
            for target in write_nbgrader(args.out, args.homework):
                print(f"wrote {_relative(target)}")
    except HomeworkError as error:
        print(f"homework: {error}", file=sys.stderr)
        return 1
    return 0


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


if __name__ == "__main__":
    raise SystemExit(main())
