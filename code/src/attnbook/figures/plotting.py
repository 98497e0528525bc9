"""Figures used throughout the book: attention heatmaps and outputs inside the convex hull.

The default colour map is ``cividis``, designed to be readable with colour-vision deficiency and
monotone in lightness, so the heatmaps also survive greyscale printing. Small matrices (up to
8 x 8 by default) get their values written in the cells, in black or white by cell lightness.

>>> import matplotlib
>>> matplotlib.use("Agg")
>>> ax = plot_heatmap([[0.8, 0.2], [0.2, 0.8]], row_labels=["q1", "q2"], col_labels=["k1", "k2"])
>>> [t.get_text() for t in ax.texts]
['0.80', '0.20', '0.20', '0.80']
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..validation import as_float_array

__all__ = ["COLOUR_MAP", "figure_to_img_html", "plot_heatmap", "plot_convex_combination"]

COLOUR_MAP = "cividis"
_ANNOTATE_UP_TO = 8


def _labels(labels, count: int, name: str, counted: str) -> list[str]:
    if labels is None:
        return [str(i + 1) for i in range(count)]
    labels = [str(label) for label in labels]
    if len(labels) != count:
        raise ValueError(f"{name} has {len(labels)} labels but {counted.format(count)}")
    return labels


def plot_heatmap(
    matrix,
    ax=None,
    *,
    row_labels: Sequence | None = None,
    col_labels: Sequence | None = None,
    title: str | None = None,
    xlabel: str = "key position j",
    ylabel: str = "query position i",
    annotate: bool | None = None,
    fmt: str = ".2f",
    vmin: float | None = 0.0,
    vmax: float | None = 1.0,
    cmap: str = COLOUR_MAP,
    colorbar: bool = True,
):
    """Draw a 2-D matrix (typically attention weights) as a labelled heatmap; return the axes.

    Parameters
    ----------
    matrix : array_like
        ``(n_rows, n_cols)`` values; row i is query i, column j key j.
    ax : matplotlib Axes, optional
        Where to draw; default a new figure sized to the matrix.
    row_labels, col_labels : sequence, optional
        One label per row and per column; default ``1, 2, ...``.
    title : str, optional
        The axes title.
    xlabel, ylabel : str
        Axis labels; default "key position j" and "query position i".
    annotate : bool, optional
        Write each value in its cell (black or white by the cell's lightness); default when the
        matrix is at most 8 x 8.
    fmt : str
        Format of the written values; default ``".2f"``.
    vmin, vmax : float or None
        The colour range; default 0 and 1, the range of attention weights. ``None`` uses the data's
        minimum or maximum (for raw scores).
    cmap : str
        A matplotlib colour map; default ``COLOUR_MAP`` (``cividis``, colour-blind safe).
    colorbar : bool
        Draw a colour bar beside the axes; default True.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> ax = plot_heatmap([[0.8, 0.2], [0.2, 0.8]], title="weights")
    >>> ax.get_title(), ax.get_xlabel(), [t.get_text() for t in ax.texts]
    ('weights', 'key position j', ['0.80', '0.20', '0.20', '0.80'])
    >>> plot_heatmap(np.ones(3))
    Traceback (most recent call last):
    ...
    ValueError: matrix has shape (3,); plot_heatmap draws a 2-D matrix (rows = queries, columns = keys)
    """
    import matplotlib.pyplot as plt
    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    values = as_float_array(matrix, "matrix")  # (n_rows, n_cols)
    if values.ndim != 2:
        raise ValueError(
            f"matrix has shape {values.shape}; plot_heatmap draws a 2-D matrix "
            "(rows = queries, columns = keys)"
        )
    n_rows, n_cols = values.shape
    rows = _labels(row_labels, n_rows, "row_labels", "the matrix has {} rows")
    cols = _labels(col_labels, n_cols, "col_labels", "the matrix has {} columns")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.6 * n_cols, 0.8 + 0.5 * n_rows))
    lo = float(values.min()) if vmin is None else vmin
    hi = float(values.max()) if vmax is None else vmax
    if hi <= lo:
        hi = lo + 1.0
    image = ax.imshow(values, cmap=cmap, vmin=lo, vmax=hi, aspect="auto")
    ax.set_xticks(range(n_cols), cols)
    ax.set_yticks(range(n_rows), rows)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    if annotate is None:
        annotate = max(n_rows, n_cols) <= _ANNOTATE_UP_TO
    if annotate:
        colours = colormaps[cmap](Normalize(lo, hi)(values))  # (n_rows, n_cols, 4)
        lightness = colours[..., :3] @ np.array([0.2126, 0.7152, 0.0722])  # (n_rows, n_cols)
        for i in range(n_rows):
            for j in range(n_cols):
                ax.text(j, i, format(values[i, j], fmt), ha="center", va="center",
                        color="black" if lightness[i, j] > 0.45 else "white", fontsize=9)
    return ax


def plot_convex_combination(values, weights, ax=None, *, value_labels: Sequence | None = None,
                            title: str | None = None):
    r"""Plot 2-D value vectors, their convex hull, and the output ``weights @ values`` inside it.

    .. math:: o = \sum_j a_j v_j, \qquad a_j \ge 0, \quad \sum_j a_j = 1

    Parameters
    ----------
    values : array_like
        ``(n_k, 2)`` value vectors, points in the plane.
    weights : array_like
        ``(n_k,)`` one query's attention weights, one per value.
    ax : matplotlib Axes, optional
        Where to draw; default a new 3.6 x 3.6 inch figure.
    value_labels : sequence, optional
        One label per value; default ``1, 2, ...``.
    title : str, optional
        The axes title.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on; the output is the last scatter (a star).

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> ax = plot_convex_combination([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]], [0.5, 0.25, 0.25])
    >>> ax.collections[-1].get_offsets().tolist()
    [[0.5, 0.5]]
    >>> plot_convex_combination([[1.0, 0.0], [0.0, 1.0]], [0.5, 0.5, 0.0])
    Traceback (most recent call last):
    ...
    ValueError: weights has shape (3,) but values has shape (2, 2); expected one weight per value row
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Polygon

    points = as_float_array(values, "values")  # (n_k, 2)
    w = as_float_array(weights, "weights")  # (n_k,)
    if points.ndim != 2 or points.shape[1] != 2:
        raise ValueError(f"values has shape {points.shape}; expected (n_k, 2) points in the plane")
    if w.shape != (points.shape[0],):
        raise ValueError(
            f"weights has shape {w.shape} but values has shape {points.shape}; "
            "expected one weight per value row"
        )
    output = w @ points  # (2,)
    labels = _labels(value_labels, points.shape[0], "value_labels", "values has {} rows")
    if ax is None:
        _, ax = plt.subplots(figsize=(3.6, 3.6))
    hull = _convex_hull(points)  # (n_hull, 2)
    if len(hull) >= 3:
        ax.add_patch(Polygon(hull, closed=True, facecolor="#cccccc", edgecolor="#555555",
                             alpha=0.5, label="convex hull of the values"))
    elif len(hull) == 2:
        ax.plot(hull[:, 0], hull[:, 1], color="#555555", label="convex hull of the values")
    ax.scatter(points[:, 0], points[:, 1], marker="s", s=60, color="#0072B2", label="values $v_j$")
    for label, (x, y) in zip(labels, points):
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(6, 6))
    ax.scatter([output[0]], [output[1]], marker="*", s=180, color="#D55E00",
               label="output $o = \\sum_j a_j v_j$")
    span = np.vstack([points, output[None, :]])  # (n_k + 1, 2)
    lo, hi = span.min(axis=0) - 0.3, span.max(axis=0) + 0.3  # (2,), (2,)
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    ax.set_aspect("equal")
    ax.set_xlabel("dimension 1")
    ax.set_ylabel("dimension 2")
    ax.legend(loc="best", fontsize=8)
    if title:
        ax.set_title(title)
    return ax


def _turn(o: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """z-component of (a - o) x (b - o): positive for a counter-clockwise turn."""
    return float((a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]))


def figure_to_img_html(fig, alt: str, dpi: int = 80) -> str:
    """Render a matplotlib figure as an ``<img>`` tag (PNG data URL) carrying ``alt`` text, and close it.

    Widgets that redraw a figure use this inside an ``ipywidgets.HTML``: unlike an Output widget,
    the saved page then shows the picture, and screen readers get a description of every state.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure to render; it is closed afterwards.
    alt : str
        The alternative text, describing what the figure shows; not empty.
    dpi : int
        Resolution of the PNG; default 80.

    Returns
    -------
    str
        ``<img src="data:image/png;base64,..." alt="..." style="max-width: 100%">``, with ``alt``
        HTML-escaped. During the book's builds, a :class:`~attnbook.figures.languages.Translated` string
        that also carries the figure drawn in each other language, its alt text translated.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> figure_to_img_html(plt.figure(figsize=(1, 1)), alt="An empty figure").startswith('<img src="data:image/png;base64,')
    True
    >>> figure_to_img_html(plt.figure(), alt=" ")
    Traceback (most recent call last):
    ...
    ValueError: alt must describe the figure (got an empty text)
    """
    import base64
    import html
    import io

    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):
        plt.close("all")
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    if not isinstance(alt, str) or not alt.strip():
        plt.close(fig)
        raise ValueError("alt must describe the figure (got an empty text)")
    from matplotlib.layout_engine import PlaceHolderLayoutEngine

    if isinstance(fig.get_layout_engine(), PlaceHolderLayoutEngine):
        # left by a finished fig.tight_layout(): it would make savefig lay the figure out in a first,
        # discarded draw (a fifth of the time of each state an interactive figure precomputes)
        fig.set_layout_engine(None)
    from .languages import Translated, drawn_in, languages, translate

    def tag(fig, alt: str) -> str:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
        data = base64.b64encode(buffer.getvalue()).decode("ascii")
        return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}" style="max-width: 100%">'

    try:
        english = tag(fig, alt)
        if not languages():
            return english
        translations, messages, missing = {}, set(), []
        for language in languages():  # the book's builds: the same figure in each of its other languages
            with drawn_in(fig, language) as (used, absent):
                translations[language] = tag(fig, translate(alt, language, used))
            messages |= used
            missing += absent
        return Translated(english, translations, messages, missing)
    finally:
        plt.close(fig)


def _convex_hull(points: np.ndarray) -> np.ndarray:
    """Andrew's monotone chain: the hull's vertices in counter-clockwise order."""
    unique = np.unique(points, axis=0)  # (m, 2), sorted by x then y
    if len(unique) <= 2:
        return unique

    def half(sequence):
        chain: list[np.ndarray] = []
        for p in sequence:
            while len(chain) >= 2 and _turn(chain[-2], chain[-1], p) <= 0:
                chain.pop()
            chain.append(p)
        return chain

    lower, upper = half(unique), half(unique[::-1])
    return np.array(lower[:-1] + upper[:-1])  # (n_hull, 2)
