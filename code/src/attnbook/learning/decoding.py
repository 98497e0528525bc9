"""Decoding: turning a model's next-token distributions into sequences, by greedy search, beam search or sampling.

Every strategy here works with any model, given as one function

    step(state, tokens) -> (logits, state)

(:func:`greedy_decode` documents it); a sequence's log-probability is the sum over its tokens, EOS included.

>>> step = bigram_step([[0, 0, 1, 0, 0], [0, 0, .1, .5, .4], [0, 0, 1, 0, 0],
...                     [0, 0, .4, .3, .3], [0, 0, .9, .05, .05]])
>>> greedy_decode(step, None, batch_size=1, max_length=5).tokens.tolist()   # 0.5 x 0.4 = 0.2
[[3, 2]]
>>> beam_search(step, lambda state, index: state, None, max_length=5, beam_width=2).best.tokens.tolist()
[4, 2]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..validation import as_float_array, check_positive_int, check_seed
from .gradients import log_softmax
from .tasks import BOS, EOS, PAD

__all__ = [
    "BeamSearchOutput",
    "DecodeOutput",
    "Hypothesis",
    "beam_search",
    "bigram_step",
    "greedy_decode",
    "length_normalisation",
    "sample",
]

Step = Callable[[Any, np.ndarray], tuple[np.ndarray, Any]]
Reorder = Callable[[Any, np.ndarray], Any]


class DecodeOutput(NamedTuple):
    """Sequences decoded in a batch, one row each.

    Attributes
    ----------
    tokens : ndarray
        ``(batch, n)`` int64 generated tokens (BOS not included), each row ending with its EOS and PAD
        after it; ``n <= max_length`` is the longest row.
    log_probs : ndarray
        ``(batch,)`` the model's log-probability of each row's tokens, EOS included.
    lengths : ndarray
        ``(batch,)`` int64 tokens generated per row, EOS included.

    Examples
    --------
    >>> out = greedy_decode(lambda s, t: (np.log([[0.3, 0.2, 0.5]]), s), None, 1, 4, bos=0, eos=2)
    >>> out.tokens.tolist(), round(float(out.log_probs[0]), 4), out.lengths.tolist()
    ([[2]], -0.6931, [1])
    """

    tokens: np.ndarray  # (batch, n)
    log_probs: np.ndarray  # (batch,)
    lengths: np.ndarray  # (batch,)


class Hypothesis(NamedTuple):
    """One sequence found by beam search.

    Attributes
    ----------
    tokens : ndarray
        ``(length,)`` int64 generated tokens; the last is EOS unless ``max_length`` cut the sequence.
    log_prob : float
        Its log-probability under the model.
    score : float
        ``log_prob`` divided by :func:`length_normalisation` of its length: what beam search ranks.

    Examples
    --------
    >>> h = Hypothesis(np.array([5, 2]), -1.0, -1.0)
    >>> h.tokens.tolist(), h.score
    ([5, 2], -1.0)
    """

    tokens: np.ndarray  # (length,)
    log_prob: float
    score: float


class BeamSearchOutput(NamedTuple):
    """What :func:`beam_search` returns: the best hypothesis and all it completed, best first.

    Attributes
    ----------
    best : Hypothesis
        The hypothesis of highest score.
    hypotheses : tuple of Hypothesis
        Every hypothesis that ended (in EOS, or cut at ``max_length``), by decreasing score.

    Examples
    --------
    >>> table = np.log([[0.5, 0.5], [0.5, 0.5]])
    >>> out = beam_search(lambda s, t: (table[t], s), lambda s, i: s, None, 3, 2, bos=0, eos=1)
    >>> out.best.tokens.tolist(), len(out.hypotheses) >= 1
    ([1], True)
    """

    best: Hypothesis
    hypotheses: tuple[Hypothesis, ...]


# --- the boundary ---------------------------------------------------------------------------------------


def check_callable(value, name: str):
    """Unchecked kernel: the check of a model's function at the boundary (shared with :mod:`.speculative`)."""
    if not callable(value):
        raise TypeError(f"{name} must be a callable, got {type(value).__name__}")
    return value


def _check_tokens(bos, eos) -> tuple[int, int]:
    return check_positive_int(bos, "bos", 0), check_positive_int(eos, "eos", 0)


def check_positive_real(value, name: str, minimum: float = 0.0, strict: bool = True) -> float:
    """Unchecked kernel: the check of a real number above ``minimum`` (or at it, unless ``strict``), for the boundary."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or (value <= minimum if strict else value < minimum):
        raise ValueError(f"{name} must be a finite number {'>' if strict else '>='} {minimum}, got {value!r}")
    return float(value)


def _logits(step: Step, state, tokens: np.ndarray) -> tuple[np.ndarray, Any]:
    """Call the model and check what it answers: finite-or-minus-infinity logits, one row per sequence."""
    logits, state = step(state, tokens)
    logits = np.asarray(logits, dtype=np.float64)  # (rows, vocab)
    if logits.shape[:1] != tokens.shape or logits.ndim != 2:
        raise ValueError(f"step must return logits of shape ({tokens.shape[0]}, vocab) for {tokens.shape[0]} "
                         f"tokens, got shape {logits.shape}")
    if np.any(np.isnan(logits) | (logits == np.inf)) or not np.all(np.isfinite(logits).any(axis=1)):
        raise ValueError("step returned logits with NaN or +inf, or a row without a finite entry")
    return logits, state


# --- kernels --------------------------------------------------------------------------------------------


def top_k_filter(logits: np.ndarray, k: int) -> np.ndarray:
    r"""Unchecked kernel: keep the ``k`` largest logits of each row, set the rest to ``-inf``.

    .. math:: \tilde z_i = z_i \text{ if } i \in \operatorname{top}_k(z), \text{ else } -\infty

    Exactly ``min(k, vocab)`` entries survive; ties go to the lower index.

    >>> top_k_filter(np.array([[0.1, 3.0, 2.0, 3.0]]), 2).tolist()
    [[-inf, 3.0, -inf, 3.0]]
    """
    order = np.argsort(-logits, axis=-1, kind="stable")  # (..., vocab): best first
    kept = np.zeros(logits.shape, dtype=bool)  # (..., vocab)
    np.put_along_axis(kept, order[..., :k], True, axis=-1)
    return np.where(kept, logits, -np.inf)  # (..., vocab)


def nucleus_filter(logits: np.ndarray, p: float) -> np.ndarray:
    r"""Unchecked kernel: keep the smallest set of most probable tokens whose probability reaches ``p`` (top-p).

    .. math:: V_p = \{\, \sigma(1), \dots, \sigma(m) \,\}, \quad m = \min\Bigl\{ m : \sum_{r \le m} p_{\sigma(r)} \ge p \Bigr\}

    with :math:`\sigma` ordering the tokens by decreasing probability (Holtzman et al., 2020); ties go to
    the lower index.

    >>> nucleus_filter(np.log(np.array([[0.1, 0.5, 0.3, 0.1]])), 0.8).round(2).tolist()
    [[-inf, -0.69, -1.2, -inf]]
    """
    order = np.argsort(-logits, axis=-1, kind="stable")  # (..., vocab): most probable first
    probs = np.exp(log_softmax(np.take_along_axis(logits, order, axis=-1)))  # (..., vocab), sorted
    before = np.cumsum(probs, axis=-1) - probs  # (..., vocab): probability of the tokens ranked above
    kept = np.zeros(logits.shape, dtype=bool)  # (..., vocab)
    np.put_along_axis(kept, order, before < p, axis=-1)
    return np.where(kept, logits, -np.inf)  # (..., vocab)


def decode_loop(step: Step, state, batch_size: int, max_length: int, bos: int, eos: int,
                pick: Callable[[np.ndarray], np.ndarray]) -> DecodeOutput:
    """Unchecked kernel of :func:`greedy_decode` and :func:`sample`: ``pick`` chooses tokens from log-probabilities.

    Finished rows keep being fed to the model (PAD, so a batched state stays rectangular) until every
    row has ended; their outputs are ignored.

    >>> decode_loop(lambda s, t: (np.zeros((2, 3)), s), None, 2, 2, 0, 2, lambda lp: lp.argmax(1)).tokens.tolist()
    [[0, 0], [0, 0]]
    """
    rows = np.arange(batch_size)  # (batch,)
    tokens = np.full((batch_size, max_length), PAD, dtype=np.int64)  # (batch, max_length)
    log_probs = np.zeros(batch_size)  # (batch,)
    lengths = np.zeros(batch_size, dtype=np.int64)  # (batch,)
    alive = np.ones(batch_size, dtype=bool)  # (batch,)
    current = np.full(batch_size, bos, dtype=np.int64)  # (batch,)
    for t in range(max_length):
        logits, state = _logits(step, state, current)  # (batch, vocab)
        logp = log_softmax(logits)  # (batch, vocab)
        chosen = np.where(alive, pick(logp), PAD)  # (batch,)
        log_probs += np.where(alive, logp[rows, chosen], 0.0)  # (batch,)
        tokens[:, t] = chosen
        lengths += alive
        alive &= chosen != eos
        current = chosen  # (batch,)
        if not alive.any():
            break
    return DecodeOutput(tokens[:, : lengths.max()], log_probs, lengths)


def bigram_step(probabilities) -> Step:
    r"""A toy model whose answers are known exactly: the next token depends on the newest token only.

    .. math:: p(y_t = v \mid y_{<t}) = P_{y_{t-1},\, v}, \qquad z_t = \log P_{y_{t-1}}

    The state is unused (``None``); beam search takes ``reorder = lambda state, index: state``.

    Parameters
    ----------
    probabilities : array_like
        ``(vocab, vocab)`` transition probabilities, row ``u`` the distribution of the token after ``u``;
        non-negative, each row summing to 1.

    Returns
    -------
    callable
        ``step(state, tokens) -> (log P[tokens], state)``, zero probabilities at ``-inf``.

    Examples
    --------
    >>> step = bigram_step([[0.5, 0.5], [0.0, 1.0]])
    >>> logits, state = step(None, np.array([1, 0]))
    >>> logits.round(4).tolist(), state is None
    ([[-inf, 0.0], [-0.6931, -0.6931]], True)
    """
    p = as_float_array(probabilities, "probabilities")  # (vocab, vocab)
    if p.ndim != 2 or p.shape[0] != p.shape[1] or p.shape[0] < 2:
        raise ValueError(f"probabilities must be a square (vocab, vocab) table with vocab >= 2, "
                         f"got shape {p.shape}")
    if np.any(p < 0) or not np.allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-9):
        raise ValueError("probabilities must be non-negative with every row summing to 1")
    with np.errstate(divide="ignore"):
        table = np.log(p)  # (vocab, vocab), -inf where p = 0

    def step(state, tokens):
        return table[tokens], state  # (rows, vocab)

    return step


# --- greedy search and sampling -------------------------------------------------------------------------


def greedy_decode(step: Step, state, batch_size: int, max_length: int, bos: int = BOS,
                  eos: int = EOS) -> DecodeOutput:
    r"""Greedy search: take the most probable next token at every step, until EOS or ``max_length`` tokens.

    .. math:: y_t = \arg\max_v \, p(v \mid y_{<t})

    Each row stops at its own EOS (PAD follows it). Ties go to the lower token index.

    Parameters
    ----------
    step : callable
        ``step(state, tokens) -> (logits, state)``: ``tokens`` ``(batch_size,)`` the newest token of each
        sequence (BOS first), ``logits`` ``(batch_size, vocab)`` the next token's scores, ``state`` what
        the model carries (a KV cache, or the prefix).
    state : object
        The model's state before the first token (a fresh cache, the encoder's memory, ...); opaque here.
    batch_size : int
        Sequences decoded together.
    max_length : int
        The most tokens generated per sequence, EOS included.
    bos, eos : int, optional
        The first input token and the token that ends a sequence; default ``BOS`` and ``EOS``.

    Returns
    -------
    DecodeOutput
        Tokens ``(batch_size, n <= max_length)``, log-probabilities and lengths.

    Examples
    --------
    >>> step = bigram_step([[0, 0, 1, 0, 0], [0, 0, .1, .5, .4], [0, 0, 1, 0, 0],
    ...                     [0, 0, .4, .3, .3], [0, 0, .9, .05, .05]])
    >>> out = greedy_decode(step, None, batch_size=2, max_length=5)
    >>> out.tokens.tolist(), np.exp(out.log_probs).round(2).tolist(), out.lengths.tolist()
    ([[3, 2], [3, 2]], [0.2, 0.2], [2, 2])
    """
    step = check_callable(step, "step")
    batch_size = check_positive_int(batch_size, "batch_size")
    max_length = check_positive_int(max_length, "max_length")
    bos, eos = _check_tokens(bos, eos)
    return decode_loop(step, state, batch_size, max_length, bos, eos, lambda logp: logp.argmax(axis=1))


def sample(step: Step, state, batch_size: int, max_length: int, temperature: float = 1.0,
           top_k: int | None = None, top_p: float | None = None, seed: int | np.random.Generator = 0,
           bos: int = BOS, eos: int = EOS) -> DecodeOutput:
    r"""Ancestral sampling: draw each next token from the model's distribution, tempered and truncated.

    .. math:: y_t \sim \operatorname{softmax}\bigl(\operatorname{filter}(z_t / T)\bigr)

    Top-k first, then the nucleus (:func:`nucleus_filter`); the draw is the Gumbel-max trick.
    ``log_probs`` are the model's own (temperature 1, unfiltered).

    Parameters
    ----------
    step, state, batch_size, max_length
        As in :func:`greedy_decode`.
    temperature : float, optional
        :math:`T > 0`; default 1.
    top_k : int, optional
        Keep only the ``top_k`` most probable tokens; default all.
    top_p : float, optional
        Keep only the smallest set of most probable tokens of total probability ``>= top_p``, in ``(0, 1]``.
    seed : int or numpy Generator, optional
        The random source; the same seed gives the same sequences.
    bos, eos : int, optional
        As in :func:`greedy_decode`.

    Returns
    -------
    DecodeOutput
        Tokens ``(batch_size, n <= max_length)``, log-probabilities and lengths.

    Examples
    --------
    >>> step = bigram_step([[0, 0, 1, 0, 0], [0, 0, .1, .5, .4], [0, 0, 1, 0, 0],
    ...                     [0, 0, .4, .3, .3], [0, 0, .9, .05, .05]])
    >>> sample(step, None, 3, 6, seed=0).tokens.tolist()
    [[3, 3, 2], [3, 2, 0], [3, 4, 2]]
    >>> sample(step, None, 1, 6, temperature=0.01).tokens.tolist()   # nearly greedy
    [[3, 2]]
    >>> sample(step, None, 1, 6, temperature=0)
    Traceback (most recent call last):
    ...
    ValueError: temperature must be a finite number > 0.0, got 0; for temperature 0 use greedy_decode
    """
    step = check_callable(step, "step")
    batch_size = check_positive_int(batch_size, "batch_size")
    max_length = check_positive_int(max_length, "max_length")
    try:
        temperature = check_positive_real(temperature, "temperature")
    except ValueError as error:
        raise ValueError(f"{error}; for temperature 0 use greedy_decode") from None
    if top_k is not None:
        top_k = check_positive_int(top_k, "top_k")
    if top_p is not None and not (check_positive_real(top_p, "top_p") <= 1):
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    bos, eos = _check_tokens(bos, eos)
    rng = check_seed(seed)

    def pick(logp: np.ndarray) -> np.ndarray:
        z = logp / temperature  # (batch, vocab)
        if top_k is not None:
            z = top_k_filter(z, top_k)  # (batch, vocab)
        if top_p is not None:
            z = nucleus_filter(z, top_p)  # (batch, vocab)
        return (log_softmax(z) + rng.gumbel(size=z.shape)).argmax(axis=1)  # (batch,)

    return decode_loop(step, state, batch_size, max_length, bos, eos, pick)


# --- beam search ----------------------------------------------------------------------------------------


def length_normalisation(length, alpha: float):
    r"""GNMT's length penalty, :math:`\mathrm{lp}(\ell) = \bigl((5 + \ell) / 6\bigr)^\alpha` (Wu et al., 2016).

    .. math:: \mathrm{score}(y) = \frac{\log p(y)}{\mathrm{lp}(|y|)}

    :math:`\alpha = 0` ranks by log-probability alone, which favours short sequences.

    Parameters
    ----------
    length : int or array_like of int
        :math:`|y|`, tokens in the hypothesis, EOS included.
    alpha : float
        :math:`\alpha \ge 0`.

    Returns
    -------
    float or ndarray
        :math:`\mathrm{lp}`, shaped like ``length``.

    Examples
    --------
    >>> length_normalisation(1, 0.6), round(length_normalisation(7, 1.0), 4)
    (1.0, 2.0)
    """
    alpha = check_positive_real(alpha, "alpha", strict=False)
    lp = ((5.0 + np.asarray(length, dtype=np.float64)) / 6.0) ** alpha  # (shape of length)
    return float(lp) if lp.ndim == 0 else lp


def beam_search(step: Step, reorder: Reorder, state, max_length: int, beam_width: int, bos: int = BOS,
                eos: int = EOS, length_penalty: float = 0.0) -> BeamSearchOutput:
    r"""Beam search for one input: keep the ``beam_width`` most probable prefixes at every step.

    .. math:: B_{t} = \operatorname{top}_{W} \bigl\{\, (y, v) : y \in B_{t-1},\ v \ne \mathrm{EOS} \,\bigr\}
              \text{ by } \log p(y) + \log p(v \mid y)

    An EOS continuation among the best ``W`` ends a hypothesis, ranked by :func:`length_normalisation`;
    search stops when no prefix can beat the best finished one, or after ``max_length`` tokens.
    ``beam_width = 1`` is greedy search.

    Parameters
    ----------
    step : callable
        ``step(state, tokens) -> (logits, state)``, called with ``beam_width`` rows.
    reorder : callable
        ``reorder(state, index) -> state``: row ``r`` of the result is row ``index[r]``; ``index`` is
        ``(beam_width,)`` int64. The first call tiles the one-row ``state``: ``index`` all zeros.
    state : object
        The model's state for one input (one row).
    max_length : int
        As in :func:`greedy_decode`.
    beam_width : int
        :math:`W`, prefixes kept per step.
    bos, eos : int, optional
        As in :func:`greedy_decode`.
    length_penalty : float, optional
        :math:`\alpha \ge 0` of the length normalisation; default 0 (rank by log-probability).

    Returns
    -------
    BeamSearchOutput
        The best hypothesis, and every finished one by decreasing score.

    Examples
    --------
    >>> step = bigram_step([[0, 0, 1, 0, 0], [0, 0, .1, .5, .4], [0, 0, 1, 0, 0],
    ...                     [0, 0, .4, .3, .3], [0, 0, .9, .05, .05]])
    >>> out = beam_search(step, lambda state, index: state, None, max_length=4, beam_width=2)
    >>> [(h.tokens.tolist(), round(float(np.exp(h.log_prob)), 2)) for h in out.hypotheses]
    [([4, 2], 0.36), ([3, 2], 0.2)]
    >>> beam_search(step, lambda state, index: state, None, 4, beam_width=1).best.tokens.tolist()  # greedy
    [3, 2]
    """
    step = check_callable(step, "step")
    reorder = check_callable(reorder, "reorder")
    max_length = check_positive_int(max_length, "max_length")
    beam_width = check_positive_int(beam_width, "beam_width")
    bos, eos = _check_tokens(bos, eos)
    alpha = check_positive_real(length_penalty, "length_penalty", strict=False)
    return beam_kernel(step, reorder, state, max_length, beam_width, bos, eos, alpha)


def beam_kernel(step: Step, reorder: Reorder, state, max_length: int, width: int, bos: int, eos: int,
                alpha: float) -> BeamSearchOutput:
    """Unchecked kernel of :func:`beam_search`.

    >>> t = np.log([[0.5, 0.5], [0.5, 0.5]])
    >>> beam_kernel(lambda s, x: (t[x], s), lambda s, i: s, None, 2, 2, 0, 1, 0.0).best.tokens.tolist()
    [1]
    """
    state = reorder(state, np.zeros(width, dtype=np.int64))
    prefixes = np.zeros((width, 0), dtype=np.int64)  # (W, t)
    scores = np.full(width, -np.inf)  # (W,): log p of each prefix; the copies start out of the race
    scores[0] = 0.0
    current = np.full(width, bos, dtype=np.int64)  # (W,)
    finished: list[Hypothesis] = []
    lp_max = float(((5.0 + max_length) / 6.0) ** alpha)
    for t in range(1, max_length + 1):
        logits, state = _logits(step, state, current)  # (W, V)
        total = scores[:, None] + log_softmax(logits)  # (W, V): log p of every continuation
        vocab = total.shape[1]
        ranked = np.argsort(-total, axis=None, kind="stable")  # (W V,): best continuation first
        beams, tokens = np.divmod(ranked, vocab)  # (W V,) each
        for rank in np.flatnonzero(tokens[:width] == eos):  # an EOS among the best W ends a hypothesis
            log_p = float(total[beams[rank], eos])
            if log_p > -math.inf:
                ended = np.append(prefixes[beams[rank]], eos)  # (t,)
                finished.append(Hypothesis(ended, log_p, log_p / float(((5.0 + t) / 6.0) ** alpha)))
        keep = np.flatnonzero(tokens != eos)[:width]  # (W,): the best W continuations by other tokens
        origin = beams[keep]  # (W,)
        scores = total[origin, tokens[keep]]  # (W,)
        prefixes = np.concatenate([prefixes[origin], tokens[keep, None]], axis=1)  # (W, t)
        current = tokens[keep]  # (W,)
        best_bound = scores.max() / lp_max  # no continuation of the beam can score higher
        if not np.isfinite(best_bound) or (finished and max(h.score for h in finished) >= best_bound):
            break
        if t < max_length:
            state = reorder(state, origin)
    else:  # max_length reached: the prefixes left are cut there
        finished += [Hypothesis(prefixes[r].copy(), float(scores[r]), float(scores[r]) / lp_max)
                     for r in range(width) if np.isfinite(scores[r])]
    hypotheses = tuple(sorted(finished, key=lambda h: -h.score))
    return BeamSearchOutput(hypotheses[0], hypotheses)
