"""Writing with the trained GPT one character at a time, with a key-value cache or by recomputing the text.

With the cache (:func:`cached_step`) each step runs the new position only and attends to the stored,
already rotated keys and values of the earlier ones; without (:func:`recomputing_step`) each step runs
the whole text again through :func:`attnbook.learning.models.gpt.gpt_forward`'s kernel. Both give the
same logits to float32 round-off, so the same seed writes the same text. Sampling is
:func:`attnbook.learning.decoding.sample` (temperature, top-k, nucleus).

>>> config = gpt.GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8, context=16)
>>> len(generate(gpt.init_gpt(config), config, "To be", 8, seed=1)[0])
8
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...modern import rms_norm, swiglu_feed_forward
from ...multihead import attend_grouped, merge_heads, split_heads
from ...positional import rotate, sinusoidal_frequencies
from ...validation import check_positive_int
from ..characters import decode_chars, encode_chars, vocabulary
from ..decoding import sample
from ..models import gpt, scaffold

__all__ = ["Cache", "generate"]


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


def cached_step(params: gpt.GPTParameters, config: gpt.GPTConfig):
    """Unchecked kernel: ``step(cache, tokens) -> (logits, cache)``, one new position on the cached keys and values.

    >>> config = gpt.GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8)
    >>> empty = [np.zeros((1, 1, 0, 4), np.float32)] * 2                  # (rows, h_kv, 0, d_head) per block
    >>> logits, cache = cached_step(gpt.init_gpt(config), config)(Cache(empty, empty), np.array([5]))
    >>> logits.shape, cache.keys[0].shape
    ((1, 76), (1, 1, 1, 4))
    """
    theta = sinusoidal_frequencies(config.d_model // config.n_heads)  # (d_head / 2,)
    scale = 1.0 / math.sqrt(config.d_model // config.n_heads)

    def step(cache: Cache, tokens: np.ndarray) -> tuple:
        position = cache.keys[0].shape[-2]  # the new token's position: the cache's length
        angles = position * theta[None, :]  # (1, d_head / 2): the new position's turns
        x = params.embedding[tokens][:, None, :]  # (rows, 1, d_model)
        keys, values = [], []
        for layer, k_old, v_old in zip(params.layers, cache.keys, cache.values):
            a = layer.attention
            normed = rms_norm.unchecked(x, layer.norm_1, gpt.EPS)  # (rows, 1, d_model)
            q = rotate(split_heads.unchecked(normed @ a.w_q + a.b_q, config.n_heads), angles)  # (rows, h, 1, d_head)
            k = rotate(split_heads.unchecked(normed @ a.w_k + a.b_k, config.n_kv_heads), angles)  # (rows, h_kv, 1, d)
            v = split_heads.unchecked(normed @ a.w_v + a.b_v, config.n_kv_heads)  # (rows, h_kv, 1, d_head)
            dtype = x.dtype
            k = np.concatenate([k_old, k.astype(dtype)], axis=-2)  # (rows, h_kv, position + 1, d_head)
            v = np.concatenate([v_old, v], axis=-2)
            heads, _ = attend_grouped(q.astype(dtype), k, v, None, scale)  # (rows, h, 1, d_head): all seen
            x = x + merge_heads.unchecked(heads) @ a.w_o + a.b_o  # (rows, 1, d_model)
            x = x + swiglu_feed_forward.unchecked(rms_norm.unchecked(x, layer.norm_2, gpt.EPS), layer.feed_forward)
            keys.append(k)
            values.append(v)
        logits = rms_norm.unchecked(x[:, 0], params.norm, gpt.EPS) @ params.embedding.T  # (rows, V)
        return logits, Cache(keys, values)

    return step


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
