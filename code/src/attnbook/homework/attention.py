"""Homework checks of the attention chapters: softmax, scaled dot-product and self-attention, causal masks,
splitting and merging heads. Each is a :func:`attnbook.homework.verdict.check` body; see there for what every
check shares (seed, label, verdict).

>>> from attnbook import causal_mask
>>> _ = check_causal_mask(causal_mask)
✓ causal_mask: correct for n = 4, 1 and 6
"""

from __future__ import annotations

import math

import numpy as np

from ..attention import scaled_dot_product_attention, self_attention
from ..masks import causal_mask
from ..multihead import merge_heads, split_heads
from ..softmax import softmax
from .compare import agrees, answer_array, compare, first_matching, require_distribution, shape_hint
from .verdict import Failure, call_student, check

__all__ = ["check_attention", "check_causal_mask", "check_merge_heads", "check_self_attention",
           "check_softmax", "check_split_heads"]


# --- softmax ----------------------------------------------------------------------------------------


@check
def check_softmax(fn, label: str, rng: np.random.Generator, seed: int, *, large_logits: bool = True) -> str:
    r"""Check a student's softmax ``fn(x)`` along the last axis: values, batches, vectors, stability.

    .. math:: \operatorname{softmax}(x)_i = e^{x_i - \max_j x_j} / \textstyle\sum_j e^{x_j - \max_j x_j}

    Parameters
    ----------
    fn : callable
        The student's softmax ``fn(x)``, normalising the last axis.
    large_logits : bool
        Include the stability test (logits of ±1000); False tests values alone.

    Examples
    --------
    >>> _ = check_softmax(lambda x: np.exp(x) / np.exp(x).sum(axis=0, keepdims=True))
    ✗ your function: normalised along the wrong axis on a 3 x 6 array: the columns sum to 1,
      but each row (the logits of one query, the last axis) should; use axis=-1
    """
    rows, cols = 3 + seed % 3, 6 + seed % 2  # rows != cols, so a transpose shows in the shape
    x = rng.normal(scale=2.0, size=(rows, cols))  # (rows, cols)
    batch = rng.normal(scale=2.0, size=(2, rows, cols))  # (2, rows, cols)
    vector = rng.normal(scale=2.0, size=cols)  # (cols,)
    large = np.array([[1000.0, 999.0, 998.0, 0.0], [-1000.0, -1000.0, -999.0, -1000.0]])  # (2, 4)

    context = f"on a {rows} x {cols} array"
    got = answer_array(call_student(fn, label, x), f"what {label} returned")
    if got.shape != x.shape:
        raise Failure(f"{label}: wrong shape {context}: expected {x.shape}, got {got.shape}"
                       + shape_hint(got.shape, x.shape)
                       + ("; softmax returns one weight per logit" if got.size != x.size else ""))
    compare(got, softmax(x), label, context, values=False)  # floats, finite
    require_distribution(got, label, context, "the logits of one query")
    mistakes = [(lambda: softmax(-x), "the logits are negated: subtract each row's maximum from x "
                                      "(x - max), not x from the maximum")]
    explanation = first_matching(got, softmax(x), mistakes)
    if explanation:
        raise Failure(f"{label}: wrong values {context}: {explanation}")
    compare(got, softmax(x), label, context)
    got_batch = answer_array(call_student(fn, label, batch), f"what {label} returned")
    batch_context = f"on a batch of shape {batch.shape} (it works on 2-D arrays: use axis=-1 and keepdims=True)"
    compare(got_batch, softmax(batch), label, batch_context)
    got_vector = answer_array(call_student(fn, label, vector), f"what {label} returned")
    compare(got_vector, softmax(vector), label, f"on a vector of shape {vector.shape}")
    if not large_logits:
        return (f"{label}: correct on the rows of a {rows} x {cols} array, a batch of shape {batch.shape} "
                f"and a vector of {cols} logits")
    got_large = answer_array(call_student(fn, label, large), f"what {label} returned")
    if got_large.shape == large.shape and not np.all(np.isfinite(got_large)):
        raise Failure(f"{label}: not stable for large inputs: logits of 1000 give NaN or inf "
                       "(exp(1000) overflows); subtract each row's maximum before exp")
    compare(got_large, softmax(large), label, "on logits of ±1000 (subtract each row's maximum before exp)")
    return (f"{label}: correct on the rows of a {rows} x {cols} array, a batch of shape {batch.shape}, "
            f"a vector of {cols} logits and logits of ±1000")


# --- attention --------------------------------------------------------------------------------------


def _output_and_weights(value, label: str, output_shape: tuple, context: str):
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return (answer_array(value[0], f"the output of {label}"), answer_array(value[1], f"the weights of {label}"))
    if isinstance(value, np.ndarray) and value.shape == output_shape:
        raise Failure(f"{label}: returned only the output {context}; return the pair (output, weights)")
    raise Failure(f"{label}: returned a {type(value).__name__} {context}; return the pair (output, weights)")


def _attention_mistakes(q, k, v, d_k: int):
    scores = q @ np.swapaxes(k, -1, -2)  # (..., n_q, n_k)
    root = math.sqrt(d_k)
    return [
        (lambda: softmax(scores), f"off by the scaling factor: divide the scores Q K^T by sqrt(d_k) = {root:g} "
                                  "before the softmax"),
        (lambda: softmax(scores / d_k), f"the scores are divided by d_k = {d_k}; the factor is sqrt(d_k) = {root:g}"),
        (lambda: softmax(scores * root), "the scores are multiplied by sqrt(d_k); divide them by it"),
        (lambda: softmax(np.swapaxes(scores, -1, -2) / root), "the scores are transposed (K Q^T): with queries "
                                                              "as rows the scores are Q K^T"),
        (lambda: softmax(scores / root, axis=-2), "the softmax runs over the queries (the columns); "
                                                  "run it over the keys, the last axis"),
    ]


def _check_attention_pair(got_out, got_w, q, k, v, label, context, mistakes_extra=()):
    reference_out, reference_w = scaled_dot_product_attention(q, k, v)
    what = f"the weights of {label}"
    if got_w.shape != reference_w.shape:
        raise Failure(f"{what}: wrong shape {context}: expected {reference_w.shape} "
                       f"(n_q, n_k), got {got_w.shape}" + shape_hint(got_w.shape, reference_w.shape))
    compare(got_w, reference_w, what, context, values=False)  # floats, finite
    mistakes = list(mistakes_extra) + _attention_mistakes(q, k, v, q.shape[-1])
    explanation = first_matching(got_w, reference_w, mistakes, atol=1e-8)
    if explanation:
        raise Failure(f"{what}: wrong values {context}: {explanation}")
    require_distribution(got_w, what, context, "the weights of one query over the keys")
    compare(got_w, reference_w, what, context, atol=1e-8)
    compare(got_out, reference_out, f"the output of {label}", context + " (the output is weights @ v)", atol=1e-8)


@check
def check_attention(fn, label: str, rng: np.random.Generator, seed: int, *, large_scores: bool = True) -> str:
    r"""Check ``fn(q, k, v) -> (output, weights)``: scaled dot-product attention, 2-D and batched.

    .. math:: \operatorname{softmax}(Q K^\top / \sqrt{d_k})\, V

    Parameters
    ----------
    fn : callable
        The student's ``fn(q, k, v) -> (output, weights)``.
    large_scores : bool
        Include the stability test (scores in the thousands).

    Examples
    --------
    >>> def unscaled(q, k, v):
    ...     w = softmax(q @ np.swapaxes(k, -1, -2))
    ...     return w @ v, w
    >>> _ = check_attention(unscaled)
    ✗ the weights of unscaled: wrong values for q (3, 4), k (5, 4), v (5, 2): off by the scaling
      factor: divide the scores Q K^T by sqrt(d_k) = 2 before the softmax
    >>> check_attention(scaled_dot_product_attention).passed
    ✓ scaled_dot_product_attention: correct for q (3, 4), k (5, 4), v (5, 2), for square inputs,
      for a batch of 2 and for large scores
    True
    """
    n_q, n_k, d_k, d_v = 3 + seed % 2, 5 + seed % 3, 4, 2  # n_q != n_k: a transpose shows in the shape
    q, k, v = rng.standard_normal((n_q, d_k)), rng.standard_normal((n_k, d_k)), rng.standard_normal((n_k, d_v))
    square = rng.standard_normal((3, 4, d_k))  # (3, n, d_k): q, k, v of a square case
    batch = [rng.standard_normal((2, n, d)) for n, d in ((n_q, d_k), (n_k, d_k), (n_k, d_v))]
    large = [30.0 * rng.standard_normal((n_q, d_k)), 30.0 * rng.standard_normal((n_k, d_k)), v]

    def shapes(arrays) -> str:
        return ", ".join(f"{n} {a.shape}" for n, a in zip("qkv", arrays))

    batch_hint = "with a batch, transpose only the last two axes of k: np.swapaxes(k, -1, -2), not k.T"
    cases = (((q, k, v), f"for {shapes((q, k, v))}", ""),
             (tuple(square), f"for square inputs {shapes(square)}", ""),
             (tuple(batch), f"for a batch {shapes(batch)}", batch_hint),
             (tuple(large), f"for large scores ({shapes(large)} with entries near ±30)", ""))
    for arrays, context, hint in cases if large_scores else cases[:-1]:
        value = call_student(fn, label, *arrays, hint=hint)
        out_shape = arrays[0].shape[:-1] + (arrays[2].shape[-1],)
        got_out, got_w = _output_and_weights(value, label, out_shape, context)
        if arrays is cases[-1][0] and got_w.shape == out_shape[:-1] + (n_k,) and not np.all(np.isfinite(got_w)):
            raise Failure(f"{label}: not stable for large scores: q and k with entries near ±30 give NaN or "
                           "inf weights; use a stable softmax (subtract each row's maximum before exp)")
        _check_attention_pair(got_out, got_w, *arrays, label, context + (f" ({hint})" if hint else ""))
    extra = " and for large scores" if large_scores else ""
    return f"{label}: correct for {shapes((q, k, v))}, for square inputs, for a batch of 2{extra}"


@check
def check_self_attention(fn, label: str, rng: np.random.Generator, seed: int) -> str:
    r"""Check ``fn(x, w_q, w_k, w_v) -> (output, weights)``: project x to Q, K, V, then attend.

    .. math:: \operatorname{softmax}(X W_Q (X W_K)^\top / \sqrt{d_k})\, X W_V

    Parameters
    ----------
    fn : callable
        The student's ``fn(x, w_q, w_k, w_v) -> (output, weights)``.

    Examples
    --------
    >>> check_self_attention(self_attention).passed
    ✓ self_attention: correct for x (4, 6) with d_k = 3, d_v = 2, and for a batch of 2
    True
    >>> _ = check_self_attention(lambda x, w_q, w_k, w_v: self_attention(x, w_q, w_k, np.eye(6)[:, :2]))
    ✗ the output of your function: wrong values for x (4, 6): it is the weights times x's first
      columns; the values are V = X W_V
    """
    n, d_model, d_k, d_v = 4 + seed % 2, 6, 3, 2
    x = rng.standard_normal((n, d_model))  # (n, d_model)
    w_q, w_k = rng.standard_normal((2, d_model, d_k))  # (d_model, d_k) each
    w_v = rng.standard_normal((d_model, d_v))  # (d_model, d_v)
    x_batch = rng.standard_normal((2, n, d_model))  # (2, n, d_model)

    for inputs, context in ((x, f"for x {x.shape}"),
                            (x_batch, f"for a batch x {x_batch.shape} (transpose only the last two axes)")):
        value = call_student(fn, label, inputs, w_q, w_k, w_v)
        got_out, got_w = _output_and_weights(value, label, inputs.shape[:-1] + (d_v,), context)
        q, k, v = inputs @ w_q, inputs @ w_k, inputs @ w_v  # (..., n, d_k), (..., n, d_k), (..., n, d_v)
        reference_w = self_attention(inputs, w_q, w_k, w_v).weights  # (..., n, n)
        raw = [(lambda: softmax(inputs @ np.swapaxes(inputs, -1, -2) / math.sqrt(d_model)),
                "the scores use x itself; project first: Q = X W_Q and K = X W_K")]
        if agrees(got_w, reference_w, atol=1e-8):
            if agrees(got_out, reference_w @ inputs[..., :d_v], rtol=1e-5, atol=1e-8):
                raise Failure(f"the output of {label}: wrong values {context}: it is the weights times x's "
                               "first columns; the values are V = X W_V")
        _check_attention_pair(got_out, got_w, q, k, v, label, context, raw)
    return f"{label}: correct for x {x.shape} with d_k = {d_k}, d_v = {d_v}, and for a batch of 2"


# --- masks ------------------------------------------------------------------------------------------


@check
def check_causal_mask(fn, label: str, rng: np.random.Generator, seed: int) -> str:
    r"""Check ``fn(n) -> (n, n)`` boolean causal mask (True = query i may attend to key j <= i).

    .. math:: M_{ij} = [\, j \le i \,]

    Parameters
    ----------
    fn : callable
        The student's ``fn(n) -> (n, n)`` boolean mask.

    Examples
    --------
    >>> _ = check_causal_mask(lambda n: np.triu(np.ones((n, n), dtype=bool)))
    ✗ your function: transposed for n = 4: True above the diagonal lets query i see the future keys
      j > i; the causal mask is True on and below the diagonal (j <= i)
    >>> check_causal_mask(causal_mask).passed
    ✓ causal_mask: correct for n = 4, 1 and 6
    True
    """
    sizes = (4, 1, 6 + seed % 3)

    for n in sizes:
        context = f"for n = {n}"
        array = answer_array(call_student(fn, label, n), label, context)
        expected = causal_mask(n)  # (n, n)
        if array.shape == expected.shape and array.dtype.kind == "f" and np.any(np.isneginf(array)):
            raise Failure(f"{label}: returned an additive mask (0 and -inf) {context}; this book's masks "
                           "are boolean: True where the query may attend")
        compare(array, expected, label, context, values=False)  # (n, n) booleans
        if agrees(array, expected):
            continue
        mistakes = [
            (np.triu(np.ones((n, n), dtype=bool)), "transposed", "True above the diagonal lets query i "
             "see the future keys j > i; the causal mask is True on and below the diagonal (j <= i)"),
            (~expected, "True and False swapped", "True means the query may attend"),
            (np.tril(np.ones((n, n), dtype=bool), k=-1), "False on the diagonal",
             "each token may attend to itself"),
        ]
        for candidate, what, why in mistakes:
            if agrees(array, candidate):
                raise Failure(f"{label}: {what} {context}: {why}")
        compare(array, expected, label, context)
    return f"{label}: correct for n = {sizes[0]}, {sizes[1]} and {sizes[2]}"


# --- heads ------------------------------------------------------------------------------------------


@check
def check_split_heads(fn, label: str, rng: np.random.Generator, seed: int) -> str:
    r"""Check ``fn(x, n_heads)``: ``(..., n, d_model) -> (..., n_heads, n, d_model / n_heads)``.

    .. math:: (\dots, n, d_\text{model}) \to (\dots, h, n, d_\text{model} / h)

    Parameters
    ----------
    fn : callable
        The student's ``fn(x, n_heads)``.

    Examples
    --------
    >>> _ = check_split_heads(lambda x, h: x.reshape(*x.shape[:-2], h, x.shape[-2], -1))
    ✗ your function: values in the wrong places for x (2, 5, 8) and n_heads = 4: reshaping straight
      to (..., n_heads, n, d_head) mixes tokens; reshape to (..., n, n_heads, d_head), then swap the
      axes -3 and -2
    """
    cases = ((rng.standard_normal((2, 5 + seed % 2, 8)), 4), (rng.standard_normal((5, 6)), 3))

    for x, h in cases:
        *lead, n, d_model = x.shape
        context = f"for x {x.shape} and n_heads = {h}"
        got = answer_array(call_student(fn, label, x, h), f"what {label} returned")
        expected = split_heads(x, h)  # (..., h, n, d_head)
        if got.shape == (*lead, n, h, d_model // h):
            raise Failure(f"{label}: wrong shape {got.shape} {context}: that is (..., n, n_heads, d_head); "
                           f"swap the axes -3 and -2 to get (..., n_heads, n, d_head) = {expected.shape}")
        mistakes = [
            (lambda: x.reshape(*lead, h, n, d_model // h), "reshaping straight to (..., n_heads, n, d_head) "
             "mixes tokens; reshape to (..., n, n_heads, d_head), then swap the axes -3 and -2"),
            (lambda: np.moveaxis(x.reshape(*lead, n, d_model // h, h), -1, -3), "head i got every n_heads-th "
             "column; it should get the contiguous block of columns i*d_head ... (i+1)*d_head - 1"),
        ]
        explanation = first_matching(got, expected, mistakes)
        if explanation:
            raise Failure(f"{label}: values in the wrong places {context}: {explanation}")
        compare(got, expected, label, context)
    return f"{label}: correct for x (2, {cases[0][0].shape[1]}, 8) with 4 heads and for x (5, 6) with 3 heads"


@check
def check_merge_heads(fn, label: str, rng: np.random.Generator, seed: int) -> str:
    r"""Check ``fn(x)``: ``(..., n_heads, n, d_head) -> (..., n, n_heads * d_head)``, the inverse of split.

    .. math:: (\dots, h, n, d_\text{head}) \to (\dots, n, h\, d_\text{head})

    Parameters
    ----------
    fn : callable
        The student's ``fn(x)``.

    Examples
    --------
    >>> check_merge_heads(merge_heads).passed
    ✓ merge_heads: correct for x (2, 4, 5, 2) and x (3, 5, 2), and undoes split_heads
    True
    """
    cases = (rng.standard_normal((2, 4, 5 + seed % 2, 2)), rng.standard_normal((3, 5, 2)))

    for x in cases:
        *lead, h, n, d_head = x.shape
        context = f"for x {x.shape}"
        got = answer_array(call_student(fn, label, x), f"what {label} returned")
        mistakes = [(lambda: x.reshape(*lead, n, h * d_head), "reshaping (..., n_heads, n, d_head) straight to "
                     "(..., n, d_model) mixes tokens; swap the axes -3 and -2 first, then reshape")]
        explanation = first_matching(got, merge_heads(x), mistakes)
        if explanation:
            raise Failure(f"{label}: values in the wrong places {context}: {explanation}")
        compare(got, merge_heads(x), label, context)
    model = rng.standard_normal((3, 8))  # (n, d_model)
    round_trip = answer_array(call_student(fn, label, split_heads(model, 2)), f"what {label} returned")
    compare(round_trip, model, label, "when undoing split_heads(x, 2) for x (3, 8)")
    return f"{label}: correct for x {cases[0].shape} and x {cases[1].shape}, and undoes split_heads"
