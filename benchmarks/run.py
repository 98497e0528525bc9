"""Benchmark of the book's attention code on this machine: `make bench` (or `.venv/bin/python benchmarks/run.py`).

It measures, in one run, side by side:

1. plain attention (attnbook.efficient.batched.batched_attention: the fast path of
   attnbook.scaled_dot_product_attention, tested equal to it) against the time of its two matrix
   products alone (q k^T and weights v, the BLAS lower bound), at batch x heads = 16, n = 1024,
   d = 64, float32; the same for tiled attention (attnbook.tiled.tiled_attention);
2. the peak extra memory of tiled attention at n = 16384, d = 64, float32 (tracemalloc, which traces
   numpy's allocations), against the n^2 * 4 bytes = 1 GiB that plain attention's weights alone need;
   and, for comparison, plain attention's measured peak at n = 4096;
3. tiled attention's time relative to plain attention at n = 4096, d = 64, float32;
4. when PyTorch is installed, both against torch.nn.functional.scaled_dot_product_attention on the
   same inputs. PyTorch is timed in a child process, after the numpy timings: its OpenMP threads keep
   spinning for a while after each call, and interleaved with numpy they would slow numpy's BLAS
   threads down and distort every other figure;
5. training throughput: target tokens per second of one training step (forward, backward, clipping,
   Adam at the Noam rate: the step of attnbook.learning.loop.fit) of the reversal encoder-decoder
   (attnbook.learning.models.seq2seq) at its training batch (64 sequences) and width (d_model 32, d_ff 64) and at
   d_model 128, d_ff 512; the package in float64 (the only dtype it trains in) against its PyTorch twin
   (benchmarks/torch_reversal.py, the same weights and computation, tested equal in
   code/tests/learning/test_seq2seq_torch.py) in float64, like with like, and in float32, PyTorch's usual
   dtype, for reference; PyTorch in a child process as in 4;
6. GPT training throughput: characters and counted GFLOP per second of one training step of the character-level
   GPT (attnbook.learning.models.gpt; the stored model's size and a wider one, its batch) in float32, the dtype it
   trains in, set against the float32 GEMM rate numpy's BLAS reaches in the same run, and against
   its PyTorch twin (benchmarks/torch_gpt.py, tested equal in float64 in
   code/tests/learning/models/test_gpt_torch.py) in float32, each in child processes of its own: on every
   usable core with its own threads (the package's two halves of the batch on one BLAS thread each, as
   `make train` runs it; PyTorch's default threads) and pinned to one core;
7. the forward pass of a pretrained model, all-MiniLM-L6-v2 (attnbook.pretrained.fast.bert_forward_fast, the fast
   path of attnbook.pretrained.bert.bert_forward, the book's encoder layers, and the reference itself; float32,
   every layer's states and every head's weights returned) on a batch of 8 sentences of 32 tokens, against Hugging Face's BertModel on the same files (benchmarks/torch_minilm.py, tested equal in
   code/tests/pretrained/test_bert_transformers.py) in its default configuration (scaled dot-product attention)
   and with eager attention returning every layer's outputs, each side in child processes of its own, on every
   usable core with its own threads and pinned to one core;
8. one decoding step's attention over a cache of 4096 tokens at DeepSeek-V3's sizes: multi-head latent attention in
   its absorbed form against grouped-query attention with 8 key-value heads (cache bytes read, multiply-adds, time).

Times are the minimum over interleaved repeats (the least disturbed run; the machine may be shared).
It prints the machine and the figures, and writes them into the package
(attnbook/data/benchmark_results.json, see attnbook.measure.timing.load_benchmark_results), from where the chapter
"Efficient attention" reads them. This is a benchmark, not a test: nothing fails when a goal is missed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from attnbook.efficient.batched import batched_attention
from attnbook.efficient.tiled import tiled_attention
from attnbook.learning.loop import BETAS, EPS
from attnbook.learning.optim import adam_update, clip_tree, init_adam, noam, tree_leaves
from attnbook.learning.models.scaffold import loss_and_gradients
from attnbook.learning.models import gpt
from attnbook.learning.models.seq2seq import MODEL, ReversalConfig, init_reversal
from attnbook.learning.tasks import draw_reversal
from attnbook.attention import scaled_dot_product_attention
from attnbook.measure.counts import DEEPSEEK_V3, kv_cache_bytes_per_token
from attnbook.measure.timing import benchmark_results_path, time_calls

MIB = 2**20
GOALS = {"plain_over_matmul": 1.3, "tiled_peak_mib": 64.0}
# training throughput: the reversal model at its own width and at a wider one where BLAS matters more
TRAINING_WIDTHS = {"d_model_32": {"d_model": 32, "d_ff": 64}, "d_model_128": {"d_model": 128, "d_ff": 512}}
TRAINING_SEED, TRAINING_BATCH_SEED = 0, 1  # the initial parameters; the one batch every step trains on


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def blas_description() -> str:
    try:  # threadpoolctl, when installed, names the library actually loaded and its thread count
        from threadpoolctl import threadpool_info

        pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
        if pools:
            return "; ".join(f"{p.get('internal_api')} {p.get('version')} ({p.get('num_threads')} threads)"
                             for p in pools)
    except ImportError:
        pass
    try:
        config = np.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # noqa: BLE001 - the description is informative only
        return "unknown"


def machine() -> dict:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    info = {
        "cpu": cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "blas": blas_description(),
        "torch": torch_version(),
        "torch_threads": None,  # filled in by the child process that times PyTorch
    }
    return info


def torch_version() -> str | None:
    """PyTorch's version if it is installed, found without importing it into this process."""
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def torch_worker(folder: Path, repeats: int) -> None:
    """Child process: time torch's scaled_dot_product_attention on the arrays saved in ``folder``."""
    import torch

    report = {"threads": torch.get_num_threads(), "seconds": {}, "outputs": {}}
    for name in sorted({p.name.split(".")[0] for p in folder.glob("*.q.npy")}):
        tq, tk, tv = (torch.from_numpy(np.load(folder / f"{name}.{part}.npy")) for part in "qkv")
        sdpa = torch.nn.functional.scaled_dot_product_attention
        report["seconds"][name] = float(time_calls([lambda: sdpa(tq, tk, tv)], repeats=repeats, clock="wall")[0])
        out = sdpa(tq, tk, tv)
        np.save(folder / f"{name}.torch_out.npy", out.numpy())
    print(json.dumps(report))


def time_torch(cases: dict, repeats: int) -> dict | None:
    """Time PyTorch on ``cases`` ({name: (q, k, v)}) in a child process; None without PyTorch."""
    if torch_version() is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, arrays in cases.items():
            for part, array in zip("qkv", arrays):
                np.save(folder / f"{name}.{part}.npy", array)
        done = subprocess.run([sys.executable, __file__, "--torch-worker", str(folder), "--repeats", str(repeats)],
                              capture_output=True, text=True, check=True)
        report = json.loads(done.stdout.strip().splitlines()[-1])
        report["outputs"] = {name: np.load(folder / f"{name}.torch_out.npy") for name in cases}
    return report


# --- training throughput ---------------------------------------------------------------------------------


def training_case(widths: dict) -> tuple:
    """The reversal model at ``widths`` (the rest as ReversalConfig()), its seeded parameters and one batch."""
    config = ReversalConfig(**widths)
    batch = draw_reversal(np.random.default_rng(TRAINING_BATCH_SEED), config.batch_size, config.n_symbols,
                          config.min_length, config.max_length)
    return config, init_reversal(config, TRAINING_SEED), batch


class PackageTrainer:
    """The step of attnbook.learning.loop.fit on the package's kernels (as attnbook.learning.trained trains the reversal model)."""

    def __init__(self, params, config: ReversalConfig):
        self.config, self.params, self.state = config, params, init_adam(params)

    def step(self, batch) -> float:
        config = self.config
        loss, grads = loss_and_gradients(MODEL, self.params, batch, config)
        grads, _ = clip_tree(grads, config.max_norm)
        rate = noam(self.state.step + 1, config.d_model, config.warmup)
        self.params, self.state = adam_update(self.params, grads, self.state, rate, *BETAS, EPS)
        return loss


def steps_per_call(widths: dict) -> int:
    """Training steps per timed call: several at the small width, so that a call lasts tens of milliseconds."""
    return 5 if widths["d_model"] <= 32 else 1


def timed_steps(trainer, batch, steps: int):
    def call():
        for _ in range(steps):
            trainer.step(batch)
    return call


def training_worker(repeats: int) -> None:
    """Child process: time the PyTorch twin's training step in float64 and float32 on every width."""
    import torch
    import torch_reversal  # benchmarks/torch_reversal.py: this script's folder is on the path when run

    report = {"threads": torch.get_num_threads(), "seconds_per_step": {}, "first_loss": {}}
    calls, names = [], []
    for name, widths in TRAINING_WIDTHS.items():
        config, params, batch = training_case(widths)
        for dtype in ("float64", "float32"):
            trainer = torch_reversal.TorchTrainer(params, config, getattr(torch, dtype))
            report["first_loss"][f"{name}.{dtype}"] = trainer.step(batch)  # the loss of the initial parameters
            calls.append(timed_steps(trainer, batch, steps_per_call(widths)))
            names.append((name, dtype, steps_per_call(widths)))
    seconds = time_calls(calls, repeats=repeats, statistic="min", clock="wall")
    for (name, dtype, steps), t in zip(names, seconds):
        report["seconds_per_step"][f"{name}.{dtype}"] = float(t) / steps
    print(json.dumps(report))


def bench_training(repeats: int) -> dict:
    """Tokens per second of a training step: the package (float64) here, its PyTorch twin in a child process."""
    cases, calls = {}, []
    for name, widths in TRAINING_WIDTHS.items():
        config, params, batch = training_case(widths)
        trainer = PackageTrainer(params, config)
        first_loss = trainer.step(batch)
        calls.append(timed_steps(trainer, batch, steps_per_call(widths)))
        cases[name] = {
            "d_model": config.d_model, "d_ff": config.d_ff, "n_heads": config.n_heads,
            "layers": [config.n_encoder_layers, config.n_decoder_layers], "batch": config.batch_size,
            "n_source": int(batch.source.shape[1]), "n_target": int(batch.target_in.shape[1]),
            "target_tokens_real": int(batch.target_mask.sum()), "target_tokens_padded": int(batch.target_in.size),
            "steps_per_timed_call": steps_per_call(widths), "first_loss": first_loss,
        }
    seconds = time_calls(calls, repeats=repeats, statistic="min", clock="wall")
    for (name, case), t in zip(cases.items(), seconds):
        case["seconds_per_step"] = {"package_float64": float(t) / case["steps_per_timed_call"]}
    result = {
        "model": "attnbook.learning.models.seq2seq reversal encoder-decoder (ReversalConfig but for the widths)",
        "step": "forward, backward, clipping to the global norm, Adam at the Noam rate (attnbook.learning.loop.fit)",
        "tokens": "target tokens per step: real = the positions the loss counts (EOS included, padding excluded), "
                  "padded = batch x n_target",
        "package_dtype": "float64",
        "numpy_blas_threads": blas_threads(),
        "torch_threads": None,
        "load_average_1min": load_average(),  # other programs on the machine: the figures are noisier when high
        "cases": cases,
    }
    report = time_training_torch(repeats)
    if report is not None:
        result["torch_threads"] = report["threads"]
        for name, case in cases.items():
            for dtype in ("float64", "float32"):
                case["seconds_per_step"][f"torch_{dtype}"] = report["seconds_per_step"][f"{name}.{dtype}"]
            case["torch_matches_package"] = bool(
                np.isclose(report["first_loss"][f"{name}.float64"], case["first_loss"], rtol=1e-10, atol=0)
                and np.isclose(report["first_loss"][f"{name}.float32"], case["first_loss"], rtol=1e-4, atol=0))
    for case in cases.values():
        steps = case["seconds_per_step"]
        case["tokens_per_second"] = {key: round(case["target_tokens_real"] / t, 1) for key, t in steps.items()}
        case["padded_tokens_per_second"] = {key: round(case["target_tokens_padded"] / t, 1) for key, t in steps.items()}
        case["seconds_per_step"] = {key: round(t, 6) for key, t in steps.items()}
        case["first_loss"] = round(case["first_loss"], 6)
        if "torch_float64" in steps:  # throughput ratios, = package seconds / torch seconds
            case["torch_over_package"] = {
                "float64": round(steps["package_float64"] / steps["torch_float64"], 3),
                "torch_float32_over_package_float64": round(steps["package_float64"] / steps["torch_float32"], 3),
            }
    return result


# --- a pretrained model's forward pass -------------------------------------------------------------------

MINILM_BATCH, MINILM_TOKENS = 8, 32  # sentences, tokens each ([CLS] and [SEP] included)
MINILM_GOAL = 1.5  # issue 41: the package's forward pass at most 1.5 times PyTorch's (transformers' default)
# {key: (side, cores)}: the package, transformers' two configurations (benchmarks/torch_minilm.py), every core or one
MINILM_RUNS = {f"{side}{suffix}": (side, cores) for suffix, cores in (("", "all"), ("_one_core", "one"))
               for side in ("package", "package_reference", "torch_sdpa", "torch_eager_all_outputs")}


def minilm_batch() -> tuple:
    """8 passages of the plays cut to 32 tokens each: ids ``(8, 32)`` and their mask (all real tokens)."""
    from attnbook.pretrained.wordpiece import encode_batch, load_vocabulary
    from attnbook.text.corpus import shakespeare

    words = shakespeare().split()[1000:]
    sentences = [" ".join(words[40 * i:40 * (i + 1)]) for i in range(MINILM_BATCH)]  # 40 words: >= 30 tokens
    batch = encode_batch(sentences, load_vocabulary(), max_length=MINILM_TOKENS)
    assert batch.ids.shape == (MINILM_BATCH, MINILM_TOKENS) and np.all(batch.lengths == MINILM_TOKENS)
    return batch.ids, batch.lengths


def minilm_worker(side: str, cores: str, repeats: int) -> None:
    """Child process: time one side's forward pass of all-MiniLM-L6-v2 on the batch, on every core or one."""
    if cores == "one":
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    ids, lengths = minilm_batch()
    if side.startswith("package"):
        from attnbook.pretrained.bert import bert_forward, load_minilm
        from attnbook.pretrained.fast import bert_forward_fast

        model, forward = load_minilm(), bert_forward_fast if side == "package" else bert_forward
        call = lambda: forward(ids, lengths, model.weights, model.config)  # noqa: E731
        last, threads = call()[0][-1], blas_threads()
    else:
        import torch
        import torch_minilm  # benchmarks/torch_minilm.py: this script's folder is on the path when run

        if cores == "one":
            torch.set_num_threads(1)
        call, last = torch_minilm.forward_call(side, ids, np.ones(ids.shape, dtype=bool))
        threads = torch.get_num_threads()
    seconds = time_calls([call], repeats=repeats, statistic="min", clock="wall")[0]
    print(json.dumps({"threads": threads, "seconds": float(seconds), "last_hidden": np.asarray(last).tolist()}))


def time_minilm(side: str, cores: str, repeats: int) -> dict:
    """:func:`minilm_worker` in a child process (one BLAS thread for the package pinned to one core)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1") if cores == "one" and side.startswith("package") else None
    done = subprocess.run([sys.executable, __file__, "--minilm-worker", side, "--cores", cores, "--repeats",
                           str(repeats)], capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_minilm(repeats: int) -> dict:
    """Seconds of the forward pass of all-MiniLM-L6-v2: the package against transformers, float32."""
    sides = {side for side, _ in MINILM_RUNS.values()}
    if torch_version() is None or importlib.util.find_spec("transformers") is None:
        sides = {"package", "package_reference"}
    reports = {key: time_minilm(side, cores, repeats) for key, (side, cores) in MINILM_RUNS.items() if side in sides}
    seconds = {key: round(report["seconds"], 6) for key, report in reports.items()}
    package = np.array(reports["package"]["last_hidden"])
    result = {
        "model": "all-MiniLM-L6-v2 (6 post-norm encoder layers, 12 heads, d_model 384), float32",
        "batch": MINILM_BATCH, "tokens": MINILM_TOKENS, "load_average_1min": load_average(),
        "package_blas_threads": reports["package"]["threads"], "seconds": seconds,
        "goal_package_over_torch": MINILM_GOAL,
    }
    if "torch_sdpa" in reports:
        result["torch_threads"] = reports["torch_sdpa"]["threads"]
        result["torch_matches_package"] = all(
            float(np.abs(np.array(reports[key]["last_hidden"]) - package).max()) < 1e-4 for key in reports)
        for suffix in ("", "_one_core"):
            for package in ("package", "package_reference"):
                for mode in ("torch_sdpa", "torch_eager_all_outputs"):
                    result[f"{package}_over_{mode.removeprefix('torch_')}{suffix}"] = round(
                        seconds[f"{package}{suffix}"] / seconds[f"{mode}{suffix}"], 3)
        result["goal_met"] = result["package_over_sdpa"] <= MINILM_GOAL
    return result


def minilm_report(t: dict) -> list:
    lines = [f"7. forward pass of all-MiniLM-L6-v2, {t['batch']} sentences of {t['tokens']} tokens, float32"
             f" (child processes; *_one_core: pinned to one core, one thread); load average {t['load_average_1min']}"]
    for key, seconds in t["seconds"].items():
        lines.append(f"    {key:35s} {seconds * 1e3:8.2f} ms")
    if "package_over_sdpa" in t:
        lines.append(f"    package (fast path) / transformers (default, SDPA): {t['package_over_sdpa']:.2f} on every"
                     f" core, {t['package_over_sdpa_one_core']:.2f} on one (goal <= {t['goal_package_over_torch']}:"
                     f" {'met' if t['goal_met'] else 'not met'}); against eager with every output:"
                     f" {t['package_over_eager_all_outputs']:.2f}, {t['package_over_eager_all_outputs_one_core']:.2f}"
                     f"    (last states agree: {t['torch_matches_package']})")
        lines.append(f"    package (reference) / transformers (SDPA): {t['package_reference_over_sdpa']:.2f} on every"
                     f" core, {t['package_reference_over_sdpa_one_core']:.2f} on one")
    return lines


# --- GPT training throughput -----------------------------------------------------------------------------


#: the GPT sizes the step is timed at: the stored model's, and a wider and deeper one (4x the parameters), the kind
#: of size a GPT that beats Kneser-Ney needs (issue 40); both train on the stored model's batch of 16 x 128 characters
GPT_SIZES = {"stored": gpt.GPTConfig(),
             "wider": gpt.GPTConfig(d_model=128, n_layers=4, n_heads=4, n_kv_heads=2, d_ff=352)}
GPT_GOALS = {"fraction_of_gemm_wider": 0.40, "package_over_torch": 1.5}  # issue 40, item 4
GEMM_SIZES = (512, 1024, 2048)  # square float32 products: the machine's matrix-multiply rate is the best of them


def gpt_case(size: str = "stored") -> tuple:
    """The GPT at ``size`` (a key of GPT_SIZES), its seeded float32 parameters and one training batch."""
    config = GPT_SIZES[size]
    return config, gpt.init_gpt(config, TRAINING_SEED), gpt.gpt_batch(np.random.default_rng(TRAINING_BATCH_SEED), config)


class GPTPackageTrainer:
    """The step of attnbook.learning.loop.fit on the package's kernels, as `make train` trains the GPT."""

    def __init__(self, params, config):
        self.config, self.params, self.state = config, params, init_adam(params)

    def step(self, batch) -> float:
        config = self.config
        loss, grads = loss_and_gradients(gpt.MODEL, self.params, batch, config)
        grads, _ = clip_tree(grads, config.max_norm)
        rate = noam(self.state.step + 1, config.d_model, config.warmup)
        self.params, self.state = adam_update(self.params, grads, self.state, rate, *BETAS, EPS)
        return loss


# the GPT's step on all usable cores (each side's own threads: PyTorch's intra-op threads, the package's two
# halves of the batch on one BLAS thread each, as `make train` runs it) and on one core (PyTorch one thread)
GPT_RUNS = {"package_float32": ("package", "all"), "torch_float32": ("torch", "all"),
            "package_float32_one_core": ("package", "one"), "torch_float32_one_core": ("torch", "one")}


def gpt_worker(side: str, cores: str, size: str, repeats: int) -> None:
    """Child process: time one side's GPT training step in float32 at ``size``, on every usable core or on one."""
    if cores == "one":
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the package then runs its batch in one piece
    config, params, batch = gpt_case(size)
    if side == "torch":
        import torch
        import torch_gpt  # benchmarks/torch_gpt.py: this script's folder is on the path when run

        if cores == "one":
            torch.set_num_threads(1)
        trainer, threads = torch_gpt.TorchTrainer(params, config, torch.float32), torch.get_num_threads()
    else:
        trainer, threads = GPTPackageTrainer(params, config), min(2, len(os.sched_getaffinity(0)))  # fast_block
    first_loss = float(trainer.step(batch))
    seconds = time_calls([timed_steps(trainer, batch, 1)], repeats=repeats, statistic="min", clock="wall")[0]
    print(json.dumps({"threads": threads, "blas_threads": blas_threads(), "seconds_per_step": float(seconds),
                      "first_loss": first_loss}))


def time_gpt(side: str, cores: str, size: str, repeats: int) -> dict:
    """:func:`gpt_worker` in a child process; the package's with one BLAS thread (its own two do the work)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1") if side == "package" else None
    done = subprocess.run([sys.executable, __file__, "--gpt-worker", side, "--cores", cores, "--size", size,
                           "--repeats", str(repeats)], capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def gemm_worker(cores: str, repeats: int) -> None:
    """Child process: the float32 matrix-multiply rate (GFLOP/s, 2 m^3 operations a product) of numpy's BLAS."""
    if cores == "one":
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    rates = {}
    for m in GEMM_SIZES:
        a, b, _ = inputs((m, m), seed=m)  # each (m, m)
        seconds = time_calls([lambda: a @ b], repeats=repeats, statistic="min", clock="wall")[0]
        rates[str(m)] = 2 * m**3 / float(seconds) / 1e9
    print(json.dumps({"blas_threads": blas_threads(), "gflops_per_second": rates}))


def time_gemm(cores: str, repeats: int) -> dict:
    """:func:`gemm_worker` in a child process: every core with BLAS's own threads, or one core and one thread."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1") if cores == "one" else None
    done = subprocess.run([sys.executable, __file__, "--gemm-worker", "--cores", cores, "--repeats", str(repeats)],
                          capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_gpt_size(size: str, gemm: dict, repeats: int) -> dict:
    """One size's step: seconds, characters and GFLOP/s of each run, and the share of the GEMM rate they reach."""
    config, _, _ = gpt_case(size)
    sides = ("package", "torch") if torch_version() is not None else ("package",)
    reports = {key: time_gpt(side, cores, size, repeats) for key, (side, cores) in GPT_RUNS.items() if side in sides}
    seconds = {key: report["seconds_per_step"] for key, report in reports.items()}
    flops = gpt.training_step_flops(config)
    first_loss = reports["package_float32"]["first_loss"]
    result = {
        "config": {field: getattr(config, field) for field in ("d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff",
                                                                 "context", "batch_size")},
        "parameters": int(sum(leaf.size for leaf in tree_leaves(gpt_case(size)[1]))),
        "characters_per_step": int(config.batch_size * config.context),
        "flops_per_step": flops,  # attnbook.learning.models.gpt.training_step_flops: matrix products, both passes
        "package_threads": reports["package_float32"]["threads"],
        "numpy_blas_threads": reports["package_float32"]["blas_threads"], "torch_threads": None,
        "load_average_1min": load_average(), "first_loss": round(first_loss, 6),
    }
    if "torch_float32" in reports:
        result["torch_threads"] = reports["torch_float32"]["threads"]
        result["torch_matches_package"] = bool(np.isclose(reports["torch_float32"]["first_loss"], first_loss,
                                                          rtol=1e-4, atol=0))
    result["seconds_per_step"] = {key: round(t, 6) for key, t in seconds.items()}
    result["characters_per_second"] = {key: round(result["characters_per_step"] / t, 1) for key, t in seconds.items()}
    result["gflops_per_second"] = {key: round(flops / t / 1e9, 2) for key, t in seconds.items()}
    result["fraction_of_gemm"] = {  # against the GEMM rate on the same cores: every core, or the one it is pinned to
        key: round(flops / t / 1e9 / gemm["one_core" if key.endswith("one_core") else "all_cores"], 3)
        for key, t in seconds.items()}
    if "torch_float32" in seconds:
        result["torch_over_package"] = round(seconds["package_float32"] / seconds["torch_float32"], 3)
        result["torch_over_package_one_core"] = round(
            seconds["package_float32_one_core"] / seconds["torch_float32_one_core"], 3)
    return result


def bench_gpt_training(repeats: int) -> dict:
    """The GPT's training step at each of GPT_SIZES (the package and its twin, float32) against the GEMM rate."""
    gemm_runs = {cores: time_gemm(cores, repeats) for cores in ("all", "one")}
    gemm = {"all_cores": round(max(gemm_runs["all"]["gflops_per_second"].values()), 2),
            "one_core": round(max(gemm_runs["one"]["gflops_per_second"].values()), 2)}
    result = {
        "model": "attnbook.learning.models.gpt character-level GPT (GPTConfig(): the stored model's; and wider)",
        "step": "forward, backward, clipping to the global norm, Adam at the Noam rate (attnbook.learning.loop.fit)",
        "dtype": "float32",
        "gemm_gflops_per_second": gemm,  # the best of GEMM_SIZES: the matrix-multiply rate numpy's BLAS reaches here
        "gemm_by_size": {cores: {m: round(rate, 2) for m, rate in run["gflops_per_second"].items()}
                         for cores, run in gemm_runs.items()},
        "gemm_blas_threads": gemm_runs["all"]["blas_threads"],
        "sizes": {size: bench_gpt_size(size, gemm, repeats) for size in GPT_SIZES},
        "goals": dict(GPT_GOALS),
    }
    wider = result["sizes"]["wider"]
    result["goals"]["fraction_of_gemm_wider_met"] = wider["fraction_of_gemm"]["package_float32"] >= \
        GPT_GOALS["fraction_of_gemm_wider"]
    if "torch_over_package" in wider:
        result["goals"]["package_over_torch_met"] = {size: case["torch_over_package"] <= GPT_GOALS["package_over_torch"]
                                                     for size, case in result["sizes"].items()}
    return result


def gpt_report(t: dict) -> list:
    gemm = t["gemm_gflops_per_second"]
    lines = [f"6. training step of the character-level GPT: forward + backward + clipping + Adam, float32"
             f" (child processes; *_one_core: pinned to one core, one thread); float32 GEMM rate of numpy's BLAS"
             f" here: {gemm['all_cores']:.1f} GFLOP/s on every core, {gemm['one_core']:.1f} on one"]
    for size, case in t["sizes"].items():
        c = case["config"]
        threads = f"PyTorch {case['torch_threads']} threads" if case["torch_threads"] else "PyTorch not installed"
        lines.append(f"  {size}: d_model {c['d_model']}, {c['n_layers']} layers, {c['n_heads']} heads"
                     f" ({c['n_kv_heads']} kv), d_ff {c['d_ff']}, {case['parameters']:,} parameters;"
                     f" {case['characters_per_step']} characters and {case['flops_per_step'] / 1e9:.2f} GFLOP a step;"
                     f" the package {case['package_threads']} threads, {threads}; load average"
                     f" {case['load_average_1min']}")
        for key, seconds in case["seconds_per_step"].items():
            lines.append(f"    {key:25s} {seconds * 1e3:8.2f} ms/step  {case['characters_per_second'][key]:10.0f}"
                         f" characters/s  {case['gflops_per_second'][key]:7.2f} GFLOP/s"
                         f"  ({100 * case['fraction_of_gemm'][key]:.0f} % of the GEMM rate)")
        if "torch_over_package" in case:
            lines.append(f"    package / torch time: {case['torch_over_package']:.2f} on every core, "
                         f"{case['torch_over_package_one_core']:.2f} on one (goal <= {t['goals']['package_over_torch']})"
                         f"    (losses agree: {case['torch_matches_package']})")
    met = "met" if t["goals"]["fraction_of_gemm_wider_met"] else "not met"
    lines.append(f"  goal: the package at the wider size >= {100 * t['goals']['fraction_of_gemm_wider']:.0f} % of the"
                 f" GEMM rate: {met}")
    return lines


# --- a decoding step: latent attention against grouped-query attention -----------------------------------

DECODE_CONTEXT = 4096  # tokens in the cache when the new token is decoded
DECODE_GQA_KV_HEADS = 8  # grouped-query attention with DeepSeek-V3's heads, 8 key-value heads (16 queries each)


def decode_cases() -> dict:
    """One new token's attention over a cache of DECODE_CONTEXT tokens, one layer, float32, DeepSeek-V3's sizes.

    ``gqa``: 8 key-value heads of keys ``d_nope + d_rope`` and values ``d_v`` wide, 16 query heads on each;
    ``mla``: the absorbed form of :func:`attnbook.recent.latent.absorbed_latent_attention`, every head's query
    ``kv_rank + d_rope`` wide against the one cached latent and rotary key, the latent as the value.
    Returns ``{kind: (q, k, v, cache numbers per token)}``.
    """
    v3, t = DEEPSEEK_V3, DECODE_CONTEXT
    h, h_kv, d_k = v3["n_heads"], DECODE_GQA_KV_HEADS, v3["d_nope"] + v3["d_rope"]
    rng = np.random.default_rng(4)

    def normal(*shape):
        return rng.standard_normal(shape, dtype=np.float32)

    return {
        "gqa": (normal(h_kv, h // h_kv, d_k), normal(h_kv, t, d_k), normal(h_kv, t, v3["d_v"]),  # (h_kv, g, d_k), ..
                h_kv * (d_k + v3["d_v"])),
        "mla": (normal(1, h, v3["kv_rank"] + v3["d_rope"]), normal(1, t, v3["kv_rank"] + v3["d_rope"]),
                normal(1, t, v3["kv_rank"]), v3["kv_rank"] + v3["d_rope"]),  # (1, h, r + d_R), (1, t, ..), (1, t, r)
    }


def bench_decode(repeats: int) -> dict:
    """Seconds, cache bytes read and multiply-adds of one decoding step's attention, MLA (absorbed) and GQA."""
    cases = decode_cases()
    kernel = scaled_dot_product_attention.unchecked  # the reference kernel both layers of the package call
    v3 = DEEPSEEK_V3
    scale = 1 / math.sqrt(v3["d_nope"] + v3["d_rope"])  # both: MLA's absorbed scores are the plain form's
    seconds = min_times({kind: (lambda q=q, k=k, v=v: kernel(q, k, v, None, scale))
                         for kind, (q, k, v, _) in cases.items()}, repeats)
    cache_bytes = {  # attnbook.measure.counts.kv_cache_bytes_per_token, one layer, float32, times the context
        "gqa": DECODE_CONTEXT * kv_cache_bytes_per_token("gqa", 1, v3["d_nope"] + v3["d_rope"], v3["d_v"], v3["n_heads"],
                                                         n_kv_heads=DECODE_GQA_KV_HEADS, bytes_per_number=4),
        "mla": DECODE_CONTEXT * kv_cache_bytes_per_token("mla", 1, v3["d_nope"] + v3["d_rope"], v3["d_v"], kv_rank=v3["kv_rank"], d_rope=v3["d_rope"],
                                                         bytes_per_number=4)}
    result = {"context": DECODE_CONTEXT, "dtype": "float32", "layers": 1, "batch": 1,
              "sizes": "DeepSeek-V3's: 128 query heads, keys 128 + 64, values 128; GQA with 8 key-value heads; "
                       "MLA latent 512 + rotary key 64", "load_average_1min": load_average(), "cases": {}}
    for kind, (q, k, v, per_token) in cases.items():
        assert cache_bytes[kind] == k.size * 4 + (v.size * 4 if kind == "gqa" else 0)  # MLA's value is its key's latent
        macs = q.shape[0] * q.shape[1] * k.shape[1] * (k.shape[2] + v.shape[2])  # scores and weighted sum
        result["cases"][kind] = {
            "cache_numbers_per_token": per_token, "cache_bytes_read": cache_bytes[kind], "multiply_adds": macs,
            "seconds": round(seconds[kind], 6),
            "gb_per_second": round(cache_bytes[kind] / seconds[kind] / 1e9, 2),
            "gflops_per_second": round(2 * macs / seconds[kind] / 1e9, 2),
        }
    gqa, mla = result["cases"]["gqa"], result["cases"]["mla"]
    result["mla_over_gqa"] = {"cache_bytes": round(mla["cache_bytes_read"] / gqa["cache_bytes_read"], 3),
                              "multiply_adds": round(mla["multiply_adds"] / gqa["multiply_adds"], 3),
                              "seconds": round(mla["seconds"] / gqa["seconds"], 3)}
    return result


def decode_report(t: dict) -> list:
    lines = [f"8. one decoding step's attention over a cache of {t['context']} tokens, one layer, {t['dtype']}"
             f" ({t['sizes']}); load average {t['load_average_1min']}"]
    for kind, case in t["cases"].items():
        lines.append(f"    {kind}  cache {case['cache_bytes_read'] / MIB:6.1f} MiB read, {case['multiply_adds'] / 1e6:7.1f}"
                     f" M multiply-adds, {case['seconds'] * 1e3:7.2f} ms ({case['gb_per_second']:.1f} GB/s,"
                     f" {case['gflops_per_second']:.1f} GFLOP/s)")
    r = t["mla_over_gqa"]
    lines.append(f"    MLA / GQA: {r['cache_bytes']:.2f} of the bytes, {r['multiply_adds']:.2f} of the multiply-adds,"
                 f" {r['seconds']:.2f} of the time")
    return lines


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def blas_threads() -> int | None:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    counts = [p.get("num_threads") for p in threadpool_info() if p.get("user_api") == "blas"]
    return max(counts) if counts else None


def time_training_torch(repeats: int) -> dict | None:
    """Time the PyTorch twin's training steps in a child process; None without PyTorch."""
    if torch_version() is None:
        return None
    done = subprocess.run([sys.executable, __file__, "--training-worker", "--repeats", str(repeats)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def min_times(functions: dict, repeats: int) -> dict:
    """Minimum wall time of each function over ``repeats`` rounds, the functions interleaved in each round."""
    seconds = time_calls(list(functions.values()), repeats=repeats, statistic="min", clock="wall")
    return {name: float(t) for name, t in zip(functions, seconds)}


def peak_extra_bytes(function) -> int:
    """Peak memory allocated while ``function`` runs, above what was allocated before (tracemalloc)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        function()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def inputs(shape: tuple[int, ...], seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(shape, dtype=np.float32) for _ in range(3))  # each (..., n, d)


def bench_plain_vs_matmul(repeats: int) -> tuple[dict, tuple]:
    batch, heads, n, d = 2, 8, 1024, 64
    q, k, v = inputs((batch, heads, n, d), seed=0)  # each (batch, heads, n, d)
    weights = batched_attention(q, k, v).weights  # (batch, heads, n, n)
    k_t = np.swapaxes(k, -1, -2)  # (batch, heads, d, n)
    functions = {
        "matmul": lambda: (q @ k_t, weights @ v),  # the two products of attention, nothing else
        "plain": lambda: batched_attention(q, k, v),
        "tiled": lambda: tiled_attention(q, k, v),
    }
    times = min_times(functions, repeats)
    plain_out = batched_attention(q, k, v).output
    result = {
        "shape": [batch, heads, n, d],
        "dtype": "float32",
        "seconds": {name: round(t, 6) for name, t in times.items()},
        "plain_over_matmul": round(times["plain"] / times["matmul"], 3),
        "tiled_over_matmul": round(times["tiled"] / times["matmul"], 3),
        "tiled_matches_plain": bool(np.allclose(tiled_attention(q, k, v), plain_out, rtol=1e-4, atol=1e-5)),
    }
    return result, (q, k, v, plain_out)


def bench_tiled_memory(n_long: int, n_plain: int) -> dict:
    d = 64
    q, k, v = inputs((n_long, d), seed=1)  # each (n, d)
    start = time.perf_counter()
    peak = peak_extra_bytes(lambda: tiled_attention(q, k, v))
    seconds = time.perf_counter() - start
    q_p, k_p, v_p = inputs((n_plain, d), seed=2)  # each (n, d)
    plain_peak = peak_extra_bytes(lambda: batched_attention(q_p, k_p, v_p))
    return {
        "n": n_long,
        "d": d,
        "dtype": "float32",
        "tiled_peak_bytes": int(peak),
        "tiled_peak_mib": round(peak / MIB, 2),
        "tiled_seconds_with_tracemalloc": round(seconds, 3),
        "plain_weight_bytes": n_long * n_long * 4,
        "plain_weight_mib": n_long * n_long * 4 / MIB,
        "plain_peak_n": n_plain,
        "plain_peak_bytes_at_plain_peak_n": int(plain_peak),
        "plain_weight_bytes_at_plain_peak_n": n_plain * n_plain * 4,
    }


def bench_tiled_time(n: int, repeats: int) -> tuple[dict, tuple]:
    d = 64
    q, k, v = inputs((n, d), seed=3)  # each (n, d)
    functions = {
        "plain": lambda: batched_attention(q, k, v),
        "tiled": lambda: tiled_attention(q, k, v),
    }
    times = min_times(functions, repeats)
    result = {
        "n": n,
        "d": d,
        "dtype": "float32",
        "seconds": {name: round(t, 6) for name, t in times.items()},
        "tiled_over_plain": round(times["tiled"] / times["plain"], 3),
    }
    return result, (q, k, v, batched_attention(q, k, v).output)


def add_torch(results: dict, inputs_by_case: dict, repeats: int) -> None:
    """Time PyTorch on the same inputs as the numpy cases and add the ratios to ``results``."""
    report = time_torch({name: arrays[:3] for name, arrays in inputs_by_case.items()}, repeats)
    if report is None:
        return
    results["machine"]["torch_threads"] = report["threads"]
    for name, (_, _, _, plain_out) in inputs_by_case.items():
        case = results[name]
        seconds = report["seconds"][name]
        case["seconds"]["torch"] = round(seconds, 6)
        case["torch_matches_plain"] = bool(np.allclose(report["outputs"][name], plain_out, rtol=1e-4, atol=1e-5))
        case["plain_over_torch"] = round(case["seconds"]["plain"] / seconds, 3)
        case["tiled_over_torch"] = round(case["seconds"]["tiled"] / seconds, 3)


def report(results: dict) -> str:
    m, a, b, c = (results[key] for key in ("machine", "plain_vs_matmul", "tiled_memory", "tiled_time"))
    lines = [
        "Machine",
        f"  CPU            {m['cpu']}",
        f"  cores          {m['logical_cores']} logical, {m['usable_cores']} usable by this process",
        f"  Python/numpy   {m['python']} / numpy {m['numpy']}",
        f"  BLAS           {m['blas']}",
        f"  PyTorch        {m['torch'] or 'not installed'}"
        + (f" ({m['torch_threads']} threads)" if m["torch"] else ""),
        "",
        f"1. batch x heads = {a['shape'][0] * a['shape'][1]}, n = {a['shape'][2]}, d = {a['shape'][3]}, float32"
        " (minimum over repeats)",
    ]
    for name, seconds in a["seconds"].items():
        lines.append(f"  {name:<8} {seconds * 1e3:9.1f} ms")
    lines += [
        f"  plain / matmul = {a['plain_over_matmul']:.2f}   (goal <= {GOALS['plain_over_matmul']}:"
        f" {'met' if results['goals']['plain_over_matmul_met'] else 'not met'})",
        f"  tiled / matmul = {a['tiled_over_matmul']:.2f}",
    ]
    if "plain_over_torch" in a:
        lines.append(f"  plain / torch  = {a['plain_over_torch']:.2f}    tiled / torch = {a['tiled_over_torch']:.2f}"
                     f"    (outputs agree: {a['torch_matches_plain']})")
    lines += [
        "",
        f"2. tiled attention, n = {b['n']}, d = {b['d']}, float32",
        f"  peak extra memory {b['tiled_peak_mib']:.1f} MiB   (goal <= {GOALS['tiled_peak_mib']:.0f} MiB:"
        f" {'met' if results['goals']['tiled_peak_met'] else 'not met'});"
        f" plain attention's weights alone: {b['plain_weight_mib']:.0f} MiB",
        f"  (plain attention measured at n = {b['plain_peak_n']}: peak"
        f" {b['plain_peak_bytes_at_plain_peak_n'] / MIB:.0f} MiB for {b['plain_weight_bytes_at_plain_peak_n'] / MIB:.0f}"
        " MiB of weights)",
        "",
        f"3. n = {c['n']}, d = {c['d']}, float32, one head",
    ]
    for name, seconds in c["seconds"].items():
        lines.append(f"  {name:<8} {seconds * 1e3:9.1f} ms")
    lines.append(f"  tiled / plain = {c['tiled_over_plain']:.2f}")
    if "tiled_over_torch" in c:
        lines.append(f"  plain / torch = {c['plain_over_torch']:.2f}    tiled / torch = {c['tiled_over_torch']:.2f}"
                     f"    (outputs agree: {c['torch_matches_plain']})")
    if "training_throughput" in results:
        lines += ["", *training_report(results["training_throughput"])]
    if "gpt_training_throughput" in results:
        lines += ["", *gpt_report(results["gpt_training_throughput"])]
    if "pretrained_forward" in results:
        lines += ["", *minilm_report(results["pretrained_forward"])]
    if "decoding_step" in results:
        lines += ["", *decode_report(results["decoding_step"])]
    return "\n".join(lines)


def training_report(t: dict) -> list:
    threads = f"PyTorch {t['torch_threads']} threads" if t["torch_threads"] else "PyTorch not installed"
    lines = [f"5. training throughput, reversal model: one step = forward + backward + clipping + Adam;"
             f" numpy BLAS {t['numpy_blas_threads']} threads, {threads} (child process)",
             "   tokens = real target tokens (padding excluded); package in float64, its only dtype;"
             f" load average {t['load_average_1min']} on {os.cpu_count()} cores"]
    labels = {"package_float64": "package float64", "torch_float64": "torch   float64",
              "torch_float32": "torch   float32"}
    for case in t["cases"].values():
        lines.append(f"  d_model {case['d_model']}, d_ff {case['d_ff']}, batch {case['batch']}:"
                     f" {case['target_tokens_real']} real / {case['target_tokens_padded']} padded target tokens a step")
        for key, seconds in case["seconds_per_step"].items():
            lines.append(f"    {labels[key]}  {seconds * 1e3:8.2f} ms/step"
                         f"  {case['tokens_per_second'][key]:10.0f} tokens/s"
                         f"  ({case['padded_tokens_per_second'][key]:.0f} padded)")
        if "torch_over_package" in case:
            ratio = case["torch_over_package"]
            lines.append(f"    torch / package throughput: {ratio['float64']:.2f} in float64 (like with like);"
                         f" torch float32 / package float64 {ratio['torch_float32_over_package_float64']:.2f}"
                         f"    (losses agree: {case['torch_matches_package']})")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="timing rounds (default 15)")
    parser.add_argument("--output", type=Path, default=benchmark_results_path(),
                        help="where to write the JSON (default: the package's copy, which the book reads)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test of this script")
    parser.add_argument("--only", choices=["training", "gpt", "pretrained", "decode"],
                        help="run only this section and update it in the existing JSON (the others are kept)")
    parser.add_argument("--torch-worker", type=Path, help=argparse.SUPPRESS)  # internal: the PyTorch child
    parser.add_argument("--training-worker", action="store_true", help=argparse.SUPPRESS)  # internal: its twin
    parser.add_argument("--gpt-worker", choices=["package", "torch"], help=argparse.SUPPRESS)  # internal: GPT step
    parser.add_argument("--size", choices=sorted(GPT_SIZES), default="stored", help=argparse.SUPPRESS)
    parser.add_argument("--gemm-worker", action="store_true", help=argparse.SUPPRESS)  # internal: the GEMM rate
    parser.add_argument("--minilm-worker", choices=sorted({side for side, _ in MINILM_RUNS.values()}),
                        help=argparse.SUPPRESS)  # internal: the pretrained model's forward pass
    parser.add_argument("--cores", choices=["all", "one"], default="all", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.torch_worker:
        torch_worker(args.torch_worker, args.repeats)
        return 0
    if args.training_worker:
        training_worker(args.repeats)
        return 0
    if args.gpt_worker:
        gpt_worker(args.gpt_worker, args.cores, args.size, args.repeats)
        return 0
    if args.gemm_worker:
        gemm_worker(args.cores, args.repeats)
        return 0
    if args.minilm_worker:
        minilm_worker(args.minilm_worker, args.cores, args.repeats)
        return 0
    started = time.perf_counter()
    repeats = 2 if args.quick else args.repeats
    if args.only is not None:
        results = json.loads(args.output.read_text(encoding="utf-8")) if args.output.is_file() else {}
        if args.only == "training":
            results["training_throughput"] = bench_training(repeats)
            print("\n".join(training_report(results["training_throughput"])))
        elif args.only == "gpt":
            results["gpt_training_throughput"] = bench_gpt_training(repeats)
            print("\n".join(gpt_report(results["gpt_training_throughput"])))
        elif args.only == "decode":
            results["decoding_step"] = bench_decode(repeats)
            print("\n".join(decode_report(results["decoding_step"])))
        else:
            results["pretrained_forward"] = bench_minilm(repeats)
            print("\n".join(minilm_report(results["pretrained_forward"])))
        print(f"\nfinished in {time.perf_counter() - started:.0f} s; the section written to {args.output}")
        args.output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        return 0
    results = {"machine": machine()}
    results["plain_vs_matmul"], case_1 = bench_plain_vs_matmul(repeats)
    results["tiled_memory"] = bench_tiled_memory(2048 if args.quick else 16384, 512 if args.quick else 4096)
    results["tiled_time"], case_3 = bench_tiled_time(1024 if args.quick else 4096, max(2, repeats // 2))
    add_torch(results, {"plain_vs_matmul": case_1, "tiled_time": case_3}, repeats)
    results["training_throughput"] = bench_training(repeats)
    results["gpt_training_throughput"] = bench_gpt_training(repeats)
    results["pretrained_forward"] = bench_minilm(repeats)
    results["decoding_step"] = bench_decode(repeats)
    results["goals"] = {
        "plain_over_matmul": GOALS["plain_over_matmul"],
        "plain_over_matmul_met": results["plain_vs_matmul"]["plain_over_matmul"] <= GOALS["plain_over_matmul"],
        "tiled_peak_mib": GOALS["tiled_peak_mib"],
        "tiled_peak_met": results["tiled_memory"]["tiled_peak_mib"] <= GOALS["tiled_peak_mib"],
    }
    results["benchmark_seconds"] = round(time.perf_counter() - started, 1)
    print(report(results))
    print(f"\nfinished in {results['benchmark_seconds']:.0f} s; figures written to {args.output}")
    args.output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
