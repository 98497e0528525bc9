"""The figures' words in the book's other languages (attnbook.figures.languages)."""

from __future__ import annotations

import base64
import hashlib
import io
import json

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from attnbook import figure_to_img_html, plot_convex_combination, plot_heatmap  # noqa: E402
from attnbook.book.static_widgets import Control, StaticPage, static_widget_html  # noqa: E402
from attnbook.figures import languages  # noqa: E402
from attnbook.figures.diagrams import Diagram  # noqa: E402

CATALOG = r'''msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"

msgid "head {0} of layer {1}"
msgstr "第 {1} 層的第 {0} 頭"

msgid "key position j"
msgstr "鍵的位置 j"

msgid "values $v_j$"
msgstr "值 $v_j$"

msgid "step {0}"
msgstr "第 {0} 步"

msgid "{0} dots"
msgstr "{0} 個點"

msgid "width"
msgstr "寬度"

msgid "Softmax"
msgstr "軟最大值"

msgid "encoder layer, repeated N times"
msgstr "編碼器層，重複 N 次"

msgid "embed"
msgstr "嵌入"

#, fuzzy
msgid "query position i"
msgstr "查詢位置 i"
'''


@pytest.fixture
def zh(tmp_path, monkeypatch):
    catalog = tmp_path / "figures.po"
    catalog.write_text(CATALOG, encoding="utf-8")
    monkeypatch.setenv(languages.ENV, f"zh_TW={catalog}")
    yield "zh_TW"
    plt.close("all")


def png(fig, dpi: int = 60) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


def heatmap_figure():
    fig, (left, right) = plt.subplots(1, 2, figsize=(6, 3))
    plot_heatmap([[0.8, 0.2], [0.3, 0.7]], ax=left, title="head 2 of layer 12")
    plot_convex_combination([[0, 0], [2, 0], [0, 2]], [0.5, 0.25, 0.25], ax=right)
    right.set_xticks([0, 1, 2], ["step 0", "step 1", "step 2"])  # fixed tick labels: set again at draw time
    return fig


def test_messages_hold_placeholders_for_numbers_and_quoted_samples_and_keep_math():
    assert languages.message_of("4,096 keys at $d_k = 64$, 'the cat' and -1.5e-3") == (
        "{0} keys at $d_k = 64$, {1} and {2}", ["4,096", "'the cat'", "-1.5e-3"])
    assert languages.message_of("the model's 3 heads") == ("the model's {0} heads", ["3"])
    for wordless in ("0.25", "$\\sqrt{d_k}$", "q0", "k", "(n_q, d_k)", "—"):
        assert languages.message_of(wordless) == (None, [])
    assert languages.fill("$x^{0}$ at {0}", ["7"]) == "$x^{0}$ at 7"


def test_a_figure_drawn_in_another_language_has_its_words_and_the_english_drawing_is_unchanged(zh):
    fig = heatmap_figure()
    before = hashlib.sha256(png(fig)).hexdigest()
    with languages.drawn_in(fig, zh) as (used, missing):
        titles = [ax.get_title() for ax in fig.axes]
        ticks = [label.get_text() for label in fig.axes[1].get_xticklabels()]
        translated = png(fig)
        ticks_drawn = [label.get_text() for label in fig.axes[1].get_xticklabels()]
    assert titles[0] == "第 12 層的第 2 頭" and fig.axes[0].get_xlabel() == "key position j"
    assert ticks_drawn == ["第 0 步", "第 1 步", "第 2 步"], ticks
    assert {"head {0} of layer {1}", "key position j", "query position i", "values $v_j$", "step {0}",
            "convex hull of the values", "dimension {0}"} <= used
    assert missing == []  # the CJK font has every glyph
    assert hashlib.sha256(png(fig)).hexdigest() == before
    assert translated != png(fig)
    assert fig.axes[0].get_title() == "head 2 of layer 12"
    assert [label.get_text() for label in fig.axes[1].get_xticklabels()] == ["step 0", "step 1", "step 2"]


def test_a_fuzzy_or_missing_translation_leaves_the_english_words(zh):
    assert languages.translate("query position i", zh) == "query position i"  # fuzzy: not used
    assert languages.translate("head 3 of layer 1", zh) == "第 1 層的第 3 頭"
    assert languages.translate("no such words 5", zh) == "no such words 5"


def test_outside_the_builds_nothing_is_drawn_twice(monkeypatch):
    monkeypatch.delenv(languages.ENV, raising=False)
    assert languages.languages() == []
    tag = figure_to_img_html(heatmap_figure(), alt="two panels")
    assert type(tag) is str and not languages.install_formatter()


def test_an_interactive_state_carries_its_picture_and_alt_text_in_each_language(zh):
    fig = heatmap_figure()
    english = png(fig, dpi=80)  # figure_to_img_html's
    tag = figure_to_img_html(fig, alt="head 2 of layer 12")
    assert isinstance(tag, languages.Translated) and base64.b64encode(english).decode() in tag
    assert 'alt="head 2 of layer 12"' in tag
    assert 'alt="第 12 層的第 2 頭"' in tag.translations[zh]
    assert tag.translations[zh].split('"')[1] != tag.split('"')[1]  # another picture
    assert "head {0} of layer {1}" in tag.messages and "key position j" in tag.messages


def test_a_static_page_in_another_language_has_its_controls_readouts_and_pictures_translated(zh):
    def draw(n):
        fig = plt.figure(figsize=(1, 1))
        fig.suptitle(f"step {n}")
        return figure_to_img_html(fig, alt=f"{n} dots"), f"{n} dots"

    page = static_widget_html([Control("width", (1, 2), 1)], draw)
    assert isinstance(page, languages.Translated)
    assert '<label for="' in page and ">width</label>" in page and "1 dots" in page
    chinese = page.translations[zh]
    states = json.loads(chinese.split('class="attn-static-states">')[1].split("</script>")[0])
    assert ">寬度</label>" in chinese and "1 個點" in chinese and "dots" not in chinese
    assert [state[1:] for state in states.values()] == [["1 個點", "1 個點"], ["2 個點", "2 個點"]]
    assert all(state[0] not in page for state in states.values())  # each picture drawn in Chinese
    assert {"width", "{0} dots", "step {0}"} <= page.messages
    assert page.missing == set() and "missing_glyphs" not in page.payload("text/html")

    class View:
        def _repr_mimebundle_(self, **kwargs):
            return {"text/plain": "a slider"}

    bundle = StaticPage(View(), page)._repr_mimebundle_()
    assert bundle[languages.MIME]["languages"][zh]["text/html"] == chinese
    assert "{0} dots" in bundle[languages.MIME]["messages"]


def test_a_diagram_in_another_language_has_its_words_in_its_svg_and_pdf(zh):
    diagram = Diagram("Softmax", "The scores go through a softmax.", columns=2, rows=1)
    diagram.array("s", "S", "(n_q, n_k)", 0, 0)
    diagram.op("w", "width", 1, 0)
    entry = diagram._repr_mimebundle_()[languages.MIME]
    svg = entry["languages"][zh]["text/html"]
    assert "<title" in svg and ">軟最大值</title>" in svg and ">寬度</text>" in svg
    assert base64.b64decode(entry["languages"][zh]["application/pdf"]).startswith(b"%PDF")
    assert entry["messages"] == ["Softmax", "The scores go through a softmax.", "width"]


def test_symbols_the_chinese_font_lacks_and_italic_chinese_are_drawn_from_a_font_that_has_them(zh):
    # matplotlib falls back glyph by glyph only across the families a text names: ⁽⁰⁾ and ᵀ are not in Noto CJK,
    # and an italic sans-serif text would resolve to DejaVu Sans Oblique, which has no Chinese
    diagram = Diagram("Encoder", "An embedding, then N layers.", columns=1, rows=2)
    diagram.array("x", "embed", "X⁽⁰⁾: (n, d)", 0, 0)
    diagram.op("e", "H Eᵀ", 0, 1)
    diagram.frame(["x", "e"], "encoder layer, repeated N times")
    entry = diagram._repr_mimebundle_()[languages.MIME]
    assert "missing_glyphs" not in entry, entry.get("missing_glyphs")
    fig, ax = plt.subplots()
    ax.set_title("encoder layer, repeated N times", style="italic")
    ax.set_xlabel("X⁽⁰⁾ Eᵀ", family="monospace")
    before = png(fig)
    with languages.drawn_in(fig, zh) as (used, missing):
        png(fig)
    assert missing == [], missing
    assert png(fig) == before and ax.title.get_fontfamily() == ["sans-serif"]


def test_the_kernel_formatter_adds_each_language_s_drawing_to_a_displayed_figure(zh):
    from IPython.core.interactiveshell import InteractiveShell
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    shell = InteractiveShell.instance()
    try:
        assert languages.install_formatter(shell)
        set_matplotlib_formats("png")  # after: setting up the inline backend drops every formatter's Figure printer
        fig = heatmap_figure()
        data, _ = shell.display_formatter.format(fig)
        entry = data[languages.MIME]
        assert set(entry["languages"]) == {zh}
        chinese = base64.b64decode(entry["languages"][zh]["image/png"])
        assert chinese.startswith(b"\x89PNG") and chinese != base64.b64decode(data["image/png"])
        assert "head {0} of layer {1}" in entry["messages"] and "missing_glyphs" not in entry
    finally:
        shell.display_formatter.formatters.pop(languages.MIME, None)
        InteractiveShell.clear_instance()


def test_a_language_whose_font_is_missing_is_refused_by_name(zh, monkeypatch):
    monkeypatch.setitem(languages.FONTS, zh, ("No Such Font TC", "No Such Mono TC"))
    with pytest.raises(RuntimeError, match="need the font 'No Such Font TC'"):
        with languages.fonts_of(zh):
            pass


def test_a_quoted_label_the_catalog_translates_is_translated_inside_a_translated_sentence(zh):
    assert languages.translate("'width' has 3 dots", zh) == "'width' has 3 dots"  # the sentence: no translation
    assert languages.translate("4 dots", zh) == "4 個點"
    assert languages.translate("'width' dots", zh) == "「寬度」 個點"
    assert languages.translate("'step 2' dots", zh) == "「第 2 步」 個點"
    assert languages.translate("'no such label' dots", zh) == "'no such label' 個點"


def test_a_quoted_value_becomes_its_translation_in_chinese_quotation_marks(tmp_path, monkeypatch):
    catalog = tmp_path / "figures.po"
    catalog.write_text(CATALOG + '\nmsgid "the frame {0} reads"\nmsgstr "框上寫著 {0}"\n', encoding="utf-8")
    monkeypatch.setenv(languages.ENV, f"zh_TW={catalog}")
    assert languages.translate("the frame 'step 4' reads", "zh_TW") == "框上寫著 「第 4 步」"
    assert languages.translate('the frame "a sample" reads', "zh_TW") == '框上寫著 "a sample"'
