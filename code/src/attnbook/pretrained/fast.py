"""The fast path of :func:`attnbook.pretrained.bert.bert_forward`: the same numbers, tested equal, in less time.

What it changes, and nothing else: the batch's positions are one matrix of ``batch * n`` rows for every
position-wise product (numpy multiplies a ``(batch, n, d)`` stack one sentence at a time, in small products),
the query, key and value projections are one product with their matrices side by side, and the scale is
applied to the queries' matrix once. Attention itself, the masks, softmax, GELU and the layer norms are the
reference's own kernels (``make bench`` times both against PyTorch).

>>> from attnbook.pretrained.bert import bert_forward, load_minilm
>>> model = load_minilm()
>>> hidden, attention = bert_forward_fast([[101, 7592, 2088, 102]], [4], model.weights, model.config)
>>> reference, _ = bert_forward([[101, 7592, 2088, 102]], [4], model.weights, model.config)
>>> bool(np.abs(hidden - reference).max() < 1e-5)
True
"""

from __future__ import annotations

import math

import numpy as np

from ..masks import padding_mask
from ..softmax import softmax_rows
from ..transformer import ACTIVATIONS, layer_norm
from ..validation import boundary
from .bert import BertConfig, BertWeights, bert_forward

__all__ = ["bert_forward_fast"]


@boundary(bert_forward.check)
def bert_forward_fast(ids, lengths, weights: BertWeights, config: BertConfig) -> tuple[np.ndarray, np.ndarray]:
    r""":func:`attnbook.pretrained.bert.bert_forward` with the positions of the batch as the rows of one matrix.

    .. math:: [Q \; K \; V] = X [W_Q / \sqrt{d_k} \;\; W_K \;\; W_V] + [b_Q / \sqrt{d_k} \;\; b_K \;\; b_V],
              \qquad X \in \mathbb{R}^{(\text{batch} \cdot n) \times d}

    Parameters
    ----------
    ids, lengths, weights, config
        As in :func:`attnbook.pretrained.bert.bert_forward` (and checked by its check).

    Returns
    -------
    tuple of ndarray
        ``hidden`` ``(layers + 1, batch, n, d_model)`` and ``attention`` ``(layers, batch, heads, n, n)``,
        equal to the reference's to float32 rounding.

    Examples
    --------
    >>> from attnbook.pretrained.bert import load_minilm
    >>> model = load_minilm()
    >>> [a.shape for a in bert_forward_fast([[101, 102]], [2], model.weights, model.config)]
    [(7, 1, 2, 384), (6, 1, 12, 2, 2)]
    """
    e, (batch, n), h = weights.embeddings, ids.shape, config.n_heads
    d = config.d_model
    x = e.words[ids] + e.positions[:n] + e.token_types[0]  # (batch, n, d)
    x = layer_norm.unchecked(x, *e.norm, config.eps).reshape(batch * n, d)  # (batch n, d): one row per position
    mask = padding_mask(lengths, n)[:, None]  # (batch, 1, 1, n)
    activation, hidden, attention = ACTIVATIONS[config.activation], [x], []
    for layer in weights.layers:
        a, ff = layer.self_attention, layer.feed_forward
        scale = a.w_q.dtype.type(1 / math.sqrt(d // h))
        w_qkv = np.concatenate([a.w_q * scale, a.w_k, a.w_v], axis=1)  # (d, 3 d)
        b_qkv = np.concatenate([a.b_q * scale, a.b_k, a.b_v])  # (3 d,)
        qkv = (x @ w_qkv + b_qkv).reshape(batch, n, 3, h, d // h)  # (batch, n, 3, h, d_head)
        q, k, v = qkv.transpose(2, 0, 3, 1, 4)  # (batch, h, n, d_head) each
        weights_of_heads = softmax_rows(q @ k.swapaxes(-1, -2), mask)  # (batch, h, n, n)
        heads = (weights_of_heads @ v).transpose(0, 2, 1, 3).reshape(batch * n, d)  # (batch n, d)
        x = layer_norm.unchecked(x + heads @ a.w_o + a.b_o, *layer.norm_1, config.eps)  # (batch n, d)
        fed = activation(x @ ff.w_1 + ff.b_1) @ ff.w_2 + ff.b_2  # (batch n, d)
        x = layer_norm.unchecked(x + fed, *layer.norm_2, config.eps)  # (batch n, d)
        hidden.append(x)
        attention.append(weights_of_heads)
    return np.stack(hidden).reshape(-1, batch, n, d), np.stack(attention)  # (L + 1, batch, n, d), (L, batch, h, n, n)
