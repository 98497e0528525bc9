"""Homework checks of the later chapters: sinusoidal encodings, the backward pass of layer norm, and decoding
(the nucleus filter, greedy decoding). Each is a :func:`attnbook.homework.verdict.check` body.

>>> from attnbook import sinusoidal_encoding
>>> check_sinusoidal_encoding(sinusoidal_encoding, quiet=True).passed
True
"""

from __future__ import annotations

import copy

import numpy as np

from ..learning.decoding import bigram_step, greedy_decode, nucleus_filter
from ..measure.probes import numerical_jacobian
from ..positional import sinusoidal_encoding
from ..softmax import softmax
from ..transformer import layer_norm
from .compare import agrees, answer_array, compare, first_matching
from .verdict import Failure, call_student, check

__all__ = ["check_greedy_decode", "check_layer_norm_backward", "check_nucleus_filter", "check_sinusoidal_encoding"]


# --- positional encodings ---------------------------------------------------------------------------


def _encoding_variant(n: int, d: int, *, exponent=None, swap=False, concat=False, start=0) -> np.ndarray:
    pair = np.arange(d // 2)  # (d/2,)
    exponent = 2 * pair / d if exponent is None else exponent(pair, d)  # (d/2,)
    angles = np.arange(start, start + n)[:, None] * 10000.0 ** (-exponent)[None, :]  # (n, d/2)
    first, second = (np.cos(angles), np.sin(angles)) if swap else (np.sin(angles), np.cos(angles))
    if concat:
        return np.concatenate([first, second], axis=1)  # (n, d)
    out = np.empty((n, d))  # (n, d)
    out[:, 0::2], out[:, 1::2] = first, second
    return out


@check
def check_sinusoidal_encoding(fn, label: str, rng: np.random.Generator, seed: int) -> str:
    r"""Check ``fn(n_positions, d_model)``: ``PE[p, 2i] = sin(p / 10000^(2i/d))``, ``PE[p, 2i+1] = cos(...)``.

    .. math:: PE_{p, 2i} = \sin(p / 10000^{2i/d}), \quad PE_{p, 2i+1} = \cos(p / 10000^{2i/d})

    Parameters
    ----------
    fn : callable
        The student's ``fn(n_positions, d_model)``.

    Examples
    --------
    >>> def swapped(n_positions, d_model):
    ...     pairs = sinusoidal_encoding(n_positions, d_model).reshape(n_positions, -1, 2)  # (n, d/2, 2)
    ...     return pairs[:, :, ::-1].reshape(n_positions, d_model)  # (n, d): cos first in each pair
    >>> _ = check_sinusoidal_encoding(swapped)
    ✗ swapped: wrong values for n_positions = 6, d_model = 8: sine and cosine are swapped: even
      columns 2i hold sin, odd columns 2i+1 hold cos
    >>> check_sinusoidal_encoding(sinusoidal_encoding).passed
    ✓ sinusoidal_encoding: correct for (6, 8), (50, 16) and (1, 2)
    True
    """
    sizes = ((6, 8), (50 + seed, 16), (1, 2))

    for n, d in sizes:
        context = f"for n_positions = {n}, d_model = {d}"
        got = answer_array(call_student(fn, label, n, d), f"what {label} returned")
        if got.shape == (d, n) and n != d:
            raise Failure(f"{label}: wrong shape {got.shape} {context}: expected ({n}, {d}), "
                           "one row per position (a transpose?)")
        mistakes = [
            (lambda: _encoding_variant(n, d, swap=True), "sine and cosine are swapped: even columns 2i "
             "hold sin, odd columns 2i+1 hold cos"),
            (lambda: _encoding_variant(n, d, concat=True), "all sines come first and all cosines after; "
             "interleave them: sin in column 2i, cos in column 2i+1"),
            (lambda: _encoding_variant(n, d, exponent=lambda i, dd: i / dd), "the exponent is i/d_model; "
             "pair i uses 10000^(2i/d_model)"),
            (lambda: _encoding_variant(n, d, exponent=lambda i, dd: -2 * i / dd), "the frequencies grow; "
             "divide the position by 10000^(2i/d_model), do not multiply"),
            (lambda: _encoding_variant(n, d, start=1), "the positions start at 1; the first row encodes "
             "position 0"),
        ]
        mistakes.append((lambda: _odd_columns_own_exponent(n, d), "column 2i+1 uses its own index in the "
                         "exponent; both columns of pair i use 10000^(2i/d_model)"))
        if got.shape == (n, d):
            explanation = first_matching(got, sinusoidal_encoding(n, d), mistakes)
            if explanation:
                raise Failure(f"{label}: wrong values {context}: {explanation}")
        compare(got, sinusoidal_encoding(n, d), label, context)
    return f"{label}: correct for {sizes[0]}, {sizes[1]} and {sizes[2]}"


def _odd_columns_own_exponent(n: int, d: int) -> np.ndarray:
    column = np.arange(d)  # (d,)
    angles = np.arange(n)[:, None] * 10000.0 ** (-column / d)[None, :]  # (n, d)
    return np.where(column % 2 == 0, np.sin(angles), np.cos(angles))  # (n, d)


# --- learning: a backward pass and decoding ---------------------------------------------------------


def _relative_error(got: np.ndarray, expected: np.ndarray) -> float:
    """``max |got - expected| / max |expected|`` (the absolute error when ``expected`` is 0)."""
    return float(np.max(np.abs(got - expected)) / max(float(np.max(np.abs(expected))), 1e-12))


def _agrees_with_differences(got: np.ndarray, expected: np.ndarray) -> bool:
    """Within a relative error of 1e-6 of central differences: ``max |got - expected| <= 1e-6 max |expected|``."""
    return agrees(got, expected, rtol=0.0, atol=1e-6 * max(float(np.max(np.abs(expected))), 1e-12))


def _layer_norm_differences(x: np.ndarray, gamma: np.ndarray, dy: np.ndarray, eps: float) -> tuple:
    """``dx, dgamma, dbeta`` of ``L = sum(dy * layer_norm(x, gamma, beta, eps))`` by central differences."""
    beta = np.zeros_like(gamma)  # (d,): the gradients do not depend on it
    dx = numerical_jacobian(lambda z: np.sum(dy * layer_norm(z, gamma, beta, eps)), x)  # (..., d)
    dgamma = numerical_jacobian(lambda g: np.sum(dy * layer_norm(x, g, beta, eps)), gamma)  # (d,)
    dbeta = numerical_jacobian(lambda b: np.sum(dy * layer_norm(x, gamma, b, eps)), beta)  # (d,)
    return dx, dgamma, dbeta


def _layer_norm_mistakes(x: np.ndarray, gamma: np.ndarray, dy: np.ndarray, eps: float) -> list:
    """The ``dx`` of the usual wrong formulas, each with its explanation."""
    std = np.sqrt(x.var(axis=-1, keepdims=True) + eps)  # (..., 1)
    x_hat = (x - x.mean(axis=-1, keepdims=True)) / std  # (..., d)
    g = dy * gamma  # (..., d)
    g_mean = g.mean(axis=-1, keepdims=True)  # (..., 1)
    g_x_hat = (g * x_hat).mean(axis=-1, keepdims=True)  # (..., 1)
    return [
        (lambda: (g - g_mean) / std, "the term -x_hat * mean(g * x_hat) is missing: the standard deviation "
                                     "depends on x too"),
        (lambda: (g - x_hat * g_x_hat) / std, "the term -mean(g) is missing: the mean depends on x too"),
        (lambda: (dy - dy.mean(axis=-1, keepdims=True)
                  - x_hat * (dy * x_hat).mean(axis=-1, keepdims=True)) / std,
         "gamma is missing: the gradient reaching x_hat is g = dy * gamma"),
        (lambda: g - g_mean - x_hat * g_x_hat, "the factor 1/sigma is missing: x_hat = (x - mean) / sigma"),
        (lambda: g / std, "only the direct path: the mean and the standard deviation depend on x too"),
    ]


@check
def check_layer_norm_backward(fn, label: str, rng: np.random.Generator, seed: int) -> str:
    r"""Check ``fn(x, gamma, dy) -> (dx, dgamma, dbeta)``, layer norm's backward pass, by finite differences.

    .. math:: y = \gamma \odot \hat x + \beta, \quad \hat x = \frac{x - \mu}{\sigma}, \qquad
              dx = \frac{1}{\sigma}\bigl(g - \overline{g} - \hat x\, \overline{g \odot \hat x}\bigr),
              \quad g = \gamma \odot dy

    The reference is not the package's backward pass: the three gradients of
    :math:`L = \sum dy \odot \operatorname{LayerNorm}(x)` are estimated by central differences
    (:func:`attnbook.measure.probes.numerical_jacobian`) of the package's :func:`attnbook.layer_norm`, in
    float64, and must agree to a relative error of :math:`10^{-6}`; each row of ``dx`` must sum to 0.
    The inputs have :math:`\gamma \ne 1`, a batch of positions and rows far from 0.

    Parameters
    ----------
    fn : callable
        The student's ``fn(x, gamma, dy) -> (dx, dgamma, dbeta)``, for ``x`` and ``dy`` ``(..., d)``
        and ``gamma`` ``(d,)``, with ``eps = 1e-5``.

    Examples
    --------
    >>> from attnbook.learning.layers import layer_norm_vjp
    >>> def package_backward(x, gamma, dy):
    ...     return layer_norm_vjp(x, gamma, np.zeros_like(gamma))[1](dy)
    >>> check_layer_norm_backward(package_backward).passed
    ✓ package_backward: dx, dgamma and dbeta agree with central differences for x (4, 6), for a
      batch (2, 3, 5) and for rows far from 0
    True
    >>> def no_variance_term(x, gamma, dy):
    ...     sigma = np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)
    ...     g = dy * gamma
    ...     x_hat = (x - x.mean(axis=-1, keepdims=True)) / sigma
    ...     return (g - g.mean(axis=-1, keepdims=True)) / sigma, (dy * x_hat).sum(axis=0), dy.sum(axis=0)
    >>> _ = check_layer_norm_backward(no_variance_term)
    ✗ the dx of no_variance_term: wrong values for x (4, 6): the term -x_hat * mean(g * x_hat) is
      missing: the standard deviation depends on x too
    """
    eps = 1e-5
    n, d = 4, 6 + seed % 2
    cases = ((rng.standard_normal((n, d)), f"for x ({n}, {d})"),
             (rng.standard_normal((2, 3, 5)), "for a batch (2, 3, 5)"),
             (50.0 + 10.0 * rng.standard_normal((3, d)), f"for rows far from 0 (3, {d})"))
    for x, context in cases:
        gamma = rng.uniform(0.5, 2.0, x.shape[-1]) * rng.choice([-1.0, 1.0], x.shape[-1])  # (d,), not ones
        dy = rng.standard_normal(x.shape)  # (..., d)
        value = call_student(fn, label, x, gamma, dy)
        if not isinstance(value, (tuple, list)) or len(value) != 3:
            raise Failure(f"{label}: returned a {type(value).__name__} {context}; return the three gradients "
                           "(dx, dgamma, dbeta)")
        got_dx, got_dgamma, got_dbeta = (answer_array(part, f"the {name} of {label}")
                                         for part, name in zip(value, ("dx", "dgamma", "dbeta")))
        dx, dgamma, dbeta = _layer_norm_differences(x, gamma, dy, eps)
        for got, expected, name in ((got_dx, dx, "dx"), (got_dgamma, dgamma, "dgamma"), (got_dbeta, dbeta, "dbeta")):
            what = f"the {name} of {label}"
            if got.shape != expected.shape:
                summed = " (sum over every position: all axes but the last)" if name != "dx" else ""
                raise Failure(f"{what}: wrong shape {context}: expected {expected.shape}, got {got.shape}{summed}")
            compare(got, expected, what, context, values=False)  # floats, finite
        if not _agrees_with_differences(got_dx, dx):
            explanation = first_matching(got_dx, dx, _layer_norm_mistakes(x, gamma, dy, eps), rtol=1e-6, atol=1e-8)
            if explanation:
                raise Failure(f"the dx of {label}: wrong values {context}: {explanation}")
            row_sums = got_dx.sum(axis=-1)  # (...)
            if not agrees(row_sums, np.zeros(row_sums.shape), rtol=0.0,
                           atol=1e-6 * max(1.0, float(np.max(np.abs(got_dx)))), kind="number"):
                raise Failure(f"the dx of {label}: wrong values {context}: a row of dx does not sum to 0, but "
                               "layer norm ignores a shift of its row, so its gradient has no component along it")
            raise Failure(f"the dx of {label}: wrong values {context} (relative error "
                           f"{_relative_error(got_dx, dx):.3g} against central differences)")
        if not _agrees_with_differences(got_dgamma, dgamma):
            hint = ("it is sum(dy) over the positions, which is dbeta; dgamma is sum(dy * x_hat)"
                    if agrees(got_dgamma, dbeta, rtol=1e-5, atol=1e-8)
                    else "dgamma sums dy * x_hat over every position")
            raise Failure(f"the dgamma of {label}: wrong values {context}: {hint}")
        if not _agrees_with_differences(got_dbeta, dbeta):
            raise Failure(f"the dbeta of {label}: wrong values {context}: dbeta sums dy over every position")
    return (f"{label}: dx, dgamma and dbeta agree with central differences for x ({n}, {d}), for a batch (2, 3, 5) "
            "and for rows far from 0")


def _nucleus_variant(logits: np.ndarray, p: float, *, include_self=False, descending=True,
                     last_first=False) -> np.ndarray:
    """Top-p with one of the usual mistakes: the cut with the token's own probability, the order, the ties."""
    keys = -logits if descending else logits
    if last_first:  # ties to the higher index
        order = logits.shape[-1] - 1 - np.argsort(keys[..., ::-1], axis=-1, kind="stable")
    else:
        order = np.argsort(keys, axis=-1, kind="stable")  # (..., vocab)
    probs = softmax(np.take_along_axis(logits, order, axis=-1))  # (..., vocab), in that order
    cumulative = np.cumsum(probs, axis=-1)  # (..., vocab)
    kept_sorted = cumulative < p if include_self else cumulative - probs < p  # (..., vocab)
    kept = np.zeros(logits.shape, dtype=bool)  # (..., vocab)
    np.put_along_axis(kept, order, kept_sorted, axis=-1)
    return np.where(kept, logits, -np.inf)  # (..., vocab)


@check
def check_nucleus_filter(fn, label: str, rng: np.random.Generator, seed: int) -> str:
    r"""Check ``fn(logits, p)``: top-p (nucleus) filtering, the logits kept and ``-inf`` elsewhere.

    .. math:: V_p = \{\sigma(1), \dots, \sigma(m)\}, \quad
              m = \min\Bigl\{m : \sum_{r \le m} p_{\sigma(r)} \ge p\Bigr\}

    with :math:`\sigma` ordering the tokens by decreasing probability, ties to the lower index (the
    package's ``nucleus_filter``). The inputs include a batch, tied logits, ``p = 1``, a token more
    probable than ``p`` on its own (it is kept) and logits already at ``-inf``.

    Parameters
    ----------
    fn : callable
        The student's ``fn(logits, p)`` for ``logits`` ``(..., vocab)`` and ``0 < p <= 1``.

    Examples
    --------
    >>> from attnbook.learning.decoding import nucleus_filter
    >>> check_nucleus_filter(nucleus_filter).passed
    ✓ nucleus_filter: correct for logits (3, 8) with p = 0.9, a batch (2, 2, 6) with p = 0.5, tied
      logits, p = 1, a dominant token and logits at -inf
    True
    >>> def cut_including_itself(logits, p):
    ...     order = np.argsort(-logits, axis=-1, kind="stable")
    ...     probs = np.exp(np.take_along_axis(logits, order, -1))
    ...     probs = probs / probs.sum(axis=-1, keepdims=True)
    ...     kept = np.zeros(logits.shape, dtype=bool)
    ...     np.put_along_axis(kept, order, np.cumsum(probs, axis=-1) < p, axis=-1)
    ...     return np.where(kept, logits, -np.inf)
    >>> _ = check_nucleus_filter(cut_including_itself)  # doctest: +ELLIPSIS
    ✗ cut_including_itself: wrong tokens kept for logits (3, 8) with p = 0.9: the token whose
      probability carries the sum past p is dropped; ...
    """
    dominant = np.log(np.array([[0.05, 0.9, 0.05], [0.3, 0.3, 0.4]]))  # (2, 3): one token above p alone
    masked = rng.standard_normal((2, 7))  # (2, 7)
    masked[:, [1, 4]] = -np.inf  # tokens a causal or top-k step has already ruled out
    cases = ((2.0 * rng.standard_normal((3, 8)), 0.9, "logits (3, 8) with p = 0.9"),
             (2.0 * rng.standard_normal((2, 2, 6)), 0.5, "a batch (2, 2, 6) with p = 0.5"),
             (np.array([[2.0, 1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]]), 0.45 + 0.01 * (seed % 3),
              "tied logits (ties go to the lower index)"),
             (rng.standard_normal((2, 6)), 1.0, "p = 1 (every token is kept)"),
             (dominant, 0.6, "a token more probable than p on its own"),
             (masked, 0.8, "logits already at -inf"))
    for logits, p, context in cases:
        context = f"for {context}"
        got = answer_array(call_student(fn, label, logits, p), f"what {label} returned")
        expected = nucleus_filter(logits, p)  # (..., vocab)
        if got.shape != expected.shape:
            raise Failure(f"{label}: wrong shape {context}: expected {expected.shape} (one entry per logit), "
                           f"got {got.shape}")
        if np.any(np.isnan(got)) or np.any(got == np.inf):
            raise Failure(f"{label}: NaN or +inf {context}; the tokens left out get -inf")
        kept, expected_kept = np.isfinite(got), np.isfinite(expected)  # (..., vocab) each
        if not agrees(kept, expected_kept):
            if np.any(~kept.any(axis=-1)):
                raise Failure(f"{label}: a row keeps no token {context}; the most probable token is always "
                               "kept (keep a token while the probability of the tokens before it is below p)")
            variants = [
                (dict(include_self=True), "the token whose probability carries the sum past p is dropped; keep "
                 "a token while the probability of the tokens ranked before it is below p"),
                (dict(last_first=True), "among tied logits the higher index was kept first; ties go to the "
                 "lower index (a stable sort of -logits)"),
                (dict(descending=False), "the least probable tokens were kept; sort by decreasing probability"),
            ]
            for options, why in variants:
                if agrees(kept, np.isfinite(_nucleus_variant(logits, p, **options))):
                    raise Failure(f"{label}: wrong tokens kept {context}: {why}")
            wrong = int(np.sum(kept != expected_kept))
            raise Failure(f"{label}: wrong tokens kept {context}: {wrong} of {kept.size} differ")
        compare(got, expected, label, context, values=False)  # floats
        if not agrees(got, expected, rtol=1e-9, atol=1e-12):
            raise Failure(f"{label}: the right tokens are kept {context}, but with other values; return the "
                           "logits themselves where kept (not probabilities, not renormalised), -inf elsewhere")
    return (f"{label}: correct for logits (3, 8) with p = 0.9, a batch (2, 2, 6) with p = 0.5, tied logits, "
            "p = 1, a dominant token and logits at -inf")


def _rows_step(state, tokens):
    """A toy model: row ``r``'s next token follows the bigram table ``state[r]`` ``(vocab, vocab)``."""
    with np.errstate(divide="ignore"):
        return np.log(state[np.arange(len(tokens)), tokens]), state  # (rows, vocab)


def _decode_parts(value, label: str, context: str) -> tuple:
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        raise Failure(f"{label}: returned a {type(value).__name__} {context}; return (tokens, log_probs, lengths)")
    return tuple(answer_array(part, f"the {name} of {label}")
                 for part, name in zip(value, ("tokens", "log_probs", "lengths")))


@check
def check_greedy_decode(fn, label: str, rng: np.random.Generator, seed: int) -> str:
    r"""Check ``fn(step, state, batch_size, max_length, bos, eos) -> (tokens, log_probs, lengths)``: greedy search.

    .. math:: y_t = \arg\max_v \, p(v \mid y_{<t}), \quad \text{until EOS or } \texttt{max\_length} \text{ tokens}

    Compared with the package's ``greedy_decode`` on toy bigram models (``bigram_step``, and one bigram
    table per row): ``tokens`` ``(batch, n)`` holds each row's tokens up to its EOS and PAD (0) after
    it, ``n`` the longest row; ``log_probs`` the log-probability of each row's tokens, EOS included;
    ``lengths`` the tokens of each row, EOS included. The inputs include tied probabilities (the lower
    index wins), rows that end at different steps and rows cut at ``max_length``.

    Parameters
    ----------
    fn : callable
        The student's ``fn(step, state, batch_size, max_length, bos, eos)``, calling
        ``step(state, tokens) -> (logits, state)``.

    Examples
    --------
    >>> from attnbook.learning.decoding import greedy_decode
    >>> check_greedy_decode(greedy_decode).passed
    ✓ greedy_decode: correct for one bigram model, tied probabilities, rows that end at different steps
      and rows cut at max_length
    True
    >>> def never_stops(step, state, batch_size, max_length, bos, eos):
    ...     tokens, total = [np.full(batch_size, bos)], np.zeros(batch_size)
    ...     for _ in range(max_length):
    ...         logits, state = step(state, tokens[-1])
    ...         logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    ...         tokens.append(logp.argmax(axis=1))
    ...         total += logp.max(axis=1)
    ...     return np.stack(tokens[1:], axis=1), total, np.full(batch_size, max_length)
    >>> _ = check_greedy_decode(never_stops)
    ✗ never_stops: wrong shape of tokens for one bigram model: expected (2, 3), got (2, 6); stop as
      soon as every row has ended: tokens has as many columns as the longest row, EOS included
    """
    vocab = 6
    single = rng.dirichlet(np.ones(vocab) * 0.5, size=vocab)  # (vocab, vocab)
    single[1] = [0.0, 0.0, 0.0, 0.5, 0.3, 0.2]  # from BOS: token 3 first
    single[3] = [0.0, 0.1, 0.2, 0.0, 0.3, 0.4]  # then 5
    single[5] = [0.0, 0.0, 0.6, 0.2, 0.2, 0.0]  # then EOS
    tied = np.full((vocab, vocab), 1.0 / vocab)  # (vocab, vocab): ties everywhere, the lower index wins
    tied[1] = [0.0, 0.0, 0.0, 0.4, 0.4, 0.2]  # from BOS: 3 and 4 tie, 3 wins
    tied[3] = [0.0, 0.0, 0.4, 0.4, 0.2, 0.0]  # then EOS and 3 tie, EOS wins
    rows = rng.dirichlet(np.ones(vocab), size=(3, vocab))  # (3, vocab, vocab): one model per row
    rows[:, :, 2] = 0.0
    rows /= rows.sum(axis=-1, keepdims=True)
    rows[0, 1] = [0.0, 0.0, 0.9, 0.05, 0.05, 0.0]  # row 0 ends at once
    rows[1, 1] = [0.0, 0.0, 0.1, 0.0, 0.9, 0.0]  # row 1 goes to 4
    rows[1, 4] = [0.0, 0.0, 0.7, 0.1, 0.1, 0.1]  # then ends; row 2 never ends (no EOS in its table)
    cases = ((bigram_step(single), None, 2, 6, "one bigram model"),
             (bigram_step(tied), None, 1, 4, "tied probabilities"),
             (_rows_step, rows[:2].copy(), 2, 5 + seed % 2, "rows that end at different steps"),
             (_rows_step, rows, 3, 4, "rows cut at max_length"))
    for step, state, batch_size, max_length, context in cases:
        context = f"for {context}"
        expected = greedy_decode(step, copy.deepcopy(state), batch_size, max_length, 1, 2)
        got = _decode_parts(call_student(fn, label, step, state, batch_size, max_length, 1, 2), label, context)
        got_tokens, got_log_probs, got_lengths = got
        wrong_tokens = Failure(f"{label}: wrong tokens {context}: take the most probable token at each step "
                                "(the lower index among ties) and feed it back to step")
        if got_tokens.ndim == 2 and got_tokens.shape[0] == batch_size:
            shared = min(got_tokens.shape[1], expected.tokens.shape[1])  # the columns both have
            before_eos = np.arange(shared)[None, :] < expected.lengths[:, None]  # (batch, shared)
            if not agrees(np.where(before_eos, got_tokens[:, :shared], 0),
                           np.where(before_eos, expected.tokens[:, :shared], 0), kind="number"):
                raise wrong_tokens
        if got_tokens.shape != expected.tokens.shape:
            hint = ("; stop as soon as every row has ended: tokens has as many columns as the longest row, "
                    "EOS included" if got_tokens.shape[:1] == expected.tokens.shape[:1] else "")
            raise Failure(f"{label}: wrong shape of tokens {context}: expected {expected.tokens.shape}, "
                           f"got {got_tokens.shape}{hint}")
        compare(got_tokens, expected.tokens, f"the tokens of {label}", context, values=False)  # integers
        if not agrees(got_tokens, expected.tokens):
            after = np.arange(expected.tokens.shape[1])[None, :] >= expected.lengths[:, None]  # (batch, n)
            if agrees(np.where(after, 0, got_tokens), expected.tokens):
                raise Failure(f"{label}: wrong tokens after EOS {context}: a row that has ended gets PAD (0) in "
                               "every later column")
            raise wrong_tokens
        compare(got_lengths, expected.lengths, f"the lengths of {label}",
                 context + " (count each row's tokens, its EOS included)")
        compare(got_log_probs, expected.log_probs, f"the log_probs of {label}",
                 context + " (add the log-softmax of each row's chosen tokens, up to and including its EOS)")
    return (f"{label}: correct for one bigram model, tied probabilities, rows that end at different steps "
            "and rows cut at max_length")
