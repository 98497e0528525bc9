"""Every trained model of the book stands on the one scaffold: initialise, taped forward, loss, batches, evaluate,
trained by `fit`; the stored ones load through it."""

import numpy as np
import pytest

from attnbook.learning.models import induction, induction_gated, lengths, recall, scaffold, seq2seq, vit
from attnbook.learning.optim import check_gradients, tree_leaves

SMALL = {
    "seq2seq": (seq2seq.MODEL, seq2seq.ReversalConfig(d_model=8, d_ff=16, n_encoder_layers=1, n_decoder_layers=1,
                                                      batch_size=4, test_sequences=8)),
    "vit": (vit.MODEL, vit.ViTConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1, batch_size=4)),
    "induction": (induction.MODEL, induction.InductionConfig(vocab_size=6, d_model=8, d_ff=8, batch_size=2,
                                                             max_half_length=8)),
    "induction_gated": (induction_gated.MODEL, induction.InductionConfig(vocab_size=6, d_model=8, d_ff=8, batch_size=2,
                                                                         max_half_length=8)),
    "lengths": (lengths.MODEL, lengths.LengthConfig("rotary", trained_length=6, d_model=8, n_heads=2, batch_size=4)),
    "recall": (recall.MODEL, recall.RecallConfig(batch_size=4)),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_model_gives_a_gradient_for_every_parameter_of_the_parameters_structure(name):
    model, config = SMALL[name]
    params = model.init(config, 0)
    batch = model.batch(np.random.default_rng(0), config)
    loss, grads = scaffold.loss_and_gradients(model, params, batch, config)
    check_gradients(params, grads)  # the same tree, leaf for leaf
    assert np.isfinite(loss) and all(np.all(np.isfinite(g)) for g in tree_leaves(grads))


@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_model_trains_with_fit_and_records_the_same_run_for_the_same_seed(name):
    model, config = SMALL[name]
    (params, record), (again, record_again) = (scaffold.train(model, config, seed=1, progress=False, n_steps=3)
                                               for _ in range(2))
    assert sorted(record) == ["config", "losses", "metrics", "n_steps", "seconds", "seed"]
    assert record["losses"] == record_again["losses"] and len(record["losses"]) == 3
    for a, b in zip(tree_leaves(params), tree_leaves(again)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("model", [seq2seq.MODEL, vit.MODEL, induction.MODEL, induction_gated.MODEL],
                         ids=lambda m: m.name)
def test_a_stored_model_loads_in_the_structure_its_init_makes(model):
    params, config, record = scaffold.load(model)
    template = model.init(config, 0)
    assert [a.shape for a in tree_leaves(params)] == [a.shape for a in tree_leaves(template)]
    assert record["config"] == config._asdict()


def test_a_configuration_is_checked_by_its_annotations():
    with pytest.raises(ValueError, match=r"^config\.batch_size must be at least 1, got 0$"):
        scaffold.check_config(recall.RecallConfig(batch_size=0), recall.RecallConfig)
    with pytest.raises(TypeError, match=r"^config must be a RecallConfig, got dict$"):
        scaffold.check_config({}, recall.RecallConfig)
