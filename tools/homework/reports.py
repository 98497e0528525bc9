"""What grading writes: ``grades.csv``, ``skipped.csv`` and one Markdown feedback file per submission.

``grades.csv`` has a row per submission: its name as submitted (``student``, made visible by
:mod:`tools.homework.safe_text`) and its ``key`` (:func:`submission_key`, unique by construction), the
points of each hidden test, the total, the maximum, the reason, ``cleanup`` (what the submission's
sandbox left on the grading machine and the grader had to remove: empty, unless something went wrong)
and ``feedback``: the name of its feedback file, or why it could not be written.

Every string a submission controls passes through :mod:`tools.homework.safe_text` on its way into a
file; every cell of a CSV file is made safe for spreadsheet programs and quoted. Each file is written
on its own: one that cannot be written is reported (in its row, for a feedback file) and the others
are still written. Feedback files are named by the submission's key, created exclusively, never
overwritten.
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
import unicodedata
from pathlib import Path

from tools.homework.safe_text import (NAME_LIMIT, SPREADSHEET_TRIGGERS, markdown_block, markdown_code, markdown_text,
                                      spreadsheet_safe, visible)
from tools.homework.sources import format_number

__all__ = ["SPREADSHEET_TRIGGERS", "feedback_markdown", "feedback_name", "spreadsheet_safe", "submission_key",
           "write_csv", "write_feedback", "write_skipped"]

SLUG_LIMIT = 40  # characters of the name kept, in ASCII, in a feedback file's name after the key


def submission_key(index: int, relative: str) -> str:
    """A submission's key: its place in the sorted folder and a short hash of its path's bytes (``0007-3f2a9c1b``).

    Unique by construction (the index), stable between runs over the same folder, ASCII.
    """
    digest = hashlib.sha256(os.fsencode(relative)).hexdigest()[:8]
    return f"{index:04d}-{digest}"


def feedback_name(key: str, name: str) -> str:
    """The feedback file of a submission: ``<key>-<name in ASCII letters, digits, _ and ->.md``.

    The key makes it unique; the rest (at most ``SLUG_LIMIT`` characters, maybe none) helps a person
    find it. ASCII only and short, whatever the submitted name: no normalisation can lengthen it.
    """
    ascii_name = unicodedata.normalize("NFKD", visible(name, NAME_LIMIT)).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", ascii_name)[:SLUG_LIMIT].strip("_-")
    return f"{key}-{slug}.md" if slug else f"{key}.md"


def write_feedback(folder: Path, name: str, text: str) -> str:
    """Create ``folder/name`` (exclusively: never over another file) with ``text``; returns "" or why it failed."""
    try:
        with open(folder / name, "x", encoding="utf-8", errors="backslashreplace", newline="\n") as handle:
            handle.write(text)
    except OSError as error:
        return f"not written: {type(error).__name__}: {visible(error.strerror or str(error), NAME_LIMIT)}"
    return ""


def write_csv(path: Path, plan: dict, results: list[dict]) -> None:
    ids = [test["grade_id"] for test in plan["hidden"]]
    with path.open("w", newline="", encoding="utf-8", errors="backslashreplace") as handle:
        writer = csv.writer(handle, quoting=csv.QUOTE_ALL)
        writer.writerow(["student", "key", *ids, "total", "max", "reason", "cleanup", "feedback"])
        for result in sorted(results, key=lambda r: r["key"]):
            row = [visible(result["student"], NAME_LIMIT), result["key"],
                   *(format_number(result["points"].get(i, 0)) for i in ids),
                   format_number(result["total"]), format_number(result["max_total"]), result["reason"],
                   "; ".join(result.get("cleanup", [])), _feedback_cell(result)]
            writer.writerow([spreadsheet_safe(str(cell)) for cell in row])


def _feedback_cell(result: dict) -> str:
    """The feedback file's name, and why it is missing when it could not be written."""
    name, error = result.get("feedback_file", ""), result.get("feedback_error", "")
    return f"{name} ({error})" if error else name


def write_skipped(path: Path, skipped: list[tuple[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8", errors="backslashreplace") as handle:
        writer = csv.writer(handle, quoting=csv.QUOTE_ALL)
        writer.writerow(["file", "reason"])
        for relative, reason in skipped:
            writer.writerow([spreadsheet_safe(visible(relative, NAME_LIMIT)), spreadsheet_safe(reason)])


def feedback_markdown(plan: dict, result: dict) -> str:
    """Per-student feedback: the score, each question's points and, for failures, what the tests said.

    What the submission controls (its name, the reason, what the checks printed, the errors, the notes)
    is escaped for Markdown (:mod:`tools.homework.safe_text`); the rest is the grader's own.
    """
    lines = [f"# Feedback: {plan['homework']} for {markdown_code(result['student'], NAME_LIMIT)}", "",
             f"**Score: {format_number(result['total'])} / {format_number(result['max_total'])}**", ""]
    if result.get("status") != "graded":
        reason = markdown_text(result['reason'].rstrip('.'))
        lines += [f"Your notebook could not be graded: {reason}.", "",
                  "Every question scores 0. Check that you submitted the .ipynb file from Jupyter, saved, "
                  "and that it opens there.", ""]
        return "\n".join(lines)
    lines += ["| question | points | result |", "| --- | --- | --- |"]
    for item in result["feedback"]:
        verdict = "passed" if item["passed"] else "failed"
        lines.append(f"| {item['grade_id']} | {format_number(item['points'])} / {format_number(item['max'])} | {verdict} |")
    lines.append("")
    failures = [item for item in result["feedback"] if not item["passed"]]
    for item in failures:
        lines += [f"## {item['grade_id']}", ""]
        said = [line for line in item["output"].splitlines() if line.strip()]
        if said:
            lines += ["The checks said:", "", *markdown_block(said), ""]
        repeated = item["error"].removeprefix("AssertionError: ")
        if item["error"] and not any(repeated in line for line in said):
            lines += [f"The test stopped with: {markdown_code(item['error'])}", ""]
    if result["notes"]:
        lines += ["## Notes", ""] + [f"- {markdown_text(note)}" for note in dict.fromkeys(result["notes"])] + [""]
    if not failures:
        lines += ["Every hidden test passed. Well done.", ""]
    return "\n".join(lines)
