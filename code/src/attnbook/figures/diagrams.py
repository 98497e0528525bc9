"""Diagrams of data flow, drawn by code: arrays, weights and operations as boxes, arrows between them.

A :class:`Diagram` is laid out on a grid of cells and draws itself as theme-aware SVG (the website and the
notebooks, with its alt text for screen readers) and as a vector PDF (the LaTeX build). A box's kind shows in
its outline as well as its colour: arrays square, weights dashed, operations rounded, masks hatched, the
result double.

>>> d = Diagram("Scores", "Q and K meet in a scaled matrix product.", columns=2, rows=2)
>>> d.array("q", "Q", "(n_q, d_k)", 0, 0)
>>> d.array("k", "K", "(n_k, d_k)", 0, 1)
>>> d.op("scores", "Q Kᵀ / √d_k", 1, 0.5)
>>> d.arrow("q", "scores"); d.arrow("k", "scores")
>>> d.svg().startswith('<svg xmlns="http://www.w3.org/2000/svg" role="img"')
True
>>> sorted(d._repr_mimebundle_())
['application/pdf', 'text/html', 'text/plain']
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import math
import unicodedata
from dataclasses import dataclass, field, replace

__all__ = ["Diagram"]

KINDS = ("array", "weight", "op", "mask", "result")
CELL_W, CELL_H = 170, 84  # pixels of one grid cell
BOX_W, BOX_H = 140, 56
# kind -> (CSS variable, light fallback); the ink colour is the text's and every outline's
PALETTE = {"ink": ("--attn-dg-ink", "#1f2328"), "paper": ("--attn-dg-paper", "#ffffff"),
           "array": ("--attn-dg-array", "#dcebfa"), "weight": ("--attn-dg-weight", "#fbe8cc"),
           "op": ("--attn-dg-op", "#eeeeee"), "mask": ("--attn-dg-mask", "#e6defa"),
           "result": ("--attn-dg-result", "#d9f2df")}


def _ems(text: str) -> float:
    """The width of ``text`` in Latin characters: a wide character (Chinese) counts as 1.7."""
    return sum(1.7 if unicodedata.east_asian_width(c) in "WF" else 1.0 for c in text)


@dataclass
class _Box:
    """One box of a diagram: its key, label, the detail under the label (a shape), kind and centre."""

    key: str
    label: str
    detail: str  # the shape, under the label (empty for most operations)
    kind: str
    x: float  # centre, pixels
    y: float
    cells: tuple[tuple[bool, ...], ...] = ()  # a pattern's grid, row by row (empty for other boxes)

    @property
    def side(self) -> float:
        """A pattern's square: the grid fits under the label, in at most 36 pixels each way."""
        return min(36 / len(self.cells), 36 / len(self.cells[0]), 10)

    @property
    def w(self) -> float:
        """The width: enough for the label (bold 14 px) and the detail (12 px monospace), within its cell."""
        if self.cells:
            return min(CELL_W - 6, max(self.side * len(self.cells[0]), 8.6 * _ems(self.label)) + 12)
        return min(CELL_W - 6, max(BOX_W, 8.6 * _ems(self.label) + 18, 7.3 * _ems(self.detail) + 18))

    def squares(self):
        """(x, y, side, filled) of each square of a pattern, left to right and top to bottom."""
        side, rows, columns = self.side, len(self.cells), len(self.cells[0])
        left, top = self.x - side * columns / 2, self.y + BOX_H / 2 - side * rows
        return [(left + j * side, top + i * side, side, bool(value))
                for i, row in enumerate(self.cells) for j, value in enumerate(row)]

    def edge_towards(self, x: float, y: float) -> tuple[float, float]:
        """Where the line from the centre towards (x, y) leaves the box."""
        dx, dy = x - self.x, y - self.y
        scale = min(self.w / 2 / abs(dx) if dx else math.inf, BOX_H / 2 / abs(dy) if dy else math.inf)
        return self.x + dx * scale, self.y + dy * scale


@dataclass
class Diagram:
    """A data-flow diagram on a ``columns`` x ``rows`` grid; add boxes with :meth:`array` and :meth:`op`.

    Attributes
    ----------
    title : str
        What the diagram is of (the SVG's ``<title>``, the PDF's title).
    alt : str
        What it shows, in words: the alt text (``<desc>``; the plain-text form of the display).
    columns, rows : int
        The grid; a box's column and row may be fractional, to sit between cells.
    boxes : dict
        The boxes by key, as added.
    arrows : list
        (source key, target key, label) of each arrow.
    frames : list
        (keys, label) of each dashed frame around some boxes.

    Examples
    --------
    >>> d = Diagram("Softmax", "The scores go through a softmax.", columns=2, rows=1)
    >>> d.array("s", "S", "(n_q, n_k)", 0, 0)
    >>> d.op("softmax", "softmax", 1, 0)
    >>> d.arrow("s", "softmax")
    >>> (d.width, d.height, len(d.arrows))
    (340, 84, 1)
    """

    title: str
    alt: str
    columns: int
    rows: int
    boxes: dict[str, _Box] = field(default_factory=dict)
    arrows: list[tuple[str, str, str]] = field(default_factory=list)
    frames: list[tuple[list[str], str]] = field(default_factory=list)

    def __post_init__(self):
        if not self.title.strip() or not self.alt.strip():
            raise ValueError("a diagram needs a title and an alt text that says what it shows")

    @property
    def width(self) -> int:
        return self.columns * CELL_W

    @property
    def height(self) -> int:
        return self.rows * CELL_H

    def _add(self, key: str, label: str, detail: str, kind: str, column: float, row: float) -> None:
        if key in self.boxes:
            raise ValueError(f"key: a box named {key!r} is already in the diagram")
        if not (0 <= column < self.columns and 0 <= row < self.rows):
            raise ValueError(f"column, row: ({column}, {row}) is outside the {self.columns} x {self.rows} grid")
        self.boxes[key] = _Box(key, label, detail, kind, (column + 0.5) * CELL_W, (row + 0.5) * CELL_H)

    def array(self, key: str, label: str, shape: str, column: float, row: float, kind: str = "array") -> None:
        """A box for an array (``kind`` array, weight, mask or result) with its shape under its name."""
        if kind not in ("array", "weight", "mask", "result"):
            raise ValueError(f"kind must be array, weight, mask or result, got {kind!r}")
        self._add(key, label, shape, kind, column, row)

    def op(self, key: str, label: str, column: float, row: float, detail: str = "") -> None:
        """A rounded box for an operation."""
        self._add(key, label, detail, "op", column, row)

    def pattern(self, key: str, label: str, cells, column: float, row: float) -> None:
        """A boolean pattern (a mask) drawn as a grid under its label: filled squares True, empty False.

        Parameters
        ----------
        key, label : str
            The pattern's name for arrows and frames, and the text above its grid.
        cells : sequence of sequences of bool
            The pattern, row by row: a small rectangular grid (the grid is at most 36 pixels each way).
        column, row : float
            Where its centre sits on the diagram's grid.

        Examples
        --------
        >>> d = Diagram("A causal mask", "Three queries; each may attend to itself and earlier keys.", 1, 1)
        >>> d.pattern("m", "causal", [[1, 0, 0], [1, 1, 0], [1, 1, 1]], 0, 0)
        >>> sum(filled for *_, filled in d.boxes["m"].squares())
        6
        """
        grid = tuple(tuple(bool(value) for value in line) for line in cells)
        if not grid or not grid[0] or len({len(line) for line in grid}) != 1:
            raise ValueError("cells: a pattern needs a non-empty rectangular grid of booleans")
        self._add(key, label, "", "mask", column, row)
        self.boxes[key].cells = grid

    def arrow(self, source: str, target: str, label: str = "") -> None:
        """An arrow from one box to another, optionally labelled beside its middle."""
        for key in (source, target):
            if key not in self.boxes:
                raise ValueError(f"arrow: no box named {key!r}")
        self.arrows.append((source, target, label))

    def frame(self, keys: list[str], label: str) -> None:
        """A dashed frame around some boxes (a layer repeated N times, one head of many), labelled at its top."""
        missing = [key for key in keys if key not in self.boxes]
        if missing:
            raise ValueError(f"frame: no box named {missing[0]!r}")
        self.frames.append((list(keys), label))

    # --- geometry shared by both renderers ----------------------------------------------------------

    def _frame_rect(self, keys: list[str]) -> tuple[float, float, float, float]:
        boxes = [self.boxes[k] for k in keys]
        pad = 12
        left, right = min(b.x - b.w / 2 for b in boxes) - pad, max(b.x + b.w / 2 for b in boxes) + pad
        top, bottom = min(b.y for b in boxes) - BOX_H / 2 - pad - 14, max(b.y for b in boxes) + BOX_H / 2 + pad
        return left, top, right - left, bottom - top

    def _segment(self, source: str, target: str) -> tuple[float, float, float, float]:
        a, b = self.boxes[source], self.boxes[target]
        x0, y0 = a.edge_towards(b.x, b.y)
        x1, y1 = b.edge_towards(a.x, a.y)
        return x0, y0, x1, y1

    # --- SVG --------------------------------------------------------------------------------------

    @property
    def ident(self) -> str:
        """The prefix of the SVG's ids, from the diagram's content alone: two diagrams on a page differ in it.

        A hash of the title, the alt text, the grid, the boxes, the arrows and the frames, so a diagram gets
        the same ids whatever was drawn before it in the process (a notebook's outputs do not depend on the
        order of the drawings, nor on the other language's version drawn beside it).
        """
        content = repr((self.title, self.alt, self.columns, self.rows, list(self.boxes.values()), self.arrows,
                        self.frames))
        return f"attn-dg-{hashlib.sha256(content.encode()).hexdigest()[:12]}"

    def svg(self) -> str:
        """The diagram as inline SVG, with its title and alt text for screen readers."""
        ident = self.ident

        def colour(name: str) -> str:
            variable, fallback = PALETTE[name]
            return f"var({variable}, {fallback})"

        ink = colour("ink")
        parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="attn-diagram" '
                 f'viewBox="0 0 {self.width} {self.height}" width="100%" style="max-width: {self.width}px" '
                 f'aria-labelledby="{ident}-title {ident}-desc">',
                 f'<title id="{ident}-title">{html.escape(self.title)}</title>',
                 f'<desc id="{ident}-desc">{html.escape(self.alt)}</desc>',
                 f'<defs><marker id="{ident}-head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
                 f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" style="fill: {ink}"/>'
                 f'</marker><pattern id="{ident}-hatch" width="8" height="8" patternUnits="userSpaceOnUse" '
                 f'patternTransform="rotate(45)"><rect width="8" height="8" style="fill: {colour("mask")}"/>'
                 f'<line x1="0" y1="0" x2="0" y2="8" style="stroke: {ink}; stroke-width: 1; opacity: 0.35"/>'
                 f'</pattern></defs>',
                 f'<rect width="{self.width}" height="{self.height}" rx="8" style="fill: {colour("paper")}"/>']
        for keys, label in self.frames:
            x, y, w, h = self._frame_rect(keys)
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="10" '
                         f'style="fill: none; stroke: {ink}; stroke-width: 1.2; stroke-dasharray: 6 4"/>')
            parts.append(f'<text x="{x + 8:.1f}" y="{y + 14:.1f}" style="fill: {ink}; font: italic 12px sans-serif">'
                         f'{html.escape(label)}</text>')
        for source, target, label in self.arrows:
            x0, y0, x1, y1 = self._segment(source, target)
            parts.append(f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" '
                         f'style="stroke: {ink}; stroke-width: 1.5" marker-end="url(#{ident}-head)"/>')
            if label:
                parts.append(f'<text x="{(x0 + x1) / 2 + 6:.1f}" y="{(y0 + y1) / 2 - 4:.1f}" '
                             f'style="fill: {ink}; font: 12px sans-serif">{html.escape(label)}</text>')
        for box in self.boxes.values():
            parts.append(self._svg_box(box, ident, colour))
        parts.append("</svg>")
        return "".join(parts)

    def _svg_box(self, box: _Box, ident: str, colour) -> str:
        ink = colour("ink")
        if box.cells:  # a pattern: its label, then squares filled with ink (True) or paper (False)
            shape = [f'<text x="{box.x:.1f}" y="{box.y - BOX_H / 2 + 13:.1f}" text-anchor="middle" '
                     f'style="fill: {ink}; font: bold 14px sans-serif">{html.escape(box.label)}</text>']
            shape += [f'<rect x="{x:.1f}" y="{y:.1f}" width="{side:.1f}" height="{side:.1f}" '
                      f'style="fill: {colour("ink" if filled else "paper")}; stroke: {ink}; stroke-width: 0.8"/>'
                      for x, y, side, filled in box.squares()]
            return "".join(shape)
        x, y = box.x - box.w / 2, box.y - BOX_H / 2
        fill = f"url(#{ident}-hatch)" if box.kind == "mask" else colour(box.kind)
        dash = "; stroke-dasharray: 5 3" if box.kind == "weight" else ""
        radius = 18 if box.kind == "op" else 3
        shape = [f'<rect x="{x:.1f}" y="{y:.1f}" width="{box.w:.1f}" height="{BOX_H}" rx="{radius}" '
                 f'style="fill: {fill}; stroke: {ink}; stroke-width: 1.5{dash}"/>']
        if box.kind == "result":  # a second outline
            shape.append(f'<rect x="{x + 4:.1f}" y="{y + 4:.1f}" width="{box.w - 8:.1f}" height="{BOX_H - 8}" rx="2" '
                         f'style="fill: none; stroke: {ink}; stroke-width: 1"/>')
        label_y = box.y - 3 if box.detail else box.y + 5
        shape.append(f'<text x="{box.x:.1f}" y="{label_y:.1f}" text-anchor="middle" '
                     f'style="fill: {ink}; font: bold 14px sans-serif">{html.escape(box.label)}</text>')
        if box.detail:
            shape.append(f'<text x="{box.x:.1f}" y="{box.y + 15:.1f}" text-anchor="middle" '
                         f'style="fill: {ink}; font: 12px monospace">{html.escape(box.detail)}</text>')
        return "".join(shape)

    # --- PDF (the book's LaTeX build) -------------------------------------------------------------------

    def pdf(self) -> bytes:
        """The diagram as a vector PDF in the light colours, drawn by matplotlib from the same shapes."""
        return self._saved(self._figure())

    def _saved(self, figure) -> bytes:
        buffer = io.BytesIO()
        figure.savefig(buffer, format="pdf", metadata={"CreationDate": None, "Title": self.title})
        return buffer.getvalue()

    def _figure(self):
        from matplotlib.figure import Figure  # not pyplot: the notebook's own backend is left alone
        from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

        colours = {name: fallback for name, (_, fallback) in PALETTE.items()}
        ink = colours["ink"]
        figure = Figure(figsize=(self.width / 100, self.height / 100))
        axes = figure.add_axes((0, 0, 1, 1))
        axes.set_xlim(0, self.width)
        axes.set_ylim(self.height, 0)  # y downwards, as in the SVG
        axes.set_axis_off()
        points = 0.72  # one pixel of the layout is 1/100 inch: 0.72 points
        for keys, label in self.frames:
            x, y, w, h = self._frame_rect(keys)
            axes.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=10", fill=False,
                                          edgecolor=ink, linestyle=(0, (6, 4)), linewidth=1.2))
            axes.text(x + 8, y + 14, label, color=ink, fontsize=12 * points, style="italic")
        for source, target, label in self.arrows:
            x0, y0, x1, y1 = self._segment(source, target)
            axes.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-|>", mutation_scale=14,
                                           color=ink, linewidth=1.5, shrinkA=0, shrinkB=0))
            if label:
                axes.text((x0 + x1) / 2 + 6, (y0 + y1) / 2 - 4, label, color=ink, fontsize=12 * points)
        for box in self.boxes.values():
            if box.cells:  # a pattern
                axes.text(box.x, box.y - BOX_H / 2 + 13, box.label, ha="center", color=ink, fontsize=14 * points,
                          weight="bold")
                for x, y, side, filled in box.squares():
                    axes.add_patch(Rectangle((x, y), side, side, facecolor=ink if filled else colours["paper"],
                                             edgecolor=ink, linewidth=0.8))
                continue
            x, y = box.x - box.w / 2, box.y - BOX_H / 2
            radius = 18 if box.kind == "op" else 3
            style = f"round,pad=0,rounding_size={radius}"
            axes.add_patch(FancyBboxPatch((x, y), box.w, BOX_H, boxstyle=style, facecolor=colours[box.kind],
                                          edgecolor=ink, linewidth=1.5,
                                          linestyle=(0, (5, 3)) if box.kind == "weight" else "-"))
            if box.kind == "mask":  # the hatching, light, under the text
                axes.add_patch(FancyBboxPatch((x, y), box.w, BOX_H, boxstyle=style, fill=False, hatch="//",
                                              edgecolor=(0.12, 0.14, 0.16, 0.3), linewidth=0))  # hatch drawn in the edge colour
            if box.kind == "result":
                axes.add_patch(Rectangle((x + 4, y + 4), box.w - 8, BOX_H - 8, fill=False, edgecolor=ink, linewidth=1))
            axes.text(box.x, box.y - 3 if box.detail else box.y + 5, box.label, ha="center", color=ink,
                      fontsize=14 * points, weight="bold")
            if box.detail:
                axes.text(box.x, box.y + 15, box.detail, ha="center", color=ink, fontsize=12 * points,
                          family="monospace")
        return figure

    def translated(self, language: str, used: set | None = None) -> Diagram:
        """The same diagram with its words in ``language`` (attnbook.figures.languages.translate); the messages
        looked up are added to ``used``."""
        from .languages import translate

        def say(text: str) -> str:
            return translate(text, language, used) if text else text

        return replace(self, title=say(self.title), alt=say(self.alt),
                       boxes={key: replace(box, label=say(box.label), detail=say(box.detail))
                              for key, box in self.boxes.items()},
                       arrows=[(source, target, say(label)) for source, target, label in self.arrows],
                       frames=[(list(keys), say(label)) for keys, label in self.frames])

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """Jupyter's display: inline SVG for HTML, the PDF for LaTeX, the alt text for plain text; during the
        book's builds, the same in each of its other languages (attnbook.figures.languages.MIME)."""
        from .languages import MIME, fonts_of, languages, output_entry

        bundle = {"text/html": self.svg(), "application/pdf": base64.b64encode(self.pdf()).decode(),
                  "text/plain": f"{self.title}: {self.alt}"}
        if languages():
            drawings: dict[str, dict] = {}
            used: set = set()
            missing: list[str] = []
            for language in languages():
                diagram = self.translated(language, used)
                figure = diagram._figure()
                with fonts_of(language, figure) as absent:
                    pdf = base64.b64encode(diagram._saved(figure)).decode()
                missing += absent
                drawings[language] = {"text/html": diagram.svg(), "application/pdf": pdf,
                                      "text/plain": f"{diagram.title}: {diagram.alt}"}
            bundle[MIME] = output_entry(drawings, used, missing)
        return bundle
