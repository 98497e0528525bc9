"""Gradient checks: a backward pass against central finite differences, leaf by leaf of a parameter tree.

The error is :func:`relative_error`, relative above ``floor`` and absolute below, where round-off dominates.

>>> from attnbook import layer_norm
>>> from attnbook.learning.layers import layer_norm_vjp
>>> x, dy = np.array([[1.0, 2.0, 4.0]]), np.array([[0.5, -1.0, 2.0]])
>>> _, back = layer_norm_vjp(x, np.ones(3), np.zeros(3))
>>> errors = gradient_errors(lambda t: float(np.sum(layer_norm(*t) * dy)), (x, np.ones(3), np.zeros(3)),
...                          back(dy))
>>> max(errors.values()) < 1e-9
True
"""

from __future__ import annotations

import numpy as np

from ..measure.probes import numerical_jacobian
from .optim import map_tree, tree_leaves, tree_map
from .store import named_leaves

__all__ = ["gradient_errors", "relative_error"]


def relative_error(numeric, analytic, floor: float = 1e-2) -> float:
    r"""How far an analytic gradient is from its finite-difference estimate, 0 when equal.

    .. math:: e = \frac{\lVert f - g \rVert}{\max(\lVert f \rVert + \lVert g \rVert,\ \text{floor})}

    Parameters
    ----------
    numeric, analytic : array_like
        The finite-difference estimate ``f`` and the backward pass's gradient ``g``, of the same shape.
    floor : float, optional
        The denominator's least value: below it the error is absolute. Default ``1e-2``.

    Returns
    -------
    float
        The error; 1 when ``g`` and ``f`` are unrelated and of similar size.

    Examples
    --------
    >>> relative_error([1.0, 2.0], [1.0, 2.0 + 3e-9]) < 1e-9
    True
    >>> relative_error([1.0], [1.0, 2.0])
    Traceback (most recent call last):
    ...
    ValueError: analytic has shape (2,) but numeric has shape (1,)
    """
    f, g = np.asarray(numeric, dtype=float), np.asarray(analytic, dtype=float)
    if f.shape != g.shape:
        raise ValueError(f"analytic has shape {g.shape} but numeric has shape {f.shape}")
    return float(np.linalg.norm(f - g) / max(np.linalg.norm(f) + np.linalg.norm(g), floor))


def gradient_errors(loss, tree, grads, eps: float = 1e-5, floor: float = 1e-2) -> dict[str, float]:
    r"""The error of every leaf of ``grads`` against central differences of ``loss`` at ``tree``.

    .. math:: f_m = \frac{L(\theta + \varepsilon e_m) - L(\theta - \varepsilon e_m)}{2\varepsilon}, \qquad
              e_{\text{leaf}} = \frac{\lVert f - g \rVert}{\max(\lVert f \rVert + \lVert g \rVert,\ \text{floor})}

    Parameters
    ----------
    loss : callable
        Maps a tree of the structure of ``tree`` to a number; it must not modify its argument.
    tree : NamedTuple, tuple, list or ndarray
        The point: parameters and inputs, float64 for a meaningful check.
    grads : tree
        The backward pass's gradient of ``loss`` at ``tree``, of the same structure and shapes.
    eps : float, optional
        The step of the differences. Default ``1e-5``: truncation (``eps**2``) and round-off
        (``1e-16 / eps``) errors both near ``1e-10``.
    floor : float, optional
        See :func:`relative_error`. Default ``1e-2``.

    Returns
    -------
    dict of str to float
        The error of each leaf, by its dotted path (``"1.w_q"``; ``""`` for a bare array).

    Examples
    --------
    >>> errors = gradient_errors(lambda t: float(np.sum(t[0] * t[1])), (np.ones(2), np.full(2, 3.0)),
    ...                          (np.full(2, 3.0), np.ones(2)))
    >>> sorted(errors), max(errors.values()) < 1e-9
    (['0', '1'], True)
    """
    tree_map(lambda a, b: None, tree, grads)  # the same structure and leaf shapes, or an error naming where
    leaves = [np.asarray(leaf, dtype=float) for leaf in tree_leaves(tree)]
    errors = {}
    for index, ((path, _), grad) in enumerate(zip(named_leaves(tree), tree_leaves(grads))):
        def loss_of_leaf(x, index=index):
            counter = iter(range(len(leaves)))
            return loss(map_tree(lambda leaf: x if next(counter) == index else leaf, tree))

        errors[path] = relative_error(numerical_jacobian(loss_of_leaf, leaves[index], eps=eps), grad, floor)
    return errors
