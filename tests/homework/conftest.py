"""Shared setup of the homework tests: the `slow` marker, and the sample submissions kept out of nbval."""

from __future__ import annotations

import os

import pytest

SLOW = os.environ.get("ATTNBOOK_SLOW") == "1"

# The sample submissions are data for test_grading.py, not notebooks to check: `make test` runs pytest
# with --nbval over tests/, which would otherwise execute them (one loops forever, two are not notebooks).
collect_ignore_glob = ["submissions/*"]


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a measurement, run only with ATTNBOOK_SLOW=1")


def pytest_collection_modifyitems(config, items):
    if SLOW:
        return
    skip = pytest.mark.skip(reason="a slow measurement: run with ATTNBOOK_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
