r"""Attention beyond text: convolution as attention, images as patches, and fitting a mixing matrix.

A 1-D convolution and the same convolution by attention heads (:func:`conv1d_as_attention`), images as
patches, a local grid window, least-squares fits of a mixing matrix; costs are in ``attnbook.measure.counts``.

Examples
--------
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

from ..attention import AttentionResult, scaled_dot_product_attention
from ..softmax import softmax
from ..validation import as_float_array, check_bool, check_positive_int, check_shape

__all__ = [
    "conv1d",
    "conv1d_as_attention",
    "conv1d_matrix",
    "fit_mixing_matrix",
    "grid_local_mask",
    "image_to_patches",
    "patches_to_image",
    "quadratic_relative_scores",
    "shift_mask",
]


# --- convolution ---------------------------------------------------------------------------------


def _checked_kernel_1d(kernel) -> np.ndarray:
    w = as_float_array(kernel, "kernel")  # (k,)
    if w.ndim != 1 or w.shape[0] % 2 == 0:
        raise ValueError(
            f"kernel has shape {w.shape}; expected an odd number of taps (k,), "
            "one weight per offset -(k-1)/2 .. (k-1)/2"
        )
    return w


def _checked_conv_inputs(x, kernel, causal: bool) -> tuple[np.ndarray, np.ndarray, bool]:
    """Return x as (..., n, c_in), kernel as (k, c_in, c_out), and whether the input was one channel."""
    x = as_float_array(x, "x")
    w = as_float_array(kernel, "kernel")
    single = x.ndim == 1 and w.ndim == 1
    if single:
        w = (w if causal else _checked_kernel_1d(w))[:, None, None]  # (k, 1, 1)
        x = x[:, None]  # (n, 1)
    elif x.ndim < 2 or w.ndim != 3:
        raise ValueError(
            f"x has shape {x.shape} and kernel has shape {w.shape}; expected x (n,) with kernel (k,), "
            "or x (..., n, c_in) with kernel (k, c_in, c_out)"
        )
    if w.shape[0] == 0 or w.shape[2] == 0:
        raise ValueError(f"kernel has shape {w.shape}; the number of taps k and c_out must be at least 1")
    if not causal and w.shape[0] % 2 == 0:
        raise ValueError(f"kernel has shape {w.shape}; the number of taps k = {w.shape[0]} must be odd "
                         "for a centred convolution")
    if w.shape[1] != x.shape[-1]:
        raise ValueError(
            f"x has shape {x.shape} but kernel has shape {w.shape}; kernel needs c_in = {x.shape[-1]} "
            "input channels (its second dimension)"
        )
    if x.shape[-2] == 0:
        raise ValueError(f"x has shape {x.shape}; a sequence needs at least one position")
    return x, w, single


def conv1d(x, kernel, bias=None, *, causal: bool = False, dilation: int = 1) -> np.ndarray:
    r"""1-D convolution with zero padding, centred or causal, with optional dilation.

    Centred (the default), with ``k = 2r + 1`` taps, as deep-learning libraries define it (no
    kernel flip, strictly a cross-correlation); causal, with any ``k``, looking only backwards:

    .. math::

        y_i = \sum_{d=-r}^{r} x_{i + d\delta}\, W_{d + r} + b, \qquad
        y_t^{causal} = \sum_{j=0}^{k-1} x_{t - j\delta}\, W_j + b,

    with ``x_s = 0`` outside the sequence, so the output has the length ``n`` of the input. A
    centred layer moves information at most ``r * dilation`` positions either way, a causal one at
    most ``(k - 1) * dilation`` positions forward.

    Parameters
    ----------
    x : array_like, shape (n,) or (..., n, c_in)
        One channel (with a kernel ``(k,)``), or a sequence of ``c_in``-vectors, possibly batched.
    kernel : array_like, shape (k,) or (k, c_in, c_out)
        One weight or one ``(c_in, c_out)`` matrix per tap; ``k`` odd unless ``causal``.
    bias : array_like, shape (c_out,), optional
        Added to every output position.
    causal : bool, optional
        Tap ``j`` looks ``j * dilation`` positions back (default False: centred taps).
    dilation : int, optional
        Spacing ``delta`` between the taps, at least 1. Default 1.

    Returns
    -------
    ndarray, shape (n,) or (..., n, c_out)
        The convolved sequence.

    Examples
    --------
    >>> conv1d(np.eye(3), np.ones((3, 3, 1)))[:, 0].tolist()               # each row sums its neighbours
    [2.0, 3.0, 2.0]
    >>> x = np.arange(4.0)                                                   # (n,)
    >>> conv1d(x, np.ones(2), causal=True).tolist()                          # y_t = x_t + x_{t-1}
    [0.0, 1.0, 3.0, 5.0]
    >>> conv1d(x, np.ones(2), causal=True, dilation=2).tolist()              # y_t = x_t + x_{t-2}
    [0.0, 1.0, 2.0, 4.0]
    >>> conv1d(np.ones(4), np.ones(2))
    Traceback (most recent call last):
    ...
    ValueError: kernel has shape (2,); expected an odd number of taps (k,), one weight per offset -(k-1)/2 .. (k-1)/2
    """
    causal = check_bool(causal, "causal")
    x, w, single = _checked_conv_inputs(x, kernel, causal)  # (..., n, c_in), (k, c_in, c_out)
    dilation = check_positive_int(dilation, "dilation")
    n, k = x.shape[-2], w.shape[0]
    offsets = [-j * dilation for j in range(k)] if causal else [(tap - k // 2) * dilation for tap in range(k)]
    y = np.zeros(x.shape[:-1] + (w.shape[2],), dtype=np.result_type(x, w))  # (..., n, c_out)
    for tap, offset in enumerate(offsets):  # y_i += x_{i + offset} W_tap where i + offset is inside
        if abs(offset) >= n:  # this tap sees only the zero padding
            continue
        if offset >= 0:
            y[..., : n - offset, :] += x[..., offset:, :] @ w[tap]  # (..., n - offset, c_out)
        else:
            y[..., -offset:, :] += x[..., : n + offset, :] @ w[tap]  # (..., n + offset, c_out)
    if bias is not None:
        b = as_float_array(bias, "bias")  # (c_out,)
        if b.shape != (w.shape[2],):
            raise ValueError(f"bias has shape {b.shape} but kernel has shape {w.shape}; "
                             f"expected bias ({w.shape[2]},)")
        y = y + b  # (..., n, c_out)
    return y[..., 0] if single else y


def conv1d_matrix(kernel, n: int) -> np.ndarray:
    r"""The ``(n, n)`` matrix ``C`` of a centred one-channel convolution: ``conv1d(x, kernel) == C @ x``.

    .. math:: C_{ij} = \begin{cases} w_{j - i + r} & |j - i| \le r \\ 0 & \text{otherwise} \end{cases}

    a banded Toeplitz matrix.

    Parameters
    ----------
    kernel : array_like, shape (k,)
        As in :func:`conv1d`, one channel, centred.
    n : int
        Length of the sequence, at least 1.

    Returns
    -------
    ndarray, shape (n, n)
        The convolution as a matrix.

    Examples
    --------
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
    r"""Mask ``(n, n)`` that lets query ``i`` attend to key ``i + offset`` only.

    .. math:: M_{ij} = [\, j - i = \text{offset} \,]

    Rows whose key falls outside are entirely False: a zero output, a convolution's zero padding.

    Parameters
    ----------
    n : int
        Length of the sequence, at least 1.
    offset : int
        Where each query looks, relative to itself.

    Returns
    -------
    ndarray of bool, shape (n, n)
        The mask, True where the query may attend.

    Examples
    --------
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
    r"""The centred convolution ``conv1d(x, kernel)`` computed by ``k`` attention heads, one per offset.

    Head ``d`` (offset ``d = -r .. r``) attends from query ``i`` to key ``i + d``, and its values
    are ``x W_{d + r}``; summing the heads' outputs gives the convolution:

    .. math:: \sum_{d=-r}^{r} \mathrm{softmax}(S_d)\, x W_{d + r} = \mathrm{conv1d}(x, W)
              \quad\text{when each row of } \mathrm{softmax}(S_d) \text{ is one-hot at } i + d.

    - ``alpha=None`` (exact): head ``d`` uses the mask ``shift_mask(n, d)``, so each row has one
      allowed key and the softmax puts weight exactly 1 on it. The queries and keys are ``x`` itself,
      but any would do: with one allowed key per row, the scores do not matter.
    - ``alpha > 0`` (soft, no mask): head ``d`` takes the softmax of the position-only scores
      ``quadratic_relative_scores(n, d, alpha)``. Its weights concentrate on key ``i + d`` as ``alpha``
      grows, so the output tends to the convolution at every position whose window lies inside the
      sequence (at the borders the weight that zero padding would drop lands on the nearest keys).

    Parameters
    ----------
    x : array_like, shape (n,) or (n, c_in)
        One sequence.
    kernel : array_like, shape (k,) or (k, c_in, c_out)
        An odd number of taps.
    alpha : float or None, optional
        ``None`` (default) for the exact masked heads, or the sharpness of the soft heads.

    Returns
    -------
    AttentionResult
        ``(output, weights)``: output ``(n,)`` or ``(n, c_out)`` like ``conv1d``, and the heads'
        weights ``(k, n, n)``.

    Examples
    --------
    >>> out, w = conv1d_as_attention(np.arange(4.0), np.array([0.0, 0.0, 1.0]))   # read the next value
    >>> out.tolist(), w.shape
    ([1.0, 2.0, 3.0, 0.0], (3, 4, 4))
    >>> soft, _ = conv1d_as_attention(np.arange(4.0), np.array([0.0, 0.0, 1.0]), alpha=20.0)
    >>> print(np.round(soft, 6))
    [1. 2. 3. 3.]
    """
    x, w, single = _checked_conv_inputs(x, kernel, causal=False)  # (n, c_in), (k, c_in, c_out)
    if x.ndim != 2:
        raise ValueError(f"x has shape {x.shape}; conv1d_as_attention takes one sequence (n,) or (n, c_in)")
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
    r"""Scores ``(n, n)`` that depend only on relative position, peaking at one offset.

    .. math:: S_{ij} = -\alpha \big((j - i) - \text{offset}\big)^2

    The "quadratic" relative encoding of Cordonnier, Loukas and Jaggi (2020).

    Parameters
    ----------
    n, offset
        As in :func:`shift_mask`.
    alpha : float
        Sharpness, positive and finite.

    Returns
    -------
    ndarray, shape (n, n)
        The scores.

    Examples
    --------
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
    r"""Cut an image into non-overlapping square patches and flatten each: the tokens of a ViT.

    An ``H x W`` image with ``C`` channels becomes

    .. math:: \frac{H}{p} \cdot \frac{W}{p} \text{ tokens of width } p^2 C,

    the patches in row-major order, each flattened row by row with the channels innermost.

    Parameters
    ----------
    image : array_like, shape (H, W) or (H, W, C)
        The image; ``H`` and ``W`` must be multiples of ``patch_size``.
    patch_size : int
        Side ``p`` of the square patches, at least 1.

    Returns
    -------
    ndarray, shape (H/p * W/p, p * p * C)
        One row per patch.

    Examples
    --------
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
    r"""Inverse of ``image_to_patches``: put the patches back into an image.

    .. math:: \mathrm{patches\_to\_image}(\mathrm{image\_to\_patches}(I, p), \mathrm{shape}(I), p) = I

    Parameters
    ----------
    patches : array_like, shape (H/p * W/p, p * p * C)
        What :func:`image_to_patches` returns.
    image_shape : tuple of int
        ``(H, W)`` or ``(H, W, C)``.
    patch_size : int
        As in :func:`image_to_patches`.

    Returns
    -------
    ndarray, shape image_shape
        The image.

    Examples
    --------
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
    r"""Local attention on a ``height x width`` grid of tokens (pixels or patches) in row-major order.

    .. math:: M_{(r, c), (r', c')} = [\, |r - r'| \le \rho \text{ and } |c - c'| \le \rho \,]

    a ``(2 radius + 1)``-wide square window, the 2-D analogue of ``attnbook.banded_mask``.

    Parameters
    ----------
    height, width : int
        Size of the grid, each at least 1.
    radius : int
        Reach ``rho`` of the window in each direction, at least 0.

    Returns
    -------
    ndarray of bool, shape (height * width, height * width)
        True where token ``(r, c)`` (row ``r * width + c``) may attend.

    Examples
    --------
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


# --- fitting a mixing matrix: assumptions versus data ---------------------------------------------


def fit_mixing_matrix(x, y, kernel_size: int | None = None, ridge: float = 0.0) -> np.ndarray:
    r"""Least-squares fit of a mixing matrix ``M`` ``(n, n)`` with ``y_s ≈ M x_s`` for training pairs ``s``.

    .. math:: \min_M \sum_s \lVert y_s - M x_s \rVert^2 + \lambda \lVert \theta \rVert^2

    over the parameters ``theta`` of ``M``: ``n**2`` numbers, or the ``k`` of ``conv1d_matrix(kernel, n)``.
    With ``ridge=0`` and too few examples, the solution of smallest norm is returned.

    Parameters
    ----------
    x, y : array_like, shape (m, n)
        ``m`` one-channel training sequences of length ``n`` and their targets.
    kernel_size : int or None, optional
        ``None`` (default) for a free matrix, or the odd width of a convolution.
    ridge : float, optional
        The penalty ``lambda``, at least 0. Default 0.

    Returns
    -------
    ndarray, shape (n, n)
        The fitted matrix.

    Examples
    --------
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
