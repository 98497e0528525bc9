"""Hostile submissions: what the attacks of issues #12 and #29 achieve against the sandboxed grader (nothing).

tests/homework/submissions/hostile/ (written by make_submissions.py) holds one submission per attack,
and the file names that used to confuse grading. The module copies them, with two honest students
graded before and after them, into a fresh folder, records hashes of the package and of every
submission, and runs the real command once, in the sandbox, with a canary variable in its environment:
once as root (a uid and control groups per submission) and once as an ordinary user (user namespaces,
resource limits; :mod:`unprivileged`). The tests then check the outcome of each attack: the honest
students' grades, what reached any feedback, the processes and keys left, the package and the
submissions on disk, and grades.csv after the end.

Never run these submissions with --unsafe-no-sandbox: one of them kills every process it may signal.
"""

from __future__ import annotations

import csv
import hashlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tools.homework import grading, reports, traces

HOMEWORK = "hw_scaled_dot_product_attention"
SUBMISSIONS = Path(__file__).resolve().parent / "submissions"  # written by make_submissions.py
SAMPLES, HOSTILE = SUBMISSIONS / HOMEWORK, SUBMISSIONS / "hostile"
TIMEOUT_S = 15  # the memory hog writes up to the cap before the kernel stops a child: seconds on a busy machine
# As root the sandbox is a control group, capped at 1 GiB here rather than 3 so that the hog meets the cap after
# writing about 1 GiB (about 3 s on this kind of machine, where a page fault costs ~10 us), well inside TIMEOUT_S
ROOT_MEMORY_GIB = 1
RUN_BOUND_S = 600
MARKER = "attnbook-hostile-background"
HONEST = ("aaa_honest", "zzz_honest")  # graded first and last: before and after every attack

# row -> (total, words its reason must hold); the memory hog's words depend on the caps (expected_reasons)
EXPECTED = {
    "aaa_honest": (10, ["all 8 hidden tests passed"]),
    "zzz_honest": (10, ["all 8 hidden tests passed"]),
    "rewrite_grades": (10, ["all 8 hidden tests passed"]),
    "kills_grader": (10, ["all 8 hidden tests passed", "cell 3 raised ProcessLookupError"]),  # nothing to kill
    "corrupts_others": (10, ["all 8 hidden tests passed"]),
    "patches_package": (10, ["all 8 hidden tests passed"]),
    "background_process": (10, ["all 8 hidden tests passed"]),
    "input_transformer": (0, ["8 of 8 hidden tests failed"]),
    "monkeypatches_checks": (0, ["8 of 8 hidden tests failed"]),
    "leaks": (4, ["4 of 8 hidden tests failed (softmax-values, softmax-stable, attention-values, "
                  "attention-heads-and-stability)"]),
    '=HYPERLINK("http:__example.com","10 points")': (10, ["all 8 hidden tests passed"]),
    "dup.ipynb": (10, ["name collision: 2 submissions for dup (dup.ipynb, dup/hw.ipynb)"]),
    "dup/hw.ipynb": (10, ["name collision: 2 submissions for dup (dup.ipynb, dup/hw.ipynb)"]),
    "dup-2": (10, ["all 8 hidden tests passed"]),
    "deep": (10, ["all 8 hidden tests passed"]),
    "UPPER": (10, ["all 8 hidden tests passed"]),
    "keyring_1_writer": (10, ["all 8 hidden tests passed"]),
    "keyring_2_reader": (0, ["8 of 8 hidden tests failed"]),
    "nested_userns": (4, ["4 of 8 hidden tests failed (softmax-values, softmax-stable, attention-values, "
                          "attention-heads-and-stability)"]),
    "memory_hog": (10, ["all 8 hidden tests passed"]),
    "zwsp.ipynb": (10, ["name collision: 2 submissions whose names look the same (after Unicode normalisation) "
                        "for zwsp (zwsp.ipynb, zw\\u200bsp.ipynb)"]),
    "zw\\u200bsp.ipynb": (10, ["name collision: 2 submissions whose names look the same (after Unicode "
                              "normalisation) for zwsp (zwsp.ipynb, zw\\u200bsp.ipynb)"]),
}
MEMORY_CAP_NOTE = f"the submission's processes together reached the sandbox's memory cap ({ROOT_MEMORY_GIB} GiB)"


def digest(paths) -> dict[str, str]:
    return {str(path): hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(paths)}


def package_files() -> list[Path]:
    import attnbook
    import numpy

    return [p for folder in (Path(attnbook.__file__).parent, Path(numpy.__file__).parent)
            for p in folder.glob("*.py")]


# This module's own uids, so that the sandboxes of tests running meanwhile in other workers are not counted:
# the sandboxes' range as root (ATTNBOOK_SANDBOX_UIDS), and the user that grades "as a user"
SANDBOX_UIDS = range(3_000_000, 3_000_000 + traces.UID_COUNT)
UNPRIVILEGED_UID = 1_190_001


def sandbox_processes() -> list[str]:
    """Processes of this module's sandbox uids or unprivileged grader, or with the background attack's marker."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            uid = int((entry / "status").read_text().split("\nUid:")[1].split()[0])
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue  # gone meanwhile
        if uid in SANDBOX_UIDS or uid == UNPRIVILEGED_UID or MARKER in cmdline:
            found.append(f"{entry.name} (uid {uid}): {cmdline[:120]}")
    return found


def wait_until(condition, bound_s: float, message: str):
    """Poll ``condition`` until it returns something true; fail with ``message`` after ``bound_s``."""
    stop = time.monotonic() + bound_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > stop:
            pytest.fail(f"{message} (waited {bound_s:g} s)")
        time.sleep(0.1)


@pytest.fixture(scope="module", params=["as root", "as a user"])
def attacked(request, unprivileged):
    """Grade the hostile folder once per way of grading; returns what the tests inspect."""
    as_user = request.param == "as a user"
    if os.geteuid() != 0 and not as_user:
        pytest.skip("grading as root needs root")
    root = Path(tempfile.mkdtemp(prefix="attnbook-hostile-"))  # not under pytest's 0700 folder: the user reads it
    folder, out = root / "submissions", root / "out"
    shutil.copytree(HOSTILE, folder)
    for name in HONEST:
        shutil.copy(SAMPLES / "correct.ipynb", folder / f"{name}.ipynb")
    submissions_before = digest(p for p in folder.rglob("*") if p.is_file())
    package_before = digest(package_files())
    canary = f"canary-{secrets.token_hex(8)}"
    env = dict(os.environ, ATTNBOOK_CANARY=canary, ATTNBOOK_SANDBOX_UIDS=str(SANDBOX_UIDS.start))
    command = [sys.executable, "-m", "tools.homework", "grade", HOMEWORK, str(folder),
               str(out), "--timeout", str(TIMEOUT_S), "--jobs", "2"]
    if not as_user:
        command += ["--memory", str(ROOT_MEMORY_GIB)]
    if as_user and os.geteuid() == 0:
        os.chmod(root, 0o755)
        os.chown(root, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
        command = unprivileged.command(command, root, UNPRIVILEGED_UID)
    finished = subprocess.run(command, capture_output=True, text=True, timeout=RUN_BOUND_S, env=env)
    assert finished.returncode == 0, f"the grader failed:\n{finished.stdout[-2000:]}\n{finished.stderr[-2000:]}"
    csv_right_after = (out / "grades.csv").read_bytes()
    feedback_right_after = digest((out / "feedback").iterdir())
    left = wait_until(lambda: not sandbox_processes() and ["none"], 15,
                      f"sandbox processes are still running after the grader exited: {sandbox_processes()}")
    with (out / "grades.csv").open(encoding="utf-8", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    yield {"folder": folder, "out": out, "rows": rows, "stdout": finished.stdout, "stderr": finished.stderr,
           "canary": canary, "submissions_before": submissions_before, "package_before": package_before,
           "left": left, "csv_right_after": csv_right_after, "feedback_right_after": feedback_right_after,
           "as_user": as_user, "key_users": traces._key_users()}
    shutil.rmtree(root, ignore_errors=True)


def feedback_texts(attacked) -> dict[str, str]:
    """Each row's feedback file, by the row's name (grades.csv names the file)."""
    return {name: (attacked["out"] / "feedback" / found["feedback"]).read_text(encoding="utf-8")
            for name, found in attacked["rows"].items()}


def row(attacked, name: str) -> dict:
    rows = attacked["rows"]
    key = "'" + name if name.startswith(reports.SPREADSHEET_TRIGGERS) else name
    assert key in rows, f"no row {key!r} in grades.csv; rows: {sorted(rows)}"
    return rows[key]


def expected_reasons(attacked, name: str) -> list[str]:
    """The words the row's reason must hold: the memory hog's say so when a control group stopped it."""
    reasons = list(EXPECTED[name][1])
    if name == "memory_hog" and "(cgroup v" in attacked["stderr"]:
        reasons.append(MEMORY_CAP_NOTE)
    return reasons


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_submission_gets_its_expected_total_and_reason(attacked, name):
    total, _ = EXPECTED[name]
    reasons = expected_reasons(attacked, name)
    found = row(attacked, name)
    assert int(found["total"]) == total, found["reason"]
    for words in reasons:
        assert words in found["reason"], found["reason"]


def test_every_submission_maps_to_exactly_one_row(attacked):
    notebooks = [p for p in attacked["folder"].rglob("*") if p.name.lower().endswith(".ipynb")]
    assert len(attacked["rows"]) == len(notebooks) == len(EXPECTED)


def test_the_grader_process_survived_and_printed_its_summary(attacked):
    assert attacked["stdout"].splitlines()[-1].startswith(f"graded {len(EXPECTED)} submission(s) in ")


def test_no_sandbox_process_outlives_grading(attacked):
    assert attacked["left"] == ["none"] and sandbox_processes() == []


def test_grades_and_feedback_are_not_changed_after_the_grader_finished(attacked):
    """The detached rewriter had 120 s to run; every sandbox process is gone now, so the files are final."""
    assert (attacked["out"] / "grades.csv").read_bytes() == attacked["csv_right_after"]
    assert digest((attacked["out"] / "feedback").iterdir()) == attacked["feedback_right_after"]
    assert not any("HACKED" in text for text in feedback_texts(attacked).values())


def test_package_files_are_unchanged(attacked):
    assert digest(package_files()) == attacked["package_before"]


def test_no_submission_was_changed_on_disk(attacked):
    assert digest(p for p in attacked["folder"].rglob("*") if p.is_file()) == attacked["submissions_before"]


def test_the_leaking_student_saw_nothing_to_leak(attacked):
    """The attack ran (its messages are in its feedback) and found no canary, no grader, no source, no notebook."""
    text = feedback_texts(attacked)["leaks"]
    assert "my_softmax raised ValueError: LEAK canary={} n_env=" in text, text
    # the only other process it sees is the sandbox's PID 1, whose command line is the driver's
    others = text.split("others=[", 1)[1].split("]", 1)[0]
    assert others.count("'") == 2 and others.endswith(" sandbox_driver.py '"), text  # one process: the driver's
    assert "tools.homework" not in text, text  # the grader's command line
    assert "my_attention raised ValueError: LEAK source=FileNotFoundError notebooks=[]" in text, text


def test_nothing_secret_reaches_any_feedback(attacked):
    hidden_lines = [line.strip() for test in grading.grading_plan(HOMEWORK)["hidden"]
                    for line in test["source"].splitlines() if len(line.strip()) > 25]
    others = {p.name for p in attacked["folder"].rglob("*.ipynb")}
    own = {"dup.ipynb": ["dup.ipynb", "dup/hw.ipynb"], "dup/hw.ipynb": ["dup.ipynb", "dup/hw.ipynb"],
           "zwsp.ipynb": ["zwsp.ipynb"]}  # the student's own files, named by the collision
    for name, text in feedback_texts(attacked).items():
        for mine in own.get(name, []):
            text = text.replace(mine, "")
        assert attacked["canary"] not in text and "ATTNBOOK_CANARY" not in text, name
        assert str(attacked["out"]) not in text and str(attacked["folder"]) not in text, name
        assert not [line for line in hidden_lines if line in text], name
        assert not [other for other in others if other in text], name


def test_a_formula_as_a_name_is_escaped_in_the_csv(attacked):
    raw = (attacked["out"] / "grades.csv").read_text(encoding="utf-8")
    assert "\n\"'=HYPERLINK(\"\"http:__example.com\"\",\"\"10 points\"\")\"," in raw
    assert "\n=" not in raw and "\n\"=" not in raw


def test_colliding_names_get_rows_and_feedback_files_of_their_own(attacked):
    names = sorted(feedback_texts(attacked))
    dup = [n for n in names if n.startswith("dup")]
    assert dup == ["dup-2", "dup.ipynb", "dup/hw.ipynb"], names
    assert "for `dup/hw.ipynb`" in feedback_texts(attacked)["dup/hw.ipynb"]
    files = [found["feedback"] for found in attacked["rows"].values()]
    assert len(set(files)) == len(files)
    assert sorted(p.name for p in (attacked["out"] / "feedback").iterdir()) == sorted(files)


def test_skipped_files_are_listed_with_the_reason(attacked):
    assert "skipped notes.txt: not a notebook (.ipynb)" in attacked["stdout"]
    listed = (attacked["out"] / "skipped.csv").read_text(encoding="utf-8").splitlines()
    assert listed == ['"file","reason"', '"notes.txt","not a notebook (.ipynb)"']


def test_the_grader_says_how_each_sandbox_is_capped(attacked):
    said = attacked["stderr"]
    if attacked["as_user"]:
        assert "3 GiB per sandbox as 6 processes of at most 512 MiB (resource limits: not root" in said, said
        # the sandboxes share the user's uid, and nothing shares the CPU between them: a spinner in one must not
        # starve another
        assert ("graded as a user, the sandboxes share your uid (as root each submission has a uid of its own), and "
                "no CPU share per sandbox (no control group: not root") in said, said
        assert "one at a time instead of --jobs 2" in said, said
    else:
        assert f"{ROOT_MEMORY_GIB} GiB and 64 processes per sandbox (cgroup v" in said or "(resource limits:" in said, said


def test_no_sandbox_left_anything_for_the_grader_to_clean(attacked):
    """The cleanup column is empty on every row: the check after each submission found its uid owning nothing."""
    assert {name: found["cleanup"] for name, found in attacked["rows"].items() if found["cleanup"]} == {}


def test_no_sandbox_uid_holds_a_key_after_grading(attacked):
    """The writer's add_key calls were refused: no uid of the sandboxes' range holds a key in its key rings."""
    owners = [uid for uid in attacked["key_users"] if uid in SANDBOX_UIDS]
    assert [uid for uid in owners if traces.leftovers(uid).keys] == []


def test_the_keyring_reader_found_nothing_because_every_key_call_was_refused(attacked):
    text = feedback_texts(attacked)["keyring_2_reader"]
    assert ("found nothing: [('persistent', 'EPERM'), ('session', 'EPERM'), ('user', 'EPERM'), "
            "('user-session', 'EPERM')]") in text, text


def test_no_submission_can_make_a_user_namespace(attacked):
    text = feedback_texts(attacked)["nested_userns"]
    assert "USERNS unshare: EPERM; unshare -Ur: exit 1 unshare: unshare failed: Operation not permitted" in text, text


def test_names_that_look_the_same_are_shown_apart(attacked):
    """A zero-width space makes a second name that looks like the first: both rows, the invisible one shown."""
    assert {"zwsp.ipynb", "zw\\u200bsp.ipynb"} <= set(attacked["rows"])
    assert "zwsp" not in attacked["rows"] and not [name for name in attacked["rows"] if "\u200b" in name]
    assert "zw\\u200bsp.ipynb: 10 / 10" in attacked["stdout"]
