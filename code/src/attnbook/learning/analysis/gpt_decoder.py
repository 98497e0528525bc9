"""Writing with the trained GPT one character at a time, with a key-value cache or by recomputing the text.

With the cache (:func:`cached_step`) each step runs the new position only and attends to the stored,
already rotated keys and values of the earlier ones; without (:func:`recomputing_step`) each step runs
the whole text again through :func:`attnbook.learning.models.gpt.gpt_forward`'s kernel. Both give the
same logits to float32 round-off, so the same seed writes the same text. Sampling is
:func:`attnbook.learning.decoding.sample` (temperature, top-k, nucleus). :func:`speculative_generate` writes
with a smaller GPT as the draft of speculative sampling (:mod:`attnbook.learning.speculative`), on the same
caches: the target reads each block of proposals in one pass (:func:`cached_block_step`), and both caches are
rolled back to the text kept (:func:`rollback`).

>>> config = gpt.GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8, context=16)
>>> len(generate(gpt.init_gpt(config), config, "To be", 8, seed=1)[0])
8
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from ...masks import causal_mask
from ...modern import rms_norm, swiglu_feed_forward
from ...multihead import attend_grouped, merge_heads, split_heads
from ...positional import rotate, sinusoidal_frequencies
from ...validation import check_positive_int
from ..characters import decode_chars, encode_chars, vocabulary
from ..decoding import sample
from ..models import gpt, scaffold
from ..speculative import CachedModel, speculative_sample, tempered

__all__ = ["Cache", "Speculation", "continuation_probabilities", "generate", "speculative_generate"]


class Cache(NamedTuple):
    """The keys and values of the positions seen so far, per block: what :func:`cached_step` reuses.

    Attributes
    ----------
    keys, values : list of ndarray
        Per block ``(rows, n_kv_heads, length, d_head)``; the keys already rotated.

    Examples
    --------
    >>> Cache([np.zeros((1, 1, 0, 4))], [np.zeros((1, 1, 0, 4))]).keys[0].shape    # nothing seen yet
    (1, 1, 0, 4)
    """

    keys: list  # per block: (rows, h_kv, length, d_head), rotated
    values: list  # per block: (rows, h_kv, length, d_head)


class Speculation(NamedTuple):
    """What :func:`speculative_generate` wrote, and what it cost.

    Attributes
    ----------
    text : str
        The new characters.
    proposed, accepted : int
        Characters the draft proposed, and those of them the target kept.
    target_passes, draft_passes : int
        Forward passes of each model after the prompt (the target's: one per round).

    Examples
    --------
    >>> Speculation("ab", 3, 1, 1, 3).accepted
    1
    """

    text: str
    proposed: int
    accepted: int
    target_passes: int
    draft_passes: int


def cached_block_step(params: gpt.GPTParameters, config: gpt.GPTConfig):
    """Unchecked kernel: ``step(cache, tokens) -> (logits, cache)``, ``m`` new positions in one pass on the cache.

    ``tokens`` ``(rows, m)`` are the next ``m`` tokens; each attends to the cached positions and to the new
    ones up to itself (a causal mask offset by the cache's length), and ``logits`` ``(rows, m, V)`` score
    the token after each. With ``m = 1`` it is :func:`cached_step`; speculative decoding's target scores a
    whole proposed block with it (:func:`speculative_generate`).

    >>> config = gpt.GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8)
    >>> logits, cache = cached_block_step(gpt.init_gpt(config), config)(empty_cache(config, 1), np.array([[5, 6, 7]]))
    >>> logits.shape, cache.keys[0].shape
    ((1, 3, 76), (1, 1, 3, 4))
    """
    theta = sinusoidal_frequencies(config.d_model // config.n_heads)  # (d_head / 2,)
    scale = 1.0 / math.sqrt(config.d_model // config.n_heads)

    def step(cache: Cache, tokens: np.ndarray) -> tuple:
        position, m = cache.keys[0].shape[-2], tokens.shape[1]  # the first new position: the cache's length
        angles = (position + np.arange(m))[:, None] * theta[None, :]  # (m, d_head / 2): the new positions' turns
        mask = causal_mask(m, position + m)  # (m, position + m): the cache and the new positions up to each
        x = params.embedding[tokens]  # (rows, m, d_model)
        keys, values = [], []
        for layer, k_old, v_old in zip(params.layers, cache.keys, cache.values):
            a = layer.attention
            normed = rms_norm.unchecked(x, layer.norm_1, gpt.EPS)  # (rows, m, d_model)
            q = rotate(split_heads.unchecked(normed @ a.w_q + a.b_q, config.n_heads), angles)  # (rows, h, m, d_head)
            k = rotate(split_heads.unchecked(normed @ a.w_k + a.b_k, config.n_kv_heads), angles)  # (rows, h_kv, m, d)
            v = split_heads.unchecked(normed @ a.w_v + a.b_v, config.n_kv_heads)  # (rows, h_kv, m, d_head)
            dtype = x.dtype
            k = np.concatenate([k_old, k.astype(dtype)], axis=-2)  # (rows, h_kv, position + m, d_head)
            v = np.concatenate([v_old, v], axis=-2)
            heads, _ = attend_grouped(q.astype(dtype), k, v, mask, scale)  # (rows, h, m, d_head)
            x = x + merge_heads.unchecked(heads) @ a.w_o + a.b_o  # (rows, m, d_model)
            x = x + swiglu_feed_forward.unchecked(rms_norm.unchecked(x, layer.norm_2, gpt.EPS), layer.feed_forward)
            keys.append(k)
            values.append(v)
        logits = rms_norm.unchecked(x, params.norm, gpt.EPS) @ params.embedding.T  # (rows, m, V)
        return logits, Cache(keys, values)

    return step


def cached_step(params: gpt.GPTParameters, config: gpt.GPTConfig):
    """Unchecked kernel: ``step(cache, tokens) -> (logits, cache)``, one new position on the cached keys and values.

    >>> config = gpt.GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8)
    >>> empty = [np.zeros((1, 1, 0, 4), np.float32)] * 2                  # (rows, h_kv, 0, d_head) per block
    >>> logits, cache = cached_step(gpt.init_gpt(config), config)(Cache(empty, empty), np.array([5]))
    >>> logits.shape, cache.keys[0].shape
    ((1, 76), (1, 1, 1, 4))
    """
    block = cached_block_step(params, config)

    def step(cache: Cache, tokens: np.ndarray) -> tuple:
        logits, cache = block(cache, tokens[:, None])  # (rows, 1, V): a block of one position
        return logits[:, 0], cache  # (rows, V)

    return step


def empty_cache(config: gpt.GPTConfig, rows: int, dtype=np.float32) -> Cache:
    """Unchecked kernel: the cache before the first token, ``(rows, n_kv_heads, 0, d_head)`` per block.

    >>> empty_cache(gpt.GPTConfig(), 2).keys[1].shape
    (2, 2, 0, 16)
    """
    empty = np.zeros((rows, config.n_kv_heads, 0, config.d_model // config.n_heads), dtype=dtype)
    return Cache([empty] * config.n_layers, [empty] * config.n_layers)


def rollback(cache: Cache, n: int) -> Cache:
    """Unchecked kernel: the cache without its newest ``n`` positions, as if they had never been read.

    >>> cache = Cache([np.zeros((1, 1, 5, 4))], [np.zeros((1, 1, 5, 4))])
    >>> rollback(cache, 2).keys[0].shape, rollback(cache, 0).values[0].shape
    ((1, 1, 3, 4), (1, 1, 5, 4))
    """
    keep = cache.keys[0].shape[-2] - n
    return Cache([k[..., :keep, :] for k in cache.keys], [v[..., :keep, :] for v in cache.values])


def recomputing_step(params: gpt.GPTParameters, config: gpt.GPTConfig):
    """Unchecked kernel: ``step(prefix, tokens) -> (logits, prefix)``, the whole prefix run again at every step.

    >>> config = gpt.GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8)
    >>> logits, prefix = recomputing_step(gpt.init_gpt(config), config)(np.array([[3, 4]]), np.array([5]))
    >>> logits.shape, prefix.tolist()
    ((1, 76), [[3, 4, 5]])
    """
    def step(prefix: np.ndarray, tokens: np.ndarray) -> tuple:
        prefix = np.concatenate([prefix, tokens[:, None]], axis=1)  # (rows, t + 1)
        return gpt.taped(params, prefix, config)[0].logits[:, -1], prefix  # (rows, V)

    return step


def generate(params: gpt.GPTParameters, config: gpt.GPTConfig, prompt: str, n_new: int, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, seed: int = 0, rows: int = 1,
             cache: bool = True) -> list[str]:
    r"""Continue ``prompt`` by ``n_new`` sampled characters, with the KV cache or without.

    .. math:: c_{t+1} \sim \operatorname{softmax}\bigl(\operatorname{filter}(z_t / T)\bigr)

    The model reads at most ``context`` characters: the prompt and the new ones together must fit.

    Parameters
    ----------
    params, config : GPTParameters, GPTConfig
        The model's weights and its configuration.
    prompt : str
        At least one character of the vocabulary.
    n_new : int
        Characters to write.
    temperature, top_k, top_p, seed : optional
        As in :func:`attnbook.learning.decoding.sample`.
    rows : int, optional
        Continuations drawn together.
    cache : bool, optional
        Use the KV cache (default) or recompute every step.

    Returns
    -------
    list of str
        ``rows`` continuations (the new characters only).

    Examples
    --------
    >>> config = gpt.GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8, context=16)
    >>> p = gpt.init_gpt(config)
    >>> generate(p, config, "To be", 8, seed=1) == generate(p, config, "To be", 8, seed=1, cache=False)
    True
    """
    params, config = scaffold.check_model(gpt.MODEL, params, config)
    ids = encode_chars(prompt)
    n_new, rows = check_positive_int(n_new, "n_new"), check_positive_int(rows, "rows")
    if len(ids) < 1 or len(ids) + n_new > config.context:
        raise ValueError(f"the prompt ({len(ids)} characters) and n_new = {n_new} must together fit in "
                         f"config.context = {config.context}, with at least one character of prompt")
    vocab = len(vocabulary())
    prefix = np.repeat(ids[None, :-1], rows, axis=0)  # (rows, len(prompt) - 1): all but the last character
    if cache:
        step = cached_step(params, config)
        d_head, dtype = config.d_model // config.n_heads, params.embedding.dtype
        empty = np.zeros((rows, config.n_kv_heads, 0, d_head), dtype=dtype)  # (rows, h_kv, 0, d_head)
        state = Cache([empty] * config.n_layers, [empty] * config.n_layers)
        for t in range(prefix.shape[1]):  # the prompt, one position at a time
            state = step(state, prefix[:, t])[1]
    else:
        step, state = recomputing_step(params, config), prefix
    out = sample(step, state, rows, n_new, temperature, top_k, top_p, seed, bos=int(ids[-1]), eos=vocab)
    return [decode_chars(row) for row in out.tokens]


def gpt_model(params: gpt.GPTParameters, config: gpt.GPTConfig) -> CachedModel:
    """Unchecked kernel: the GPT as speculative decoding runs it, one sequence: its block step and its rollback.

    >>> config = gpt.GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8)
    >>> logits, cache = gpt_model(gpt.init_gpt(config), config).step(empty_cache(config, 1), np.array([5, 6]))
    >>> logits.shape, cache.keys[0].shape
    ((2, 76), (1, 1, 2, 4))
    """
    block = cached_block_step(params, config)

    def step(cache: Cache, tokens: np.ndarray) -> tuple:
        logits, cache = block(cache, tokens[None])  # (1, m, V): one sequence
        return logits[0], cache  # (m, V)

    return CachedModel(step, rollback)


def read_prompt(params: gpt.GPTParameters, config: gpt.GPTConfig, ids: np.ndarray) -> Cache:
    """Unchecked kernel: the cache of one sequence after reading ``ids`` ``(n,)`` in one pass (none if ``n = 0``).

    >>> config = gpt.GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8)
    >>> read_prompt(gpt.init_gpt(config), config, np.array([3, 4, 5])).values[1].shape
    (1, 1, 3, 4)
    """
    cache = empty_cache(config, 1, params.embedding.dtype)
    return cache if len(ids) == 0 else cached_block_step(params, config)(cache, ids[None])[1]


def speculative_generate(params: gpt.GPTParameters, config: gpt.GPTConfig, draft_params: gpt.GPTParameters,
                         draft_config: gpt.GPTConfig, prompt: str, n_new: int, gamma: int = 4,
                         temperature: float = 1.0, seed: int = 0) -> Speculation:
    r"""Continue ``prompt`` by ``n_new`` characters sampled from the GPT ``params``, with the smaller GPT as the draft.

    .. math:: c_{t+1} \sim \operatorname{softmax}(z_t / T) \quad \text{(the target's, exactly)}

    Speculative sampling (:func:`attnbook.learning.speculative.speculative_sample`): each round the draft
    proposes ``gamma`` characters on its KV cache, the target reads them in one pass on its own, and both
    caches are rolled back to the characters kept. The text is distributed as :func:`generate`'s at the same
    temperature (not the same text for the same seed: the random draws differ).

    Parameters
    ----------
    params, config : GPTParameters, GPTConfig
        The target: the model whose distribution is sampled.
    draft_params, draft_config : GPTParameters, GPTConfig
        The draft: a cheaper GPT of the same vocabulary.
    prompt : str
        At least one character of the vocabulary; the prompt and the new characters must fit in both contexts.
    n_new : int
        Characters to write.
    gamma : int, optional
        Proposals per round, :math:`\gamma \ge 1`; default 4.
    temperature : float, optional
        :math:`T \ge 0`; 0 writes the target's greedy text. Default 1.
    seed : int, optional
        The random source.

    Returns
    -------
    Speculation
        The new characters, the proposals made and kept, and each model's forward passes.

    Examples
    --------
    >>> config, small = gpt.GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8, context=24), gpt.GPTConfig(
    ...     d_model=4, n_layers=1, n_heads=1, n_kv_heads=1, d_ff=4, context=24)
    >>> out = speculative_generate(gpt.init_gpt(config), config, gpt.init_gpt(small, seed=1), small, "To be", 12)
    >>> len(out.text), out.target_passes <= 12, out.proposed >= out.accepted
    (12, True, True)
    >>> speculative_generate(gpt.init_gpt(config), config, gpt.init_gpt(small), small, "To be", 20)
    Traceback (most recent call last):
    ...
    ValueError: the prompt (5 characters) and n_new = 20 must together fit in config.context = 24 and draft_config.context = 24, with at least one character of prompt
    """
    params, config = scaffold.check_model(gpt.MODEL, params, config)
    draft_params, draft_config = scaffold.check_model(gpt.DRAFT, draft_params, draft_config)
    ids = encode_chars(prompt)
    n_new = check_positive_int(n_new, "n_new")
    if len(ids) < 1 or len(ids) + n_new > min(config.context, draft_config.context):
        raise ValueError(f"the prompt ({len(ids)} characters) and n_new = {n_new} must together fit in "
                         f"config.context = {config.context} and draft_config.context = {draft_config.context}, "
                         "with at least one character of prompt")
    out = speculative_sample(gpt_model(params, config), gpt_model(draft_params, draft_config),
                             read_prompt(params, config, ids[:-1]), read_prompt(draft_params, draft_config, ids[:-1]),
                             int(ids[-1]), n_new, gamma, temperature, seed)
    return Speculation(decode_chars(out.tokens), out.proposed, out.accepted, out.target_passes, out.draft_passes)


def continuation_probabilities(params: gpt.GPTParameters, config: gpt.GPTConfig, prompt: str, k: int,
                               temperature: float = 1.0) -> np.ndarray:
    r"""The exact probability of every continuation of ``prompt`` by ``k`` characters, as sampling draws them.

    .. math:: P(c_1, \dots, c_k) = \prod_{i=1}^{k} p_T(c_i \mid \text{prompt}, c_1, \dots, c_{i-1}),
              \qquad p_T = \operatorname{softmax}(z / T)

    One forward pass over the prompt followed by each of the :math:`V^{k-1}` possible first ``k - 1``
    characters (:math:`V` = 76), so ``k`` is at most 3. What :func:`generate` and :func:`speculative_generate`
    draw the first ``k`` new characters from; the sampling checks compare their counts with it. Each
    conditional is read from one text, so the joint sums to 1 to float64 rounding even where the matrix
    library rounds the texts' shared prefix differently from row to row (as OpenBLAS's AVX2 kernels do).

    Parameters
    ----------
    params, config : GPTParameters, GPTConfig
        The model.
    prompt : str
        At least one character; the prompt and ``k - 1`` more must fit in ``config.context``.
    k : int
        Characters, 1 to 3.
    temperature : float, optional
        :math:`T \ge 0` (0: all the mass on the greedy continuation); default 1.

    Returns
    -------
    ndarray
        ``(V,) * k`` float64, summing to 1: entry ``[c_1, ..., c_k]`` the probability of those characters.

    Examples
    --------
    >>> config = gpt.GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8, context=16)
    >>> joint = continuation_probabilities(gpt.init_gpt(config), config, "To be", 2)
    >>> joint.shape, round(float(joint.sum()), 6)
    ((76, 76), 1.0)
    """
    params, config = scaffold.check_model(gpt.MODEL, params, config)
    ids = encode_chars(prompt)
    k = check_positive_int(k, "k")
    if k > 3:
        raise ValueError(f"k must be 1, 2 or 3 (a pass over 76^(k - 1) texts), got {k}")
    if len(ids) < 1 or len(ids) + k - 1 > config.context:
        raise ValueError(f"the prompt ({len(ids)} characters) and k - 1 = {k - 1} must together fit in "
                         f"config.context = {config.context}, with at least one character of prompt")
    vocab = len(vocabulary())
    firsts = np.array(list(itertools.product(range(vocab), repeat=k - 1)), dtype=np.int64).reshape(-1, k - 1)  # (V^(k-1), k - 1)
    texts = np.concatenate([np.repeat(ids[None], len(firsts), axis=0), firsts], axis=1)  # (V^(k-1), P + k - 1)
    logits = gpt.taped(params, texts, config)[0].logits[:, len(ids) - 1:]  # (V^(k-1), k, V): after the prompt
    p = tempered(logits, temperature).reshape((vocab,) * (k - 1) + (k, vocab))  # (V,) * (k-1) + (k, V)
    joint = np.ones(())  # the empty continuation
    for i in range(k):  # p(c_{i+1} | prompt, c_1..c_i), read from the one text whose later characters are 0
        level = p[(slice(None),) * i + (0,) * (k - 1 - i)][..., i, :]  # (V,) * (i + 1)
        joint = joint[..., None] * level  # (V,) * (i + 1)
    return joint  # (V,) * k
