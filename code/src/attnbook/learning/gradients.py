"""Backward passes: the gradients of softmax, attention, a linear layer and the cross-entropy loss.

Each backward pass returns ``dL/d(input)`` from ``dL/d(output)`` of a scalar loss ``L``, a vector-Jacobian
product, without building the Jacobian. ``grad_x`` (or ``dx``) is ``dL/dx``, shaped like ``x``.

>>> import numpy as np
>>> a = np.array([0.5, 0.5])                                   # (n,): softmax of equal scores
>>> print(softmax_backward(a, np.array([1.0, 0.0])))             # dL/ds for L = a_0
[ 0.25 -0.25]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..attention import AttentionGradients, check_scale
from ..masks import check_mask
from ..validation import as_bool_mask, as_float_array, broadcast_batch_shapes, check_axis, check_min_ndim

__all__ = [
    "AttentionGradients",
    "LinearGradients",
    "attention_backward",
    "cross_entropy",
    "cross_entropy_backward",
    "linear_backward",
    "score_gradient",
    "softmax_backward",
    "token_cross_entropy",
]


_SMALL_PRODUCT = 2**18  # multiply-adds per matrix product in linear_backward (see there)


class LinearGradients(NamedTuple):
    """Gradients of a scalar loss through ``y = x @ w``: ``dx, dw = ...``.

    Attributes
    ----------
    dx : ndarray
        ``(..., d_in)`` dL/dx, the shape of ``x``.
    dw : ndarray
        ``(d_in, d_out)`` dL/dw, the shape of ``w``, summed over the leading dimensions.

    Examples
    --------
    >>> linear_backward(np.ones((1, 2)), 2 * np.eye(2), np.ones((1, 2))).dx.tolist()
    [[2.0, 2.0]]
    """

    dx: np.ndarray  # (..., d_in), the shape of x
    dw: np.ndarray  # (d_in, d_out), the shape of w


def sum_to_shape(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Unchecked kernel: undo broadcasting, summing ``grad`` over the axes along which an input of ``shape`` was spread.

    >>> sum_to_shape(np.ones((2, 3, 4)), (1, 4)).tolist()
    [[6.0, 6.0, 6.0, 6.0]]
    """
    extra = grad.ndim - len(shape)
    summed = grad.sum(axis=tuple(range(extra))) if extra else grad  # (*shape, with 1s kept)
    kept_ones = tuple(i for i, size in enumerate(shape) if size == 1 and summed.shape[i] != 1)
    if kept_ones:
        summed = summed.sum(axis=kept_ones, keepdims=True)
    return summed.reshape(shape)


def sum_rows(g: np.ndarray) -> np.ndarray:
    """Unchecked kernel: the gradient of a bias or gain applied to every row, ``g`` ``(..., d)`` summed to ``(d,)``.

    >>> sum_rows(np.ones((2, 3, 4))).tolist()
    [6.0, 6.0, 6.0, 6.0]
    """
    return g.reshape(-1, g.shape[-1]).sum(axis=0)  # (d,)


def check_output_gradient(gradient, shape: tuple[int, ...], name: str) -> None:
    """Unchecked kernel: refuse an output gradient ``name`` that is not of the output's ``shape`` (a shape, not a scan).

    >>> check_output_gradient(np.ones((2, 3)), (2, 3), "dy")
    """
    if np.shape(gradient) != shape:
        raise ValueError(f"{name} has shape {np.shape(gradient)} but the output has shape {shape}; "
                         "expected the gradient of the loss with respect to the output, of its shape")


def _checked_weights(weights, name: str = "weights") -> np.ndarray:
    """A softmax output: non-negative, each slice summing to 1 (or to 0 when fully masked)."""
    a = as_float_array(weights, name)  # (..., n)
    if a.ndim == 0:
        raise ValueError(f"{name} is a scalar; expected a softmax output with at least one dimension")
    if np.any(a < 0):
        at = tuple(int(i) for i in np.argwhere(a < 0)[0])
        raise ValueError(
            f"{name} has the negative entry {float(a[at]):.6g} at index {at}; "
            "expected a softmax output (non-negative, slices summing to 1)"
        )
    return a


def _check_sums(a: np.ndarray, axis: int, name: str) -> None:
    sums = a.sum(axis=axis)  # (shape of a without axis)
    tolerance = 1e-3 if a.dtype == np.float16 else 1e-5
    bad = (np.abs(sums - 1) > tolerance) & (np.abs(sums) > tolerance)  # 0: a fully masked slice
    if np.any(bad):
        value = float(sums[tuple(np.argwhere(bad)[0])])
        raise ValueError(
            f"{name} has a slice along axis {axis} that sums to {value:.6g}; expected a softmax output "
            "whose slices sum to 1 (or to 0 when every position is masked)"
        )


def softmax_backward(weights, grad_weights, axis: int = -1) -> np.ndarray:
    r"""Vector-Jacobian product of softmax: ``dL/ds`` from ``a = softmax(s)`` and ``g = dL/da``.

    .. math:: \frac{\partial L}{\partial s} = a \odot \left(g - \sum_j g_j a_j\right)

    This is ``g J`` with the Jacobian ``J`` of :func:`attnbook.softmax_jacobian`, in ``O(n)`` instead of
    ``O(n^2)``. Positions with weight 0 get gradient 0; each slice of the result sums to 0.

    Parameters
    ----------
    weights : array_like
        ``(..., n, ...)`` the softmax output (non-negative; slices along ``axis`` sum to 1, or to 0
        for a fully masked slice).
    grad_weights : array_like
        The gradient ``dL/da``, same shape as ``weights``.
    axis : int
        The axis along which the softmax was taken.

    Returns
    -------
    ndarray
        ``dL/ds``, shaped like ``weights``.

    Examples
    --------
    >>> a = np.array([[0.8, 0.2]])                                   # (1, n)
    >>> print(softmax_backward(a, np.array([[1.0, 0.0]])))           # row sums to 0
    [[ 0.16 -0.16]]
    >>> softmax_backward(a, np.ones((1, 3)))
    Traceback (most recent call last):
    ...
    ValueError: grad_weights has shape (1, 3) but weights has shape (1, 2); they must be equal
    """
    a = _checked_weights(weights)  # (..., n, ...)
    g = as_float_array(grad_weights, "grad_weights")  # (..., n, ...)
    if g.shape != a.shape:
        raise ValueError(
            f"grad_weights has shape {g.shape} but weights has shape {a.shape}; they must be equal"
        )
    axis = check_axis(axis, a.ndim)
    _check_sums(a, axis, "weights")
    dtype = np.result_type(a, g)
    return _softmax_vjp(a.astype(dtype, copy=False), g.astype(dtype, copy=False), axis)


def _softmax_vjp(a: np.ndarray, g: np.ndarray, axis: int) -> np.ndarray:
    inner = np.sum(g * a, axis=axis, keepdims=True)  # (..., 1, ...): g . a, the weighted mean of g
    return a * (g - inner)  # (..., n, ...)


def attention_backward(q, k, v, weights, grad_output, mask=None, scale=None) -> AttentionGradients:
    r"""Gradients of a loss with respect to ``q``, ``k`` and ``v`` of scaled dot-product attention.

    .. math:: dV = A^\top dO, \quad dA = dO\, V^\top, \quad dS = \text{softmax-VJP}(dA), \quad
              dQ = \text{scale}\; dS\, K, \quad dK = \text{scale}\; dS^\top Q

    The forward pass was :func:`attnbook.scaled_dot_product_attention` with the same ``mask`` and
    ``scale``. An input broadcast over batch dimensions gets its gradient summed over them; masked
    pairs get none.

    Parameters
    ----------
    q, k, v
        The forward pass's inputs, ``(..., n_q, d_k)``, ``(..., n_k, d_k)``, ``(..., n_k, d_v)``.
    weights : array_like
        ``(..., n_q, n_k)`` the attention weights returned by the forward pass.
    grad_output : array_like
        ``(..., n_q, d_v)`` the gradient of the loss with respect to the output.
    mask, scale : optional
        As in the forward pass.

    Returns
    -------
    AttentionGradients
        ``(dq, dk, dv)``, each with the shape of its input.

    See Also
    --------
    attnbook.scaled_dot_product_attention

    Examples
    --------
    >>> from attnbook import scaled_dot_product_attention
    >>> q, k, v = np.eye(2), 2 * np.eye(2), np.eye(2)                  # (2, 2) each
    >>> out, w = scaled_dot_product_attention(q, k, v)
    >>> dq, dk, dv = attention_backward(q, k, v, w, np.array([[0.0, 1.0], [0.0, 0.0]]))  # L = o_12
    >>> print(np.round(dq, 4))
    [[-0.2225  0.2225]
     [ 0.      0.    ]]
    >>> attention_backward(q, k, v, w, np.ones((2, 3)))
    Traceback (most recent call last):
    ...
    ValueError: grad_output has shape (2, 3); expected the shape of the output, (..., n_q, d_v) = (..., 2, 2)
    """
    q = as_float_array(q, "q")  # (..., n_q, d_k)
    k = as_float_array(k, "k")  # (..., n_k, d_k)
    v = as_float_array(v, "v")  # (..., n_k, d_v)
    for name, array, layout in (("q", q, "(..., n_q, d_k)"), ("k", k, "(..., n_k, d_k)"),
                                ("v", v, "(..., n_k, d_v)")):
        check_min_ndim(array, name, 2, layout)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q has shape {q.shape} but k has shape {k.shape}; the last dimensions (d_k) must match")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k has shape {k.shape} but v has shape {v.shape}; k and v must have the same "
                         "number of positions n_k (second-to-last dimension)")
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    factor = check_scale(scale, q.shape[-1])
    a = _checked_weights(weights)  # (..., n_q, n_k)
    check_min_ndim(a, "weights", 2, "(..., n_q, n_k)")
    if a.shape[-2:] != (n_q, n_k):
        raise ValueError(f"weights has shape {a.shape} but q has shape {q.shape} and k has shape {k.shape}; "
                         f"expected (..., n_q, n_k) = (..., {n_q}, {n_k})")
    _check_sums(a, a.ndim - 1, "weights")
    g = as_float_array(grad_output, "grad_output")  # (..., n_q, d_v)
    if g.ndim < 2 or g.shape[-2:] != (n_q, d_v):
        raise ValueError(f"grad_output has shape {g.shape}; expected the shape of the output, "
                         f"(..., n_q, d_v) = (..., {n_q}, {d_v})")
    shapes = {"q": q.shape[:-2], "k": k.shape[:-2], "v": v.shape[:-2], "weights": a.shape[:-2],
              "grad_output": g.shape[:-2]}
    if mask is not None:
        mask = check_mask(mask, n_q, n_k)  # (..., n_q | 1, n_k | 1)
        shapes["mask"] = mask.shape[:-2]
    broadcast_batch_shapes(shapes)
    dtype = np.result_type(q, k, v, a, g, np.float32)
    q, k, v, a, g = (x.astype(dtype, copy=False) for x in (q, k, v, a, g))
    if mask is not None and np.any(np.where(mask, 0, a)):
        raise ValueError("weights has a non-zero entry where mask is False; pass the weights that the "
                         "forward pass computed with this mask")
    return backpropagate(q, k, v, a, g, mask, factor)[0]


def backpropagate(q, k, v, a, g, mask, factor) -> tuple[AttentionGradients, np.ndarray]:
    """Unchecked kernel of :func:`attention_backward`; also returns dL/dS, the gradient of the scaled scores.

    >>> a = np.full((1, 2), 0.5)
    >>> grads, ds = backpropagate(np.eye(2)[:1], np.eye(2), np.eye(2), a, np.array([[0.0, 1.0]]), None, 1.0)
    >>> print(ds)
    [[-0.25  0.25]]
    """
    dv = np.swapaxes(a, -1, -2) @ g  # (..., n_k, d_v): dV = A^T dO
    ds = _score_gradient(v, a, g, mask)  # (..., n_q, n_k): dL/dS for the scaled scores S
    d_raw = ds * np.asarray(factor, dtype=ds.dtype)  # (..., n_q, n_k): d(q k^T) = scale * dS
    dq = d_raw @ k  # (..., n_q, d_k): dQ = scale * dS K
    dk = np.swapaxes(d_raw, -1, -2) @ q  # (..., n_k, d_k): dK = scale * dS^T Q
    grads = AttentionGradients(sum_to_shape(dq, q.shape), sum_to_shape(dk, k.shape),
                               sum_to_shape(dv, v.shape))
    return grads, ds


def _score_gradient(v: np.ndarray, a: np.ndarray, g: np.ndarray, mask) -> np.ndarray:
    da = g @ np.swapaxes(v, -1, -2)  # (..., n_q, n_k): dA = dO V^T
    full = np.broadcast_shapes(a.shape, da.shape)  # (..., n_q, n_k) with every batch dimension
    ds = _softmax_vjp(np.broadcast_to(a, full), np.broadcast_to(da, full), -1)  # (..., n_q, n_k)
    if mask is not None:
        ds = np.where(mask, ds, 0)  # (..., n_q, n_k): a masked score never reaches the loss
    return ds


def score_gradient(v, weights, grad_output, mask=None) -> np.ndarray:
    r"""The gradient that reaches the scaled scores ``S``: ``dS = softmax-VJP(A, dO V^T)``.

    .. math:: dS_{ij} = a_{ij} \left(g_{ij} - \sum_l a_{il} g_{il}\right), \quad g = dO\, V^\top

    The middle of :func:`attention_backward`: a key that gets almost no weight gets almost no gradient.

    Parameters
    ----------
    v, weights, grad_output, mask
        As in :func:`attention_backward`.

    Returns
    -------
    ndarray
        ``(..., n_q, n_k)``, the broadcast shape.

    Examples
    --------
    >>> a = np.array([[0.5, 0.5]])                                   # (n_q, n_k)
    >>> print(score_gradient(np.eye(2), a, np.array([[0.0, 1.0]])))  # L = o_12
    [[-0.25  0.25]]
    """
    v = as_float_array(v, "v")  # (..., n_k, d_v)
    a = _checked_weights(weights)  # (..., n_q, n_k)
    g = as_float_array(grad_output, "grad_output")  # (..., n_q, d_v)
    check_min_ndim(v, "v", 2, "(..., n_k, d_v)")
    check_min_ndim(a, "weights", 2, "(..., n_q, n_k)")
    if a.shape[-1] != v.shape[-2]:
        raise ValueError(f"weights has shape {a.shape} but v has shape {v.shape}; "
                         "weights needs one column per row of v (n_k)")
    if g.ndim < 2 or g.shape[-2:] != (a.shape[-2], v.shape[-1]):
        raise ValueError(f"grad_output has shape {g.shape}; expected (..., n_q, d_v) = "
                         f"(..., {a.shape[-2]}, {v.shape[-1]})")
    _check_sums(a, a.ndim - 1, "weights")
    mask = None if mask is None else as_bool_mask(mask)  # (..., n_q | 1, n_k | 1)
    return _score_gradient(v, a, g, mask)


def linear_backward(x, w, grad_output) -> LinearGradients:
    r"""Gradients through ``y = x @ w``: ``dx = dy w^T`` and ``dw = x^T dy`` summed over every row.

    .. math:: dX = dY\, W^\top, \qquad dW = \sum_{\text{rows}} X^\top dY

    Parameters
    ----------
    x, w, grad_output : array_like
        ``(..., d_in)``, ``(d_in, d_out)``, ``(..., d_out)``.

    Returns
    -------
    LinearGradients
        ``(dx, dw)``.

    Examples
    --------
    >>> dx, dw = linear_backward(np.array([[1.0, 2.0]]), np.eye(2), np.array([[0.5, -1.0]]))
    >>> print(dx, dw.tolist())
    [[ 0.5 -1. ]] [[0.5, -1.0], [1.0, -2.0]]
    """
    x = as_float_array(x, "x")  # (..., d_in)
    w = as_float_array(w, "w")  # (d_in, d_out)
    g = as_float_array(grad_output, "grad_output")  # (..., d_out)
    check_min_ndim(x, "x", 1, "(..., d_in)")
    if w.ndim != 2 or w.shape[0] != x.shape[-1]:
        raise ValueError(f"x has shape {x.shape} but w has shape {w.shape}; expected w of shape "
                         f"(d_in, d_out) with d_in = {x.shape[-1]}")
    if g.shape != x.shape[:-1] + (w.shape[1],):
        raise ValueError(f"grad_output has shape {g.shape}; x @ w has shape {x.shape[:-1] + (w.shape[1],)}")
    return linear_grads(x, w, g)


def linear_grads(x: np.ndarray, w: np.ndarray, g: np.ndarray) -> LinearGradients:
    """Unchecked kernel of :func:`linear_backward`.

    >>> linear_grads(np.ones((1, 2)), np.eye(2), np.ones((1, 2))).dw.tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    dx = g @ w.T  # (..., d_in)
    rows_x = x.reshape(-1, x.shape[-1])  # (rows, d_in): every row of every batch element
    rows_g = g.reshape(-1, g.shape[-1])  # (rows, d_out)
    # dw = rows_x^T rows_g, accumulated over blocks of rows. The blocks keep each product below the
    # size at which OpenBLAS starts extra threads, which on a busy machine cost more than they save.
    block = max(1, _SMALL_PRODUCT // max(1, w.shape[0] * w.shape[1]))
    dw = np.zeros(w.shape, dtype=np.result_type(x, g))  # (d_in, d_out)
    for start in range(0, rows_x.shape[0], block):
        dw += rows_x[start:start + block].T @ rows_g[start:start + block]  # (d_in, d_out)
    return LinearGradients(dx, dw)


def _checked_logits_targets(logits, targets) -> tuple[np.ndarray, np.ndarray]:
    z = as_float_array(logits, "logits")  # (..., n_classes)
    check_min_ndim(z, "logits", 1, "(..., n_classes)")
    t = np.asarray(targets)  # (...)
    if t.dtype.kind not in "iu":
        raise TypeError(f"targets has dtype {t.dtype}; expected integer class indices")
    if t.shape != z.shape[:-1]:
        raise ValueError(f"targets has shape {t.shape} but logits has shape {z.shape}; "
                         f"expected targets of shape {z.shape[:-1]} (one class index per row)")
    if t.size == 0:
        raise ValueError("targets is empty; the mean loss of no examples is undefined")
    if np.any((t < 0) | (t >= z.shape[-1])):
        bad = t[(t < 0) | (t >= z.shape[-1])].flat[0]
        raise ValueError(f"targets contains the class {int(bad)}, outside 0 .. {z.shape[-1] - 1}")
    return z, t


def log_softmax(z: np.ndarray) -> np.ndarray:
    r"""Unchecked kernel: :math:`\log \operatorname{softmax}(z)_i = z_i - m - \log \sum_j e^{z_j - m}`, ``m = max z``.

    Entries at ``-inf`` stay at ``-inf`` (probability 0); each row needs one finite entry.

    >>> log_softmax(np.array([[1000.0, 1000.0, -np.inf]])).round(4).tolist()
    [[-0.6931, -0.6931, -inf]]
    """
    shifted = z - z.max(axis=-1, keepdims=True)  # (..., n_classes), every entry <= 0
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))  # (..., n_classes)


def cross_entropy(logits, targets) -> float:
    r"""Mean cross-entropy ``-log softmax(logits)[target]`` over all rows, computed stably.

    .. math:: L = -\frac{1}{N} \sum_r \log \operatorname{softmax}(z_r)_{t_r}

    Parameters
    ----------
    logits, targets : array_like
        ``(..., n_classes)`` scores; ``(...)`` int, one class per row.

    Returns
    -------
    float
        The mean loss.

    Examples
    --------
    >>> round(cross_entropy(np.zeros((2, 4)), np.array([0, 3])), 6) == round(float(np.log(4)), 6)
    True
    >>> cross_entropy(np.zeros((2, 4)), np.array([0, 4]))
    Traceback (most recent call last):
    ...
    ValueError: targets contains the class 4, outside 0 .. 3
    """
    return entropy(*_checked_logits_targets(logits, targets))


def entropy(z: np.ndarray, t: np.ndarray) -> float:
    """Unchecked kernel of :func:`cross_entropy`.

    >>> round(entropy(np.zeros((1, 2)), np.array([0])), 4)
    0.6931
    """
    log_p = log_softmax(z)  # (..., n_classes)
    picked = np.take_along_axis(log_p, t[..., None], axis=-1)  # (..., 1)
    return float(-picked.mean())


def cross_entropy_backward(logits, targets) -> np.ndarray:
    r"""Gradient of :func:`cross_entropy` with respect to ``logits``: ``(softmax(z) - onehot(t)) / N``.

    .. math:: \frac{\partial L}{\partial z_r} = \frac{\operatorname{softmax}(z_r) - e_{t_r}}{N}

    ``N`` is the number of rows, because the loss is their mean.

    Parameters
    ----------
    logits, targets
        As in :func:`cross_entropy`.

    Returns
    -------
    ndarray
        ``(..., n_classes)``.

    Examples
    --------
    >>> print(cross_entropy_backward(np.zeros((1, 4)), np.array([2])))
    [[ 0.25  0.25 -0.75  0.25]]
    """
    return entropy_grads(*_checked_logits_targets(logits, targets))


def entropy_grads(z: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Unchecked kernel of :func:`cross_entropy_backward`.

    >>> entropy_grads(np.zeros((1, 2)), np.array([0])).tolist()
    [[-0.5, 0.5]]
    """
    p = np.exp(log_softmax(z))  # (..., n_classes)
    np.put_along_axis(p, t[..., None], np.take_along_axis(p, t[..., None], axis=-1) - 1, axis=-1)
    return p / t.size  # (..., n_classes)


def token_cross_entropy(logits, targets, mask=None, label_smoothing: float = 0.0) -> tuple:
    r"""Mean cross-entropy of next-token predictions over the positions ``mask`` keeps, and its gradient.

    .. math:: L = \frac{1}{|M|} \sum_{r \in M} \Bigl(-(1 - \varepsilon) \log p_{r, t_r}
              - \frac{\varepsilon}{V} \sum_{j=1}^{V} \log p_{r j}\Bigr), \qquad
              \frac{\partial L}{\partial z_r} = \frac{p_r - q_r}{|M|}, \quad
              q_r = (1 - \varepsilon)\, e_{t_r} + \frac{\varepsilon}{V}

    with :math:`p_r = \operatorname{softmax}(z_r)` and :math:`M` the positions where ``mask`` is True.
    :math:`q_r` is label smoothing (Szegedy et al., 2016), as PyTorch's ``F.cross_entropy(...,
    ignore_index=..., label_smoothing=eps)``; the targets of positions left out by ``mask`` are ignored.

    Parameters
    ----------
    logits, targets
        As in :func:`cross_entropy`, ``(..., V)`` and ``(...)``.
    mask : array_like of bool, optional
        ``(...)``, True where a position counts (False for padding); default every position.
    label_smoothing : float
        ``eps`` in ``[0, 1)``; 0 is the plain cross-entropy.

    Returns
    -------
    tuple
        ``(loss, dlogits)``: the mean loss as a float and ``dL/dlogits`` ``(..., V)``, zero at the
        positions left out.

    Examples
    --------
    >>> loss, dlogits = token_cross_entropy(np.zeros((2, 4)), np.array([1, 3]), mask=np.array([True, False]))
    >>> round(loss, 4), dlogits.tolist()
    (1.3863, [[0.25, -0.75, 0.25, 0.25], [0.0, 0.0, 0.0, 0.0]])
    >>> round(token_cross_entropy(np.array([[0.0, 0.0]]), np.array([0]), label_smoothing=0.2)[0], 4)
    0.6931
    >>> token_cross_entropy(np.zeros((2, 4)), np.array([1, 3]), mask=np.array([False, False]))
    Traceback (most recent call last):
    ...
    ValueError: mask is False everywhere; the mean loss of no positions is undefined
    """
    z = as_float_array(logits, "logits")  # (..., V)
    check_min_ndim(z, "logits", 1, "(..., V)")
    t = np.asarray(targets)  # (...)
    if t.dtype.kind not in "iu":
        raise TypeError(f"targets has dtype {t.dtype}; expected integer class indices")
    if t.shape != z.shape[:-1]:
        raise ValueError(f"targets has shape {t.shape} but logits has shape {z.shape}; "
                         f"expected targets of shape {z.shape[:-1]} (one class index per position)")
    if mask is None:
        keep = np.ones(t.shape, dtype=bool)  # (...)
    else:
        keep = as_bool_mask(mask)  # (...)
        if keep.shape != t.shape:
            raise ValueError(f"mask has shape {keep.shape} but targets has shape {t.shape}; they must be equal")
    if not keep.any():
        raise ValueError("mask is False everywhere; the mean loss of no positions is undefined")
    outside = keep & ((t < 0) | (t >= z.shape[-1]))  # (...)
    if outside.any():
        raise ValueError(f"targets contains the class {int(t[outside].flat[0])}, outside 0 .. {z.shape[-1] - 1}, "
                         "at a position mask keeps")
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)) \
            or not 0 <= label_smoothing < 1:
        raise ValueError(f"label_smoothing must be a number in [0, 1), got {label_smoothing!r}")
    return token_entropy(z, t, keep, float(label_smoothing))


def token_entropy(z: np.ndarray, t: np.ndarray, keep: np.ndarray, smoothing: float = 0.0) -> tuple:
    """Unchecked kernel of :func:`token_cross_entropy`; ``keep`` is a boolean array of the shape of ``t``.

    >>> loss, dz = token_entropy(np.zeros((1, 2)), np.array([0]), np.array([True]))
    >>> round(loss, 4), dz.tolist()
    (0.6931, [[-0.5, 0.5]])
    """
    n_kept, n_classes = int(keep.sum()), z.shape[-1]
    t = np.where(keep, t, 0)  # (...): any class at a position left out
    log_p = log_softmax(z)  # (..., V)
    picked = np.take_along_axis(log_p, t[..., None], axis=-1)[..., 0]  # (...): log p of the target
    per_position = -(1 - smoothing) * picked - smoothing * log_p.mean(axis=-1)  # (...)
    loss = float(np.sum(np.where(keep, per_position, 0), dtype=np.float64) / n_kept)
    q = np.full_like(log_p, smoothing / n_classes)  # (..., V): the smoothed target distribution
    np.put_along_axis(q, t[..., None], 1 - smoothing + smoothing / n_classes, axis=-1)
    dz = np.where(keep[..., None], (np.exp(log_p) - q) / n_kept, 0).astype(z.dtype, copy=False)  # (..., V)
    return loss, dz
