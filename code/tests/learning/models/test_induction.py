"""attnbook.learning.models.induction: the gradient is exact, the stored run is reproducible, and the stored model
has the two heads of an induction circuit (Olsson et al., 2022), which the chapter shows."""

import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from attnbook.learning.analysis.induction import (ablate_head, emergence_step, half_way_step, head_scores,
                                                  next_token_losses, probe_tokens)
from attnbook.learning.models.induction import (
    induction_batch,
    induction_forward,
    induction_loss_and_gradients,
    InductionConfig,
    InductionParameters,
    init_induction_model,
    load_induction,
)
from attnbook.learning.gradcheck import gradient_errors
from attnbook.learning.analysis.induction import induction_metrics
from attnbook.learning.models.induction import MODEL
from attnbook.learning.models.scaffold import loss_and_gradients
from attnbook.learning.optim import tree_leaves

SRC = Path(__file__).resolve().parents[3] / "src"


@pytest.fixture(scope="module")
def stored():
    return load_induction()


def test_the_gradient_of_every_weight_matches_central_differences_in_float64():
    config = InductionConfig(vocab_size=5, d_model=4, n_heads=2, d_ff=6)
    params = init_induction_model(config, seed=3)
    tokens = np.array([[1, 4, 2, 0, 1, 4, 2], [3, 3, 0, 2, 3, 3, 0]])  # (batch, n)
    _, grads = induction_loss_and_gradients(params, tokens, config)
    errors = gradient_errors(lambda p: loss_and_gradients(MODEL, p, tokens, config)[0], params, grads)
    assert len(errors) == len(tree_leaves(params)) == 2 + 2 * 16  # embedding, output table, two layers
    assert max(errors.values()) <= 1e-6, max(errors, key=errors.get)  # measured: 2.2e-9 at most (layers.0 b_k)


def test_a_shortened_retraining_reproduces_the_stored_loss_curve(stored):
    # The run is computed in a subprocess with one BLAS thread, as `make train` (tools.train) computed
    # the stored curve: with several threads OpenBLAS may sum in another order, and the rounding
    # differences grow over the steps of training. On one thread the numbers agree to rtol 1e-6 (in
    # practice exactly) on any machine with the same numpy.
    _, config, record = stored
    steps = 200
    code = textwrap.dedent(f"""
        import json
        from attnbook.learning.models.induction import MODEL, InductionConfig
        from attnbook.learning.models.scaffold import train
        config = InductionConfig(**json.loads({json.dumps(json.dumps(record["config"]))}))
        _, record = train(MODEL, config, seed={record["seed"]}, progress=False, n_steps={steps})
        print(json.dumps(record["losses"]))
    """)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(SRC)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    np.testing.assert_allclose(json.loads(result.stdout), record["losses"][:steps], rtol=1e-6)


def test_the_stored_weights_reproduce_the_recorded_metrics(stored):
    params, config, record = stored
    recomputed = induction_metrics(params, config)
    for key, value in recomputed.items():
        stored_value = record["metrics"][key]
        if isinstance(value, dict):  # by half length; the JSON file sorts the keys
            value, stored_value = list(value.values()), [stored_value[length] for length in value]
        np.testing.assert_allclose(value, stored_value, rtol=1e-12, atol=1e-12)
    checkpoints = record["checkpoints"]
    assert checkpoints["step"][-1] == record["n_steps"] == len(record["losses"])
    assert checkpoints["second_half_loss"][-1] == pytest.approx(record["metrics"]["second_half_loss"], rel=1e-12)


def test_layer_one_has_a_previous_token_head_and_layer_two_an_induction_head(stored):
    # Measured on the stored model: 0.61 on t - 1 in the second half (0.71 over the first half, where
    # the induction head reads its keys), 0.82 on t - h + 1. A uniform causal head over the ~17
    # keys of a second-half query would give about 0.06, so 0.5 is a clear majority and leaves room.
    params, config, record = stored
    tokens = probe_tokens(config)  # (probe_size, 2h)
    attention = induction_forward(params, tokens[:, :-1], config).attention  # (2, batch, heads, n, n)
    scores = head_scores(attention, config.probe_half_length)
    assert scores.previous_token[0].max() > 0.5 and scores.previous_token_first_half[0].max() > 0.5
    assert scores.induction[1].max() > 0.7
    # ... and each head is specific to its layer: the other layer does not do it
    assert scores.previous_token[1].max() < 0.1 and scores.induction[0].max() < 0.1


def test_the_copied_half_is_predicted_and_the_random_half_is_not(stored):
    params, config, record = stored
    tokens = probe_tokens(config)  # (probe_size, 2h)
    h = config.probe_half_length
    losses = next_token_losses(params, tokens, config).mean(axis=0)  # (2h - 1,)
    first, second = losses[:h - 1].mean(), losses[h:].mean()
    assert first > 0.95 * math.log(config.vocab_size)  # nothing to learn there: about ln V
    assert second < 0.1 < 0.03 * first  # the copyable tokens: near 0


def test_silencing_either_head_destroys_the_copying(stored):
    params, config, record = stored
    tokens = probe_tokens(config)
    h = config.probe_half_length

    def second_half(p):
        return next_token_losses(p, tokens, config)[:, h:].mean()

    intact = second_half(params)
    metrics = record["metrics"]
    without_induction = second_half(ablate_head(params, 1, metrics["induction_head"], config))
    without_previous = second_half(ablate_head(params, 0, metrics["previous_token_head"], config))
    assert without_induction > 30 * intact and without_induction > 0.5 * math.log(config.vocab_size)
    assert without_previous > 30 * intact  # the induction head needs the previous-token head's output


def test_the_emergence_step_is_where_the_loss_drops_and_the_heads_form(stored):
    _, config, record = stored
    checkpoints, metrics = record["checkpoints"], record["metrics"]
    steps = np.array(checkpoints["step"])  # (n_checkpoints,)
    step = emergence_step(steps, checkpoints["second_half_loss"], config.vocab_size)
    assert step == metrics["emergence_step"] and 0 < step < record["n_steps"]
    before, after = steps < step - 200, steps > step + 300  # (n_checkpoints,) each
    induction = np.array(checkpoints["induction_score"])  # (n_checkpoints,)
    assert induction[before].max() < 0.15 < 0.6 < induction[after].min()
    # the induction head and the previous-token pattern it reads (first half) form with the loss drop
    for name in ("induction_score_half_step", "previous_token_score_first_half_half_step"):
        assert abs(metrics[name] - step) <= 150, (name, metrics[name], step)
    assert metrics["induction_score_half_step"] == half_way_step(steps, induction)
    first_half = np.array(checkpoints["first_half_loss"])  # (n_checkpoints,)
    assert np.all(np.abs(first_half[steps >= 200] - math.log(config.vocab_size)) < 0.35)


def test_loading_and_one_forward_pass_need_no_training_libraries():
    # how fast they are is not asserted here (a timed test fails on a busy machine); the chapter's load is timed
    # by `make build-times`
    code = textwrap.dedent("""
        import sys
        from attnbook.learning.models.induction import induction_forward, load_induction
        from attnbook.learning.analysis.induction import probe_tokens
        params, config, record = load_induction()
        induction_forward(params, probe_tokens(config)[:, :-1], config)
        print([name for name in ("tqdm", "torch", "sklearn") if name in sys.modules])
    """)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(SRC)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_inputs_are_checked_once_with_errors_that_name_them():
    config = InductionConfig(vocab_size=5, d_model=4, d_ff=8)
    params = init_induction_model(config)
    with pytest.raises(ValueError, match="tokens contains the id 7"):
        induction_forward(params, np.array([[1, 7]]), config)
    with pytest.raises(ValueError, match="params.embedding has shape"):
        induction_forward(params._replace(embedding=np.zeros((6, 4))), np.array([[1]]), config)
    with pytest.raises(ValueError, match="config.min_half_length"):
        induction_batch(np.random.default_rng(0), config._replace(min_half_length=9, max_half_length=8))
    with pytest.raises(TypeError, match="config must be an InductionConfig"):
        init_induction_model({"vocab_size": 5})
    with pytest.raises(ValueError, match="head must be an integer"):
        ablate_head(params, 1, 1, config)
    assert isinstance(params, InductionParameters)
