"""Run inside a notebook's kernel, before its first cell: make this kernel compute like another processor.

Two processors running the same notebook disagree in the last bits of their floating-point results:
their BLAS kernels sum in other orders, their vectorised ``exp`` rounds differently. This cell imitates
that disagreement, so that one machine can find the numbers that another machine would store differently:

* every float that a seeded ``numpy.random.Generator`` (or the legacy ``numpy.random`` functions) draws is
  moved by -4 to +3 units in its last place (ulps): the inputs of every computation change a little;
* every result of ``numpy.exp``, ``tanh`` and ``log`` (vectorised differently on other processors) is moved
  by -1 to +1 ulp;
* ``numpy.matmul`` and ``dot`` add up their products in another order (the first half of the summed axis,
  then the second, as a BLAS kernel with another block size would), and ``einsum`` takes the other of its
  two algorithms (``optimize`` switched).

Each move is a fixed function of the value's bits, so the same computation done twice still gives the same
result (a notebook that checks two paths for bitwise equality keeps passing); zeros, infinities and whole
numbers are left alone, as every machine computes them exactly, and so are integer arrays. The ``@``
operator cannot be reached from Python; it is perturbed only through its inputs.

The perturbation is switched on by ``ATTNBOOK_PERTURB=1``; without it the file does nothing. The glued
values are recorded by attnbook itself (``attnbook.book.prose.RECORD_ENV``); once the kernel is perturbed, a
file named like that record plus ``.perturbed`` says so (tools/nbval_stability.py checks it). The kernels of
strict nbval run it as an IPython startup file (tools/nbval_stability.py).
"""

import functools as _functools
import os as _os

import numpy as _np


def _attnbook_perturbation_setup():
    if _os.environ.get("ATTNBOOK_PERTURB") != "1":
        return

    unsigned = {2: _np.uint16, 4: _np.uint32, 8: _np.uint64}
    multiplier = {2: 0x9E37, 4: 0x9E3779B9, 8: 0x9E3779B97F4A7C15}

    def nudge(result, largest_step=4):
        array = _np.asarray(result)
        if array.dtype.kind != "f" or array.dtype.itemsize not in unsigned:
            return result
        flat = _np.atleast_1d(array).reshape(-1)
        size = array.dtype.itemsize
        bits = flat.view(unsigned[size])
        with _np.errstate(over="ignore"):
            mixed = bits * unsigned[size](multiplier[size])
        steps = (mixed >> unsigned[size](8 * size - 3)).astype(_np.int64) - 4  # -4 .. 3, from the value's bits
        steps = _np.clip(steps, -largest_step, largest_step)
        movable = _np.isfinite(flat) & (flat != _np.round(flat))
        moved = _np.where(movable, flat + steps.astype(flat.dtype) * _np.spacing(_np.abs(flat)), flat)
        moved = moved.reshape(array.shape).astype(array.dtype, copy=False)
        if isinstance(result, _np.ndarray):
            return moved
        return moved[()]  # a numpy scalar stays a numpy scalar

    def nudged(function, largest_step=4):
        @_functools.wraps(function)
        def wrapper(*args, **kwargs):
            out = kwargs.get("out")
            result = nudge(function(*args, **kwargs), largest_step)
            if out is not None:
                target = out[0] if isinstance(out, tuple) else out
                target[...] = result
                return out
            return result

        return wrapper

    def summed_in_halves(function):
        """matmul or dot over the first half of the summed axis plus the second half."""

        @_functools.wraps(function)
        def wrapper(a, b, *args, **kwargs):
            a_array, b_array = _np.asarray(a), _np.asarray(b)
            if (args or kwargs or a_array.ndim == 0 or b_array.ndim == 0 or a_array.shape[-1] < 2
                    or (function is original_dot and max(a_array.ndim, b_array.ndim) > 2)
                    or _np.result_type(a_array, b_array).kind != "f"):
                return function(a, b, *args, **kwargs)
            half = a_array.shape[-1] // 2
            first = b_array[:half] if b_array.ndim == 1 else b_array[..., :half, :]
            second = b_array[half:] if b_array.ndim == 1 else b_array[..., half:, :]
            return function(a_array[..., :half], first) + function(a_array[..., half:], second)

        return wrapper

    original_dot = _np.dot
    _np.matmul, _np.dot = summed_in_halves(_np.matmul), summed_in_halves(_np.dot)
    original_einsum = _np.einsum

    @_functools.wraps(original_einsum)
    def einsum_other_path(*operands, **kwargs):
        kwargs["optimize"] = not kwargs.get("optimize", False)
        return original_einsum(*operands, **kwargs)

    _np.einsum = einsum_other_path
    for name in ("exp", "tanh", "log"):
        setattr(_np, name, nudged(getattr(_np, name), largest_step=1))

    class NudgedGenerator(_np.random.Generator):
        """A Generator whose float draws are moved by a few units in the last place."""

    for method in ("random", "standard_normal", "normal", "uniform"):
        setattr(NudgedGenerator, method, nudged(getattr(_np.random.Generator, method)))

    def default_rng(seed=None):
        if isinstance(seed, _np.random.Generator):
            return seed
        return NudgedGenerator(_np.random.PCG64(seed) if not isinstance(seed, _np.random.BitGenerator) else seed)

    _np.random.default_rng = default_rng
    for name in ("randn", "rand", "normal", "uniform", "random"):
        setattr(_np.random, name, nudged(getattr(_np.random, name)))


if __name__ == "__main__":  # in the kernel, as a startup file; importing this file does nothing
    _attnbook_perturbation_setup()
    if _os.environ.get("ATTNBOOK_PERTURB") == "1" and _os.environ.get("ATTNBOOK_GLUE_RECORD"):
        with open(_os.environ["ATTNBOOK_GLUE_RECORD"] + ".perturbed", "w", encoding="utf-8"):
            pass
    del _attnbook_perturbation_setup
