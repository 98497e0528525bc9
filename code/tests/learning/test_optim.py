"""attnbook.learning.optim: the steps refuse parameters that are not a NamedTuple of arrays, walk nested parameter
trees (naming the path of a mismatch), the Noam schedule and clipping by the global norm."""

import math
import re
from typing import NamedTuple

import numpy as np
import pytest

from attnbook.learning.optim import adam_step, init_adam, sgd_step


class Pair(NamedTuple):
    w: np.ndarray
    b: np.ndarray


@pytest.mark.parametrize("container", [list, tuple])
def test_sgd_and_adam_refuse_plain_sequences_instead_of_mangling_them(container):
    params = container([np.zeros(2)])
    with pytest.raises(TypeError, match=r"^params must be a NamedTuple of arrays, got " + container.__name__):
        sgd_step(params, container([np.ones(2)]))
    with pytest.raises(TypeError, match=r"^params must be a NamedTuple of arrays"):
        adam_step(params, container([np.ones(2)]), init_adam(Pair(np.zeros(2), np.zeros(1))))


def test_a_step_keeps_the_named_tuple_type_and_shapes():
    params = Pair(np.zeros(2), np.zeros(1))
    grads = Pair(np.ones(2), -np.ones(1))
    stepped = sgd_step(params, grads, learning_rate=0.5)
    assert type(stepped) is Pair
    np.testing.assert_array_equal(stepped.w, [-0.5, -0.5])
    np.testing.assert_array_equal(stepped.b, [0.5])
    moved, state = adam_step(params, grads, init_adam(params))
    assert type(moved) is Pair and moved.w.shape == (2,) and moved.b.shape == (1,)


# --- parameter trees, the Noam schedule, clipping ---------------------------------------------------------


class Model(NamedTuple):
    embedding: np.ndarray
    layers: tuple
    head: list


def nested(seed=0):
    """A model: an array, a tuple of encoder layers (NamedTuples holding NamedTuples and tuples), a list."""
    from attnbook import init_encoder_layer

    rng = np.random.default_rng(seed)
    layers = tuple(init_encoder_layer(4, 8, seed=seed + i) for i in range(2))
    return Model(rng.standard_normal((5, 4)), layers, [rng.standard_normal(4), rng.standard_normal((4, 3))])


def test_tree_leaves_and_tree_map_walk_nested_named_tuples_tuples_and_lists():
    from attnbook.learning.optim import tree_leaves, tree_map

    model = nested()
    assert len(tree_leaves(model)) == 1 + 2 * 16 + 2
    doubled = tree_map(lambda a: 2 * a, model)
    assert type(doubled) is Model and type(doubled.layers[1]) is type(model.layers[1])
    assert type(doubled.layers[0].norm_1) is tuple and type(doubled.head) is list
    for a, b in zip(tree_leaves(doubled), tree_leaves(model), strict=True):
        np.testing.assert_array_equal(a, 2 * b)


def test_adam_on_a_nested_tree_equals_adam_leaf_by_leaf():
    from attnbook.learning.optim import tree_leaves

    params, grads = nested(0), nested(7)
    stepped, state = adam_step(params, grads, init_adam(params), learning_rate=0.1)
    stepped, state = adam_step(stepped, nested(8), state, learning_rate=0.1)
    for w, g_1, g_2, new in zip(tree_leaves(params), tree_leaves(grads), tree_leaves(nested(8)),
                                tree_leaves(stepped), strict=True):
        leaf = Pair(w, np.zeros(1))
        leaf, leaf_state = adam_step(leaf, Pair(g_1, np.zeros(1)), init_adam(leaf), learning_rate=0.1)
        leaf, _ = adam_step(leaf, Pair(g_2, np.zeros(1)), leaf_state, learning_rate=0.1)
        np.testing.assert_array_equal(new, leaf.w)
    assert state.step == 2


def test_sgd_on_a_nested_tree_keeps_the_structure():
    params = nested(0)
    stepped = sgd_step(params, params, learning_rate=1.0)
    assert type(stepped.layers[0].feed_forward).__name__ == "FeedForwardWeights"
    np.testing.assert_array_equal(stepped.layers[1].norm_2[0], 0.0)


def test_a_mismatched_tree_is_refused_naming_the_path():
    params = nested(0)
    wrong_leaf = params._replace(layers=(params.layers[0], params.layers[1]._replace(
        feed_forward=params.layers[1].feed_forward._replace(w_1=np.zeros((4, 9))))))
    with pytest.raises(ValueError, match=re.escape(
            "grads[1][1][1][0] has shape (4, 9) but params[1][1][1][0] has shape (4, 8) "
            "(the leaf params.layers[1].feed_forward.w_1)")):
        adam_step(params, wrong_leaf, init_adam(params))
    with pytest.raises(TypeError, match=re.escape(
            "grads[2] is a tuple of 2 but params[2] is a list of 2; grads must have the structure of params")):
        sgd_step(params, params._replace(head=tuple(params.head)))
    with pytest.raises(TypeError, match=re.escape("grads[1] is a tuple of 1 but params[1] is a tuple of 2")):
        sgd_step(params, params._replace(layers=params.layers[:1]))


def test_noam_rate_rises_linearly_peaks_at_the_warmup_and_decays_as_one_over_the_root():
    from attnbook.learning.optim import noam_rate

    rates = [noam_rate(step, 64, 100) for step in range(1, 1001)]
    assert int(np.argmax(rates)) + 1 == 100
    assert rates[99] == pytest.approx(1 / math.sqrt(64 * 100))
    assert rates[49] == pytest.approx(rates[99] / 2)  # linear warm-up
    assert rates[399] == pytest.approx(rates[99] / 2)  # 1/sqrt(step) after it
    with pytest.raises(ValueError, match="step must be"):
        noam_rate(0, 64, 100)


def test_clip_by_global_norm_leaves_a_small_gradient_alone_and_scales_a_large_one():
    from attnbook.learning.optim import clip_by_global_norm, tree_leaves

    small = Pair(np.array([0.3, 0.4]), np.zeros(1))
    clipped, norm = clip_by_global_norm(small, max_norm=1.0)
    assert clipped is small and norm == pytest.approx(0.5)
    large = nested(3)
    clipped, norm = clip_by_global_norm(large, max_norm=1.0)
    total = math.sqrt(sum(float(np.sum(leaf**2)) for leaf in tree_leaves(clipped)))
    assert norm > 1 and total == pytest.approx(1.0)
    ratio = tree_leaves(clipped)[0] / tree_leaves(large)[0]
    np.testing.assert_allclose(ratio, 1 / norm)  # every leaf by the same factor
    with pytest.raises(ValueError, match="max_norm must be a positive finite number, got 0"):
        clip_by_global_norm(large, 0)
