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
score gradient through unchanged. The batches are :func:`attnbook.learning.tasks.recency_batch`; the
model trains on the scaffold of every model (:mod:`attnbook.learning.models.scaffold`); one run per
scheme, as the chapter makes them, is :func:`attnbook.learning.analysis.lengths.train_length_model`.

>>> params, record = scaffold.train(MODEL, LengthConfig("alibi", n_steps=40), progress=False)
>>> bool(np.mean(record["losses"][-5:]) < np.mean(record["losses"][:5]))
True
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...masks import causal_mask
from ...multihead import merge_heads, split_heads
from ...positional import alibi_slopes, rotary_frequencies, rotate, sinusoidal_encoding
from ...softmax import softmax_rows
from ...multihead import check_heads
from ...validation import Array, Dims, check_weights
from ..gradients import backpropagate, linear_grads
from ..tasks import draw_recency, recency_batch
from . import scaffold

__all__ = ["MODEL", "POSITION_SCHEMES", "LengthConfig", "LengthModel", "length_model_accuracy",
           "length_model_loss_and_gradients", "recency_batch"]

POSITION_SCHEMES = ("none", "sinusoidal", "learned", "rotary", "alibi")


class LengthConfig(NamedTuple):
    """The scheme, the task, the model and its training (the arguments of ``analysis.lengths.train_length_model``).

    Attributes
    ----------
    scheme : str
        One of ``POSITION_SCHEMES``.
    trained_length, n_steps, batch_size, d_model, n_heads, n_symbols : int
        See :func:`attnbook.learning.analysis.lengths.train_length_model`.
    p_signal, learning_rate : float
        The signal probability per position and Adam's constant step size.

    Examples
    --------
    >>> LengthConfig("rotary").d_model
    32
    """

    scheme: str
    trained_length: int = 32
    n_steps: int = 300
    batch_size: int = 32
    d_model: int = 32
    n_heads: int = 4
    n_symbols: int = 6
    p_signal: float = 0.25
    learning_rate: float = 0.02


class LengthModel(NamedTuple):
    """Parameters of the one-layer model (``d`` = ``d_model``, ``V`` = ``n_symbols + 1`` tokens).

    Attributes
    ----------
    embed, table, w_q, w_k, w_v, w_o : ndarray
        ``(V, d)`` token embeddings; ``(trained_length, d)`` learned position vectors (zeros, and untouched,
        but for "learned"); ``(d, d)`` projections, split into heads after the product; ``(d, V)`` read-out.

    Examples
    --------
    >>> init_length_model(8, 3, 5).table.shape
    (5, 8)
    """

    embed: Array["vocab, d_model"]  # token embeddings
    table: Array["trained_length, d_model"]  # learned position vectors
    w_q: Array["d_model, d_model"]
    w_k: Array["d_model, d_model"]
    w_v: Array["d_model, d_model"]
    w_o: Array["d_model, vocab"]  # read-out


def _check_scheme(scheme) -> str:
    if scheme not in POSITION_SCHEMES:
        raise ValueError(f"scheme must be one of {POSITION_SCHEMES}, got {scheme!r}")
    return scheme


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


class _LengthForward(NamedTuple):  # the forward pass of the length model, kept for its backward pass
    logits: np.ndarray  # (B, n, V)
    x: np.ndarray  # (B, n, d)
    q: np.ndarray  # (B, h, n, d_head), rotated for "rotary"
    k: np.ndarray  # (B, h, n, d_head)
    v: np.ndarray  # (B, h, n, d_head)
    weights: np.ndarray  # (B, h, n, n)
    merged: np.ndarray  # (B, n, d)
    angles: np.ndarray | None  # (n, d_head / 2)
    q_factor: float


def forward(params: LengthModel, tokens: np.ndarray, scheme: str, n_heads: int, frequencies=None,
            q_factor: float = 1.0) -> _LengthForward:
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
    q = split_heads.unchecked(x @ params.w_q, n_heads)  # (B, h, n, d_head)
    k = split_heads.unchecked(x @ params.w_k, n_heads)  # (B, h, n, d_head)
    v = split_heads.unchecked(x @ params.w_v, n_heads)  # (B, h, n, d_head)
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
    merged = merge_heads.unchecked(mixed)  # (B, n, d)
    return _LengthForward(merged @ params.w_o, x, q, k, v, weights, merged, angles, q_factor)


def _checked(params, tokens, scheme, n_heads) -> tuple[np.ndarray, int]:
    _check_scheme(scheme)
    if not isinstance(params, LengthModel):
        raise TypeError("params must be a LengthModel (see train_length_model)")
    d = np.shape(params.w_q)[-1]
    params = check_weights(params, LengthModel, "params", Dims(d_model=(d, f"params.w_q has d_model = {d}")))
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


def taped(params: LengthModel, tokens: np.ndarray, scheme: str, n_heads: int) -> tuple:
    """Unchecked kernel: the forward pass and ``back(d_logits) -> grads`` (a :class:`LengthModel`).

    >>> forward_, back = taped(init_length_model(4, 2, 3), np.ones((1, 3), int), "rotary", 1)
    >>> back(np.ones_like(forward_.logits)).w_o.shape
    (4, 3)
    """
    f = forward(params, tokens, scheme, n_heads)
    n = tokens.shape[1]

    def back(d_logits):
        d_merged, d_w_o = linear_grads(f.merged, params.w_o, d_logits)  # (B, n, d), (d, V)
        grads, _ = backpropagate(f.q, f.k, f.v, f.weights, split_heads.unchecked(d_merged, n_heads), causal_mask(n),
                                 1 / np.sqrt(f.q.shape[-1]))  # through the scores; the ALiBi bias is a constant
        dq, dk = grads.dq, grads.dk  # (B, h, n, d_head) each
        if scheme == "rotary":  # q' = c rotate(q, angles): dq = c rotate(dq', -angles)
            dq, dk = f.q_factor * rotate(dq, -f.angles), f.q_factor * rotate(dk, -f.angles)
        dq, dk, dv = (merge_heads.unchecked(g) for g in (dq, dk, grads.dv))  # (B, n, d) each
        dx_q, d_w_q = linear_grads(f.x, params.w_q, dq)  # (B, n, d), (d, d)
        dx_k, d_w_k = linear_grads(f.x, params.w_k, dk)
        dx_v, d_w_v = linear_grads(f.x, params.w_v, dv)
        dx = dx_q + dx_k + dx_v  # (B, n, d)
        d_embed = np.zeros_like(params.embed)  # (V, d)
        np.add.at(d_embed, tokens.ravel(), dx.reshape(-1, dx.shape[-1]))
        d_table = np.zeros_like(params.table)  # (L, d)
        if scheme == "learned":
            d_table[:n] = dx.sum(axis=0)  # (n, d)
        return LengthModel(d_embed, d_table, d_w_q, d_w_k, d_w_v, d_w_o)

    return f, back


def length_model_loss_and_gradients(params: LengthModel, tokens, targets, scheme: str,
                                    n_heads: int) -> tuple[float, LengthModel]:
    r"""Mean cross-entropy of the model on a batch, and its gradient for every parameter.

    .. math:: \frac{\partial L}{\partial Q} = \Bigl(\frac{\partial L}{\partial Q'}\Bigr) R_{p}
              \quad\text{(RoPE: the opposite rotation)},\qquad
              \frac{\partial L}{\partial S}\ \text{unchanged by the ALiBi bias}

    Parameters
    ----------
    params, tokens, targets, scheme, n_heads
        The parameters; ``(batch, n)`` tokens and targets of :func:`recency_batch`; one of
        :data:`POSITION_SCHEMES`; the number of heads, which divides ``d_model``.

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
    f, back = taped(params, tokens, scheme, n_heads)
    loss, d_logits = scaffold.entropy_loss(f.logits, np.asarray(targets))  # targets (batch, n)
    return loss, back(d_logits)


def length_model_accuracy(params: LengthModel, tokens, targets, scheme: str, n_heads: int,
                          frequencies=None, q_factor: float = 1.0, positions=None) -> float:
    r"""Share of positions whose largest logit is the target: :math:`\frac{1}{|P|}\sum_{i \in P} [\arg\max z_i = t_i]`.

    Parameters
    ----------
    params, tokens, targets, scheme, n_heads
        As in :func:`length_model_loss_and_gradients`; ``n`` may exceed the trained length (not for "learned").
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


def _init(config: LengthConfig, seed: int) -> LengthModel:
    scaffold.check_config(config, LengthConfig)
    scheme, n_heads = _check_scheme(config.scheme), check_heads(config.d_model, config.n_heads)
    if scheme in ("rotary", "sinusoidal") and (config.d_model // n_heads) % 2:
        raise ValueError(f"scheme {scheme!r} pairs coordinates: d_model / n_heads = {config.d_model // n_heads} must be even")
    if not 0 < config.p_signal <= 1:
        raise ValueError(f"p_signal must be in (0, 1], got {config.p_signal!r}")
    return init_length_model(config.d_model, config.n_symbols, config.trained_length, seed)


MODEL = scaffold.Model(
    name="", config=LengthConfig, init=_init,
    forward=lambda params, batch, c: taped(params, batch[0], c.scheme, c.n_heads),
    loss=lambda logits, batch, c: scaffold.entropy_loss(logits, batch[1]),
    batch=lambda rng, c: draw_recency(rng, c.batch_size, c.trained_length, c.n_symbols, float(c.p_signal)),
    evaluate=lambda params, c: {"accuracy": length_model_accuracy(
        params, *recency_batch(64, c.trained_length, c.n_symbols, c.p_signal, seed=12345), c.scheme, c.n_heads)},
    fit_options=lambda c: {"learning_rate": float(c.learning_rate), "max_norm": None, "betas": (0.9, 0.999),
                           "eps": 1e-8},
)
