"""Shared setup of the book-level tests: matplotlib draws without a display; the built site is served once."""

from __future__ import annotations

import matplotlib
import pytest

from tools.built_site import HTML, serve_site

matplotlib.use("Agg")


@pytest.fixture(scope="session")
def site_url():
    """The built site (``make book``), served on 127.0.0.1 for the whole session."""
    if not (HTML / "index.html").exists():
        pytest.fail("the site is not built: run `make book` first")
    with serve_site(HTML) as url:
        yield url
