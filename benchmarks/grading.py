"""How long the sandboxed grader takes for a class: 100 submissions of one homework, printed, not a test.

    .venv/bin/python benchmarks/grading.py [--count 100] [--jobs 2]      (make bench-grading)

The class is made of the sample submissions of tests/homework/submissions (correct, partly wrong,
blank, raising, using the package, a renamed function), repeated in turn up to ``--count`` files;
the samples that loop until their timeout are left out, since they would measure the timeout. It
runs the real command (``python -m tools.homework grade``) in the sandbox, as an instructor would,
and prints the wall time, the time per submission and the machine's load before and after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools import ROOT
HOMEWORK = "hw_scaled_dot_product_attention"
SAMPLES = ROOT / "tests" / "homework" / "submissions" / HOMEWORK
KINDS = ("correct", "partly_wrong", "blank", "raises", "uses_package", "renamed_function")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100, help="submissions in the class")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at once")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as folder:
        submissions, out = Path(folder) / "in", Path(folder) / "out"
        submissions.mkdir()
        for index in range(args.count):
            kind = KINDS[index % len(KINDS)]
            shutil.copy(SAMPLES / f"{kind}.ipynb", submissions / f"student_{index:03d}_{kind}.ipynb")
        load_before = os.getloadavg()[0]
        start = time.perf_counter()
        finished = subprocess.run([sys.executable, "-m", "tools.homework", "grade", HOMEWORK, str(submissions),
                                   str(out), "--jobs", str(args.jobs)], capture_output=True, text=True, cwd=ROOT)
        seconds = time.perf_counter() - start
        if finished.returncode != 0:
            print(finished.stdout[-2000:], finished.stderr[-2000:], sep="\n")
            return 1
        rows = (out / "grades.csv").read_text(encoding="utf-8").count("\n") - 1
    print(f"graded {rows} submissions of {HOMEWORK} with --jobs {args.jobs} on {os.cpu_count()} cores "
          f"(as {'root' if os.geteuid() == 0 else 'user ' + str(os.geteuid())}): {seconds:.1f} s, "
          f"{seconds / rows:.2f} s per submission; load average {load_before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
