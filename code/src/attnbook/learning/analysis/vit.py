"""What the trained Vision Transformer attends to: the ``[CLS]`` attention over the patches, attention rollout,
the learned positions' similarity by distance on the patch grid, and the confusion of the digits.

The figures of these analyses are :mod:`attnbook.figures.vit`.

>>> params, config, _ = load_vit()
>>> by_distance = similarity_by_distance(position_similarity(params), 4)
>>> bool(by_distance[0] > by_distance[-1])                         # neighbours are more alike
True
"""

from __future__ import annotations

import numpy as np

from ...validation import as_float_array, check_positive_int
from ..models.vit import ViTConfig, ViTParams, load_vit, vit_forward
from ..digits import load_digits_split

__all__ = ["attention_rollout", "cls_attention", "confusion_matrix", "grid_distances", "position_similarity",
           "similarity_by_distance"]


def cls_attention(params: ViTParams, images, config: ViTConfig) -> np.ndarray:
    r"""The weights the ``[CLS]`` token's query gives the 16 patches, in every layer and head.

    .. math:: a^{(l,h)}_j = \operatorname{softmax}_{j'}\Bigl(\frac{q^{(l,h)}_\text{CLS} \cdot k^{(l,h)}_{j'}}
              {\sqrt{d_\text{head}}}\Bigr)_j, \qquad j = 1, \dots, n_\text{patches}

    Row 0 of each attention map (the ``[CLS]`` query) without its column 0: the weight ``[CLS]`` gives
    itself is ``1 - a.sum(-1)``. Patch ``j`` (0-based here) sits in grid row ``j // grid``, column
    ``j % grid``.

    Parameters
    ----------
    params : ViTParams
        The parameters.
    images : array_like
        ``(n, 8, 8)`` grey levels 0 .. 16.
    config : ViTConfig
        The sizes.

    Returns
    -------
    ndarray
        ``(n, n_layers, n_heads, n_patches)``, each slice summing to at most 1.

    Examples
    --------
    >>> params, config, _ = load_vit()
    >>> split = load_digits_split(config.test_fraction, config.split_seed)
    >>> cls_attention(params, split.test_images[:2], config).shape
    (2, 2, 2, 16)
    """
    return vit_forward(params, images, config).attention[..., 0, 1:]  # (n, L, h, n_patches)


def attention_rollout(attention) -> np.ndarray:
    r"""Attention rollout (Abnar and Zuidema, 2020): how much each token's input flows into each output.

    .. math:: \hat A_l = \operatorname{rownorm}\Bigl(\tfrac12 \bar A_l + \tfrac12 I\Bigr), \qquad
              R = \hat A_L \hat A_{L-1} \cdots \hat A_1

    where :math:`\bar A_l` is layer ``l``'s attention averaged over its heads and the identity stands
    for the residual connection. Row 0 of ``R`` without its column 0 says how much of each patch the
    final ``[CLS]`` vector holds, through every layer.

    Parameters
    ----------
    attention : array_like
        ``(..., n_layers, n_heads, T, T)`` attention maps, first layer first (``vit_forward(...).attention``).

    Returns
    -------
    ndarray
        ``(..., T, T)`` the rollout; every row sums to 1.

    Examples
    --------
    >>> a = np.array([[[[0.0, 1.0], [0.0, 1.0]]]] * 2)             # (L, h, T, T): both layers copy token 1
    >>> attention_rollout(a).tolist()
    [[0.25, 0.75], [0.0, 1.0]]
    """
    a = as_float_array(attention, "attention")  # (..., L, h, T, T)
    if a.ndim < 4 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"attention has shape {a.shape}; expected (..., n_layers, n_heads, T, T)")
    n_tokens = a.shape[-1]
    mixed = 0.5 * a.mean(axis=-3) + 0.5 * np.eye(n_tokens)  # (..., L, T, T)
    mixed = mixed / mixed.sum(axis=-1, keepdims=True)  # (..., L, T, T)
    rollout = np.broadcast_to(np.eye(n_tokens), mixed.shape[:-3] + (n_tokens, n_tokens)).copy()  # (..., T, T)
    for layer in range(mixed.shape[-3]):
        rollout = mixed[..., layer, :, :] @ rollout  # (..., T, T)
    return rollout


def position_similarity(params: ViTParams) -> np.ndarray:
    r"""Cosine similarity between the learned position embeddings of every pair of patches.

    .. math:: S_{ij} = \frac{e_i \cdot e_j}{\lVert e_i \rVert\, \lVert e_j \rVert}, \qquad
              e_i = E_\text{pos}[1 + i]

    Parameters
    ----------
    params : ViTParams
        The parameters (the ``[CLS]`` row of the positions is left out).

    Returns
    -------
    ndarray
        ``(n_patches, n_patches)``, ones on the diagonal.

    Examples
    --------
    >>> params, _, _ = load_vit()
    >>> similarity = position_similarity(params)
    >>> similarity.shape, round(float(similarity[5, 5]), 6)
    ((16, 16), 1.0)
    """
    if not isinstance(params, ViTParams):
        raise TypeError(f"params must be ViTParams, got {type(params).__name__}")
    e = as_float_array(params.positions, "params.positions")[1:]  # (n_patches, d)
    unit = e / np.linalg.norm(e, axis=1, keepdims=True)  # (n_patches, d)
    return unit @ unit.T  # (n_patches, n_patches)


def grid_distances(grid: int) -> np.ndarray:
    r"""City-block distances between the cells of a ``grid x grid`` layout in row-major order.

    .. math:: D_{ij} = |r_i - r_j| + |c_i - c_j|, \qquad r_i = \lfloor i / g \rfloor,\ c_i = i \bmod g

    Parameters
    ----------
    grid : int
        Cells per side.

    Returns
    -------
    ndarray
        ``(grid ** 2, grid ** 2)`` int64.

    Examples
    --------
    >>> grid_distances(2).tolist()
    [[0, 1, 1, 2], [1, 0, 2, 1], [1, 2, 0, 1], [2, 1, 1, 0]]
    """
    grid = check_positive_int(grid, "grid")
    rows, cols = np.divmod(np.arange(grid * grid), grid)  # (g * g,), (g * g,)
    return np.abs(rows[:, None] - rows[None, :]) + np.abs(cols[:, None] - cols[None, :])  # (g * g, g * g)


def similarity_by_distance(similarity, grid: int) -> np.ndarray:
    r"""Mean similarity of the pairs of cells at each city-block distance on the grid.

    .. math:: m_k = \operatorname{mean}\{\, S_{ij} : D_{ij} = k \,\}, \qquad k = 1, \dots, 2(g - 1)

    Parameters
    ----------
    similarity : array_like
        ``(grid ** 2, grid ** 2)`` a similarity of cells, e.g. :func:`position_similarity`.
    grid : int
        Cells per side.

    Returns
    -------
    ndarray
        ``(2 * (grid - 1),)`` the mean at distances ``1, 2, ..., 2 (grid - 1)``.

    Examples
    --------
    >>> similarity = -grid_distances(2).astype(float)
    >>> similarity_by_distance(similarity, 2).tolist()
    [-1.0, -2.0]
    """
    grid = check_positive_int(grid, "grid")
    s = as_float_array(similarity, "similarity")  # (g * g, g * g)
    if s.shape != (grid * grid, grid * grid):
        raise ValueError(f"similarity has shape {s.shape}; a {grid} x {grid} grid needs {(grid * grid,) * 2}")
    distance = grid_distances(grid)  # (g * g, g * g)
    return np.array([s[distance == k].mean() for k in range(1, 2 * (grid - 1) + 1)])  # (2 (g - 1),)


def confusion_matrix(labels, predicted, n_classes: int = 10) -> np.ndarray:
    r"""Counts of (true class, predicted class) pairs; the diagonal holds the correct answers.

    .. math:: C_{jk} = \#\{\, i : y_i = j,\ \hat y_i = k \,\}

    Parameters
    ----------
    labels : array_like of int
        ``(n,)`` true classes.
    predicted : array_like of int
        ``(n,)`` predicted classes.
    n_classes : int, optional
        Number of classes; default 10.

    Returns
    -------
    ndarray
        ``(n_classes, n_classes)`` int64, rows the true class, columns the prediction.

    Examples
    --------
    >>> confusion_matrix([0, 1, 1], [0, 1, 0], n_classes=2).tolist()
    [[1, 0], [1, 1]]
    """
    n_classes = check_positive_int(n_classes, "n_classes")
    labels, predicted = np.asarray(labels), np.asarray(predicted)  # (n,), (n,)
    if labels.shape != predicted.shape or labels.ndim != 1:
        raise ValueError(f"labels has shape {labels.shape} and predicted {predicted.shape}; expected equal (n,)")
    for name, values in (("labels", labels), ("predicted", predicted)):
        if values.size and (values.dtype.kind not in "iu" or values.min() < 0 or values.max() >= n_classes):
            raise ValueError(f"{name} must be integers in 0 .. {n_classes - 1}")
    counts = np.zeros((n_classes, n_classes), dtype=np.int64)  # (K, K)
    np.add.at(counts, (labels, predicted), 1)
    return counts
