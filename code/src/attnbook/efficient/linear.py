"""Linear attention (Katharopoulos et al., 2020): a kernel feature map in place of the softmax.

:func:`linear_attention` in parallel, :func:`linear_attention_recurrent` as a recurrent network; what the
weights can be: :func:`linear_attention_weights` (rank at most ``d_k``), :func:`linear_weight_ceiling`.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> q, k, v = rng.standard_normal((3, 6, 2))                    # each (n, d)
>>> parallel = linear_attention(q, k, v, causal=True)
>>> recurrent = linear_attention_recurrent(q, k, v)
>>> bool(np.allclose(parallel, recurrent.outputs)), recurrent.state.shape
(True, (2, 2))
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..attention import check_qkv
from ..masks import check_causal
from ..validation import as_float_array, broadcast_batch_shapes, check_min_ndim

__all__ = [
    "LinearRecurrence",
    "elu_feature_map",
    "linear_attention",
    "linear_attention_recurrent",
    "linear_attention_weights",
    "linear_weight_ceiling",
]


class LinearRecurrence(NamedTuple):
    """Outputs of causal linear attention run as a recurrent network, and its final state.

    Attributes
    ----------
    outputs : ndarray
        ``(..., n, d_v)`` the output of every step.
    state : ndarray
        ``(..., d_k, d_v)`` ``S_n = sum_j phi(k_j)^T v_j`` after the last step.
    normaliser : ndarray
        ``(..., d_k)`` ``z_n = sum_j phi(k_j)`` after the last step.

    Examples
    --------
    >>> run = linear_attention_recurrent(np.zeros((3, 2)), np.zeros((3, 2)), np.ones((3, 1)))
    >>> run.state.tolist(), run.normaliser.tolist()                   # phi(0) = 1: three tokens counted
    ([[3.0], [3.0]], [3.0, 3.0])
    """

    outputs: np.ndarray  # (..., n, d_v)
    state: np.ndarray  # (..., d_k, d_v)
    normaliser: np.ndarray  # (..., d_k)


def elu_feature_map(x) -> np.ndarray:
    r"""The feature map of Katharopoulos et al.: ``elu(x) + 1``, entrywise and always positive.

    .. math:: \phi(x) = \operatorname{elu}(x) + 1 = \begin{cases} x + 1 & x > 0 \\ e^{x} & x \le 0 \end{cases}

    Parameters
    ----------
    x : array_like
        Any shape.

    Returns
    -------
    ndarray
        ``phi(x)``, shaped like ``x``.

    Examples
    --------
    >>> print(elu_feature_map([-1.0, 0.0, 2.0]).round(4))
    [0.3679 1.     3.    ]
    """
    return features(as_float_array(x, "x"))


def features(x: np.ndarray) -> np.ndarray:
    """Unchecked kernel of :func:`elu_feature_map`.

    >>> features(np.array([0.5])).tolist()
    [1.5]
    """
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))  # (same shape as x)


def _checked(q, k, v=None):
    arrays = check_qkv(q, k) if v is None else check_qkv(q, k, v)
    names = ("q", "k", "v")
    broadcast_batch_shapes({name: a.shape[:-2] for name, a in zip(names, arrays)})
    return arrays


def _causal(n_q: int, n_k: int) -> np.ndarray:
    """Query i sees key j when j <= i + n_k - n_q (the package's causal mask)."""
    return np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + (n_k - n_q)  # (n_q, n_k)


def linear_attention_weights(q, k, *, causal: bool = False) -> np.ndarray:
    r"""The weights that linear attention gives each key, ``(..., n_q, n_k)``: rows of a rank-``d_k`` matrix.

    .. math:: a_{ij} = \frac{\phi(q_i) \cdot \phi(k_j)}{\sum_{l} \phi(q_i) \cdot \phi(k_l)}

    (sums over the allowed keys ``l``). Linear attention never forms this matrix; it is here to
    study what the weights can be.

    Parameters
    ----------
    q, k, causal
        As in :func:`linear_attention`.

    Returns
    -------
    ndarray
        ``(..., n_q, n_k)``, non-negative rows summing to 1.

    Examples
    --------
    >>> print(linear_attention_weights(np.zeros((2, 1)), np.array([[0.0], [1.0]])).round(4))
    [[0.3333 0.6667]
     [0.3333 0.6667]]
    """
    q, k = _checked(q, k)
    causal = check_causal(causal, q.shape[-2], k.shape[-2])
    return weigh(q, k, causal)


def weigh(q: np.ndarray, k: np.ndarray, causal: bool) -> np.ndarray:
    """Unchecked kernel of :func:`linear_attention_weights`.

    >>> weigh(np.zeros((1, 1)), np.zeros((2, 1)), False).tolist()
    [[0.5, 0.5]]
    """
    similarity = features(q) @ np.swapaxes(features(k), -1, -2)  # (..., n_q, n_k), positive
    if causal:
        similarity = similarity * _causal(q.shape[-2], k.shape[-2])  # (..., n_q, n_k)
    return similarity / similarity.sum(axis=-1, keepdims=True)  # (..., n_q, n_k)


def linear_attention(q, k, v, *, causal: bool = False) -> np.ndarray:
    r"""Linear attention computed in parallel; returns the output ``(..., n_q, d_v)``.

    .. math:: o_i = \frac{\phi(q_i) \sum_{j} \phi(k_j)^\top v_j}{\phi(q_i) \sum_{j} \phi(k_j)^\top},
              \qquad \phi = \operatorname{elu} + 1

    Without the mask the sums are computed once, in ``O(n d_k d_v)``; with ``causal=True`` (query ``i``
    sees ``j <= i + n_k - n_q``) this parallel form builds the masked ``(n_q, n_k)`` products.

    Parameters
    ----------
    q, k, v : array_like
        As in :func:`attnbook.scaled_dot_product_attention`.
    causal : bool
        Apply the causal mask.

    Returns
    -------
    ndarray
        ``(..., n_q, d_v)``.

    Examples
    --------
    >>> print(linear_attention(np.zeros((1, 1)), np.array([[0.0], [1.0]]), np.array([[3.0], [0.0]])))
    [[1.]]
    """
    q, k, v = _checked(q, k, v)
    causal = check_causal(causal, q.shape[-2], k.shape[-2])
    if causal:
        return weigh(q, k, True) @ v  # (..., n_q, d_v)
    phi_q, phi_k = features(q), features(k)  # (..., n_q, d_k), (..., n_k, d_k)
    summary = np.swapaxes(phi_k, -1, -2) @ v  # (..., d_k, d_v): sum_j phi(k_j)^T v_j
    normaliser = phi_k.sum(axis=-2)[..., :, None]  # (..., d_k, 1): sum_j phi(k_j)
    return (phi_q @ summary) / (phi_q @ normaliser)  # (..., n_q, d_v)


def linear_attention_recurrent(q, k, v) -> LinearRecurrence:
    r"""Causal linear attention as a recurrent network: a state of fixed size updated once per token.

    .. math:: S_i = S_{i-1} + \phi(k_i)^\top v_i, \quad z_i = z_{i-1} + \phi(k_i), \quad
              o_i = \frac{\phi(q_i)\, S_i}{\phi(q_i) \cdot z_i}, \qquad S_0 = 0,\ z_0 = 0

    The state holds ``d_k (d_v + 1)`` numbers whatever the length; the outputs equal
    ``linear_attention(q, k, v, causal=True)``.

    Parameters
    ----------
    q, k, v : array_like
        As in :func:`linear_attention`, one query per key.

    Returns
    -------
    LinearRecurrence
        ``outputs`` ``(..., n, d_v)``, the final ``state`` ``(..., d_k, d_v)`` and ``normaliser`` ``(..., d_k)``.

    Examples
    --------
    >>> run = linear_attention_recurrent(np.zeros((2, 1)), np.zeros((2, 1)), np.array([[2.0], [0.0]]))
    >>> run.outputs.tolist()                                        # running means of the values
    [[2.0], [1.0]]
    """
    q, k, v = _checked(q, k, v)
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(f"q has {q.shape[-2]} positions and k has {k.shape[-2]}; the recurrent form "
                         "takes one query per key")
    return recur(q, k, v)


def recur(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> LinearRecurrence:
    """Unchecked kernel of :func:`linear_attention_recurrent`.

    >>> recur(np.zeros((1, 1)), np.zeros((1, 1)), np.ones((1, 1))).outputs.tolist()
    [[1.0]]
    """
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    n, d_k, d_v = q.shape[-2], q.shape[-1], v.shape[-1]
    phi_q, phi_k = features(q), features(k)  # (..., n, d_k) each
    state = np.zeros(batch + (d_k, d_v), dtype=q.dtype)  # (..., d_k, d_v): S
    normaliser = np.zeros(batch + (d_k,), dtype=q.dtype)  # (..., d_k): z
    outputs = np.empty(batch + (n, d_v), dtype=q.dtype)  # (..., n, d_v)
    for i in range(n):
        key, query = phi_k[..., i, :], phi_q[..., i, :]  # (..., d_k) each
        state = state + key[..., :, None] * v[..., i, None, :]  # (..., d_k, d_v)
        normaliser = normaliser + key  # (..., d_k)
        numerator = (query[..., None, :] @ state)[..., 0, :]  # (..., d_v)
        outputs[..., i, :] = numerator / np.sum(query * normaliser, axis=-1, keepdims=True)  # (..., d_v)
    return LinearRecurrence(outputs, state, normaliser)


def linear_weight_ceiling(k) -> np.ndarray:
    r"""For each key, the largest weight that linear attention can give it, over every possible query.

    .. math:: \sup_{q} a_j(q) = \max_c \frac{\phi(k_j)_c}{\sum_l \phi(k_l)_c}

    A ratio of two positive linear functions of ``phi(q)`` is largest along a coordinate axis (the
    supremum is approached, not reached); so at most ``d_k`` keys can get more than half of any
    query's attention.

    Parameters
    ----------
    k : array_like
        ``(..., n_k, d_k)`` the keys.

    Returns
    -------
    ndarray
        ``(..., n_k)`` the ceilings, in ``(0, 1]``.

    Examples
    --------
    >>> print(linear_weight_ceiling(np.array([[5.0, -5.0], [-5.0, 5.0], [0.0, 0.0]])).round(4))
    [0.8563 0.8563 0.1427]
    """
    k = as_float_array(k, "k")  # (..., n_k, d_k)
    check_min_ndim(k, "k", 2, "(..., n_k, d_k)")
    phi_k = features(k)  # (..., n_k, d_k)
    shares = phi_k / phi_k.sum(axis=-2, keepdims=True)  # (..., n_k, d_k): key j's share of coordinate c
    return shares.max(axis=-1)  # (..., n_k)
