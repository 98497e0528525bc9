"""The PyTorch twin of the GPT that `make bench` times (benchmarks/torch_gpt.py) against the package: in float64,
on the same weights and batch, the same loss, every gradient to rtol 1e-9, and the same parameters after three
steps of ``attnbook.learning.loop.fit`` (clipping, Adam, Noam) to rtol 1e-8; in float32, the same loss to 1e-5."""

import numpy as np
import pytest

from attnbook.learning.loop import fit
from attnbook.learning.models import gpt
from attnbook.learning.models.scaffold import loss_and_gradients
from attnbook.learning.optim import tree_leaves, tree_map

pytestmark = pytest.mark.torch

# small, with warm-up 2 and a low clipping norm: large steps, every one clipped
CONFIG = gpt.GPTConfig(d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=24, context=12, batch_size=3,
                       warmup=2, max_norm=0.5)


@pytest.fixture(scope="module")
def twin():
    """benchmarks/torch_gpt.py, loaded from its file (benchmarks/ is not a package; no sys.path edit)."""
    pytest.importorskip("torch")
    from tools import load_benchmark

    return load_benchmark("torch_gpt")


def float64(tree):
    return tree_map(lambda a: np.asarray(a, dtype=np.float64), tree)


def test_the_loss_and_every_gradient_in_float64(twin):
    params = float64(gpt.init_gpt(CONFIG, seed=5))
    tokens = gpt.gpt_batch(np.random.default_rng(0), CONFIG)
    loss, grads = loss_and_gradients(gpt.MODEL, params, tokens, CONFIG)
    tensors = twin.to_torch(params)
    value = twin.loss(tensors, tokens, CONFIG)
    value.backward()
    assert value.item() == pytest.approx(loss, rel=1e-12)
    for ours, tensor in zip(tree_leaves(grads), tree_leaves(tensors), strict=True):
        theirs = tensor.grad.numpy() if tensor.requires_grad else np.zeros(tensor.shape)  # biases: no gradient
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-13)


def test_three_steps_of_fit_give_the_same_parameters(twin):
    params = float64(gpt.init_gpt(CONFIG, seed=6))
    batches = [gpt.gpt_batch(np.random.default_rng(seed), CONFIG) for seed in range(3)]
    ours, _ = fit(params, lambda p, b: loss_and_gradients(gpt.MODEL, p, b, CONFIG), lambda rng: batches.pop(0), 3,
                  d_model=CONFIG.d_model, warmup=CONFIG.warmup, max_norm=CONFIG.max_norm, progress=False)
    batches = [gpt.gpt_batch(np.random.default_rng(seed), CONFIG) for seed in range(3)]
    trainer = twin.TorchTrainer(params, CONFIG)
    for b in batches:
        trainer.step(b)
    for a, tensor in zip(tree_leaves(ours), tree_leaves(trainer.params), strict=True):
        np.testing.assert_allclose(a, tensor.detach().numpy(), rtol=1e-8, atol=1e-12)


def test_the_float32_twin_computes_the_float32_loss(twin):
    import torch

    params = gpt.init_gpt(CONFIG, seed=7)  # float32
    tokens = gpt.gpt_batch(np.random.default_rng(1), CONFIG)
    loss32, _ = loss_and_gradients(gpt.MODEL, params, tokens, CONFIG)
    assert twin.loss(twin.to_torch(params, torch.float32), tokens, CONFIG).item() == pytest.approx(loss32, rel=1e-5)


@pytest.mark.parametrize("config", [CONFIG, gpt.GPTConfig(), gpt.GPTConfig(d_model=96, n_layers=3, n_heads=6,
                                                                         n_kv_heads=3, d_ff=256, context=40)],
                         ids=["small", "stored", "wider"])
def test_the_step_flops_are_the_matrix_products_pytorch_counts(twin, config):
    """training_step_flops, against PyTorch's own count of the twin's forward and backward products (the math
    backend of scaled_dot_product_attention, whose products the counter sees; it too computes the whole square)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    tensors = twin.to_torch(gpt.init_gpt(config, seed=8), torch.float32)
    tokens = gpt.gpt_batch(np.random.default_rng(2), config)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        twin.loss(tensors, tokens, config).backward()
    assert gpt.training_step_flops(config) == counter.get_total_flops()
