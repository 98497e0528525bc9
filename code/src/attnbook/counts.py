"""Every count of the book in one place: multiply-adds, score pairs, steps, parameters and cache bytes.

The chapters compare layers by what they cost and how far information travels through them. Every
such number is a closed-form count, and this module holds all of them, grouped by what they count:

- multiply-adds of a forward pass (``self_attention_macs``, ``rnn_macs``, ``conv1d_macs``,
  ``restricted_attention_macs``, ``decode_multiply_adds``), and the same forward passes written as
  scalar loops that count every multiply-add they perform (``counted_self_attention``,
  ``counted_rnn``, ``counted_conv1d``), so that the closed forms can be checked by doing;
- (query, key) pairs that get a score under a full, causal or banded mask (``attention_pair_count``);
- sequential operations and path lengths of each kind of layer (``sequential_operations``,
  ``path_length``), in the one vocabulary of layer kinds ``LAYER_KINDS``;
- learned parameters (``self_attention_parameter_count``, ``count_multi_head_parameters``,
  ``transformer_parameter_count``);
- learned parameters of a modern decoder-only block (``decoder_block_parameter_count``);
- the bytes of a key-value cache, with as many key and value heads as query heads or fewer (``kv_cache_bytes``).

Every count is an exact Python integer, so long sequences do not overflow.

Examples
--------
>>> self_attention_macs(n=4, d=8)          # 3 n d^2 (projections) + 2 n^2 d (scores and weighted sum)
1024
>>> attention_pair_count(1000), attention_pair_count(1000, window=50)
(1000000, 98450)
>>> path_length("recurrent", 9), path_length("convolutional", 9, reach=2), path_length("self-attention", 9)
(10, 5, 1)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .validation import as_float_array, check_bool, check_heads, check_kv_heads, check_positive_int

__all__ = [
    "DECODE_STRATEGIES",
    "LAYER_KINDS",
    "Counted",
    "attention_pair_count",
    "conv1d_macs",
    "count_multi_head_parameters",
    "counted_conv1d",
    "counted_rnn",
    "counted_self_attention",
    "decode_multiply_adds",
    "decoder_block_parameter_count",
    "kv_cache_bytes",
    "path_length",
    "restricted_attention_macs",
    "rnn_macs",
    "self_attention_macs",
    "self_attention_parameter_count",
    "sequential_operations",
    "transformer_parameter_count",
]

#: The kinds of sequence layer the book compares: the rows of Table 1 of "Attention Is All You Need",
#: with the convolution split into contiguous and dilated kernels. Every function here that takes a
#: ``kind`` takes one of these.
LAYER_KINDS = ("self-attention", "restricted self-attention", "recurrent", "convolutional",
               "dilated convolutional")

#: The three ways of decoding token by token that ``decode_multiply_adds`` counts (the strategies of
#: ``attnbook.kv_cache.decode``).
DECODE_STRATEGIES = ("cache", "recompute_kv", "recompute_all")


def _checked_kind(kind) -> str:
    if kind not in LAYER_KINDS:
        raise ValueError(f"kind must be one of {', '.join(repr(k) for k in LAYER_KINDS)}; got {kind!r}")
    return kind


# --- (query, key) pairs ---------------------------------------------------------------------------


def attention_pair_count(n: int, window: int | None = None, causal: bool = False) -> int:
    r"""Number of (query, key) pairs of ``n`` positions that a mask lets attend, in closed form.

    With ``w = min(window, n - 1)``, the count is the number of True entries of the mask:

    .. math::

        \text{full: } n^2, \qquad \text{causal: } \frac{n (n + 1)}{2}, \qquad
        \text{band } |i - j| \le w: \; n (2w + 1) - w (w + 1), \qquad
        \text{causal band: } n (w + 1) - \frac{w (w + 1)}{2}.

    Each row of the band keeps up to ``2w + 1`` keys, and the ``w`` rows at each end lose
    ``1 + 2 + ... + w`` of them. No mask is built, so the count works for any length; it grows like
    ``n w`` for a band and like ``n^2`` without one. Multiply by ``d_k`` for the multiply-adds of
    ``Q K^T``, or by the bytes per number for the memory of the score matrix.

    Parameters
    ----------
    n : int
        Number of positions (queries and keys), at least 1.
    window : int or None, optional
        Reach of the band on each side, at least 0 (the mask ``attnbook.banded_mask(n, window)``);
        ``None`` (the default) for no band.
    causal : bool, optional
        Keep only keys at or before the query (``attnbook.causal_mask``). Default False.

    Returns
    -------
    int
        The number of allowed pairs.

    Examples
    --------
    >>> attention_pair_count(4), attention_pair_count(4, causal=True)
    (16, 10)
    >>> attention_pair_count(4, window=1), attention_pair_count(4, window=1, causal=True), attention_pair_count(4, window=9)
    (10, 7, 16)
    >>> attention_pair_count(4, window=-1)
    Traceback (most recent call last):
    ...
    ValueError: window must be at least 0, got -1
    """
    n = check_positive_int(n, "n")
    causal = check_bool(causal, "causal")
    w = n - 1 if window is None else min(check_positive_int(window, "window", minimum=0), n - 1)
    if causal:
        return n * (w + 1) - w * (w + 1) // 2
    return n * (2 * w + 1) - w * (w + 1)


# --- multiply-adds, in closed form ----------------------------------------------------------------


def self_attention_macs(n: int, d: int, projections: bool = True) -> int:
    r"""Multiply-adds of one self-attention head with ``d_model = d_k = d_v = d`` on ``n`` positions.

    .. math:: \underbrace{3 n d^2}_{X W_Q,\, X W_K,\, X W_V} + \underbrace{n^2 d}_{Q K^T}
              + \underbrace{n^2 d}_{A V}

    The projections are left out with ``projections=False``, as in Table 1 of the Transformer paper.
    The ``n^2`` exponentials of the softmax are not multiply-adds and are not counted.

    Parameters
    ----------
    n, d : int
        Number of positions and width of every vector, each at least 1.
    projections : bool, optional
        Count the three projections (default True) or only the attention core.

    Returns
    -------
    int
        The number of multiply-adds.

    Examples
    --------
    >>> self_attention_macs(3, 2), self_attention_macs(3, 2, projections=False)   # 36 + 36, 2 * 3^2 * 2
    (72, 36)
    >>> self_attention_macs(0, 2)
    Traceback (most recent call last):
    ...
    ValueError: n must be at least 1, got 0
    """
    n, d = check_positive_int(n, "n"), check_positive_int(d, "d")
    core = 2 * n * n * d
    return core + 3 * n * d * d if check_bool(projections, "projections") else core


def rnn_macs(n: int, d_in: int, d_h: int | None = None) -> int:
    r"""Multiply-adds of the recurrent layer ``attnbook.rnn_forward`` on ``n`` positions.

    .. math:: \underbrace{n\, d_{in} d_h}_{x_t W_x} + \underbrace{n\, d_h^2}_{h_{t-1} W_h}

    Parameters
    ----------
    n, d_in : int
        Number of positions and input width, each at least 1.
    d_h : int or None, optional
        Width of the state; defaults to ``d_in``.

    Returns
    -------
    int
        The number of multiply-adds.

    Examples
    --------
    >>> rnn_macs(3, 2), rnn_macs(3, 2, 5)
    (24, 105)
    """
    n, d_in = check_positive_int(n, "n"), check_positive_int(d_in, "d_in")
    d_h = d_in if d_h is None else check_positive_int(d_h, "d_h")
    return n * d_in * d_h + n * d_h * d_h


def conv1d_macs(n: int, d_in: int, k: int, d_out: int | None = None) -> int:
    """Multiply-adds of a 1-D convolution with kernel width ``k`` computed densely: ``k n d_in d_out``.

    Every position multiplies ``k`` inputs, the zero padding beyond the ends included, by a
    ``(d_in, d_out)`` matrix each. ``counted_conv1d`` performs exactly this many;
    ``attnbook.modalities.conv1d`` skips the products with the padding and so performs a few fewer
    near the ends of the sequence.

    Parameters
    ----------
    n, d_in, k : int
        Number of positions, input width and kernel width, each at least 1.
    d_out : int or None, optional
        Output width; defaults to ``d_in``.

    Returns
    -------
    int
        The number of multiply-adds.

    Examples
    --------
    >>> conv1d_macs(3, 2, k=2), conv1d_macs(3, 2, k=2, d_out=1)
    (24, 12)
    """
    n, d_in, k = check_positive_int(n, "n"), check_positive_int(d_in, "d_in"), check_positive_int(k, "k")
    d_out = d_in if d_out is None else check_positive_int(d_out, "d_out")
    return k * n * d_in * d_out


def restricted_attention_macs(n: int, d: int, window: int) -> int:
    r"""Multiply-adds of scores and weighted sum when only the band ``|i - j| <= window`` is computed.

    .. math:: 2 d \cdot \#\{(i, j) : |i - j| \le w\} = 2 d \big(n (2w + 1) - w (w + 1)\big)

    Away from the ends each query has ``r = 2 window + 1`` keys, so the count is close to
    ``2 r n d``; Table 1 of the Transformer paper writes it O(r n d). (Self-attention with a banded
    *mask* still computes all ``n^2`` scores and then discards most of them.)

    Parameters
    ----------
    n, d : int
        Number of positions and width of queries, keys and values, each at least 1.
    window : int
        Reach of the band on each side, at least 0.

    Returns
    -------
    int
        The number of multiply-adds.

    Examples
    --------
    >>> restricted_attention_macs(5, 2, window=1)   # 2 * d * (13 allowed pairs)
    52
    """
    d = check_positive_int(d, "d")
    return 2 * d * attention_pair_count(n, window=window)


def decode_multiply_adds(t: int, d_model: int, d_k: int, d_v: int, strategy: str = "cache",
                         batch: int = 1) -> int:
    r"""Multiply-adds of decoding ``t`` tokens one at a time with one causal self-attention head.

    With ``P = d_model (2 d_k + d_v)`` (the three projections of one token) and
    ``T_2 = t (t + 1) / 2``:

    .. math::

        \text{cache: } t P + (d_k + d_v) T_2, \qquad
        \text{recompute\_kv: } t\, d_{model} d_k + (d_{model} (d_k + d_v) + d_k + d_v) T_2,

        \text{recompute\_all: } P T_2 + (d_k + d_v) \frac{t (t + 1) (2t + 1)}{6}.

    The cache grows like ``(d_k + d_v) t^2 / 2``; recomputing everything like ``(d_k + d_v) t^3 / 3``.
    ``attnbook.kv_cache.decode`` counts the same products as it performs them.

    Parameters
    ----------
    t : int
        Number of tokens decoded, at least 0.
    d_model, d_k, d_v : int
        Width of the tokens, of queries and keys, and of values, each at least 1.
    strategy : str, optional
        One of ``DECODE_STRATEGIES``: ``"cache"`` (default), ``"recompute_kv"``, ``"recompute_all"``.
    batch : int, optional
        Number of sequences decoded together, at least 0. Default 1.

    Returns
    -------
    int
        The number of multiply-adds.

    Examples
    --------
    >>> decode_multiply_adds(5, 8, 4, 4, "cache"), decode_multiply_adds(5, 8, 4, 4, "recompute_all")
    (600, 1880)
    >>> decode_multiply_adds(5, 8, 4, 4, "lazy")
    Traceback (most recent call last):
    ...
    ValueError: strategy must be one of ('cache', 'recompute_kv', 'recompute_all'), got 'lazy'
    """
    t = check_positive_int(t, "t", minimum=0)
    d_model = check_positive_int(d_model, "d_model")
    d_k = check_positive_int(d_k, "d_k")
    d_v = check_positive_int(d_v, "d_v")
    batch = check_positive_int(batch, "batch", minimum=0)
    if strategy not in DECODE_STRATEGIES:
        raise ValueError(f"strategy must be one of {DECODE_STRATEGIES}, got {strategy!r}")
    per_token = d_model * (2 * d_k + d_v)
    pairs = t * (t + 1) // 2  # sum of s for s = 1 .. t
    squares = t * (t + 1) * (2 * t + 1) // 6  # sum of s^2 for s = 1 .. t
    if strategy == "cache":
        count = t * per_token + (d_k + d_v) * pairs
    elif strategy == "recompute_kv":
        count = t * d_model * d_k + (d_model * (d_k + d_v) + d_k + d_v) * pairs
    else:
        count = per_token * pairs + (d_k + d_v) * squares
    return batch * count


# --- multiply-adds, counted by doing --------------------------------------------------------------


class Counted(NamedTuple):
    """A layer's output computed by explicit scalar loops, with the operations the loops performed.

    Attributes
    ----------
    output : ndarray
        The layer's output, as the package computes it.
    macs : int
        Multiply-adds of the matrix products (``a * b`` added to a running sum).
    nonlinear : int
        Evaluations of ``exp`` (softmax) or ``tanh`` (the recurrence).

    Examples
    --------
    >>> counted = counted_self_attention(np.ones((3, 2)), np.eye(2), np.eye(2), np.eye(2))
    >>> counted.macs == self_attention_macs(3, 2), counted.nonlinear
    (True, 9)
    """

    output: np.ndarray  # the layer's output, as the package computes it
    macs: int  # multiply-adds of the matrix products (a * b added to a running sum)
    nonlinear: int  # evaluations of exp (softmax) or tanh (recurrence)


def _matrix(a, name: str) -> np.ndarray:
    a = as_float_array(a, name)
    if a.ndim != 2:
        raise ValueError(f"{name} has shape {a.shape}; expected a matrix")
    return a


def counted_self_attention(x, w_q, w_k, w_v) -> Counted:
    """``attnbook.self_attention(x, w_q, w_k, w_v).output`` as scalar loops that count their work.

    The loops perform exactly ``n d_model (2 d_k + d_v) + n^2 (d_k + d_v)`` multiply-adds (with
    ``d_model = d_k = d_v = d``, ``self_attention_macs(n, d)``) and ``n^2`` exponentials. Meant for
    small sizes: every multiply-add is a Python operation.

    Parameters
    ----------
    x : array_like, shape (n, d_model)
        The sequence.
    w_q, w_k, w_v : array_like, shapes (d_model, d_k), (d_model, d_k), (d_model, d_v)
        The projections.

    Returns
    -------
    Counted
        ``(output (n, d_v), macs, nonlinear)``.

    Examples
    --------
    >>> counted = counted_self_attention(np.eye(3, 2), np.eye(2), np.eye(2), np.eye(2))
    >>> counted.macs, counted.nonlinear
    (72, 9)
    >>> counted_self_attention(np.ones((3, 2)), np.ones((3, 2)), np.ones((2, 2)), np.ones((2, 2)))
    Traceback (most recent call last):
    ...
    ValueError: x has shape (3, 2) but w_q has shape (3, 2); w_q needs d_model = 2 rows
    """
    x = _matrix(x, "x")  # (n, d_model)
    n, d_model = x.shape
    ws = {}
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        w = _matrix(w, name)  # (d_model, d_out)
        if w.shape[0] != d_model:
            raise ValueError(f"x has shape {x.shape} but {name} has shape {w.shape}; "
                             f"{name} needs d_model = {d_model} rows")
        ws[name] = w.tolist()
    if len(ws["w_q"][0]) != len(ws["w_k"][0]):
        raise ValueError("w_q and w_k must have the same number of columns (d_k)")
    rows, macs = x.tolist(), 0

    def project(w):
        nonlocal macs
        out = [[0.0] * len(w[0]) for _ in range(n)]
        for i in range(n):
            for c in range(len(w[0])):
                for m in range(d_model):
                    out[i][c] += rows[i][m] * w[m][c]
                    macs += 1
        return out

    q, k, v = project(ws["w_q"]), project(ws["w_k"]), project(ws["w_v"])
    d_k, d_v = len(q[0]), len(v[0])
    output = [[0.0] * d_v for _ in range(n)]
    for i in range(n):
        scores = [0.0] * n
        for j in range(n):
            for c in range(d_k):
                scores[j] += q[i][c] * k[j][c]
                macs += 1
        top = max(scores)
        exps = [math.exp((s - top) / math.sqrt(d_k)) for s in scores]  # softmax of scores / sqrt(d_k)
        total = sum(exps)
        weights = [e / total for e in exps]
        for c in range(d_v):
            for j in range(n):
                output[i][c] += weights[j] * v[j][c]
                macs += 1
    return Counted(np.array(output), macs, n * n)


def counted_rnn(x, w_x, w_h, b) -> Counted:
    """``attnbook.rnn_forward(x, w_x, w_h, b)`` (zero initial state) as scalar loops that count their work.

    The loops perform exactly ``rnn_macs(n, d_in, d_h)`` multiply-adds and ``n d_h`` evaluations of
    tanh; the ``n`` steps of the recurrence run one after another.

    Parameters
    ----------
    x : array_like, shape (n, d_in)
        The sequence.
    w_x, w_h, b : array_like, shapes (d_in, d_h), (d_h, d_h), (d_h,)
        Input weights, recurrent weights and bias.

    Returns
    -------
    Counted
        ``(states (n, d_h), macs, nonlinear)``.

    Examples
    --------
    >>> counted_rnn(np.ones((3, 2)), np.ones((2, 2)), np.eye(2), np.zeros(2)).macs
    24
    """
    x = _matrix(x, "x")  # (n, d_in)
    w_x, w_h = _matrix(w_x, "w_x"), _matrix(w_h, "w_h")  # (d_in, d_h), (d_h, d_h)
    b = as_float_array(b, "b")  # (d_h,)
    n, d_in = x.shape
    d_h = w_x.shape[1]
    if w_x.shape[0] != d_in or w_h.shape != (d_h, d_h) or b.shape != (d_h,):
        raise ValueError(f"x has shape {x.shape}; expected w_x ({d_in}, d_h), w_h (d_h, d_h) and b (d_h,), "
                         f"got {w_x.shape}, {w_h.shape} and {b.shape}")
    rows, wx, wh, bias, macs = x.tolist(), w_x.tolist(), w_h.tolist(), b.tolist(), 0
    inputs = [[bias[c] for c in range(d_h)] for _ in range(n)]
    for t in range(n):
        for c in range(d_h):
            for m in range(d_in):
                inputs[t][c] += rows[t][m] * wx[m][c]
                macs += 1
    h, states = [0.0] * d_h, []
    for t in range(n):  # one step after another: step t reads the state of step t - 1
        pre = list(inputs[t])
        for c in range(d_h):
            for m in range(d_h):
                pre[c] += h[m] * wh[m][c]
                macs += 1
        h = [math.tanh(p) for p in pre]
        states.append(h)
    return Counted(np.array(states), macs, n * d_h)


def counted_conv1d(x, w, dilation: int = 1) -> Counted:
    r"""``attnbook.modalities.conv1d(x, w, causal=True, dilation=dilation)`` as scalar loops that count.

    Computed densely, the zero padding before position 0 multiplied like any other input, so the
    loops perform exactly ``conv1d_macs(n, d_in, k, d_out)`` multiply-adds:

    .. math:: y_t = \sum_{j=0}^{k-1} x_{t - j \delta} W_j, \qquad x_s = 0 \text{ for } s < 0.

    Parameters
    ----------
    x : array_like, shape (n, d_in)
        The sequence.
    w : array_like, shape (k, d_in, d_out)
        The kernel; tap ``j`` looks ``j * dilation`` positions back.
    dilation : int, optional
        Spacing ``delta`` of the taps, at least 1. Default 1.

    Returns
    -------
    Counted
        ``(output (n, d_out), macs, nonlinear = 0)``.

    Examples
    --------
    >>> counted_conv1d(np.ones((3, 2)), np.ones((2, 2, 2))).macs
    24
    """
    x = _matrix(x, "x")  # (n, d_in)
    w = as_float_array(w, "w")  # (k, d_in, d_out)
    if w.ndim != 3 or w.shape[1] != x.shape[1] or w.shape[0] < 1 or w.shape[2] < 1:
        raise ValueError(f"x has shape {x.shape} but w has shape {w.shape}; expected w (k, {x.shape[1]}, d_out)")
    dilation = check_positive_int(dilation, "dilation")
    n, d_in = x.shape
    k, _, d_out = w.shape
    rows, kernel, macs = x.tolist(), w.tolist(), 0
    output = [[0.0] * d_out for _ in range(n)]
    for t in range(n):
        for j in range(k):
            source = t - j * dilation
            row = rows[source] if source >= 0 else [0.0] * d_in  # zero padding before position 0
            for c in range(d_out):
                for m in range(d_in):
                    output[t][c] += row[m] * kernel[j][m][c]
                    macs += 1
    return Counted(np.array(output), macs, 0)


# --- sequential operations and path lengths -------------------------------------------------------


def sequential_operations(kind: str, n: int) -> int:
    """Operations of one layer on ``n`` positions that must run one after another.

    A recurrent layer needs ``n`` (state ``t`` needs state ``t - 1``); every other kind in
    ``LAYER_KINDS`` computes all positions at once, so 1.

    Parameters
    ----------
    kind : str
        One of ``LAYER_KINDS``.
    n : int
        Number of positions, at least 1.

    Returns
    -------
    int
        ``n`` for ``"recurrent"``, otherwise 1.

    Examples
    --------
    >>> sequential_operations("recurrent", 7), sequential_operations("convolutional", 7)
    (7, 1)
    """
    _checked_kind(kind)
    n = check_positive_int(n, "n")
    return n if kind == "recurrent" else 1


def path_length(kind: str, distance: int, reach: int | None = None) -> int:
    r"""Sequential steps that carry information from one input to an output ``distance`` positions away.

    A step is one layer of a stack, or, for a recurrent layer, one step of the recurrence. With
    ``D = distance`` and ``r = reach`` (how many positions one layer bridges):

    .. math::

        \text{self-attention: } 1, \qquad \text{recurrent: } D + 1, \qquad
        \text{convolutional, restricted self-attention: } \max\!\big(1, \lceil D / r \rceil\big),

        \text{dilated convolutional: the smallest } L \ge 1 \text{ with } (r + 1)^L > D.

    The recurrent layer reads the input at one step and carries it through ``D`` more. A causal
    convolution of kernel width ``k`` bridges ``r = k - 1`` positions, a centred one of width
    ``2r + 1`` bridges ``r`` on each side, and restricted self-attention with a band of
    ``window`` bridges ``r = window``. A dilated stack of kernel width ``k = r + 1`` and dilations
    ``1, k, k^2, ...`` reaches ``k^L - 1`` positions with ``L`` layers, hence ``ceil(log_k (D + 1))``.
    On a sequence of ``n`` positions, the longest path has ``D = n - 1``.

    Parameters
    ----------
    kind : str
        One of ``LAYER_KINDS``.
    distance : int
        How many positions apart the input and the output are, at least 0.
    reach : int or None, optional
        Positions bridged by one layer, at least 1; needed for the convolutions and restricted
        self-attention, ignored by the others.

    Returns
    -------
    int
        The number of sequential steps, at least 1.

    Examples
    --------
    >>> [path_length(kind, 99) for kind in ("recurrent", "self-attention")]
    [100, 1]
    >>> path_length("convolutional", 99, reach=2), path_length("restricted self-attention", 99, reach=10)
    (50, 10)
    >>> [path_length("dilated convolutional", n - 1, reach=2) for n in (1, 3, 4, 9, 10, 1000)]
    [1, 1, 2, 2, 3, 7]
    >>> path_length("convolutional", 5)
    Traceback (most recent call last):
    ...
    ValueError: kind 'convolutional' needs reach=, the number of positions one layer bridges
    """
    _checked_kind(kind)
    distance = check_positive_int(distance, "distance", minimum=0)
    if kind == "self-attention":
        return 1
    if kind == "recurrent":
        return distance + 1
    if reach is None:
        raise ValueError(f"kind {kind!r} needs reach=, the number of positions one layer bridges")
    reach = check_positive_int(reach, "reach")
    if kind == "dilated convolutional":
        layers, bridged = 1, reach  # after L layers of kernel width k = reach + 1: k**L - 1 positions
        while bridged < distance:
            layers, bridged = layers + 1, (bridged + 1) * (reach + 1) - 1
        return layers
    return max(1, -(-distance // reach))


# --- parameters -----------------------------------------------------------------------------------


def self_attention_parameter_count(d_model: int, d_k: int, d_v: int | None = None, bias: bool = False) -> int:
    r"""Learned numbers of one self-attention head, whatever the length of the sequence.

    .. math:: \underbrace{d_{model} (2 d_k + d_v)}_{W_Q,\, W_K,\, W_V}
              \; + \; \underbrace{2 d_k + d_v}_{\text{biases, if any}}

    The count does not depend on the number of positions ``n``: the same three matrices are
    applied to every position.

    Parameters
    ----------
    d_model, d_k : int
        Width of the tokens and of queries and keys, each at least 1.
    d_v : int or None, optional
        Width of the values; defaults to ``d_k``.
    bias : bool, optional
        Count a bias per projection. Default False.

    Returns
    -------
    int
        The number of learned parameters.

    Examples
    --------
    >>> self_attention_parameter_count(2, 2, 3), self_attention_parameter_count(512, 64, bias=True)
    (14, 98496)
    >>> self_attention_parameter_count(512, 0)
    Traceback (most recent call last):
    ...
    ValueError: d_k must be at least 1, got 0
    """
    d_model = check_positive_int(d_model, "d_model")
    d_k = check_positive_int(d_k, "d_k")
    d_v = d_k if d_v is None else check_positive_int(d_v, "d_v")
    bias = check_bool(bias, "bias")
    weights = d_model * d_k + d_model * d_k + d_model * d_v  # W_Q, W_K, W_V
    biases = d_k + d_k + d_v  # b_Q, b_K, b_V
    return weights + (biases if bias else 0)


def count_multi_head_parameters(d_model: int, n_heads: int, bias: bool = True) -> int:
    r"""Learned numbers of multi-head attention, the same for every number of heads.

    .. math:: \underbrace{4 d_{model}^2}_{W_Q,\, W_K,\, W_V,\, W_O} + \underbrace{4 d_{model}}_{\text{biases}}

    Each of the ``h`` heads projects to ``d_model / h`` dimensions, so the heads together use
    exactly the parameters of one full-width head.

    Parameters
    ----------
    d_model : int
        Width of the tokens, at least 1.
    n_heads : int
        Number of heads, at least 1, dividing ``d_model``.
    bias : bool, optional
        Count the four bias vectors. Default True.

    Returns
    -------
    int
        The number of learned parameters.

    Examples
    --------
    >>> count_multi_head_parameters(512, 8), count_multi_head_parameters(512, 1, bias=False)
    (1050624, 1048576)
    >>> count_multi_head_parameters(10, 4)
    Traceback (most recent call last):
    ...
    ValueError: d_model = 10 is not divisible by n_heads = 4; each head needs d_model / n_heads dimensions
    """
    d_model = check_positive_int(d_model, "d_model")
    check_heads(d_model, n_heads)
    bias = check_bool(bias, "bias")
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


def transformer_parameter_count(d_model: int, d_ff: int, n_heads: int, n_layers: int, vocab_size: int,
                                n_decoder_layers: int | None = None, shared_embeddings: bool = True,
                                tied_output: bool = True) -> dict[str, int]:
    r"""Parameters of a post-norm encoder-decoder Transformer with biases, part by part, and their total.

    With ``A = 4 d^2 + 4 d`` (one multi-head attention), ``F = 2 d d_ff + d_ff + d`` (one feed-forward
    block) and ``N = 2 d`` (one layer norm):

    .. math::

        \text{encoder layer} = A + F + 2N, \qquad \text{decoder layer} = 2A + F + 3N,

        \text{total} = n_{enc} (A + F + 2N) + n_{dec} (2A + F + 3N) + \text{embeddings} + \text{output}.

    One shared embedding matrix has ``V d`` numbers; an untied output layer adds ``V d + V``.
    Sinusoidal positional encodings have no parameters. With the sizes of Table 3 of Vaswani et al.
    (2017) and a shared vocabulary of 37,000 tokens, the base model comes to about 63 M.

    Parameters
    ----------
    d_model, d_ff, n_heads, n_layers, vocab_size : int
        Model width, width of the feed-forward layer, number of heads (dividing ``d_model``), number
        of encoder layers and vocabulary size, each at least 1.
    n_decoder_layers : int or None, optional
        Number of decoder layers; defaults to ``n_layers``.
    shared_embeddings : bool, optional
        One embedding matrix for source and target tokens (default True), as in the paper's shared
        byte-pair vocabulary.
    tied_output : bool, optional
        The pre-softmax projection reuses the embedding matrix (default True).

    Returns
    -------
    dict of str to int
        The counts of ``"attention per layer"``, ``"feed-forward per layer"``, ``"encoder layer"``,
        ``"decoder layer"``, ``"encoder"``, ``"decoder"``, ``"embeddings"``, ``"output projection"``
        and ``"total"``.

    Examples
    --------
    >>> counts = transformer_parameter_count(d_model=512, d_ff=2048, n_heads=8, n_layers=6, vocab_size=37000)
    >>> round(counts["total"] / 1e6, 1)
    63.1
    >>> transformer_parameter_count(512, 2048, 8, 6, 0)
    Traceback (most recent call last):
    ...
    ValueError: vocab_size must be at least 1, got 0
    """
    d_model = check_positive_int(d_model, "d_model")
    d_ff = check_positive_int(d_ff, "d_ff")
    n_layers = check_positive_int(n_layers, "n_layers")
    vocab_size = check_positive_int(vocab_size, "vocab_size")
    shared_embeddings = check_bool(shared_embeddings, "shared_embeddings")
    tied_output = check_bool(tied_output, "tied_output")
    n_dec = n_layers if n_decoder_layers is None else check_positive_int(n_decoder_layers, "n_decoder_layers")
    attention = count_multi_head_parameters(d_model, n_heads)  # 4 d^2 + 4 d
    feed_forward = d_model * d_ff + d_ff + d_ff * d_model + d_model
    norm = 2 * d_model  # gamma and beta
    encoder_layer = attention + feed_forward + 2 * norm
    decoder_layer = 2 * attention + feed_forward + 3 * norm
    embedding = vocab_size * d_model
    embeddings = embedding if shared_embeddings else 2 * embedding
    output = 0 if tied_output else embedding + vocab_size
    counts = {
        "attention per layer": attention,
        "feed-forward per layer": feed_forward,
        "encoder layer": encoder_layer,
        "decoder layer": decoder_layer,
        "encoder": n_layers * encoder_layer,
        "decoder": n_dec * decoder_layer,
        "embeddings": embeddings,
        "output projection": output,
    }
    counts["total"] = counts["encoder"] + counts["decoder"] + embeddings + output
    return counts


# --- memory ---------------------------------------------------------------------------------------


def kv_cache_bytes(n_tokens: int, n_layers: int, n_heads: int, d_head: int, itemsize: int = 2,
                   batch: int = 1, n_kv_heads: int | None = None) -> int:
    r"""Bytes a key-value cache holds: a key and a value of ``d_head`` numbers per token, key head and layer.

    .. math:: 2 \cdot \text{batch} \cdot n_{layers} \cdot n_{kv} \cdot n_{tokens} \cdot d_{head}
              \cdot \text{itemsize}

    Only the key and value heads are cached: :math:`n_{kv} = h` in multi-head attention, fewer in
    grouped-query attention, 1 in multi-query attention.

    Parameters
    ----------
    n_tokens : int
        Tokens held, at least 0.
    n_layers, n_heads, d_head : int
        Layers, (query) heads per layer and width of one head's keys and values, each at least 1.
    itemsize : int, optional
        Bytes per number: 2 (default) for float16, 4 for float32.
    batch : int, optional
        Sequences held, at least 1. Default 1.
    n_kv_heads : int, optional
        Key and value heads per layer, dividing ``n_heads``; default ``n_heads``.

    Returns
    -------
    int
        The number of bytes.

    Examples
    --------
    >>> kv_cache_bytes(n_tokens=1024, n_layers=12, n_heads=12, d_head=64) / 2**20   # MiB
    36.0
    >>> kv_cache_bytes(n_tokens=1024, n_layers=12, n_heads=12, d_head=64, n_kv_heads=3) / 2**20
    9.0
    """
    sizes = {"n_tokens": n_tokens, "n_layers": n_layers, "n_heads": n_heads, "d_head": d_head,
             "itemsize": itemsize, "batch": batch}
    checked = {name: check_positive_int(value, name, minimum=0 if name == "n_tokens" else 1)
               for name, value in sizes.items()}
    if n_kv_heads is not None:
        checked["n_heads"] = check_kv_heads(checked["n_heads"], n_kv_heads)  # only the key heads are cached
    return 2 * math.prod(checked.values())


def decoder_block_parameter_count(d_model: int, d_ff: int, n_heads: int, n_kv_heads: int | None = None,
                                  gated: bool = True) -> dict[str, int]:
    r"""Parameters of one bias-free pre-norm decoder-only block with RMSNorm, part by part.

    With :math:`d_h = d / h` and :math:`n_{kv}` key and value heads:

    .. math::

        \underbrace{2 d^2 + 2 d \, n_{kv} d_h}_{W_Q,\, W_O;\; W_K,\, W_V}
        \; + \; \underbrace{3 d \, d_\text{ff}}_{W_\text{gate},\, W_\text{up},\, W_\text{down}}
        \; + \; \underbrace{2 d}_{\text{two RMSNorm gains}}

    (``gated=False``: a ReLU network, :math:`2 d \, d_\text{ff}`). The 2017 block with biases and
    layer norms is :func:`transformer_parameter_count`'s ``"encoder layer"``.

    Parameters
    ----------
    d_model, d_ff : int
        Model width and hidden width of the feed-forward network, each at least 1.
    n_heads : int
        Query heads, dividing ``d_model``.
    n_kv_heads : int, optional
        Key and value heads, dividing ``n_heads``; default ``n_heads``.
    gated : bool, optional
        A SwiGLU network with three matrices (default) or a two-matrix one.

    Returns
    -------
    dict of str to int
        ``"attention"``, ``"feed-forward"``, ``"norms"`` and ``"block"`` (their sum).

    Examples
    --------
    >>> decoder_block_parameter_count(d_model=4096, d_ff=14336, n_heads=32, n_kv_heads=8)["block"]
    218112000
    >>> decoder_block_parameter_count(8, 16, n_heads=4, n_kv_heads=3)
    Traceback (most recent call last):
    ...
    ValueError: n_heads = 4 is not divisible by n_kv_heads = 3; each key and value head serves n_heads / n_kv_heads query heads
    """
    d_model = check_positive_int(d_model, "d_model")
    d_ff = check_positive_int(d_ff, "d_ff")
    n_heads = check_heads(d_model, n_heads)
    n_kv = n_heads if n_kv_heads is None else check_kv_heads(n_heads, n_kv_heads)
    gated = check_bool(gated, "gated")
    d_kv = n_kv * (d_model // n_heads)  # width of all key (or value) heads together
    counts = {
        "attention": 2 * d_model * d_model + 2 * d_model * d_kv,
        "feed-forward": (3 if gated else 2) * d_model * d_ff,
        "norms": 2 * d_model,
    }
    counts["block"] = sum(counts.values())
    return counts
