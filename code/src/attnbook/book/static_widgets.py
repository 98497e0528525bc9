"""Interactive figures that also work on the static website, with no kernel.

:func:`with_static_page` draws every state of a widget figure with the chapter's own drawing function and
shows one output with two forms: the live widget, and HTML form controls whose states a script
(web/src/static-widgets.js) swaps. States are drawn only when ``ATTNBOOK_STATIC_FIGURES`` is ``1`` (the builds).

>>> import os, ipywidgets as widgets
>>> os.environ[STATIC_ENV] = "1"
>>> slider = widgets.IntSlider(value=1, min=0, max=2, description="n")
>>> def render(n):
...     return f'<img src="data:image/png;base64,AAAA" alt="{n} dots">', f"{n} dots"
>>> out = with_static_page(widgets.VBox([slider]), [control_from_widget(slider)], render)
>>> bundle = out._repr_mimebundle_()
>>> sorted(bundle)
['application/vnd.jupyter.widget-view+json', 'text/html', 'text/plain']
>>> 'type="range"' in bundle["text/html"] and 'aria-live="polite"' in bundle["text/html"]
True
>>> del os.environ[STATIC_ENV]
>>> with_static_page(slider, [control_from_widget(slider)], render) is slider
True
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

__all__ = ["Control", "control_from_widget", "static_widget_html", "with_static_page", "StaticPage", "STATIC_ENV"]

STATIC_ENV = "ATTNBOOK_STATIC_FIGURES"  # "1": draw the static form (the book's builds set it)
KINDS = ("range", "select", "checkbox")
MAX_STATES = 400  # every state is an image the site stores: keep the grid of a figure small
_IMG = re.compile(r'<img\b[^>]*?\bsrc="([^"]+)"[^>]*?\balt="([^"]*)"', re.S)


@dataclass(frozen=True)
class Control:
    """One control of the static figure: its label, the values it offers there and where it starts.

    Parameters
    ----------
    label : str
        The control's accessible name, not blank.
    values : sequence
        The values the static page offers, in order.
    value : object
        The starting value, one of ``values``.
    kind : {"range", "select", "checkbox"}, optional
        A slider over ``values`` in order (default), a drop-down menu, or a checkbox (``values``
        must then be ``(False, True)``).
    texts : sequence of str, optional
        The words shown for each value; by default ``str(value)`` (``f"{value:g}"`` for floats).

    Examples
    --------
    >>> Control("width", (1, 2, 4), 2).start, Control("scale", (0.5, 1.0), 1.0).texts
    (1, ('0.5', '1'))
    >>> Control("width", (1, 2, 4), 3)
    Traceback (most recent call last):
    ...
    ValueError: control 'width' starts at 3, not one of its values
    """

    label: str
    values: tuple
    value: Any
    kind: str = "range"
    texts: tuple = field(default=())

    def __post_init__(self):
        object.__setattr__(self, "values", tuple(self.values))
        if not self.label.strip():
            raise ValueError("a control needs a label (its accessible name)")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if not self.values:
            raise ValueError(f"control {self.label!r} offers no value")
        if self.kind == "checkbox" and not (self.values == (False, True)
                                            and all(isinstance(v, bool) for v in self.values)):
            raise ValueError("a checkbox offers the values (False, True)")
        if self.value not in self.values:
            raise ValueError(f"control {self.label!r} starts at {self.value!r}, not one of its values")
        texts = tuple(self.texts) or tuple(_text(v) for v in self.values)
        if len(texts) != len(self.values):
            raise ValueError(f"control {self.label!r}: {len(texts)} texts for {len(self.values)} values")
        object.__setattr__(self, "texts", texts)

    @property
    def start(self) -> int:
        return self.values.index(self.value)


def _text(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _grid(lo, hi, step):
    count = int(round((hi - lo) / step)) + 1
    return tuple(round(lo + i * step, 10) for i in range(count))


def control_from_widget(widget, values: Sequence | None = None, label: str | None = None) -> Control:
    """The static ``Control`` of an ipywidgets control: same label, same options, same start.

    Parameters
    ----------
    widget : ipywidgets.Widget
        A ``Checkbox``, a slider (``IntSlider``, ``FloatSlider``, ``SelectionSlider``) or a menu
        (``Dropdown``, ``ToggleButtons``).
    values : sequence, optional
        Restricts the control to a subset, which must hold the widget's starting value; by default
        a slider offers every value between its ends, a menu every option.
    label : str, optional
        The label; by default the widget's description.

    Returns
    -------
    Control
        The control of the static page.

    Examples
    --------
    >>> import ipywidgets as widgets
    >>> control_from_widget(widgets.FloatSlider(value=0.5, min=0, max=1, step=0.25, description="c")).values
    (0.0, 0.25, 0.5, 0.75, 1.0)
    >>> control_from_widget(widgets.Dropdown(options=[("one", 1), ("two", 2)], value=2, description="n")).texts
    ('one', 'two')
    """
    import ipywidgets as widgets

    name = label or widget.description
    if isinstance(widget, widgets.Checkbox):
        return Control(name, (False, True), bool(widget.value), "checkbox")
    if hasattr(widget, "_options_values"):  # Dropdown, SelectionSlider, ToggleButtons
        pairs = list(zip(widget._options_values, widget._options_labels))
        if values is not None:
            pairs = [(v, t) for v, t in pairs if v in values]
        kind = "range" if isinstance(widget, widgets.SelectionSlider) else "select"
        return Control(name, tuple(v for v, _ in pairs), widget.value, kind, tuple(t for _, t in pairs))
    if isinstance(widget, (widgets.IntSlider, widgets.FloatSlider)):
        grid = tuple(values) if values is not None else _grid(widget.min, widget.max, widget.step)
        return Control(name, grid, widget.value, "range")
    raise TypeError(f"no static form for a {type(widget).__name__}")


def _split_picture(picture_html: str) -> tuple[str, str]:
    match = _IMG.search(picture_html)
    if not match:
        raise ValueError("the render function must return an <img> with src and alt (figure_to_img_html)")
    return html.unescape(match.group(1)), html.unescape(match.group(2))


def _key(indices) -> str:
    return ",".join(str(i) for i in indices)


def static_widget_html(controls: Sequence[Control], render: Callable[..., tuple[str, str]],
                       note: str = "") -> str:
    """Self-contained HTML of the figure with every state precomputed.

    One picture per combination of the controls' values, at most ``MAX_STATES``.

    Parameters
    ----------
    controls : sequence of Control
        The controls, at least one.
    render : callable
        ``render(*values)`` draws one state, one value per control in order, and returns
        ``(picture_html, readout_text)``: an ``<img>`` with ``src`` and ``alt`` (as
        ``attnbook.figure_to_img_html`` makes) and the readout in words.
    note : str, optional
        A sentence shown above the controls.

    Returns
    -------
    str
        The HTML of the figure, its controls, its readout and every state.

    Examples
    --------
    >>> draw = lambda n: (f'<img src="data:," alt="{n} dots">', f"n = {n}")
    >>> page = static_widget_html([Control("n", (1, 2), 1)], draw)
    >>> 'alt="1 dots"' in page, "2 dots" in page, '<input type="range"' in page
    (True, True, True)
    """
    controls = list(controls)
    if not controls:
        raise ValueError("a static figure needs at least one control")
    count = 1
    for control in controls:
        count *= len(control.values)
    if count > MAX_STATES:
        raise ValueError(f"{count} states is too many for the static page (at most {MAX_STATES}): "
                         "offer fewer values")
    from ..figures.languages import Translated, languages, translate

    others = languages()  # the book's builds: the page in each of the book's other languages too
    states: dict[str, dict[str, list]] = {language: {} for language in ["en", *others]}
    messages: set = set()
    missing: set = set()  # glyphs no font had in a state's picture
    for indices in itertools.product(*(range(len(c.values)) for c in controls)):
        picture, readout = render(*(c.values[i] for c, i in zip(controls, indices)))
        key = _key(indices)
        states["en"][key] = [*_split_picture(picture), readout]
        for language in others:
            shown = getattr(picture, "translations", {}).get(language, picture)
            states[language][key] = [*_split_picture(shown), translate(readout, language, messages)]
        messages |= getattr(picture, "messages", set())
        missing |= getattr(picture, "missing", set())
    start = _key(c.start for c in controls)
    uid = "sw-" + hashlib.sha1(json.dumps([[c.label, c.texts] for c in controls] + [states["en"][start][2]])
                               .encode("utf-8")).hexdigest()[:10]
    english = _page_html(uid, controls, note, states["en"], start)
    if not others:
        return english

    def words(language: str):
        def say(text: str) -> str:
            return translate(text, language, messages)
        return [Control(say(c.label), c.values, c.value, c.kind, tuple(say(t) for t in c.texts)) for c in controls], \
            say(note) if note else note

    pages = {language: _page_html(uid, *words(language), states[language], start) for language in others}
    return Translated(english, pages, messages, missing)


def _page_html(uid: str, controls: Sequence[Control], note: str, states: dict[str, list], start: str) -> str:
    """The static page: its note, its controls, the readout and picture of state ``start``, and every state."""
    src, alt, readout = states[start]
    parts = [f'<div class="attn-static-widget" id="{uid}">']
    if note:
        parts.append(f'<p class="attn-static-note">{html.escape(note)}</p>')
    parts.append('<form class="attn-static-controls" onsubmit="return false">')
    for n, control in enumerate(controls):
        cid = f"{uid}-c{n}"
        label = f'<label for="{cid}">{html.escape(control.label)}</label>'
        if control.kind == "range":
            last = len(control.values) - 1
            text = html.escape(control.texts[control.start])
            parts.append(
                f'<span class="attn-static-control">{label}<input type="range" id="{cid}" name="{cid}"'
                f' min="0" max="{last}" step="1" value="{control.start}" aria-valuetext="{text}"'
                f' data-texts="{html.escape(json.dumps(control.texts))}">'
                f'<output for="{cid}" id="{cid}-value">{text}</output></span>')
        elif control.kind == "select":
            options = "".join(
                f'<option value="{i}"{" selected" if i == control.start else ""}>{html.escape(t)}</option>'
                for i, t in enumerate(control.texts))
            parts.append(f'<span class="attn-static-control">{label}'
                         f'<select id="{cid}" name="{cid}">{options}</select></span>')
        else:
            checked = " checked" if control.value else ""
            parts.append(f'<span class="attn-static-control"><input type="checkbox" id="{cid}"'
                         f' name="{cid}"{checked}>{label}</span>')
    parts.append("</form>")
    parts.append(f'<p class="attn-static-readout" aria-live="polite" aria-atomic="true">'
                 f'{html.escape(readout)}</p>')
    parts.append(f'<img class="attn-static-picture" src="{html.escape(src)}" alt="{html.escape(alt)}"'
                 ' style="max-width: 100%">')
    payload = json.dumps(states, separators=(",", ":")).replace("</", "<\\/")
    parts.append(f'<script type="application/json" class="attn-static-states">{payload}</script>')
    parts.append("</div>")
    return "".join(parts)


class StaticPage:
    """The live widget for Jupyter and its form for the website (any HTML), in one output.

    Parameters
    ----------
    view : object
        The ipywidgets figure; its MIME bundle is shown in Jupyter.
    static_html : str
        What the website shows instead, from ``static_widget_html``.

    Examples
    --------
    >>> class View:  # stands in for an ipywidgets figure
    ...     def _repr_mimebundle_(self, **kwargs):
    ...         return {"text/plain": "a slider"}
    >>> StaticPage(View(), "<p>every state</p>")._repr_mimebundle_()
    {'text/plain': 'a slider', 'text/html': '<p>every state</p>'}
    """

    def __init__(self, view, static_html: str):
        self.view = view
        self.static_html = static_html

    def _repr_mimebundle_(self, **kwargs):
        bundle = dict(self.view._repr_mimebundle_(**kwargs))
        bundle["text/html"] = self.static_html
        if hasattr(self.static_html, "payload"):  # the book's builds: the page in its other languages
            from ..figures.languages import MIME

            bundle[MIME] = self.static_html.payload("text/html")
        return bundle


def with_static_page(view, controls: Sequence[Control], render: Callable[..., tuple[str, str]],
                     note: str = "") -> StaticPage:
    """Display ``view`` (the ipywidgets figure) together with its precomputed static form.

    Outside the book's builds (``ATTNBOOK_STATIC_FIGURES`` not ``1``) ``view`` is returned as it is.

    Parameters
    ----------
    view : object
        The ipywidgets figure.
    controls, render, note
        As in :func:`static_widget_html`; ``render`` must be the function the widget's callbacks use.

    Returns
    -------
    StaticPage or object
        Both forms in one output during the book's builds, otherwise ``view``.

    Examples
    --------
    >>> saved = os.environ.pop(STATIC_ENV, None)
    >>> with_static_page("the live widget", [Control("n", (1, 2), 1)], render=print)
    'the live widget'
    >>> if saved is not None:
    ...     os.environ[STATIC_ENV] = saved
    """
    if os.environ.get(STATIC_ENV) != "1":
        return view
    return StaticPage(view, static_widget_html(controls, render, note))
