"""Retrain the book's trained models from their seeds and store them in the package: ``make train``.

Usage: python -m tools.train [NAME ...]   (no name: every model in ``MODELS``)

``attnbook.learning.trained.train(name, seed, progress) -> (params, record)`` runs each: the parameters
after the run and a JSON-serialisable record (configuration, seed, loss curve, final metrics, training seconds).
They are written with :func:`attnbook.learning.store.save_trained` into ``attnbook/data/trained``,
where the chapters load them.

Each model trains in its own process, whose BLAS is fixed before numpy loads: one thread (one order of
summation whatever the number of cores) and, on x86_64, the OpenBLAS kernels its stored weights were made
with (``KERNELS``; OpenBLAS otherwise picks them for the CPU it finds, and its AVX2 and AVX-512 kernels round
differently, so the same run gave other weights on another machine). So a retrained model computes the
stored weights on any x86_64 machine that has the kernel's instructions, and leaves the stored bytes alone.
What was measured is ``code/src/attnbook/data/trained/RECORD.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
from pathlib import Path

from tools import ROOT

# name -> the model module (inside attnbook.learning.models); attnbook.learning.trained runs each
MODELS: dict[str, str] = {
    "reversal": "seq2seq",  # an encoder-decoder Transformer that reverses strings (issue #14)
    "digits_vit": "vit",  # a tiny Vision Transformer on the 8 x 8 handwritten digits (issue #14)
    "induction": "induction",  # a two-layer decoder-only Transformer that forms an induction head (issue #14)
    "induction_gated": "induction_gated",  # the same with a sigmoid gate on each head's output (issue 43, item 2)
    "gpt": "gpt",  # a character-level GPT of today's shape on the Shakespeare corpus, in float32 (issue 27)
    "gpt_wide": "gpt",  # the same, wider, deeper and trained longer: the GPT that is to beat Kneser-Ney (issue 40)
    "gpt_draft": "gpt",  # the GPT's draft for speculative decoding: d_model 32, one block (issue 43)
}

# name -> the OpenBLAS kernels (OPENBLAS_CORETYPE) its stored weights were made with, and the CPU flag they need
KERNELS: dict[str, tuple[str, str]] = {
    "reversal": ("Haswell", "avx2"),
    "digits_vit": ("Haswell", "avx2"),
    "induction": ("Haswell", "avx2"),
    "induction_gated": ("Haswell", "avx2"),  # the convention of the induction model it varies
    "gpt": ("SkylakeX", "avx512f"),
    "gpt_wide": ("SkylakeX", "avx512f"),
    "gpt_draft": ("SkylakeX", "avx512f"),
}


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return set(next((line.split(":", 1)[1] for line in text.splitlines() if line.startswith("flags")), "").split())


def blas_environment(name: str, environ=None) -> dict[str, str]:
    """The environment of ``name``'s training process: one BLAS thread and its stored kernels where the CPU has them.

    A variable already set is kept. On another architecture, or a CPU without the kernel's instructions,
    OpenBLAS chooses, and the weights may differ from the stored ones (a warning says so).
    """
    env = dict(os.environ if environ is None else environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    kernel, flag = KERNELS[name]
    if platform.machine().lower() in ("x86_64", "amd64") and flag in _cpu_flags():
        env.setdefault("OPENBLAS_CORETYPE", kernel)
    elif "OPENBLAS_CORETYPE" not in env:
        print(f"warning: this CPU has no {flag}: {name} trains with the BLAS kernels OpenBLAS picks, and its "
              f"weights may differ from the stored ones (made with {kernel})", file=sys.stderr)
    return env


def _train_here(name: str, seed: int, directory) -> None:
    from attnbook.learning.store import save_trained
    from attnbook.learning.trained import train

    params, record = train(name, seed=seed, progress=sys.stderr.isatty())
    save_trained(name, params, record, directory=directory)
    print(f"{name}: {record.get('metrics', {})} in {record.get('seconds', float('nan')):.1f} s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"models to retrain (default: all of {sorted(MODELS)})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--directory", default=None, help="write here instead of the package's data/trained")
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)  # the child process: train now
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(MODELS))
    if unknown:
        parser.error(f"unknown model(s) {unknown}; the models are {sorted(MODELS)}")
    for name in args.names or sorted(MODELS):
        if args.here:
            _train_here(name, args.seed, args.directory)
            continue
        command = [sys.executable, "-m", "tools.train", name, "--here", "--seed", str(args.seed)]
        if args.directory is not None:
            command += ["--directory", str(Path(args.directory).resolve())]
        subprocess.run(command, check=True, env=blas_environment(name), cwd=ROOT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
