"""The figures of the Vision Transformer's analyses (:mod:`attnbook.learning.analysis.vit`): attention over a digit's
patches, and the similarity of the learned position embeddings laid out on the patch grid.

>>> import matplotlib
>>> matplotlib.use("Agg")
>>> fig = plot_position_similarity(np.eye(4), 2)
>>> len(fig.axes)
5
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from ..learning.digits import GREY_LEVELS
from ..validation import as_float_array, check_positive_int
from .plotting import COLOUR_MAP

__all__ = ["plot_cls_attention", "plot_position_similarity"]


# --- figures ----------------------------------------------------------------------------------------------


def plot_cls_attention(image, maps, titles=None, *, vmax=None):
    """Draw a digit, then each attention map over its patches with the digit's outline on top; return the figure.

    .. math:: \\text{map}_j \\ \\text{fills patch } j \\text{ (grid row } \\lfloor j / g \\rfloor,
              \\text{ column } j \\bmod g)

    The maps use the package's colour-blind-safe ``COLOUR_MAP`` (:mod:`attnbook.figures.plotting`), all on one
    scale, from 0 to the largest weight shown; the digit's ink (grey level 8 of 16) is outlined in white.

    Parameters
    ----------
    image : array_like
        ``(8, 8)`` grey levels 0 .. 16.
    maps : array_like
        ``(n_maps, n_patches)`` weights over the patches, e.g. ``cls_attention(...)[i, -1]`` (one row
        per head) or a rollout row.
    titles : sequence of str, optional
        One title per map; default "map 1", "map 2", ...
    vmax : float, optional
        Top of the colour scale; default the largest weight.

    Returns
    -------
    matplotlib.figure.Figure
        One panel for the digit and one per map, with a colour bar.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> fig = plot_cls_attention(np.eye(8) * 16, np.full((2, 16), 1 / 16), titles=["head 1", "head 2"])
    >>> [ax.get_title() for ax in fig.axes[:3]]
    ['digit', 'head 1', 'head 2']
    """
    pixels = as_float_array(image, "image")  # (H, W)
    values = as_float_array(maps, "maps")  # (n_maps, n_patches)
    if pixels.ndim != 2 or pixels.shape[0] != pixels.shape[1]:
        raise ValueError(f"image has shape {pixels.shape}; expected a square (H, H) image")
    if values.ndim != 2:
        raise ValueError(f"maps has shape {values.shape}; expected (n_maps, n_patches)")
    grid = math.isqrt(values.shape[1])
    side = pixels.shape[0]
    if grid * grid != values.shape[1] or side % grid:
        raise ValueError(f"maps has {values.shape[1]} patches per map; expected a square grid whose side "
                         f"divides the image side {side}")
    titles = [f"map {i + 1}" for i in range(values.shape[0])] if titles is None else [str(t) for t in titles]
    if len(titles) != values.shape[0]:
        raise ValueError(f"titles has {len(titles)} entries but maps has {values.shape[0]} rows")
    top = float(values.max()) if vmax is None else float(vmax)
    n_panels = values.shape[0] + 1
    fig, axes = plt.subplots(1, n_panels, figsize=(1.9 * n_panels + 0.6, 2.2))
    extent = (-0.5, side - 0.5, side - 0.5, -0.5)  # pixel centres at integer coordinates
    axes[0].imshow(pixels, cmap="gray_r", vmin=0, vmax=GREY_LEVELS)
    axes[0].set_title("digit")
    image_ = None
    for ax, row, title in zip(axes[1:], values, titles):
        image_ = ax.imshow(row.reshape(grid, grid), cmap=COLOUR_MAP, vmin=0, vmax=top if top > 0 else 1,
                           extent=extent, interpolation="nearest")  # each patch one block
        ax.contour(np.arange(side), np.arange(side), pixels, levels=[GREY_LEVELS / 2], colors="white",
                   linewidths=1.2)
        ax.set_title(title)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(image_, ax=list(axes[1:]), fraction=0.046, pad=0.04, label="attention weight")
    return fig


def plot_position_similarity(similarity, grid: int):
    """For each patch, the similarity of its position embedding to every other patch's, laid out on the grid.

    .. math:: \\text{panel } (r, c) \\text{ cell } (r', c') = S_{r g + c,\\ r' g + c'}

    The figure of Dosovitskiy et al. (2021, figure 7): if the embeddings learned the grid, each panel
    is bright around its own cell. Colours are ``COLOUR_MAP`` on ``[-1, 1]``.

    Parameters
    ----------
    similarity : array_like
        ``(grid ** 2, grid ** 2)`` e.g. :func:`position_similarity`.
    grid : int
        Patches per side.

    Returns
    -------
    matplotlib.figure.Figure
        ``grid x grid`` panels and a colour bar.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> fig = plot_position_similarity(np.eye(4), 2)
    >>> len(fig.axes)
    5
    """
    grid = check_positive_int(grid, "grid")
    s = as_float_array(similarity, "similarity")  # (g * g, g * g)
    if s.shape != (grid * grid, grid * grid):
        raise ValueError(f"similarity has shape {s.shape}; a {grid} x {grid} grid needs {(grid * grid,) * 2}")
    fig, axes = plt.subplots(grid, grid, figsize=(0.75 * grid + 0.9, 0.75 * grid), squeeze=False)
    image_ = None
    for index, ax in enumerate(axes.ravel()):
        image_ = ax.imshow(s[index].reshape(grid, grid), cmap=COLOUR_MAP, vmin=-1, vmax=1)
        ax.set_xticks([])
        ax.set_yticks([])
    for r in range(grid):
        axes[r, 0].set_ylabel(str(r + 1), rotation=0, labelpad=8)
        axes[-1, r].set_xlabel(str(r + 1))
    fig.supxlabel("patch column", fontsize=9, y=-0.06)
    fig.supylabel("patch row", fontsize=9, x=-0.02)
    fig.colorbar(image_, ax=list(axes.ravel()), fraction=0.046, pad=0.04, label="cosine similarity")
    return fig
