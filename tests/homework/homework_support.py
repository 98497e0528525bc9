"""What the homework tests share: the instructor sources and the sample submissions."""

from __future__ import annotations

import os
from pathlib import Path

import homework  # scripts/ is on sys.path (tests/conftest.py)

SOURCES = homework.homework_sources()
NAMES = [path.stem for path in SOURCES]
HERE = Path(__file__).resolve().parent
SAMPLES = HERE / "submissions" / "hw_scaled_dot_product_attention"
SLOW = os.environ.get("ATTNBOOK_SLOW") == "1"
