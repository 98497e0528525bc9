"""attnbook.learning.loop.fit: it learns (a linear regression through linear_grads, a one-layer encoder
memorising a batch), two runs with the same seed are identical, and tqdm is imported only for the bar."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from attnbook import init_encoder_layer
from attnbook.learning.gradients import linear_grads
from attnbook.learning.layers import encoder_layer_vjp
from attnbook.learning.loop import History, fit
from attnbook.learning.optim import tree_map


class Linear(NamedTuple):
    w: np.ndarray  # (d_in, d_out)
    b: np.ndarray  # (d_out,)


TRUE_W = np.random.default_rng(0).standard_normal((3, 2))  # (d_in, d_out)


def regression_batch(rng):
    x = rng.standard_normal((16, 3))  # (batch, d_in)
    return x, x @ TRUE_W + 0.5  # (batch, d_in), (batch, d_out)


def regression_loss(params, batch):
    x, y = batch
    residual = x @ params.w + params.b - y  # (batch, d_out)
    d_out = 2 * residual / residual.size  # dL/d(prediction) of the mean squared error
    _, dw = linear_grads(x, params.w, d_out)
    return float(np.mean(residual**2)), Linear(dw, d_out.sum(axis=0))


def test_fit_learns_a_linear_regression_with_a_constant_rate():
    params, history = fit(Linear(np.zeros((3, 2)), np.zeros(2)), regression_loss, regression_batch, 300,
                          learning_rate=0.05, progress=False)
    assert isinstance(history, History) and history.losses.shape == (300,)
    assert history.losses[-10:].mean() < 1e-3 * history.losses[0]
    np.testing.assert_allclose(params.w, TRUE_W, atol=0.05)
    assert np.all(history.rates == 0.05) and np.all(np.diff(history.seconds) >= 0)


def encoder_memorising(seed):
    """A one-layer encoder (inside a NamedTuple) learning to map a fixed batch to fixed targets."""
    rng = np.random.default_rng(seed)
    x, target = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 3, 8))

    class Model(NamedTuple):
        layers: tuple

    def loss_and_gradients(params, batch):
        (out, _), back = encoder_layer_vjp.unchecked(batch[0], params.layers[0], 2)
        grads, _ = back(2 * (out - batch[1]) / out.size)
        return float(np.mean((out - batch[1]) ** 2)), Model((grads,))

    return Model((init_encoder_layer(8, 16, seed=seed),)), loss_and_gradients, lambda rng: (x, target)


def test_fit_with_the_noam_schedule_reduces_the_loss_of_an_encoder_layer():
    params, loss_and_gradients, next_batch = encoder_memorising(0)
    _, history = fit(params, loss_and_gradients, next_batch, 150, d_model=8, warmup=20, max_norm=1.0,
                     progress=False)
    assert history.losses[-1] < 0.5 * history.losses[0]
    assert int(np.argmax(history.rates)) == 19  # the peak at step = warmup
    assert np.all(history.grad_norms > 0)


def test_two_runs_with_the_same_seed_are_identical():
    def run(seed):
        return fit(Linear(np.zeros((3, 2)), np.zeros(2)), regression_loss, regression_batch, 30, d_model=4,
                   warmup=10, max_norm=0.5, seed=seed, progress=False)

    (p_1, h_1), (p_2, h_2), (_, h_3) = run(1), run(1), run(2)
    for field in ("losses", "grad_norms", "rates"):
        np.testing.assert_array_equal(getattr(h_1, field), getattr(h_2, field))
    np.testing.assert_array_equal(p_1.w, p_2.w)
    assert not np.array_equal(h_1.losses, h_3.losses)


def test_fit_shows_a_progress_bar_with_the_loss(capsys):
    pytest.importorskip("tqdm")
    fit(Linear(np.zeros((3, 2)), np.zeros(2)), regression_loss, regression_batch, 5, learning_rate=0.1, every=2)
    assert "loss=" in capsys.readouterr().err


def test_fit_without_a_progress_bar_never_imports_tqdm():
    code = textwrap.dedent("""
        import sys
        import numpy as np
        from typing import NamedTuple
        from attnbook.learning.loop import fit

        class P(NamedTuple):
            w: np.ndarray

        fit(P(np.zeros(2)), lambda p, b: (float(np.sum(p.w ** 2)), P(2 * p.w)), lambda rng: None, 3,
            learning_rate=0.1, progress=False)
        assert not any(name == "tqdm" or name.startswith("tqdm.") for name in sys.modules), "tqdm was imported"
    """)
    src = Path(__file__).resolve().parents[2] / "src"
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_fit_refuses_a_nan_loss_and_gradients_of_another_structure():
    params = Linear(np.zeros((3, 2)), np.zeros(2))
    with pytest.raises(FloatingPointError, match="the loss is nan at step 1"):
        fit(params, lambda p, b: (float("nan"), p), regression_batch, 3, learning_rate=0.1, progress=False)
    with pytest.raises(ValueError, match=r"grads\[0\] has shape \(3,\) but params\[0\] has shape \(3, 2\)"):
        fit(params, lambda p, b: (1.0, Linear(np.zeros(3), p.b)), regression_batch, 3, learning_rate=0.1,
            progress=False)
    with pytest.raises(TypeError, match="next_batch must be callable"):
        fit(params, regression_loss, None, 3, learning_rate=0.1, progress=False)


def test_the_cosine_schedule_warms_up_then_falls_to_a_tenth_and_a_stopped_run_keeps_the_whole_runs_rates():
    params, loss_and_gradients, next_batch = encoder_memorising(0)
    _, whole = fit(params, loss_and_gradients, next_batch, 100, warmup=10, peak_rate=1e-2, progress=False)
    assert int(np.argmax(whole.rates)) == 9 and whole.rates[9] == pytest.approx(1e-2)
    assert whole.rates[-1] == pytest.approx(1e-3) and np.all(np.diff(whole.rates[9:]) < 0)
    _, stopped = fit(params, loss_and_gradients, next_batch, 30, warmup=10, peak_rate=1e-2, decay_steps=100,
                     progress=False)
    np.testing.assert_array_equal(stopped.rates, whole.rates[:30])
    np.testing.assert_array_equal(stopped.losses, whole.losses[:30])  # the same run, stopped


def test_weight_decay_shrinks_the_matrices_toward_zero_and_leaves_the_vectors_alone():
    params, loss_and_gradients, next_batch = encoder_memorising(0)
    zero = lambda p, batch: (0.0, tree_map(np.zeros_like, p))  # noqa: E731: a loss whose gradient is 0
    decayed, _ = fit(params, zero, next_batch, 5, learning_rate=0.1, weight_decay=0.5, progress=False)
    w, w0 = decayed.layers[0].self_attention.w_q, params.layers[0].self_attention.w_q
    np.testing.assert_allclose(w, w0 * 0.95**5)  # (1 - rate * lambda) per step, Adam's step being 0
    np.testing.assert_array_equal(decayed.layers[0].self_attention.b_q, params.layers[0].self_attention.b_q)
    with pytest.raises(ValueError, match="weight_decay must be a non-negative finite number"):
        fit(params, zero, next_batch, 1, learning_rate=0.1, weight_decay=-1.0, progress=False)
    with pytest.raises(ValueError, match="must be smaller than the schedule's 5 steps"):
        fit(params, zero, next_batch, 5, warmup=5, peak_rate=0.1, progress=False)
