"""What the trained GPT does, measured on held-out text: the bits of every character with the context it read
(:func:`gpt_character_bits`, :func:`most_context`), and its heads' previous-token, induction and first-token weight.

Three scores of every head, each the mean of one attention weight over many queries, next to what a
head that spreads its weight evenly over the positions it may see would score (``1 / (t + 1)`` at query
``t``), so a score says how far a head is from indifference:

- **previous token**: the weight of query ``t`` on key ``t - 1``, on windows of the held-out play;
- **induction**: on a held-out passage of ``L`` characters written twice, the weight of query ``t`` of
  the second copy on key ``t - L + 1``, the character after the earlier occurrence of the same place
  (Olsson et al., 2022, measured the same way on repeated text);
- **first token**: the weight of query ``t >= 16`` on key 0, the first character of a window, where an
  attention sink would put its weight (Xiao et al., 2024).

>>> from attnbook.learning.models.gpt import GPTConfig, init_gpt
>>> config = GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8, context=32)
>>> scores = gpt_head_scores(init_gpt(config), config, n_windows=2, passage=8)
>>> scores.previous_token.shape, round(float(scores.uniform_previous_token), 3)   # (layers, heads)
((2, 2), 0.099)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...validation import check_positive_int
from ..characters import splits
from ..gradients import log_softmax
from ..models import gpt

__all__ = ["CharacterBits", "GPTHeadScores", "gpt_character_bits", "gpt_head_scores", "most_context",
           "repeated_passages"]

FIRST_QUERY = 16  # the first-token score reads queries from here on, where a uniform head gives key 0 little


class GPTHeadScores(NamedTuple):
    """The scores of :func:`gpt_head_scores`, each ``(n_layers, n_heads)``, and a uniform head's.

    Attributes
    ----------
    previous_token, induction, first_token : ndarray
        ``(n_layers, n_heads)`` the mean weights described in the module.
    uniform_previous_token, uniform_induction, uniform_first_token : float
        What a head with equal weights on every visible key would score.
    first_copy_bits, second_copy_bits : float
        Bits per character of the repeated passages' first and second copies (the second can be copied).

    Examples
    --------
    >>> GPTHeadScores(*[np.zeros((1, 1))] * 3, *[0.0] * 5).induction.shape
    (1, 1)
    """

    previous_token: np.ndarray  # (layers, heads)
    induction: np.ndarray  # (layers, heads)
    first_token: np.ndarray  # (layers, heads)
    uniform_previous_token: float
    uniform_induction: float
    uniform_first_token: float
    first_copy_bits: float
    second_copy_bits: float


def repeated_passages(config: gpt.GPTConfig, passage: int, count: int, seed: int = 0) -> np.ndarray:
    """``count`` passages of ``passage`` held-out characters, each written twice: ``(count, 2 passage)``.

    Parameters
    ----------
    config : GPTConfig
        The model's configuration (``2 passage - 1`` must fit in its context).
    passage : int
        ``L``, the characters of one copy.
    count : int
        Passages.
    seed : int, optional
        Seeds the passages' starts in the held-out play.

    Returns
    -------
    ndarray
        ``(count, 2L)`` int64.

    Examples
    --------
    >>> x = repeated_passages(gpt.GPTConfig(), 5, 2)
    >>> x.shape, bool(np.all(x[:, :5] == x[:, 5:]))
    ((2, 10), True)
    """
    passage, count = check_positive_int(passage, "passage", 2), check_positive_int(count, "count")
    if 2 * passage - 1 > config.context:
        raise ValueError(f"two copies of {passage} characters do not fit in config.context = {config.context}")
    held_out = splits()[1]
    starts = np.random.default_rng(seed).integers(0, len(held_out) - passage, size=count)  # (count,)
    once = held_out[starts[:, None] + np.arange(passage)]  # (count, L)
    return np.concatenate([once, once], axis=1)  # (count, 2L)


def _uniform(queries: np.ndarray) -> float:
    return float(np.mean(1.0 / (queries + 1)))


def gpt_head_scores(params, config: gpt.GPTConfig, n_windows: int = 64, passage: int = 64,
                    seed: int = 0) -> GPTHeadScores:
    r"""The previous-token, induction and first-token scores of every head, on held-out text.

    .. math:: \text{prev}_h = \overline{A^h_{t, t-1}}, \qquad
              \text{ind}_h = \overline{A^h_{t, t-L+1}}\ (t \ge L), \qquad
              \text{first}_h = \overline{A^h_{t, 0}}\ (t \ge 16)

    Parameters
    ----------
    params : GPTParameters
        The weights.
    config : GPTConfig
        The configuration.
    n_windows : int, optional
        Held-out windows of ``context`` characters for the previous-token and first-token scores, and
        repeated passages for the induction score.
    passage : int, optional
        ``L``; ``2L - 1`` must fit in the context.
    seed : int, optional
        Seeds the windows and passages.

    Returns
    -------
    GPTHeadScores
        The scores, a uniform head's, and the bits per character of the two copies.

    Examples
    --------
    >>> from attnbook.learning.models.gpt import GPTConfig, init_gpt
    >>> config = GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8, context=32)
    >>> s = gpt_head_scores(init_gpt(config), config, n_windows=2, passage=8)
    >>> bool(np.all(s.first_token > 0)), s.induction.shape
    (True, (2, 2))
    """
    n_windows = check_positive_int(n_windows, "n_windows")
    held_out, n = splits()[1], config.context
    starts = np.random.default_rng(seed).integers(0, len(held_out) - n, size=n_windows)  # (windows,)
    windows = held_out[starts[:, None] + np.arange(n)]  # (windows, n)
    a = gpt.gpt_forward(params, windows, config).attention  # (layers, windows, h, n, n)
    t = np.arange(1, n)  # (n - 1,): queries with a previous token
    previous = a[..., t, t - 1].mean(axis=(1, 3))  # (layers, h)
    late = np.arange(min(FIRST_QUERY, n - 1), n)  # queries far from the start
    first = a[..., late, 0].mean(axis=(1, 3))  # (layers, h)

    repeated = repeated_passages(config, passage, n_windows, seed + 1)  # (windows, 2L)
    forward = gpt.gpt_forward(params, repeated[:, :-1], config)  # reads 2L - 1 characters
    q = np.arange(passage, 2 * passage - 1)  # queries of the second copy (with a next character)
    induction = forward.attention[..., q, q - passage + 1].mean(axis=(1, 3))  # (layers, h)
    log_p = log_softmax(forward.logits.astype(np.float64))  # (windows, 2L - 1, V)
    bits = -np.take_along_axis(log_p, repeated[:, 1:, None], axis=-1)[..., 0] / np.log(2)  # (windows, 2L - 1)
    return GPTHeadScores(previous, induction, first, _uniform(t), _uniform(q), _uniform(late),
                         float(bits[:, :passage - 1].mean()), float(bits[:, passage:].mean()))


class CharacterBits(NamedTuple):
    """The result of :func:`gpt_character_bits`: one entry per character of the text.

    Attributes
    ----------
    bits : ndarray
        ``(N,)`` float64: :math:`-\\log_2 p_\\theta(c_t \\mid \\dots)`, NaN where no window predicts ``c_t``.
    seen : ndarray
        ``(N,)`` intp: how many characters that prediction read (1 .. context), 0 where there is none.

    Examples
    --------
    >>> CharacterBits(np.array([np.nan, 2.0]), np.array([0, 1])).seen.tolist()
    [0, 1]
    """

    bits: np.ndarray  # (N,)
    seen: np.ndarray  # (N,)


def gpt_character_bits(params, tokens, config: gpt.GPTConfig, offset: int = 0,
                       batch_size: int = 32) -> CharacterBits:
    r"""The bits of every character of ``tokens``, read in consecutive windows of ``context + 1`` from ``offset``.

    Window :math:`w` starts at :math:`a + w(n + 1)` (``a`` the offset, ``n`` the context, the rest at the
    end left out) and predicts its characters 1 to ``n`` from those before them in the window:

    .. math:: \text{bits}_t = -\log_2 p_\theta(c_t \mid c_{t - j}, \dots, c_{t-1}), \qquad
              j = \text{seen}_t = (t - a) \bmod (n + 1) \in 1 .. n

    With offset 0 this is the scoring of :func:`attnbook.learning.models.gpt.bits_per_character` (the mean
    of ``bits`` is its score). Two offsets half a window apart, merged by :func:`most_context`, give every
    character but the first ``n / 2`` at least :math:`n / 2` characters of context, at twice the cost.

    Parameters
    ----------
    params : GPTParameters
        The weights.
    tokens : array_like of int
        ``(N,)`` a text, e.g. ``splits()[1]``.
    config : GPTConfig
        The configuration (``n`` = ``config.context``).
    offset : int, optional
        ``a``, where the first window starts (0 .. n).
    batch_size : int, optional
        Windows per forward pass.

    Returns
    -------
    CharacterBits
        ``bits`` and ``seen``, each ``(N,)``.

    Examples
    --------
    >>> from attnbook.learning.characters import encode_chars
    >>> from attnbook.learning.models.gpt import GPTConfig, init_gpt
    >>> config = GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8, context=4)
    >>> text = encode_chars("To be, or not")                                 # 13 characters
    >>> gpt_character_bits(init_gpt(config), text, config).seen.tolist()     # windows at 0 and 5
    [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 0, 0]
    >>> gpt_character_bits(init_gpt(config), text, config, offset=2).seen.tolist()   # windows at 2 and 7
    [0, 0, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0]
    """
    tokens = np.asarray(tokens).reshape(-1)
    n = config.context
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or not 0 <= offset <= n:
        raise ValueError(f"offset must be an integer in 0 .. config.context = {n}, got {offset!r}")
    n_windows = (len(tokens) - offset) // (n + 1)
    if n_windows < 1:
        raise ValueError(f"tokens has {len(tokens)} characters; offset + config.context + 1 = "
                         f"{offset + n + 1} are needed")
    windows = tokens[offset:offset + n_windows * (n + 1)].reshape(n_windows, n + 1)  # (W, n + 1)
    window = gpt.window_bits(params, windows, config, batch_size)  # (W, n)
    bits, seen = np.full(len(tokens), np.nan), np.zeros(len(tokens), dtype=np.intp)  # (N,), (N,): intp (np.bincount refuses int64 in Pyodide)
    predicted = offset + np.arange(n_windows)[:, None] * (n + 1) + np.arange(1, n + 1)  # (W, n)
    bits[predicted], seen[predicted] = window, np.arange(1, n + 1)
    return CharacterBits(bits, seen)


def most_context(*scores: CharacterBits) -> CharacterBits:
    """Merge scorings of one text: each character keeps the prediction that read the most characters.

    Parameters
    ----------
    *scores : CharacterBits
        Results of :func:`gpt_character_bits` on the same text (at different offsets); the first wins ties.

    Returns
    -------
    CharacterBits
        ``(N,)`` each.

    Examples
    --------
    >>> a = CharacterBits(np.array([np.nan, 3.0, 2.0]), np.array([0, 1, 2]))
    >>> b = CharacterBits(np.array([1.0, np.nan, 1.5]), np.array([3, 0, 1]))
    >>> merged = most_context(a, b)
    >>> merged.bits.tolist(), merged.seen.tolist()
    ([1.0, 3.0, 2.0], [3, 1, 2])
    """
    if not scores or any(len(s.seen) != len(scores[0].seen) for s in scores):
        raise ValueError("scores must be one or more CharacterBits of the same text")
    seen = np.stack([s.seen for s in scores])  # (scorings, N)
    best = np.argmax(seen, axis=0)  # (N,): the first of the largest
    column = np.arange(seen.shape[1])  # (N,)
    return CharacterBits(np.stack([s.bits for s in scores])[best, column], seen[best, column])
