"""The homework's command line, ``python -m tools.homework``: check, student, grade and nbgrader.

    python -m tools.homework check [HOMEWORK ...]                 # validate the instructor sources
    python -m tools.homework student [--out DIR] [HOMEWORK ...]   # student notebooks -> _build/student/
    python -m tools.homework grade HOMEWORK SUBMISSIONS OUT [--timeout 10] [--jobs 2] [--memory 3] [--max-size 5]
                                                            [--unsafe-no-sandbox]
    python -m tools.homework nbgrader OUT [HOMEWORK ...]          # nbgrader source notebooks -> OUT/source/

HOMEWORK is a name such as ``hw_masks`` or a path such as ``exercises/hw_masks.md``; without one, every
``exercises/hw_*.md`` is used. ``make student`` and ``make grade`` run the second and third commands.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tools import display_path
from tools.homework import cgroups, grading
from tools.homework.safe_text import visible
from tools.homework.nbgrader_export import write_nbgrader
from tools.homework.sources import HomeworkError, format_number, homework_sources
from tools.homework.student import STUDENT_DIR, write_student_notebooks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="validate the cell roles of the instructor sources")
    check.add_argument("homework", nargs="*")
    student = commands.add_parser("student", help="write the student notebooks")
    student.add_argument("homework", nargs="*")
    student.add_argument("--out", type=Path, default=STUDENT_DIR)
    grade = commands.add_parser("grade", help="grade a folder of submitted notebooks")
    grade.add_argument("homework")
    grade.add_argument("submissions", type=Path)
    grade.add_argument("out", type=Path)
    grade.add_argument("--timeout", type=float, default=10, help="seconds per cell and per call")
    grade.add_argument("--jobs", type=int, default=2, help="submissions graded in parallel")
    grade.add_argument("--deadline", type=float, default=180, help="seconds per submission")
    grade.add_argument("--memory", type=float, default=cgroups.MEMORY_BYTES / 1024 ** 3,
                       help="GiB per sandbox, all its processes together (default 3)")
    grade.add_argument("--max-size", type=float, default=grading.MAX_SUBMISSION_BYTES / 1024 ** 2,
                       help="MiB per submitted file, measured before it is read; a larger one is skipped "
                            f"(default {grading.MAX_SUBMISSION_BYTES / 1024 ** 2:g})")
    grade.add_argument("--unsafe-no-sandbox", action="store_true",
                       help="run submissions without the sandbox, with your rights (see the instructor guide)")
    export = commands.add_parser("nbgrader", help="write nbgrader source notebooks to OUT/source/")
    export.add_argument("out", type=Path)
    export.add_argument("homework", nargs="*")
    args = parser.parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # a terminal in a narrower encoding than UTF-8 still gets every line
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")

    try:
        if args.command == "check":
            for homework in args.homework or homework_sources():
                plan = grading.grading_plan(homework)  # validates the source on the way
                points = sum(t["points"] for t in plan["hidden"])
                print(f"{plan['homework']}: {len(plan['tasks'])} tasks, {len(plan['hidden'])} hidden tests, "
                      f"{format_number(points)} points")
        elif args.command == "student":
            for target in write_student_notebooks(args.out, args.homework):
                print(f"wrote {display_path(target)}")
        elif args.command == "grade":
            if args.unsafe_no_sandbox:
                print("homework: WARNING: --unsafe-no-sandbox: every submission runs as you, with your files "
                      "and environment in reach; it can change the grades", file=sys.stderr)
            if not args.unsafe_no_sandbox:
                print(f"homework: each sandbox: {cgroups.plan(int(args.memory * 1024 ** 3)).describe()}",
                      file=sys.stderr)
            start = time.perf_counter()
            results, skipped = grading.grade(args.homework, args.submissions, args.out, args.timeout, args.jobs,
                                             args.deadline, sandboxed=not args.unsafe_no_sandbox,
                                             memory_bytes=int(args.memory * 1024 ** 3),
                                             max_bytes=int(args.max_size * 1024 ** 2))
            seconds = time.perf_counter() - start
            for result in sorted(results, key=lambda r: r["key"]):
                print(visible(f"{result['student']}: {format_number(result['total'])} / "
                              f"{format_number(result['max_total'])}  {result['reason']}"))
            for relative, reason in skipped:
                print(visible(f"skipped {relative}: {reason}"))
            collisions = list(dict.fromkeys(tuple(r["collision"]) for r in results if r.get("collision")))
            for names in collisions:
                print(visible(f"name collision, each graded on its own row: {', '.join(names)}"))
            unwritten = [r for r in results if r["feedback_error"]]
            for result in unwritten:
                print(visible(f"homework: the feedback of {result['student']} ({result['key']}) was "
                              f"{result['feedback_error']}"), file=sys.stderr)
            print(f"graded {len(results)} submission(s) in {seconds:.1f} s: {display_path(args.out / 'grades.csv')}, "
                  f"feedback in {display_path(args.out / 'feedback')}"
                  + (f", {len(skipped)} file(s) skipped (skipped.csv)" if skipped else "")
                  + (f", {len(collisions)} name collision(s)" if collisions else "")
                  + (f", {len(unwritten)} feedback file(s) not written" if unwritten else ""))
        elif args.command == "nbgrader":
            for target in write_nbgrader(args.out, args.homework):
                print(f"wrote {display_path(target)}")
    except HomeworkError as error:
        print(f"homework: {error}", file=sys.stderr)
        return 1
    return 0

