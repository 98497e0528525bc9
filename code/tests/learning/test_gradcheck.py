"""The gradient check finds a wrong backward pass and passes a right one, leaf by leaf."""

import numpy as np
import pytest

from attnbook import feed_forward, init_feed_forward
from attnbook.learning.gradcheck import gradient_errors, relative_error
from attnbook.learning.layers import feed_forward_vjp


def _problem():
    rng = np.random.default_rng(0)
    x, dy = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    weights = init_feed_forward(4, 6, seed=1)
    _, back = feed_forward_vjp(x, weights)
    return (weights, x), back(dy), lambda tree: float(np.sum(feed_forward(tree[1], tree[0]) * dy))


def test_the_package_backward_pass_passes_on_every_leaf():
    tree, grads, loss = _problem()
    errors = gradient_errors(loss, tree, grads)
    assert sorted(errors) == ["0.b_1", "0.b_2", "0.w_1", "0.w_2", "1"]
    assert max(errors.values()) < 1e-8


def test_a_gradient_missing_a_term_fails_on_that_leaf_only():
    tree, (d_weights, dx), loss = _problem()
    wrong = d_weights._replace(w_1=d_weights.w_1 * 0.5)
    errors = gradient_errors(loss, tree, (wrong, dx))
    assert errors["0.w_1"] > 0.1 and max(v for k, v in errors.items() if k != "0.w_1") < 1e-8


def test_grads_of_another_structure_are_refused_with_where():
    tree, (d_weights, dx), loss = _problem()
    with pytest.raises((TypeError, ValueError), match=r"\[1\]"):
        gradient_errors(loss, tree, (d_weights, dx[:2]))


def test_the_floor_makes_a_zero_gradient_error_absolute():
    assert relative_error([1e-9], [0.0]) == pytest.approx(1e-7)
    assert relative_error([1.0], [0.0]) == 1.0
