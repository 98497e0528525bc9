"""Train at one length, test at longer ones: five ways to give a one-layer model its positions.

The task, *most recent signal*: a sequence of ``n`` tokens holds blanks (token 0) and, now and then,
a signal (one of ``1 .. n_symbols``); position 0 always holds a signal. At every position the model
must name the most recent signal so far (the current token included). Content says which keys are
signals; only position says which of them is the most recent.

The model is one causal multi-head attention layer and a linear read-out, with the position scheme
as a parameter:

    X = E[tokens] (+ PE),  Q, K, V = X W_Q, X W_K, X W_V  (split into heads),
    S = Q' K'^T / sqrt(d_head) (+ ALiBi bias),  O = softmax_causal(S) V,  logits = O W_O

where ``PE`` is the sinusoidal encoding ("sinusoidal") or a learned table ("learned"), and
``Q' = rope(Q)``, ``K' = rope(K)`` for "rotary" (otherwise ``Q' = Q``). "none" has no position signal
but the causal mask. Gradients come from :mod:`attnbook.learning.gradients`; RoPE is a fixed rotation,
so its backward pass is the opposite rotation, and the ALiBi bias is a constant, which passes the
score gradient through unchanged.

>>> run = train_length_model("alibi", n_steps=40, seed=0)
>>> bool(run.losses[-5:].mean() < run.losses[:5].mean())
True
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..masks import causal_mask
from ..multihead import from_heads, to_heads
from ..positional import alibi_slopes, rotary_frequencies, rotate, sinusoidal_encoding
from ..softmax import softmax_rows
from ..validation import check_heads, check_positive_int
from .gradients import backpropagate, entropy, entropy_grads, linear_grads
from .optim import adam_update, init_adam

__all__ = [
    "POSITION_SCHEMES",
    "LengthModel",
    "LengthRun",
    "length_model_accuracy",
    "length_model_loss_and_gradients",
    "recency_batch",
    "train_length_model",
]

POSITION_SCHEMES = ("none", "sinusoidal", "learned", "rotary", "alibi")


class LengthModel(NamedTuple):
    """Parameters of the one-layer model (``d`` = ``d_model``, ``V`` = ``n_symbols + 1`` tokens).

    Attributes
    ----------
    embed : ndarray
        ``(V, d)`` token embeddings.
    table : ndarray
        ``(trained_length, d)`` learned position vectors; zeros (and untouched) except for "learned".
    w_q, w_k, w_v : ndarray
        ``(d, d)`` projections, split into heads after the product.
    w_o : ndarray
        ``(d, V)`` read-out to one logit per token.

    Examples
    --------
    >>> init_length_model(8, 3, 5).table.shape
    (5, 8)
    """

    embed: np.ndarray
    table: np.ndarray
    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray


class LengthRun(NamedTuple):
    """A trained model and how it got there.

    Attributes
    ----------
    params : LengthModel
        The trained parameters.
    losses : ndarray
        ``(n_steps,)`` training loss per step.
    scheme : str
        The position scheme.
    n_heads : int
        Number of heads.
    trained_length : int
        The sequence length of training.

    Examples
    --------
    >>> train_length_model("alibi", trained_length=6, n_steps=3, d_model=8, n_heads=2).scheme
    'alibi'
    """

    params: LengthModel
    losses: np.ndarray
    scheme: str
    n_heads: int
    trained_length: int


def _check_scheme(scheme) -> str:
    if scheme not in POSITION_SCHEMES:
        raise ValueError(f"scheme must be one of {POSITION_SCHEMES}, got {scheme!r}")
    return scheme


def recency_batch(n_sequences: int, length: int, n_symbols: int = 6, p_signal: float = 0.25,
                  seed: int | np.random.Generator = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""Sequences of the *most recent signal* task and their targets.

    .. math:: t_i = x_{j^*(i)}, \qquad j^*(i) = \max\{\, j \le i : x_j \ne 0 \,\}

    Parameters
    ----------
    n_sequences : int
        Batch size; positive.
    length : int
        Tokens per sequence; positive.
    n_symbols : int, optional
        Signal tokens ``1 .. n_symbols``; token 0 is the blank. Default 6.
    p_signal : float, optional
        Probability that a position after the first holds a signal; in ``(0, 1]``. Default 0.25.
    seed : int or numpy Generator, optional
        Seeds the draw.

    Returns
    -------
    tuple of ndarray
        ``(tokens, targets)``, both ``(n_sequences, length)`` int64.

    Examples
    --------
    >>> tokens, targets = recency_batch(1, 8, seed=2)
    >>> tokens.tolist(), targets.tolist()
    ([[6, 0, 1, 2, 0, 0, 0, 1]], [[6, 6, 1, 2, 2, 2, 2, 1]])
    """
    n_sequences = check_positive_int(n_sequences, "n_sequences")
    length = check_positive_int(length, "length")
    n_symbols = check_positive_int(n_symbols, "n_symbols")
    if not 0 < p_signal <= 1:
        raise ValueError(f"p_signal must be in (0, 1], got {p_signal!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    return draw_recency(rng, n_sequences, length, n_symbols, float(p_signal))


def draw_recency(rng: np.random.Generator, n_sequences: int, length: int, n_symbols: int,
                 p_signal: float) -> tuple[np.ndarray, np.ndarray]:
    """Unchecked kernel of :func:`recency_batch`.

    >>> draw_recency(np.random.default_rng(0), 2, 3, 4, 1.0)[1].shape
    (2, 3)
    """
    symbols = rng.integers(1, n_symbols + 1, size=(n_sequences, length))  # (B, n)
    signal = rng.random((n_sequences, length)) < p_signal  # (B, n)
    signal[:, 0] = True
    tokens = np.where(signal, symbols, 0)  # (B, n)
    last = np.maximum.accumulate(np.where(signal, np.arange(length), 0), axis=1)  # (B, n): index of j*(i)
    targets = np.take_along_axis(tokens, last, axis=1)  # (B, n)
    return tokens.astype(np.int64), targets.astype(np.int64)


def init_length_model(d_model: int, n_symbols: int, trained_length: int, seed: int = 0) -> LengthModel:
    """Unchecked kernel: small random parameters, seeded (the table starts at zero).

    >>> init_length_model(8, 3, 5).w_o.shape
    (8, 4)
    """
    rng = np.random.default_rng(seed)
    n_tokens = n_symbols + 1
    scale = 1 / np.sqrt(d_model)
    return LengthModel(rng.standard_normal((n_tokens, d_model)),  # (V, d)
                       np.zeros((trained_length, d_model)),  # (L, d)
                       *(scale * rng.standard_normal((3, d_model, d_model))),  # (d, d) each
                       scale * rng.standard_normal((d_model, n_tokens)))  # (d, V)


class _Forward(NamedTuple):
    x: np.ndarray  # (B, n, d)
    q: np.ndarray  # (B, h, n, d_head), rotated for "rotary"
    k: np.ndarray  # (B, h, n, d_head)
    v: np.ndarray  # (B, h, n, d_head)
    weights: np.ndarray  # (B, h, n, n)
    merged: np.ndarray  # (B, n, d)
    logits: np.ndarray  # (B, n, V)
    angles: np.ndarray | None  # (n, d_head / 2)
    q_factor: float


def forward(params: LengthModel, tokens: np.ndarray, scheme: str, n_heads: int, frequencies=None,
            q_factor: float = 1.0) -> _Forward:
    """Unchecked kernel: the forward pass; ``frequencies`` replaces RoPE's, ``q_factor`` multiplies q and k.

    >>> p = init_length_model(8, 3, 4)
    >>> forward(p, np.zeros((1, 4), dtype=int), "rotary", 2).logits.shape
    (1, 4, 4)
    """
    n = tokens.shape[1]
    x = params.embed[tokens]  # (B, n, d)
    if scheme == "sinusoidal":
        x = x + sinusoidal_encoding(n, x.shape[-1])  # (B, n, d)
    elif scheme == "learned":
        x = x + params.table[:n]  # (B, n, d)
    q = to_heads(x @ params.w_q, n_heads)  # (B, h, n, d_head)
    k = to_heads(x @ params.w_k, n_heads)  # (B, h, n, d_head)
    v = to_heads(x @ params.w_v, n_heads)  # (B, h, n, d_head)
    d_head = q.shape[-1]
    angles = None
    if scheme == "rotary":
        theta = rotary_frequencies(d_head) if frequencies is None else frequencies  # (d_head / 2,)
        angles = np.arange(n)[:, None] * theta[None, :]  # (n, d_head / 2)
        q, k = q_factor * rotate(q, angles), q_factor * rotate(k, angles)  # (B, h, n, d_head) each
    # At test lengths an (n, d_head) x (d_head, n) product is large enough for OpenBLAS to start threads,
    # which on a busy machine cost more than they save: einsum (no BLAS) then, @ for training lengths.
    long = n * n * d_head > 2**15
    scores = np.einsum("bhid,bhjd->bhij", q, k) if long else q @ np.swapaxes(k, -1, -2)  # (B, h, n, n)
    scores = scores / np.sqrt(d_head)  # (B, h, n, n)
    if scheme == "alibi":
        distance = np.arange(n)[:, None] - np.arange(n)[None, :]  # (n, n): i - j
        scores = scores - alibi_slopes(n_heads)[:, None, None] * distance  # (B, h, n, n)
    weights = softmax_rows(scores, causal_mask(n))  # (B, h, n, n)
    mixed = np.einsum("bhij,bhjd->bhid", weights, v) if long else weights @ v  # (B, h, n, d_head)
    merged = from_heads(mixed)  # (B, n, d)
    return _Forward(x, q, k, v, weights, merged, merged @ params.w_o, angles, q_factor)


def _checked(params, tokens, scheme, n_heads) -> tuple[np.ndarray, int]:
    if not isinstance(params, LengthModel):
        raise TypeError("params must be a LengthModel (see train_length_model)")
    _check_scheme(scheme)
    n_heads = check_heads(params.w_q.shape[1], n_heads)
    tokens = np.asarray(tokens)  # (B, n)
    if tokens.ndim != 2 or tokens.dtype.kind not in "iu":
        raise ValueError(f"tokens must be a (batch, n) array of integer tokens, got shape {tokens.shape}")
    if np.any((tokens < 0) | (tokens >= params.embed.shape[0])):
        raise ValueError(f"tokens must lie in 0 .. {params.embed.shape[0] - 1}")
    if scheme == "learned" and tokens.shape[1] > params.table.shape[0]:
        raise ValueError(f"a learned table of {params.table.shape[0]} positions has no row for position "
                         f"{params.table.shape[0]}: sequences of {tokens.shape[1]} tokens cannot be encoded")
    return tokens, n_heads


def length_model_loss_and_gradients(params: LengthModel, tokens, targets, scheme: str,
                                    n_heads: int) -> tuple[float, LengthModel]:
    r"""Mean cross-entropy of the model on a batch, and its gradient for every parameter.

    .. math:: \frac{\partial L}{\partial Q} = \Bigl(\frac{\partial L}{\partial Q'}\Bigr) R_{p}
              \quad\text{(RoPE: the opposite rotation)},\qquad
              \frac{\partial L}{\partial S}\ \text{unchanged by the ALiBi bias}

    Parameters
    ----------
    params : LengthModel
        The parameters.
    tokens, targets : array_like of int
        ``(batch, n)`` each, as from :func:`recency_batch`.
    scheme : {"none", "sinusoidal", "learned", "rotary", "alibi"}
        The position scheme.
    n_heads : int
        Number of heads; divides ``d_model``.

    Returns
    -------
    tuple
        ``(loss, grads)``, grads a :class:`LengthModel` of gradients.

    Examples
    --------
    >>> p = init_length_model(8, 3, 6)
    >>> tokens, targets = recency_batch(2, 6, n_symbols=3)
    >>> loss, g = length_model_loss_and_gradients(p, tokens, targets, "rotary", 2)
    >>> g.w_q.shape, bool(np.all(g.table == 0))
    ((8, 8), True)
    """
    tokens, n_heads = _checked(params, tokens, scheme, n_heads)
    return loss_and_gradients(params, tokens, np.asarray(targets), scheme, n_heads)


def loss_and_gradients(params: LengthModel, tokens: np.ndarray, targets: np.ndarray, scheme: str,
                       n_heads: int) -> tuple[float, LengthModel]:
    """Unchecked kernel of :func:`length_model_loss_and_gradients`.

    >>> p = init_length_model(4, 2, 3)
    >>> round(loss_and_gradients(p, np.ones((1, 3), int), np.ones((1, 3), int), "none", 1)[0], 3) > 0
    True
    """
    f = forward(params, tokens, scheme, n_heads)
    n = tokens.shape[1]
    d_logits = entropy_grads(f.logits, targets)  # (B, n, V)
    d_merged, d_w_o = linear_grads(f.merged, params.w_o, d_logits)  # (B, n, d), (d, V)
    grads, _ = backpropagate(f.q, f.k, f.v, f.weights, to_heads(d_merged, n_heads), causal_mask(n),
                             1 / np.sqrt(f.q.shape[-1]))  # through the scores; the ALiBi bias is a constant
    dq, dk = grads.dq, grads.dk  # (B, h, n, d_head) each
    if scheme == "rotary":  # q' = c rotate(q, angles): dq = c rotate(dq', -angles)
        dq, dk = f.q_factor * rotate(dq, -f.angles), f.q_factor * rotate(dk, -f.angles)
    dq, dk, dv = from_heads(dq), from_heads(dk), from_heads(grads.dv)  # (B, n, d) each
    dx_q, d_w_q = linear_grads(f.x, params.w_q, dq)  # (B, n, d), (d, d)
    dx_k, d_w_k = linear_grads(f.x, params.w_k, dk)
    dx_v, d_w_v = linear_grads(f.x, params.w_v, dv)
    dx = dx_q + dx_k + dx_v  # (B, n, d)
    d_embed = np.zeros_like(params.embed)  # (V, d)
    np.add.at(d_embed, tokens.ravel(), dx.reshape(-1, dx.shape[-1]))
    d_table = np.zeros_like(params.table)  # (L, d)
    if scheme == "learned":
        d_table[:n] = dx.sum(axis=0)  # (n, d)
    return entropy(f.logits, targets), LengthModel(d_embed, d_table, d_w_q, d_w_k, d_w_v, d_w_o)


def length_model_accuracy(params: LengthModel, tokens, targets, scheme: str, n_heads: int,
                          frequencies=None, q_factor: float = 1.0, positions=None) -> float:
    r"""Share of positions whose largest logit is the target: :math:`\frac{1}{|P|}\sum_{i \in P} [\arg\max z_i = t_i]`.

    Parameters
    ----------
    params : LengthModel
        Trained parameters.
    tokens, targets : array_like of int
        ``(batch, n)``; ``n`` may exceed the trained length (not for "learned").
    scheme : str
        The scheme the model was trained with.
    n_heads : int
        Number of heads.
    frequencies : array_like, optional
        ``(d_head / 2,)`` RoPE frequencies to use instead of the trained ones (a context extension,
        see :func:`attnbook.positional.rotary_frequencies`); "rotary" only.
    q_factor : float, optional
        Multiplies the rotated queries and keys (YaRN's :func:`attnbook.positional.yarn_attention_factor`).
    positions : slice, optional
        Which positions count; default all.

    Returns
    -------
    float
        The accuracy, in ``[0, 1]``.

    Examples
    --------
    >>> p = init_length_model(8, 3, 4)
    >>> tokens, targets = recency_batch(2, 8, n_symbols=3)
    >>> length_model_accuracy(p, tokens, targets, "learned", 2)
    Traceback (most recent call last):
    ...
    ValueError: a learned table of 4 positions has no row for position 4: sequences of 8 tokens cannot be encoded
    """
    tokens, n_heads = _checked(params, tokens, scheme, n_heads)
    if frequencies is not None:
        if scheme != "rotary":
            raise ValueError(f"frequencies replace RoPE's; scheme {scheme!r} has none")
        frequencies = np.asarray(frequencies, dtype=np.float64)  # (d_head / 2,)
        if frequencies.shape != (params.w_q.shape[1] // n_heads // 2,):
            raise ValueError(f"frequencies has shape {frequencies.shape}; expected one per pair of a head's "
                             f"coordinates, ({params.w_q.shape[1] // n_heads // 2},)")
    # a few sequences at a time: the (chunk, heads, n, n) weights stay small
    chunk = max(1, 4096 // tokens.shape[1])
    predicted = np.concatenate([forward(params, tokens[start:start + chunk], scheme, n_heads, frequencies,
                                        float(q_factor)).logits.argmax(axis=-1)  # (chunk, n)
                                for start in range(0, tokens.shape[0], chunk)])  # (B, n)
    hits = predicted == np.asarray(targets)  # (B, n)
    return float(hits[:, positions if positions is not None else slice(None)].mean())


def train_length_model(scheme: str, trained_length: int = 32, n_steps: int = 300, batch_size: int = 32,
                       d_model: int = 32, n_heads: int = 4, n_symbols: int = 6, p_signal: float = 0.25,
                       learning_rate: float = 0.02, seed: int = 0) -> LengthRun:
    r"""Train the one-layer model on the most-recent-signal task at one length, with Adam.

    .. math:: \theta \leftarrow \mathrm{Adam}\bigl(\theta, \nabla_\theta L(\theta; \text{fresh batch of length } L)\bigr)

    Parameters
    ----------
    scheme : {"none", "sinusoidal", "learned", "rotary", "alibi"}
        How the model sees positions.
    trained_length : int, optional
        :math:`L`, the length of every training sequence; default 32.
    n_steps, batch_size : int, optional
        Adam steps and sequences per step; defaults 300 and 32.
    d_model, n_heads : int, optional
        Width and heads; ``n_heads`` divides ``d_model`` and each head's width is even for "rotary".
    n_symbols : int, optional
        Signal tokens; default 6.
    p_signal : float, optional
        Signal probability per position; default 0.25.
    learning_rate : float, optional
        Adam's step size; default 0.02.
    seed : int, optional
        Seeds the parameters and the batches.

    Returns
    -------
    LengthRun
        Trained parameters, the loss per step and the settings.

    Examples
    --------
    >>> run = train_length_model("rotary", trained_length=8, n_steps=5, d_model=8, n_heads=2)
    >>> run.losses.shape, run.trained_length
    ((5,), 8)
    """
    scheme = _check_scheme(scheme)
    trained_length = check_positive_int(trained_length, "trained_length")
    n_steps = check_positive_int(n_steps, "n_steps")
    batch_size = check_positive_int(batch_size, "batch_size")
    d_model = check_positive_int(d_model, "d_model")
    n_heads = check_heads(d_model, n_heads)
    n_symbols = check_positive_int(n_symbols, "n_symbols")
    if scheme in ("rotary", "sinusoidal") and (d_model // n_heads) % 2:
        raise ValueError(f"scheme {scheme!r} pairs coordinates: d_model / n_heads = {d_model // n_heads} must be even")
    if not 0 < p_signal <= 1:
        raise ValueError(f"p_signal must be in (0, 1], got {p_signal!r}")
    rng = np.random.default_rng(seed)
    params = init_length_model(d_model, n_symbols, trained_length, seed)
    state = init_adam(params)
    losses = np.empty(n_steps)  # (n_steps,)
    for step in range(n_steps):
        tokens, targets = draw_recency(rng, batch_size, trained_length, n_symbols, float(p_signal))
        losses[step], grads = loss_and_gradients(params, tokens, targets, scheme, n_heads)
        params, state = adam_update(params, grads, state, float(learning_rate))
    return LengthRun(params, losses, scheme, n_heads, trained_length)
