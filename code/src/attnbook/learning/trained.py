"""The stored models: what ``make train`` runs for each, and what its record says of it.

Each run is :func:`attnbook.learning.models.scaffold.train` of the model, from seed 0, followed by the
measurements of its analysis that the chapters quote from the record: the reversal model's greedy accuracy,
cross-attention alignment and decoding speed; the Vision Transformer's position similarity by distance; the
induction model's heads, ablations and emergence, measured on a probe batch during training too; the
GPT's held-out bits per character and its n-gram baseline's; the GPT's draft (a smaller GPT, for speculative
decoding) its held-out bits per character.
``python -m tools.train NAME`` stores the result with :func:`attnbook.learning.store.save_trained`.

>>> sorted(STORED)
['digits_vit', 'gpt', 'gpt_draft', 'gpt_wide', 'induction', 'induction_gated', 'reversal']
"""

from __future__ import annotations

import numpy as np

from ..validation import check_positive_int
from .analysis.induction import (emergence_step, half_way_step, induction_metrics, probe_measurements, probe_tokens,
                                 sink_measurements)
from .analysis.seq2seq import cross_attention_alignment, time_decoding
from .analysis.seq2seq_decoder import exact_matches
from .analysis.vit import position_similarity, similarity_by_distance
from ..text.ngram import fit_ngram, ngram_bits_per_character
from .digits import load_digits_split
from .models import gpt, induction, induction_gated, scaffold, seq2seq, vit

__all__ = ["STORED", "gpt_run", "train"]


def _reversal(seed: int, progress: bool, n_steps: int | None) -> tuple:
    config = seq2seq.ReversalConfig()
    params, record = scaffold.train(seq2seq.MODEL, config, seed, progress, n_steps)
    batch = seq2seq.held_out_batch(config)
    alignment = cross_attention_alignment(params, batch, config)
    record["metrics"].update(accuracy=float(exact_matches(params, batch, config.n_heads).mean()),
                             alignment=alignment.agreement.tolist(), alignment_weight=alignment.weight.tolist(),
                             clearest_head={"layer": alignment.clearest[0], "head": alignment.clearest[1]},
                             final_loss=float(np.mean(record["losses"][-50:])))
    speeds = {"trained_64_sequences_8_tokens": time_decoding(params, config, 64, 8, 3, seed),
              "untrained_64_sequences_32_tokens": time_decoding(seq2seq.init_reversal(config, seed), config, 64, 32,
                                                                3, seed)}
    record["decoding_speed"] = {name: speed._asdict() for name, speed in speeds.items()}  # this machine's
    return params, record


def _vit(seed: int, progress: bool, n_steps: int | None) -> tuple:
    config = vit.ViTConfig()
    params, record = scaffold.train(vit.MODEL, config, seed, progress, n_steps)
    split = load_digits_split(config.test_fraction, config.split_seed)
    predicted = vit.predict(params, vit.to_tokens(split.test_images.astype(np.float64), config), config.n_heads)
    train_predicted = vit.predict(params, vit.to_tokens(split.train_images.astype(np.float64), config), config.n_heads)
    wrong = np.flatnonzero(predicted != split.test_labels)  # (n_errors,)
    record["metrics"].update(train_accuracy=float(np.mean(train_predicted == split.train_labels)),
                             n_test=int(split.test_labels.size), n_test_errors=int(wrong.size),
                             errors=[{"index": int(i), "label": int(split.test_labels[i]), "predicted": int(predicted[i])}
                                     for i in wrong])
    by_distance = similarity_by_distance(position_similarity(params), config.image_side // config.patch)
    record["metrics"].update(position_similarity_by_distance=[float(m) for m in by_distance],
                             final_loss=float(np.mean(record["losses"][-100:])))
    return params, record


def _induction(seed: int, progress: bool, n_steps: int | None) -> tuple:
    config = induction.InductionConfig()
    total = config.n_steps if n_steps is None else check_positive_int(n_steps, "n_steps")
    probe, checkpoints = probe_tokens(config), {"step": []}

    def checkpoint(step: int, params) -> None:  # the probe's measurements, every config.every steps
        checkpoints["step"].append(step)
        for key, value in probe_measurements(params, probe, config).items():
            checkpoints.setdefault(key, []).append(value)

    checkpoint(0, induction.MODEL.init(config, seed))
    params, record = scaffold.train(induction.MODEL, config, seed, progress, total, on_step=lambda step, p, _: (
        checkpoint(step, p) if step % config.every == 0 or step == total else None))
    metrics = record["metrics"] = induction_metrics(params, config)
    metrics["emergence_step"] = emergence_step(checkpoints["step"], checkpoints["second_half_loss"], config.vocab_size)
    for name in ("previous_token_score", "previous_token_score_first_half", "induction_score"):
        metrics[f"{name}_half_step"] = half_way_step(checkpoints["step"], checkpoints[name])
    record["checkpoints"] = checkpoints
    return params, record


def _induction_gated(seed: int, progress: bool, n_steps: int | None) -> tuple:
    config = induction.InductionConfig()  # the induction model's: data, seed, sizes and steps
    params, record = scaffold.train(induction_gated.MODEL, config, seed, progress, n_steps)
    probe = probe_tokens(config)
    forward = induction_gated.taped(params, probe[:, :-1], config)[0]
    record["metrics"] = sink_measurements(forward, probe, config.probe_half_length)
    return params, record


def gpt_run(config: gpt.GPTConfig, seed: int = 0, progress: bool = False, n_steps: int | None = None,
            every: int | None = None) -> tuple:
    """Train a GPT of ``config``; the record adds its n-gram baseline and, every ``every`` steps, a checkpoint.

    The checkpoints hold the step, the operations of training so far (:func:`~.models.gpt.training_step_flops`)
    and the held-out bits per character, for the curve of held-out bits against compute (``tools/gpt_scaling.py``).

    Parameters
    ----------
    config : GPTConfig
        The model and its training.
    seed, progress, n_steps
        As in :func:`train`.
    every : int, optional
        Steps between checkpoints; None: none.

    Returns
    -------
    tuple
        ``(params, record)``, the record with ``checkpoints`` and ``step_flops`` when ``every`` is given.

    Examples
    --------
    >>> gpt_run(gpt.GPTConfig(n_steps=100, warmup=100, learning_rate=1e-3))
    Traceback (most recent call last):
    ...
    ValueError: warmup = 100 must be smaller than the schedule's 100 steps
    """
    total = config.n_steps if n_steps is None else check_positive_int(n_steps, "n_steps")
    checkpoints = {"step": [], "flops": [], "held_out_bits_per_character": []}
    held = gpt.splits()[1]

    def checkpoint(step: int, params) -> None:  # held-out bits per character against the compute spent so far
        checkpoints["step"].append(step)
        checkpoints["flops"].append(step * gpt.training_step_flops(config))
        checkpoints["held_out_bits_per_character"].append(gpt.bits_per_character(params, held, config))

    on_step = None if every is None else (lambda step, p, _: checkpoint(step, p) if step % every == 0 else None)
    params, record = scaffold.train(gpt.MODEL, config, seed, progress, total, on_step=on_step)
    if every is not None:
        record["checkpoints"] = checkpoints
        record["step_flops"] = gpt.training_step_flops(config)
    train, held_out = gpt.splits()
    baseline = fit_ngram(train, gpt.NGRAM_ORDER, len(gpt.vocabulary()), gpt.NGRAM_K)
    record["metrics"].update(final_loss=float(np.mean(record["losses"][-100:])),
                             ngram_held_out_bits_per_character=ngram_bits_per_character(baseline, held_out),
                             ngram={"order": gpt.NGRAM_ORDER, "k": gpt.NGRAM_K})
    record["split"] = {"train_characters": len(train), "held_out_characters": len(held_out),
                       "held_out": "the last play, Twelfth Night"}
    return params, record


def _gpt(seed: int, progress: bool, n_steps: int | None) -> tuple:
    return gpt_run(gpt.GPTConfig(), seed, progress, n_steps)


def _gpt_wide(seed: int, progress: bool, n_steps: int | None) -> tuple:
    return gpt_run(gpt.WIDE, seed, progress, n_steps, every=1000)


def _gpt_draft(seed: int, progress: bool, n_steps: int | None) -> tuple:
    params, record = scaffold.train(gpt.DRAFT, gpt.DRAFT_CONFIG, seed, progress, n_steps)
    record["metrics"].update(final_loss=float(np.mean(record["losses"][-100:])))
    return params, record


# name -> its run: (seed, progress, n_steps) -> (params, record)
STORED = {"reversal": _reversal, "digits_vit": _vit, "induction": _induction, "induction_gated": _induction_gated,
          "gpt": _gpt, "gpt_wide": _gpt_wide, "gpt_draft": _gpt_draft}


def train(name: str, seed: int = 0, progress: bool = True, n_steps: int | None = None) -> tuple:
    """Train the stored model ``name`` from ``seed``; returns ``(params, record)`` for ``save_trained``.

    .. math:: \\theta^\\ast = \\operatorname{fit}(\\theta_0, \\nabla L, \\text{batches}), \\qquad
              \\text{record} = \\text{metrics}(\\theta^\\ast)

    Parameters
    ----------
    name : str
        One of :data:`STORED`: ``"reversal"``, ``"digits_vit"``, ``"induction"``, ``"induction_gated"``,
        ``"gpt"``, ``"gpt_wide"`` or ``"gpt_draft"``.
    seed : int, optional
        Seeds the parameters and the batches; default 0, the stored models'.
    progress : bool, optional
        Show the progress bar.
    n_steps : int, optional
        Stop after this many steps (a shortened run); default the configuration's.

    Returns
    -------
    tuple
        ``(params, record)``: the parameters and a JSON-serialisable record (``config``, ``seed``, ``n_steps``,
        ``losses``, ``metrics``, ``seconds`` and the model's own fields).

    Examples
    --------
    >>> params, record = train("reversal", progress=False, n_steps=2)
    >>> len(record["losses"]), record["config"]["d_model"], "decoding_speed" in record
    (2, 32, True)
    >>> train("gpt5")
    Traceback (most recent call last):
    ...
    ValueError: no stored model 'gpt5'; the stored models are ['digits_vit', 'gpt', 'gpt_draft', 'gpt_wide', 'induction', 'induction_gated', 'reversal']
    """
    if name not in STORED:
        raise ValueError(f"no stored model {name!r}; the stored models are {sorted(STORED)}")
    return STORED[name](seed, progress, n_steps)
