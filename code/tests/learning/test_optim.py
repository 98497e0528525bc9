"""attnbook.learning.optim: the steps refuse parameters that are not a NamedTuple of arrays."""

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
