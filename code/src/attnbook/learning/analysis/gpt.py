"""What the trained GPT's heads do, measured on held-out text: previous-token, induction, first-token weight.

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

__all__ = ["GPTHeadScores", "gpt_head_scores", "repeated_passages"]

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
