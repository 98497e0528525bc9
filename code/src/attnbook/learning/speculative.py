r"""Speculative decoding: a small draft model proposes a few tokens, the target checks them all in one pass.

Speculative sampling (Leviathan et al., 2023; Chen et al., 2023) writes exactly what sampling from the
target would write, in distribution, while running the target once per *round* instead of once per token.
A round: the draft proposes :math:`\gamma` tokens one at a time from its distributions :math:`q_i`; the target
scores the block of proposals in one forward pass, which gives its distributions :math:`p_1, \dots,
p_{\gamma+1}` at every proposed position and one more; proposal :math:`x_i` is kept with probability
:math:`\min(1, p_i(x_i) / q_i(x_i))`; the first rejected one is replaced by a draw from the residual
:math:`\operatorname{norm}(\max(0, p_i - q_i))`, and when all are kept a last token is drawn from
:math:`p_{\gamma+1}`. Both models' caches are then rolled back to the text that was kept.

A model is given as a :class:`CachedModel`, a step on its cache and the cache's rollback; the book's GPT
and its draft are :func:`attnbook.learning.analysis.gpt_decoder.speculative_generate`.

>>> target = table_model(np.log([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25], [0.2, 0.2, 0.6]]))
>>> draft = table_model(np.log([[0.2, 0.5, 0.3], [0.4, 0.4, 0.2], [0.3, 0.3, 0.4]]))
>>> out = speculative_sample(target, draft, None, None, last=0, n_new=12, gamma=3, seed=0)
>>> out.tokens.shape, out.target_passes < 12
((12,), True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..validation import as_float_array, check_positive_int, check_seed
from .decoding import check_callable, check_positive_real
from .gradients import log_softmax

__all__ = ["CachedModel", "SpeculativeOutput", "speculative_sample", "table_model"]


class CachedModel(NamedTuple):
    """A model as speculative decoding runs it: a step that reads a block of tokens onto its cache, and a rollback.

    Attributes
    ----------
    step : callable
        ``step(cache, tokens) -> (logits, cache)``: ``tokens`` ``(m,)`` the next ``m`` tokens of the text,
        read in one pass; ``logits`` ``(m, V)``, row ``i`` the scores of the token after ``tokens[i]``.
    rollback : callable
        ``rollback(cache, n) -> cache``: the cache without its newest ``n`` positions.

    Examples
    --------
    >>> model = table_model(np.zeros((2, 2)))
    >>> logits, cache = model.step(None, np.array([0, 1, 1]))
    >>> logits.shape, model.rollback(cache, 2) is None
    ((3, 2), True)
    """

    step: Callable[[Any, np.ndarray], tuple[np.ndarray, Any]]
    rollback: Callable[[Any, int], Any]


class SpeculativeOutput(NamedTuple):
    """What :func:`speculative_sample` wrote, and what it cost.

    Attributes
    ----------
    tokens : ndarray
        ``(n_new,)`` int64 the new tokens.
    proposed, accepted : int
        Tokens the draft proposed, and those of them the target kept.
    target_passes, draft_passes : int
        Forward passes of each model (one per round for the target; the reading of the prompt not counted).

    Examples
    --------
    >>> out = SpeculativeOutput(np.array([1, 2, 2]), proposed=4, accepted=2, target_passes=1, draft_passes=4)
    >>> out.accepted / out.proposed, len(out.tokens) / out.target_passes
    (0.5, 3.0)
    """

    tokens: np.ndarray  # (n_new,)
    proposed: int
    accepted: int
    target_passes: int
    draft_passes: int


# --- kernels --------------------------------------------------------------------------------------------


def tempered(logits: np.ndarray, temperature: float) -> np.ndarray:
    r"""Unchecked kernel: the distribution sampling draws from at ``temperature``, in float64.

    .. math:: p = \operatorname{softmax}(z / T), \qquad T = 0: \; p = e_{\arg\max z}

    :math:`T = 0` is the limit :math:`T \to 0`: all the mass on the largest logit (ties to the lower index),
    so sampling is greedy decoding.

    >>> tempered(np.array([0.0, np.log(3)]), 1.0).round(4).tolist(), tempered(np.array([1.0, 3.0, 3.0]), 0).tolist()
    ([0.25, 0.75], [0.0, 1.0, 0.0])
    """
    z = np.asarray(logits, dtype=np.float64)  # (..., V)
    if temperature == 0:
        return np.eye(z.shape[-1])[z.argmax(axis=-1)]  # (..., V): one-hot at the argmax
    return np.exp(log_softmax(z / temperature))  # (..., V)


def acceptance(p: np.ndarray, q: np.ndarray, x: int) -> float:
    r"""Unchecked kernel: the probability that the target keeps the draft's token ``x``.

    .. math:: \alpha(x) = \min\Bigl(1, \frac{p(x)}{q(x)}\Bigr)

    ``q(x) > 0``: the draft drew ``x`` from ``q``.

    >>> acceptance(np.array([0.2, 0.8]), np.array([0.5, 0.5]), 0), acceptance(np.array([0.2, 0.8]), np.array([0.5, 0.5]), 1)
    (0.4, 1.0)
    """
    return float(min(1.0, p[x] / q[x]))


def residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    r"""Unchecked kernel: the distribution a rejected token is replaced from, the part of ``p`` that ``q`` lacks.

    .. math:: r(x) = \frac{\max\bigl(0,\, p(x) - q(x)\bigr)}{\sum_y \max\bigl(0,\, p(y) - q(y)\bigr)}

    Defined when :math:`p \ne q`, the only case in which a token can be rejected.

    >>> residual(np.array([0.2, 0.5, 0.3]), np.array([0.5, 0.3, 0.2])).round(4).tolist()
    [0.0, 0.6667, 0.3333]
    """
    excess = np.maximum(p - q, 0.0)  # (V,)
    return excess / excess.sum()  # (V,)


def table_model(logits) -> CachedModel:
    r"""A toy model whose distributions are a table: the next token's logits depend on the newest token only.

    .. math:: z_t = Z_{y_{t-1}}

    Its cache is ``None`` (nothing to keep), so its rollback does nothing; the tests and the chapter's worked
    example use it where every probability must be known exactly.

    Parameters
    ----------
    logits : array_like
        ``(V, V)`` finite, the logits of the token after each token.

    Returns
    -------
    CachedModel
        ``step(None, tokens) -> (logits[tokens], None)``.

    Examples
    --------
    >>> model = table_model([[0.0, 1.0], [2.0, 3.0]])
    >>> model.step(None, np.array([1, 0]))[0].tolist()
    [[2.0, 3.0], [0.0, 1.0]]
    """
    table = as_float_array(logits, "logits")  # (V, V)
    if table.ndim != 2 or table.shape[0] != table.shape[1]:
        raise ValueError(f"logits must be a square (V, V) table, got shape {table.shape}")
    return CachedModel(lambda cache, tokens: (table[tokens], cache), lambda cache, n: cache)


# --- the algorithm --------------------------------------------------------------------------------------


def speculative_round(target: CachedModel, draft: CachedModel, target_cache, draft_cache, last: int, gamma: int,
                      temperature: float, rng: np.random.Generator) -> tuple:
    """Unchecked kernel: one round of :func:`speculative_sample`.

    Both caches hold the text but its newest token ``last``; so do the caches returned, for the text grown by
    the kept proposals and the round's last token. Returns ``(new tokens, accepted, target_cache,
    draft_cache, draft_passes)``.

    >>> model = table_model(np.zeros((3, 3)))
    >>> new, accepted, *_ = speculative_round(model, model, None, None, 0, 2, 1.0, np.random.default_rng(0))
    >>> len(new), accepted                      # the same model: every proposal kept, and one more token
    (3, 2)
    """
    # 1. The draft proposes gamma tokens, one at a time, each from its distribution after the ones before.
    proposal, q = [], []
    token = last
    for _ in range(gamma):
        logits, draft_cache = draft.step(draft_cache, np.array([token]))  # (1, V)
        q.append(tempered(logits[0], temperature))  # (V,)
        token = int(rng.choice(len(q[-1]), p=q[-1]))
        proposal.append(token)
    draft_passes = gamma
    # 2. The target reads the newest token and the gamma proposals in ONE pass: gamma + 1 distributions.
    logits, target_cache = target.step(target_cache, np.array([last, *proposal]))  # (gamma + 1, V)
    p = tempered(logits, temperature)  # (gamma + 1, V)
    # 3. Keep each proposal with probability min(1, p/q); the first rejected one is replaced from the residual.
    new = []
    for i, x in enumerate(proposal):
        if rng.random() < acceptance(p[i], q[i], x):
            new.append(x)
            continue
        new.append(int(rng.choice(p.shape[1], p=residual(p[i], q[i]))))
        break
    else:  # all kept: one more token from the target's last distribution
        new.append(int(rng.choice(p.shape[1], p=p[gamma])))
    accepted = len(new) - 1
    # 4. Roll both caches back to the text kept (it ends with new[-1], which neither has read).
    target_cache = target.rollback(target_cache, gamma - accepted)  # read last and gamma proposals; keep 1 + accepted
    if accepted < gamma:
        draft_cache = draft.rollback(draft_cache, gamma - 1 - accepted)  # read last and gamma - 1 proposals
    else:  # the draft has not read its last proposal: it reads it now
        draft_cache = draft.step(draft_cache, np.array([proposal[-1]]))[1]
        draft_passes += 1
    return new, accepted, target_cache, draft_cache, draft_passes


def speculative_sample(target: CachedModel, draft: CachedModel, target_cache, draft_cache, last: int, n_new: int,
                       gamma: int = 4, temperature: float = 1.0, seed: int | np.random.Generator = 0
                       ) -> SpeculativeOutput:
    r"""Sample ``n_new`` tokens from ``target`` by speculative sampling with ``draft``: the target's distribution, exactly.

    Each round the draft proposes :math:`\gamma` tokens :math:`x_i \sim q_i` autoregressively; the target
    scores the newest token and the proposals in one pass, :math:`p_1, \dots, p_{\gamma+1}`; then, with
    :math:`u_i \sim U(0, 1)`,

    .. math::
        x_i \text{ kept if } u_i < \min\Bigl(1, \frac{p_i(x_i)}{q_i(x_i)}\Bigr), \qquad
        \text{the first rejected one replaced by } y \sim \frac{\max(0, p_i - q_i)}{\lVert \max(0, p_i - q_i) \rVert_1},

    and when all are kept, one more token :math:`y \sim p_{\gamma+1}`. Every token written is distributed
    as the target's own next-token distribution given the text before it (Leviathan et al., 2023, Theorem 1),
    whatever the draft; a better draft is kept more often, so the target runs fewer passes. :math:`p` and
    :math:`q` are the distributions after the temperature (:func:`tempered`); at ``temperature = 0`` the
    output is the target's greedy decoding. The last round proposes fewer tokens when fewer are left to write.

    Parameters
    ----------
    target, draft : CachedModel
        The model to sample from and the cheaper one that proposes; the same vocabulary.
    target_cache, draft_cache : object
        Each model's cache after it has read the text but its newest token (opaque here).
    last : int
        The text's newest token, which neither cache holds yet.
    n_new : int
        Tokens to write.
    gamma : int, optional
        :math:`\gamma \ge 1`, proposals per round; default 4.
    temperature : float, optional
        :math:`T \ge 0`; default 1.
    seed : int or numpy Generator, optional
        The random source; the same seed gives the same tokens.

    Returns
    -------
    SpeculativeOutput
        The tokens ``(n_new,)``, the proposals made and kept, and each model's forward passes.

    Examples
    --------
    >>> target = table_model(np.log([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25], [0.2, 0.2, 0.6]]))
    >>> draft = table_model(np.log([[0.2, 0.5, 0.3], [0.4, 0.4, 0.2], [0.3, 0.3, 0.4]]))
    >>> out = speculative_sample(target, draft, None, None, last=0, n_new=10, gamma=2, seed=1)
    >>> out.tokens.tolist(), (out.proposed, out.accepted, out.target_passes, out.draft_passes)
    ([1, 2, 1, 1, 2, 0, 2, 2, 1, 0], (7, 6, 4, 10))
    >>> speculative_sample(target, draft, None, None, last=0, n_new=4, temperature=0).tokens.tolist()  # greedy
    [1, 0, 1, 0]
    >>> speculative_sample(target, draft, None, None, last=0, n_new=4, gamma=0)
    Traceback (most recent call last):
    ...
    ValueError: gamma must be at least 1, got 0
    """
    for model, name in ((target, "target"), (draft, "draft")):
        if not isinstance(model, CachedModel):
            raise TypeError(f"{name} must be a CachedModel(step, rollback), got {type(model).__name__}")
        check_callable(model.step, f"{name}.step")
        check_callable(model.rollback, f"{name}.rollback")
    last = check_positive_int(last, "last", 0)
    n_new = check_positive_int(n_new, "n_new")
    gamma = check_positive_int(gamma, "gamma")
    temperature = check_positive_real(temperature, "temperature", strict=False)
    rng = check_seed(seed)
    tokens, proposed, accepted, target_passes, draft_passes = [], 0, 0, 0, 0
    while len(tokens) < n_new:
        round_gamma = min(gamma, n_new - len(tokens) - 1)  # a round writes at most round_gamma + 1 tokens
        if round_gamma == 0:  # one token left: the target alone
            logits, target_cache = target.step(target_cache, np.array([last]))  # (1, V)
            new, kept, passes = [int(rng.choice(logits.shape[1], p=tempered(logits[0], temperature)))], 0, 0
        else:
            new, kept, target_cache, draft_cache, passes = speculative_round(
                target, draft, target_cache, draft_cache, last, round_gamma, temperature, rng)
        tokens += new
        proposed, accepted = proposed + round_gamma, accepted + kept
        target_passes, draft_passes = target_passes + 1, draft_passes + passes
        last = new[-1]
    return SpeculativeOutput(np.array(tokens, dtype=np.int64), proposed, accepted, target_passes, draft_passes)
