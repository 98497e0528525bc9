"""What the tests of the stored models share: a shortened retraining, run as `make train` runs it."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src"


@pytest.fixture
def retrained_losses():
    """The function :func:`run_shortened` (the test modules are imported by importlib: no helper imports)."""
    return run_shortened


def run_shortened(module: str, config_class: str, record: dict, steps: int) -> list:
    """The first ``steps`` losses of ``attnbook.learning.models.<module>.MODEL`` retrained from its record's seed.

    The run is computed in a subprocess with one BLAS thread, as `make train` (tools.train) computed the stored
    curve: with several threads OpenBLAS may sum in another order, and the rounding differences grow over the
    steps of training. On one thread the numbers agree to rtol 1e-6 (in practice exactly) on any machine with
    the same numpy.
    """
    code = textwrap.dedent(f"""
        import json
        from attnbook.learning.models.{module} import MODEL
        from attnbook.learning.models.induction import {config_class}
        from attnbook.learning.models.scaffold import train
        config = {config_class}(**json.loads({json.dumps(json.dumps(record["config"]))}))
        _, record = train(MODEL, config, seed={record["seed"]}, progress=False, n_steps={steps})
        print(json.dumps(record["losses"]))
    """)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(SRC)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout)
