"""Tests of attnbook.learning.models.lengths: the most-recent-signal data, the model's gradients against
finite differences for every position scheme, and the refusals."""

import numpy as np
import pytest

from attnbook.learning.models.lengths import (
    init_length_model,
    length_model_accuracy,
    length_model_loss_and_gradients,
    LengthModel,
    POSITION_SCHEMES,
    recency_batch,
)
from attnbook.learning.analysis.lengths import train_length_model
from attnbook.positional import rotary_frequencies
from attnbook.measure.probes import numerical_jacobian


def test_targets_are_the_most_recent_signal_written_as_a_loop():
    tokens, targets = recency_batch(5, 30, n_symbols=4, p_signal=0.3, seed=2)
    for row, target in zip(tokens, targets):
        last = None
        for i, token in enumerate(row):
            last = token if token != 0 else last
            assert target[i] == last != 0
    assert np.all(tokens[:, 0] > 0) and (tokens == 0).any()


def test_same_seed_same_batch():
    a, b = recency_batch(3, 9, seed=7), recency_batch(3, 9, seed=7)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("scheme", POSITION_SCHEMES)
def test_gradients_match_finite_differences(scheme):
    rng = np.random.default_rng(0)
    params = init_length_model(8, 3, 6, seed=1)
    params = params._replace(table=0.5 * rng.standard_normal(params.table.shape))  # (6, 8)
    tokens, targets = recency_batch(2, 5, n_symbols=3, seed=3)
    _, grads = length_model_loss_and_gradients(params, tokens, targets, scheme, 2)
    for index, name in enumerate(LengthModel._fields):
        def loss(w, index=index):
            changed = params._replace(**{LengthModel._fields[index]: w})
            return length_model_loss_and_gradients(changed, tokens, targets, scheme, 2)[0]

        expected = numerical_jacobian(loss, params[index], eps=1e-6)
        np.testing.assert_allclose(grads[index], expected, rtol=1e-5, atol=1e-8, err_msg=f"{scheme}: {name}")


def test_training_lowers_the_loss_and_is_reproducible():
    a = train_length_model("rotary", trained_length=12, n_steps=60, d_model=16, n_heads=2, seed=4)
    b = train_length_model("rotary", trained_length=12, n_steps=60, d_model=16, n_heads=2, seed=4)
    np.testing.assert_array_equal(a.losses, b.losses)
    assert a.losses[-10:].mean() < 0.7 * a.losses[:10].mean()


def test_rotary_accuracy_with_the_default_frequencies_passed_explicitly_is_unchanged():
    run = train_length_model("rotary", trained_length=8, n_steps=10, d_model=8, n_heads=2)
    tokens, targets = recency_batch(4, 16, seed=1)
    assert length_model_accuracy(run.params, tokens, targets, "rotary", 2) == length_model_accuracy(
        run.params, tokens, targets, "rotary", 2, frequencies=rotary_frequencies(4))


@pytest.mark.parametrize("call, error, message", [
    (lambda p: length_model_accuracy(p, np.zeros((1, 9), int), np.zeros((1, 9), int), "learned", 2),
     ValueError, "no row for position 8"),
    (lambda p: length_model_accuracy(p, np.zeros((1, 4), int), np.zeros((1, 4), int), "alibi", 2,
                                     frequencies=[1.0, 0.1]), ValueError, "has none"),
    (lambda p: length_model_accuracy(p, np.zeros((1, 4), int), np.zeros((1, 4), int), "rotary", 2,
                                     frequencies=[1.0]), ValueError, "frequencies has shape"),
    (lambda p: length_model_loss_and_gradients(p, np.full((1, 4), 9), np.zeros((1, 4), int), "none", 2),
     ValueError, "tokens must lie in"),
    (lambda p: length_model_loss_and_gradients(p, np.zeros((1, 4), int), np.zeros((1, 4), int), "relative", 2),
     ValueError, "scheme must be one of"),
    (lambda p: length_model_loss_and_gradients(p, np.zeros((1, 4), int), np.zeros((1, 4), int), "none", 3),
     ValueError, "n_heads"),
    (lambda p: length_model_loss_and_gradients(tuple(p), np.zeros((1, 4), int), np.zeros((1, 4), int), "none", 2),
     TypeError, "LengthModel"),
    (lambda p: recency_batch(2, 4, p_signal=0.0), ValueError, "p_signal"),
    (lambda p: train_length_model("rotary", d_model=6, n_heads=2), ValueError, "must be even"),
])
def test_refusals_name_what_is_wrong(call, error, message):
    params = init_length_model(8, 3, 8)
    with pytest.raises(error, match=message):
        call(params)


@pytest.mark.parametrize("scheme", POSITION_SCHEMES)
def test_early_positions_ignore_later_ones_for_short_and_long_products(scheme):
    # n = 100 takes the einsum path of the forward pass, n = 30 the matmul path: both are causal
    from attnbook.learning.models.lengths import forward

    params = init_length_model(8, 3, 100, seed=2)
    params = params._replace(table=np.random.default_rng(0).standard_normal((100, 8)))
    tokens, _ = recency_batch(3, 100, n_symbols=3, seed=5)
    long_logits = forward(params, tokens, scheme, 2).logits  # (3, 100, 4)
    short_logits = forward(params, tokens[:, :30], scheme, 2).logits  # (3, 30, 4)
    np.testing.assert_allclose(long_logits[:, :30], short_logits, rtol=1e-12, atol=1e-12)
