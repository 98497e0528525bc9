"""Tests of attnbook.learning.layers and gradients.token_cross_entropy: every gradient of every vjp against
central finite differences in float64, the taped forward equal to the package's forward, and errors. The gated
layers (Qiu et al., 2025) have no forward of their own in the core: their gradients are checked against
differences of their own forward, which is checked against the core's multi-head attention and Qwen3-Next's gate.

The error of a gradient ``g`` against the central differences ``f`` (step 1e-5) is
``|f - g| / max(|f| + |g|, 1e-2)``, with Euclidean norms over the whole array: a relative error for every
gradient of norm above 1e-2, and an absolute one below, where the round-off of the differences (about
1e-9 here) would otherwise dominate. A gradient that is 0 in exact arithmetic needs the floor: the bias
of the keys, ``b_k``, adds the same ``q . b_k`` to every score of a row, which softmax ignores. Every
parameter and every input must be within 1e-6.
"""

import re
from pathlib import Path

import numpy as np
import pytest

from attnbook import (
    causal_mask,
    decoder_layer,
    encoder_layer,
    feed_forward,
    init_decoder_layer,
    init_encoder_layer,
    init_feed_forward,
    init_multi_head_weights,
    layer_norm,
    multi_head_attention,
    padding_mask,
)
from attnbook.learning.gradients import token_cross_entropy
from attnbook.learning.layers import (
    GatedEncoderLayerWeights,
    decoder_layer_vjp,
    embedding_vjp,
    encoder_layer_vjp,
    feed_forward_vjp,
    gated_encoder_layer_vjp,
    gated_self_attention_vjp,
    layer_norm_vjp,
    multi_head_vjp,
    tied_logits_vjp,
)

H = 1e-5  # the step of the central differences: round-off and truncation errors both about 1e-10
TOLERANCE = 1e-6


def relative_error(numeric, analytic) -> float:
    """``|f - g| / max(|f| + |g|, 1e-2)``: 0 when equal, 1 when unrelated."""
    numeric, analytic = np.asarray(numeric, float), np.asarray(analytic, float)
    return float(np.linalg.norm(numeric - analytic) / max(np.linalg.norm(numeric) + np.linalg.norm(analytic), 1e-2))


def central_differences(loss, array: np.ndarray) -> np.ndarray:
    """dL/d(array) by central differences, nudging ``array`` in place (``loss()`` reads it)."""
    grad = np.zeros_like(array)
    for index in np.ndindex(array.shape):
        kept = array[index]
        array[index] = kept + H
        up = loss()
        array[index] = kept - H
        down = loss()
        array[index] = kept
        grad[index] = (up - down) / (2 * H)
    return grad


def leaves(tree, path="") -> list:
    """(path, array) for every array of a tree of NamedTuples and tuples, in order."""
    if isinstance(tree, tuple):
        fields = getattr(tree, "_fields", None)
        return [pair for i, branch in enumerate(tree)
                for pair in leaves(branch, f"{path}.{fields[i]}" if fields else f"{path}[{i}]")]
    return [(path, tree)]


def randomised(tree, rng):
    """The tree with every array replaced by a random one of its shape (biases non-zero, gamma not 1)."""
    if isinstance(tree, tuple):
        branches = [randomised(branch, rng) for branch in tree]
        return type(tree)(*branches) if hasattr(tree, "_fields") else tuple(branches)
    return rng.uniform(0.5, 1.5, tree.shape) * rng.choice([-1, 1], tree.shape) if tree.ndim == 1 \
        else 0.8 * rng.standard_normal(tree.shape)


def errors_of(loss, analytic: dict, arrays: dict) -> dict:
    """{name: relative error} of each analytic gradient against central differences of ``loss``."""
    return {name: relative_error(central_differences(loss, arrays[name]), analytic[name]) for name in arrays}


def assert_all_small(errors: dict):
    bad = {name: error for name, error in errors.items() if not error <= TOLERANCE}
    assert not bad, f"gradients off from finite differences: {bad}"


RNG = np.random.default_rng(0)
B, N, N_S, D, D_FF, HEADS = 2, 4, 3, 6, 8, 2


def causal_and_padding(lengths, n):
    """(batch, 1, n, n): causal, and no key beyond each sequence's length."""
    return causal_mask(n) & padding_mask(lengths, n)


# --- the gradients against finite differences ----------------------------------------------------------


def layer_norm_errors() -> dict:
    rng = np.random.default_rng(1)
    x, gamma, beta = rng.standard_normal((B, N, D)), *randomised((np.ones(D), np.ones(D)), rng)
    dy = rng.standard_normal((B, N, D))  # L = sum(y * dy)
    y, back = layer_norm_vjp(x, gamma, beta)
    dx, dgamma, dbeta = back(dy)
    return errors_of(lambda: np.sum(layer_norm(x, gamma, beta) * dy),
                     {"x": dx, "gamma": dgamma, "beta": dbeta}, {"x": x, "gamma": gamma, "beta": beta})


def feed_forward_errors(activation="relu") -> dict:
    rng = np.random.default_rng(2)
    x, ff = rng.standard_normal((B, N, D)), randomised(init_feed_forward(D, D_FF), rng)
    dy = rng.standard_normal((B, N, D))
    grads, dx = feed_forward_vjp(x, ff, activation)[1](dy)
    analytic = {"x": dx} | {f"weights{path}": g for path, g in leaves(grads)}
    arrays = {"x": x} | {f"weights{path}": a for path, a in leaves(ff)}
    return errors_of(lambda: np.sum(feed_forward(x, ff, activation) * dy), analytic, arrays)


def multi_head_errors(query, key, value, mask, seed) -> dict:
    rng = np.random.default_rng(seed)
    w = randomised(init_multi_head_weights(D), rng)
    (out, _), back = multi_head_vjp(query, key, value, w, HEADS, mask=mask)
    d_out = rng.standard_normal(out.shape)
    grads, dquery, dkey, dvalue = back(d_out)
    analytic = {"query": dquery, "key": dkey, "value": dvalue} | {f"weights{p}": g for p, g in leaves(grads)}
    arrays = {"query": query, "key": key, "value": value} | {f"weights{p}": a for p, a in leaves(w)}
    return errors_of(lambda: np.sum(multi_head_attention(query, key, value, w, HEADS, mask=mask).output * d_out),
                     analytic, arrays)


def self_attention_errors() -> dict:
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((B, N, D)) for _ in range(3))  # three arrays: each gradient on its own
    return multi_head_errors(q, k, v, causal_and_padding([N, 2], N), seed=4)


def cross_attention_errors() -> dict:
    rng = np.random.default_rng(5)
    q, memory = rng.standard_normal((B, N, D)), rng.standard_normal((B, N_S, D))
    return multi_head_errors(q, memory, memory.copy(), padding_mask([N_S, 1], N_S), seed=6)


def encoder_errors(mask, activation="relu", eps=1e-5) -> dict:
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((B, N, D)), randomised(init_encoder_layer(D, D_FF), rng)
    dy = rng.standard_normal((B, N, D))
    grads, dx = encoder_layer_vjp(x, w, HEADS, mask, activation, eps)[1](dy)
    analytic = {"x": dx} | {f"weights{p}": g for p, g in leaves(grads)}
    arrays = {"x": x} | {f"weights{p}": a for p, a in leaves(w)}
    return errors_of(lambda: np.sum(encoder_layer(x, w, HEADS, mask, activation, eps).output * dy), analytic, arrays)


def decoder_errors() -> dict:
    rng = np.random.default_rng(8)
    y, memory = rng.standard_normal((B, N, D)), rng.standard_normal((B, N_S, D))
    w, memory_mask = randomised(init_decoder_layer(D, D_FF), rng), padding_mask([N_S, 2], N_S)
    dout = rng.standard_normal((B, N, D))
    grads, dy, dmemory = decoder_layer_vjp(y, memory, w, HEADS, memory_mask=memory_mask)[1](dout)
    analytic = {"y": dy, "memory": dmemory} | {f"weights{p}": g for p, g in leaves(grads)}
    arrays = {"y": y, "memory": memory} | {f"weights{p}": a for p, a in leaves(w)}
    return errors_of(lambda: np.sum(decoder_layer(y, memory, w, HEADS, memory_mask=memory_mask).output * dout),
                     analytic, arrays)


def gated_attention_errors() -> dict:
    rng = np.random.default_rng(11)
    x, w, w_gate = rng.standard_normal((B, N, D)), randomised(init_multi_head_weights(D), rng), rng.standard_normal((D, D))
    mask = causal_and_padding([N, 2], N)
    (out, _, _), back = gated_self_attention_vjp(x, w, w_gate, HEADS, mask)
    d_out = rng.standard_normal(out.shape)
    grads, dw_gate, dx = back(d_out)
    analytic = {"x": dx, "w_gate": dw_gate} | {f"weights{p}": g for p, g in leaves(grads)}
    arrays = {"x": x, "w_gate": w_gate} | {f"weights{p}": a for p, a in leaves(w)}
    return errors_of(lambda: np.sum(gated_self_attention_vjp(x, w, w_gate, HEADS, mask)[0].output * d_out),
                     analytic, arrays)


def gated_encoder_errors() -> dict:
    rng = np.random.default_rng(12)
    x = rng.standard_normal((B, N, D))
    w = randomised(GatedEncoderLayerWeights(*init_encoder_layer(D, D_FF), np.zeros((D, D))), rng)
    mask, dy = causal_and_padding([3, N], N), rng.standard_normal((B, N, D))
    grads, dx = gated_encoder_layer_vjp(x, w, HEADS, mask)[1](dy)
    analytic = {"x": dx} | {f"weights{p}": g for p, g in leaves(grads)}
    arrays = {"x": x} | {f"weights{p}": a for p, a in leaves(w)}
    return errors_of(lambda: np.sum(gated_encoder_layer_vjp(x, w, HEADS, mask)[0].output * dy), analytic, arrays)


def embedding_and_logits_errors() -> dict:
    rng = np.random.default_rng(9)
    table, tokens = rng.standard_normal((5, D)), np.array([[1, 3, 1, 0], [4, 4, 4, 2]])  # repeated tokens
    dx_out, x = rng.standard_normal((B, N, D)), rng.standard_normal((B, N, D))
    dlogits = rng.standard_normal((B, N, 5))
    dtable_embed = embedding_vjp(table, tokens)[1](dx_out)
    dx, dtable_tied = tied_logits_vjp(x, table)[1](dlogits)
    return (errors_of(lambda: np.sum(table[tokens] * dx_out), {"embedding table": dtable_embed},
                      {"embedding table": table})
            | errors_of(lambda: np.sum(x @ table.T * dlogits), {"tied x": dx, "tied table": dtable_tied},
                        {"tied x": x, "tied table": table}))


def cross_entropy_errors(label_smoothing) -> dict:
    rng = np.random.default_rng(10)
    logits = 3 * rng.standard_normal((B, N, 7))
    targets = np.array([[2, 0, 6, -100], [5, 5, -100, -100]])  # -100 where padded, as in PyTorch
    mask = targets != -100
    loss, dlogits = token_cross_entropy(logits, targets, mask=mask, label_smoothing=label_smoothing)
    return errors_of(lambda: token_cross_entropy(logits, targets, mask, label_smoothing)[0],
                     {"logits": dlogits}, {"logits": logits})


CASES = {
    "layer_norm": layer_norm_errors,
    "feed_forward": feed_forward_errors,
    "feed_forward with GELU": lambda: feed_forward_errors("gelu"),
    "multi_head, self-attention with causal and padding masks": self_attention_errors,
    "multi_head, cross-attention with a padding mask": cross_attention_errors,
    "encoder_layer": lambda: encoder_errors(None),
    "encoder_layer, decoder-only with causal and padding masks": lambda: encoder_errors(causal_and_padding([3, N], N)),
    "encoder_layer of BERT: GELU, eps 1e-12, a padding mask": lambda: encoder_errors(padding_mask([2, N], N), "gelu",
                                                                                       1e-12),
    "decoder_layer with a memory padding mask": decoder_errors,
    "gated self-attention with causal and padding masks": gated_attention_errors,
    "gated encoder layer, decoder-only with causal and padding masks": gated_encoder_errors,
    "embedding and tied logits": embedding_and_logits_errors,
    "token_cross_entropy, padded": lambda: cross_entropy_errors(0.0),
    "token_cross_entropy, padded and label-smoothed": lambda: cross_entropy_errors(0.1),
}


@pytest.mark.parametrize("case", CASES)
def test_every_parameter_and_input_gradient_matches_central_differences(case):
    assert_all_small(CASES[case]())


def test_the_finite_differences_see_every_parameter():
    # the decoder case checks all 26 arrays of the weights, and y and memory; the gated layer's 16, its gate and x
    assert len(decoder_errors()) == 26 + 2
    assert len(gated_encoder_errors()) == 16 + 1 + 1


def test_a_gate_of_one_half_everywhere_is_multi_head_attention_with_half_the_output_projection():
    w, mask = init_multi_head_weights(D, seed=6), causal_and_padding([N, 2], N)
    (out, attention, gate), _ = gated_self_attention_vjp(X, w, np.zeros((D, D)), HEADS, mask)
    halved = multi_head_attention(X, X, X, w._replace(w_o=w.w_o / 2), HEADS, mask)  # sigma(0) = 1/2
    assert np.all(gate == 0.5)
    np.testing.assert_allclose(out, halved.output, rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(attention, halved.weights)  # the gate leaves the weights alone
    layer = init_encoder_layer(D, D_FF, seed=7)
    gated = GatedEncoderLayerWeights(*layer, np.zeros((D, D)))
    plain = layer._replace(self_attention=layer.self_attention._replace(w_o=layer.self_attention.w_o / 2))
    np.testing.assert_allclose(gated_encoder_layer_vjp(X, gated, HEADS, mask)[0].output,
                               encoder_layer(X, plain, HEADS, mask).output, rtol=1e-12, atol=1e-12)


def test_the_gate_is_the_gate_of_qwen3_next_attention_read_from_the_querys_token():
    from attnbook.recent.gated import gated_attention, init_gated_attention

    w_gate = RNG.standard_normal((D, D))
    qwen = init_gated_attention(D, HEADS, n_kv_heads=HEADS, d_head=D // HEADS)._replace(w_gate=w_gate)
    _, _, expected = gated_attention(X, qwen, HEADS, HEADS, rotary_dim=0)  # (batch, h, n, d_head)
    (_, _, gate), _ = gated_self_attention_vjp(X, init_multi_head_weights(D), w_gate, HEADS)
    np.testing.assert_allclose(gate, expected, rtol=1e-15)
    x_moved = X.copy()
    x_moved[:, 0] += 1.0  # another first token: only its own gate changes
    (_, _, moved), _ = gated_self_attention_vjp(x_moved, init_multi_head_weights(D), w_gate, HEADS)
    assert np.all(moved[:, :, 0] != gate[:, :, 0]) and np.array_equal(moved[:, :, 1:], gate[:, :, 1:])


def test_a_closed_gate_passes_no_gradient_to_the_heads():
    # a gate of (nearly) 0 blocks the head: no gradient reaches the queries, keys and values
    w, w_gate = init_multi_head_weights(D, seed=8), np.full((D, D), -1e3)  # logits about -1e3 |x|: sigma = 0
    x = np.abs(X) + 0.1  # positive coordinates: every logit very negative
    (out, _, gate), back = gated_self_attention_vjp(x, w, w_gate, HEADS)
    grads, dw_gate, _ = back(np.ones_like(out))
    assert np.all(gate == 0)
    assert np.all(grads.w_q == 0) and np.all(grads.w_v == 0) and np.all(dw_gate == 0)


# --- the taped forward is the package's forward --------------------------------------------------------


X = RNG.standard_normal((B, N, D))  # (batch, n, d_model)
MEMORY = RNG.standard_normal((B, N_S, D))  # (batch, n_s, d_model)


def test_the_taped_forward_equals_the_forward_of_every_layer():
    mask = causal_and_padding([N, 2], N)
    encoder, decoder = init_encoder_layer(D, D_FF, seed=1), init_decoder_layer(D, D_FF, seed=2)
    attention, ff = init_multi_head_weights(D, seed=3), init_feed_forward(D, D_FF, seed=4)
    gamma, beta = RNG.standard_normal(D), RNG.standard_normal(D)
    pairs = [
        (encoder_layer_vjp(X, encoder, HEADS, mask)[0], encoder_layer(X, encoder, HEADS, mask)),
        (decoder_layer_vjp(X, MEMORY, decoder, HEADS, padding_mask([3, 1], N_S))[0],
         decoder_layer(X, MEMORY, decoder, HEADS, padding_mask([3, 1], N_S))),
        (multi_head_vjp(X, MEMORY, MEMORY, attention, HEADS)[0], multi_head_attention(X, MEMORY, MEMORY, attention, HEADS)),
        ((feed_forward_vjp(X, ff)[0],), (feed_forward(X, ff),)),
        ((layer_norm_vjp(X, gamma, beta)[0],), (layer_norm(X, gamma, beta),)),
    ]
    for taped, forward in pairs:
        assert type(taped) is type(forward)
        for a, b in zip(taped, forward):
            np.testing.assert_array_equal(a, b)


def test_the_weight_gradients_have_the_weights_type():
    grads, _ = encoder_layer_vjp(X, init_encoder_layer(D, D_FF), HEADS)[1](np.ones((B, N, D)))
    weights = init_encoder_layer(D, D_FF)
    assert type(grads) is type(weights)
    assert [(p, a.shape) for p, a in leaves(grads)] == [(p, a.shape) for p, a in leaves(weights)]


def test_a_shared_input_gets_the_sum_of_its_gradients_under_broadcasting():
    # one sequence x (n, d) against a batch of masks: the gradient of x sums over the batch
    x, w = X[0], init_encoder_layer(D, D_FF, seed=5)
    mask = padding_mask([N, 2], N)  # (2, 1, 1, n)
    (out, _), back = encoder_layer_vjp(x, w, HEADS, mask=mask)
    dy = RNG.standard_normal(out.shape)  # (2, n, d)
    _, dx = back(dy)
    assert dx.shape == x.shape
    x_copy = x.copy()
    numeric = central_differences(lambda: np.sum(encoder_layer(x_copy, w, HEADS, mask=mask).output * dy), x_copy)
    assert relative_error(numeric, dx) <= TOLERANCE


def test_a_masked_key_gets_no_gradient():
    q, kv = X, MEMORY
    mask = padding_mask([N_S, 1], N_S)  # the second sequence sees only its first key
    _, _, dkey, dvalue = multi_head_vjp(q, kv, kv, init_multi_head_weights(D), HEADS, mask)[1](np.ones((B, N, D)))
    assert np.all(dkey[1, 1:] == 0) and np.all(dvalue[1, 1:] == 0)


def test_token_cross_entropy_without_a_mask_or_smoothing_is_the_plain_cross_entropy():
    from attnbook.learning.gradients import cross_entropy, cross_entropy_backward

    logits, targets = RNG.standard_normal((3, 5)), np.array([0, 4, 2])
    loss, dlogits = token_cross_entropy(logits, targets)
    assert loss == pytest.approx(cross_entropy(logits, targets), rel=1e-14)
    np.testing.assert_allclose(dlogits, cross_entropy_backward(logits, targets), rtol=1e-14)


def test_token_cross_entropy_is_finite_for_large_float32_logits():
    logits = np.array([[3e4, -3e4, 0.0], [1e30, 0.0, -1e30]], dtype=np.float32)
    loss, dlogits = token_cross_entropy(logits, np.array([1, 2]), label_smoothing=0.1)
    assert np.isfinite(loss) and np.all(np.isfinite(dlogits)) and dlogits.dtype == np.float32


def test_token_cross_entropy_of_the_smoothed_target_itself_is_its_entropy():
    # logits = log q: the loss is the entropy of q, and the gradient 0
    eps, v = 0.1, 4
    q = np.full(v, eps / v)
    q[2] += 1 - eps
    loss, dlogits = token_cross_entropy(np.log(q)[None], np.array([2]), label_smoothing=eps)
    assert loss == pytest.approx(-np.sum(q * np.log(q)), rel=1e-12)
    np.testing.assert_allclose(dlogits, 0, atol=1e-15)


# --- errors name the argument -----------------------------------------------------------------------------


@pytest.mark.parametrize("call, error, message", [
    (lambda: embedding_vjp(np.eye(3), np.array([0.5])), TypeError, "tokens has dtype float64; expected integer token ids"),
    (lambda: embedding_vjp(np.ones(3), np.array([0])), ValueError, "table has shape (3,); expected (vocab, d_model)"),
    (lambda: tied_logits_vjp(np.ones((2, 3)), np.ones((5, 4))), ValueError,
     "x has shape (2, 3) but table has shape (5, 4); both need d_model = 3 columns"),
    (lambda: layer_norm_vjp(np.ones((2, 3)), np.ones(4), np.zeros(3)), ValueError,
     "gamma has shape (4,) but x has shape (2, 3); expected (3,)"),
    (lambda: encoder_layer_vjp(np.ones((3, 4)), init_decoder_layer(4, 8), 2), TypeError,
     "weights must be EncoderLayerWeights, got DecoderLayerWeights"),
    (lambda: gated_encoder_layer_vjp(np.ones((3, 4)), init_encoder_layer(4, 8), 2), TypeError,
     "weights must be GatedEncoderLayerWeights, got EncoderLayerWeights"),
    (lambda: gated_encoder_layer_vjp(np.ones((3, 4)), GatedEncoderLayerWeights(*init_encoder_layer(4, 8), np.ones((4, 3))),
                                     2), ValueError, "w_gate has shape (4, 3) but x has d_model = 4; expected (4, 4)"),
    (lambda: gated_self_attention_vjp(np.ones((3, 4)), init_multi_head_weights(4), np.ones((4, 4)), 2)[1](np.ones(4)),
     ValueError, "d_output has shape (4,) but the output has shape (3, 4)"),
    (lambda: multi_head_vjp(np.ones((3, 4)), np.ones((3, 4)), np.ones((3, 4)), init_multi_head_weights(4), 3),
     ValueError, "d_model = 4 is not divisible by n_heads = 3"),
    (lambda: encoder_layer_vjp(np.ones((3, 4)), init_encoder_layer(4, 8), 2)[1](np.ones((3, 5))), ValueError,
     "dy has shape (3, 5) but the output has shape (3, 4)"),
    (lambda: multi_head_vjp(np.ones((3, 4)), np.ones((3, 4)), np.ones((3, 4)), init_multi_head_weights(4), 2)[1](
        np.ones(4)), ValueError, "d_output has shape (4,) but the output has shape (3, 4)"),
    (lambda: token_cross_entropy(np.zeros((2, 3)), np.array([0, 3])), ValueError,
     "targets contains the class 3, outside 0 .. 2, at a position mask keeps"),
    (lambda: token_cross_entropy(np.zeros((2, 3)), np.array([0, 1]), label_smoothing=1.0), ValueError,
     "label_smoothing must be a number in [0, 1), got 1.0"),
    (lambda: token_cross_entropy(np.zeros((2, 3)), np.array([0, 1]), mask=np.array([True])), ValueError,
     "mask has shape (1,) but targets has shape (2,); they must be equal"),
])
def test_errors_name_the_argument(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_a_vjp_checks_once_at_its_boundary_with_the_check_of_its_layer(validation_entries):
    # the taped layers share their layers' checks (transformer.py's, beside decoder_layer); back checks
    # only the shape of the gradient it is given
    weights = init_decoder_layer(D, D_FF)
    entries = validation_entries(lambda: decoder_layer_vjp(X, MEMORY, weights, HEADS)[1](np.ones((B, N, D))))
    assert {module for module, _ in entries if module not in ("test_layers.py", "<string>")} == {
        "transformer.py", "masks.py", "multihead.py"}  # the arguments of decoder_layer, its mask and heads
    assert decoder_layer_vjp.check is decoder_layer.check
