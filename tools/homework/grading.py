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
import json
import os
import resource
import select
import signal
import stat
import sys
import time
import unicodedata
from pathlib import Path

import nbformat

from tools.homework import cgroups, sandbox, sandbox_driver, traces
from tools.homework.reports import (feedback_markdown, feedback_name, submission_key, write_csv, write_feedback,
                                   write_skipped)
from tools.homework.safe_text import NAME_LIMIT, visible
from tools.homework.sources import (HomeworkError, defined_names, function_names, load, one_line,
                                    package_references, role)

CELL_TIMEOUT_S = 10
DEADLINE_S = 180  # a whole submission; the per-cell timeout normally stops it long before
MAX_RESTARTS = 5  # kernels a submission may kill or hang before the rest of it is not run
MIN_ADDRESS_SPACE = 512 * 1024 ** 2  # per process: the driver (Python, IPython, numpy) peaks near 300 MB
MAX_SUBMISSION_BYTES = 5 * 1024 ** 2  # a submitted file, before it is read (--max-size); an honest one is ~10-500 KiB
PARSE_MEMORY_BYTES = 1024 ** 3  # what reading a submission's JSON may add to the grader's address space
PARSE_SECONDS = 60  # CPU and wall time to read one (a 5 MiB notebook of 60,000 empty cells takes ~15 s)
MAX_DEPTH = 32  # folders below the submissions folder that are searched
MAX_ENTRIES = 20_000  # files and folders the search looks at, in all


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


def read_submission(path: Path, max_bytes: int = MAX_SUBMISSION_BYTES):
    """A submitted notebook's cells (nbformat v4), or a HomeworkError saying why it cannot be graded.

    The file is opened without following a link, must be a regular file of at most ``max_bytes``
    (measured before it is read, so a sparse file of many GiB costs nothing) and is read up to that
    size. The JSON is parsed and validated in a child process (:func:`_parse_in_child`) whose address
    space may grow by at most ``PARSE_MEMORY_BYTES`` and which may use ``PARSE_SECONDS`` of time; it sends
    back only what grading uses: each cell's type and source, and the metadata that marks a hidden test.
    """
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise HomeworkError(f"cannot be read: {error.strerror}") from None
    with os.fdopen(handle, "rb") as file:
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise HomeworkError("not a regular file; submit the notebook itself")
        if status.st_size > max_bytes:
            raise HomeworkError(too_large(status.st_size, max_bytes))
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew since it was measured
        raise HomeworkError(too_large(len(data), max_bytes))
    return nbformat.from_dict({"cells": _parse_in_child(data)})


def too_large(size: int, max_bytes: int) -> str:
    return (f"{size / 1024 ** 2:.1f} MiB, more than the {max_bytes / 1024 ** 2:g} MiB a submission may have "
            "(--max-size); clear the outputs and submit again")


def _parse(data: bytes) -> list[dict]:
    """The cells grading uses, from a notebook's bytes (in the child): type, source and hidden-test marks."""
    try:
        notebook = nbformat.reads(data.decode("utf-8"), as_version=4)
    except MemoryError:
        raise
    except nbformat.reader.NotJSONError:
        raise HomeworkError("not a valid notebook: the file is not valid JSON (cut off, or edited outside "
                            "Jupyter?)") from None
    except nbformat.ValidationError as error:
        message = one_line(error, 200)
        raise HomeworkError(f"not a valid notebook: it does not follow nbformat 4 ({message})") from None
    except Exception as error:  # an unknown nbformat version, bytes that are not UTF-8, JSON that is no notebook
        raise HomeworkError(f"not a valid notebook: {type(error).__name__}: {one_line(error, 200)}") from None
    try:
        nbformat.validate(notebook)
    except MemoryError:
        raise
    except Exception as error:
        message = one_line(error, 200)
        raise HomeworkError(f"not a valid notebook: it does not follow nbformat 4 ({message})") from None
    cells = []
    for cell in notebook.cells:
        metadata = cell.get("metadata", {})
        tags = metadata.get("tags", [])
        nbgrader = metadata.get("nbgrader", {})
        marks = {"tags": [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []}
        if "points" in metadata:
            marks["points"] = True
        if isinstance(metadata.get("grade_id"), str):
            marks["grade_id"] = metadata["grade_id"]
        if isinstance(nbgrader, dict) and nbgrader.get("grade") is True:
            marks["nbgrader"] = {"grade": True}
        cells.append({"cell_type": cell.cell_type, "source": cell.get("source", ""), "metadata": marks})
    return cells


def _address_space() -> int:
    """This process's virtual memory size in bytes (what RLIMIT_AS counts)."""
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _parse_in_child(data: bytes) -> list[dict]:
    """:func:`_parse` in a forked child held to ``PARSE_MEMORY_BYTES`` more address space and ``PARSE_SECONDS``.

    The child sends its answer as JSON (a list of cells, or the reason) on a pipe; the parent reads
    it until the deadline, then kills the child. A parse that runs out of memory or time is a reason.
    """
    receive, send = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: limits first, then the parse; it never returns
        code = 1
        try:
            os.close(receive)
            limit = _address_space() + PARSE_MEMORY_BYTES
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
            _, hard = resource.getrlimit(resource.RLIMIT_CPU)
            cpu = PARSE_SECONDS if hard == resource.RLIM_INFINITY else min(PARSE_SECONDS, hard)
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, hard))
            try:
                answer = {"cells": _parse(data)}
            except HomeworkError as error:
                answer = {"reason": str(error)}
            except MemoryError:
                answer = {"reason": "memory"}
            payload = json.dumps(answer).encode("utf-8", "surrogatepass")
            with os.fdopen(send, "wb") as pipe:
                pipe.write(payload)
            code = 0
        finally:
            os._exit(code)
    os.close(send)
    chunks: list[bytes] = []
    stop = time.monotonic() + PARSE_SECONDS + 5
    timed_out = True  # until the child's answer is read to its end
    try:
        with os.fdopen(receive, "rb", buffering=0) as pipe:
            while (left := stop - time.monotonic()) > 0 and select.select([pipe], [], [], left)[0]:
                chunk = pipe.read(1 << 16)
                if not chunk:
                    timed_out = False
                    break
                chunks.append(chunk)
    finally:  # also when the worker is stopped meanwhile: the child goes with it
        if timed_out:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    memory = f"more than {PARSE_MEMORY_BYTES / 1024 ** 2:.0f} MiB of memory"
    if timed_out or os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL):
        raise HomeworkError(f"not a valid notebook: reading it took longer than {PARSE_SECONDS} s")
    try:
        answer = json.loads(b"".join(chunks).decode("utf-8", "surrogatepass"))
    except ValueError:  # the child died without an answer: out of memory before it could say so
        raise HomeworkError(f"not a valid notebook: reading it took {memory}") from None
    if "reason" in answer:
        raise HomeworkError(f"not a valid notebook: reading it took {memory}" if answer["reason"] == "memory"
                            else answer["reason"])
    return answer["cells"]

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
                     sandboxed: bool = True, caps: cgroups.Plan | None = None, uid: int | None = None,
                     max_bytes: int = MAX_SUBMISSION_BYTES) -> dict:
    """Grade one file; never raises: a file that cannot be run gets 0 points and a reason.

    The file is read with :func:`read_submission` (at most ``max_bytes``, parsed under a memory cap).

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
        notebook = read_submission(path, max_bytes)
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


def name_looks(text: str) -> set[str]:
    """The forms in which two names are the same to a reader: normalised and case-folded, or shown and case-folded.

    ``ann``, ``Ann``, ``ａｎｎ`` (full-width) and ``a<U+200B>nn`` share the first; a name holding an
    escape character and one holding the text ``\\x1b`` in its place share the second (both show as
    ``\\x1b``: :func:`~tools.homework.safe_text.visible`).
    """
    return {normalised_name(text).casefold(), unicodedata.normalize("NFKC", visible(text, NAME_LIMIT)).casefold()}


def _walk(folder: Path, max_bytes: int) -> tuple[list[tuple[str, Path]], list[tuple[str, str]]]:
    """Every regular file under ``folder`` that may be a submission, and what is skipped with the reason.

    Iterative, never following a symbolic link, at most ``MAX_DEPTH`` folders down and ``MAX_ENTRIES``
    entries in all; each entry is measured (``lstat``) before anything reads it, so a sparse file of
    many GiB or a named pipe costs nothing.
    """
    files: list[tuple[str, Path]] = []
    skipped: list[tuple[str, str]] = []
    seen = 0
    pending = [(folder, "", 0)]
    while pending:
        directory, prefix, depth = pending.pop()
        try:
            with os.scandir(directory) as listing:
                entries = list(listing)
        except OSError as error:
            skipped.append((prefix or ".", f"a folder that cannot be read ({error.strerror})"))
            continue
        for entry in entries:
            seen += 1
            if seen > MAX_ENTRIES:
                skipped.append((prefix or ".", f"the submissions folder holds more than {MAX_ENTRIES} files and "
                                "folders; the rest was not searched"))
                return files, skipped
            relative = f"{prefix}{entry.name}"
            try:
                mode = entry.stat(follow_symlinks=False)
            except OSError as error:
                skipped.append((relative, f"cannot be read ({error.strerror})"))
                continue
            if ".ipynb_checkpoints" in relative.split("/"):
                if stat.S_ISDIR(mode.st_mode) and depth < MAX_DEPTH:
                    pending.append((Path(entry.path), f"{relative}/", depth + 1))
                elif not stat.S_ISDIR(mode.st_mode):
                    skipped.append((relative, "a Jupyter checkpoint, not a submission"))
            elif stat.S_ISLNK(mode.st_mode):
                skipped.append((relative, "a symbolic link; submit the notebook itself"))
            elif stat.S_ISDIR(mode.st_mode):
                if depth + 1 > MAX_DEPTH:
                    skipped.append((f"{relative}/", f"a folder more than {MAX_DEPTH} levels down; not searched"))
                else:
                    pending.append((Path(entry.path), f"{relative}/", depth + 1))
            elif not stat.S_ISREG(mode.st_mode):
                skipped.append((relative, "not a regular file (a named pipe, socket or device); submit the "
                                "notebook itself"))
            elif not entry.name.lower().endswith(".ipynb"):
                skipped.append((relative, "not a notebook (.ipynb)"))
            elif mode.st_size > max_bytes:
                skipped.append((relative, too_large(mode.st_size, max_bytes)))
            else:
                files.append((relative, Path(entry.path)))
    return files, skipped


def submissions_in(folder: Path, max_bytes: int = MAX_SUBMISSION_BYTES) -> tuple[list[dict], list[tuple[str, str]]]:
    """Every notebook under ``folder`` (:func:`_walk`), and every other file with the reason it is skipped.

    A notebook is a regular file whose name ends in ``.ipynb`` in any case, of at most ``max_bytes``.
    Its student is the file's name without the suffix when it sits in ``folder`` itself, else the name
    of the top folder it sits in (one folder per student), shown as written but made visible
    (:func:`~tools.homework.safe_text.visible`). Each notebook gets a key (its place in the sorted
    list and a hash of its path: :func:`~tools.homework.reports.submission_key`) and its feedback file's
    name from the key. Two files of one student, or of students whose names look the same
    (:func:`name_looks`: ``dup`` and ``dup`` with a zero-width space, ``Ann`` and ``ann``), are all
    kept, each on its own row named by its path, and marked as a collision: nothing is merged or
    overwritten.
    """
    files, skipped = _walk(folder, max_bytes)
    files.sort(key=lambda item: item[0])
    skipped.sort(key=lambda item: item[0])
    found: list[dict] = []
    for index, (relative, path) in enumerate(files):
        parts = relative.split("/")
        written = parts[0][: -len(".ipynb")] if len(parts) == 1 else parts[0]
        key = submission_key(index, relative)
        found.append({"written": written, "student": visible(written, NAME_LIMIT), "path": path,
                      "relative": relative, "key": key, "feedback_file": feedback_name(key, written)})
    owner: dict[str, int] = {}  # a look -> the first submission seen with it; groups joined through shared looks
    parent = list(range(len(found)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    for index, item in enumerate(found):
        for look in name_looks(item["written"]):
            if look in owner:
                parent[root(index)] = root(owner[look])
            else:
                owner[look] = index
    groups: dict[int, list[dict]] = {}
    for index, item in enumerate(found):
        groups.setdefault(root(index), []).append(item)
    for index, item in enumerate(found):
        group = groups[root(index)]
        item["collision"] = [visible(other["relative"], NAME_LIMIT) for other in group] if len(group) > 1 else []
        item["look_alike"] = len({other["written"] for other in group}) > 1
        item["group_name"] = visible(normalised_name(group[0]["written"]), NAME_LIMIT)
        item["row"] = visible(item["relative"], NAME_LIMIT) if item["collision"] else item["student"]
    return found, skipped


def _worker(connection, plan: dict, path: Path, timeout: float, deadline: float, sandboxed: bool,
            caps: cgroups.Plan | None, uid: int | None, max_bytes: int):
    """The body of one grading process: grade a file, send the result back, exit."""
    def stop(signum, frame):  # the parent's SIGTERM: unwind, so that the sandbox is stopped
        raise SystemExit(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    result = grade_submission(plan, path, timeout, deadline, sandboxed, caps, uid, max_bytes)
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
                     sandboxed: bool = True, caps: cgroups.Plan | None = None,
                     max_bytes: int = MAX_SUBMISSION_BYTES) -> list[dict]:
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
                send, plan, path, timeout, deadline, sandboxed, caps, lease.uid if lease else None, max_bytes))
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
          deadline: float = DEADLINE_S, sandboxed: bool = True, memory_bytes: int = cgroups.MEMORY_BYTES,
          max_bytes: int = MAX_SUBMISSION_BYTES) -> tuple[list[dict], list[tuple[str, str]]]:
    """Grade every submission in a folder; write ``grades.csv``, ``feedback/`` and ``skipped.csv`` to ``out``.

    ``memory_bytes`` caps each sandbox, all its processes together (:mod:`tools.homework.cgroups`);
    grading refuses to start when ``jobs`` sandboxes at that cap could exceed the machine's memory.
    ``max_bytes`` caps each submitted file (a larger one is skipped, with the reason). ``out/feedback``
    must be new or empty: feedback files are never overwritten. Each output file is written on its
    own (:func:`write_outputs`). Returns the results (one per notebook, ``student`` names its CSV row
    and ``key`` its feedback file) and the skipped files.
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
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
        raise HomeworkError(f"max-size must be a positive number of bytes, got {max_bytes!r}")
    feedback = out / "feedback"
    if feedback.is_dir() and any(feedback.iterdir()):
        raise HomeworkError(f"out: {feedback} holds the feedback of an earlier run, which grading never overwrites: "
                            "move it away, or grade into another folder")
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
    found, skipped = submissions_in(submissions, max_bytes)
    if not found:
        first = f"{visible(skipped[0][0], NAME_LIMIT)}: {skipped[0][1]}" if skipped else ""
        listed = f" ({len(skipped)} other file(s) skipped: {first}...)" if skipped else ""
        raise HomeworkError(f"submissions: no notebook (*.ipynb) in {submissions}{listed}")
    if sandboxed:
        try:
            sandbox.probe()
        except sandbox.SandboxError as error:
            raise HomeworkError(f"cannot isolate the submissions, so nothing was graded: {error}. Mend that, or, "
                                "knowing that every submission then runs with your rights and can change the "
                                "grades, pass --unsafe-no-sandbox (make grade ... UNSAFE_NO_SANDBOX=1)") from None
    one_at_a_time = []  # why the sandboxes cannot run side by side, each reason said
    if sandboxed and os.geteuid() != 0:
        # graded as another user, every sandbox runs under that user's uid and shares what the kernel keeps per
        # uid (its process limit, though, is counted in the sandbox's own user namespace: sandbox.command)
        one_at_a_time.append("graded as a user, the sandboxes share your uid (as root each submission has a uid "
                             "of its own)")
    if sandboxed and not caps.cpu:
        # nothing shares the CPU between sandboxes: one submission's processes could starve another's cells
        one_at_a_time.append(f"no CPU share per sandbox ({caps.why_not_cpu})")
    if one_at_a_time and jobs > 1:
        print(f"homework: {', and '.join(one_at_a_time)}: one at a time instead of --jobs {jobs}", file=sys.stderr)
        jobs = 1
    out.mkdir(parents=True, exist_ok=True)
    results = grade_in_workers(plan, [item["path"] for item in found], timeout, jobs, deadline, sandboxed, caps,
                               max_bytes)
    for item, result in zip(found, results):
        result["student"] = item["row"]
        result["file"] = visible(item["relative"], NAME_LIMIT)
        result["key"] = item["key"]
        result["collision"] = item["collision"]
        for test in plan["hidden"]:
            result["points"].setdefault(test["grade_id"], 0)
        if item["collision"]:
            alike = " whose names look the same (after Unicode normalisation)" if item["look_alike"] else ""
            note = (f"name collision: {len(item['collision'])} submissions{alike} for {item['group_name']} "
                    f"({', '.join(item['collision'])}); each is graded on its own row")
            result["reason"] = f"{note}; {result['reason']}"
            if item["look_alike"]:  # maybe someone else's file: the feedback does not name it
                note = (f"another submission's name looks the same as yours ({item['student']}) after Unicode "
                        "normalisation; both are graded, each on its own row, and your instructor may ask which is yours")
            result["notes"].append(note)
        result["total"] = sum(result["points"].values())
        result["max_total"] = sum(test["points"] for test in plan["hidden"])
    write_outputs(out, plan, found, results, skipped)
    return results, skipped


def write_outputs(out: Path, plan: dict, found: list[dict], results: list[dict],
                  skipped: list[tuple[str, str]]) -> None:
    """Each student's feedback file, then ``grades.csv`` and ``skipped.csv``, each written on its own.

    A feedback file that cannot be made or written (a full disk, a name taken) is said in that
    student's ``feedback`` column; a CSV file that cannot be written is said on stderr. Neither stops
    the rest.
    """
    feedback = out / "feedback"
    try:
        feedback.mkdir(exist_ok=True)
        folder_error = ""
    except OSError as error:
        folder_error = f"not written: {type(error).__name__}: {visible(error.strerror or str(error), NAME_LIMIT)}"
    for item, result in zip(found, results):
        try:
            failed = folder_error or write_feedback(feedback, item["feedback_file"], feedback_markdown(plan, result))
        except Exception as error:  # a fault of the grader's own on one student: that row says it
            failed = f"not written: {type(error).__name__}: {one_line(visible(str(error)), 200)}"
        result["feedback_file"], result["feedback_error"] = item["feedback_file"], failed
    for name, write in (("grades.csv", lambda path: write_csv(path, plan, results)),
                        ("skipped.csv", lambda path: write_skipped(path, skipped))):
        try:
            write(out / name)
        except OSError as error:
            print(f"homework: could not write {out / name}: {error.strerror or error}", file=sys.stderr)
