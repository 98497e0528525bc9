"""attnbook.book.static_widgets: the static form of an interactive figure holds every state, named controls."""

from __future__ import annotations

import html
import json
import re

import ipywidgets as widgets
import pytest

from attnbook.book.static_widgets import STATIC_ENV, Control, StaticPage, control_from_widget, static_widget_html, with_static_page


def fake_picture(*values):
    text = "state " + " ".join(map(str, values))
    return f'<img src="data:image/png;base64,{text.replace(" ", "")}" alt="{html.escape(text)}">', text


def states_of(snippet: str) -> dict:
    payload = re.search(r'<script type="application/json" class="attn-static-states">(.*?)</script>', snippet, re.S)
    return json.loads(payload.group(1).replace("<\\/", "</"))


def test_every_combination_of_values_is_a_state_with_its_own_alt_and_readout():
    controls = [Control("a", (1, 2, 3), 2), Control("b", ("x", "y"), "y", "select"), Control("c", (False, True), True, "checkbox")]
    states = states_of(static_widget_html(controls, fake_picture))
    assert len(states) == 3 * 2 * 2
    assert states["0,1,0"] == ["data:image/png;base64,state1yFalse", "state 1 y False", "state 1 y False"]
    assert len({alt for _, alt, _ in states.values()}) == 12


def test_the_page_starts_at_the_widgets_starting_state_with_labelled_controls():
    snippet = static_widget_html([Control("reach", (0, 1, 2), 1), Control("data", ("a", "b"), "b", "select")], fake_picture)
    assert 'alt="state 1 b"' in snippet and '>state 1 b</p>' in snippet
    assert 'aria-live="polite"' in snippet
    for cid in re.findall(r'<(?:input|select)[^>]* id="([^"]+)"', snippet):
        assert f'<label for="{cid}">' in snippet
    assert 'type="range"' in snippet and 'value="1"' in snippet and 'aria-valuetext="1"' in snippet
    assert '<option value="1" selected>b</option>' in snippet


def test_a_script_end_in_a_readout_cannot_close_the_states_script():
    snippet = static_widget_html([Control("n", (1, 2), 1)], lambda n: (fake_picture(n)[0], "</script><b>"))
    assert snippet.count("</script>") == 1
    assert states_of(snippet)["1"][2] == "</script><b>"


def test_too_many_states_are_refused():
    controls = [Control("a", tuple(range(30)), 0), Control("b", tuple(range(30)), 0)]
    with pytest.raises(ValueError, match="too many"):
        static_widget_html(controls, fake_picture)


def test_a_render_without_an_image_is_refused():
    with pytest.raises(ValueError, match="<img>"):
        static_widget_html([Control("n", (1, 2), 1)], lambda n: ("<p>no picture</p>", "text"))


@pytest.mark.parametrize("bad", [dict(label=" ", values=(1,), value=1), dict(label="n", values=(1, 2), value=3),
                                 dict(label="n", values=(1, 2), value=1, kind="dial"),
                                 dict(label="n", values=(0, 1), value=1, kind="checkbox"),
                                 dict(label="n", values=(1, 2), value=1, texts=("one",))])
def test_malformed_controls_are_refused(bad):
    with pytest.raises(ValueError):
        Control(**bad)


def test_controls_follow_their_widgets():
    slider = widgets.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.25, description="c")
    assert control_from_widget(slider).values == (0.0, 0.25, 0.5, 0.75, 1.0)
    assert control_from_widget(slider, (0.0, 0.5)).values == (0.0, 0.5)
    with pytest.raises(ValueError):  # the subset must hold the starting value
        control_from_widget(slider, (0.0, 1.0))
    chooser = widgets.SelectionSlider(options=[("first", 10), ("second", 20)], value=20, description="pick")
    assert (control_from_widget(chooser).kind, control_from_widget(chooser).texts) == ("range", ("first", "second"))
    toggles = widgets.ToggleButtons(options=[1, 2], value=1, description="layer")
    assert control_from_widget(toggles).kind == "select"
    assert control_from_widget(widgets.Checkbox(value=True, description="on")).kind == "checkbox"
    with pytest.raises(TypeError):
        control_from_widget(widgets.Button(description="go"))


def test_outside_the_build_the_widget_is_shown_as_it_is(monkeypatch):
    slider = widgets.IntSlider(value=1, min=0, max=2, description="n")
    monkeypatch.delenv(STATIC_ENV, raising=False)
    assert with_static_page(slider, [control_from_widget(slider)], fake_picture) is slider
    monkeypatch.setenv(STATIC_ENV, "1")
    shown = with_static_page(slider, [control_from_widget(slider)], fake_picture)
    assert isinstance(shown, StaticPage)
    bundle = shown._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == slider.model_id
    assert 'class="attn-static-widget"' in bundle["text/html"]
