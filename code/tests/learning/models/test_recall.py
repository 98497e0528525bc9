"""Tests of attnbook.learning.models.recall and attnbook.learning.optim: the recall data, the model's gradients against finite differences,
the optimisers, determinism, that training learns the task, and the chapter's ablation in outline."""

import math
import re

import numpy as np
import pytest

from attnbook.learning.optim import adam_step, init_adam, sgd_step
from attnbook.learning.analysis.recall import steps_to_loss, train_recall
from attnbook.learning.models.recall import (
    init_recall_model,
    recall_accuracy,
    recall_forward,
    recall_loss_and_gradients,
    RecallParameters,
)
from attnbook.learning.tasks import associative_recall_batch
from attnbook.measure.probes import numerical_jacobian

# The chapter's setting: 8 pairs, 16 key and 16 value symbols, d_k = d_v = 64, Adam at 0.01.
CHAPTER = dict(n_pairs=8, n_keys=16, n_values=16, d_k=64, d_v=64, batch_size=32, learning_rate=0.01)


# --- data -----------------------------------------------------------------------------------------


def test_batch_shapes_and_one_hot_tokens():
    b = associative_recall_batch(5, n_pairs=3, n_keys=6, n_values=4, n_queries=2, seed=1)
    assert b.context.shape == (5, 3, 10) and b.queries.shape == (5, 2, 10)
    assert b.targets.shape == b.answer_positions.shape == (5, 2)
    np.testing.assert_array_equal(b.context[..., :6].sum(-1), 1)  # one key per pair token
    np.testing.assert_array_equal(b.context[..., 6:].sum(-1), 1)  # one value per pair token
    np.testing.assert_array_equal(b.queries[..., :6].sum(-1), 1)  # a query carries a key ...
    np.testing.assert_array_equal(b.queries[..., 6:], 0)  # ... and no value


def test_keys_are_distinct_and_targets_are_the_paired_values():
    b = associative_recall_batch(200, n_pairs=5, n_keys=7, n_values=3, n_queries=5, seed=2)
    assert all(len(set(row)) == 5 for row in b.keys)
    rows = np.arange(200)[:, None]
    np.testing.assert_array_equal(b.values[rows, b.answer_positions], b.targets)
    np.testing.assert_array_equal(b.queries[..., :7].argmax(-1), b.keys[rows, b.answer_positions])
    assert all(len(set(row)) == 5 for row in b.answer_positions)  # every pair asked once


def test_answer_position_is_spread_over_the_sequence():
    # No fixed position holds the answer: the task cannot be solved without looking at the keys.
    b = associative_recall_batch(4000, n_pairs=4, seed=3)
    counts = np.bincount(b.answer_positions.ravel(), minlength=4)
    assert np.all(np.abs(counts / 4000 - 0.25) < 0.03)


def test_same_seed_same_batch_and_generator_advances():
    a, b = associative_recall_batch(3, seed=4), associative_recall_batch(3, seed=4)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    rng = np.random.default_rng(4)
    first, second = associative_recall_batch(3, seed=rng), associative_recall_batch(3, seed=rng)
    assert not np.array_equal(first.keys, second.keys)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(n_sequences=0), ValueError, "n_sequences must be at least 1, got 0"),
        (dict(n_sequences=2, n_pairs=5, n_keys=4), ValueError, "n_pairs = 5 needs at least 5 distinct keys"),
        (dict(n_sequences=2, n_pairs=2, n_queries=3), ValueError, "n_queries = 3 is more than n_pairs = 2"),
        (dict(n_sequences=2, seed=-1), ValueError, "seed must be a non-negative integer or a numpy Generator"),
        (dict(n_sequences=2.0), TypeError, "n_sequences must be an integer, got 2.0"),
    ],
)
def test_batch_rejects_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        associative_recall_batch(**kwargs)


# --- model ----------------------------------------------------------------------------------------


def small_problem(n_heads=1):
    params = init_recall_model(n_keys=5, n_values=3, d_k=4, d_v=4, seed=0, init_std=0.7)
    batch = associative_recall_batch(3, n_pairs=3, n_keys=5, n_values=3, n_queries=2, seed=1)
    return params, batch


def numerical_gradient(loss, x, eps=1e-6):
    """Central differences of the scalar ``loss`` at ``x`` (the package's finite-difference Jacobian)."""
    return numerical_jacobian(loss, x, eps=eps)  # (same shape as x)


@pytest.mark.parametrize("n_heads", [1, 2])
@pytest.mark.parametrize("scaled", [True, False])
def test_model_gradients_match_finite_differences(n_heads, scaled):
    params, batch = small_problem()
    result = recall_loss_and_gradients(params, batch, n_heads, scaled)
    for index, name in enumerate(RecallParameters._fields):
        def loss(w, index=index):
            changed = params._replace(**{RecallParameters._fields[index]: w})
            return recall_loss_and_gradients(changed, batch, n_heads, scaled).loss

        np.testing.assert_allclose(result.grads[index], numerical_gradient(loss, params[index]),
                                   rtol=1e-5, atol=1e-8, err_msg=name)


def test_forward_shapes_and_weights_are_distributions():
    params = init_recall_model(6, 4, d_k=8, d_v=8, seed=3)
    batch = associative_recall_batch(5, n_pairs=4, n_keys=6, n_values=4, n_queries=3, seed=3)
    fwd = recall_forward(params, batch, n_heads=2)
    assert fwd.logits.shape == (5, 3, 4) and fwd.weights.shape == (5, 2, 3, 4)
    np.testing.assert_allclose(fwd.weights.sum(-1), 1.0)


def test_score_gradients_rows_sum_to_zero():
    params, batch = small_problem()
    ds = recall_loss_and_gradients(params, batch).score_grads
    assert ds.shape == (3, 1, 2, 3)
    np.testing.assert_allclose(ds.sum(-1), 0.0, atol=1e-15)


def test_unscaled_model_saturates_at_initialisation():
    # With init_std = 1 a raw score has variance 2 d_k; dividing by sqrt(d_k) leaves variance 2.
    params = init_recall_model(16, 16, d_k=64, d_v=64, seed=0)
    batch = associative_recall_batch(500, n_pairs=8, n_keys=16, n_values=16, seed=1)
    scaled = recall_loss_and_gradients(params, batch, scaled=True)
    unscaled = recall_loss_and_gradients(params, batch, scaled=False)
    assert unscaled.forward.weights.max(-1).mean() > 0.8 > 0.6 > scaled.forward.weights.max(-1).mean()
    assert np.abs(unscaled.score_grads).sum(-1).mean() < np.abs(scaled.score_grads).sum(-1).mean() / 2


@pytest.mark.parametrize(
    "change, error, message",
    [
        (dict(n_heads=3), ValueError, "d_k = 4 is not divisible by n_heads = 3"),
        (dict(params="weights"), TypeError, "params must be RecallParameters"),
        (dict(batch=(1, 2)), TypeError, "batch must be a RecallBatch"),
        (dict(scaled=1), TypeError, "scaled must be True or False, got 1"),
    ],
)
def test_model_rejects_bad_arguments(change, error, message):
    params, batch = small_problem()
    args = dict(params=params, batch=batch, n_heads=1, scaled=True)
    args.update(change)
    with pytest.raises(error, match=re.escape(message)):
        recall_forward(**args)


def test_model_rejects_parameters_of_the_wrong_width():
    params, batch = small_problem()
    wide = params._replace(w_q=np.ones((9, 4)))
    with pytest.raises(ValueError, match=re.escape("params.w_q has shape (9, 4) but the tokens have d_in = 8")):
        recall_forward(wide, batch)


def test_init_is_seeded_and_checks_its_arguments():
    a, b = init_recall_model(seed=5), init_recall_model(seed=5)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    with pytest.raises(ValueError, match="init_std must be a positive number"):
        init_recall_model(init_std=0.0)


# --- optimisers -----------------------------------------------------------------------------------


def test_sgd_moves_against_the_gradient():
    p = RecallParameters(*[np.ones(2)] * 4)
    g = RecallParameters(*[np.array([1.0, -2.0])] * 4)
    np.testing.assert_allclose(sgd_step(p, g, 0.1).w_k, [0.9, 1.2])


def test_adam_first_step_has_the_size_of_the_learning_rate_whatever_the_gradient():
    p = RecallParameters(*[np.zeros(3)] * 4)
    for size in (1e-4, 1.0, 1e4):
        g = RecallParameters(*[np.array([size, -size, 0.0])] * 4)
        new, state = adam_step(p, g, init_adam(p), learning_rate=0.05)
        np.testing.assert_allclose(new.w_v, [-0.05, 0.05, 0.0], rtol=1e-3)
        assert state.step == 1


def test_optimisers_reject_mismatched_gradients_and_bad_rates():
    p = RecallParameters(*[np.zeros(2)] * 4)
    with pytest.raises(ValueError, match=re.escape("grads[0] has shape (3,) but params[0] has shape (2,)")):
        sgd_step(p, RecallParameters(np.zeros(3), *[np.zeros(2)] * 3))
    with pytest.raises(ValueError, match="learning_rate must be a positive finite number"):
        adam_step(p, p, init_adam(p), learning_rate=-1.0)
    with pytest.raises(TypeError, match="state must be the AdamState"):
        adam_step(p, p, None)


# --- training -------------------------------------------------------------------------------------


def test_training_is_deterministic():
    a = train_recall(n_steps=20, seed=3)
    b = train_recall(n_steps=20, seed=3)
    np.testing.assert_array_equal(a.losses, b.losses)
    assert not np.array_equal(a.losses, train_recall(n_steps=20, seed=4).losses)


def test_training_learns_the_task():
    run = train_recall(n_steps=300, seed=0)  # 4 pairs of 8 symbols, d_k = 16
    test = associative_recall_batch(500, seed=99)
    before = recall_accuracy(run.initial, test)
    after = recall_accuracy(run.parameters, test)
    assert after >= 0.95 and before < 0.5


def test_snapshots_callback_and_probe_accuracy():
    probe = associative_recall_batch(1, n_pairs=4, n_queries=4, seed=7)
    calls = []
    run = train_recall(n_steps=23, seed=1, probe=probe, snapshot_every=10,
                       callback=lambda step, loss: calls.append((step, loss)))
    np.testing.assert_array_equal(run.snapshot_steps, [0, 10, 20, 23])
    assert run.snapshots.shape == (4, 1, 1, 4, 4) and run.probe_accuracy.shape == (4,)
    assert [step for step, _ in calls] == list(range(1, 24))
    np.testing.assert_array_equal([loss for _, loss in calls], run.losses)
    np.testing.assert_allclose(run.snapshots[0], recall_forward(run.initial, probe).weights)
    np.testing.assert_allclose(run.snapshots[-1], recall_forward(run.parameters, probe).weights)


def test_sgd_training_also_learns():
    run = train_recall(n_steps=300, seed=0, optimiser="sgd", learning_rate=1.0)
    assert run.losses[-20:].mean() < 0.2 * run.losses[:20].mean()


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(optimiser="rmsprop"), ValueError, "optimiser must be 'adam' or 'sgd', got 'rmsprop'"),
        (dict(snapshot_every=-1), ValueError, "snapshot_every must be at least 0, got -1"),
        (dict(callback=3), TypeError, "callback must be callable, got int"),
        (dict(learning_rate=0), ValueError, "learning_rate must be a positive finite number, got 0"),
    ],
)
def test_training_rejects_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        train_recall(n_steps=1, **kwargs)


def test_chapter_ablation_scaling_speeds_up_learning():
    # The chapter's claim, as thresholds rather than exact numbers: with the 1/sqrt(d_k) scaling the
    # loss falls below 0.1 well before it does without, and both models end up solving the task.
    scaled = train_recall(n_steps=300, seed=0, scaled=True, **CHAPTER)
    unscaled = train_recall(n_steps=300, seed=0, scaled=False, **CHAPTER)
    fast, slow = steps_to_loss(scaled.losses), steps_to_loss(unscaled.losses)
    assert fast is not None and fast < 150
    assert slow is None or slow > 1.5 * fast
    test = associative_recall_batch(500, n_pairs=8, n_keys=16, n_values=16, seed=123)
    assert recall_accuracy(scaled.parameters, test) >= 0.98


def test_steps_to_loss():
    assert steps_to_loss([3.0, 2.0, 0.05, 0.05], threshold=0.1, window=1) == 3
    assert steps_to_loss(np.full(5, 0.5)) is None
    assert steps_to_loss([0.01] * 10, window=10) == 10
    with pytest.raises(ValueError, match=re.escape("losses has shape (2, 2)")):
        steps_to_loss(np.zeros((2, 2)))
    assert math.isfinite(steps_to_loss(np.linspace(1, 0, 100), threshold=0.5))
