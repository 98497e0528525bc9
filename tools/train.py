"""Retrain the book's trained models from their seeds and store them in the package: ``make train``.

Usage: python -m tools.train [NAME ...]   (no name: every model in ``MODELS``)

``attnbook.learning.trained.train(name, seed, progress) -> (params, record)`` runs each: the parameters
after the run and a JSON-serialisable record (configuration, seed, loss curve, final metrics, training seconds).
They are written with :func:`attnbook.learning.store.save_trained` into ``attnbook/data/trained``,
where the chapters load them. BLAS runs on one thread and, on x86_64, with OpenBLAS's Haswell (AVX2)
kernels (both set before numpy loads): one thread fixes the order of summation whatever the number of
cores, and one kernel fixes the rounding whatever the CPU (OpenBLAS otherwise picks its kernels for the
CPU it finds, and its AVX-512 kernels round differently: on such a machine the same run gave other weights).
So a retrained model computes the same weights on any x86_64 machine with AVX2, and leaves the stored bytes
alone (``code/src/attnbook/data/trained/RECORD.md`` says what was measured).
"""

from __future__ import annotations

import os
import platform

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: one thread, one order of summation
os.environ.setdefault("OMP_NUM_THREADS", "1")
if platform.machine().lower() in ("x86_64", "amd64"):
    os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")  # before numpy: one kernel, one rounding

import argparse  # noqa: E402
import sys  # noqa: E402

# name -> the model module (inside attnbook.learning.models); attnbook.learning.trained runs each
MODELS: dict[str, str] = {
    "reversal": "seq2seq",  # an encoder-decoder Transformer that reverses strings (issue #14)
    "digits_vit": "vit",  # a tiny Vision Transformer on the 8 x 8 handwritten digits (issue #14)
    "induction": "induction",  # a two-layer decoder-only Transformer that forms an induction head (issue #14)
    "gpt": "gpt",  # a character-level GPT of today's shape on the Shakespeare corpus, in float32 (issue 27)
}


def main(argv=None) -> int:
    from attnbook.learning.store import save_trained
    from attnbook.learning.trained import train

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"models to retrain (default: all of {sorted(MODELS)})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--directory", default=None, help="write here instead of the package's data/trained")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(MODELS))
    if unknown:
        parser.error(f"unknown model(s) {unknown}; the models are {sorted(MODELS)}")
    for name in args.names or sorted(MODELS):
        params, record = train(name, seed=args.seed, progress=sys.stderr.isatty())
        save_trained(name, params, record, directory=args.directory)
        print(f"{name}: {record.get('metrics', {})} in {record.get('seconds', float('nan')):.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
