"""Trained weights round-trip through the package's data files, byte-reproducibly."""

import numpy as np
import pytest

from attnbook.learning.store import load_trained, named_leaves, save_trained, trained_path
from attnbook.transformer import init_encoder_layer


def test_a_saved_tree_loads_back_equal_into_the_template_structure(tmp_path):
    params = (init_encoder_layer(4, 8, seed=0), [np.arange(3.0)])
    save_trained("layer", params, {"loss": [1.0, 0.5]}, directory=tmp_path)
    loaded, record = load_trained("layer", (init_encoder_layer(4, 8, seed=1), [np.zeros(3)]), directory=tmp_path)
    assert record == {"loss": [1.0, 0.5]}
    assert type(loaded[0]) is type(params[0])
    for (name, want), (name_got, got) in zip(named_leaves(params), named_leaves(loaded)):
        assert name == name_got
        np.testing.assert_array_equal(got, want)


def test_saving_the_same_arrays_twice_writes_identical_bytes(tmp_path):
    params = init_encoder_layer(4, 8, seed=0)
    save_trained("a", params, {}, directory=tmp_path)
    first = trained_path("a", ".npz", tmp_path).read_bytes()
    save_trained("a", params, {}, directory=tmp_path)
    assert trained_path("a", ".npz", tmp_path).read_bytes() == first


def test_a_template_of_another_shape_is_refused_with_the_leaf_named(tmp_path):
    save_trained("layer", init_encoder_layer(4, 8, seed=0), {}, directory=tmp_path)
    with pytest.raises(ValueError, match="feed_forward.w_1 has shape"):
        load_trained("layer", init_encoder_layer(4, 16, seed=0), directory=tmp_path)


def test_a_tree_holding_something_else_than_arrays_names_where():
    with pytest.raises(TypeError, match=r"not dict \(at 1\)"):
        named_leaves((np.ones(1), {"x": 1}))
