"""Shared test setup: a headless matplotlib backend and a reproducible hypothesis profile."""

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported anywhere: no windows, no display needed

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# derandomize: the same examples on every run and machine; deadline=None: timing never fails a test.
settings.register_profile("attnbook", deadline=None, derandomize=True, database=None)
settings.load_profile("attnbook")


@pytest.fixture(autouse=True)
def _close_figures():
    """Close every figure a test opened, so figures never pile up across tests."""
    yield
    plt.close("all")
