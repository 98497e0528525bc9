"""Tests of attnbook.learning.gradients: every backward pass against central finite differences (float64),
the softmax VJP against the explicit Jacobian, masks, broadcasting, the saturation bound, and errors."""

import math
import re

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis.extra.numpy import arrays

from attnbook import causal_mask, scaled_dot_product_attention, softmax, softmax_jacobian
from attnbook.learning.gradients import (
    attention_backward,
    cross_entropy,
    cross_entropy_backward,
    linear_backward,
    score_gradient,
    softmax_backward,
)
from attnbook.measure.probes import numerical_jacobian



def numerical_gradient(loss, x, eps=1e-6):
    """Central differences of the scalar ``loss`` at ``x`` (the package's finite-difference Jacobian)."""
    return numerical_jacobian(loss, x, eps=eps)  # (same shape as x)


def assert_matches_finite_differences(analytic, loss, x, atol=1e-7):
    np.testing.assert_allclose(analytic, numerical_gradient(loss, x), rtol=1e-5, atol=atol)


# --- softmax_backward -----------------------------------------------------------------------------


@st.composite
def weights_and_grad(draw, max_rows=4, max_cols=6, bound=6.0):
    """A softmax output (from bounded logits) and an upstream gradient of the same shape."""
    shape = draw(st.tuples(st.integers(1, max_rows), st.integers(1, max_cols)))
    floats = st.floats(-bound, bound, allow_nan=False, allow_infinity=False)
    logits = draw(arrays(np.float64, shape, elements=floats))
    grad = draw(arrays(np.float64, shape, elements=floats))
    return softmax(logits), grad


@given(weights_and_grad())
def test_softmax_backward_equals_gradient_times_jacobian(case):
    a, g = case
    expected = np.einsum("ri,rij->rj", g, softmax_jacobian(a))  # (rows, n): row vector g times J
    np.testing.assert_allclose(softmax_backward(a, g), expected, atol=1e-12)


@given(weights_and_grad())
def test_softmax_backward_rows_sum_to_zero(case):
    a, g = case
    np.testing.assert_allclose(softmax_backward(a, g).sum(axis=-1), 0.0, atol=1e-12)


@given(weights_and_grad())
def test_saturation_bound_on_the_score_gradient(case):
    # ||dL/ds||_1 <= 2 (1 - max a) (max g - min g): a nearly one-hot softmax passes almost nothing back.
    a, g = case
    lhs = np.abs(softmax_backward(a, g)).sum(axis=-1)
    epsilon = np.sort(a, axis=-1)[..., :-1].sum(axis=-1)  # 1 - max a, computed without cancellation
    rhs = 2 * epsilon * (g.max(axis=-1) - g.min(axis=-1))
    assert np.all(lhs <= rhs + 1e-12)


@pytest.mark.parametrize("shape, axis", [((5,), 0), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1)])
def test_softmax_backward_matches_finite_differences(shape, axis):
    rng = np.random.default_rng(sum(shape) + axis)
    s = rng.standard_normal(shape)
    g = rng.standard_normal(shape)  # the loss L = sum(g * softmax(s)) has dL/da = g

    def loss(x):
        return float(np.sum(g * softmax(x, axis=axis)))

    assert_matches_finite_differences(softmax_backward(softmax(s, axis=axis), g, axis=axis), loss, s)


def test_softmax_backward_along_axis_zero_is_the_transposed_problem():
    rng = np.random.default_rng(3)
    a = softmax(rng.standard_normal((4, 3)), axis=0)
    g = rng.standard_normal((4, 3))
    np.testing.assert_allclose(softmax_backward(a, g, axis=0), softmax_backward(a.T, g.T).T, rtol=1e-15)


def test_masked_positions_and_fully_masked_rows_get_zero_gradient():
    mask = np.array([[True, False, True], [False, False, False]])
    a = softmax(np.array([[0.3, 5.0, -1.0], [1.0, 2.0, 3.0]]), mask=mask)
    ds = softmax_backward(a, np.ones((2, 3)) * [[1.0, 7.0, -2.0]])
    assert ds[0, 1] == 0.0 and np.all(ds[1] == 0.0)
    assert ds[0, 0] != 0.0


def test_uniform_pair_gives_a_quarter():
    np.testing.assert_allclose(softmax_backward([0.5, 0.5], [1.0, 0.0]), [0.25, -0.25], rtol=1e-15)


def test_softmax_backward_keeps_float32():
    a = softmax(np.array([[1.0, 2.0]], dtype=np.float32))
    assert softmax_backward(a, np.ones((1, 2), dtype=np.float32)).dtype == np.float32


@pytest.mark.parametrize(
    "weights, grad, message",
    [
        ([0.5, 0.5], [1.0, 0.0, 0.0], "grad_weights has shape (3,) but weights has shape (2,)"),
        ([1.5, -0.5], [1.0, 0.0], "weights has the negative entry -0.5 at index (1,)"),
        ([0.5, 0.6], [1.0, 0.0], "weights has a slice along axis 0 that sums to 1.1"),
        ([0.5, float("nan")], [1.0, 0.0], "weights contains NaN at index (1,)"),
        ([0.5, 0.5], [1.0, float("inf")], "grad_weights contains +inf at index (1,)"),
    ],
)
def test_softmax_backward_rejects_bad_inputs(weights, grad, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        softmax_backward(weights, grad)


def test_softmax_backward_rejects_a_bad_axis_and_a_scalar():
    with pytest.raises(ValueError, match=re.escape("axis=2 is out of range")):
        softmax_backward([[0.5, 0.5]], [[1.0, 0.0]], axis=2)
    with pytest.raises(ValueError, match="weights is a scalar"):
        softmax_backward(1.0, 1.0)


# --- attention_backward ---------------------------------------------------------------------------


def attention_loss_gradients(q, k, v, g_out, mask=None, scale=None):
    """Analytic and numerical gradients of L = sum(g_out * attention(q, k, v)) for q, k and v."""
    out, w = scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)
    analytic = attention_backward(q, k, v, w, g_out, mask=mask, scale=scale)

    def loss(q_, k_, v_):
        return float(np.sum(g_out * scaled_dot_product_attention(q_, k_, v_, mask=mask, scale=scale).output))

    numerical = (
        numerical_gradient(lambda x: loss(x, k, v), q),
        numerical_gradient(lambda x: loss(q, x, v), k),
        numerical_gradient(lambda x: loss(q, k, x), v),
    )
    return out, analytic, numerical


CASES = {
    # name: (q shape, k shape, v shape, mask builder or None, scale)
    "square, no batch": ((3, 4), (3, 4), (3, 2), None, None),
    "cross-attention, d_v != d_k": ((2, 5), (4, 5), (4, 3), None, None),
    "batch of 2": ((2, 3, 4), (2, 5, 4), (2, 5, 2), None, None),
    "batch and heads": ((2, 3, 4, 2), (2, 3, 4, 2), (2, 3, 4, 3), None, None),
    "k and v shared by the batch": ((3, 2, 4), (5, 4), (5, 2), None, None),
    "causal mask": ((4, 3), (4, 3), (4, 2), lambda: causal_mask(4), None),
    "random mask with batch": ((2, 3, 4), (2, 5, 4), (2, 5, 3),
                               lambda: np.random.default_rng(9).random((2, 3, 5)) > 0.4, None),
    "fully masked row": ((3, 2), (4, 2), (4, 2), lambda: np.array([[1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 1, 1]]), None),
    "scale 1 (unscaled)": ((3, 4), (3, 4), (3, 2), None, 1.0),
    "scale 0.3": ((2, 3), (4, 3), (4, 2), None, 0.3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_attention_backward_matches_finite_differences(name):
    q_shape, k_shape, v_shape, mask_builder, scale = CASES[name]
    rng = np.random.default_rng(len(name))
    q, k, v = (rng.standard_normal(shape) for shape in (q_shape, k_shape, v_shape))
    mask = None if mask_builder is None else mask_builder()
    out_shape = scaled_dot_product_attention(q, k, v, mask=mask).output.shape
    g_out = rng.standard_normal(out_shape)
    _, analytic, numerical = attention_loss_gradients(q, k, v, g_out, mask, scale)
    for array, grad, num in zip((q, k, v), analytic, numerical):
        assert grad.shape == array.shape
        np.testing.assert_allclose(grad, num, rtol=1e-5, atol=1e-7)


@st.composite
def attention_problems(draw):
    batch = draw(st.sampled_from([(), (2,), (1, 2)]))
    n_q, n_k, d_k, d_v = (draw(st.integers(1, 4)) for _ in range(4))
    seed = draw(st.integers(0, 2**16))
    use_mask = draw(st.booleans())
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(batch + (n_q, d_k))
    k = rng.standard_normal(batch + (n_k, d_k))
    v = rng.standard_normal(batch + (n_k, d_v))
    mask = rng.random(batch + (n_q, n_k)) > 0.3 if use_mask else None
    g_out = rng.standard_normal(batch + (n_q, d_v))
    return q, k, v, mask, g_out


@settings(max_examples=30)
@given(attention_problems())
def test_attention_backward_matches_finite_differences_on_random_shapes(problem):
    q, k, v, mask, g_out = problem
    _, analytic, numerical = attention_loss_gradients(q, k, v, g_out, mask)
    for grad, num in zip(analytic, numerical):
        np.testing.assert_allclose(grad, num, rtol=1e-5, atol=1e-7)


def test_a_key_nobody_may_see_gets_zero_gradient():
    rng = np.random.default_rng(4)
    q, k, v = rng.standard_normal((3, 4, 2))  # each (4, 2)
    mask = np.ones((4, 4), dtype=bool)
    mask[:, 2] = False  # no query may attend to key 2
    _, w = scaled_dot_product_attention(q, k, v, mask=mask)
    dq, dk, dv = attention_backward(q, k, v, w, rng.standard_normal((4, 2)), mask=mask)
    assert np.all(dk[2] == 0) and np.all(dv[2] == 0)
    assert np.any(dk[0] != 0) and np.any(dq != 0)


def test_worked_example_by_hand():
    # Q = I, K = 2I, V = I, L = o_12: alpha = e^sqrt2 / (1 + e^sqrt2), c = alpha (1 - alpha).
    alpha = math.exp(math.sqrt(2)) / (1 + math.exp(math.sqrt(2)))
    c = alpha * (1 - alpha)
    q, k, v = np.eye(2), 2 * np.eye(2), np.eye(2)
    _, w = scaled_dot_product_attention(q, k, v)
    dq, dk, dv = attention_backward(q, k, v, w, np.array([[0.0, 1.0], [0.0, 0.0]]))
    np.testing.assert_allclose(dq, [[-math.sqrt(2) * c, math.sqrt(2) * c], [0, 0]], rtol=1e-14)
    np.testing.assert_allclose(dk, [[-c / math.sqrt(2), 0], [c / math.sqrt(2), 0]], rtol=1e-14)
    np.testing.assert_allclose(dv, [[0, alpha], [0, 1 - alpha]], rtol=1e-14)


def test_unscaled_gradient_of_q_is_sqrt_d_times_the_scaled_one_for_the_same_weights():
    # With the same weights A, dQ = scale * dS K: the scale factor multiplies the query gradient.
    rng = np.random.default_rng(5)
    q, k, v = rng.standard_normal((3, 4, 16))
    g = rng.standard_normal((4, 16))
    _, w = scaled_dot_product_attention(q, k, v)
    scaled = attention_backward(q, k, v, w, g)
    unscaled = attention_backward(q / 4.0, k, v, w, g, scale=1.0)  # same scores: (q / 4) k^T = q k^T / 4
    np.testing.assert_allclose(unscaled.dq, 4.0 * scaled.dq, rtol=1e-12)
    np.testing.assert_allclose(unscaled.dv, scaled.dv, rtol=1e-12)


def test_score_gradient_is_the_middle_of_attention_backward():
    rng = np.random.default_rng(6)
    q, k, v = rng.standard_normal((3, 2, 5, 4))  # each (2, 5, 4)
    g = rng.standard_normal((2, 5, 4))
    _, w = scaled_dot_product_attention(q, k, v)
    ds = score_gradient(v, w, g)
    np.testing.assert_allclose(ds.sum(axis=-1), 0.0, atol=1e-14)
    scale = 1 / math.sqrt(4)
    np.testing.assert_allclose(attention_backward(q, k, v, w, g).dq, scale * ds @ k, rtol=1e-13)


def test_attention_backward_keeps_float32_and_promotes_integers():
    q = np.ones((2, 3), dtype=np.float32)
    _, w = scaled_dot_product_attention(q, q, q)
    assert all(g.dtype == np.float32 for g in attention_backward(q, q, q, w, np.ones((2, 3), np.float32)))
    qi = np.eye(2, dtype=int)
    _, wi = scaled_dot_product_attention(qi, qi, qi)
    assert all(g.dtype == np.float64 for g in attention_backward(qi, qi, qi, wi, np.ones((2, 2))))


def _example():
    q, k, v = np.eye(2), 2 * np.eye(2), np.eye(2)
    return q, k, v, scaled_dot_product_attention(q, k, v).weights


@pytest.mark.parametrize(
    "change, error, message",
    [
        (dict(k=np.ones((2, 3))), ValueError, "q has shape (2, 2) but k has shape (2, 3)"),
        (dict(v=np.ones((3, 2))), ValueError, "k has shape (2, 2) but v has shape (3, 2)"),
        (dict(weights=np.full((2, 3), 1 / 3)), ValueError, "weights has shape (2, 3) but q has shape (2, 2)"),
        (dict(weights=np.full((2, 2), 0.4)), ValueError, "weights has a slice along axis 1 that sums to 0.8"),
        (dict(grad_output=np.ones(2)), ValueError, "grad_output has shape (2,); expected the shape of the output"),
        (dict(mask=np.array([[1, 0], [1, 1]])), ValueError, "weights has a non-zero entry where mask is False"),
        (dict(mask=np.ones((3, 2), dtype=bool)), ValueError, "mask has shape (3, 2) but the weights have shape"),
        (dict(scale=0.0), ValueError, "scale must be a positive finite number, got 0.0"),
        (dict(scale="big"), TypeError, "scale must be a real number, got 'big'"),
        (dict(q=np.ones(2)), ValueError, "q has shape (2,) but needs at least 2 dimensions"),
        (dict(grad_output=np.ones((3, 2, 2)), k=np.ones((2, 2, 2)), v=np.ones((2, 2, 2))),
         ValueError, "the leading (batch, head) dimensions do not broadcast"),
    ],
)
def test_attention_backward_rejects_bad_inputs(change, error, message):
    q, k, v, w = _example()
    args = dict(q=q, k=k, v=v, weights=w, grad_output=np.ones((2, 2)), mask=None, scale=None)
    args.update(change)
    with pytest.raises(error, match=re.escape(message)):
        attention_backward(**args)


# --- linear_backward and cross-entropy --------------------------------------------------------------


def test_linear_backward_matches_finite_differences():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 4))  # (batch, n, d_in)
    w = rng.standard_normal((4, 5))  # (d_in, d_out)
    g = rng.standard_normal((2, 3, 5))  # (batch, n, d_out)
    dx, dw = linear_backward(x, w, g)
    assert_matches_finite_differences(dx, lambda x_: float(np.sum(g * (x_ @ w))), x)
    assert_matches_finite_differences(dw, lambda w_: float(np.sum(g * (x @ w_))), w)


def test_linear_backward_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=re.escape("x has shape (2, 3) but w has shape (4, 5)")):
        linear_backward(np.ones((2, 3)), np.ones((4, 5)), np.ones((2, 5)))
    with pytest.raises(ValueError, match=re.escape("grad_output has shape (2, 4); x @ w has shape (2, 5)")):
        linear_backward(np.ones((2, 3)), np.ones((3, 5)), np.ones((2, 4)))


def test_cross_entropy_of_uniform_logits_is_log_n():
    assert math.isclose(cross_entropy(np.zeros((3, 7)), np.array([0, 3, 6])), math.log(7), rel_tol=1e-15)


def test_cross_entropy_is_stable_for_huge_logits():
    assert cross_entropy(np.array([[1000.0, 0.0]]), np.array([0])) == 0.0
    assert math.isclose(cross_entropy(np.array([[1000.0, 0.0]]), np.array([1])), 1000.0, rel_tol=1e-12)


@pytest.mark.parametrize("shape", [(5,), (4, 5), (2, 3, 5)])
def test_cross_entropy_backward_matches_finite_differences(shape):
    rng = np.random.default_rng(len(shape))
    z = 2 * rng.standard_normal(shape)
    t = rng.integers(0, shape[-1], size=shape[:-1])
    grad = cross_entropy_backward(z, t)
    assert_matches_finite_differences(grad, lambda z_: cross_entropy(z_, t), z)
    np.testing.assert_allclose(grad.sum(axis=-1), 0.0, atol=1e-15)


def test_cross_entropy_gradient_is_the_softmax_vjp_of_minus_log():
    # dL/dz = softmax-VJP(p, -e_t / p_t) = p - e_t: the two derivations agree.
    z = np.array([[0.5, -1.0, 2.0]])
    p = softmax(z)
    g = np.array([[0.0, -1.0 / p[0, 1], 0.0]])  # dL/dp for L = -log p_1
    np.testing.assert_allclose(softmax_backward(p, g), cross_entropy_backward(z, np.array([1])), rtol=1e-14)


@pytest.mark.parametrize(
    "targets, error, message",
    [
        (np.array([0.0, 1.0]), TypeError, "targets has dtype float64; expected integer class indices"),
        (np.array([0, 1, 2]), ValueError, "targets has shape (3,) but logits has shape (2, 4)"),
        (np.array([0, -1]), ValueError, "targets contains the class -1, outside 0 .. 3"),
    ],
)
def test_cross_entropy_rejects_bad_targets(targets, error, message):
    for function in (cross_entropy, cross_entropy_backward):
        with pytest.raises(error, match=re.escape(message)):
            function(np.zeros((2, 4)), targets)
