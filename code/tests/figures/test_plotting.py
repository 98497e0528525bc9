"""Tests of attnbook.figures.plotting: what the heatmap and the convex-combination figure actually draw."""

import re

import hypothesis.strategies as st
import matplotlib.pyplot as plt
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis.extra.numpy import arrays
from matplotlib.patches import Polygon

from attnbook import COLOUR_MAP, plot_convex_combination, plot_heatmap, softmax


def cell_texts(ax):
    """{(row, col): text} of the numbers written in the heatmap cells."""
    return {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts}


# --- plot_heatmap ---------------------------------------------------------------------------------


def test_heatmap_writes_each_value_in_its_cell_with_two_decimals_by_default():
    ax = plot_heatmap([[0.8044, 0.1956], [0.25, 0.75]])
    assert cell_texts(ax) == {(0, 0): "0.80", (0, 1): "0.20", (1, 0): "0.25", (1, 1): "0.75"}


@pytest.mark.parametrize(("fmt", "expected"), [(".3f", "0.804"), (".1%", "80.4%"), (".2e", "8.04e-01")])
def test_heatmap_uses_the_given_format(fmt, expected):
    ax = plot_heatmap([[0.8044, 0.1956]], fmt=fmt)
    assert cell_texts(ax)[(0, 0)] == expected
    assert cell_texts(ax)[(0, 1)] == format(0.1956, fmt)


def test_heatmap_labels_axes_and_ticks():
    ax = plot_heatmap(np.eye(2), row_labels=["q1", "q2"], col_labels=["k1", "k2"], title="weights")
    assert ax.get_xlabel() == "key position j"
    assert ax.get_ylabel() == "query position i"
    assert ax.get_title() == "weights"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["k1", "k2"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["q1", "q2"]


def test_heatmap_default_tick_labels_count_from_one():
    ax = plot_heatmap(np.zeros((2, 3)))
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1", "2"]


def test_heatmap_axis_labels_can_be_changed():
    ax = plot_heatmap(np.eye(2), xlabel="source", ylabel="target")
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("source", "target")


def test_heatmap_uses_cividis_by_default():
    assert COLOUR_MAP == "cividis"
    ax = plot_heatmap(np.eye(2))
    assert ax.images[0].get_cmap().name == "cividis"


def test_heatmap_uses_a_given_colour_map():
    ax = plot_heatmap(np.eye(2), cmap="viridis")
    assert ax.images[0].get_cmap().name == "viridis"


def test_heatmap_colour_range_defaults_to_zero_one_and_none_uses_the_data():
    assert plot_heatmap([[0.2, 0.4]]).images[0].get_clim() == (0.0, 1.0)
    assert plot_heatmap([[-3.0, 5.0]], vmin=None, vmax=None).images[0].get_clim() == (-3.0, 5.0)


def test_heatmap_of_a_constant_matrix_with_data_range_gets_a_unit_range():
    assert plot_heatmap([[2.0, 2.0]], vmin=None, vmax=None).images[0].get_clim() == (2.0, 3.0)


def test_heatmap_text_is_white_on_dark_cells_and_black_on_light_cells():
    ax = plot_heatmap([[0.0, 1.0]])  # cividis: 0 is dark blue, 1 is light yellow
    colours = {round(t.get_position()[0]): t.get_color() for t in ax.texts}
    assert colours == {0: "white", 1: "black"}


def test_heatmap_does_not_annotate_a_nine_by_nine_matrix_by_default():
    assert len(plot_heatmap(np.full((9, 9), 0.5)).texts) == 0
    assert len(plot_heatmap(np.full((2, 9), 0.5)).texts) == 0


def test_heatmap_annotates_an_eight_by_eight_matrix_by_default():
    assert len(plot_heatmap(np.full((8, 8), 0.5)).texts) == 64


def test_heatmap_annotation_can_be_forced_on_and_off():
    assert len(plot_heatmap(np.full((9, 9), 0.5), annotate=True).texts) == 81
    assert len(plot_heatmap(np.eye(2), annotate=False).texts) == 0


def test_heatmap_adds_a_colour_bar_unless_asked_not_to():
    assert len(plot_heatmap(np.eye(2)).figure.axes) == 2
    assert len(plot_heatmap(np.eye(2), colorbar=False).figure.axes) == 1


def test_heatmap_draws_into_a_given_axes_without_a_new_figure():
    _, ax = plt.subplots()
    figures = plt.get_fignums()
    assert plot_heatmap(np.eye(2), ax=ax, colorbar=False) is ax
    assert plt.get_fignums() == figures
    np.testing.assert_array_equal(ax.images[0].get_array(), np.eye(2))


def test_heatmap_refuses_a_one_dimensional_input():
    with pytest.raises(ValueError, match=re.escape(
        "matrix has shape (3,); plot_heatmap draws a 2-D matrix (rows = queries, columns = keys)"
    )):
        plot_heatmap(np.ones(3))


def test_heatmap_refuses_a_three_dimensional_input():
    with pytest.raises(ValueError, match=r"^matrix has shape \(2, 2, 2\); plot_heatmap draws a 2-D matrix"):
        plot_heatmap(np.ones((2, 2, 2)))


def test_heatmap_refuses_the_wrong_number_of_row_labels():
    with pytest.raises(ValueError, match=r"^row_labels has 1 labels but the matrix has 2 rows$"):
        plot_heatmap(np.ones((2, 3)), row_labels=["q1"])


def test_heatmap_refuses_the_wrong_number_of_column_labels():
    with pytest.raises(ValueError, match=r"^col_labels has 2 labels but the matrix has 3 columns$"):
        plot_heatmap(np.ones((2, 3)), col_labels=["k1", "k2"])


def test_heatmap_refuses_nan():
    with pytest.raises(ValueError, match=r"^matrix contains NaN at index \(0, 1\)"):
        plot_heatmap([[0.5, np.nan]])


# --- plot_convex_combination ----------------------------------------------------------------------


def output_star(ax):
    """The single scatter point labelled as the output."""
    (star,) = [c for c in ax.collections if c.get_label().startswith("output")]
    offsets = np.asarray(star.get_offsets())  # (1, 2)
    assert offsets.shape == (1, 2)
    return offsets[0]


def test_convex_combination_places_the_output_star_at_weights_times_values():
    values = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]])  # (3, 2)
    weights = np.array([0.2, 0.5, 0.3])  # (3,)
    ax = plot_convex_combination(values, weights)
    np.testing.assert_allclose(output_star(ax), [1.0, 0.6], rtol=1e-15)


def test_convex_combination_draws_the_values_their_labels_and_their_hull():
    values = np.array([[0.0, 0.0], [2.0, 0.0], [2.0, 2.0], [0.0, 2.0], [1.0, 1.0]])  # (5, 2), one inside
    ax = plot_convex_combination(values, np.full(5, 0.2), value_labels=list("abcde"), title="hull")
    (points,) = [c for c in ax.collections if c.get_label().startswith("values")]
    np.testing.assert_array_equal(points.get_offsets(), values)
    assert [t.get_text() for t in ax.texts] == list("abcde")
    (hull,) = [p for p in ax.patches if isinstance(p, Polygon)]
    corners = {tuple(p) for p in hull.get_xy().tolist()}
    assert corners == {(0.0, 0.0), (2.0, 0.0), (2.0, 2.0), (0.0, 2.0)}  # the interior point is not a corner
    assert ax.get_title() == "hull"


def test_convex_combination_of_collinear_values_draws_a_segment_not_a_polygon():
    values = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])  # (3, 2)
    ax = plot_convex_combination(values, [0.5, 0.25, 0.25])
    assert not [p for p in ax.patches if isinstance(p, Polygon)]
    (segment,) = ax.lines
    np.testing.assert_array_equal(segment.get_xydata(), [[0.0, 0.0], [2.0, 2.0]])


@settings(max_examples=25)
@given(data=st.data())
def test_convex_combination_star_is_at_weights_times_values_and_in_view(data):
    n_k = data.draw(st.integers(1, 6))
    values = data.draw(arrays(np.float64, (n_k, 2), elements=st.floats(-5, 5)))
    weights = softmax(data.draw(arrays(np.float64, (n_k,), elements=st.floats(-5, 5))))
    ax = plot_convex_combination(values, weights)
    star = output_star(ax)
    np.testing.assert_allclose(star, weights @ values, rtol=1e-12, atol=1e-12)
    (x_lo, x_hi), (y_lo, y_hi) = ax.get_xlim(), ax.get_ylim()
    assert x_lo < star[0] < x_hi and y_lo < star[1] < y_hi
    plt.close("all")


def test_convex_combination_refuses_a_weight_count_that_differs_from_the_values():
    with pytest.raises(ValueError, match=re.escape(
        "weights has shape (3,) but values has shape (2, 2); expected one weight per value row"
    )):
        plot_convex_combination([[1.0, 0.0], [0.0, 1.0]], [0.5, 0.5, 0.0])


def test_convex_combination_refuses_two_dimensional_weights():
    with pytest.raises(ValueError, match=re.escape("weights has shape (1, 2) but values has shape (2, 2)")):
        plot_convex_combination([[1.0, 0.0], [0.0, 1.0]], [[0.5, 0.5]])


@pytest.mark.parametrize("shape", [(3, 3), (3,), (2, 2, 2)])
def test_convex_combination_refuses_values_that_are_not_points_in_the_plane(shape):
    with pytest.raises(ValueError, match=re.escape(f"values has shape {shape}; expected (n_k, 2) points in the plane")):
        plot_convex_combination(np.ones(shape), np.ones(3))


def test_convex_combination_refuses_the_wrong_number_of_value_labels():
    with pytest.raises(ValueError, match=r"^value_labels has 1 labels but values has 3 rows$"):
        plot_convex_combination(np.ones((3, 2)), np.full(3, 1 / 3), value_labels=["a"])


def test_convex_combination_refuses_nan_weights():
    with pytest.raises(ValueError, match=r"^weights contains NaN at index \(1,\)"):
        plot_convex_combination(np.ones((2, 2)), [0.5, np.nan])


# --- figure_to_img_html ---------------------------------------------------------------------------


def test_figure_becomes_a_png_img_tag_with_escaped_alt_text_and_is_closed():
    import base64

    from attnbook import figure_to_img_html

    fig = plt.figure(figsize=(1, 1))
    tag = figure_to_img_html(fig, alt='Weights "A" < 1')
    assert 'alt="Weights &quot;A&quot; &lt; 1"' in tag
    data = re.search(r'src="data:image/png;base64,([^"]+)"', tag).group(1)
    assert base64.b64decode(data).startswith(b"\x89PNG")
    assert not plt.fignum_exists(fig.number)


def test_figure_to_img_html_refuses_an_empty_alt_text_and_a_non_figure():
    from attnbook import figure_to_img_html

    with pytest.raises(ValueError, match="alt must describe the figure"):
        figure_to_img_html(plt.figure(), alt="   ")
    with pytest.raises(TypeError, match="fig must be a matplotlib Figure, got Axes"):
        figure_to_img_html(plt.figure().add_subplot(), alt="axes")


def test_a_figure_laid_out_by_tight_layout_is_drawn_once_into_its_image(monkeypatch):
    """figure_to_img_html draws each state of an interactive figure: one draw, not a layout draw first."""
    from matplotlib.figure import Figure

    from attnbook import figure_to_img_html

    fig, axes = plt.subplots(1, 2, figsize=(4, 2))
    for ax in axes:
        plot_heatmap(np.eye(2), ax=ax, title="identity")
    fig.tight_layout()
    positions = [ax.get_position().bounds for ax in axes]
    draws = []
    original = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: (draws.append(1), original(self, renderer))[1])
    assert figure_to_img_html(fig, alt="two identity matrices").startswith('<img src="data:image/png;base64,')
    assert len(draws) == 1
    assert [ax.get_position().bounds for ax in axes] == positions, "the tight layout must be kept"
