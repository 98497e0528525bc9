"""Write the sample submissions of hw_scaled_dot_product_attention that the grading test grades.

    .venv/bin/python tests/homework/make_submissions.py

Each file is the student notebook with the stubs filled in the way one kind of student would, and
TestGrading in test_grading.py states the score and the reason each one must get. Regenerate after
changing the homework (the files are committed so the test does not depend on this script's logic).
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import homework  # noqa: E402

HOMEWORK = "hw_scaled_dot_product_attention"
OUT = Path(__file__).resolve().parent / "submissions" / HOMEWORK

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


def solutions() -> dict[str, str]:
    """task -> the instructor's solution source."""
    _, source = homework.load(HOMEWORK)
    return {c.metadata["task"]: c.source for c in source.cells if homework.role(c) == "solution"}


def filled(replacements: dict[str, str]):
    """The student notebook with the stub of each task replaced by the given source."""
    notebook = homework.student_notebook(HOMEWORK)
    for cell in notebook.cells:
        if homework.role(cell) == "stub" and cell.metadata["task"] in replacements:
            cell.source = replacements[cell.metadata["task"]]
    return notebook


def code_cell(source: str, **metadata):
    cell = nbformat.v4.new_code_cell(source, metadata=metadata)
    cell.id = homework.stable_id("sample", len(source), source)
    return cell


def insert_after_setup(notebook, cell):
    """Insert a cell right after the last setup cell (the install cell and the imports)."""
    position = max(i for i, c in enumerate(notebook.cells) if homework.role(c) == "setup") + 1
    notebook.cells.insert(position, cell)
    return notebook


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
                     or homework.role(c) == "instructions"]
    notebooks["deleted_cells"] = deleted

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
    for path in sorted(OUT.iterdir()):
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
