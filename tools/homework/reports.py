"""What grading writes: ``grades.csv``, ``skipped.csv`` and one Markdown feedback file per submission.

``grades.csv`` has a row per submission: the points of each hidden test, the total, the maximum, the
reason, and ``cleanup``: what the submission's sandbox left on the grading machine and the grader had to
remove (empty, unless something went wrong; the row's grade is then worth a look).

Every cell of a CSV file is made safe for spreadsheet programs (:func:`spreadsheet_safe`), and every
feedback file gets a distinct, safe name (:func:`feedback_names`), whatever the submitted file names.
"""

from __future__ import annotations

import csv
import hashlib
import re
from pathlib import Path

from tools.homework.sources import format_number

SPREADSHEET_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def feedback_names(rows: list[str]) -> dict[str, str]:
    """A distinct, safe file name for each row: ``<row>.md``, with unsafe characters replaced.

    Names that would clash (also when only their case differs) get a short hash of the row.
    """
    names: dict[str, str] = {}
    taken: set[str] = set()
    for row in rows:
        safe = re.sub(r"[^\w.-]", "_", row).lstrip(".") or "_"
        name = f"{safe}.md"
        if name.lower() in taken:
            name = f"{safe}-{hashlib.sha1(row.encode()).hexdigest()[:8]}.md"
        taken.add(name.lower())
        names[row] = name
    return names


def spreadsheet_safe(cell: str) -> str:
    """A CSV cell a spreadsheet program shows as text: one starting with = + - @ tab or CR gets a quote."""
    return "'" + cell if cell.startswith(SPREADSHEET_TRIGGERS) else cell


def write_csv(path: Path, plan: dict, results: list[dict]) -> None:
    ids = [test["grade_id"] for test in plan["hidden"]]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", *ids, "total", "max", "reason", "cleanup"])
        for result in sorted(results, key=lambda r: r["student"]):
            row = [result["student"], *(format_number(result["points"].get(i, 0)) for i in ids),
                   format_number(result["total"]), format_number(result["max_total"]), result["reason"],
                   "; ".join(result.get("cleanup", []))]
            writer.writerow([spreadsheet_safe(str(cell)) for cell in row])


def write_skipped(path: Path, skipped: list[tuple[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["file", "reason"])
        for relative, reason in skipped:
            writer.writerow([spreadsheet_safe(relative), reason])


def feedback_markdown(plan: dict, result: dict) -> str:
    """Per-student feedback: the score, each question's points and, for failures, what the tests said."""
    lines = [f"# Feedback: {plan['homework']} for {result['student']}", "",
             f"**Score: {format_number(result['total'])} / {format_number(result['max_total'])}**", ""]
    if result.get("status") != "graded":
        lines += [f"Your notebook could not be graded: {result['reason'].rstrip('.')}.", "",
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
            lines += ["The checks said:", "", "```text", *said, "```", ""]
        repeated = item["error"].removeprefix("AssertionError: ")
        if item["error"] and not any(repeated in line for line in said):
            lines += [f"The test stopped with: `{item['error']}`", ""]
    if result["notes"]:
        lines += ["## Notes", ""] + [f"- {note}" for note in dict.fromkeys(result["notes"])] + [""]
    if not failures:
        lines += ["Every hidden test passed. Well done.", ""]
    return "\n".join(lines)
