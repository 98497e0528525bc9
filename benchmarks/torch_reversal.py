"""The reversal model of ``attnbook.learning.models.seq2seq``, written out in PyTorch: the twin that `make bench` times.

The same computation as the package, op for op, on the same weights (an ``init_reversal`` tree converted
leaf by leaf, see :func:`to_torch`; the package's matrices are already laid out for ``x @ w``, so no
transpose): the tied embedding scaled by sqrt(d_model) plus the sinusoidal positions of
``attnbook.learning.models.seq2seq.positions``; post-norm encoder and decoder layers (LayerNorm(x + sublayer(x)),
eps 1e-5, ReLU feed-forward); attention through ``F.scaled_dot_product_attention`` with boolean masks that
are True where attention is allowed, as in the package (the source's padding for the encoder's
self-attention and the decoder's cross-attention, causal for the decoder's self-attention); logits
``y @ E.T``; ``F.cross_entropy(..., ignore_index=PAD, label_smoothing=eps)``, which is
``attnbook.learning.gradients.token_cross_entropy`` over the positions ``target_mask`` keeps (the
reversal batches pad exactly there). One training step (:class:`TorchTrainer`) is the step of
``attnbook.learning.loop.fit``, shared by the twins (``torch_common.TwinTrainer``).

PyTorch is a benchmark and test dependency only, never the package's: this module is not part of
``attnbook``. ``code/tests/learning/test_seq2seq_torch.py`` checks that in float64 it gives the
package's loss, gradients and parameters after three steps.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

from attnbook.learning.optim import tree_leaves
from attnbook.learning.models.seq2seq import positions, ReversalConfig
from attnbook.learning.tasks import PAD, Seq2SeqBatch
from torch_common import TwinTrainer  # benchmarks/torch_common.py

__all__ = ["TorchTrainer", "from_torch", "loss", "to_torch"]


def to_torch(tree, dtype: torch.dtype = torch.float64):
    """The parameter tree with every array as a leaf tensor of ``dtype`` that requires a gradient."""
    if isinstance(tree, (tuple, list)):
        branches = [to_torch(branch, dtype) for branch in tree]
        return type(tree)(*branches) if hasattr(tree, "_fields") else type(tree)(branches)
    return torch.tensor(np.asarray(tree), dtype=dtype, requires_grad=True)


def from_torch(tree, grad: bool = False):
    """The tree back as float64 numpy arrays: the tensors, or their gradients when ``grad``."""
    if isinstance(tree, (tuple, list)):
        branches = [from_torch(branch, grad) for branch in tree]
        return type(tree)(*branches) if hasattr(tree, "_fields") else type(tree)(branches)
    tensor = tree.grad if grad else tree
    return tensor.detach().numpy().astype(np.float64)


@lru_cache(maxsize=32)
def _positions(n: int, d: int, dtype: torch.dtype) -> torch.Tensor:
    """The package's ``(n, d)`` sinusoidal table as a tensor, made once per size (as the package's is)."""
    return torch.tensor(positions(n, d), dtype=dtype)


def _embed(table: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """sqrt(d) E[tokens] + PE: ``(batch, n)`` tokens to ``(batch, n, d)``."""
    d = table.shape[1]
    return math.sqrt(d) * table[tokens] + _positions(tokens.shape[1], d, table.dtype)


def _attention(query, key, w, n_heads: int, mask=None, causal: bool = False) -> torch.Tensor:
    """Multi-head attention with the package's weights (``x @ w + b``); ``mask`` True where allowed."""
    def heads(x):  # (batch, n, d_model) -> (batch, h, n, d_head)
        return x.unflatten(-1, (n_heads, -1)).transpose(1, 2)

    q, k, v = heads(query @ w.w_q + w.b_q), heads(key @ w.w_k + w.b_k), heads(key @ w.w_v + w.b_v)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)  # (batch, h, n_q, d_head)
    return out.transpose(1, 2).flatten(-2) @ w.w_o + w.b_o  # (batch, n_q, d_model)


def _norm(x, norm) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], norm[0], norm[1], eps=1e-5)


def _feed(x, ff) -> torch.Tensor:
    return torch.relu(x @ ff.w_1 + ff.b_1) @ ff.w_2 + ff.b_2


def logits(params, source: torch.Tensor, target_in: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The teacher-forced logits ``(batch, n_tgt, vocab)`` of ``attnbook.learning.models.seq2seq.reversal_forward``."""
    source_mask = (source != PAD)[:, None, None, :]  # (batch, 1, 1, n_src): True on real tokens
    x = _embed(params.embedding, source)  # (batch, n_src, d)
    for layer in params.encoder:
        x = _norm(x + _attention(x, x, layer.self_attention, n_heads, source_mask), layer.norm_1)
        x = _norm(x + _feed(x, layer.feed_forward), layer.norm_2)
    y = _embed(params.embedding, target_in)  # (batch, n_tgt, d)
    for layer in params.decoder:
        y = _norm(y + _attention(y, y, layer.self_attention, n_heads, causal=True), layer.norm_1)
        y = _norm(y + _attention(y, x, layer.cross_attention, n_heads, source_mask), layer.norm_2)
        y = _norm(y + _feed(y, layer.feed_forward), layer.norm_3)
    return y @ params.embedding.T  # (batch, n_tgt, vocab)


def loss(params, batch: Seq2SeqBatch, config: ReversalConfig) -> torch.Tensor:
    """The label-smoothed cross-entropy of ``attnbook.learning.models.seq2seq.reversal_loss_and_gradients``."""
    source, target_in, target_out = (torch.from_numpy(np.asarray(a)) for a in batch[:3])
    z = logits(params, source, target_in, config.n_heads)  # (batch, n_tgt, vocab)
    return F.cross_entropy(z.flatten(0, 1), target_out.flatten(), ignore_index=PAD,
                           label_smoothing=config.label_smoothing)


class TorchTrainer(TwinTrainer):
    """The step of ``attnbook.learning.loop.fit`` on the twin (:class:`torch_common.TwinTrainer`).

    ``params`` is an ``init_reversal`` tree (numpy); the trainer holds its torch copy in ``dtype``
    (``self.params``, the same tree of tensors) and a ``torch.optim.Adam`` over its leaves.
    """

    def __init__(self, params, config: ReversalConfig, dtype: torch.dtype = torch.float64):
        self.params = to_torch(params, dtype)
        super().__init__(tree_leaves(self.params), config)  # the package's order, the order of its AdamState

    def loss(self, batch: Seq2SeqBatch) -> torch.Tensor:
        return loss(self.params, batch, self.config)
