"""Run nbgrader on an exported course: generate_assignment, then autograde a solved and a blank submission.

    python tests/homework/nbgrader_driver.py COURSE_DIR [HOMEWORK ...]

COURSE_DIR holds nbgrader_config.py and source/<homework>/<homework>.ipynb (from `python -m tools.homework nbgrader`).
Every assignment in source/ is generated; the named ones (default: all) are autograded for two students,
"solved" (the release notebook with the instructor's solutions put back into its solution cells) and
"blank" (the release notebook as a student receives it). Prints one JSON object:
{homework: {"generated": bool, "scores": {student: [score, max_score]}, "error": str}}.
It runs in its own process so that nbgrader's logging and database stay out of the test process.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path


def main(argv: list[str]) -> int:
    course = Path(argv[0]).resolve()
    os.chdir(course)  # nbgrader reads nbgrader_config.py from the working directory
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")  # alembic
    warnings.simplefilter("ignore")  # SQLAlchemy warns about nbgrader's sessions; not ours to fix

    import nbformat
    from nbgrader.api import Gradebook
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config, PyFileConfigLoader

    from tools.homework.sources import load, role

    config = Config()
    config.merge(PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config())
    api = NbGraderAPI(config=config)
    names = sorted(p.name for p in (course / "source").iterdir() if p.is_dir())
    report = {}
    for name in names:
        generated = api.generate_assignment(name, force=True, create=True)
        report[name] = {"generated": generated["success"], "scores": {},
                        "error": generated.get("error", "") if not generated["success"] else ""}
        if not generated["success"] or (argv[1:] and name not in argv[1:]):
            continue
        release = course / "release" / name / f"{name}.ipynb"
        _, source = load(name)
        solutions = {f"{c.metadata['task']}-solution": c.source for c in source.cells if role(c) == "solution"}
        solved = nbformat.read(release, as_version=4)
        for cell in solved.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if cell.metadata.get("nbgrader", {}).get("solution"):
                cell.source = solutions[grade_id]
        for student, notebook in (("solved", solved), ("blank", nbformat.read(release, as_version=4))):
            folder = course / "submitted" / student / name
            folder.mkdir(parents=True, exist_ok=True)
            nbformat.write(notebook, folder / f"{name}.ipynb")
            graded = api.autograde(name, student, force=True, create=True)
            if not graded["success"]:
                report[name]["error"] += graded.get("error", "autograde failed")
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
            for student in ("solved", "blank"):
                try:
                    submission = gradebook.find_submission(name, student)
                    report[name]["scores"][student] = [submission.score, submission.max_score]
                except Exception as error:  # no submission: the autograde error above says why
                    report[name]["scores"][student] = [None, None, f"{type(error).__name__}: {error}"]
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
