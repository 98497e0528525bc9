"""attnbook.learning.models.induction_gated and the sink measurements of analysis.induction: the gradient is
exact, the gated model starts as the induction model but for its gates, the stored run is reproducible and its
record is what its weights measure, and what the gate does to the first-token sink (Qiu et al., 2025)."""

import numpy as np
import pytest

from attnbook.learning.analysis.induction import first_token_share, probe_tokens, sink_measurements
from attnbook.learning.gradcheck import gradient_errors
from attnbook.learning.models import induction
from attnbook.learning.models.induction import InductionConfig, init_induction_model, load_induction
from attnbook.learning.models.induction_gated import (
    MODEL,
    gated_induction_forward,
    init_gated_induction_model,
    load_gated_induction,
)
from attnbook.learning.models.scaffold import loss_and_gradients
from attnbook.learning.optim import tree_leaves

@pytest.fixture(scope="module")
def stored():
    return load_gated_induction()


@pytest.fixture(scope="module")
def measured(stored):
    """Both stored models measured on the same held-out probe batch."""
    (gated, config, _), (plain, plain_config, _) = stored, load_induction()
    probe, h = probe_tokens(config), config.probe_half_length
    return {"gated": sink_measurements(gated_induction_forward(gated, probe[:, :-1], config), probe, h),
            "plain": sink_measurements(induction.induction_forward(plain, probe[:, :-1], plain_config), probe, h)}


def test_the_gradient_of_every_weight_and_gate_matches_central_differences_in_float64():
    config = InductionConfig(vocab_size=5, d_model=4, n_heads=2, d_ff=6)
    params = init_gated_induction_model(config, seed=3)
    tokens = np.array([[1, 4, 2, 0, 1, 4, 2], [3, 3, 0, 2, 3, 3, 0]])  # (batch, n)
    loss, grads = loss_and_gradients(MODEL, params, tokens, config)
    errors = gradient_errors(lambda p: loss_and_gradients(MODEL, p, tokens, config)[0], params, grads)
    assert len(errors) == len(tree_leaves(params)) == 2 + 2 * 17  # embedding, output table, two layers and gates
    assert max(errors.values()) <= 1e-6, max(errors, key=errors.get)  # measured: 8.2e-10 at most


def test_before_training_the_gated_model_is_the_induction_model_with_gates_added():
    config = InductionConfig(vocab_size=6, d_model=8, n_heads=2, d_ff=8)
    gated, plain = init_gated_induction_model(config, seed=2), init_induction_model(config, seed=2)
    assert all(np.array_equal(a, b) for a, b in zip(tree_leaves(plain.layers), tree_leaves(
        tuple(layer[:4] for layer in gated.layers))))
    assert np.array_equal(gated.embedding, plain.embedding) and np.array_equal(gated.unembedding, plain.unembedding)
    assert not np.array_equal(gated.layers[0].w_gate, gated.layers[1].w_gate)


def test_the_gated_model_uses_the_data_sizes_and_training_of_the_induction_model(stored):
    _, config, record = stored
    assert config == InductionConfig() == load_induction().config
    assert record["seed"] == 0 and record["n_steps"] == config.n_steps == len(record["losses"])
    assert MODEL.batch is induction.MODEL.batch and MODEL.loss is induction.MODEL.loss
    assert MODEL.fit_options(config) == induction.MODEL.fit_options(config)


def test_the_stored_weights_reproduce_the_recorded_sink_shares_and_task(stored, measured):
    _, _, record = stored
    assert set(measured["gated"]) == set(record["metrics"])
    for key, value in measured["gated"].items():
        np.testing.assert_allclose(value, record["metrics"][key], rtol=1e-12, atol=1e-12, err_msg=key)


def test_a_shortened_retraining_reproduces_the_stored_loss_curve(stored, retrained_losses):
    _, _, record = stored
    losses = retrained_losses("induction_gated", "InductionConfig", record, steps=100)  # one BLAS thread
    np.testing.assert_allclose(losses, record["losses"][:100], rtol=1e-6)


def test_the_gated_model_still_learns_to_copy_the_second_half(measured):
    gated, plain = measured["gated"], measured["plain"]
    assert gated["second_half_accuracy"] > 0.95 and plain["second_half_accuracy"] > 0.95
    assert gated["second_half_loss"] < 0.3
    assert gated["first_half_loss"] > 0.9 * np.log(32)  # the first half stays unpredictable


def test_the_gates_are_open_between_zero_and_one(measured):
    gates = np.array([measured["gated"]["gate_first_half"], measured["gated"]["gate_second_half"]])
    assert np.all((gates > 0) & (gates < 1))
    assert "gate_first_half" not in measured["plain"]


def test_the_gate_leaves_layer_2s_first_token_sink_in_place(measured):
    # what the chapter says (cheaper_mixing, mix-gate-sink): not what Qiu et al. found in large language models
    gated, plain = measured["gated"]["sink_first_half"][1][0], measured["plain"]["sink_first_half"][1][0]
    assert gated > 0.7 and plain > 0.7 and abs(gated - plain) < 0.05  # measured: 0.744 and 0.722
    assert measured["gated"]["sink_second_half"][1][0] < 0.05  # where it copies, layer 2 looks elsewhere


def test_the_gated_copying_head_turns_its_output_down_where_there_is_nothing_to_copy(measured):
    gate = measured["gated"]
    assert gate["gate_first_half"][1][0] < gate["gate_second_half"][1][0] - 0.25  # measured: 0.50 and 0.85


# --- the measurement ---------------------------------------------------------------------------------------


def test_the_first_token_share_averages_each_halfs_queries_on_key_zero():
    h, n = 3, 5
    a = np.zeros((2, 4, 1, n, n))  # (layers, batch, heads, n, n)
    a[..., 0] = 1.0  # every query on token 0 ...
    a[1, :, :, h:, 0] = 0.25  # ... but layer 2's second half, which puts a quarter there
    shares = first_token_share(a, h)
    np.testing.assert_array_equal(shares.first_half, [[1.0], [1.0]])
    np.testing.assert_array_equal(shares.second_half, [[1.0], [0.25]])
    a[:, :, :, 0, 0] = 0.5  # query 0 sees only token 0: it is left out
    np.testing.assert_array_equal(first_token_share(a, h).first_half, [[1.0], [1.0]])


def test_a_model_that_predicts_every_token_has_accuracy_one_and_one_that_never_does_zero():
    tokens = np.array([[3, 1, 2, 3, 1, 2]])  # h = 3
    logits = np.zeros((1, 5, 4))  # (batch, 2h - 1, V)
    logits[0, np.arange(5), tokens[0, 1:]] = 10.0
    forward = induction.scaffold.Forward(logits, np.full((1, 1, 1, 5, 5), 0.2))
    assert sink_measurements(forward, tokens, 3)["second_half_accuracy"] == 1.0
    wrong = induction.scaffold.Forward(np.roll(logits, 1, axis=-1), forward.attention)
    assert sink_measurements(wrong, tokens, 3)["second_half_accuracy"] == 0.0


@pytest.mark.parametrize("call, message", [
    (lambda: first_token_share(np.zeros((2, 1, 1, 4, 4)), 3),
     "attention has shape (2, 1, 1, 4, 4); expected (n_layers, batch, n_heads, 5, 5) for half_length = 3"),
    (lambda: sink_measurements(induction.scaffold.Forward(np.zeros((1, 5, 4)), np.zeros((1, 1, 1, 5, 5))),
                               np.zeros((1, 5), dtype=int), 3),
     "tokens has shape (1, 5); expected (batch, 6) for half_length = 3"),
    (lambda: sink_measurements(induction.scaffold.Forward(np.zeros((1, 6, 4)), np.zeros((1, 1, 1, 5, 5))),
                               np.zeros((1, 6), dtype=int), 3),
     "forward.logits has shape (1, 6, 4); expected (1, 5, V): the model's logits on tokens[:, :-1]"),
    (lambda: gated_induction_forward(init_gated_induction_model(InductionConfig(vocab_size=5, d_model=4, d_ff=8)),
                                     np.array([[1, 5]]), InductionConfig(vocab_size=5, d_model=4, d_ff=8)),
     "tokens contains the id 5, outside 0 .. 4"),
])
def test_errors_name_the_argument(call, message):
    import re

    with pytest.raises(ValueError, match=re.escape(message)):
        call()
