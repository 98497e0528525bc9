"""Attention beyond text: convolution as attention, images as patches, path lengths and costs.

The tools of the chapter "Attention beyond text". They compare self-attention with the two older
ways of mixing a sequence, convolution and recurrence, and prepare other kinds of data for it:

- a 1-D convolution, its banded matrix, and the same convolution computed by attention heads whose
  masks leave exactly one key each (one head per kernel offset);
- images cut into patches (the tokens of a Vision Transformer), and a local window on a grid;
- the Jacobian of an RNN's states with respect to an early input, analytic and by finite differences;
- counts of attention score entries (full, causal, truncated) and of the path length between positions;
- least-squares fits of a sequence-mixing matrix with and without the convolution's assumptions.

>>> import numpy as np
>>> x = np.array([1.0, 2.0, 3.0])                       # (n,): one channel
>>> kernel = np.array([1.0, 2.0, -1.0])                 # (k,): weights for offsets -1, 0, +1
>>> conv1d(x, kernel).tolist()
[0.0, 2.0, 8.0]
>>> conv1d_as_attention(x, kernel).output.tolist()
[0.0, 2.0, 8.0]
"""

from __future__ import annotations

import math

import numpy as np

from .attention import AttentionResult, scaled_dot_product_attention
from .recurrent import rnn_forward
from .softmax import softmax
from .gradients import numerical_jacobian  # re-exported: it used to live here
from .masks import banded_entry_count
from .validation import as_float_array, check_positive_int, check_shape

__all__ = [
    "attention_pair_count",
    "conv1d",
    "conv1d_as_attention",
    "conv1d_matrix",
    "fit_mixing_matrix",
    "grid_local_mask",
    "image_to_patches",
    "numerical_jacobian",
    "patches_to_image",
    "quadratic_relative_scores",
    "rnn_state_jacobians",
    "shift_mask",
    "steps_between",
]

ARCHITECTURES = ("recurrent", "convolution", "self-attention", "banded-attention")


# --- convolution as attention --------------------------------------------------------------------


def _checked_kernel_1d(kernel) -> np.ndarray:
    w = as_float_array(kernel, "kernel")  # (k,)
    if w.ndim != 1 or w.shape[0] % 2 == 0:
        raise ValueError(
            f"kernel has shape {w.shape}; expected an odd number of taps (k,), "
            "one weight per offset -(k-1)/2 .. (k-1)/2"
        )
    return w


def _checked_conv_inputs(x, kernel) -> tuple[np.ndarray, np.ndarray, bool]:
    """Return x as (n, c_in), kernel as (k, c_in, c_out), and whether the input was one channel."""
    x = as_float_array(x, "x")
    w = as_float_array(kernel, "kernel")
    single = x.ndim == 1 and w.ndim == 1
    if single:
        w = _checked_kernel_1d(w)[:, None, None]  # (k, 1, 1)
        x = x[:, None]  # (n, 1)
    elif x.ndim != 2 or w.ndim != 3:
        raise ValueError(
            f"x has shape {x.shape} and kernel has shape {w.shape}; expected x (n,) with kernel (k,), "
            "or x (n, c_in) with kernel (k, c_in, c_out)"
        )
    if w.shape[0] % 2 == 0:
        raise ValueError(f"kernel has shape {w.shape}; the number of taps k = {w.shape[0]} must be odd")
    if w.shape[1] != x.shape[1]:
        raise ValueError(
            f"x has shape {x.shape} but kernel has shape {w.shape}; kernel needs c_in = {x.shape[1]} "
            "input channels (its second dimension)"
        )
    if x.shape[0] == 0:
        raise ValueError(f"x has shape {x.shape}; a sequence needs at least one position")
    return x, w, single


def conv1d(x, kernel) -> np.ndarray:
    """1-D convolution with zero padding ('same' length), as deep-learning libraries define it.

    ``y[i] = sum_d x[i + d] @ kernel[d + r]`` for offsets ``d = -r .. r`` with ``k = 2r + 1`` taps;
    positions outside the sequence count as 0. No kernel flip (strictly, a cross-correlation).

    ``x`` is ``(n,)`` with ``kernel`` ``(k,)`` (one channel; returns ``(n,)``), or ``x`` is
    ``(n, c_in)`` with ``kernel`` ``(k, c_in, c_out)`` (returns ``(n, c_out)``).

    >>> conv1d(np.eye(3), np.ones((3, 3, 1)))[:, 0].tolist()
    [2.0, 3.0, 2.0]
    >>> conv1d(np.ones(4), np.ones(2))
    Traceback (most recent call last):
    ...
    ValueError: kernel has shape (2,); expected an odd number of taps (k,), one weight per offset -(k-1)/2 .. (k-1)/2
    """
    x, w, single = _checked_conv_inputs(x, kernel)  # (n, c_in), (k, c_in, c_out)
    n, r = x.shape[0], w.shape[0] // 2
    padded = np.pad(x, ((r, r), (0, 0)))  # (n + 2r, c_in): zeros outside the sequence
    y = np.zeros((n, w.shape[2]), dtype=np.result_type(x, w))  # (n, c_out)
    for tap in range(w.shape[0]):  # tap = d + r
        y += padded[tap:tap + n] @ w[tap]  # (n, c_in) @ (c_in, c_out) -> (n, c_out)
    return y[:, 0] if single else y


def conv1d_matrix(kernel, n: int) -> np.ndarray:
    """The ``(n, n)`` matrix ``C`` of a one-channel convolution: ``conv1d(x, kernel) == C @ x``.

    ``C[i, j] = kernel[j - i + r]`` when ``|j - i| <= r`` and 0 otherwise: a banded matrix whose
    entries depend only on the offset ``j - i`` (a Toeplitz matrix), the same for every input.

    >>> conv1d_matrix([1.0, 2.0, -1.0], 4).tolist()
    [[2.0, -1.0, 0.0, 0.0], [1.0, 2.0, -1.0, 0.0], [0.0, 1.0, 2.0, -1.0], [0.0, 0.0, 1.0, 2.0]]
    """
    w = _checked_kernel_1d(kernel)  # (k,)
    n = check_positive_int(n, "n")
    r = w.shape[0] // 2
    offset = np.arange(n)[None, :] - np.arange(n)[:, None]  # (n, n): j - i
    inside = np.abs(offset) <= r  # (n, n)
    return np.where(inside, w[np.clip(offset + r, 0, 2 * r)], 0.0)  # (n, n)


def shift_mask(n: int, offset: int) -> np.ndarray:
    """Mask ``(n, n)`` that lets query ``i`` attend to key ``i + offset`` only.

    Rows whose key would fall outside the sequence are entirely False; attention then gives them
    zero weights and a zero output, which is exactly a convolution's zero padding.

    >>> shift_mask(3, 1).astype(int).tolist()
    [[0, 1, 0], [0, 0, 1], [0, 0, 0]]
    >>> shift_mask(3, 1.5)
    Traceback (most recent call last):
    ...
    TypeError: offset must be an integer, got 1.5
    """
    n = check_positive_int(n, "n")
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
        raise TypeError(f"offset must be an integer, got {offset!r}")
    relative = np.arange(n)[None, :] - np.arange(n)[:, None]  # (n, n): j - i
    return relative == int(offset)  # (n, n)


def conv1d_as_attention(x, kernel, alpha: float | None = None) -> AttentionResult:
    """The convolution ``conv1d(x, kernel)`` computed by ``k`` attention heads, one per offset.

    Head ``d`` (offset ``d = -r .. r``) attends to key ``i + d`` from query ``i``, and its values are
    ``x @ kernel[d + r]``; summing the heads' outputs gives the convolution.

    - ``alpha=None`` (exact): head ``d`` uses the mask ``shift_mask(n, d)``, so each row has one
      allowed key and the softmax puts weight exactly 1 on it. The queries and keys are ``x`` itself,
      but any would do: with one allowed key per row, the scores do not matter.
    - ``alpha > 0`` (soft, no mask): head ``d`` takes the softmax of the position-only scores
      ``quadratic_relative_scores(n, d, alpha)``. Its weights concentrate on key ``i + d`` as ``alpha``
      grows, so the output tends to the convolution at every position whose window lies inside the
      sequence (at the borders the weight that zero padding would drop lands on the nearest keys).

    Returns ``(output, weights)``: output ``(n,)`` or ``(n, c_out)`` like :func:`conv1d`, and the
    heads' weights ``(k, n, n)``.

    >>> out, w = conv1d_as_attention(np.arange(4.0), np.array([0.0, 0.0, 1.0]))   # read the next value
    >>> out.tolist(), w.shape
    ([1.0, 2.0, 3.0, 0.0], (3, 4, 4))
    >>> soft, _ = conv1d_as_attention(np.arange(4.0), np.array([0.0, 0.0, 1.0]), alpha=20.0)
    >>> print(np.round(soft, 6))
    [1. 2. 3. 3.]
    """
    x, w, single = _checked_conv_inputs(x, kernel)  # (n, c_in), (k, c_in, c_out)
    n, k = x.shape[0], w.shape[0]
    r = k // 2
    values = np.einsum("nc,kco->kno", x, w)  # (k, n, c_out): head d's values x @ kernel[d + r]
    if alpha is None:
        masks = np.stack([shift_mask(n, d) for d in range(-r, r + 1)])  # (k, n, n)
        heads, weights = scaled_dot_product_attention(x[None], x[None], values, mask=masks)  # (k, n, c_out), (k, n, n)
    else:
        scores = np.stack([quadratic_relative_scores(n, d, alpha) for d in range(-r, r + 1)])  # (k, n, n)
        weights = softmax(scores, axis=-1)  # (k, n, n)
        heads = weights @ values  # (k, n, c_out)
    output = heads.sum(axis=0)  # (n, c_out): the heads added (concatenation, then W_O = stacked identities)
    return AttentionResult(output[:, 0] if single else output, weights)


def quadratic_relative_scores(n: int, offset: int, alpha: float) -> np.ndarray:
    """Scores ``(n, n)`` that depend only on relative position: ``-alpha * ((j - i) - offset) ** 2``.

    This is the "quadratic" relative positional encoding with which Cordonnier, Loukas and Jaggi
    (2020) let one head attend to one offset: the softmax of a row peaks at key ``i + offset`` and
    tends to a one-hot vector there as ``alpha`` grows (for rows where that key exists).

    >>> quadratic_relative_scores(3, 1, 2.0).tolist()
    [[-2.0, -0.0, -2.0], [-8.0, -2.0, -0.0], [-18.0, -8.0, -2.0]]
    >>> quadratic_relative_scores(3, 0, -1.0)
    Traceback (most recent call last):
    ...
    ValueError: alpha must be a positive finite number, got -1.0
    """
    n = check_positive_int(n, "n")
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
        raise TypeError(f"offset must be an integer, got {offset!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise TypeError(f"alpha must be a real number, got {alpha!r}")
    if not math.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"alpha must be a positive finite number, got {alpha!r}")
    relative = np.arange(n)[None, :] - np.arange(n)[:, None]  # (n, n): j - i
    return -float(alpha) * (relative - int(offset)).astype(float) ** 2  # (n, n)


# --- images --------------------------------------------------------------------------------------


def _checked_image(image) -> np.ndarray:
    img = as_float_array(image, "image")
    if img.ndim == 2:
        img = img[:, :, None]  # (H, W, 1)
    if img.ndim != 3 or 0 in img.shape:
        raise ValueError(
            f"image has shape {np.shape(image)}; expected (height, width) or (height, width, channels)"
        )
    return img


def image_to_patches(image, patch_size: int) -> np.ndarray:
    """Cut an image into non-overlapping square patches and flatten each: the tokens of a ViT.

    ``image`` is ``(H, W)`` or ``(H, W, C)``; ``H`` and ``W`` must be multiples of ``patch_size = p``.
    Returns ``(H/p * W/p, p * p * C)``: patches in row-major order (left to right, then top to
    bottom), each flattened row by row with the channels innermost.

    >>> image_to_patches(np.arange(16.0).reshape(4, 4), 2).tolist()
    [[0.0, 1.0, 4.0, 5.0], [2.0, 3.0, 6.0, 7.0], [8.0, 9.0, 12.0, 13.0], [10.0, 11.0, 14.0, 15.0]]
    >>> image_to_patches(np.zeros((6, 4)), 4)
    Traceback (most recent call last):
    ...
    ValueError: image has shape (6, 4); height 6 and width 4 must both be multiples of patch_size = 4
    """
    img = _checked_image(image)  # (H, W, C)
    p = check_positive_int(patch_size, "patch_size")
    height, width, channels = img.shape
    if height % p or width % p:
        raise ValueError(
            f"image has shape {np.shape(image)}; height {height} and width {width} must both be "
            f"multiples of patch_size = {p}"
        )
    grid = img.reshape(height // p, p, width // p, p, channels)  # (rows, p, cols, p, C)
    grid = grid.transpose(0, 2, 1, 3, 4)  # (rows, cols, p, p, C)
    return grid.reshape(-1, p * p * channels)  # (rows * cols, p * p * C)


def patches_to_image(patches, image_shape, patch_size: int) -> np.ndarray:
    """Inverse of :func:`image_to_patches`: put ``(n_patches, p * p * C)`` back into ``image_shape``.

    >>> image = np.arange(48.0).reshape(4, 4, 3)
    >>> bool(np.array_equal(patches_to_image(image_to_patches(image, 2), (4, 4, 3), 2), image))
    True
    >>> patches_to_image(np.zeros((3, 4)), (4, 4), 2)
    Traceback (most recent call last):
    ...
    ValueError: patches has shape (3, 4) but an image of shape (4, 4) cut into 2 x 2 patches gives (4, 4)
    """
    p = check_positive_int(patch_size, "patch_size")
    shape = check_shape(image_shape, "image_shape")
    if len(shape) not in (2, 3) or any(s < 1 for s in shape):
        raise ValueError(f"image_shape is {image_shape!r}; expected (height, width) or (height, width, channels)")
    height, width = shape[:2]
    channels = shape[2] if len(shape) == 3 else 1
    if height % p or width % p:
        raise ValueError(
            f"image_shape is {shape}; height and width must be multiples of patch_size = {p}"
        )
    tokens = as_float_array(patches, "patches")  # (n_patches, p * p * C)
    expected = ((height // p) * (width // p), p * p * channels)
    if tokens.shape != expected:
        raise ValueError(
            f"patches has shape {tokens.shape} but an image of shape {shape} cut into {p} x {p} "
            f"patches gives {expected}"
        )
    grid = tokens.reshape(height // p, width // p, p, p, channels)  # (rows, cols, p, p, C)
    image = grid.transpose(0, 2, 1, 3, 4).reshape(height, width, channels)  # (H, W, C)
    return image if len(shape) == 3 else image[:, :, 0]


def grid_local_mask(height: int, width: int, radius: int) -> np.ndarray:
    """Local attention on a ``height x width`` grid of tokens (pixels or patches) in row-major order.

    Token ``(r, c)`` may attend to token ``(r', c')`` when ``|r - r'| <= radius`` and
    ``|c - c'| <= radius``: a ``(2 radius + 1)``-wide square window, the 2-D analogue of
    :func:`attnbook.banded_mask`. Returns ``(height * width, height * width)``.

    >>> grid_local_mask(2, 3, 1).astype(int).tolist()[0]
    [1, 1, 0, 1, 1, 0]
    """
    height = check_positive_int(height, "height")
    width = check_positive_int(width, "width")
    radius = check_positive_int(radius, "radius", minimum=0)
    rows, cols = np.divmod(np.arange(height * width), width)  # (n,), (n,)
    near_rows = np.abs(rows[:, None] - rows[None, :]) <= radius  # (n, n)
    near_cols = np.abs(cols[:, None] - cols[None, :]) <= radius  # (n, n)
    return near_rows & near_cols  # (n, n)


# --- recurrence: how far does an input's influence reach? ---------------------------------------


def rnn_state_jacobians(x, w_x, w_h, b, source: int = 0, h_0=None) -> np.ndarray:
    """Jacobians ``d h_t / d x_source`` of the tanh RNN of :func:`attnbook.rnn_forward`, for every t.

    With rows as vectors, ``h_t = tanh(x_t W_x + h_{t-1} W_h + b)``, the chain rule gives
    ``J_source = D_source W_x^T`` and ``J_t = D_t W_h^T J_{t-1}`` with ``D_t = diag(1 - h_t**2)``.
    Returns ``(n, d_h, d_in)``; the Jacobians for ``t < source`` are 0 (the past cannot depend on
    the future). ``x`` is one sequence ``(n, d_in)``.

    >>> jac = rnn_state_jacobians(np.zeros((3, 1)), np.ones((1, 1)), 0.5 * np.ones((1, 1)), np.zeros(1))
    >>> jac[:, 0, 0].tolist()
    [1.0, 0.5, 0.25]
    >>> rnn_state_jacobians(np.zeros((3, 1)), np.ones((1, 1)), np.ones((1, 1)), np.zeros(1), source=3)
    Traceback (most recent call last):
    ...
    ValueError: source=3 is not a position of x, which has n = 3 positions
    """
    x = as_float_array(x, "x")  # (n, d_in)
    if x.ndim != 2:
        raise ValueError(f"x has shape {x.shape}; expected one sequence (n, d_in)")
    n = x.shape[0]
    if isinstance(source, bool) or not isinstance(source, (int, np.integer)):
        raise TypeError(f"source must be an integer, got {source!r}")
    if not 0 <= source < n:
        raise ValueError(f"source={source} is not a position of x, which has n = {n} positions")
    states = rnn_forward(x, w_x, w_h, b, h_0=h_0)  # (n, d_h); also validates the weights
    w_x = as_float_array(w_x, "w_x")  # (d_in, d_h)
    w_h = as_float_array(w_h, "w_h")  # (d_h, d_h)
    slopes = 1.0 - states**2  # (n, d_h): tanh'(u_t) = 1 - h_t^2
    jac = np.zeros((n, w_x.shape[1], x.shape[1]))  # (n, d_h, d_in)
    jac[source] = slopes[source][:, None] * w_x.T  # (d_h, d_in)
    for t in range(source + 1, n):
        jac[t] = slopes[t][:, None] * (w_h.T @ jac[t - 1])  # (d_h, d_h) @ (d_h, d_in) -> (d_h, d_in)
    return jac


# --- counting: cost and path length --------------------------------------------------------------


def attention_pair_count(n: int, window: int | None = None, causal: bool = False) -> int:
    """Number of (query, key) pairs that get a score: ``n**2`` for full attention, fewer with a mask.

    ``window=None``: full (``n**2``) or causal (``n (n + 1) / 2``) attention. With a ``window`` ``w``,
    the truncated attention of :func:`attnbook.banded_mask`: ``n (2w + 1) - w (w + 1)`` pairs, or
    ``n (w + 1) - w (w + 1) / 2`` when causal (for ``w < n``; a wider window is the full mask).
    Exact Python integers, so very long sequences do not overflow. Multiply by ``d_k`` for the
    multiply-adds of ``Q K^T``, or by the bytes per number for the memory of the score matrix.

    >>> attention_pair_count(1000), attention_pair_count(1000, window=50)
    (1000000, 98450)
    >>> attention_pair_count(4, window=1, causal=True)
    7
    """
    n = check_positive_int(n, "n")
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    if window is None:
        return n * (n + 1) // 2 if causal else n * n
    return banded_entry_count(n, window, causal=causal)


def steps_between(distance: int, architecture: str, reach: int | None = None) -> int:
    """Sequential operations that carry information ``distance`` positions, for one architecture.

    - ``"recurrent"``: the number of state-to-state steps (applications of ``W_h``), ``distance``;
    - ``"convolution"``: stacked layers whose kernel reaches ``reach`` positions to each side
      (``reach = (k - 1) / 2`` for a centred kernel of size ``k``): ``ceil(distance / reach)``;
    - ``"banded-attention"``: stacked truncated-attention layers of window ``reach``, the same count;
    - ``"self-attention"``: one layer, whatever the distance.

    Layer counts are at least 1 (an output always passes through one layer).

    >>> [steps_between(100, "recurrent"), steps_between(100, "convolution", reach=1),
    ...  steps_between(100, "banded-attention", reach=25), steps_between(100, "self-attention")]
    [100, 100, 4, 1]
    >>> steps_between(5, "convolution")
    Traceback (most recent call last):
    ...
    ValueError: architecture 'convolution' needs reach=, the number of positions one layer reaches to each side
    """
    distance = check_positive_int(distance, "distance", minimum=0)
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture must be one of {ARCHITECTURES}, got {architecture!r}")
    if architecture == "recurrent":
        return distance
    if architecture == "self-attention":
        return 1
    if reach is None:
        raise ValueError(
            f"architecture {architecture!r} needs reach=, the number of positions one layer reaches to each side"
        )
    reach = check_positive_int(reach, "reach")
    return max(1, -(-distance // reach))


# --- fitting a mixing matrix: assumptions versus data ---------------------------------------------


def fit_mixing_matrix(x, y, kernel_size: int | None = None, ridge: float = 0.0) -> np.ndarray:
    """Least-squares fit of a matrix ``M`` ``(n, n)`` with ``y_s ≈ M x_s`` for training pairs ``s``.

    ``x`` and ``y`` are ``(m, n)``: ``m`` one-channel sequences of length ``n`` and their targets.
    With ``kernel_size=None``, ``M`` is any matrix (``n**2`` numbers: every output may use every
    input, with its own weight per pair of positions). With an odd ``kernel_size`` ``k``, ``M`` is a
    convolution, ``conv1d_matrix(kernel, n)`` (``k`` numbers: local and shared across positions).
    ``ridge`` adds ``ridge * ||parameters||**2`` to the squared error; with ``ridge=0`` and too few
    examples, the solution of smallest norm is returned.

    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((20, 6))                                # (m, n)
    >>> y = x @ conv1d_matrix([0.5, 1.0, -0.5], 6).T                     # (m, n)
    >>> print(np.round(fit_mixing_matrix(x, y, kernel_size=3)[1, :3], 6))
    [ 0.5  1.  -0.5]
    """
    x = as_float_array(x, "x")  # (m, n)
    y = as_float_array(y, "y")  # (m, n)
    if x.ndim != 2 or y.shape != x.shape:
        raise ValueError(
            f"x has shape {x.shape} and y has shape {y.shape}; expected both (m, n): "
            "m training sequences of length n"
        )
    if isinstance(ridge, bool) or not isinstance(ridge, (int, float, np.integer, np.floating)):
        raise TypeError(f"ridge must be a real number, got {ridge!r}")
    if not math.isfinite(ridge) or ridge < 0:
        raise ValueError(f"ridge must be a non-negative finite number, got {ridge!r}")
    m, n = x.shape
    if kernel_size is None:
        design, target = x, y  # (m, n), (m, n): y = x M^T, one column of M^T per output position
    else:
        k = check_positive_int(kernel_size, "kernel_size")
        if k % 2 == 0:
            raise ValueError(f"kernel_size must be odd, got {k}")
        r = k // 2
        padded = np.pad(x, ((0, 0), (r, r)))  # (m, n + 2r)
        design = np.stack([padded[:, tap:tap + n] for tap in range(k)], axis=-1).reshape(m * n, k)  # (m n, k)
        target = y.reshape(m * n, 1)  # (m n, 1)
    if ridge > 0:
        gram = design.T @ design + ridge * np.eye(design.shape[1])  # (p, p)
        solution = np.linalg.solve(gram, design.T @ target)  # (p, n) or (p, 1)
    else:
        solution = np.linalg.lstsq(design, target, rcond=None)[0]  # (p, n) or (p, 1)
    if kernel_size is None:
        return solution.T  # (n, n)
    return conv1d_matrix(solution[:, 0], n)  # (n, n)
