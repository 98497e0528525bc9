"""The instructor sources follow the homework conventions, and the validator catches each way to break them."""

from __future__ import annotations

import re

import jupytext
import nbformat
import pytest

from tools import ROOT
from tools.homework import cli, grading, sources

SOURCES = sources.homework_sources()
NAMES = [source.stem for source in SOURCES]

CORE_CHAPTERS = ["why_attention", "scaled_dot_product_attention", "self_attention_layer", "masks",
                 "multi_head_attention", "positional_encoding", "tokens", "transformer", "beyond_text",
                 "positions_today", "modern_block", "long_context", "cache_attention", "cheaper_mixing",
                 "transformers_that_learn", "gpt", "pretrained"]


def test_every_core_chapter_has_a_homework():
    assert NAMES == sorted(f"hw_{chapter}" for chapter in CORE_CHAPTERS)


@pytest.mark.parametrize("source", SOURCES, ids=NAMES)
def test_homework_source_follows_the_conventions(source):
    assert sources.problems(jupytext.read(source), source.stem) == []


@pytest.mark.parametrize("source", SOURCES, ids=NAMES)
def test_homework_header_is_the_chapters_header(source):
    chapter = (ROOT / "chapters" / "scaled_dot_product_attention.md").read_text(encoding="utf-8")
    header = chapter[: chapter.index("---", 3) + 3]
    assert source.read_text(encoding="utf-8").startswith(header + "\n")


@pytest.mark.parametrize("source", SOURCES, ids=NAMES)
def test_homework_is_worth_ten_points_spread_over_its_tasks(source):
    plan = grading.grading_plan(source)
    assert sum(test["points"] for test in plan["hidden"]) == 10
    assert {test["task"] for test in plan["hidden"]} == set(plan["tasks"]), "a task without a hidden test"
    assert len(plan["tasks"]) >= 3


@pytest.mark.parametrize("source", SOURCES, ids=NAMES)
def test_every_task_has_instructions_and_a_public_check(source):
    notebook = jupytext.read(source)
    roles = [(sources.role(cell), cell.metadata.get("task")) for cell in notebook.cells]
    for task in grading.grading_plan(source)["tasks"]:
        assert ("public-check", task) in roles, f"task {task} has no public check"
        first = next(i for i, r in enumerate(roles) if r[1] == task)
        assert roles[first - 1][0] == "instructions", f"task {task} does not start after its instructions"


@pytest.mark.parametrize("source", SOURCES, ids=NAMES)
def test_stubs_only_define_or_raise_not_implemented(source):
    for cell in jupytext.read(source).cells:
        if sources.role(cell) == "stub":
            code = cell.source
            assert "NotImplementedError" in code or "= None  # your number here" in code, code


@pytest.mark.parametrize("source", SOURCES, ids=NAMES)
def test_every_answer_variable_is_named_in_its_tasks_text(source):
    """A number answer's variable (set to None in the stub) is named in the instructions right before its task,
    so a student who reads the task (or only its nbgrader release) knows where the grader looks."""
    instructions = ""
    for cell in jupytext.read(source).cells:
        if sources.role(cell) == "instructions":
            instructions = cell.source
        elif sources.role(cell) == "stub":
            answers = sorted(name for name in sources.defined_names(cell.source) if name.startswith("answer_"))
            assert [name for name in answers if f"`{name}`" not in instructions] == [], cell.metadata["task"]


def markdown(source, tags):
    return nbformat.v4.new_markdown_cell(source, metadata={"tags": tags})


def code(source, tags, **metadata):
    return nbformat.v4.new_code_cell(source, metadata={"tags": tags, **metadata})


def valid_cells():
    return [
        markdown("# Title", ["instructions"]),
        code("import numpy as np", ["setup"]),
        code("def f(x):\n    raise NotImplementedError", ["stub", "remove-cell"], task="t"),
        code("def f(x):\n    return x", ["solution", "hide-input"], task="t"),
        code("verdict = check_number(f(1), 1, 'f(1)')", ["public-check"], task="t"),
        code("assert f(2) == 2", ["hidden-test", "remove-cell"], task="t", grade_id="t-1", points=1),
    ]


def test_a_well_formed_homework_has_no_problems():
    assert sources.problems(nbformat.v4.new_notebook(cells=valid_cells()), "hw") == []


@pytest.mark.parametrize(("change", "words"), [
    (lambda cells: cells[1].metadata.update(tags=[]), "hw cell 1 has role tags []"),
    (lambda cells: cells[1].metadata.update(tags=["setup", "stub"]), "hw cell 1 has role tags ['setup', 'stub']"),
    (lambda cells: cells[0].metadata.update(tags=["setup"]), "hw cell 0 is a markdown cell tagged setup"),
    (lambda cells: cells[2].metadata.update(tags=["stub"]), "hw cell 2 (stub) lacks the book tag remove-cell"),
    (lambda cells: cells[3].metadata.update(tags=["solution"]), "hw cell 3 (solution) lacks the book tag hide-input"),
    (lambda cells: cells[4].metadata.pop("task"), "hw cell 4 (public-check) has no task in its metadata"),
    (lambda cells: cells.pop(3), "hw cell 2 is a stub not directly followed by its solution"),
    (lambda cells: cells.pop(2), "hw cell 2 is a solution without a stub right before it"),
    (lambda cells: cells[3].metadata.update(task="other"), "the stub and the solution after it name different tasks"),
    (lambda cells: setattr(cells[3], "source", "def g(x):\n    return x"), "the stub defines ['f']; its solution"),
    (lambda cells: cells[5].metadata.pop("grade_id"), "hw cell 5 is a hidden test without a grade_id"),
    (lambda cells: cells[5].metadata.update(points=0), "hw cell 5 is a hidden test whose points (0) are not"),
    (lambda cells: cells.append(code("assert True", ["hidden-test", "remove-cell"], task="t", grade_id="t-1",
                                     points=1)), "hw cell 6 repeats the grade_id 't-1'"),
    (lambda cells: cells.pop(5), "hw has no hidden tests"),
    (lambda cells: setattr(cells[4], "source", "check_number(f(1), 1)"), "hw cell 4 (public-check) keeps no verdict"),
])
def test_each_broken_convention_is_reported(change, words):
    cells = valid_cells()
    change(cells)
    found = sources.problems(nbformat.v4.new_notebook(cells=cells), "hw")
    assert any(words in problem for problem in found), found


def test_an_unknown_homework_is_refused_with_the_known_names():
    known = ", ".join(NAMES)
    assert "hw_masks" in NAMES and len(NAMES) > 1
    with pytest.raises(sources.HomeworkError, match=r"^no homework 'hw_nothing': expected a name such as "
                                                     rf"hw_masks \(known: {re.escape(known)}\)$"):
        sources.resolve("hw_nothing")


def test_check_command_summarises_every_homework(capsys):
    assert cli.main(["check"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(SOURCES)
    assert lines[0].startswith("hw_beyond_text: 4 tasks, ") and lines[0].endswith(" hidden tests, 10 points")
