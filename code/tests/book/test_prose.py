"""attnbook.book.prose: numbers for the prose keep a fixed count of significant digits."""

import math

import numpy as np
import pytest

from attnbook.book.prose import AMPLIFIED, CLOSED_FORM, digits_kept, glue_count, glue_number, round_significant


@pytest.mark.parametrize(
    ("value", "digits", "expected"),
    [
        (390.54602452, 6, 390.546),
        (390.54602304, 6, 390.546),  # the two machines' values of one ratio now store the same text
        (1.212732209530065e-11, 6, 1.21273e-11),
        (1.2127322095300677e-11, 6, 1.21273e-11),
        (-0.000123456789, 3, -0.000123),
        (12345.0, 2, 12000.0),
        (0.0, 6, 0.0),
        (np.float32(0.1), 3, 0.1),
    ],
)
def test_round_significant_keeps_the_requested_significant_digits(value, digits, expected):
    assert round_significant(value, digits) == expected


def test_rounded_values_print_with_at_most_the_kept_digits():
    rng = np.random.default_rng(0)
    for value in rng.standard_normal(200) * 10.0 ** rng.integers(-12, 12, 200):
        text = repr(round_significant(value, CLOSED_FORM))
        mantissa = text.lstrip("-").split("e")[0].replace(".", "").lstrip("0").rstrip("0")
        assert len(mantissa) <= CLOSED_FORM, text


def test_precisions_order_closed_form_above_amplified():
    assert 1 <= AMPLIFIED < CLOSED_FORM <= 15


@pytest.mark.parametrize("digits", [0, 16, 2.5, True, "6"])
def test_round_significant_names_a_bad_digit_count(digits):
    with pytest.raises(ValueError, match="digits must be an integer from 1 to 15"):
        round_significant(1.0, digits)


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_a_non_finite_number_is_refused_for_the_prose(value):
    with pytest.raises(ValueError, match="value must be finite"):
        glue_number("x", value)


def test_glue_count_accepts_whole_numbers_of_any_type():
    for value in (7, np.int64(7), 7.0, np.float32(7.0)):
        glue_count("n", value)


@pytest.mark.parametrize("value", [7.5, True, "7", None])
def test_glue_count_refuses_what_is_not_a_whole_number(value):
    with pytest.raises(ValueError, match="must be a whole number"):
        glue_count("n", value)


def test_decimals_store_exactly_what_a_fixed_point_format_shows():
    for value in (4.1132503787829275, 1.435949999, 26.26097339503468, 0.19557, 60611.49999):
        kept = round_significant(value, digits_kept(value, decimals=4))
        assert f"{kept:.4f}" == f"{value:.4f}"


def test_decimals_must_be_an_integer():
    with pytest.raises(ValueError, match="decimals must be an integer"):
        glue_number("x", 1.0, decimals=2.5)


def test_every_glue_is_recorded_unrounded_where_the_environment_says(tmp_path, monkeypatch):
    import json

    from attnbook.book import prose

    record = tmp_path / "glue.jsonl"
    monkeypatch.setenv(prose.RECORD_ENV, str(record))
    prose.glue_number("third", 1 / 3)
    prose.glue_number("shown", 4.1132504, decimals=4)
    prose.glue_count("heads", 8.0)
    assert [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()] == [
        {"name": "third", "value": 1 / 3, "digits": 6, "via": "glue_number"},
        {"name": "shown", "value": 4.1132504, "digits": 5, "via": "glue_number"},
        {"name": "heads", "value": 8, "digits": None, "via": "glue_count"},
    ]


def test_nothing_is_recorded_without_the_environment_variable(tmp_path, monkeypatch):
    from attnbook.book import prose

    monkeypatch.delenv(prose.RECORD_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    prose.glue_number("third", 1 / 3)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", [7, 0.804, "a word"])
def test_glue_displays_what_myst_nbs_glue_displays(value, monkeypatch):
    import IPython.display
    import myst_nb.ext.glue

    from attnbook.book import prose

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *args, **kwargs: shown.append((args, kwargs)))
    monkeypatch.setattr(myst_nb.ext.glue, "ipy_display", lambda *args, **kwargs: shown.append((args, kwargs)))
    prose._glue("name", value)
    myst_nb.ext.glue.glue("name", value, display=False)
    assert shown[0] == shown[1]
    assert prose.GLUE_PREFIX == myst_nb.ext.glue.GLUE_PREFIX


def test_gluing_does_not_import_myst_nb_or_nbformat():
    """They cost a kernel about a second to import, in every run of every notebook."""
    import subprocess
    import sys

    code = ("import sys; from attnbook.book.prose import glue_count, glue_number; glue_number('x', 0.5); "
            "glue_count('n', 3); print(sorted({'myst_nb', 'nbformat', 'jsonschema'} & set(sys.modules)))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"
