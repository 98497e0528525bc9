"""Where an argument travels through the package, and what the checks at the boundary cost.

Prints figures; it is not a test (issue 26, "validation written once"):

* the **path** of ``query`` through ``multi_head_attention`` and of ``y`` through ``decoder_layer``: every call
  of a function of ``attnbook`` that receives the array or a view of it (a *stop*), its module, and how
  often the path comes back to a module it had left (a *return*);
* the **cost of the checks** of one multi-head call at n = 1024: the public function against its unchecked
  body (the kernel), the minimum over interleaved repeats, and the share of the call that is checks.

    .venv/bin/python benchmarks/call_paths.py [--repeats 40] [--n 1024]

The script finds the kernel of ``multi_head_attention`` by the package's layout: the function the boundary
wraps (``__wrapped__``), or, in the older layout, ``attnbook.multihead.multi_head`` on the arguments that
``check_multi_head_inputs`` returned.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from pathlib import Path

import numpy as np

import attnbook
from attnbook import decoder_layer, init_decoder_layer, init_multi_head_weights, multi_head_attention

PACKAGE = Path(attnbook.__file__).parent


def _carries(value, target: np.ndarray) -> bool:
    """Whether ``value`` is ``target`` or an array whose memory overlaps it (a view, a slice)."""
    return isinstance(value, np.ndarray) and (value is target or np.may_share_memory(value, target))


def _arrays(value) -> list:
    """The arrays in ``value``: itself, or those in a tuple, list or NamedTuple (a weight tree, a result)."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (tuple, list)):
        return [item for part in value for item in _arrays(part)]
    return []


def trace(call, target: np.ndarray) -> list[tuple[str, str]]:
    """The (module, function) of every call of an attnbook function that receives ``target`` while ``call()`` runs.

    The path follows the argument as data: ``target``, any view of it, and every array that an attnbook
    function returns from a call that received one of those (``q = project(query, ...)`` carries the query
    on), except the arrays the call was also given in its other arguments (a check that returns all its
    arguments passes the key on as the key). Arrays computed inline (``query @ w``) are invisible to a profiler, so a path that only does
    arithmetic inline ends there; a reader following the query by hand goes on, so this count is a lower
    bound of theirs.
    """
    stops, carried, open_calls = [], [target], {}

    def carrying(value) -> bool:
        return any(any(a is c or np.may_share_memory(a, c) for c in carried) for a in _arrays(value))

    def profile(frame, event, arg):
        if event not in ("call", "return"):
            return
        path = Path(frame.f_code.co_filename)
        if PACKAGE not in path.parents:
            return
        if event == "return":
            others = open_calls.pop(id(frame), None)
            if others is not None:
                carried.extend(a for a in _arrays(arg)
                               if id(a) not in others and not any(a is c for c in carried))
            return
        code = frame.f_code
        n_args = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARARGS)
        arguments = [frame.f_locals.get(name) for name in code.co_varnames[:n_args]]
        carrying_arguments = [carrying(value) for value in arguments]
        if any(carrying_arguments):
            module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
            stops.append((module, code.co_name))
            open_calls[id(frame)] = {id(a) for value, carries in zip(arguments, carrying_arguments)
                                     if not carries for a in _arrays(value)}

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return stops


def returns(stops: list[tuple[str, str]]) -> int:
    """How often the path enters a module it had left before (a module seen earlier, not the previous stop's)."""
    seen, count, previous = set(), 0, None
    for module, _ in stops:
        if module != previous and module in seen:
            count += 1
        seen.add(module)
        previous = module
    return count


def report_path(title: str, stops: list[tuple[str, str]]) -> None:
    modules = sorted({module for module, _ in stops})
    print(f"{title}: {len(stops)} stops in {len(modules)} modules ({', '.join(modules)}), "
          f"{returns(stops)} returns to a module left before")
    for index, (module, name) in enumerate(stops, 1):
        print(f"  {index:2d}. {module}.{name}")


def kernel_call(query, key, value, weights, n_heads):
    """The unchecked body of multi_head_attention, as the package's layout offers it."""
    body = getattr(multi_head_attention, "__wrapped__", None)
    if body is not None:
        return lambda: body(query, key, value, weights, n_heads)
    from attnbook.multihead import check_multi_head_inputs, multi_head  # the older layout

    checked = check_multi_head_inputs(query, key, value, weights, n_heads)
    return lambda: multi_head(*checked)


def min_times(calls: dict, repeats: int) -> dict:
    """The fastest of ``repeats`` interleaved runs of each call, in seconds (after one warm-up each).

    BLAS runs on one thread (threadpoolctl), so that the other programs of a shared machine disturb the
    figures less; the checks are single-threaded Python either way.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # the figures are noisier, not wrong
        return _min_times(calls, repeats)
    with threadpool_limits(1):
        return _min_times(calls, repeats)


def _min_times(calls: dict, repeats: int) -> dict:
    for call in calls.values():
        call()
    best = {name: float("inf") for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 8))  # (batch, n, d_model)
    memory = rng.standard_normal((2, 6, 8))  # (batch, n_s, d_model)
    mh_weights, layer = init_multi_head_weights(8, seed=0), init_decoder_layer(8, 16, seed=0)
    report_path("query through multi_head_attention",
                trace(lambda: multi_head_attention(x, memory, memory, mh_weights, 2), x))
    report_path("y through decoder_layer", trace(lambda: decoder_layer(x, memory, layer, 2), x))

    n, d, h = args.n, args.d_model, args.heads
    x = rng.standard_normal((1, n, d))  # (batch, n, d_model)
    weights = init_multi_head_weights(d, seed=0)
    times = min_times({"public": lambda: multi_head_attention(x, x, x, weights, h),
                       "kernel": kernel_call(x, x, x, weights, h)}, args.repeats)
    share = (times["public"] - times["kernel"]) / times["public"]
    print(f"multi_head_attention at n = {n}, d_model = {d}, {h} heads, float64, one BLAS thread, min of {args.repeats}: "
          f"public {times['public'] * 1e3:.3f} ms, kernel {times['kernel'] * 1e3:.3f} ms, "
          f"checks {share:.2%} of the call")
    try:  # the older layout: the kernel itself scans every projection with np.isfinite
        import attnbook.attention as attention_module

        if hasattr(attention_module, "project"):
            project = attention_module.project
            plain = lambda x, w, what, bias=None: x @ w if bias is None else x @ w + bias  # noqa: E731
            import attnbook.multihead as multihead_module

            multihead_module.project = plain
            try:
                bare = min_times({"bare": kernel_call(x, x, x, weights, h)}, args.repeats)["bare"]
            finally:
                multihead_module.project = project
            print(f"  of which the kernel's np.isfinite scans of the projections: "
                  f"{(times['kernel'] - bare) / times['public']:.2%} (kernel without them {bare * 1e3:.3f} ms); "
                  f"all checks {(times['public'] - bare) / times['public']:.2%}")
    except ImportError:
        pass


if __name__ == "__main__":
    main()
