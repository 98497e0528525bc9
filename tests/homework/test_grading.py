"""Grading: the sample submissions of hw_scaled_dot_product_attention get the scores and reasons they deserve.

The folder tests/homework/submissions/hw_scaled_dot_product_attention/ holds one correct submission and
one of each kind of fault (written by make_submissions.py). `python -m tools.homework grade` grades it once
for this module, in the sandbox; the tests read the CSV and the feedback files it wrote. Hostile
submissions are in test_hostile.py.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from tools.homework import cli, grading, sandbox, sources
from tools.homework.student import student_notebook
HOMEWORK = "hw_scaled_dot_product_attention"
SAMPLES = Path(__file__).resolve().parent / "submissions" / HOMEWORK  # written by make_submissions.py
QUESTIONS = ["softmax-values", "softmax-stable", "by-hand-a12", "by-hand-a21", "attention-values",
             "attention-heads-and-stability", "variance-raw", "variance-scaled"]
TIMEOUT_S = 5  # per cell; the correct cells take well under a second

# student -> (points per question in the order of QUESTIONS, what the reason must say)
EXPECTED = {
    "correct": ([2, 1, 1, 1, 2, 1, 1, 1], ["all 8 hidden tests passed"]),
    "blank": ([0] * 8, ["8 of 8 hidden tests failed"]),
    "partly_wrong": ([2, 0, 1, 0, 0, 0, 1, 0], [
        "5 of 8 hidden tests failed (softmax-stable, by-hand-a21, attention-values, "
        "attention-heads-and-stability, variance-scaled)",
        "a submitted cell that claimed to be a hidden test was removed"]),
    "raises": ([0, 0, 1, 1, 2, 1, 1, 1], ["2 of 8 hidden tests failed (softmax-values, softmax-stable)",
                                          "cell 3 raised ZeroDivisionError"]),
    "infinite_loop": ([2, 1, 1, 1, 2, 1, 1, 1], [
        "all 8 hidden tests passed", f"cell 3: the cell ran longer than {TIMEOUT_S} s and was interrupted"]),
    "stubborn_loop": ([2, 1, 1, 1, 2, 1, 1, 1], [
        "all 8 hidden tests passed", "the kernel ignored the interrupt and was restarted"]),
    "kills_kernel": ([2, 1, 1, 1, 2, 1, 1, 1], [
        "all 8 hidden tests passed", "cell 3: the kernel died; it was restarted"]),
    "deleted_cells": ([2, 1, 1, 1, 0, 0, 1, 1], [
        "2 of 8 hidden tests failed (attention-values, attention-heads-and-stability)",
        "no cell defines my_attention (deleted or renamed?)"]),
    "renamed_function": ([0, 0, 1, 1, 2, 1, 1, 1], [
        "2 of 8 hidden tests failed (softmax-values, softmax-stable)",
        "no cell defines my_softmax (deleted or renamed?)"]),
    "uses_package": ([2, 1, 1, 1, 2, 1, 1, 1], [
        "all 8 hidden tests passed", "task softmax asks you to write softmax yourself, and your code uses "
        "attnbook's softmax (cell 4); the grade does not change, your instructor may look at it"]),
    "invalid_json": ([0] * 8, ["not a valid notebook: the file is not valid JSON"]),
    "wrong_nbformat": ([0] * 8, ["not a valid notebook: NBFormatError: Unsupported nbformat version 5"]),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Run the real command on the sample folder; returns (output folder, CSV rows by student, stdout)."""
    out = tmp_path_factory.mktemp("grades")
    command = [sys.executable, "-m", "tools.homework", "grade", HOMEWORK, str(SAMPLES),
               str(out), "--timeout", str(TIMEOUT_S), "--jobs", "2"]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
    with (out / "grades.csv").open(encoding="utf-8", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    return out, rows, finished.stdout


def test_the_sample_folder_holds_every_kind_of_submission():
    assert sorted(p.stem for p in SAMPLES.glob("*.ipynb")) == sorted(EXPECTED)


def test_csv_has_a_column_per_question_then_total_max_and_reason(graded):
    _, rows, _ = graded
    first = next(iter(rows.values()))
    assert list(first) == ["student", "key", *QUESTIONS, "total", "max", "reason", "cleanup", "feedback"]
    assert sorted(rows) == sorted(EXPECTED)


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_each_submission_gets_its_expected_points_and_reason(graded, student):
    _, rows, _ = graded
    points, reasons = EXPECTED[student]
    row = rows[student]
    assert [int(row[q]) for q in QUESTIONS] == points
    assert int(row["total"]) == sum(points) and int(row["max"]) == 10
    for words in reasons:
        assert words in row["reason"], row["reason"]


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_each_student_gets_a_feedback_file_with_the_score(graded, student):
    out, rows, _ = graded
    assert rows[student]["feedback"] == f"{rows[student]['key']}-{student}.md"
    text = (out / "feedback" / rows[student]["feedback"]).read_text(encoding="utf-8")
    assert text.startswith(f"# Feedback: {HOMEWORK} for `{student}`\n\n**Score: {rows[student]['total']} / 10**")
    assert "Traceback" not in text and "BEGIN HIDDEN" not in text


def test_feedback_repeats_what_the_checks_said_about_a_wrong_answer(graded):
    out, rows, _ = graded
    text = (out / "feedback" / rows["partly_wrong"]["feedback"]).read_text(encoding="utf-8")
    assert "| softmax-stable | 0 / 1 | failed |" in text
    assert "off by the scaling factor: divide the scores Q K^T by sqrt(d_k) = 2" in text
    assert "`AssertionError: my_softmax: NaN or inf for logits of ±10000 (subtract the row maximum before exp)" in text


def test_feedback_of_an_unfinished_notebook_says_not_done_yet(graded):
    out, rows, _ = graded
    text = (out / "feedback" / rows["blank"]["feedback"]).read_text(encoding="utf-8")
    assert "not done yet (it still raises NotImplementedError)" in text
    assert "answer_a12: not done yet (set it to your number)" in text


def test_feedback_of_an_invalid_file_explains_the_zero(graded):
    out, rows, _ = graded
    text = (out / "feedback" / rows["invalid_json"]["feedback"]).read_text(encoding="utf-8")
    assert "Your notebook could not be graded: not a valid notebook: the file is not valid JSON" in text


def test_command_prints_one_line_per_student_and_the_time(graded):
    _, _, stdout = graded
    lines = stdout.splitlines()
    assert lines[0].startswith("blank: 0 / 10") and lines[-1].startswith(f"graded {len(EXPECTED)} submission(s) in ")


# --- the pieces, without a kernel -------------------------------------------------------------------


@pytest.fixture(scope="module")
def plan():
    return grading.grading_plan(HOMEWORK)


def correct_notebook():
    return nbformat.read(SAMPLES / "correct.ipynb", as_version=4)


def test_cells_claiming_to_be_hidden_tests_are_dropped(plan):
    notebook = correct_notebook()
    claims = [nbformat.v4.new_code_cell("pass", metadata={"tags": ["hidden-test"]}),
              nbformat.v4.new_code_cell("pass", metadata={"grade_id": "softmax-values"}),
              nbformat.v4.new_code_cell("pass", metadata={"points": 5}),
              nbformat.v4.new_code_cell("pass", metadata={"nbgrader": {"grade": True}})]
    notebook.cells.extend(claims)
    cells, notes = grading.submitted_cells(notebook, plan)
    assert sum(c.source == "pass" for c in cells) == 0 and len(cells) == len(correct_notebook().cells)
    assert notes == ["a submitted cell that claimed to be a hidden test was removed"]


def test_a_deleted_task_is_noted(plan):
    notebook = correct_notebook()
    notebook.cells = [c for c in notebook.cells if c.metadata.get("task") != "attention"]
    _, notes = grading.submitted_cells(notebook, plan)
    assert notes == ["no cell defines my_attention (deleted or renamed?)"]


@pytest.mark.parametrize(("source", "used"), [
    ("def my_softmax(x):\n    return softmax(x)\n", {"softmax"}),
    ("import attnbook\ndef my_softmax(x):\n    return attnbook.softmax(x)\n", {"softmax"}),
    ("def my_softmax(x):\n    return getattr(attnbook, 'softmax')(x)\n", {"softmax"}),
    ("my_softmax = softmax\n", {"softmax"}),
    ("my_softmax = lambda x: softmax(x)\n", {"softmax"}),
    ("def my_softmax(x):\n    softmax = np.exp(x)\n    return softmax / softmax.sum()\n", set()),  # a local
    ("from attnbook import softmax\nweights = softmax(x)\n", set()),  # a comparison, as public checks do
    ("def my_attention(q, k, v):\n    return my_softmax(q @ k.T) @ v\n", set()),
])
def test_uses_of_the_package_function_a_task_reimplements_are_found(source, used):
    assert sources.package_references(source, {"softmax"}, {"my_softmax", "my_attention"}) == used


def test_a_source_whose_solution_uses_what_it_reimplements_is_refused(tmp_path):
    text = (sources.EXERCISES / f"{HOMEWORK}.md").read_text(encoding="utf-8")
    broken = text.replace("    x = np.asarray(x, dtype=float)  # (..., n)\n", "    return softmax(x)\n", 1)
    broken = broken.replace(":reimplements: [softmax]", ":reimplements: [softmax, no_such_function]", 1)
    assert broken.count("no_such_function") == 1
    path = tmp_path / "hw_broken.md"
    path.write_text(broken, encoding="utf-8")
    with pytest.raises(sources.HomeworkError) as error:
        sources.load(path)
    assert "reimplements names no_such_function, not functions of attnbook" in str(error.value)
    assert "the solution uses softmax, which its task asks students to write themselves" in str(error.value)


def test_the_plan_knows_which_names_are_functions(plan):
    assert plan["functions"] == ["my_attention", "my_softmax"]
    assert plan["names"]["by-hand"] == ["answer_a12", "answer_a21"]


@pytest.mark.parametrize(("content", "words"), [
    ("", "not a valid notebook: the file is not valid JSON"),
    ("[1, 2]", "not a valid notebook: "),
    ('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code"}]}',
     "not a valid notebook: it does not follow nbformat 4"),
])
def test_unreadable_files_are_refused_with_a_reason(tmp_path, content, words):
    path = tmp_path / "student.ipynb"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(sources.HomeworkError) as error:
        grading.read_submission(path)
    assert str(error.value).startswith(words)


def test_a_missing_submissions_folder_is_refused(tmp_path, capsys):
    assert cli.main(["grade", HOMEWORK, str(tmp_path / "nowhere"), str(tmp_path / "out")]) == 1
    assert "submissions: " in capsys.readouterr().err


def test_submissions_may_sit_in_one_folder_per_student(tmp_path):
    (tmp_path / "alice").mkdir()
    shutil.copy(SAMPLES / "correct.ipynb", tmp_path / "alice" / f"{HOMEWORK}.ipynb")
    shutil.copy(SAMPLES / "blank.ipynb", tmp_path / "bob.ipynb")
    found, skipped = grading.submissions_in(tmp_path)
    assert [(item["row"], item["path"].name) for item in found] == [
        ("alice", f"{HOMEWORK}.ipynb"), ("bob", "bob.ipynb")]
    assert skipped == []


def test_a_worker_that_dies_still_gives_a_row(monkeypatch):
    monkeypatch.setattr(grading, "grade_submission", lambda *args: os._exit(3))  # inherited by the fork
    [result] = grading.grade_in_workers(grading.grading_plan(HOMEWORK), [SAMPLES / "correct.ipynb"],
                                        timeout=5, jobs=1, deadline=60)
    assert result["reason"] == "the grading worker died (exit code 3)"


def test_a_worker_past_its_deadline_is_stopped_and_the_next_one_still_runs(monkeypatch):
    def hang_for_correct(plan, path, timeout, deadline, sandboxed, caps, uid, max_bytes):
        if path.stem == "correct":
            time.sleep(600)
        return {"student": path.stem, "points": {}, "feedback": [], "notes": [], "status": "graded",
                "reason": "fine"}

    monkeypatch.setattr(grading, "grade_submission", hang_for_correct)
    found = [SAMPLES / "correct.ipynb", SAMPLES / "blank.ipynb"]
    ann, bob = grading.grade_in_workers(grading.grading_plan(HOMEWORK), found, timeout=5, jobs=2, deadline=-59)
    assert ann["reason"] == "grading took longer than 1 s and was stopped"
    assert bob["student"] == "blank" and bob["reason"] == "fine"


def test_a_sandbox_that_never_starts_gives_zero_with_a_reason(monkeypatch):
    def no_sandbox(self):
        raise OSError("bwrap vanished")

    monkeypatch.setattr(sandbox.Session, "start", no_sandbox)
    result = grading.grade_submission(grading.grading_plan(HOMEWORK), SAMPLES / "correct.ipynb")
    assert result["total"] == 0 and result["status"] == "error"
    assert result["reason"] == "could not be run: OSError: bwrap vanished"


def test_every_homework_gives_ten_to_its_solution_and_zero_to_its_blank_stubs(tmp_path):
    for source in sources.homework_sources():
        folder = tmp_path / source.stem
        folder.mkdir()
        _, instructor = sources.load(source)
        solutions = {c.metadata["task"]: c.source for c in instructor.cells if sources.role(c) == "solution"}
        notebook = student_notebook(source)
        nbformat.write(notebook, folder / "blank.ipynb")
        for cell in notebook.cells:
            if sources.role(cell) == "stub":
                cell.source = solutions[cell.metadata["task"]]
        nbformat.write(notebook, folder / "solved.ipynb")
        results, _ = grading.grade(source.stem, folder, tmp_path / "out" / source.stem, timeout=10, jobs=2)
        assert [(r["student"], r["total"]) for r in results] == [("blank", 0), ("solved", 10)], source.stem


@pytest.mark.parametrize(("option", "value"), [("--timeout", "0"), ("--deadline", "-1"), ("--jobs", "0")])
def test_grading_options_must_be_positive(tmp_path, option, value, capsys):
    assert cli.main(["grade", HOMEWORK, str(SAMPLES), str(tmp_path), option, value]) == 1
    assert "must be a positive" in capsys.readouterr().err


# --- wrong answers to hw_transformers_that_learn fail the hidden tests that aim at them ---------------

LEARN = "hw_transformers_that_learn"

NO_X_HAT_TERM = '''def my_layer_norm_backward(x, gamma, dy, eps=1e-5):
    """Forgets that sigma depends on x: no -x_hat * mean(g * x_hat) term."""
    sigma = np.sqrt(x.var(axis=-1, keepdims=True) + eps)
    x_hat = (x - x.mean(axis=-1, keepdims=True)) / sigma
    g = dy * gamma
    positions = tuple(range(x.ndim - 1))
    return (g - g.mean(axis=-1, keepdims=True)) / sigma, (dy * x_hat).sum(axis=positions), dy.sum(axis=positions)
'''

NO_GAMMA = '''def my_layer_norm_backward(x, gamma, dy, eps=1e-5):
    """Forgets gamma on the way back to x: right only when gamma is 1."""
    sigma = np.sqrt(x.var(axis=-1, keepdims=True) + eps)
    x_hat = (x - x.mean(axis=-1, keepdims=True)) / sigma
    g = dy
    dx = (g - g.mean(axis=-1, keepdims=True) - x_hat * (g * x_hat).mean(axis=-1, keepdims=True)) / sigma
    positions = tuple(range(x.ndim - 1))
    return dx, (dy * x_hat).sum(axis=positions), dy.sum(axis=positions)
'''

NUCLEUS_DROPPING_THE_TOP = '''def my_nucleus_filter(logits, p):
    """Keeps a token only while the sum with it stays within p: drops a top token more probable than p."""
    order = np.argsort(-logits, axis=-1, kind="stable")
    ranked = np.take_along_axis(logits, order, axis=-1)
    probs = np.exp(ranked - ranked[..., :1])
    probs = probs / probs.sum(axis=-1, keepdims=True)
    kept = np.zeros(logits.shape, dtype=bool)
    np.put_along_axis(kept, order, np.cumsum(probs, axis=-1) <= p, axis=-1)
    return np.where(kept, logits, -np.inf)
'''

GREEDY_WITHOUT_PADDING = '''def my_greedy_decode(step, state, batch_size, max_length, bos, eos):
    """Stops when every row has ended, but keeps writing the tokens of rows that ended before."""
    tokens, log_probs = np.zeros((batch_size, max_length), dtype=np.int64), np.zeros(batch_size)
    lengths, alive, current = np.zeros(batch_size, dtype=np.int64), np.ones(batch_size, dtype=bool), np.full(batch_size, bos)
    for t in range(max_length):
        logits, state = step(state, current)
        logp = logits - logits.max(axis=-1, keepdims=True)
        logp = logp - np.log(np.exp(logp).sum(axis=-1, keepdims=True))
        chosen = logp.argmax(axis=-1)
        log_probs += np.where(alive, logp[np.arange(batch_size), chosen], 0.0)
        tokens[:, t], lengths = chosen, lengths + alive
        alive &= chosen != eos
        current = chosen
        if not alive.any():
            break
    return tokens[:, :lengths.max()], log_probs, lengths


def greedy_on_tables(tables, max_length, bos, eos):
    """Leave as it is: my_greedy_decode on table_step, row r of the batch following tables[r] (vocab, vocab)."""
    return my_greedy_decode(table_step, tables, len(tables), max_length, bos, eos)
'''

# student -> (the tasks they answer wrongly, and how) and their points per hidden test
LEARN_QUESTIONS = ["layer-norm-backward-values", "layer-norm-backward-orthogonal", "layer-norm-backward-gamma",
                   "nucleus-values", "nucleus-keeps-the-top", "greedy-values", "greedy-ends-rows",
                   "smoothed-minimum", "noam-peak"]
LEARN_EXPECTED = {
    "solved": ({}, [2, 1, 1, 1, 1, 1, 1, 1, 1]),
    "blank": (None, [0] * 9),
    "no_x_hat_term": ({"layer-norm-backward": NO_X_HAT_TERM}, [0, 0, 0, 1, 1, 1, 1, 1, 1]),
    "no_gamma": ({"layer-norm-backward": NO_GAMMA}, [0, 0, 0, 1, 1, 1, 1, 1, 1]),  # orthogonal, but not dx
    "mistakes_elsewhere": ({"nucleus": NUCLEUS_DROPPING_THE_TOP, "greedy": GREEDY_WITHOUT_PADDING,
                            "training-numbers": "answer_smoothed_minimum = -np.log(0.91)  # the right token only\n"
                                                "answer_noam_peak = 400 ** -0.5  # without d_model\n"},
                           [2, 1, 1, 0, 0, 0, 0, 0, 0]),
}


def test_wrong_answers_to_the_transformers_that_learn_homework_fail_their_hidden_tests(tmp_path):
    _, instructor = sources.load(LEARN)
    solutions = {c.metadata["task"]: c.source for c in instructor.cells if sources.role(c) == "solution"}
    for student, (changes, _) in LEARN_EXPECTED.items():
        notebook = student_notebook(sources.resolve(LEARN))
        if changes is not None:
            for cell in notebook.cells:
                if sources.role(cell) == "stub":
                    cell.source = {**solutions, **changes}[cell.metadata["task"]]
        nbformat.write(notebook, tmp_path / f"{student}.ipynb")
    results, _ = grading.grade(LEARN, tmp_path, tmp_path / "out", timeout=10, jobs=2)
    got = {r["student"]: [r["points"][q] for q in LEARN_QUESTIONS] for r in results}
    assert got == {student: points for student, (_, points) in LEARN_EXPECTED.items()}, got
    [wrong] = [r for r in results if r["student"] == "no_x_hat_term"]
    feedback = (tmp_path / "out" / "feedback" / wrong["feedback_file"]).read_text(encoding="utf-8")
    assert "the term -x_hat * mean(g * x_hat) is missing" in feedback
    assert "a row of dx is not orthogonal to x_hat" in feedback
