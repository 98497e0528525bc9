"""What "Attention in a pretrained model" measures on all-MiniLM-L6-v2: where the weight goes, positional heads,
attention against a leave-one-out attribution, and how much each head matters to the similarity of pairs.

>>> from attnbook.pretrained.bert import encode_sentences
>>> encoded = encode_sentences(["Good night, sweet prince"])
>>> cls = np.zeros_like(encoded.mask)
>>> cls[:, 0] = True                                              # the [CLS] token of each sentence
>>> weight_share(encoded.attention, encoded.mask, cls).shape      # (layers, heads)
(6, 12)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..masks import padding_mask
from .bert import Pretrained, mean_pool, without_heads
from .fast import bert_forward_fast, encoder_layers_fast
from .wordpiece import check_sentences, encode_batch

__all__ = ["LeaveOneOut", "head_importance", "leave_one_out", "offset_weight", "pair_similarities",
           "ranking_quality", "sentence_embeddings", "spearman", "weight_share"]


def _attention_arguments(attention, mask, keys) -> tuple:
    attention, mask, keys = np.asarray(attention), np.asarray(mask), np.asarray(keys)
    if attention.ndim != 5 or attention.shape[-1] != attention.shape[-2]:
        raise ValueError(f"attention must have shape (layers, batch, heads, n, n), got {attention.shape}")
    expected = (attention.shape[1], attention.shape[-1])
    for name, array in (("mask", mask), ("keys", keys)):
        if array.shape != expected or array.dtype != bool:
            raise ValueError(f"{name} must be booleans of shape (batch, n) = {expected}, got {array.dtype} {array.shape}")
    return attention, mask, keys


def weight_share(attention, mask, keys) -> np.ndarray:
    r"""Each head's share of the weight on some keys, over every real query of every sentence.

    .. math:: \text{share}^{(l, h)} = \frac{1}{\sum_b n_b} \sum_b \sum_{i \le n_b} \sum_{j \in S_b} A^{(l, h)}_{b, ij}

    Parameters
    ----------
    attention : array_like
        ``(layers, batch, heads, n, n)`` weights (``Encoded.attention``).
    mask : array_like of bool
        ``(batch, n)``: True on the real tokens (``Encoded.mask``).
    keys : array_like of bool
        ``(batch, n)``: True on the keys :math:`S_b` counted (the ``[CLS]`` token, say).

    Returns
    -------
    ndarray
        ``(layers, heads)``, each in [0, 1].

    Examples
    --------
    >>> attention = np.array([[0.5, 0.5], [0.25, 0.75]])[None, None, None]   # one head on one sentence
    >>> weight_share(attention, np.array([[True, True]]), np.array([[True, False]])).tolist()
    [[0.375]]
    """
    attention, mask, keys = _attention_arguments(attention, mask, keys)
    on_keys = (attention * keys[None, :, None, None, :]).sum(-1)  # (layers, batch, heads, n)
    return (on_keys * mask[None, :, None, :]).sum((1, 3)) / mask.sum()  # (layers, heads)


def offset_weight(attention, lengths, offset: int) -> np.ndarray:
    r"""Each head's mean weight from a word token to the word token at ``offset`` from it.

    .. math:: w_o^{(l, h)} = \operatorname{mean}_{b,\, i} A^{(l, h)}_{b, i, i + o}, \qquad
              1 \le i,\ i + o \le n_b - 2

    Word tokens are all but the first (``[CLS]``) and the last (``[SEP]``) of each sentence.

    Parameters
    ----------
    attention : array_like
        ``(layers, batch, heads, n, n)`` weights.
    lengths : array_like of int
        ``(batch,)`` the real tokens of each sentence, ``[CLS]`` and ``[SEP]`` included.
    offset : int
        ``-1`` the previous token, ``0`` the token itself, ``1`` the next.

    Returns
    -------
    ndarray
        ``(layers, heads)``.

    Examples
    --------
    >>> attention = np.eye(5, k=-1)[None, None, None]       # every query on the token before it
    >>> offset_weight(attention, [5], -1).tolist(), offset_weight(attention, [5], 1).tolist()
    ([[1.0]], [[0.0]])
    """
    attention, lengths = np.asarray(attention), np.asarray(lengths)
    if attention.ndim != 5 or lengths.shape != attention.shape[1:2]:
        raise ValueError(f"attention (layers, batch, heads, n, n) {attention.shape} and lengths (batch,) "
                         f"{lengths.shape} do not fit")
    if not isinstance(offset, (int, np.integer)) or isinstance(offset, bool):
        raise TypeError(f"offset must be an int, got {offset!r}")
    total, count = np.zeros(attention.shape[0:1] + attention.shape[2:3]), 0
    for b, length in enumerate(lengths):
        queries = np.arange(1, length - 1)  # word tokens: not [CLS], not [SEP]
        keys = queries + offset
        kept = (keys >= 1) & (keys <= length - 2)
        total += attention[:, b][:, :, queries[kept], keys[kept]].sum(-1)  # (layers, heads)
        count += int(kept.sum())
    if count == 0:
        raise ValueError(f"no word token has a word token at offset {offset}: the sentences are too short")
    return total / count


def spearman(x, y) -> float:
    r"""Spearman's rank correlation: the correlation of the ranks (values without ties).

    .. math:: \rho = \operatorname{corr}\big(\operatorname{rank}(x), \operatorname{rank}(y)\big)

    Parameters
    ----------
    x, y : array_like
        Two vectors of one length, at least 2.

    Returns
    -------
    float
        In [-1, 1]: 1 when the two order the items alike, -1 when in reverse.

    Examples
    --------
    >>> spearman([0.1, 0.5, 0.3], [1, 3, 2]), spearman([0.1, 0.5, 0.3], [3, 1, 2])
    (1.0, -1.0)
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.ndim != 1 or x.shape != y.shape or len(x) < 2:
        raise ValueError(f"x and y must be two vectors of one length >= 2, got shapes {x.shape} and {y.shape}")
    ranks = [np.argsort(np.argsort(v, kind="stable"), kind="stable") for v in (x, y)]  # (k,) each, 0 the smallest
    return float(np.corrcoef(*ranks)[0, 1])


def _check_model(model) -> Pretrained:
    if not isinstance(model, Pretrained):
        raise TypeError(f"model must be a Pretrained (from load_minilm), got {type(model).__name__}")
    return model


def _embed(ids, lengths, model: Pretrained) -> np.ndarray:
    hidden, _ = bert_forward_fast.unchecked(ids, lengths, model.weights, model.config)  # (L + 1, batch, n, d)
    return mean_pool.unchecked(hidden[-1], padding_mask(lengths, ids.shape[1])[:, 0, :])  # (batch, d)


def _embeddings_arguments(sentences, model, batch_size=16) -> tuple:
    if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    return check_sentences(sentences), _check_model(model), int(batch_size)


def sentence_embeddings(sentences, model: Pretrained, batch_size: int = 16) -> np.ndarray:
    r"""Many sentences' embeddings by the fast forward pass, in batches of sentences of similar length.

    .. math:: e(\text{sentence}) = \operatorname{normalise}\Big(\frac{1}{n} \sum_{i \le n} h^{(L)}_i\Big)

    The embeddings of :func:`~attnbook.pretrained.bert.encode_sentences`, without its hidden states and
    attention: the sentences are sorted by length and cut into batches, so that little is padding.

    Parameters
    ----------
    sentences : list of str
        At least one.
    model : Pretrained
        See :func:`attnbook.pretrained.bert.load_minilm`.
    batch_size : int, default 16
        Sentences per forward pass.

    Returns
    -------
    ndarray
        ``(sentences, d_model)`` in the sentences' order, each row of length 1.

    Examples
    --------
    >>> from attnbook.pretrained.bert import encode_sentences, load_minilm
    >>> model = load_minilm()
    >>> sentences = ["Good night, sweet prince", "To be, or not to be, that is the question", "Exit"]
    >>> fast = sentence_embeddings(sentences, model, batch_size=2)
    >>> fast.shape, bool(np.abs(fast - encode_sentences(sentences, model).embedding).max() < 1e-5)
    ((3, 384), True)
    """
    sentences, model, batch_size = _embeddings_arguments(sentences, model, batch_size)
    tokens = encode_batch.unchecked(sentences, model.vocabulary, model.config.max_length)
    order = np.argsort(tokens.lengths, kind="stable")  # (sentences,): shortest first
    out = np.zeros((len(sentences), model.config.d_model), dtype=model.weights.embeddings.words.dtype)
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]  # (b,)
        lengths = tokens.lengths[rows]  # (b,)
        out[rows] = _embed(tokens.ids[rows, : lengths.max()], lengths, model)  # (b, d_model)
    return out


class LeaveOneOut(NamedTuple):
    """What :func:`leave_one_out` measures on a pair of sentences.

    Attributes
    ----------
    similarity : float
        The cosine similarity of the two sentences' embeddings.
    drop : ndarray
        ``(m,)`` for each word token of the first sentence, the similarity minus the similarity without it.
    received : ndarray
        ``(m,)`` the weight each word token receives, averaged over layers, heads and queries.
    tokens : list of str
        The first sentence's ``m`` word tokens.

    Examples
    --------
    >>> LeaveOneOut(0.5, np.zeros(2), np.ones(2), ["a", "b"]).tokens
    ['a', 'b']
    """

    similarity: float
    drop: np.ndarray
    received: np.ndarray
    tokens: list


def leave_one_out(first: str, second: str, model: Pretrained) -> LeaveOneOut:
    r"""Each word token's leave-one-out attribution to a pair's similarity, and the attention it receives.

    .. math:: \text{drop}_j = e \cdot e' - e_{-j} \cdot e', \qquad
              \text{received}_j = \operatorname{mean}_{l, h, i} A^{(l, h)}_{ij}

    :math:`e_{-j}` embeds the first sentence's ids with token :math:`j` deleted; the sentence and
    its variants are one batch of the fast forward pass.

    Parameters
    ----------
    first, second : str
        The sentences; the first is attributed.
    model : Pretrained
        See :func:`attnbook.pretrained.bert.load_minilm`.

    Returns
    -------
    LeaveOneOut

    Examples
    --------
    >>> from attnbook.pretrained.bert import load_minilm
    >>> result = leave_one_out("A man plays a guitar.", "Someone strums a guitar.", load_minilm())
    >>> result.tokens, result.drop.shape, bool(result.received.sum() < 1)   # [CLS] and [SEP] receive the rest
    (['a', 'man', 'plays', 'a', 'guitar', '.'], (6,), True)
    """
    first, second = check_sentences([first, second])
    model = _check_model(model)
    batch = encode_batch.unchecked([first, second], model.vocabulary, model.config.max_length)
    ids = batch.ids[0, : batch.lengths[0]]  # (m + 2,)
    rows = np.array([ids] + [np.pad(np.delete(ids, j), (0, 1)) for j in range(1, len(ids) - 1)])  # (m + 1, m + 2)
    lengths = np.array([len(ids)] + [len(ids) - 1] * (len(ids) - 2))  # (m + 1,)
    hidden, attention = bert_forward_fast.unchecked(rows, lengths, model.weights, model.config)
    e = mean_pool.unchecked(hidden[-1], padding_mask(lengths, len(ids))[:, 0, :])  # (m + 1, d)
    target = _embed(batch.ids[1:], batch.lengths[1:], model)[0]  # (d,)
    similarity = e @ target  # (m + 1,)
    received = attention[:, 0].mean(axis=(0, 1, 2))[1:-1]  # (m,): the intact sentence's weight on each word token
    return LeaveOneOut(float(similarity[0]), similarity[0] - similarity[1:], received, batch.tokens[0][1:-1])


def _pairs_arguments(firsts, seconds, model) -> tuple:
    firsts, seconds = check_sentences(firsts), check_sentences(seconds)
    if len(firsts) != len(seconds):
        raise ValueError(f"firsts and seconds must pair up one to one, got {len(firsts)} and {len(seconds)} sentences")
    return firsts, seconds, _check_model(model)


class _Pairs(NamedTuple):
    ids: np.ndarray  # (distinct, n)
    lengths: np.ndarray  # (distinct,)
    first: np.ndarray  # (pairs,) the row of each pair's first sentence
    second: np.ndarray  # (pairs,)


def _distinct(firsts, seconds, model) -> _Pairs:
    """Each distinct sentence of the pairs once, and where each pair's sentences are."""
    sentences = list(dict.fromkeys(firsts + seconds))
    batch = encode_batch.unchecked(sentences, model.vocabulary, model.config.max_length)
    where = {sentence: row for row, sentence in enumerate(sentences)}
    return _Pairs(batch.ids, batch.lengths, np.array([where[s] for s in firsts]), np.array([where[s] for s in seconds]))


def _similarities(embeddings, pairs: _Pairs) -> np.ndarray:
    return (embeddings[..., pairs.first, :] * embeddings[..., pairs.second, :]).sum(-1)  # (..., pairs)


def pair_similarities(firsts, seconds, model: Pretrained) -> np.ndarray:
    r"""The cosine similarity of each pair of sentences, every distinct sentence embedded once.

    .. math:: s_k = e(\text{first}_k) \cdot e(\text{second}_k)

    Parameters
    ----------
    firsts, seconds : list of str
        The pairs' sentences, one to one.
    model : Pretrained
        See :func:`attnbook.pretrained.bert.load_minilm`; pass ``without_heads(...)`` for an ablated model.

    Returns
    -------
    ndarray
        ``(pairs,)`` in [-1, 1].

    Examples
    --------
    >>> from attnbook.pretrained.bert import load_minilm
    >>> s = pair_similarities(["The cat sat.", "The cat sat."], ["A cat was sitting.", "Stocks fell."], load_minilm())
    >>> bool(s[0] > s[1])
    True
    """
    firsts, seconds, model = _pairs_arguments(firsts, seconds, model)
    pairs = _distinct(firsts, seconds, model)
    return _similarities(_embed(pairs.ids, pairs.lengths, model), pairs)


def head_importance(firsts, seconds, model: Pretrained) -> np.ndarray:
    r"""How much each head matters to the pairs' similarities: the mean change when it alone is removed.

    .. math:: I^{(l, h)} = \frac{1}{K} \sum_{k} \big| s_k - s_k^{-(l, h)} \big|

    Removing a head of layer :math:`l` (:func:`~attnbook.pretrained.bert.without_heads`) changes nothing
    before it, so each ablated pass starts from the intact pass's states before layer :math:`l`
    (:func:`~attnbook.pretrained.fast.encoder_layers_fast`): the same numbers as 72 whole passes, in about
    half the time.

    Parameters
    ----------
    firsts, seconds : list of str
        The pairs' sentences, one to one.
    model : Pretrained
        See :func:`attnbook.pretrained.bert.load_minilm`.

    Returns
    -------
    ndarray
        ``(layers, heads)``, each >= 0.

    Examples
    --------
    >>> from attnbook.pretrained.bert import load_minilm
    >>> importance = head_importance(["The cat sat on the mat."], ["A cat was sitting on a rug."], load_minilm())
    >>> importance.shape, bool(importance.min() >= 0 and importance.max() > 0)
    ((6, 12), True)
    """
    firsts, seconds, model = _pairs_arguments(firsts, seconds, model)
    pairs, config = _distinct(firsts, seconds, model), model.config
    hidden, _ = bert_forward_fast.unchecked(pairs.ids, pairs.lengths, model.weights, config)  # (L + 1, batch, n, d)
    mask = padding_mask(pairs.lengths, pairs.ids.shape[1])[:, 0, :]  # (batch, n)
    base = _similarities(mean_pool.unchecked(hidden[-1], mask), pairs)  # (pairs,)
    importance = np.zeros((config.n_layers, config.n_heads))
    for layer in range(config.n_layers):
        for head in range(config.n_heads):
            layers = without_heads.unchecked(model, [(layer, head)]).weights.layers[layer:]
            states, _ = encoder_layers_fast.unchecked(hidden[layer], pairs.lengths, layers, config)
            ablated = _similarities(mean_pool.unchecked(states[-1], mask), pairs)  # (pairs,)
            importance[layer, head] = np.abs(ablated - base).mean()
    return importance


def ranking_quality(similarity, paraphrase) -> float:
    r"""The share of (paraphrase, non-paraphrase) couples in which the paraphrase is the more similar pair.

    .. math:: Q = \frac{1}{|P|\,|N|} \sum_{p \in P} \sum_{q \in N} [\, s_p > s_q \,]

    the area under the ROC curve of the similarity as a paraphrase detector: 1 for a perfect ranking.

    Parameters
    ----------
    similarity : array_like
        ``(pairs,)`` each pair's similarity.
    paraphrase : array_like of bool
        ``(pairs,)`` True for the paraphrases; at least one of each kind.

    Returns
    -------
    float
        In [0, 1].

    Examples
    --------
    >>> ranking_quality([0.9, 0.5, 0.6, 0.2], [True, True, False, False])
    0.75
    """
    similarity, paraphrase = np.asarray(similarity, dtype=float), np.asarray(paraphrase)
    if similarity.ndim != 1 or paraphrase.shape != similarity.shape or paraphrase.dtype != bool:
        raise ValueError(f"paraphrase must be booleans of the similarity's shape {similarity.shape}, got "
                         f"{paraphrase.dtype} {paraphrase.shape}")
    if paraphrase.all() or not paraphrase.any():
        raise ValueError("paraphrase must mark at least one paraphrase and one non-paraphrase")
    return float(np.mean(similarity[paraphrase][:, None] > similarity[~paraphrase][None, :]))
