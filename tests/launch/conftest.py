"""The launch tests (Binder, Colab) import launch_support from their folder."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
