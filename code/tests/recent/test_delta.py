"""attnbook.recent.delta: the recurrent and chunked forms of the gated delta rule, equal to each other and to the
reference kernels of Qwen3-Next (``torch_recurrent_gated_delta_rule``, ``torch_chunk_gated_delta_rule``) and of Kimi
Linear (``recurrent_kimi_delta_attention``, ``chunk_kimi_delta_attention``) in Hugging Face transformers; the kernels
L2-normalise q and k inside (``use_qk_l2norm_in_kernel``) and scale the queries by ``1 / sqrt(d_k)``, as the package's
default scale does; and the Gated DeltaNet and Kimi Delta Attention layers against their modules."""

import numpy as np
import pytest

from attnbook.recent.delta import (
    GatedDeltaNetWeights,
    KimiDeltaWeights,
    MEMORY_RULES,
    delta_rule_chunked,
    delta_rule_recurrent,
    fast_weight_memory,
    gated_deltanet,
    kimi_delta_attention,
    l2_normalize,
)

from .conftest import array, matrix, torch

BATCH, HEADS, N, D_K, D_V = 2, 3, 11, 8, 6


def inputs(seed=0, per_channel=False):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, BATCH, HEADS, N, D_K))
    v = rng.standard_normal((BATCH, HEADS, N, D_V))
    beta = rng.uniform(0.0, 1.0, (BATCH, HEADS, N))
    g = -rng.uniform(0.0, 0.5, (BATCH, HEADS, N, D_K) if per_channel else (BATCH, HEADS, N))
    state = rng.standard_normal((BATCH, HEADS, D_K, D_V))
    return q, k, v, beta, g, state


def as_reference(*arrays):
    """(batch, heads, n, ...) -> torch tensors (batch, n, heads, ...), the kernels' layout."""
    return [torch.tensor(np.moveaxis(a, 2, 1).copy()) for a in arrays]


KERNELS = [("qwen3_next", "torch_recurrent_gated_delta_rule", False), ("qwen3_next", "torch_chunk_gated_delta_rule", False),
           ("kimi_linear", "recurrent_kimi_delta_attention", True), ("kimi_linear", "chunk_kimi_delta_attention", True)]


@pytest.mark.transformers
@pytest.mark.parametrize("model, kernel, per_channel", KERNELS)
def test_the_delta_rule_equals_the_reference_kernels_in_float64(model, kernel, per_channel, float64_reference):
    """Gated DeltaNet's kernels (one decay per token and head) and Kimi Delta Attention's (one per key channel)."""
    import importlib

    reference = importlib.import_module(f"transformers.models.{model}.modeling_{model}")
    q, k, v, beta, g, state = inputs(seed=6 if per_channel else 0, per_channel=per_channel)
    arguments = dict(initial_state=torch.tensor(state), output_final_state=True, use_qk_l2norm_in_kernel=True)
    if "chunk" in kernel:
        arguments["chunk_size"] = 4  # 11 tokens: two whole chunks and a padded one
    with torch.no_grad():
        expected, expected_state = getattr(reference, kernel)(*as_reference(q, k, v, g, beta), **arguments)  # g, beta
    expected = np.moveaxis(array(expected), 1, 2)  # (batch, heads, n, d_v)
    qn, kn = l2_normalize(q), l2_normalize(k)
    for ours in (delta_rule_recurrent(qn, kn, v, beta, g, initial_state=state),
                 delta_rule_chunked(qn, kn, v, beta, g, chunk_size=4, initial_state=state)):
        assert np.max(np.abs(ours.outputs - expected)) <= 1e-10
        assert np.max(np.abs(ours.state - array(expected_state))) <= 1e-10


@pytest.mark.parametrize("chunk_size", [1, 3, 4, 11, 64])
@pytest.mark.parametrize("per_channel", [False, True])
def test_the_chunked_form_equals_the_recurrent_form(chunk_size, per_channel):
    q, k, v, beta, g, state = inputs(seed=1, per_channel=per_channel)
    q, k = l2_normalize(q), l2_normalize(k)
    step = delta_rule_recurrent(q, k, v, beta, g, initial_state=state)
    chunk = delta_rule_chunked(q, k, v, beta, g, chunk_size=chunk_size, initial_state=state)
    np.testing.assert_allclose(chunk.outputs, step.outputs, rtol=0, atol=1e-12)
    np.testing.assert_allclose(chunk.state, step.state, rtol=0, atol=1e-12)


def test_a_stream_split_in_two_continues_from_the_state():
    q, k, v, beta, g, _ = inputs(seed=2)
    whole = delta_rule_recurrent(q, k, v, beta, g)
    first = delta_rule_chunked(q[..., :5, :], k[..., :5, :], v[..., :5, :], beta[..., :5], g[..., :5], chunk_size=2)
    rest = delta_rule_chunked(q[..., 5:, :], k[..., 5:, :], v[..., 5:, :], beta[..., 5:], g[..., 5:], chunk_size=2,
                              initial_state=first.state)
    np.testing.assert_allclose(np.concatenate([first.outputs, rest.outputs], axis=-2), whole.outputs, atol=1e-12)


def test_with_beta_one_and_orthonormal_keys_the_memory_recalls_each_value_exactly():
    keys = np.eye(4)  # (n, d_k): four orthonormal keys
    values = np.random.default_rng(3).standard_normal((4, 2))
    run = delta_rule_recurrent(keys, keys, values, beta=np.ones(4), scale=1.0)
    np.testing.assert_allclose(keys @ run.state, values, atol=1e-15)
    # writing key 0 again with a new value replaces the old one, where linear attention would add the two
    again = delta_rule_recurrent(keys[:1], keys[:1], [[7.0, 7.0]], beta=[1.0], scale=1.0, initial_state=run.state)
    np.testing.assert_allclose(keys @ again.state, np.vstack([[7.0, 7.0], values[1:]]), atol=1e-15)


def test_with_orthogonal_keys_there_is_nothing_to_correct_and_the_memory_is_linear_attentions_sum():
    # k_t . k_s = 0 for s < t: the delta rule adds beta k_t v_t^T, the sum linear attention keeps (elu + 1 aside)
    rng = np.random.default_rng(4)
    keys, values, beta = np.eye(5), rng.standard_normal((5, 3)), rng.uniform(0.0, 1.0, 5)
    run = delta_rule_recurrent(rng.standard_normal((5, 5)), keys, values, beta=beta)
    np.testing.assert_allclose(run.state, keys.T @ (beta[:, None] * values), atol=1e-15)


def test_log_decays_above_zero_and_misshapen_gates_are_refused():
    q, k, v, beta, g, _ = inputs()
    with pytest.raises(ValueError, match="at most 0"):
        delta_rule_recurrent(q, k, v, beta, -g)
    with pytest.raises(ValueError, match="g has shape"):
        delta_rule_chunked(q, k, v, beta, g[..., :4])
    with pytest.raises(ValueError, match="beta has shape"):
        delta_rule_recurrent(q, k, v, beta[..., :3])


@pytest.mark.transformers
def test_the_gated_deltanet_layer_equals_qwen3_next_gated_deltanet_in_float64(float64_reference):
    from transformers import Qwen3NextConfig
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet

    d_model, n_k, n_v, d_k, d_v = 32, 2, 4, 8, 6
    config = Qwen3NextConfig(hidden_size=d_model, linear_num_key_heads=n_k, linear_num_value_heads=n_v,
                             linear_key_head_dim=d_k, linear_value_head_dim=d_v, linear_conv_kernel_dim=4,
                             num_hidden_layers=1, layer_types=["linear_attention"])
    module = Qwen3NextGatedDeltaNet(config, layer_idx=0).double().eval()
    with torch.no_grad():
        module.dt_bias.normal_(0.0, 1.0)
        module.norm.weight.uniform_(0.5, 1.5)
    group = n_v // n_k
    qkvz = matrix(module.in_proj_qkvz).reshape(d_model, n_k, 2 * d_k + 2 * group * d_v)  # per key head: q, k, v, z
    ba = matrix(module.in_proj_ba).reshape(d_model, n_k, 2 * group)  # per key head: b, a
    cuts = np.cumsum([d_k, d_k, group * d_v])
    q, k, v, z = (part.reshape(d_model, -1) for part in np.split(qkvz, cuts, axis=-1))
    weights = GatedDeltaNetWeights(q, k, v, z, ba[..., :group].reshape(d_model, n_v), ba[..., group:].reshape(d_model, n_v),
                                   array(module.conv1d.weight)[:, 0], array(module.A_log), array(module.dt_bias),
                                   array(module.norm.weight), matrix(module.out_proj))
    x = np.random.default_rng(5).standard_normal((2, 11, d_model))
    with torch.no_grad():
        expected = array(module(torch.tensor(x)))
    ours = gated_deltanet(x, weights, n_k, n_v, chunk_size=4)
    assert np.max(np.abs(ours - expected)) <= 1e-10


@pytest.mark.transformers
def test_the_kimi_delta_attention_layer_equals_kimi_linear_delta_attention_in_float64(float64_reference):
    from transformers import KimiLinearConfig
    from transformers.models.kimi_linear.modeling_kimi_linear import KimiLinearDeltaAttention

    d_model, n_heads, d_head = 32, 4, 8
    config = KimiLinearConfig(hidden_size=d_model, linear_num_heads=n_heads, linear_head_dim=d_head,
                              linear_conv_kernel_dim=4, num_hidden_layers=1, layer_types=["linear_attention"])
    module = KimiLinearDeltaAttention(config, layer_idx=0).double().eval()
    with torch.no_grad():
        module.forget_gate.dt_bias.normal_(0.0, 1.0)
        module.forget_gate.A_log.uniform_(0.0, 2.0)
        module.o_norm.weight.uniform_(0.5, 1.5)
    gate = module.forget_gate
    weights = KimiDeltaWeights(matrix(module.q_proj), matrix(module.k_proj), matrix(module.v_proj),
                               array(module.conv1d.weight)[:, 0], matrix(gate.f_a_proj), matrix(gate.f_b_proj),
                               array(gate.dt_bias), array(gate.A_log).reshape(n_heads), matrix(module.b_proj),
                               matrix(module.g_a_proj), matrix(module.g_b_proj), array(module.o_norm.weight),
                               matrix(module.o_proj))
    x = np.random.default_rng(7).standard_normal((2, 11, d_model))
    with torch.no_grad():
        expected = array(module(torch.tensor(x)))
    ours = kimi_delta_attention(x, weights, n_heads, chunk_size=4, eps=config.rms_norm_eps)
    assert np.max(np.abs(ours - expected)) <= 1e-10


def test_with_orthonormal_keys_both_memories_recall_every_value_exactly():
    rng = np.random.default_rng(3)
    keys = np.linalg.qr(rng.standard_normal((6, 6)))[0][:5]  # (5, 6): orthonormal rows
    values = rng.standard_normal((5, 4))  # (n, d_v)
    for rule in MEMORY_RULES:
        np.testing.assert_allclose(keys @ fast_weight_memory(keys, values, rule), values, atol=1e-12)


def test_plain_linear_memory_mixes_values_of_keys_that_are_not_orthogonal_and_the_delta_rule_keeps_the_last():
    rng = np.random.default_rng(4)
    keys = l2_normalize(rng.standard_normal((5, 6)), eps=0.0)  # (5, 6): unit, not orthogonal
    values = rng.standard_normal((5, 4))
    assert not np.allclose(keys @ fast_weight_memory(keys, values, "linear"), values, atol=1e-3)
    np.testing.assert_allclose(keys[-1] @ fast_weight_memory(keys, values, "delta"), values[-1], atol=1e-12)


def test_a_rewritten_key_returns_its_latest_value_under_the_delta_rule_and_the_sum_under_the_plain_rule():
    rng = np.random.default_rng(5)
    keys = np.linalg.qr(rng.standard_normal((4, 4)))[0][[0, 1, 2, 0]]  # (4, 4): key 0 written again last
    values = rng.standard_normal((4, 3))
    np.testing.assert_allclose(keys[0] @ fast_weight_memory(keys, values, "delta"), values[3], atol=1e-12)
    np.testing.assert_allclose(keys[0] @ fast_weight_memory(keys, values, "linear"), values[0] + values[3], atol=1e-12)
    np.testing.assert_allclose(keys[1:3] @ fast_weight_memory(keys, values, "delta"), values[1:3], atol=1e-12)


def test_the_delta_memory_is_the_state_of_the_delta_rule_with_a_constant_beta():
    rng = np.random.default_rng(6)
    keys, values = l2_normalize(rng.standard_normal((9, 4))), rng.standard_normal((9, 2))
    state = delta_rule_recurrent(keys, keys, values, np.full(9, 0.3)).state  # (d_k, d_v)
    np.testing.assert_allclose(fast_weight_memory(keys, values, "delta", beta=0.3), state, atol=1e-14)


def test_memory_arguments_are_refused_naming_them():
    with pytest.raises(ValueError, match="rule must be one of"):
        fast_weight_memory(np.eye(2), np.eye(2), "hebb")
    with pytest.raises(ValueError, match="beta must be a number in"):
        fast_weight_memory(np.eye(2), np.eye(2), beta=0.0)
    with pytest.raises(ValueError, match="one pair per row"):
        fast_weight_memory(np.eye(2), np.eye(3))
