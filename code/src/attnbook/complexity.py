"""What a sequence layer costs: operation counts, sequential steps, path lengths and timings.

The chapter "Why attention?" compares three ways of mixing the positions of a sequence of ``n``
vectors of width ``d``: self-attention, a recurrent layer and a convolution. This module holds
what that comparison computes:

- exact multiply-add counts (``*_macs``), and the same computations written as scalar loops that
  count every multiply-add they perform (``counted_*``), so the counts can be checked;
- a causal 1-D convolution layer (``conv1d_forward``), the convolutional baseline;
- the number of sequential steps and the path length of each kind of layer, in closed form
  (``sequential_operations``, ``path_length``), and measured by perturbing one input and watching
  which outputs change (``perturbation_effect``, ``dependency_reach``, ``steps_to_reach``);
- wall-clock timing (``time_call``, ``time_layer``, ``time_layers``) and log-log slopes (``loglog_slope``).

>>> self_attention_macs(n=4, d=8)          # 3 n d^2 (projections) + 2 n^2 d (scores and weighted sum)
1024
>>> rnn_macs(n=4, d_in=8)                  # n d_in d_h (inputs) + n d_h^2 (recurrence)
512
>>> path_length("recurrent", 10), path_length("self-attention", 10), path_length("convolutional", 10, k=3)
(10, 1, 5)
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .attention import scaled_dot_product_attention
from .masks import banded_mask
from .attention import self_attention
from .recurrent import rnn_forward
from .validation import as_float_array, check_min_ndim, check_positive_int

__all__ = [
    "KINDS",
    "Counted",
    "conv1d_forward",
    "conv1d_macs",
    "counted_conv1d",
    "counted_rnn",
    "counted_self_attention",
    "dependency_reach",
    "loglog_slope",
    "path_length",
    "perturbation_effect",
    "restricted_attention_macs",
    "rnn_macs",
    "self_attention_macs",
    "sequential_operations",
    "steps_to_reach",
    "time_call",
    "time_layer",
    "time_layers",
]

#: The kinds of layer of the comparison (the rows of Table 1 of "Attention Is All You Need",
#: with the convolution split into contiguous and dilated kernels).
KINDS = ("self-attention", "recurrent", "convolutional", "dilated convolutional",
         "restricted self-attention")

#: The layers ``time_layer`` can time.
TIMED_LAYERS = ("self-attention", "attention core", "recurrent")


# --- exact operation counts ---------------------------------------------------------------------


def self_attention_macs(n: int, d: int, projections: bool = True) -> int:
    """Multiply-adds of one self-attention head with ``d_model = d_k = d_v = d`` on ``n`` positions.

    The scores ``Q K^T`` take ``n * n * d`` and the weighted sum ``A V`` another ``n * n * d``; the
    projections ``X W_Q``, ``X W_K``, ``X W_V`` add ``3 * n * d * d`` (left out with
    ``projections=False``, as in Table 1 of the Transformer paper). The ``n * n`` exponentials of the
    softmax are not multiply-adds and are not counted.

    >>> self_attention_macs(3, 2, projections=False)   # 2 * 3^2 * 2
    36
    >>> self_attention_macs(0, 2)
    Traceback (most recent call last):
    ...
    ValueError: n must be at least 1, got 0
    """
    n, d = check_positive_int(n, "n"), check_positive_int(d, "d")
    core = 2 * n * n * d
    return core + 3 * n * d * d if projections else core


def rnn_macs(n: int, d_in: int, d_h: int | None = None) -> int:
    """Multiply-adds of ``rnn_forward`` on ``n`` positions: ``n d_in d_h`` for the inputs ``x W_x``
    plus ``n d_h^2`` for the recurrence ``h W_h`` (``d_h`` defaults to ``d_in``).

    >>> rnn_macs(3, 2)
    24
    >>> rnn_macs(3, 2, 5)
    105
    """
    n, d_in = check_positive_int(n, "n"), check_positive_int(d_in, "d_in")
    d_h = d_in if d_h is None else check_positive_int(d_h, "d_h")
    return n * d_in * d_h + n * d_h * d_h


def conv1d_macs(n: int, d_in: int, k: int, d_out: int | None = None) -> int:
    """Multiply-adds of a causal convolution with kernel width ``k`` computed densely, the zero padding
    before position 0 multiplied like any other input: ``k n d_in d_out`` (``d_out`` defaults to ``d_in``).

    ``counted_conv1d`` counts exactly this. ``conv1d_forward`` skips the products with the padding
    and performs ``sum_j max(n - j * dilation, 0) * d_in * d_out``, which is the same up to the
    edge of the sequence.

    >>> conv1d_macs(3, 2, k=2)
    24
    """
    n, d_in, k = check_positive_int(n, "n"), check_positive_int(d_in, "d_in"), check_positive_int(k, "k")
    d_out = d_in if d_out is None else check_positive_int(d_out, "d_out")
    return k * n * d_in * d_out


def restricted_attention_macs(n: int, d: int, window: int) -> int:
    """Multiply-adds of scores and weighted sum when each query sees only the keys within ``window``
    positions of it (the band of ``banded_mask(n, window)``) and only those are computed.

    Away from the ends each query has ``r = 2 * window + 1`` keys, so the count is close to
    ``2 r n d``; Table 1 of the Transformer paper writes it O(r n d). (The package's
    ``self_attention`` with a banded mask still computes all ``n * n`` scores and then masks them.)

    >>> restricted_attention_macs(5, 2, window=1)   # 2 * d * (number of allowed pairs = 13)
    52
    """
    n, d = check_positive_int(n, "n"), check_positive_int(d, "d")
    window = check_positive_int(window, "window", minimum=0)
    pairs = int(banded_mask(n, window).sum())
    return 2 * pairs * d


# --- the same computations as counting loops ----------------------------------------------------


class Counted(NamedTuple):
    """A result computed by explicit scalar loops, with the operations the loops performed."""

    output: np.ndarray  # the layer's output, as the package computes it
    macs: int  # multiply-adds of the matrix products (a * b added to a running sum)
    nonlinear: int  # evaluations of exp (softmax) or tanh (recurrence)


def _matrix(a, name: str) -> np.ndarray:
    a = as_float_array(a, name)
    if a.ndim != 2:
        raise ValueError(f"{name} has shape {a.shape}; expected a matrix")
    return a


def counted_self_attention(x, w_q, w_k, w_v) -> Counted:
    """``self_attention(x, w_q, w_k, w_v).output`` written as scalar loops that count their work.

    ``x`` is ``(n, d_model)``, the projections ``(d_model, d_k)``, ``(d_model, d_k)``, ``(d_model, d_v)``.
    Meant for small sizes: every multiply-add is a Python operation.

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
    """``rnn_forward(x, w_x, w_h, b)`` (zero initial state) written as scalar loops that count their work.

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
    """``conv1d_forward(x, w, dilation=dilation)`` (no bias) written as scalar loops that count their work.

    >>> counted_conv1d(np.ones((3, 2)), np.ones((2, 2, 2))).macs
    24
    """
    x = _matrix(x, "x")  # (n, d_in)
    w = _checked_kernel(w, x.shape)  # (k, d_in, d_out)
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


# --- the convolutional baseline -----------------------------------------------------------------


def _checked_kernel(w, x_shape: tuple[int, ...]) -> np.ndarray:
    w = as_float_array(w, "w")  # (k, d_in, d_out)
    if w.ndim != 3:
        raise ValueError(f"w has shape {w.shape}; expected a kernel (k, d_in, d_out)")
    if w.shape[0] < 1 or w.shape[2] < 1:
        raise ValueError(f"w has shape {w.shape}; the kernel width k and d_out must be at least 1")
    if w.shape[1] != x_shape[-1]:
        raise ValueError(f"x has shape {x_shape} but w has shape {w.shape}; "
                         f"w needs d_in = {x_shape[-1]} as its middle dimension")
    return w


def conv1d_forward(x, w, b=None, dilation: int = 1) -> np.ndarray:
    """Causal 1-D convolution: ``y_t = sum_j x_{t - j * dilation} w_j + b`` for ``j = 0 .. k - 1``.

    ``x`` is ``(..., n, d_in)``, ``w`` is ``(k, d_in, d_out)``, ``b`` is ``(d_out,)`` or None. Inputs
    before position 0 are zeros (padding), so the output has the length ``n`` of the input and output
    ``t`` depends only on inputs ``t, t - dilation, ..., t - (k - 1) * dilation``: one layer moves
    information at most ``(k - 1) * dilation`` positions forward.

    >>> x = np.arange(4.0).reshape(4, 1)                    # (n, d_in) = (4, 1)
    >>> conv1d_forward(x, np.ones((2, 1, 1)))[:, 0]         # y_t = x_t + x_{t-1}
    array([0., 1., 3., 5.])
    >>> conv1d_forward(x, np.ones((2, 1, 1)), dilation=2)[:, 0]   # y_t = x_t + x_{t-2}
    array([0., 1., 2., 4.])
    >>> conv1d_forward(x, np.ones((2, 3, 1)))
    Traceback (most recent call last):
    ...
    ValueError: x has shape (4, 1) but w has shape (2, 3, 1); w needs d_in = 1 as its middle dimension
    """
    x = as_float_array(x, "x")  # (..., n, d_in)
    check_min_ndim(x, "x", 2, "(..., n, d_in)")
    w = _checked_kernel(w, x.shape)  # (k, d_in, d_out)
    dilation = check_positive_int(dilation, "dilation")
    n = x.shape[-2]
    y = np.zeros(x.shape[:-1] + (w.shape[2],))  # (..., n, d_out)
    for j in range(w.shape[0]):  # tap j looks j * dilation positions back
        offset = j * dilation
        if offset >= n:  # this tap and the later ones see only the zeros before position 0
            break
        y[..., offset:, :] += x[..., : n - offset, :] @ w[j]  # (..., n - offset, d_out)
    if b is not None:
        b = as_float_array(b, "b")  # (d_out,)
        if b.shape != (w.shape[2],):
            raise ValueError(f"b has shape {b.shape} but w has shape {w.shape}; expected b ({w.shape[2]},)")
        y = y + b  # (..., n, d_out)
    return y


# --- sequential steps and path lengths ----------------------------------------------------------


def _checked_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(repr(k) for k in KINDS)}; got {kind!r}")
    return kind


def sequential_operations(kind: str, n: int) -> int:
    """Operations of one layer that must run one after another on ``n`` positions.

    A recurrent layer needs ``n`` (state ``t`` needs state ``t - 1``); every other kind computes all
    positions at once, so 1.

    >>> sequential_operations("recurrent", 7), sequential_operations("convolutional", 7)
    (7, 1)
    """
    _checked_kind(kind)
    n = check_positive_int(n, "n")
    return n if kind == "recurrent" else 1


def path_length(kind: str, n: int, k: int = 3, window: int = 1) -> int:
    """Steps that information from input position 0 needs before it can change output position n - 1.

    A step is one layer, or for a recurrent layer one step of the recurrence. ``k`` is the kernel
    width of the convolutions (contiguous, or dilated by ``1, k, k^2, ...`` layer after layer) and
    ``window`` the reach of restricted self-attention on each side (``r = 2 * window + 1`` keys).

    - self-attention: 1;
    - recurrent: n (position 0 enters the state, then n - 1 steps of the recurrence);
    - convolutional: ceil((n - 1) / (k - 1)), at least 1;
    - dilated convolutional: the smallest L >= 1 with k**L >= n, that is ceil(log_k n);
    - restricted self-attention: ceil((n - 1) / window), at least 1.

    >>> [path_length("dilated convolutional", n, k=3) for n in (1, 3, 4, 9, 10, 1000)]
    [1, 1, 2, 2, 3, 7]
    >>> path_length("convolutional", 10, k=1)
    Traceback (most recent call last):
    ...
    ValueError: k must be at least 2, got 1
    """
    _checked_kind(kind)
    n = check_positive_int(n, "n")
    if kind == "self-attention":
        return 1
    if kind == "recurrent":
        return n
    if kind == "restricted self-attention":
        window = check_positive_int(window, "window")
        return max(1, -(-(n - 1) // window))
    k = check_positive_int(k, "k", minimum=2)
    if kind == "convolutional":
        return max(1, -(-(n - 1) // (k - 1)))
    layers, reach = 1, k  # dilated: after L layers the receptive field is k**L positions
    while reach < n:
        layers, reach = layers + 1, reach * k
    return layers


def perturbation_effect(layer: Callable, x, source: int = 0, delta: float = 1.0) -> np.ndarray:
    """How much each output of ``layer`` moves when input row ``source`` of ``x`` is perturbed.

    Adds ``delta`` to every feature of row ``source`` of ``x`` (``(n, d)``) and returns, per output
    position, the Euclidean norm of the change of ``layer(x)`` (``(n, d_out)``), shape ``(n,)``.

    >>> perturbation_effect(lambda z: np.cumsum(z, axis=0), np.zeros((3, 1)), source=1)
    array([0., 1., 1.])
    """
    x = as_float_array(x, "x")  # (n, d)
    if x.ndim != 2:
        raise ValueError(f"x has shape {x.shape}; expected a sequence (n, d)")
    n = x.shape[0]
    if isinstance(source, bool) or not isinstance(source, (int, np.integer)) or not 0 <= source < n:
        raise ValueError(f"source must be a position 0 .. {n - 1} of x (shape {x.shape}), got {source!r}")
    if not math.isfinite(delta) or delta == 0:
        raise ValueError(f"delta must be a non-zero finite number, got {delta!r}")
    moved = x.copy()  # (n, d)
    moved[source] += delta
    before, after = np.asarray(layer(x)), np.asarray(layer(moved))  # (n, d_out) each
    if before.shape[:1] != (n,) or before.shape != after.shape:
        raise ValueError(f"layer returned shape {before.shape} for x of shape {x.shape}; "
                         "expected one output row per position")
    return np.linalg.norm((after - before).reshape(n, -1), axis=1)  # (n,)


def dependency_reach(run: Callable, x, n_steps: int, source: int = 0, delta: float = 1.0,
                     tol: float = 1e-12) -> np.ndarray:
    """Which outputs depend on input ``source`` after each of ``n_steps`` steps: bool ``(n_steps, n)``.

    ``run(x, s)`` returns the outputs ``(n, d_out)`` after ``s`` steps (layers, or steps of a
    recurrence; positions not yet computed may be zeros). Entry ``[s - 1, t]`` is True when
    perturbing input ``source`` changes output ``t`` after ``s`` steps by more than ``tol``.

    >>> shift = lambda z, s: np.vstack([np.zeros((s, 1)), z[:len(z) - s]])  # moves rows s places down
    >>> dependency_reach(shift, np.zeros((4, 1)), n_steps=2).astype(int)
    array([[0, 1, 0, 0],
           [0, 0, 1, 0]])
    """
    n_steps = check_positive_int(n_steps, "n_steps")
    reach = [perturbation_effect(lambda z, s=s: run(z, s), x, source, delta) > tol
             for s in range(1, n_steps + 1)]
    return np.array(reach)  # (n_steps, n)


def steps_to_reach(reach, target: int = -1) -> int | None:
    """The first step (counted from 1) at which ``reach`` (``(n_steps, n)``) marks ``target``; None if never.

    >>> steps_to_reach(np.array([[True, False], [True, True]]))
    2
    """
    reach = np.asarray(reach, dtype=bool)  # (n_steps, n)
    if reach.ndim != 2:
        raise ValueError(f"reach has shape {reach.shape}; expected (n_steps, n)")
    hits = np.flatnonzero(reach[:, target])  # (hits,)
    return int(hits[0]) + 1 if hits.size else None


# --- timing ----------------------------------------------------------------------------------------


def _checked_timer(statistic: str, clock: str) -> Callable[[], float]:
    if statistic not in ("median", "min"):
        raise ValueError(f"statistic must be 'median' or 'min', got {statistic!r}")
    if clock not in ("cpu", "wall"):
        raise ValueError(f"clock must be 'cpu' or 'wall', got {clock!r}")
    return time.process_time if clock == "cpu" else time.perf_counter


def time_call(fn: Callable, *args, repeats: int = 7, warmup: int = 1, statistic: str = "median",
              clock: str = "cpu", **kwargs) -> float:
    """Seconds taken by ``fn(*args, **kwargs)``: the median (or, with ``statistic="min"``, the fastest)
    of ``repeats`` calls, made after ``warmup`` calls that are not timed.

    ``clock="cpu"`` (the default) measures the processor time of this process, all its threads
    together (``time.process_time``): the work done, which other programs sharing the processor do
    not inflate. ``clock="wall"`` measures elapsed time (``time.perf_counter``), which they do. The
    median resists the occasional slow call; the minimum is the call least disturbed, since
    interference only ever adds time. Timings still vary from run to run and machine to machine.

    >>> time_call(sorted, [3, 1, 2]) > 0
    True
    >>> time_call(sorted, [3, 1, 2], statistic="mean")
    Traceback (most recent call last):
    ...
    ValueError: statistic must be 'median' or 'min', got 'mean'
    """
    timer = _checked_timer(statistic, clock)
    repeats = check_positive_int(repeats, "repeats")
    warmup = check_positive_int(warmup, "warmup", minimum=0)
    for _ in range(warmup):
        fn(*args, **kwargs)
    times = []
    for _ in range(repeats):
        start = timer()
        fn(*args, **kwargs)
        times.append(timer() - start)
    return statistics.median(times) if statistic == "median" else min(times)


def _layer_call(kind: str, n: int, d: int, seed: int) -> Callable[[], object]:
    """A zero-argument call of one forward pass of ``kind`` on a seeded random sequence ``(n, d)``."""
    if kind not in TIMED_LAYERS:
        raise ValueError(f"kind must be one of {', '.join(repr(k) for k in TIMED_LAYERS)}; got {kind!r}")
    n, d = check_positive_int(n, "n"), check_positive_int(d, "d")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))  # (n, d)
    w = rng.standard_normal((3, d, d)) / np.sqrt(d)  # (3, d, d): keeps activations of order 1
    if kind == "self-attention":
        return lambda: self_attention(x, w[0], w[1], w[2])
    if kind == "attention core":
        q, k, v = x @ w[0], x @ w[1], x @ w[2]  # (n, d) each
        return lambda: scaled_dot_product_attention(q, k, v)
    w_h, b = 0.5 * w[1], np.zeros(d)  # (d, d), (d,)
    return lambda: rnn_forward(x, w[0], w_h, b)


def time_layer(kind: str, n: int, d: int, repeats: int = 7, seed: int = 0, statistic: str = "median",
               clock: str = "cpu") -> float:
    """Seconds of one forward pass of a layer on a seeded random sequence ``(n, d)`` (see ``time_call``).

    ``kind`` is ``"self-attention"`` (``self_attention`` with three ``(d, d)`` projections),
    ``"attention core"`` (``scaled_dot_product_attention`` on given ``(n, d)`` queries, keys and
    values) or ``"recurrent"`` (``rnn_forward`` with ``d_in = d_h = d``).

    >>> time_layer("recurrent", 4, 2) > 0
    True
    >>> time_layer("convolution", 4, 2)
    Traceback (most recent call last):
    ...
    ValueError: kind must be one of 'self-attention', 'attention core', 'recurrent'; got 'convolution'
    """
    return time_call(_layer_call(kind, n, d, seed), repeats=repeats, statistic=statistic, clock=clock)


def time_layers(kind: str, shapes, repeats: int = 7, seed: int = 0, statistic: str = "min",
                clock: str = "cpu") -> np.ndarray:
    """Seconds of one forward pass of ``kind`` for each ``(n, d)`` in ``shapes``: array ``(len(shapes),)``.

    The calls are interleaved, one call per shape in each of the ``repeats`` rounds, so that a burst
    of activity from another process slows a few calls of several shapes rather than every call of
    one shape, which would bend a fitted slope. Each shape then keeps the ``statistic`` of its
    calls (by default the fastest) on the chosen ``clock`` (by default processor time; see
    ``time_call``). One untimed round warms up first.

    >>> times = time_layers("recurrent", [(4, 2), (8, 2)], repeats=2)
    >>> times.shape, bool(np.all(times > 0))
    ((2,), True)
    """
    timer = _checked_timer(statistic, clock)
    repeats = check_positive_int(repeats, "repeats")
    shapes = [tuple(shape) for shape in shapes]
    if not shapes or any(len(shape) != 2 for shape in shapes):
        raise ValueError(f"shapes must be a non-empty list of (n, d) pairs, got {shapes!r}")
    calls = [_layer_call(kind, n, d, seed) for n, d in shapes]
    for call in calls:  # warm-up round, not timed
        call()
    times = np.empty((repeats, len(calls)))  # (repeats, shapes)
    for r in range(repeats):
        for i, call in enumerate(calls):
            start = timer()
            call()
            times[r, i] = timer() - start
    return np.median(times, axis=0) if statistic == "median" else times.min(axis=0)  # (shapes,)


def loglog_slope(sizes, values) -> float:
    """Slope of the least-squares line through ``(log sizes, log values)``: the exponent ``p`` of
    ``values ~ c * sizes**p``.

    >>> round(loglog_slope([1, 2, 4, 8], [3, 12, 48, 192]), 6)
    2.0
    >>> loglog_slope([1, 2], [1, -1])
    Traceback (most recent call last):
    ...
    ValueError: sizes and values must be positive (they are put on a log scale)
    """
    sizes = as_float_array(sizes, "sizes")  # (m,)
    values = as_float_array(values, "values")  # (m,)
    if sizes.ndim != 1 or sizes.shape != values.shape or sizes.size < 2:
        raise ValueError(f"sizes and values must be 1-D of the same length >= 2; got {sizes.shape} and {values.shape}")
    if np.any(sizes <= 0) or np.any(values <= 0):
        raise ValueError("sizes and values must be positive (they are put on a log scale)")
    if np.all(sizes == sizes[0]):
        raise ValueError("sizes are all equal; a slope needs at least two different sizes")
    slope, _ = np.polyfit(np.log(sizes), np.log(values), 1)
    return float(slope)
