"""The PyTorch twin of the reversal model that `make bench` times (benchmarks/torch_reversal.py) against the
package: in float64, on the same weights and batches, the same loss, every gradient to rtol 1e-9, and the
same parameters after three steps of ``attnbook.learning.loop.fit`` (clipping, Adam, Noam) to rtol 1e-8.
So the training-throughput ratio of the benchmark compares one computation written twice."""

import numpy as np
import pytest

from attnbook.learning.gradients import token_cross_entropy
from attnbook.learning.loop import fit
from attnbook.learning.optim import tree_leaves
from attnbook.learning.models.seq2seq import init_reversal, reversal_loss_and_gradients, ReversalConfig
from attnbook.learning.store import named_leaves
from attnbook.learning.tasks import PAD, draw_reversal

pytestmark = pytest.mark.torch

# warm-up 2 and a low clipping norm: large steps, every one clipped, so the three steps test a real update
CONFIG = ReversalConfig(warmup=2, max_norm=0.5)


@pytest.fixture(scope="module")
def twin():
    """benchmarks/torch_reversal.py, loaded from its file (benchmarks/ is not a package; no sys.path edit)."""
    pytest.importorskip("torch")
    from tools import load_benchmark

    return load_benchmark("torch_reversal")


def batch(seed, n_sequences=CONFIG.batch_size):
    return draw_reversal(np.random.default_rng(seed), n_sequences, CONFIG.n_symbols, CONFIG.min_length,
                         CONFIG.max_length)


def test_cross_entropy_with_ignore_index_is_token_cross_entropy():
    """F.cross_entropy(ignore_index=PAD, label_smoothing) = token_cross_entropy with mask = target_mask,
    loss and gradient: the reversal batches pad the targets exactly where target_mask is False."""
    import torch
    import torch.nn.functional as F

    b = batch(1)
    assert np.array_equal(b.target_mask, b.target_out != PAD)
    z = np.random.default_rng(2).standard_normal(b.target_out.shape + (CONFIG.vocab_size,)) * 3
    ours, dz = token_cross_entropy(z, b.target_out, b.target_mask, CONFIG.label_smoothing)
    tz = torch.tensor(z, requires_grad=True)
    theirs = F.cross_entropy(tz.flatten(0, 1), torch.from_numpy(b.target_out).flatten(), ignore_index=PAD,
                             label_smoothing=CONFIG.label_smoothing)
    theirs.backward()
    np.testing.assert_allclose(theirs.item(), ours, rtol=1e-12)
    np.testing.assert_allclose(tz.grad.numpy(), dz, rtol=1e-10, atol=1e-15)


def test_the_twin_gives_the_package_loss_and_every_gradient(twin):
    params, b = init_reversal(CONFIG, seed=3), batch(4)
    loss, grads = reversal_loss_and_gradients(params, b, CONFIG)
    tparams = twin.to_torch(params)
    tloss = twin.loss(tparams, b, CONFIG)
    tloss.backward()
    np.testing.assert_allclose(tloss.item(), loss, rtol=1e-12)
    theirs = dict(named_leaves(twin.from_torch(tparams, grad=True)))
    for name, ours in named_leaves(grads):
        scale = np.abs(ours).max()  # b_k's gradient is 0 up to rounding (softmax ignores a shift of a row)
        np.testing.assert_allclose(theirs[name], ours, rtol=1e-9, atol=1e-12 * max(scale, 1e-3), err_msg=name)


def test_three_training_steps_give_the_same_parameters(twin):
    params, seed = init_reversal(CONFIG, seed=5), 6

    def loss_and_gradients(p, b):
        return reversal_loss_and_gradients(p, b, CONFIG)

    def next_batch(rng):
        return draw_reversal(rng, CONFIG.batch_size, CONFIG.n_symbols, CONFIG.min_length, CONFIG.max_length)

    ours, history = fit(params, loss_and_gradients, next_batch, 3, d_model=CONFIG.d_model, warmup=CONFIG.warmup,
                        max_norm=CONFIG.max_norm, seed=seed, progress=False)
    assert np.all(history.grad_norms > CONFIG.max_norm), "every step clips"
    trainer, rng = twin.TorchTrainer(params, CONFIG), np.random.default_rng(seed)
    losses = [trainer.step(next_batch(rng)) for _ in range(3)]
    np.testing.assert_allclose(losses, history.losses, rtol=1e-12)
    theirs = dict(named_leaves(twin.from_torch(trainer.params)))
    moved = 0.0
    for (name, after), before in zip(named_leaves(ours), tree_leaves(params)):
        moved = max(moved, float(np.abs(after - before).max()))
        # b_k's gradient is 0 up to rounding (softmax ignores a shift of a row of scores), so Adam moves it by
        # rounding noise over eps = 1e-9: about 1e-11 either way, in different directions in the two programs
        atol = 1e-9 if name.endswith(".b_k") else 1e-12
        np.testing.assert_allclose(theirs[name], after, rtol=1e-8, atol=atol, err_msg=name)
    assert moved > 0.1, "the steps move the parameters (a real test of the update, not of the initial values)"
