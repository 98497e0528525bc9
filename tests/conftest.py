"""Shared fixtures for the book-level tests (pairing, site, browser)."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))  # execute_notebooks, for the pairing tests
sys.path.insert(0, str(ROOT / "tests" / "site"))  # site_support, for the site tests
