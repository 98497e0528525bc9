"""The book's small scaling curve: held-out bits per character against training compute, GPTs of four sizes.

Usage: python -m tools.gpt_scaling [--steps N] [--runs NAME,...] [--out PATH]   (``make scaling``)

Three GPTs smaller than the wide one (``attnbook.learning.models.gpt.WIDE``), each trained with the wide one's recipe
(a warm-up and a cosine decay of the rate to a tenth of its peak, weight decay, the same batches) for ``--steps``
steps, their held-out bits per character measured every 500 steps against the operations spent so far
(``gpt.training_step_flops``). The fourth size is the wide GPT itself, whose record
(``data/trained/gpt_wide.json``, ``make train MODELS=gpt_wide``) holds the same checkpoints; and the wide GPT is
trained once more with its schedule stretched to three times the steps (``wide_long``), to show what more passes
over the same plays do. That longer run also picks the wide GPT's length without reading the held-out play
(``wide_validation``): trained on the training split without its validation slice
(:func:`attnbook.learning.characters.validation_splits`, where the chapter chooses Kneser–Ney's order) and
scored on that slice. The whole run takes about three hours on two cores. The result, a JSON
record with each size's configuration, parameters, checkpoints and seconds, is written to
``code/src/attnbook/data/trained/gpt_scaling.json``, where the GPT chapter reads it. Each size trains in its own process
with the BLAS environment of ``tools.train`` (one BLAS thread, the GPT's OpenBLAS kernels), so its numbers are the
same on every machine with those kernels; the seconds are this machine's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from tools import ROOT
from tools.train import blas_environment

OUT = ROOT / "code" / "src" / "attnbook" / "data" / "trained" / "gpt_scaling.json"
# name -> (d_model, n_layers, n_heads, n_kv_heads, d_ff): the wide GPT's shape, narrowed and made shallower
SIZES = {"d32_1": (32, 1, 2, 1, 88), "d64_2": (64, 2, 4, 2, 176), "d96_3": (96, 3, 4, 2, 264)}
EVERY = 500
# the wide GPT trained three times as long (its recipe's schedule stretched over LONG steps): what more passes over
# the same seven plays do to the held-out score; checkpoints every LONG_EVERY steps (about an hour on two cores)
LONG, LONG_EVERY = 18_000, 1000
# the long run once more, fitted without the validation slice and scored on it: the length the slice would choose
VALIDATION = "wide_validation"
RUNS = (*SIZES, "wide_long", VALIDATION)


def _run_here(name: str, steps: int) -> dict:
    import numpy as np

    from attnbook.learning.models import gpt
    from attnbook.learning.optim import tree_leaves
    from attnbook.learning.trained import gpt_run

    if name == VALIDATION:
        # gpt_run's batches come from gpt.splits()[0] and its checkpoints score gpt.splits()[1]: in this process
        # (one run, then exit) they become the validation slice's two sides
        from attnbook.learning.characters import validation_splits

        gpt.splits = validation_splits
        config, every = gpt.WIDE._replace(n_steps=LONG), LONG_EVERY
    elif name == "wide_long":
        config, every = gpt.WIDE._replace(n_steps=LONG), LONG_EVERY
    else:
        d, layers, heads, kv_heads, d_ff = SIZES[name]
        config = gpt.WIDE._replace(d_model=d, n_layers=layers, n_heads=heads, n_kv_heads=kv_heads, d_ff=d_ff,
                                   n_steps=steps)
        every = EVERY
    params, record = gpt_run(config, seed=0, progress=False, every=every)
    record["parameters"] = int(sum(np.size(leaf) for leaf in tree_leaves(params)))
    del record["losses"]
    if name == VALIDATION:  # what gpt_run calls held out is the validation slice here; its n-gram is not needed
        checkpoints = record["checkpoints"]
        checkpoints["validation_bits_per_character"] = checkpoints.pop("held_out_bits_per_character")
        record["metrics"] = {"validation_bits_per_character": record["metrics"]["held_out_bits_per_character"]}
        record["split"] = {"fitted_characters": record["split"]["train_characters"],
                           "validation_characters": record["split"]["held_out_characters"],
                           "validation": "the training split's last characters, as many as the held-out play's"}
    return record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6000, help="training steps of each smaller size (the wide GPT's)")
    parser.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated, from {','.join(RUNS)}")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--here", default=None, help=argparse.SUPPRESS)  # the child process: train this size now
    args = parser.parse_args(argv)
    if args.here is not None:
        json.dump(_run_here(args.here, args.steps), sys.stdout)
        return 0
    runs = args.runs.split(",")
    if unknown := sorted(set(runs) - set(RUNS)):
        parser.error(f"unknown run(s) {unknown}; choose from {RUNS}")
    out = Path(args.out)
    record = {"every": EVERY, "steps": args.steps, "sizes": {}} | (json.loads(out.read_text()) if out.exists() else {})
    for name in runs:
        command = [sys.executable, "-m", "tools.gpt_scaling", "--here", name, "--steps", str(args.steps)]
        done = subprocess.run(command, check=True, env=blas_environment("gpt"), cwd=ROOT, capture_output=True,
                              text=True)
        run = json.loads(done.stdout)
        if name == VALIDATION:
            record["validation"] = run
        else:
            record["sizes"][name] = run
        scores = ", ".join(f"{key} {value:.3f}" for key, value in run["metrics"].items() if key.endswith("character"))
        print(f"{name}: {run['parameters']} parameters, {scores}, in {run['seconds']} s")
    out.write_text(json.dumps(record | {"every": EVERY, "steps": args.steps}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
