"""What the PyTorch twins of `make bench` share: the training step of ``attnbook.learning.loop.fit``.

:class:`TwinTrainer` is that step on a twin's tensors: the loss and its gradients, clipping to the global
norm (written out as ``attnbook.learning.optim.clip_tree`` computes it: ``torch.nn.utils.clip_grad_norm_``
adds 1e-6 to the norm, the package does not), then ``torch.optim.Adam`` with betas (0.9, 0.98), eps 1e-9
and the Noam rate of the step. A twin (``torch_reversal.py``, ``torch_gpt.py``) subclasses it with its
tensors and its loss. Imported as ``torch_common``: `benchmarks/run.py` runs with this folder on the path,
and the tests load the twins with ``tools.load_benchmark``, which loads this module first.
"""

from __future__ import annotations

import torch

from attnbook.learning.loop import BETAS, EPS
from attnbook.learning.optim import noam

__all__ = ["TwinTrainer"]


class TwinTrainer:
    """The step of ``fit`` over ``leaves`` (the trained tensors, in the package's order); ``loss(batch)`` is the twin's."""

    def __init__(self, leaves: list, config):
        self.config, self.leaves = config, leaves
        self.optimizer = torch.optim.Adam(leaves, lr=1.0, betas=BETAS, eps=EPS)
        self.steps = 0

    def loss(self, batch) -> torch.Tensor:
        raise NotImplementedError

    def step(self, batch) -> float:
        """One training step on ``batch``; returns the loss before the step."""
        config = self.config
        self.steps += 1
        self.optimizer.zero_grad(set_to_none=True)
        value = self.loss(batch)
        value.backward()
        grads = [leaf.grad for leaf in self.leaves]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        torch._foreach_mul_(grads, (config.max_norm / norm).clamp(max=1.0))  # g min(1, c / |g|), as clip_tree
        self.optimizer.param_groups[0]["lr"] = noam(self.steps, config.d_model, config.warmup)
        self.optimizer.step()
        return value.item()
