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
from ..transformer import ACTIVATIONS, EncoderLayerWeights, layer_norm
from ..validation import boundary
from .bert import BertConfig, BertWeights, bert_forward

__all__ = ["bert_forward_fast", "encoder_layers_fast"]


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
    e, n = weights.embeddings, ids.shape[1]
    x = e.words[ids] + e.positions[:n] + e.token_types[0]  # (batch, n, d)
    x = layer_norm.unchecked(x, *e.norm, config.eps)  # (batch, n, d)
    return encoder_layers_fast.unchecked(x, lengths, weights.layers, config)


def _layers_arguments(x, lengths, layers, config) -> tuple:
    if not isinstance(config, BertConfig):
        raise TypeError(f"config must be a BertConfig, got {type(config).__name__}")
    x, lengths = np.asarray(x), np.asarray(lengths)
    if x.ndim != 3 or x.dtype.kind != "f" or x.shape[2] != config.d_model:
        raise ValueError(f"x must be float states of shape (batch, n, {config.d_model}), got {x.dtype} {x.shape}")
    if lengths.shape != x.shape[:1]:
        raise ValueError(f"lengths has shape {lengths.shape} but x has shape {x.shape}; expected ({x.shape[0]},)")
    padding_mask(lengths, x.shape[1])  # checks each length: an integer in 1..n
    layers = tuple(layers)
    if not all(isinstance(layer, EncoderLayerWeights) for layer in layers):
        raise TypeError("layers must hold EncoderLayerWeights (the layers of a BertWeights)")
    return x, lengths, layers, config


@boundary(_layers_arguments)
def encoder_layers_fast(x, lengths, layers, config: BertConfig) -> tuple[np.ndarray, np.ndarray]:
    r"""BERT's encoder layers run on given states: the layers of :func:`bert_forward_fast` after its embeddings.

    .. math:: H^{(\ell)}, A^{(\ell)} = \operatorname{EncoderLayer}_\ell\big(H^{(\ell - 1)}, \text{mask}\big),
              \qquad \ell = 1, \dots, \text{len(layers)}

    Starting from the states a forward pass had before layer :math:`\ell` runs only the layers from
    :math:`\ell` on: what a change to those layers (a head removed) needs recomputed.

    Parameters
    ----------
    x : array_like
        ``(batch, n, d_model)`` the states entering the first of ``layers``.
    lengths : array_like of int
        ``(batch,)`` the real tokens of each row.
    layers : sequence of EncoderLayerWeights
        Consecutive layers of a :class:`~attnbook.pretrained.bert.BertWeights` (possibly none).
    config : BertConfig
        The heads, eps and activation.

    Returns
    -------
    tuple of ndarray
        ``hidden`` ``(len(layers) + 1, batch, n, d_model)``, ``x`` first, and ``attention``
        ``(len(layers), batch, heads, n, n)``.

    Examples
    --------
    >>> from attnbook.pretrained.bert import load_minilm
    >>> model = load_minilm()
    >>> hidden, _ = bert_forward_fast([[101, 7592, 102]], [3], model.weights, model.config)
    >>> rest, attention = encoder_layers_fast(hidden[4], [3], model.weights.layers[4:], model.config)
    >>> rest.shape, attention.shape, bool(np.abs(rest[-1] - hidden[-1]).max() < 1e-5)
    ((3, 1, 3, 384), (2, 1, 12, 3, 3), True)
    """
    (batch, n, d), h = x.shape, config.n_heads
    x = x.reshape(batch * n, d)  # (batch n, d): one row per position
    mask = padding_mask(lengths, n)[:, None]  # (batch, 1, 1, n)
    activation, hidden, attention = ACTIVATIONS[config.activation], [x], []
    for layer in layers:
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
    attention = np.stack(attention) if attention else np.zeros((0, batch, h, n, n), x.dtype)
    return np.stack(hidden).reshape(-1, batch, n, d), attention  # (L + 1, batch, n, d), (L, batch, h, n, n)
