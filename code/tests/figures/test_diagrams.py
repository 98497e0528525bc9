"""The drawing module: what a diagram's SVG says to a reader and a screen reader, its themes, its PDF."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ElementTree

import pytest

from attnbook.figures.diagrams import PALETTE, Diagram

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def pipeline() -> Diagram:
    d = Diagram("Attention of one head", "Q and K give the scores; a mask & a softmax give A; A V is the output.",
                columns=4, rows=2)
    d.array("q", "Q", "(n_q, d_k)", 0, 0)
    d.array("k", "K", "(n_k, d_k)", 0, 1)
    d.array("mask", "M", "(n_q, n_k)", 1, 1, kind="mask")
    d.array("w_q", "W_Q", "(d, d_k)", 2, 1, kind="weight")
    d.op("scores", "softmax(Q Kᵀ / √d_k)", 1, 0)
    d.array("out", "A V", "(n_q, d_v)", 3, 0, kind="result")
    d.arrow("q", "scores")
    d.arrow("k", "scores", "keys")
    d.arrow("mask", "scores")
    d.arrow("scores", "out")
    d.frame(["scores", "out"], "one head <of h>")
    return d


def test_the_svg_is_an_image_with_its_title_and_alt_text_for_screen_readers(pipeline):
    root = ElementTree.fromstring(pipeline.svg())
    assert root.get("role") == "img"
    title, desc = root.find(f"{SVG}title"), root.find(f"{SVG}desc")
    assert title.text == pipeline.title and desc.text == pipeline.alt  # "&" escaped and read back
    assert root.get("aria-labelledby") == f"{title.get('id')} {desc.get('id')}"


def test_every_label_and_shape_is_text_and_every_arrow_is_drawn(pipeline):
    root = ElementTree.fromstring(pipeline.svg())
    texts = [element.text for element in root.iter(f"{SVG}text")]
    for box in pipeline.boxes.values():
        assert box.label in texts and (not box.detail or box.detail in texts)
    assert "keys" in texts and "one head <of h>" in texts
    assert len([line for line in root.iter(f"{SVG}line") if line.get("marker-end")]) == len(pipeline.arrows) == 4


def test_every_colour_comes_from_the_theme_with_a_light_fallback(pipeline):
    text = pipeline.svg()
    colours = re.findall(r"(?:fill|stroke): ([^;\"]+)", text)
    plain = [c for c in colours if not c.startswith(("var(--attn-dg-", "url(#", "none"))]
    assert plain == []
    assert {f"var({variable}, {fallback})" for variable, fallback in PALETTE.values()} >= {
        c for c in colours if c.startswith("var(")}


def test_a_box_kind_shows_in_its_outline_not_only_its_colour(pipeline):
    root = ElementTree.fromstring(pipeline.svg())
    rects = {rect.get("style"): rect for rect in root.iter(f"{SVG}rect")}
    styles = list(rects)
    assert any("stroke-dasharray: 5 3" in style for style in styles)  # the weight
    assert any(style.startswith("fill: url(#") for style in styles)  # the hatched mask
    assert sum(rect.get("rx") == "18" for rect in root.iter(f"{SVG}rect")) == 1  # the one operation is rounded
    result_outline = [rect for rect in root.iter(f"{SVG}rect") if rect.get("style").startswith("fill: none; stroke")
                      and rect.get("rx") == "2"]
    assert len(result_outline) == 1  # the result's second outline


def test_two_diagrams_on_one_page_do_not_share_ids(pipeline):
    other = Diagram(pipeline.title, pipeline.alt, columns=pipeline.columns, rows=pipeline.rows,
                    boxes=dict(pipeline.boxes), arrows=pipeline.arrows[:-1], frames=list(pipeline.frames))
    first, second = (ElementTree.fromstring(d.svg()) for d in (pipeline, other))  # one arrow apart
    assert first.find(f"{SVG}title").get("id") != second.find(f"{SVG}title").get("id")
    translated = Diagram("一個頭的注意力", pipeline.alt, columns=pipeline.columns, rows=pipeline.rows,
                         boxes=dict(pipeline.boxes), arrows=list(pipeline.arrows), frames=list(pipeline.frames))
    assert ElementTree.fromstring(translated.svg()).find(f"{SVG}title").get("id") != first.find(f"{SVG}title").get("id")


def test_drawing_another_diagram_first_does_not_change_a_diagrams_svg(pipeline):
    before = pipeline.svg()
    other = Diagram("Softmax", "The scores go through a softmax.", columns=2, rows=1)
    other.array("s", "S", "(n_q, n_k)", 0, 0)
    other.op("softmax", "softmax", 1, 0)
    other.arrow("s", "softmax")
    for _ in range(3):
        other.svg()  # as the zh-Hant version of a figure, drawn in the same process
    assert pipeline.svg() == before
    assert pipeline.ident in before and other.ident not in before


def test_the_pdf_is_a_vector_drawing_made_the_same_every_time(pipeline):
    pdf = pipeline.pdf()
    assert pdf.startswith(b"%PDF") and pdf == pipeline.pdf()
    assert b"/Subtype /Image" not in pdf  # drawn, not a picture
    bundle = pipeline._repr_mimebundle_()
    assert base64.b64decode(bundle["application/pdf"]) == pdf
    assert bundle["text/plain"] == f"{pipeline.title}: {pipeline.alt}"


@pytest.mark.parametrize(("call", "words"), [
    (lambda d: d.array("q", "again", "()", 1, 0), "key: a box named 'q' is already"),
    (lambda d: d.array("x", "X", "()", 4, 0), "column, row: (4, 0) is outside the 4 x 2 grid"),
    (lambda d: d.array("x", "X", "()", 1, 0, kind="tensor"), "kind must be array, weight, mask or result"),
    (lambda d: d.arrow("q", "nowhere"), "arrow: no box named 'nowhere'"),
    (lambda d: d.frame(["q", "nowhere"], "f"), "frame: no box named 'nowhere'"),
])
def test_a_wrong_call_names_what_is_wrong(pipeline, call, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        call(pipeline)


def test_a_diagram_needs_words_for_those_who_cannot_see_it():
    with pytest.raises(ValueError, match="needs a title and an alt text"):
        Diagram("Attention", " ", columns=1, rows=1)


def test_a_pattern_is_a_grid_of_filled_and_empty_squares_in_both_renderers():
    d = Diagram("Two masks", "A causal and a padding mask, as grids.", columns=2, rows=1)
    d.pattern("causal", "causal", [[1, 0], [1, 1]], 0, 0)
    d.pattern("padding", "padding", [[True, False], [True, False]], 1, 0)
    d.arrow("causal", "padding")
    root = ElementTree.fromstring(d.svg())
    squares = [rect for rect in root.iter(f"{SVG}rect") if "stroke-width: 0.8" in rect.get("style")]
    ink, paper = (f"fill: var({variable}, {fallback})" for variable, fallback in (PALETTE["ink"], PALETTE["paper"]))
    assert [rect.get("style").split(";")[0] for rect in squares] == [ink, paper, ink, ink, ink, paper, ink, paper]
    assert {"causal", "padding"} <= {element.text for element in root.iter(f"{SVG}text")}
    assert d.pdf().startswith(b"%PDF") and b"/Subtype /Image" not in d.pdf()
    test_every_colour_comes_from_the_theme_with_a_light_fallback(d)


@pytest.mark.parametrize("cells", [[], [[]], [[1, 0], [1]]])
def test_a_pattern_needs_a_rectangular_grid(cells):
    d = Diagram("Mask", "A mask.", columns=1, rows=1)
    with pytest.raises(ValueError, match="cells: a pattern needs a non-empty rectangular grid"):
        d.pattern("m", "M", cells, 0, 0)
