"""Grading submitted notebooks: the sandbox produces answers, the grader judges them.

For each submission the grader starts a sandbox (:mod:`tools.homework.sandbox`) holding only the
driver (:mod:`tools.homework.sandbox_driver`), and sends it the submitted code cells one by one. The
hidden tests never enter the sandbox: they run here, in the grader's own process, with the names the stubs define bound to
stand-ins. Calling a stand-in function sends its inputs to the sandbox, where the student's function
runs on them, and reads back the result as data (arrays, numbers, an exception's type and message);
a stand-in value is read back the same way. The comparison with the reference (``attnbook.homework``,
numpy) happens here, where the submission cannot patch it.

Each submission runs in its own worker process, ``jobs`` at once; a worker that dies or overruns its
deadline still gives a row.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import time
import unicodedata
from pathlib import Path

import nbformat

from tools.homework import cgroups, sandbox, sandbox_driver, traces
from tools.homework.reports import feedback_markdown, feedback_names, write_csv, write_skipped
from tools.homework.sources import (HomeworkError, defined_names, function_names, load, one_line,
                                    package_references, role)

CELL_TIMEOUT_S = 10
DEADLINE_S = 180  # a whole submission; the per-cell timeout normally stops it long before
MAX_RESTARTS = 5  # kernels a submission may kill or hang before the rest of it is not run
MIN_ADDRESS_SPACE = 512 * 1024 ** 2  # per process: the driver (Python, IPython, numpy) peaks near 300 MB


# --- what grading needs from the source, and a submission ---------------------------------------------


def grading_plan(homework: str | Path) -> dict:
    """What grading needs from the instructor source: tasks, the names their stubs define, hidden tests."""
    path, notebook = load(homework)
    tasks: list[str] = []
    names: dict[str, list[str]] = {}
    functions: set[str] = set()
    reimplements: dict[str, list[str]] = {}
    hidden = []
    for cell in notebook.cells:
        task = cell.metadata.get("task")
        if role(cell) == "stub":
            tasks.append(task)
            names[task] = sorted(defined_names(cell.source))
            functions |= function_names(cell.source)
            if cell.metadata.get("reimplements"):
                reimplements[task] = list(cell.metadata["reimplements"])
        elif role(cell) == "hidden-test":
            hidden.append({"grade_id": cell.metadata["grade_id"], "points": cell.metadata["points"],
                           "task": task, "source": cell.source})
    handout = [cell.source for cell in notebook.cells if role(cell) in ("setup", "public-check")]
    return {"homework": path.stem, "tasks": tasks, "names": names, "functions": sorted(functions),
            "reimplements": reimplements, "handout": handout, "hidden": hidden}


def read_submission(path: Path):
    """A submitted notebook as nbformat v4, or a HomeworkError saying why it cannot be graded."""
    try:
        notebook = nbformat.read(path, as_version=4)
    except nbformat.reader.NotJSONError:
        raise HomeworkError("not a valid notebook: the file is not valid JSON (cut off, or edited outside "
                            "Jupyter?)") from None
    except nbformat.ValidationError as error:
        message = one_line(error, 200)
        raise HomeworkError(f"not a valid notebook: it does not follow nbformat 4 ({message})") from None
    except Exception as error:  # an unknown nbformat version, an unreadable file, JSON that is no notebook
        raise HomeworkError(f"not a valid notebook: {type(error).__name__}: {one_line(error, 200)}") from None
    try:
        nbformat.validate(notebook)
    except Exception as error:
        message = one_line(error, 200)
        raise HomeworkError(f"not a valid notebook: it does not follow nbformat 4 ({message})") from None
    return notebook

# --- a submission in its sandbox -------------------------------------------------------------------------------------


def claims_hidden_test(cell, hidden_ids: set[str]) -> bool:
    """A submitted cell that looks like a hidden test (tag, points, grade_id or nbgrader grade flag)."""
    metadata = cell.get("metadata", {})
    tags = metadata.get("tags", [])
    nbgrader = metadata.get("nbgrader", {})
    return ("hidden-test" in tags or "points" in metadata or metadata.get("grade_id") in hidden_ids
            or (isinstance(nbgrader, dict) and nbgrader.get("grade") is True))


def submitted_cells(notebook, plan: dict) -> tuple[list, list[str]]:
    """The cells the sandbox runs (claimed hidden tests dropped), and notes for the feedback."""
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
    notes += package_uses(cells, plan)
    return cells, list(dict.fromkeys(notes))


def package_uses(cells: list, plan: dict) -> list[str]:
    """Notes on the attnbook functions a submission uses where its task asks for its own code.

    Read from the submitted source, here in the grader (the sandbox cannot hide a use from it); cells
    identical to the handout's setup and public checks are not counted. The grade does not change:
    the note tells the student and the instructor, who decides.
    """
    stub_names = {name for names in plan["names"].values() for name in names}
    handout = {source.strip() for source in plan["handout"]}
    notes = []
    for task, forbidden in plan["reimplements"].items():
        cells_using: dict[str, list[int]] = {}
        for index, cell in enumerate(cells):
            if cell.cell_type != "code" or cell.source.strip() in handout:
                continue
            for name in package_references(cell.source, set(forbidden), stub_names):
                cells_using.setdefault(name, []).append(index)
        for name, indices in sorted(cells_using.items()):
            where = ", ".join(str(i) for i in indices)
            notes.append(f"task {task} asks you to write {name} yourself, and your code uses attnbook's "
                         f"{name} (cell {where}); the grade does not change, your instructor may look at it")
    return notes


class Runner:
    """The submission's cells in a sandbox, restarted (and the clean cells run again) when it dies or hangs."""

    def __init__(self, cells: list, timeout: float, deadline: float, sandboxed: bool,
                 caps: cgroups.Plan | None = None, uid: int | None = None):
        self.cells, self.timeout = cells, timeout
        self.deadline = time.monotonic() + deadline
        self.session = sandbox.Session(sandboxed, cpu_seconds=deadline, caps=caps, uid=uid)
        self.ran_cleanly: list[int] = []
        self.notes: list[str] = []
        self.restarts = 0

    def _run(self, index: int) -> dict:
        source = self.cells[index].source
        try:
            return self.session.request({"op": "run", "source": source, "timeout": self.timeout},
                                        self.timeout + sandbox.GRACE_S)
        finally:
            self.note_caps(f"cell {index}")

    def note_caps(self, where: str) -> None:
        """Say in the feedback when the sandbox met its memory or process cap (``where``: while doing what)."""
        events = self.session.new_events()
        caps = self.session.caps
        if events["oom_kill"]:
            self.notes.append(f"{where}: the submission's processes together reached the sandbox's memory cap "
                              f"({caps.memory_bytes / 1024 ** 3:g} GiB), and the kernel stopped "
                              f"{events['oom_kill']} of them")
        if events["pids_max"]:
            self.notes.append(f"{where}: the sandbox reached its cap of {caps.processes} processes and threads; "
                              f"{events['pids_max']} more were refused")

    def restart(self) -> None:
        """A fresh sandbox that has run again the cells that had run cleanly."""
        self.restarts += 1
        if self.restarts > MAX_RESTARTS:
            raise sandbox.SandboxDied(f"the kernel was restarted {MAX_RESTARTS} times; the rest was not run")
        self.session.start()
        for index in self.ran_cleanly:
            self._run(index)

    def run_cells(self) -> None:
        self.session.start()
        for index, cell in enumerate(self.cells):
            if cell.cell_type != "code":
                continue
            if time.monotonic() > self.deadline:
                self.notes.append(f"grading stopped at cell {index}: the submission ran out of time")
                return
            try:
                status = self._run(index)
            except sandbox.SandboxDied as died:
                if died.timed_out:
                    self.notes.append(f"cell {index}: the cell ran longer than {self.timeout:g} s and was "
                                      "interrupted; the kernel ignored the interrupt and was restarted")
                else:
                    self.notes.append(f"cell {index}: {died.reason}; it was restarted")
                self.restart()
                continue
            if status.get("ok") is True:
                self.ran_cleanly.append(index)
            elif status.get("ename") == "KeyboardInterrupt":
                self.notes.append(f"cell {index}: the cell ran longer than {self.timeout:g} s and was interrupted")
            else:
                ename = status.get("ename")
                named = ename if isinstance(ename, str) and sandbox_driver.NAME.fullmatch(ename) else "an exception"
                memory = f" (the sandbox's memory: {self.session.caps.describe()})" if named == "MemoryError" else ""
                self.notes.append(f"cell {index} raised {named}{memory}")

    def defined(self, names: list[str]) -> dict[str, bool]:
        try:
            answer = self.session.request({"op": "names", "names": names}, self.timeout + sandbox.GRACE_S)
        except sandbox.SandboxDied:  # once more, in a fresh sandbox
            self.restart()
            answer = self.session.request({"op": "names", "names": names}, self.timeout + sandbox.GRACE_S)
        found = answer.get("defined")
        if not isinstance(found, dict):
            raise sandbox.SandboxDied("the kernel sent an answer the grader cannot read")
        return {name: found[name] is True for name in names if name in found}

    def value(self, name: str):
        answer = self.session.request({"op": "get", "name": name, "timeout": self.timeout},
                                      self.timeout + sandbox.GRACE_S)
        return sandbox_driver.decode(answer.get("value"))

    def remote(self, name: str):
        """A function that calls the submission's ``name`` in the sandbox on copies of its inputs."""
        def call(*args, **kwargs):
            if time.monotonic() > self.deadline:
                raise TimeoutError("the submission ran out of time")
            request = {"op": "call", "name": name, "args": [sandbox_driver.encode(a) for a in args],
                       "kwargs": {k: sandbox_driver.encode(v) for k, v in kwargs.items()}, "timeout": self.timeout}
            try:
                answer = self.session.request(request, self.timeout + sandbox.GRACE_S)
            except sandbox.SandboxDied as died:
                self.note_caps(f"a call of {name}")
                self.restart()
                if died.timed_out:
                    raise TimeoutError(f"{name} ran longer than {self.timeout:g} s") from None
                raise RuntimeError(f"{name}: {died.reason}") from None
            if set(answer) == {"raised"}:
                raise sandbox_driver.exception_from(answer["raised"])
            if set(answer) != {"value"}:
                raise ValueError(f"{name} gave an answer the grader cannot read")
            try:
                return sandbox_driver.decode(answer["value"])
            except sandbox_driver.WireError as error:
                raise ValueError(f"{name} returned a value the grader cannot read ({error})") from None

        call.__name__ = call.__qualname__ = name
        return call

    def namespace(self, plan: dict) -> dict:
        """What the hidden tests see: stand-ins for every name the submission defines."""
        wanted = sorted({name for names in plan["names"].values() for name in names})
        found = self.defined(wanted)
        space: dict = {"__name__": "hidden_test"}
        for name, is_callable in found.items():
            if is_callable and name in plan["functions"]:
                space[name] = self.remote(name)
            else:
                try:
                    space[name] = self.value(name)
                except sandbox_driver.WireError:
                    space[name] = sandbox_driver.Unreadable("value")
                except sandbox.SandboxDied as died:  # too large to send in time, say: the value is lost
                    space[name] = sandbox_driver.Unreadable(f"value ({died.reason})")
                    self.restart()
        return space


def run_hidden_test(test: dict, space: dict) -> tuple[bool, str, str]:
    """Run a hidden test here, in the grader; returns (passed, what it printed, the error that stopped it)."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(test["source"], f"<hidden test {test['grade_id']}>", "exec"), dict(space))
    except Exception as error:  # an assertion, or the student's error coming back as data
        return False, printed.getvalue()[-2000:], one_line(f"{type(error).__name__}: {error}".strip(": "))
    return True, printed.getvalue()[-2000:], ""


def grade_submission(plan: dict, path: Path, timeout: float = CELL_TIMEOUT_S, deadline: float = DEADLINE_S,
                     sandboxed: bool = True, caps: cgroups.Plan | None = None, uid: int | None = None) -> dict:
    """Grade one file; never raises: a file that cannot be run gets 0 points and a reason.

    ``uid`` is the submission's own uid when the caller leased it (as root); without one the sandbox
    leases its own.

    ``result["cleanup"]`` lists what the sandbox left on the host and the grader had to remove (normally
    nothing); the reason and the feedback say it too.
    """
    started = time.monotonic()
    result = {"student": path.stem, "file": path.name, "points": {}, "feedback": [], "notes": [], "cleanup": []}
    for test in plan["hidden"]:
        result["points"][test["grade_id"]] = 0
    runner = None
    try:
        notebook = read_submission(path)
        cells, notes = submitted_cells(notebook, plan)
        result["notes"].extend(notes)
        runner = Runner(cells, timeout, deadline, sandboxed, caps, uid)
        runner.run_cells()
        space = runner.namespace(plan)
        for test in plan["hidden"]:
            passed, output, error = run_hidden_test(test, space)
            result["points"][test["grade_id"]] = test["points"] if passed else 0
            result["feedback"].append({"grade_id": test["grade_id"], "passed": passed,
                                       "points": result["points"][test["grade_id"]], "max": test["points"],
                                       "output": output, "error": error})
        result["notes"].extend(runner.notes)
        result["status"] = "graded"
    except HomeworkError as error:
        result["status"] = "invalid"
        result["reason"] = str(error)
    except sandbox.SandboxDied as died:
        result["notes"].extend(runner.notes if runner else [])
        result["status"] = "error"
        result["reason"] = f"could not be run: {died.reason}"
    except Exception as error:  # a sandbox that would not start, and anything else: a reason, not a crash
        result["status"] = "error"
        result["reason"] = f"could not be run: {type(error).__name__}: {one_line(error, 200)}"
    finally:
        if runner is not None:
            result["cleanup"] = runner.session.close()
    result["seconds"] = round(time.monotonic() - started, 2)
    _finish_result(result, plan)
    if result["cleanup"]:
        _say_cleaned(result, "the sandbox left something on the grading machine, which was removed: "
                     + "; ".join(result["cleanup"]))
    return result


def _say_cleaned(result: dict, note: str) -> None:
    """Put what had to be cleaned into the feedback's notes and the CSV's reason."""
    result["notes"].append(note)
    result["reason"] = "; ".join([result["reason"], note])


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


# --- a folder of submissions --------------------------------------------------------------------------


def normalised_name(text: str) -> str:
    """A name as two people would read it: NFKC-normalised, with format characters (category Cf) removed.

    Zero-width spaces and joiners, direction marks and overrides, soft hyphens are format characters;
    NFKC folds compatibility forms (full-width letters, ligatures, a no-break space) into their plain
    ones. Two file names with the same normalised name look the same on a screen.
    """
    return unicodedata.normalize("NFKC", "".join(c for c in text if unicodedata.category(c) != "Cf"))


def shown_name(text: str) -> str:
    """A name with its invisible characters shown as ``<U+200B>``, so that look-alike names show apart."""
    return "".join(f"<U+{ord(c):04X}>" if unicodedata.category(c) in ("Cf", "Cc", "Zl", "Zp") else c
                   for c in text)


def submissions_in(folder: Path) -> tuple[list[dict], list[tuple[str, str]]]:
    """Every notebook under ``folder``, at any depth, and every other file with the reason it is skipped.

    A notebook is a file whose name ends in ``.ipynb`` in any case. Its student is the file's name
    without the suffix when it sits in ``folder`` itself, else the name of the top folder it sits in
    (one folder per student), in its :func:`normalised_name`. Two files of one student (also two whose
    names only look the same: ``dup`` and ``dup`` with a zero-width space) are both kept, each on its
    own row named by its path with its invisible characters shown (:func:`shown_name`), and marked as a
    collision: nothing is merged or overwritten.
    """
    found: list[dict] = []
    skipped: list[tuple[str, str]] = []
    for path in sorted((p for p in folder.rglob("*") if p.is_file() or p.is_symlink()),
                       key=lambda p: p.relative_to(folder).as_posix()):
        relative = path.relative_to(folder).as_posix()
        if any(part == ".ipynb_checkpoints" for part in path.relative_to(folder).parts):
            skipped.append((relative, "a Jupyter checkpoint, not a submission"))
        elif path.is_symlink():
            skipped.append((relative, "a symbolic link; submit the notebook itself"))
        elif not path.name.lower().endswith(".ipynb"):
            skipped.append((relative, "not a notebook (.ipynb)"))
        else:
            parts = path.relative_to(folder).parts
            written = path.name[: -len(".ipynb")] if len(parts) == 1 else parts[0]
            found.append({"student": normalised_name(written), "written": written, "path": path,
                          "relative": relative})
    groups: dict[str, list[dict]] = {}
    for item in found:
        groups.setdefault(item["student"], []).append(item)
    for item in found:
        group = groups[item["student"]]
        item["collision"] = [shown_name(other["relative"]) for other in group] if len(group) > 1 else []
        item["look_alike"] = len({other["written"] for other in group}) > 1
        item["row"] = shown_name(item["relative"]) if item["collision"] else item["student"]
    return found, skipped


def _worker(connection, plan: dict, path: Path, timeout: float, deadline: float, sandboxed: bool,
            caps: cgroups.Plan | None, uid: int | None):
    """The body of one grading process: grade a file, send the result back, exit."""
    def stop(signum, frame):  # the parent's SIGTERM: unwind, so that the sandbox is stopped
        raise SystemExit(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    result = grade_submission(plan, path, timeout, deadline, sandboxed, caps, uid)
    connection.send(result)
    connection.close()


def _failed(path: Path, reason: str) -> dict:
    return {"file": path.name, "status": "error", "points": {}, "feedback": [], "notes": [], "cleanup": [],
            "reason": reason}


def _after_worker(result: dict, lease: traces.Lease | None) -> dict:
    """The worker is gone: check, as the parent, that its uid owns nothing (a killed worker never checked)."""
    if lease is None:
        return result
    cleaned = traces.clean(traces.leftovers(lease.uid))
    lease.release()
    if cleaned:
        result["cleanup"] = [*result.get("cleanup", []), *cleaned]
        _say_cleaned(result, "after its worker ended, the sandbox's uid still owned something, which was "
                     "removed: " + "; ".join(cleaned))
    return result


def grade_in_workers(plan: dict, paths: list[Path], timeout: float, jobs: int, deadline: float,
                     sandboxed: bool = True, caps: cgroups.Plan | None = None) -> list[dict]:
    """Grade each file in its own forked process, ``jobs`` at once, each with a sandbox of its own.

    As root, each submission's uid is leased here, in the parent, and checked here once its worker has
    ended, however it ended. A worker that overruns ``deadline`` (plus a margin for starting and stopping its
    sandbox) is sent SIGTERM, then SIGKILL. A worker that dies gives a row with a reason.
    """
    import multiprocessing
    from multiprocessing.connection import wait

    context = multiprocessing.get_context("fork")  # the parent's imports are reused: no start-up per file
    results: dict[int, dict] = {}
    pending = list(enumerate(paths))
    running: dict = {}  # the connection a worker sends its result on -> (index, process, started, lease)
    while pending or running:
        while pending and len(running) < max(1, jobs):
            index, path = pending.pop(0)
            lease = traces.lease_uid() if sandboxed and os.geteuid() == 0 else None
            receive, send = context.Pipe(duplex=False)
            process = context.Process(target=_worker, daemon=True, args=(
                send, plan, path, timeout, deadline, sandboxed, caps, lease.uid if lease else None))
            process.start()
            send.close()  # the worker holds the only sending end: its exit makes the connection readable
            running[receive] = (index, process, time.monotonic(), lease)
        for receive in wait(list(running), timeout=1.0):  # a result, or the end of a worker that sent none
            index, process, _, lease = running.pop(receive)
            try:
                result = receive.recv()
            except (EOFError, OSError):
                process.join()
                result = _failed(paths[index], f"the grading worker died (exit code {process.exitcode})")
            receive.close()
            process.join()
            results[index] = _after_worker(result, lease)
        for receive, (index, process, started, lease) in list(running.items()):
            if time.monotonic() - started > deadline + 60:
                process.terminate()
                process.join(10)
                if process.is_alive():
                    process.kill()
                    process.join()
                del running[receive]
                receive.close()
                result = _failed(paths[index], f"grading took longer than {deadline + 60:g} s and was stopped")
                results[index] = _after_worker(result, lease)
    return [results[index] for index in range(len(paths))]


def grade(homework_name: str, submissions: Path, out: Path, timeout: float = CELL_TIMEOUT_S, jobs: int = 2,
          deadline: float = DEADLINE_S, sandboxed: bool = True,
          memory_bytes: int = cgroups.MEMORY_BYTES) -> tuple[list[dict], list[tuple[str, str]]]:
    """Grade every submission in a folder; write ``grades.csv``, ``feedback/`` and ``skipped.csv`` to ``out``.

    ``memory_bytes`` caps each sandbox, all its processes together (:mod:`tools.homework.cgroups`);
    grading refuses to start when ``jobs`` sandboxes at that cap could exceed the machine's memory.
    Returns the results (one per notebook, ``row`` names its CSV row) and the skipped files.
    """
    plan = grading_plan(homework_name)
    if not submissions.is_dir():
        raise HomeworkError(f"submissions: {submissions} is not a folder of submitted notebooks")
    for name, value in (("timeout", timeout), ("deadline", deadline)):
        if not value > 0:
            raise HomeworkError(f"{name} must be a positive number of seconds, got {value!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise HomeworkError(f"jobs must be a positive integer, got {jobs!r}")
    if isinstance(memory_bytes, bool) or not isinstance(memory_bytes, int) or memory_bytes <= 0:
        raise HomeworkError(f"memory must be a positive number of bytes, got {memory_bytes!r}")
    if sandboxed and os.geteuid() == 0:
        try:
            traces.uid_range()
        except ValueError as error:
            raise HomeworkError(str(error)) from None
    caps = cgroups.plan(memory_bytes) if sandboxed else None
    if caps is not None:
        if caps.address_space < MIN_ADDRESS_SPACE:
            raise HomeworkError(f"memory: {memory_bytes / 1024 ** 3:g} GiB per sandbox is too little: "
                                f"{caps.describe()}, and a sandbox's Python needs "
                                f"{MIN_ADDRESS_SPACE / 1024 ** 2:.0f} MiB per process")
        needed, machine = cgroups.needed_bytes(jobs, caps), cgroups.machine_memory()
        if needed > machine:
            raise HomeworkError(f"{jobs} sandboxes at once, each capped at {memory_bytes / 1024 ** 3:g} GiB, with "
                                f"the grader's own {cgroups.GRADER_RESERVE_BYTES / 1024 ** 3:g} GiB, could take "
                                f"{needed / 1024 ** 3:.1f} GiB, more than this machine's {machine / 1024 ** 3:.1f} "
                                "GiB: lower --jobs or --memory")
    found, skipped = submissions_in(submissions)
    if not found:
        listed = f" ({len(skipped)} other file(s) skipped: {skipped[0][0]}: {skipped[0][1]}...)" if skipped else ""
        raise HomeworkError(f"submissions: no notebook (*.ipynb) in {submissions}{listed}")
    if sandboxed:
        try:
            sandbox.probe()
        except sandbox.SandboxError as error:
            raise HomeworkError(f"cannot isolate the submissions, so nothing was graded: {error}. Mend that, or, "
                                "knowing that every submission then runs with your rights and can change the "
                                "grades, pass --unsafe-no-sandbox (make grade ... UNSAFE_NO_SANDBOX=1)") from None
    if sandboxed and os.geteuid() != 0 and jobs > 1:
        # graded as another user, every sandbox runs under that user's uid, whose process limit they share:
        # one submission's processes would count against another's, so the sandboxes run one at a time
        print(f"homework: graded as a user, the sandboxes share your uid and its process limit: one at a time "
              f"instead of --jobs {jobs} (as root each submission has a uid of its own)", file=sys.stderr)
        jobs = 1
    elif sandboxed and not caps.cpu and jobs > 1:
        # nothing shares the CPU between sandboxes: one submission's processes could starve another's cells
        print(f"homework: no CPU share per sandbox ({caps.why_not_cpu}): one at a time instead of --jobs {jobs}",
              file=sys.stderr)
        jobs = 1
    out.mkdir(parents=True, exist_ok=True)
    results = grade_in_workers(plan, [item["path"] for item in found], timeout, jobs, deadline, sandboxed, caps)
    names = feedback_names([item["row"] for item in found])
    for item, result in zip(found, results):
        result["student"] = item["row"]
        result["file"] = shown_name(item["relative"])
        result["feedback_file"] = names[item["row"]]
        for test in plan["hidden"]:
            result["points"].setdefault(test["grade_id"], 0)
        if item["collision"]:
            alike = " whose names look the same (after Unicode normalisation)" if item["look_alike"] else ""
            note = (f"name collision: {len(item['collision'])} submissions{alike} for {item['student']} "
                    f"({', '.join(item['collision'])}); each is graded on its own row")
            result["reason"] = f"{note}; {result['reason']}"
            if item["look_alike"]:  # maybe someone else's file: the feedback does not name it
                note = (f"another submission's name looks the same as yours ({item['student']}) after Unicode "
                        "normalisation; both are graded, each on its own row, and your instructor may ask which is yours")
            result["notes"].append(note)
        result["total"] = sum(result["points"].values())
        result["max_total"] = sum(test["points"] for test in plan["hidden"])
    write_csv(out / "grades.csv", plan, results)
    write_skipped(out / "skipped.csv", skipped)
    feedback = out / "feedback"
    feedback.mkdir(exist_ok=True)
    for result in results:
        (feedback / result["feedback_file"]).write_text(feedback_markdown(plan, result), encoding="utf-8")
    return results, skipped
