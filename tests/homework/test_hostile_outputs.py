"""Hostile outputs and inputs (issue #38, classes 1-3): what used to break grading's files, names and memory.

Unlike test_hostile.py's committed folder, the folder here is made by the test: its names hold bytes
that are not UTF-8, surrogates, escape sequences, bidirectional overrides, a name that NFKC
normalisation lengthens past any file system's limit, names that look alike or collide; beside them a
student whose own exception message is an escape-sequence and HTML payload, two sparse 3 GiB files
(``truncate``, nothing written), a file over the size cap, a named pipe, a link, and a folder 1000
levels deep. Two honest students are graded first and last, and one with the normalisation-expanding
name holds an honest solution too. The real command grades the folder once as root and once as an
ordinary user (:mod:`conftest`), inside a measuring parent that reports the largest process of the
run; the tests then read every output.

The end of the module tests the pieces the run relies on: each output file written on its own, and the
notebook parsed under a memory and a time cap.
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

import nbformat
import pytest
from markdown_it import MarkdownIt

from tools.homework import cli, grading
from tools.homework.sources import HomeworkError

HOMEWORK = "hw_scaled_dot_product_attention"
SAMPLES = Path(__file__).resolve().parent / "submissions" / HOMEWORK
UNPRIVILEGED_UID = 1_190_002  # not test_hostile.py's, so that the two modules' checks stay apart
RUN_BOUND_S = 600
DEPTH = 1000
SPARSE_BYTES = 3 * 1024 ** 3
LARGEST_PROCESS_BOUND = 1024 ** 3  # reading a sparse file would take more than 3 GiB in one process

# The payload of a student's own exception: clears the screen, draws a fake score, writes the clipboard
# (OSC 52), closes a code span and a fence to let HTML in, a link, a right-to-left override; then 5,000 more
PAYLOAD = ("\x1b[2J\x1b[H**Score: 10 / 10**\x1b]52;c;cm0gLXJmIH4K\x07 `<img src=x onerror=alert(1)>` "
           "```\n</code><script>alert(2)</script>\n``` [click](javascript:alert(3)) \u202egnp.exe " + "A" * 5000)
PAYLOAD_SOFTMAX = f'''def my_softmax(x):
    """Gives up, loudly."""
    raise ValueError({PAYLOAD!r})
'''

HONEST = ["aaa_honest.ipynb", "zzz_honest.ipynb", "\ufdfa" * 60 + ".ipynb"]  # U+FDFA: 1 character, 18 in NFKC
BROKEN = [  # not notebooks ({}): graded at once, no sandbox; what matters is their names
    b"bad_utf8_\xff\xfe.ipynb",
    b"surrogate_\xed\xa0\x80.ipynb",  # a UTF-8-encoded surrogate: not UTF-8, decoded as surrogateescape
    "ctrl_\x1b[2J\x1b]52;c;SGk=\x07_\u202egnp.ipynb",
    "new\nline.ipynb",
    "<b onmouseover=alert(1)>x.ipynb",
    "semi;=HYPERLINK(1).ipynb",
    "comma,+1.ipynb",
    "@cmd.ipynb",
    "mallory.ipynb", "MALLORY.ipynb", "\uff4d\uff41\uff4c\uff4c\uff4f\uff52\uff59.ipynb",  # look-alikes
    "eve\x1b.ipynb", "eve\\x1b.ipynb",  # shown the same: an escape character and its written-out form
    "bob.ipynb", "bob/hw.ipynb",  # one student twice
    # "a b" and "a_b" were both a_b.md, the second then a_b-<sha1 of its name>.md, which a third name claimed first
    "a b.ipynb", "a_b.ipynb", f"a_b-{hashlib.sha1(b'a_b').hexdigest()[:8]}.ipynb",
]
SHOWN = {  # row -> the name grades.csv shows (made visible, then made safe for spreadsheets)
    b"bad_utf8_\xff\xfe.ipynb": "bad_utf8_\\xff\\xfe",
    b"surrogate_\xed\xa0\x80.ipynb": "surrogate_\\xed\\xa0\\x80",
    "ctrl_\x1b[2J\x1b]52;c;SGk=\x07_\u202egnp.ipynb": "ctrl_\\x1b[2J\\x1b]52;c;SGk=\\x07_\\u202egnp",
    "new\nline.ipynb": "new\\nline",
    "<b onmouseover=alert(1)>x.ipynb": "<b onmouseover=alert(1)>x",
    "semi;=HYPERLINK(1).ipynb": "semi;'=HYPERLINK(1)",
    "comma,+1.ipynb": "comma,'+1",
    "@cmd.ipynb": "'@cmd",
}
LOOK_ALIKES = [["MALLORY.ipynb", "mallory.ipynb", "\uff4d\uff41\uff4c\uff4c\uff4f\uff52\uff59.ipynb"],
               ["eve\\x1b.ipynb", "eve\\x1b.ipynb"], ["bob.ipynb", "bob/hw.ipynb"]]
SKIPPED = {  # file -> words of its reason in skipped.csv
    "sparse.ipynb": "3072.0 MiB, more than the 5 MiB a submission may have (--max-size)",
    "sparse2/hw.ipynb": "3072.0 MiB, more than the 5 MiB a submission may have (--max-size)",
    "big.ipynb": "6.0 MiB, more than the 5 MiB a submission may have (--max-size)",
    "pipe.ipynb": "not a regular file (a named pipe, socket or device)",
    "link.ipynb": "a symbolic link; submit the notebook itself",
    "deep/" + "d/" * 32: "a folder more than 32 levels down; not searched",
}
MEASURED = """import resource, subprocess, sys
finished = subprocess.run(sys.argv[1:])
print(f"largest process: {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024} bytes", file=sys.stderr)
raise SystemExit(finished.returncode)
"""


def make_folder(folder: Path) -> None:
    """The hostile folder: honest students, hostile names, a payload, sparse and special files, a deep folder."""
    folder.mkdir()
    correct = (SAMPLES / "correct.ipynb").read_bytes()
    for name in HONEST:
        (folder / name).write_bytes(correct)
    for name in BROKEN:
        path = os.path.join(os.fsencode(folder), os.fsencode(name))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(b"{}")
    notebook = nbformat.read(SAMPLES / "correct.ipynb", as_version=4)
    [cell] = [cell for cell in notebook.cells if cell.source.startswith("def my_softmax")]
    cell.source = PAYLOAD_SOFTMAX
    nbformat.write(notebook, folder / "payload.ipynb")
    for name in ("sparse.ipynb", "sparse2/hw.ipynb"):
        (folder / name).parent.mkdir(exist_ok=True)
        with open(folder / name, "wb") as handle:
            handle.truncate(SPARSE_BYTES)  # sparse: nothing is written
    (folder / "big.ipynb").write_bytes(b" " * (6 * 1024 ** 2 - 2) + b"{}")
    os.mkfifo(folder / "pipe.ipynb")
    os.symlink(SAMPLES / "correct.ipynb", folder / "link.ipynb")
    deep = os.open(folder, os.O_RDONLY)
    for _ in range(DEPTH):  # one level at a time: the path as a whole would pass PATH_MAX
        os.mkdir("d" if _ else "deep", dir_fd=deep)
        inner = os.open("d" if _ else "deep", os.O_RDONLY, dir_fd=deep)
        os.close(deep)
        deep = inner
    os.close(os.open("hw.ipynb", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=deep))
    os.close(deep)


def flatten_deep(folder: Path) -> None:
    """Move each level of the 1000-level folder up into ``folder`` (two descriptors at a time), so rmtree can go."""
    top = os.open(folder, os.O_RDONLY)
    level = os.open("deep", os.O_RDONLY, dir_fd=top)
    for index in range(1, DEPTH):
        try:
            os.rename("d", f"flat-{index}", src_dir_fd=level, dst_dir_fd=top)
        except FileNotFoundError:  # a folder made only part of the way down
            break
        os.close(level)
        level = os.open(f"flat-{index}", os.O_RDONLY, dir_fd=top)
    os.close(level)
    os.close(top)


@pytest.fixture(scope="module", params=["as root", "as a user"])
def graded(request, unprivileged):
    """The folder graded once per way of grading: outputs, stdout, stderr and the largest process's bytes."""
    as_user = request.param == "as a user"
    if os.geteuid() != 0 and not as_user:
        pytest.skip("grading as root needs root")
    root = Path(tempfile.mkdtemp(prefix="attnbook-hostile-outputs-"))  # not under pytest's 0700 folder
    folder, out = root / "submissions", root / "out"
    try:
        make_folder(folder)
        command = [sys.executable, "-m", "tools.homework", "grade", HOMEWORK, str(folder), str(out), "--jobs", "2"]
        if as_user and os.geteuid() == 0:
            os.chmod(root, 0o755)
            os.chown(root, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
            command = unprivileged.command(command, root, UNPRIVILEGED_UID)
        finished = subprocess.run([sys.executable, "-c", MEASURED, *command], capture_output=True,
                                  timeout=RUN_BOUND_S)
        stdout, stderr = finished.stdout.decode("utf-8"), finished.stderr.decode("utf-8")
        assert finished.returncode == 0, f"the grader failed:\n{stdout[-2000:]}\n{stderr[-3000:]}"
        with (out / "grades.csv").open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        with (out / "skipped.csv").open(encoding="utf-8", newline="") as handle:
            skipped = {row["file"]: row["reason"] for row in csv.DictReader(handle)}
        largest = int(re.search(r"largest process: (\d+) bytes", stderr)[1])
        yield {"folder": folder, "out": out, "rows": rows, "by_name": {row["student"]: row for row in rows},
               "skipped": skipped, "stdout": stdout, "stderr": stderr, "largest": largest}
    finally:
        if (folder / "deep").is_dir():
            flatten_deep(folder)
        shutil.rmtree(root, ignore_errors=True)


def feedback(graded, name: str) -> str:
    return (graded["out"] / "feedback" / graded["by_name"][name]["feedback"]).read_text(encoding="utf-8")


def test_the_grader_finished_and_printed_its_summary(graded):
    last = graded["stdout"].splitlines()[-1]
    assert last.startswith(f"graded {len(HONEST) + len(BROKEN) + 1} submission(s) in "), last
    assert "6 file(s) skipped (skipped.csv), 3 name collision(s)" in last, last


@pytest.mark.parametrize("name", ["aaa_honest", "zzz_honest", "\ufdfa" * 60])
def test_honest_students_keep_full_marks_and_their_own_feedback(graded, name):
    row = graded["by_name"][name]
    assert row["total"] == "10" and row["reason"] == "all 8 hidden tests passed", row
    text = feedback(graded, name)
    assert text.startswith(f"# Feedback: {HOMEWORK} for `{name}`\n\n**Score: 10 / 10**\n"), text[:300]
    assert re.fullmatch(rf"{row['key']}(-[A-Za-z0-9_-]+)?\.md", row["feedback"]), row["feedback"]


def test_every_notebook_has_one_row_with_a_key_and_a_feedback_file_of_its_own(graded):
    rows = graded["rows"]
    assert len(rows) == len(HONEST) + len(BROKEN) + 1
    keys, files = [row["key"] for row in rows], [row["feedback"] for row in rows]
    assert len(set(keys)) == len(keys) and len(set(files)) == len(files)
    assert sorted(p.name for p in (graded["out"] / "feedback").iterdir()) == sorted(files)
    for row in rows:
        assert re.fullmatch(r"\d{4}-[0-9a-f]{8}", row["key"]) and row["feedback"].startswith(row["key"])
        assert row["feedback"].isascii() and len(row["feedback"]) <= 64, row["feedback"]


@pytest.mark.parametrize("name", sorted(SHOWN, key=repr))
def test_hostile_names_are_shown_visibly_and_safely_in_the_csv(graded, name):
    shown = SHOWN[name]
    assert shown in graded["by_name"], sorted(graded["by_name"])
    assert graded["by_name"][shown]["total"] == "0"


def test_no_output_holds_a_control_or_format_character_or_a_formula(graded):
    outputs = {"stdout": graded["stdout"].encode("utf-8")}
    for path in [graded["out"] / "grades.csv", graded["out"] / "skipped.csv", *(graded["out"] / "feedback").iterdir()]:
        outputs[path.name] = path.read_bytes()
    for name, data in outputs.items():
        text = data.decode("utf-8")  # strict: every output is UTF-8
        odd = {c for c in text.replace("\r\n", "\n") if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Cs")}
        assert not odd, (name, odd)
    for file in ("grades.csv", "skipped.csv"):
        with (graded["out"] / file).open(encoding="utf-8", newline="") as handle:
            cells = [cell for row in csv.reader(handle) for cell in row]
        assert not [c for c in cells if c.lstrip(" ").startswith(("=", "+", "-", "@")) or
                    re.search(r"[,;|]\s*[=+\-@]", c)], file
        lines = (graded["out"] / file).read_text(encoding="utf-8").splitlines()
        assert all(line.startswith('"') and line.endswith('"') for line in lines), file  # every cell quoted


def test_a_students_own_exception_reaches_the_feedback_as_text(graded):
    row = graded["by_name"]["payload"]
    assert row["total"] == "4", row["reason"]  # the softmax tasks and attention, which calls the softmax, fail
    text = feedback(graded, "payload")
    assert "\x1b" not in text and "\u202e" not in text and "\\x1b[2J\\x1b[H" in text
    assert [line for line in text.splitlines() if "Score: " in line and "\\x1b" not in line] == ["**Score: 4 / 10**"]
    assert "A" * 2500 not in text  # cut
    parsed = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(text)
    found = {t.type for token in parsed for t in [token, *(token.children or [])]}
    assert not found & {"html_block", "html_inline", "link_open", "image"}, found
    assert "<script>" not in MarkdownIt("commonmark").render(text)


def test_look_alike_and_colliding_names_are_each_graded_and_reported(graded):
    for group in LOOK_ALIKES:
        for name in group:
            assert "name collision" in graded["by_name"][name]["reason"], name
        assert f"name collision, each graded on its own row: {', '.join(group)}" in graded["stdout"], group
    mallory = [row for row in graded["rows"] if row["student"] in LOOK_ALIKES[0]]
    assert len({row["feedback"] for row in mallory}) == 3


def test_oversized_special_and_deep_files_are_skipped_with_the_reason(graded):
    assert set(graded["skipped"]) == set(SKIPPED), graded["skipped"]
    for file, words in SKIPPED.items():
        assert words in graded["skipped"][file], (file, graded["skipped"][file])


def test_no_process_of_the_run_took_more_than_a_gib(graded):
    """Two sparse 3 GiB notebooks used to be read whole; now they are measured and skipped."""
    assert graded["largest"] < LARGEST_PROCESS_BOUND, f"{graded['largest'] / 1024 ** 3:.2f} GiB"


# --- the pieces -----------------------------------------------------------------------------------


def test_a_feedback_file_that_cannot_be_written_is_said_in_its_row_and_the_rest_is_written(tmp_path, monkeypatch):
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    for name in ("ann", "bob", "cy"):
        (folder / f"{name}.ipynb").write_text("{}", encoding="utf-8")
    found, skipped = grading.submissions_in(folder)
    results = [{"student": item["row"], "key": item["key"], "status": "invalid", "reason": "not a notebook",
                "points": {}, "feedback": [], "notes": [], "total": 0, "max_total": 10} for item in found]
    (out / "feedback" / found[0]["feedback_file"]).mkdir(parents=True)  # taken: never overwritten
    markdown = grading.feedback_markdown
    monkeypatch.setattr(grading, "feedback_markdown", lambda plan, result: (
        (_ for _ in ()).throw(RuntimeError("a fault")) if result["student"] == "bob" else markdown(plan, result)))
    grading.write_outputs(out, {"homework": HOMEWORK, "hidden": []}, found, results, skipped)
    with (out / "grades.csv").open(encoding="utf-8", newline="") as handle:
        said = {row["student"]: row["feedback"] for row in csv.DictReader(handle)}
    assert said["ann"] == f"{found[0]['feedback_file']} (not written: FileExistsError: File exists)"
    assert said["bob"] == f"{found[1]['feedback_file']} (not written: RuntimeError: a fault)"
    assert said["cy"] == found[2]["feedback_file"]
    assert (out / "feedback" / found[2]["feedback_file"]).read_text(encoding="utf-8").startswith("# Feedback")
    assert (out / "skipped.csv").exists()


def test_feedback_of_an_earlier_run_is_never_overwritten(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "ann.ipynb").write_text("{}", encoding="utf-8")
    (tmp_path / "out" / "feedback").mkdir(parents=True)
    (tmp_path / "out" / "feedback" / "0000-0a1b2c3d-ann.md").write_text("earlier", encoding="utf-8")
    assert cli.main(["grade", HOMEWORK, str(tmp_path / "in"), str(tmp_path / "out")]) == 1
    assert "holds the feedback of an earlier run, which grading never overwrites" in capsys.readouterr().err
    assert (tmp_path / "out" / "feedback" / "0000-0a1b2c3d-ann.md").read_text(encoding="utf-8") == "earlier"


def test_an_honest_notebook_reads_as_nbformat_reads_it():
    ours = grading.read_submission(SAMPLES / "correct.ipynb")
    theirs = nbformat.read(SAMPLES / "correct.ipynb", as_version=4)
    assert [(c.cell_type, c.source) for c in ours.cells] == [(c.cell_type, c.source) for c in theirs.cells]
    assert [c.metadata["tags"] for c in ours.cells] == [c.metadata.get("tags", []) for c in theirs.cells]


def test_a_notebook_that_needs_too_much_memory_to_read_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(grading, "PARSE_MEMORY_BYTES", 64 * 1024 ** 2)
    path = tmp_path / "lists.ipynb"  # 3.8 MiB of JSON, ~300 MiB as Python lists
    path.write_text('{"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {"x": ['
                    + ",".join(["[0]"] * 10 ** 6) + "]}}", encoding="utf-8")
    with pytest.raises(HomeworkError, match=r"^not a valid notebook: reading it took more than 64 MiB of memory$"):
        grading.read_submission(path)


def test_a_notebook_that_takes_too_long_to_read_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(grading, "PARSE_SECONDS", 1)
    cell = '{"cell_type": "code", "id": "c%d", "source": "", "metadata": {}, "outputs": [], "execution_count": null}'
    (tmp_path / "cells.ipynb").write_text(  # 10.3 MiB, ~5 s of CPU to validate: five times the limit
        '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": ['
        + ",".join(cell % index for index in range(100_000)) + "]}", encoding="utf-8")
    with pytest.raises(HomeworkError, match=r"^not a valid notebook: reading it took longer than 1 s$"):
        grading.read_submission(tmp_path / "cells.ipynb", max_bytes=16 * 1024 ** 2)


def test_a_file_is_measured_before_it_is_read(tmp_path):
    with open(tmp_path / "sparse.ipynb", "wb") as handle:
        handle.truncate(SPARSE_BYTES)
    os.mkfifo(tmp_path / "pipe.ipynb")  # never opened for writing: a read would block for ever
    with pytest.raises(HomeworkError, match=r"^3072\.0 MiB, more than the 5 MiB a submission may have"):
        grading.read_submission(tmp_path / "sparse.ipynb")
    with pytest.raises(HomeworkError, match=r"^not a regular file"):
        grading.read_submission(tmp_path / "pipe.ipynb")


def test_the_search_stops_after_its_cap_on_entries_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(grading, "MAX_ENTRIES", 5)
    for index in range(8):
        (tmp_path / f"s{index}.ipynb").write_text("{}", encoding="utf-8")
    found, skipped = grading.submissions_in(tmp_path)
    assert len(found) == 5
    assert skipped == [(".", "the submissions folder holds more than 5 files and folders; the rest was not searched")]
