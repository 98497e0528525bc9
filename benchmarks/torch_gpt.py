"""The character-level GPT of ``attnbook.learning.models.gpt``, written out in PyTorch: the twin that `make bench` times.

The same computation as the package, op for op, on the same weights (an ``init_gpt`` tree converted leaf by
leaf; the package's matrices are laid out for ``x @ w``): the tied embedding; pre-norm blocks of
``F.rms_norm`` (eps 1e-6), causal grouped-query attention through ``F.scaled_dot_product_attention(...,
is_causal=True, enable_gqa=True)`` with rotary queries and keys (pairs interleaved, the frequencies of
``attnbook.positional.sinusoidal_frequencies``), ``F.silu`` gating in the SwiGLU network; a final
``F.rms_norm``; logits ``x @ E.T`` and ``F.cross_entropy``. The attention biases are zero and, as in the
package, never trained: they are constants here. One training step (:class:`TorchTrainer`) is the step of
``attnbook.learning.loop.fit``, shared by the twins (``torch_common.TwinTrainer``).

PyTorch is a benchmark and test dependency only: this module is not part of ``attnbook``.
``code/tests/learning/models/test_gpt_torch.py`` checks that in float64 it gives the package's loss,
gradients and parameters after three steps.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attnbook.learning.models.gpt import EPS as NORM_EPS
from attnbook.learning.models.gpt import GPTConfig
from attnbook.learning.optim import tree_leaves
from attnbook.positional import sinusoidal_frequencies
from torch_common import TwinTrainer  # benchmarks/torch_common.py

__all__ = ["TorchTrainer", "loss", "to_torch", "trained_leaves"]

BIASES = ("b_q", "b_k", "b_v", "b_o")


def to_torch(tree, dtype: torch.dtype = torch.float64, path: str = ""):
    """The parameter tree as tensors of ``dtype``; every leaf but the attention biases requires a gradient."""
    if isinstance(tree, (tuple, list)):
        names = getattr(tree, "_fields", [str(i) for i in range(len(tree))])
        branches = [to_torch(branch, dtype, name) for name, branch in zip(names, tree)]
        return type(tree)(*branches) if hasattr(tree, "_fields") else type(tree)(branches)
    return torch.tensor(np.asarray(tree), dtype=dtype, requires_grad=path not in BIASES)


def trained_leaves(tree) -> list:
    """The leaves that train, in the package's order (the attention biases left out)."""
    return [leaf for leaf in tree_leaves(tree) if leaf.requires_grad]


def _rotate(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Turn pair i of the row at position p by p theta_i, pairs interleaved: ``(..., n, d)``."""
    angles = torch.arange(x.shape[-2], dtype=x.dtype)[:, None] * theta[None, :]  # (n, d / 2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def _attention(x, w, config: GPTConfig, theta) -> torch.Tensor:
    def heads(y, h):  # (batch, n, h d_head) -> (batch, h, n, d_head)
        return y.unflatten(-1, (h, -1)).transpose(1, 2)

    q = _rotate(heads(x @ w.w_q + w.b_q, config.n_heads), theta)
    k = _rotate(heads(x @ w.w_k + w.b_k, config.n_kv_heads), theta)
    v = heads(x @ w.w_v + w.b_v, config.n_kv_heads)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # (batch, h, n, d_head)
    return out.transpose(1, 2).flatten(-2) @ w.w_o + w.b_o  # (batch, n, d_model)


def logits(params, tokens: torch.Tensor, config: GPTConfig) -> torch.Tensor:
    """The logits ``(batch, n, V)`` of ``attnbook.learning.models.gpt.gpt_forward``."""
    d = config.d_model
    theta = torch.tensor(sinusoidal_frequencies(d // config.n_heads), dtype=params.embedding.dtype)
    x = params.embedding[tokens]  # (batch, n, d)
    for layer in params.layers:
        x = x + _attention(F.rms_norm(x, (d,), layer.norm_1, NORM_EPS), layer.attention, config, theta)
        h = F.rms_norm(x, (d,), layer.norm_2, NORM_EPS)
        ff = layer.feed_forward
        x = x + (F.silu(h @ ff.w_gate) * (h @ ff.w_up)) @ ff.w_down
    return F.rms_norm(x, (d,), params.norm, NORM_EPS) @ params.embedding.T  # (batch, n, V)


def loss(params, tokens, config: GPTConfig) -> torch.Tensor:
    """The mean next-character cross-entropy of a ``(batch, context + 1)`` batch, as the package's ``MODEL.loss``."""
    tokens = torch.from_numpy(np.asarray(tokens))
    z = logits(params, tokens[:, :-1], config)  # (batch, n, V)
    return F.cross_entropy(z.flatten(0, 1), tokens[:, 1:].flatten())


class TorchTrainer(TwinTrainer):
    """The step of ``attnbook.learning.loop.fit`` on the twin (:class:`torch_common.TwinTrainer`) from an ``init_gpt`` tree."""

    def __init__(self, params, config: GPTConfig, dtype: torch.dtype = torch.float64):
        self.params = to_torch(params, dtype)
        super().__init__(trained_leaves(self.params), config)

    def loss(self, tokens) -> torch.Tensor:
        return loss(self.params, tokens, self.config)
