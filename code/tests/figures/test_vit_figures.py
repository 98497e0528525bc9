"""The figures of the Vision Transformer's analyses: a digit with its attention maps, and the position grid."""

import numpy as np
import pytest

from attnbook.figures.vit import plot_cls_attention, plot_position_similarity


def test_the_figures_draw_a_digit_with_its_attention_and_the_position_grid():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plot_cls_attention(np.eye(8) * 16, np.full((3, 16), 1 / 16))
    assert [ax.get_title() for ax in fig.axes[:4]] == ["digit", "map 1", "map 2", "map 3"]
    plt.close(fig)
    with pytest.raises(ValueError, match="titles has 1 entries but maps has 3 rows"):
        plot_cls_attention(np.eye(8), np.ones((3, 16)), titles=["one"])
    fig = plot_position_similarity(np.eye(16), 4)
    assert len(fig.axes) == 17
    plt.close(fig)
