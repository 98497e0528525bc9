"""Decoding the reversal model one token at a time, with a key-value cache or without, and its greedy accuracy.

Decoding runs the decoder one token at a time (:mod:`attnbook.learning.decoding`). With a cache
(:func:`reversal_decoder`, ``cache=True``) a step feeds the new token only: each decoder layer appends
the token's self-attention key and value to a :class:`attnbook.efficient.kv_cache.KVCache` and attends
over it, and the cross-attention reads keys and values of the encoder output computed once. Without a
cache a step reruns the decoder on the whole prefix and keeps its last row. Both give the same logits;
the cache does less work per token (:func:`attnbook.learning.analysis.seq2seq.decoding_speed`).

>>> trained = load_reversal()
>>> decoder = reversal_decoder(trained.params, [[3, 4, 5, 6]], trained.config)
>>> greedy_decode(decoder.step, decoder.state, decoder.batch_size, decoder.max_length).tokens.tolist()
[[6, 5, 4, 3, 2]]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import numpy as np

from ...attention import scaled_dot_product_attention
from ...efficient.kv_cache import KVCache
from ...multihead import merge_heads, split_heads
from ...transformer import feed_forward, layer_norm
from ...validation import check_positive_int
from ..decoding import greedy_decode
from ...transformer import decoder_layer, encoder_layer
from ..models import scaffold
from ..models.seq2seq import MODEL, ReversalConfig, ReversalParameters, load_reversal, positions
from ..tasks import PAD, Seq2SeqBatch, check_seq2seq_batch, check_tokens, reversal_batch

__all__ = ["CachedState", "PrefixState", "ReversalDecoder", "reversal_accuracy", "reversal_decoder"]


def embed(table: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    r"""Unchecked kernel: :math:`\sqrt{d}\, E[\text{tokens}] + \mathrm{PE}`, ``(batch, n)`` tokens to ``(batch, n, d)``.

    >>> embed(np.zeros((3, 2)), np.array([[0, 2]]))[0].tolist()   # the positions alone: sin 0, cos 0; sin 1, cos 1
    [[0.0, 1.0], [0.8414709848078965, 0.5403023058681398]]
    """
    d = table.shape[1]
    return math.sqrt(d) * table[tokens] + positions(tokens.shape[1], d)  # (batch, n, d)


def run_encoder(params: ReversalParameters, source: np.ndarray, n_heads: int) -> np.ndarray:
    """Unchecked kernel: the encoder, forward only (:func:`attnbook.encoder_layer`); the memory ``(batch, n_src, d)``.

    >>> config = ReversalConfig(d_model=8, d_ff=16, n_encoder_layers=1)
    >>> from attnbook.learning.models.seq2seq import init_reversal
    >>> run_encoder(init_reversal(config), np.array([[3, 0]]), 2).shape
    (1, 2, 8)
    """
    x, mask = embed(params.embedding, source), (source != PAD)[:, None, None, :]  # (batch, n_src, d), (b, 1, 1, n_src)
    for layer in params.encoder:
        x = encoder_layer.unchecked(x, layer, n_heads, mask).output  # (batch, n_src, d)
    return x


def run_decoder(params: ReversalParameters, target_in: np.ndarray, memory: np.ndarray, source_mask, n_heads: int):
    """Unchecked kernel: the decoder on a whole target, forward only (:func:`attnbook.decoder_layer`): ``y``.

    >>> config = ReversalConfig(d_model=8, d_ff=16, n_decoder_layers=1)
    >>> from attnbook.learning.models.seq2seq import init_reversal
    >>> run_decoder(init_reversal(config), np.array([[1, 5]]), np.ones((1, 3, 8)), None, 2).shape
    (1, 2, 8)
    """
    y = embed(params.embedding, target_in)  # (batch, n_tgt, d); source_mask (batch, 1, 1, n_src)
    for layer in params.decoder:
        y = decoder_layer.unchecked(y, memory, layer, n_heads, source_mask).output  # (batch, n_tgt, d)
    return y


class CachedState(NamedTuple):
    """What the cached decoder carries from step to step.

    The caches grow by one token per step, in place: a state is used once, then replaced by the one
    the step returns (which holds the same caches).

    Attributes
    ----------
    caches : tuple of KVCache
        Per decoder layer, the self-attention keys and values of the tokens fed so far,
        ``batch_shape = (batch, h)``, ``d_k = d_v = d_model / h``.
    cross_keys : tuple of ndarray
        Per decoder layer, ``(batch, h, n_src, d_head)`` the cross-attention keys of the encoder output.
    cross_values : tuple of ndarray
        Per decoder layer, ``(batch, h, n_src, d_head)`` its values.
    source_mask : ndarray
        ``(batch, 1, 1, n_src)`` True on real source tokens.
    self_rows : tuple of ndarray
        Per decoder layer, ``(batch, h, t + 1)`` the newest token's row of causal self-attention
        weights, over the positions ``0 .. t`` in the cache (empty before the first step).

    Examples
    --------
    >>> trained = load_reversal()
    >>> state = reversal_decoder(trained.params, [[3, 4, 5]], trained.config).state
    >>> len(state.caches[0]), state.caches[0].keys.shape, state.cross_keys[0].shape
    (0, (1, 2, 0, 16), (1, 2, 3, 16))
    """

    caches: tuple  # per layer: KVCache, batch_shape (batch, h)
    cross_keys: tuple  # per layer: (batch, h, n_src, d_head)
    cross_values: tuple  # per layer: (batch, h, n_src, d_head)
    source_mask: np.ndarray  # (batch, 1, 1, n_src)
    self_rows: tuple = ()  # per layer: (batch, h, t + 1), the newest row of self-attention weights


class PrefixState(NamedTuple):
    """What the decoder without a cache carries: the encoder output and the tokens fed so far.

    Attributes
    ----------
    memory : ndarray
        ``(batch, n_src, d_model)`` the encoder output.
    source_mask : ndarray
        ``(batch, 1, 1, n_src)`` True on real source tokens.
    prefix : ndarray
        ``(batch, t)`` int64 the tokens fed so far (BOS first); every step reruns the decoder on it.

    Examples
    --------
    >>> trained = load_reversal()
    >>> state = reversal_decoder(trained.params, [[3, 4, 5]], trained.config, cache=False).state
    >>> state.memory.shape, state.prefix.shape
    ((1, 3, 32), (1, 0))
    """

    memory: np.ndarray  # (batch, n_src, d_model)
    source_mask: np.ndarray  # (batch, 1, 1, n_src)
    prefix: np.ndarray  # (batch, t)


class ReversalDecoder(NamedTuple):
    """A model ready for :mod:`attnbook.learning.decoding`: its ``step``, ``reorder`` and first ``state``.

    Attributes
    ----------
    step : callable
        ``step(state, tokens) -> (logits, state)``: ``tokens`` ``(batch,)``, ``logits`` ``(batch, vocab)``.
    reorder : callable
        ``reorder(state, index) -> state``: row ``r`` of the result is row ``index[r]`` (beam search).
    state : CachedState or PrefixState
        The state before the first token, the source encoded.
    batch_size : int
        Rows of the state: the number of sources.
    max_length : int
        The most tokens the state has room for (the capacity of the caches).

    Examples
    --------
    >>> trained = load_reversal()
    >>> decoder = reversal_decoder(trained.params, [[3, 4, 5, 6]], trained.config)
    >>> greedy_decode(decoder.step, decoder.state, decoder.batch_size, decoder.max_length).tokens.tolist()
    [[6, 5, 4, 3, 2]]
    """

    step: Callable
    reorder: Callable
    state: object
    batch_size: int
    max_length: int


def cached_step(params: ReversalParameters, n_heads: int, state: CachedState, tokens: np.ndarray) -> tuple:
    r"""Unchecked kernel: one decoder step with the key-value cache; returns ``(logits (batch, vocab), state)``.

    For the new token at position :math:`t`, in each decoder layer: its query, key and value;
    :math:`K \leftarrow [K; k_t]`, :math:`V \leftarrow [V; v_t]`; attention of :math:`q_t` over the
    cache (causal by construction: the cache holds positions :math:`\le t`), then cross-attention over
    the stored keys and values of the encoder output, then the feed-forward network.

    >>> trained = load_reversal()
    >>> decoder = reversal_decoder(trained.params, [[3, 4]], trained.config)
    >>> logits, state = cached_step(trained.params, 2, decoder.state, np.array([1]))
    >>> int(logits.argmax()), len(state.caches[0]), state.self_rows[0].shape
    (4, 1, (1, 2, 1))
    """
    d = params.embedding.shape[1]
    t = len(state.caches[0])  # position of the new token
    x = math.sqrt(d) * params.embedding[tokens][:, None, :] + positions(state.caches[0].capacity, d)[t]  # (batch, 1, d)
    rows = []
    for layer, cache, cross_k, cross_v in zip(params.decoder, state.caches, state.cross_keys, state.cross_values):
        w = layer.self_attention
        q = split_heads.unchecked((x @ w.w_q + w.b_q), n_heads)  # (batch, h, 1, d_head)
        k = split_heads.unchecked((x @ w.w_k + w.b_k), n_heads)  # (batch, h, 1, d_head)
        v = split_heads.unchecked((x @ w.w_v + w.b_v), n_heads)  # (batch, h, 1, d_head)
        cache.write(k, v)  # the cache now holds positions 0 .. t
        scale = 1.0 / math.sqrt(q.shape[-1])
        heads, weights = scaled_dot_product_attention.unchecked(q, cache.keys, cache.values, None, scale)  # (batch, h, 1, d_head), (.., t + 1)
        rows.append(weights[:, :, 0])  # (batch, h, t + 1): the new row of the causal self-attention
        attended = (merge_heads.unchecked(heads) @ w.w_o + w.b_o)  # (batch, 1, d)
        x = layer_norm.unchecked(x + attended, *layer.norm_1)  # (batch, 1, d)
        w = layer.cross_attention
        q = split_heads.unchecked((x @ w.w_q + w.b_q), n_heads)  # (batch, h, 1, d_head)
        heads = scaled_dot_product_attention.unchecked(q, cross_k, cross_v, state.source_mask, scale).output  # (batch, h, 1, d_head)
        crossed = (merge_heads.unchecked(heads) @ w.w_o + w.b_o)  # (batch, 1, d)
        x = layer_norm.unchecked(x + crossed, *layer.norm_2)  # (batch, 1, d)
        x = layer_norm.unchecked(x + feed_forward.unchecked(x, layer.feed_forward), *layer.norm_3)  # (batch, 1, d)
    logits = (x[:, 0] @ params.embedding.T)  # (batch, vocab)
    return logits, state._replace(self_rows=tuple(rows))


def prefix_step(params: ReversalParameters, n_heads: int, state: PrefixState, tokens: np.ndarray) -> tuple:
    """Unchecked kernel: one decoder step without a cache, rerunning the decoder on the whole prefix.

    >>> trained = load_reversal()
    >>> decoder = reversal_decoder(trained.params, [[3, 4]], trained.config, cache=False)
    >>> logits, state = prefix_step(trained.params, 2, decoder.state, np.array([1]))
    >>> int(logits.argmax()), state.prefix.tolist()
    (4, [[1]])
    """
    prefix = np.concatenate([state.prefix, tokens[:, None]], axis=1)  # (batch, t + 1)
    y = run_decoder(params, prefix, state.memory, state.source_mask, n_heads)  # (batch, t + 1, d)
    logits = (y[:, -1] @ params.embedding.T)  # (batch, vocab): the last position's
    return logits, PrefixState(state.memory, state.source_mask, prefix)


def reordered_cache(cache: KVCache, index: np.ndarray) -> KVCache:
    """Unchecked kernel: a new cache of the same capacity holding rows ``index`` of ``cache``'s batch axis.

    The :class:`~attnbook.efficient.kv_cache.KVCache` grows by one token at a time, so the reordered
    keys and values are written back token by token.

    >>> cache = KVCache(3, 1, 1, batch_shape=(2,))
    >>> cache.append(np.array([[[1.0]], [[2.0]]]), np.zeros((2, 1, 1)))
    >>> reordered_cache(cache, np.array([1, 1, 0])).keys[:, 0, 0].tolist()
    [2.0, 2.0, 1.0]
    """
    keys, values = cache.keys[index], cache.values[index]  # (batch', ..., t, d_k), (batch', ..., t, d_v)
    new = KVCache(cache.capacity, keys.shape[-1], values.shape[-1], keys.shape[:-2], keys.dtype)
    for s in range(len(cache)):
        new.write(keys[..., s:s + 1, :], values[..., s:s + 1, :])
    return new


def reorder_cached(state: CachedState, index: np.ndarray) -> CachedState:
    """Unchecked kernel: rows ``index`` of a :class:`CachedState` (beam search's reorder).

    >>> trained = load_reversal()
    >>> decoder = reversal_decoder(trained.params, [[3, 4]], trained.config)
    >>> reorder_cached(decoder.state, np.zeros(3, dtype=int)).cross_keys[0].shape
    (3, 2, 2, 16)
    """
    return CachedState(tuple(reordered_cache(cache, index) for cache in state.caches),
                       tuple(k[index] for k in state.cross_keys), tuple(v[index] for v in state.cross_values),
                       state.source_mask[index], tuple(row[index] for row in state.self_rows))


def reorder_prefix(state: PrefixState, index: np.ndarray) -> PrefixState:
    """Unchecked kernel: rows ``index`` of a :class:`PrefixState` (beam search's reorder).

    >>> trained = load_reversal()
    >>> decoder = reversal_decoder(trained.params, [[3, 4]], trained.config, cache=False)
    >>> reorder_prefix(decoder.state, np.zeros(3, dtype=int)).memory.shape
    (3, 2, 32)
    """
    return PrefixState(state.memory[index], state.source_mask[index], state.prefix[index])


def start_decoder(params: ReversalParameters, source: np.ndarray, n_heads: int, cache: bool,
                  max_length: int) -> ReversalDecoder:
    """Unchecked kernel of :func:`reversal_decoder`.

    >>> trained = load_reversal()
    >>> start_decoder(trained.params, np.array([[3, 4]]), 2, True, 5).state.caches[1].capacity
    5
    """
    mask = (source != PAD)[:, None, None, :]  # (batch, 1, 1, n_src)
    memory = run_encoder(params, source, n_heads)  # (batch, n_src, d)
    batch = source.shape[0]
    if not cache:
        state = PrefixState(memory, mask, np.zeros((batch, 0), dtype=np.int64))
        return ReversalDecoder(partial(prefix_step, params, n_heads), reorder_prefix, state, batch, max_length)
    d_head = memory.shape[-1] // n_heads
    caches, keys, values = [], [], []
    for layer in params.decoder:
        w = layer.cross_attention
        k = (memory @ w.w_k + w.b_k)  # (batch, n_src, d): once per source
        v = (memory @ w.w_v + w.b_v)  # (batch, n_src, d)
        keys.append(split_heads.unchecked(k, n_heads))  # (batch, h, n_src, d_head)
        values.append(split_heads.unchecked(v, n_heads))  # (batch, h, n_src, d_head)
        caches.append(KVCache(max_length, d_head, d_head, batch_shape=(batch, n_heads)))
    state = CachedState(tuple(caches), tuple(keys), tuple(values), mask)
    return ReversalDecoder(partial(cached_step, params, n_heads), reorder_cached, state, batch, max_length)


def reversal_decoder(params: ReversalParameters, source, config: ReversalConfig, cache: bool = True,
                     max_length: int | None = None) -> ReversalDecoder:
    r"""Encode ``source``; return the model's ``step``, ``reorder`` and first state, for any decoding strategy.

    .. math:: \text{cache:}\ \ O(t)\ \text{work at step } t, \qquad
              \text{no cache:}\ \ O(t^2)\ \text{(the decoder rerun on all } t \text{ tokens)}

    Both steps compute the same logits. With ``cache=True`` the state is a :class:`CachedState`: per
    decoder layer a :class:`~attnbook.efficient.kv_cache.KVCache` of self-attention keys and values,
    and the cross-attention keys and values of the encoder output, computed here once. With
    ``cache=False`` it is a :class:`PrefixState` and each step reruns the decoder on the prefix.

    Parameters
    ----------
    params : ReversalParameters
        The model.
    source : array_like of int
        ``(batch, n_src)`` source tokens, PAD after each string.
    config : ReversalConfig
        The model's configuration.
    cache : bool, optional
        Decode with the key-value cache (default) or rerun the decoder on the prefix at every step.
    max_length : int, optional
        The most tokens to generate; default ``n_src + 1`` (the reversal and EOS).

    Returns
    -------
    ReversalDecoder
        ``step``, ``reorder``, ``state``, ``batch_size`` and ``max_length``.

    Examples
    --------
    >>> trained = load_reversal()
    >>> source = reversal_batch(4, 10, 3, 8, seed=5).source
    >>> fast = reversal_decoder(trained.params, source, trained.config)
    >>> slow = reversal_decoder(trained.params, source, trained.config, cache=False)
    >>> a = greedy_decode(fast.step, fast.state, 4, fast.max_length)
    >>> b = greedy_decode(slow.step, slow.state, 4, slow.max_length)
    >>> bool(np.array_equal(a.tokens, b.tokens)), bool(np.allclose(a.log_probs, b.log_probs, rtol=0, atol=1e-10))
    (True, True)
    """
    params, config = scaffold.check_model(MODEL, params, config)
    source = check_tokens(source, "source", config.vocab_size, real=True)  # (batch, n_src)
    if not isinstance(cache, (bool, np.bool_)):
        raise TypeError(f"cache must be True or False, got {cache!r}")
    max_length = source.shape[1] + 1 if max_length is None else check_positive_int(max_length, "max_length")
    return start_decoder(params, source, config.n_heads, bool(cache), max_length)


# --- what the trained model does ---------------------------------------------------------------------------


def exact_matches(params: ReversalParameters, batch: Seq2SeqBatch, n_heads: int) -> np.ndarray:
    """Unchecked kernel of :func:`reversal_accuracy`: ``(batch,)`` True where greedy decoding is exactly the target.

    >>> trained = load_reversal()
    >>> exact_matches(trained.params, reversal_batch(3, 10, 3, 8, seed=0), 2).tolist()
    [True, True, True]
    """
    decoder = start_decoder(params, batch.source, n_heads, True, batch.target_out.shape[1])
    out = greedy_decode(decoder.step, decoder.state, decoder.batch_size, decoder.max_length)
    decoded = np.full(batch.target_out.shape, PAD, dtype=np.int64)  # (batch, n_tgt)
    decoded[:, : out.tokens.shape[1]] = out.tokens
    return np.all(decoded == batch.target_out, axis=1)  # (batch,)


def reversal_accuracy(params: ReversalParameters, batch: Seq2SeqBatch, config: ReversalConfig) -> float:
    r"""Share of the batch's sources whose greedy decoding is exactly their reversal, EOS included.

    .. math:: \frac{1}{B} \sum_b \bigl[\hat y_b = y_b\bigr], \qquad
              \hat y_{b,t} = \arg\max_v p(v \mid \hat y_{b,<t}, s_b)

    Parameters
    ----------
    params : ReversalParameters
        The model.
    batch : Seq2SeqBatch
        Sources and targets, e.g. the held-out batch ``reversal_batch(config.test_sequences, ...,
        seed=config.test_seed)``.
    config : ReversalConfig
        The model's configuration.

    Returns
    -------
    float
        Exact-match accuracy in ``[0, 1]``.

    Examples
    --------
    >>> trained = load_reversal()
    >>> config = trained.config
    >>> batch = reversal_batch(50, config.n_symbols, config.min_length, config.max_length, seed=11)
    >>> reversal_accuracy(trained.params, batch, config)
    1.0
    """
    params, config = scaffold.check_model(MODEL, params, config)
    batch = check_seq2seq_batch(batch, config.vocab_size)
    return float(exact_matches(params, batch, config.n_heads).mean())
