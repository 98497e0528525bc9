"""The checks of glued values that follow each notebook's strict nbval run (tools/nbval_stability.py)."""

from __future__ import annotations

import subprocess
import sys

from tools import ROOT
from tools.nbval_stability import GLUE_CHECK, glue_problems, prose_formats


def number(value: float, digits: int = 3) -> dict:
    return {"via": "glue_number", "value": value, "digits": digits}


def test_a_number_that_keeps_its_margin_passes():
    assert glue_problems({"x": number(0.12345)}, {"x": number(0.12345 * (1 + 1e-6))}, [("x", ".3f")]) == []


def test_a_number_that_moves_by_more_than_a_hundredth_of_its_rounding_step_is_too_sensitive():
    problems = glue_problems({"x": number(0.12345)}, {"x": number(0.12345 * (1 + 2e-5))}, [])
    assert len(problems) == 1 and problems[0].startswith("too sensitive: x")


def test_a_measured_time_is_glued_in_both_runs_but_not_compared():
    assert glue_problems({"measured_s": number(1.0)}, {"measured_s": number(2.0)}, []) == []


def test_a_value_that_is_not_a_number_must_not_change():
    count = {"via": "glue_count", "value": 7}
    assert glue_problems({"n": count}, {"n": {**count, "value": 8}}, [])[0].startswith("changed: n")


def test_a_name_glued_in_one_run_only_is_found():
    assert glue_problems({"x": number(1.5)}, {}, [])[0].startswith("other names")


def test_prose_that_shows_more_digits_than_the_glue_keeps_is_overstated():
    problems = glue_problems({"x": number(0.123456)}, {"x": number(0.123456)}, [("x", ".5f")])
    assert problems == ["overstated: x:.5f shows 0.12300, the unrounded value 0.12346 (3 digits kept)"]


def test_the_prose_formats_are_read_from_the_glue_roles(tmp_path):
    source = tmp_path / "page.md"
    source.write_text("a {glue:text}`speed_up:.1f` and {glue:text}`heads:d` times", encoding="utf-8")
    assert prose_formats(source) == [("speed_up", ".1f"), ("heads", "d")]


def test_a_book_notebooks_glue_check_follows_its_cells():
    """nbval's collection of a book notebook ends with the check of its glued values, once."""
    listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "--nbval", "--nbval-current-env",
                             "exercises/hw_masks.ipynb"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    tests = [line for line in listed if line.startswith("exercises/hw_masks.ipynb::")]
    assert len(tests) > 2 and tests[-1] == f"exercises/hw_masks.ipynb::{GLUE_CHECK}", tests
    assert sum(GLUE_CHECK in line for line in tests) == 1, tests
