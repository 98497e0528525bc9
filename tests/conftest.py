"""Shared setup of the book-level tests: matplotlib draws without a display."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
