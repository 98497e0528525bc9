"""Wrong answers get no points: the hidden tests refuse answers made by breaking the instructor's solutions.

For every homework, the solutions run as in a student's kernel (the setup cells, then every solution
cell, in order). Each name a task's stub defines is then replaced, in turn, by a wrong answer made from
it: a function returns its solution's results mutated (a tuple or named tuple one part at a time), a
value is mutated itself. The kernel's own functions see the replacement, as a student's would
(``greedy_on_tables`` calls the broken ``my_greedy_decode``). The task's hidden tests then run as the
grader runs them (``grading.grading_plan``, ``grading.run_hidden_test``), with the names bound to
stand-ins that send inputs and results through the grader's wire format (``sandbox_driver.encode`` and
``decode``) and raise the student's exceptions as the grader sees them. Every hidden test of the task
that uses the name (reads it, or calls it, maybe through another function) must fail, so that the wrong
answer gets none of its points; a test of the task about another answer (``by-hand-a21`` when
``answer_a12`` is wrong) keeps its points. The solutions themselves get every point.

The mutations of an array or a number a function returns (:data:`ARRAY_MUTATIONS`), by kind:

- empty: no rows (``answer[:0]``, the right number of axes), and an empty array that broadcasts
  against the answer (``(0, 1, 1)`` for an answer of two axes or fewer, ``(0, 1, 1, 1)`` for three);
- wrong shape: an extra axis in front and at the end, the first axis dropped (``answer[0]``), the first
  row only (``answer[:1]``, which broadcasts), the last axis cut by one;
- transposed: the last two axes swapped (two axes or more);
- dtype: booleans as integers and as floats, integers as floats and as booleans, floats as integers and
  as booleans (``astype``: the same values where the new dtype holds them; a float answer of any width
  is right, so floats are not mutated to float32);
- all true, all false: True or False everywhere in a mask, 1 or 0 everywhere in numbers;
- NaN: in the middle entry, and everywhere (floats only: booleans and integers cannot hold NaN);
- off by one: numbers + 1; a mask shifted by one position along its last axis (False shifted in).

A number a student works out, a value stub (:data:`NUMBER_MUTATIONS`), has the same kinds but
transposed; as ``check_number`` compares any integer or float by value (a count may be 55 or 55.0),
its dtype mutations are a boolean and the number's text.

A mutation that leaves an answer as the grader reads it unchanged on every call the tests make is no
wrong answer (all True where every entry is True, the first row of a single row): each call records
whether what it returned changed, and such a mutant is left out. So is a change within the tolerance
its question allows (:data:`WITHIN_TOLERANCE`, each checked to be accepted). Every mutation is a
wrong answer somewhere (``test_every_mutation_is_a_wrong_answer_somewhere``).
"""

from __future__ import annotations

import ast
import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from attnbook import causal_mask, padding_mask
from tools.homework import grading, sandbox_driver, sources
from tools.install_cell import FIRST_LINE as INSTALL_CELL

HOMEWORKS = [path.stem for path in sources.homework_sources()]
NOT_WRONG = "no mutation of this kind changes this answer on a call of its hidden tests (beyond a tolerance it allows)"

# (homework, name, mutation) -> why a mutation that changes the answer is no wrong answer
WITHIN_TOLERANCE = {
    ("hw_positional_encoding", "answer_longest_wavelength", "off by one"):
        "60,612 for 60,611 is within the relative tolerance of 1e-4 that the task's public and hidden checks share",
}


# --- the mutations ----------------------------------------------------------------------------------


def _shifted(mask: np.ndarray) -> np.ndarray:
    """A boolean mask moved one position along its last axis, False shifted in."""
    out = np.zeros_like(mask)
    out[..., 1:] = mask[..., :-1]
    return out


def _one_nan(array: np.ndarray) -> np.ndarray:
    out = array.copy()
    out.flat[array.size // 2] = np.nan
    return out


# name -> (kind, the wrong answer made from an array, or None where the mutation does not apply)
ARRAY_MUTATIONS: dict[str, tuple[str, Callable]] = {
    "no rows": ("empty", lambda a: a[:0] if a.ndim else None),
    "empty (0, 1, 1)": ("empty", lambda a: np.zeros((0,) + (1,) * max(a.ndim, 2), dtype=a.dtype)),
    "an extra axis in front": ("wrong shape", lambda a: a[None]),
    "an extra axis at the end": ("wrong shape", lambda a: a[..., None] if a.ndim else None),
    "the first axis dropped": ("wrong shape", lambda a: a[0] if a.ndim and len(a) else None),
    "the first row only": ("wrong shape", lambda a: a[:1] if a.ndim and len(a) > 1 else None),
    "the last axis cut by one": ("wrong shape", lambda a: a[..., :-1] if a.ndim and a.shape[-1] else None),
    "transposed": ("transposed", lambda a: np.swapaxes(a, -1, -2) if a.ndim >= 2 else None),
    "as integers": ("dtype", lambda a: a.astype(np.int64) if a.dtype.kind in "bf" else None),
    "as floats": ("dtype", lambda a: a.astype(np.float64) if a.dtype.kind in "biu" else None),
    "as booleans": ("dtype", lambda a: a.astype(bool) if a.dtype.kind in "iuf" else None),
    "all true": ("all true", lambda a: np.ones_like(a)),
    "all false": ("all false", lambda a: np.zeros_like(a)),
    "one NaN": ("NaN", lambda a: _one_nan(a) if a.dtype.kind == "f" and a.size else None),
    "all NaN": ("NaN", lambda a: np.full_like(a, np.nan) if a.dtype.kind == "f" else None),
    "off by one": ("off by one", lambda a: _shifted(a) if a.dtype.kind == "b" else a + 1),
}

# a number a student works out (a value stub): any integer or float is compared by value
NUMBER_MUTATIONS: dict[str, tuple[str, Callable]] = {
    "empty (0,)": ("empty", lambda x: np.zeros(0)),
    "empty (0, 1, 1)": ("empty", lambda x: np.zeros((0, 1, 1))),
    "an extra axis in front": ("wrong shape", lambda x: np.array([x])),
    "as a boolean": ("dtype", lambda x: bool(x)),
    "as text": ("dtype", lambda x: str(x)),
    "all true": ("all true", lambda x: type(x)(1)),
    "all false": ("all false", lambda x: type(x)(0)),
    "NaN": ("NaN", lambda x: float("nan")),
    "off by one": ("off by one", lambda x: x + 1),
}

FUNCTION_KINDS = sorted({kind for kind, _ in ARRAY_MUTATIONS.values()})
NUMBER_KINDS = sorted({kind for kind, _ in NUMBER_MUTATIONS.values()})


def _mutated(value, make: Callable):
    """``make`` applied to ``value`` as an array, or None where it does not apply; a wrong answer of no
    axes made from a Python or numpy number is again a Python or numpy number."""
    result = make(np.asarray(value))
    if result is None or result.ndim or isinstance(value, np.ndarray):
        return result
    return result[()] if isinstance(value, np.generic) else result.item()


def mutants(value, kind: str, number: bool = False) -> list[tuple[str, str, object]]:
    """(mutation, the part it changed or "", the wrong answer) for each mutation of ``kind`` of ``value``.

    An array or a number is mutated as a whole (``number``: a value stub's number); a tuple, named
    tuple or list one part at a time; anything else not at all.
    """
    if isinstance(value, (tuple, list)):
        found = []
        for index, part in enumerate(value):
            label = value._fields[index] if hasattr(value, "_fields") else f"part {index + 1}"
            for variant, inner, wrong in mutants(part, kind):
                parts = list(value)
                parts[index] = wrong
                rebuilt = type(value)(*parts) if hasattr(value, "_fields") else type(value)(parts)
                found.append((variant, f"{inner} of {label}".strip(), rebuilt))
        return found
    if not isinstance(value, (bool, int, float, np.generic, np.ndarray)) or np.asarray(value).dtype.kind not in "biuf":
        return []
    found = []
    for variant, (variant_kind, make) in (NUMBER_MUTATIONS if number else ARRAY_MUTATIONS).items():
        if variant_kind == kind:
            with np.errstate(all="ignore"):  # -inf as an integer, say: a wrong answer, not a warning
                wrong = make(value) if number else _mutated(value, make)
            if wrong is not None:
                found.append((variant, "", wrong))
    return found


def wire(value):
    """What the grader reads of ``value``: its encoding in the sandbox's format."""
    return sandbox_driver.encode(value)


# --- a solved kernel, and the grader's view of it -------------------------------------------------------


@functools.cache
def plan(homework: str) -> dict:
    return grading.grading_plan(homework)


@functools.cache
def solved_kernel(homework: str) -> dict:
    """The namespace of a kernel that ran the setup (but the install cell) and every solution, in order."""
    _, notebook = sources.load(homework)
    kernel: dict = {"__name__": "__main__"}
    with np.printoptions():  # the setup sets numpy's print options: keep them to this kernel
        for cell in notebook.cells:
            cell_role = sources.role(cell)
            if cell_role == "solution" or (cell_role == "setup" and not cell.source.startswith(INSTALL_CELL)):
                exec(compile(cell.source, f"<{homework}: {cell_role} {cell.metadata.get('task')}>", "exec"), kernel)
    return kernel


def stand_in(kernel: dict, name: str) -> Callable:
    """The grader's stand-in for the kernel's function ``name``: inputs and result cross the wire."""
    def call(*args, **kwargs):
        args = [sandbox_driver.decode(wire(arg)) for arg in args]
        kwargs = {key: sandbox_driver.decode(wire(value)) for key, value in kwargs.items()}
        try:
            result = kernel[name](*args, **kwargs)
        except Exception as error:  # as the sandbox reports it: the type's name and the message
            raise sandbox_driver.exception_from(sandbox_driver.raised(error)) from None
        return sandbox_driver.decode(wire(result))

    call.__name__ = call.__qualname__ = name
    return call


def hidden_space(homework: str, kernel: dict) -> dict:
    """What the hidden tests see: a stand-in for each function a stub defines, a copy of each value."""
    space: dict = {"__name__": "hidden_test"}
    for name in sorted({name for names in plan(homework)["names"].values() for name in names}):
        if name in plan(homework)["functions"]:
            space[name] = stand_in(kernel, name)
        else:
            space[name] = sandbox_driver.decode(wire(kernel[name]))
    return space


def task_tests(homework: str, task: str) -> list[dict]:
    return [test for test in plan(homework)["hidden"] if test["task"] == task]


def names_in(source: str) -> set[str]:
    return {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}


# --- running one wrong answer ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What the hidden tests of a task made of one wrong answer."""

    mutation: str
    part: str  # the part of a tuple result it changed, or ""
    changed: bool  # the answer, or what some call returned, differs from the solution's as the grader reads it
    users: tuple[str, ...]  # the tests that use the name: they read it, or called it (maybe through another)
    passed: tuple[str, ...]  # those of them that still passed
    points: int  # their points

    def __str__(self) -> str:
        return f"{self.mutation} (of {self.part[3:]})" if self.part else self.mutation


def run_task(homework: str, task: str, kernel: dict, name: str, calls: list) -> tuple[list, list, int]:
    """Run the task's hidden tests on ``kernel``: (tests using ``name``, those that passed, their points).

    ``calls`` grows by one entry per call of the function ``name`` (a test that makes one uses it).
    """
    space = hidden_space(homework, kernel)
    users, passed, points = [], [], 0
    for test in task_tests(homework, task):
        before = len(calls)
        with warnings.catch_warnings():  # the grader's process only prints a warning; pytest's would raise it
            warnings.simplefilter("ignore")
            ok = grading.run_hidden_test(test, space)[0]
        if name in names_in(test["source"]) or len(calls) > before:
            users.append(test["grade_id"])
            if ok:
                passed.append(test["grade_id"])
                points += test["points"]
    return users, passed, points


@functools.cache
def outcomes(homework: str, task: str, name: str, kind: str) -> tuple[Outcome, ...]:
    """What each mutation of ``kind`` of the answer ``name`` gets from the task's hidden tests.

    A value is replaced by each of its mutations. A function is replaced in the kernel (its callers
    there see the wrong answer too) by one that returns its solution's results mutated: one mutation
    per run of the tests, the first not yet tried that a call offers, applied from that call on to
    every result it applies to.
    """
    kernel = solved_kernel(homework)
    solution = kernel[name]
    found = []
    if name not in plan(homework)["functions"]:
        for variant, part, wrong in mutants(solution, kind, number=True):
            kernel[name] = wrong
            try:
                users, passed, points = run_task(homework, task, kernel, name, [])
            finally:
                kernel[name] = solution
            found.append(Outcome(variant, part, wire(wrong) != wire(solution), tuple(users), tuple(passed), points))
        return tuple(found)
    tried: set[tuple[str, str]] = set()
    while True:
        chosen: list[tuple[str, str]] = []  # the mutation of this run, once a call has offered one
        calls: list[bool] = []  # per call of the function: whether what it returned changed
        broken: list[str] = []  # errors in making a wrong answer, which would pass for the student's

        def mutant(*args, **kwargs):
            value = solution(*args, **kwargs)
            try:
                options = {(variant, part): wrong for variant, part, wrong in mutants(value, kind)}
            except Exception as error:
                broken.append(f"{type(error).__name__}: {error}")
                raise
            if not chosen:
                chosen.extend([option for option in options if option not in tried][:1])
            if not chosen or chosen[0] not in options:
                calls.append(False)
                return value
            wrong = options[chosen[0]]
            calls.append(wire(wrong) != wire(value))
            return wrong

        mutant.__name__ = mutant.__qualname__ = name
        kernel[name] = mutant
        try:
            users, passed, points = run_task(homework, task, kernel, name, calls)
        finally:
            kernel[name] = solution
        assert not broken, f"making a wrong answer of {name} ({kind}) failed: {broken[0]}"
        if not chosen:
            return tuple(found)
        tried.add(chosen[0])
        found.append(Outcome(*chosen[0], any(calls), tuple(users), tuple(passed), points))


def wrong_answers(homework: str, task: str, name: str, kind: str) -> list[Outcome]:
    """The mutants of ``kind`` that are wrong answers: they change the answer, and not within tolerance."""
    return [outcome for outcome in outcomes(homework, task, name, kind)
            if outcome.changed and (homework, name, outcome.mutation) not in WITHIN_TOLERANCE]


def wrong_answer_cases() -> list:
    cases = []
    for homework in HOMEWORKS:
        for task in plan(homework)["tasks"]:
            for name in plan(homework)["names"][task]:
                kinds = FUNCTION_KINDS if name in plan(homework)["functions"] else NUMBER_KINDS
                cases += [pytest.param(homework, task, name, kind, id=f"{homework}-{task}-{name}-{kind}")
                          for kind in kinds]
    return cases


CASES = wrong_answer_cases()


# --- the tests --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("homework", HOMEWORKS)
def test_the_solutions_get_every_point(homework):
    space = hidden_space(homework, solved_kernel(homework))
    verdicts = {test["grade_id"]: grading.run_hidden_test(test, space) for test in plan(homework)["hidden"]}
    assert {grade_id: error for grade_id, (passed, _, error) in verdicts.items() if not passed} == {}


@pytest.mark.parametrize(("homework", "task", "name", "kind"), CASES)
def test_a_wrong_answer_gets_no_point_from_the_tests_that_use_it(homework, task, name, kind):
    tried = wrong_answers(homework, task, name, kind)
    if not tried:
        pytest.skip(NOT_WRONG)
    assert all(outcome.users for outcome in tried), f"no hidden test of task {task} uses {name}"
    scored = [f"{name} with {outcome}: {outcome.points} points from {', '.join(outcome.passed)}"
              for outcome in tried if outcome.passed]
    assert not scored, f"{homework}, task {task}: " + "; ".join(scored)


def test_every_mutation_is_a_wrong_answer_somewhere():
    tried = {(outcome.mutation, name in plan(homework)["functions"])
             for homework, task, name, kind in (case.values for case in CASES)
             for outcome in wrong_answers(homework, task, name, kind)}
    assert {mutation for mutation, is_function in tried if is_function} == set(ARRAY_MUTATIONS)
    assert {mutation for mutation, is_function in tried if not is_function} == set(NUMBER_MUTATIONS)


@pytest.mark.parametrize(("homework", "name", "mutation"), sorted(WITHIN_TOLERANCE))
def test_a_change_left_out_as_within_tolerance_is_accepted_by_its_tests(homework, name, mutation):
    task = next(task for task, names in plan(homework)["names"].items() if name in names)
    found = [outcome for kind in NUMBER_KINDS + FUNCTION_KINDS for outcome in outcomes(homework, task, name, kind)
             if outcome.mutation == mutation]
    assert found and all(outcome.changed and outcome.passed == outcome.users for outcome in found), \
        WITHIN_TOLERANCE[homework, name, mutation]


# --- the mutations themselves, and the two wrong answers of issue 29 --------------------------------------


def test_the_mutations_of_a_mask_include_the_empty_array_that_broadcasts():
    made = {variant: wrong for variant, _, wrong in mutants(causal_mask(3), "empty")}
    assert made["empty (0, 1, 1)"].shape == (0, 1, 1) and made["empty (0, 1, 1)"].dtype == bool
    assert made["no rows"].shape == (0, 3)
    shifted = dict((variant, wrong) for variant, _, wrong in mutants(causal_mask(3), "off by one"))["off by one"]
    assert shifted.tolist() == [[False, True, False], [False, True, True], [False, True, True]]


def test_a_tuple_is_mutated_one_part_at_a_time_and_keeps_its_type():
    value = padding_mask([1, 2], 2), np.array([1.5, 2.5])
    made = mutants(value, "transposed")
    assert [(variant, part) for variant, part, _ in made] == [("transposed", "of part 1")]
    wrong = made[0][2]
    assert isinstance(wrong, tuple) and wrong[0].shape == (2, 2, 1) and wrong[1] is value[1]


def test_a_number_keeps_its_python_type_and_a_value_stub_is_mutated_as_a_number():
    assert [wrong for *_, wrong in mutants(55, "dtype")] == [55.0, True]
    assert [wrong for *_, wrong in mutants(55, "dtype", number=True)] == [True, "55"]
    assert mutants(2.5, "transposed", number=True) == [] and mutants("text", "off by one") == []


def issue_example(homework: str, task: str, name: str, wrong: Callable) -> tuple[list, list]:
    """The task's tests on the solutions with ``name`` replaced by ``wrong``: (tests using it, passed)."""
    kernel = solved_kernel(homework)
    solution, kernel[name] = kernel[name], wrong
    try:
        users, passed, _ = run_task(homework, task, kernel, name, [])
    finally:
        kernel[name] = solution
    return users, passed


def test_an_empty_causal_mask_that_broadcasts_gets_no_point():
    users, passed = issue_example("hw_masks", "causal", "my_causal_mask", lambda n: np.zeros((0, 1, 1), dtype=bool))
    assert "causal-in-attention" in users and passed == []


def test_a_boolean_padding_mask_with_wrong_values_gets_no_point():
    def every_key(lengths, n):  # booleans of the right shape, but every key kept, padding included
        return np.ones((len(lengths), 1, n), dtype=bool)

    users, passed = issue_example("hw_masks", "padding", "my_padding_mask", every_key)
    assert "padding-dtype" in users and passed == []


# --- wrong answers that keep a property the hidden tests test, but are not the task's answer (issue 38) ----------


def _ones_at(shape, where) -> np.ndarray:
    mask = np.zeros(shape, dtype=bool)
    mask[where] = True
    return mask


def _uniform_attention(q, k, v):
    """Every query spreads its weight evenly over the keys: rows that sum to 1, the output their mix of v."""
    q, k, v = np.asarray(q, dtype=float), np.asarray(k, dtype=float), np.asarray(v, dtype=float)
    weights = np.full(q.shape[:-1] + (k.shape[-2],), 1 / k.shape[-2])  # (..., n_q, n_k)
    return weights @ v, weights


def _softmax_rows(z):
    from attnbook import softmax

    return softmax(np.asarray(z, dtype=float))


def _hard_max(x):
    """One where a row is at its maximum, shared among ties: rows that sum to 1, stable for any logit."""
    x = np.asarray(x, dtype=float)
    top = x == x.max(axis=-1, keepdims=True)  # (..., n)
    return top / top.sum(axis=-1, keepdims=True)


def _unscaled_grouped(q, k, v):
    """Grouped attention whose scores are not divided by sqrt(d_k): rows that sum to 1, the shared values."""
    from attnbook import softmax

    group = q.shape[0] // k.shape[0]
    k_all, v_all = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)  # (h, n, d) each
    weights = softmax(q @ np.swapaxes(k_all, -1, -2))  # (h, n_q, n_k)
    return weights @ v_all, weights


def _patches_by_columns(image, patch_size):
    """The right patches, in column order: token 0 is right, and so is every image one patch high."""
    from attnbook.beyond.modalities import image_to_patches

    image = np.asarray(image)
    rows, cols = image.shape[0] // patch_size, image.shape[1] // patch_size
    tokens = image_to_patches(image, patch_size)  # (rows * cols, p * p * C)
    return tokens.reshape(rows, cols, -1).swapaxes(0, 1).reshape(rows * cols, -1)


def _top_patch_everywhere(image, patch_size):
    from attnbook.beyond.modalities import image_to_patches

    tokens = image_to_patches(np.asarray(image), patch_size)  # (n_patches, p * p * C)
    return np.broadcast_to(tokens[0], tokens.shape).copy()


def _sin_cos_swapped(n_positions, d_model):
    from attnbook import sinusoidal_encoding

    encoding = sinusoidal_encoding(n_positions, d_model)  # (n, d)
    swapped = encoding.copy()
    swapped[:, 0::2], swapped[:, 1::2] = encoding[:, 1::2], encoding[:, 0::2]
    return swapped


def _dx_without_gamma(x, gamma, dy, eps=1e-5):
    """dx as if gamma were 1 (still orthogonal to 1 and x_hat), with the right dgamma and dbeta."""
    from attnbook.learning.layers import layer_norm_vjp

    x, gamma, dy = (np.asarray(a, dtype=float) for a in (x, gamma, dy))
    dx = layer_norm_vjp(x, np.ones_like(gamma), np.zeros_like(gamma), eps)[1](dy)[0]  # (..., d)
    _, dgamma, dbeta = layer_norm_vjp(x, gamma, np.zeros_like(gamma), eps)[1](dy)
    return dx, dgamma, dbeta


def _top_token_only(logits, p):
    logits = np.asarray(logits, dtype=float)
    top = np.argmax(logits, axis=-1)[..., None]  # (..., 1)
    return np.where(np.arange(logits.shape[-1]) == top, logits, -np.inf)


def _right_to_left_merge(ids, pair, new_id):
    """Overlapping pairs merged from the end: the same length and counts, other tokens where pairs overlap."""
    from attnbook.text.bpe import merge_pair

    return list(merge_pair(list(ids)[::-1], (pair[1], pair[0]), new_id))[::-1]


def _padding_in_front(lengths, n):
    """The right number of real keys per sentence, at the end of the row instead of the start."""
    return (np.arange(n) >= n - np.asarray(lengths)[:, None])[:, None, :]  # (batch, 1, n)


def _uniform_multi_head(x, w, n_heads):
    from attnbook import multi_head_attention

    result = multi_head_attention(x, x, x, w, n_heads)
    return result.output, np.full_like(result.weights, 1 / result.weights.shape[-1])


def _uniform_self_attention(x, w_q, w_k, w_v):
    x = np.asarray(x, dtype=float)
    weights = np.full(x.shape[:-1] + (x.shape[-2],), 1 / x.shape[-2])  # (..., n, n)
    return weights @ (x @ np.asarray(w_v)), weights


def _sink_free_window(n, window, sinks):
    from attnbook.efficient.streaming import sink_window_mask

    return sink_window_mask(n, window, 0)


def _uniform_logsumexp(s):
    from attnbook.efficient.flash import flash_forward

    s = np.asarray(s, dtype=float)
    identity = np.eye(s.shape[1])
    return flash_forward(s, identity, identity, scale=1.0).logsumexp, np.full_like(s, 1 / s.shape[1])


def _absorbed_head(q_content, q_rope, latents, rope_keys, w_uk, w_uv, scale):
    from attnbook import causal_mask, scaled_dot_product_attention

    q = np.concatenate([q_content, q_rope], axis=1)  # (n, d_C + d_R)
    k = np.concatenate([latents @ w_uk, rope_keys], axis=1)  # (n, d_C + d_R)
    return q_content @ w_uk.T, scaled_dot_product_attention(q, k, latents @ w_uv, causal_mask(len(q)), scale).output


def _absorbed_without_rotary(q_content, q_rope, latents, rope_keys, w_uk, w_uv):
    zero = np.zeros_like(q_rope)
    return _absorbed_head(q_content, zero, latents, zero, w_uk, w_uv, 1 / np.sqrt(q_content.shape[1] + q_rope.shape[1]))


def _absorbed_content_scale(q_content, q_rope, latents, rope_keys, w_uk, w_uv):
    return _absorbed_head(q_content, q_rope, latents, rope_keys, w_uk, w_uv, 1 / np.sqrt(q_content.shape[1]))


def _sink_left_out(q, k, v, sink):
    from attnbook import scaled_dot_product_attention

    return tuple(scaled_dot_product_attention(q, k, v))


def _gate_split_by_channel(x, w_gate, n_heads):
    logits = np.asarray(x, dtype=float) @ np.asarray(w_gate, dtype=float)  # (n, d n_heads)
    logits = logits.reshape(logits.shape[0], -1, n_heads).transpose(2, 0, 1)  # (n_heads, n, d): column c n_heads + h
    return 1.0 / (1.0 + np.exp(-logits))


def _smallest_k(logits, k):
    logits = np.asarray(logits, dtype=float)
    kth = np.sort(logits, axis=-1)[..., min(k, logits.shape[-1]) - 1:min(k, logits.shape[-1])]  # (..., 1)
    return np.where(logits <= kth, logits, -np.inf)


def _share_over_every_query(attention, mask, keys):
    """The share on the keys averaged over every query, the padded ones too."""
    on_keys = (np.asarray(attention, dtype=float) * np.asarray(keys, dtype=bool)[None, :, None, None, :]).sum(-1)
    return on_keys.mean(axis=(1, 3))  # (layers, heads)


def _attention_received(first, second):
    from attnbook.pretrained.analysis import leave_one_out
    from attnbook.pretrained.bert import load_minilm

    return leave_one_out(first, second, load_minilm()).received


def _similarity_of_the_whole_model(first, second, layer, head):
    from attnbook.pretrained.analysis import pair_similarities
    from attnbook.pretrained.bert import load_minilm

    return float(pair_similarities([first], [second], load_minilm())[0])


def _similarity_without_the_next_layer(first, second, layer, head):
    from attnbook.pretrained.analysis import pair_similarities
    from attnbook.pretrained.bert import load_minilm, without_heads

    model = load_minilm()
    return float(pair_similarities([first], [second], without_heads(model, [((layer + 1) % 6, head)]))[0])


# (homework, task, name) -> {the wrong answer in words, with the property it keeps: the wrong answer}
PROPERTY_KEEPING: dict[tuple[str, str, str], dict[str, Callable]] = {
    ("hw_masks", "causal", "my_causal_mask"): {
        "the identity (no future key, every query some key)": lambda n: np.eye(n, dtype=bool),
        "key 0 only (no future key, every query some key)": lambda n: _ones_at((n, n), (slice(None), 0)),
        "the transposed causal mask (a triangle, the diagonal kept)": lambda n: np.triu(np.ones((n, n), dtype=bool)),
    },
    ("hw_masks", "padding", "my_padding_mask"): {
        "the padding in front (the right number of real keys)": _padding_in_front,
    },
    ("hw_beyond_text", "patches", "my_image_to_patches"): {
        "the top-left patch for every token (token 0 right)": _top_patch_everywhere,
        "the patches in column order (token 0 right, right for one row of patches)": _patches_by_columns,
    },
    ("hw_beyond_text", "graph", "my_graph_mask"): {
        "self-loops only, the identity (each node attends to itself)": lambda a: np.eye(len(a), dtype=bool),
    },
    ("hw_gpt", "temperature", "my_temperature_probabilities"): {
        "the temperature ignored (rows that sum to 1)": lambda z, t: _softmax_rows(z),
    },
    ("hw_gpt", "top-k", "my_top_k_filter"): {
        "the k smallest logits kept (k logits per row)": _smallest_k,
    },
    ("hw_gpt", "bigram", "my_bigram_probabilities"): {
        "uniform rows (each row sums to 1)": lambda ids, size, k: np.full((size, size), 1 / size),
    },
    ("hw_gpt", "bpc", "my_bits_per_character"): {
        "the mean over every probability (right for a uniform guess)": lambda p, t: float(-np.mean(np.log2(p))),
    },
    ("hw_long_context", "sink-mask", "my_sink_window_mask"): {
        "a causal window without its sinks (causal, banded)": _sink_free_window,
    },
    ("hw_long_context", "linear", "my_linear_attention_recurrent"): {
        "each token its own value (causal, token 0 right)": lambda q, k, v: np.array(v, dtype=float),
        "token 0's value for every token, key 0 only (causal, token 0 right)":
            lambda q, k, v: np.broadcast_to(np.asarray(v, dtype=float)[0], np.shape(v)).copy(),
    },
    ("hw_long_context", "logsumexp", "my_logsumexp_weights"): {
        "uniform weights beside the right logsumexp (rows that sum to 1)": _uniform_logsumexp,
    },
    ("hw_cache_attention", "absorbed", "my_absorbed_head"): {
        "the rotary part left out (causal, token 0 right, the right absorbed query)": _absorbed_without_rotary,
        "scores divided by sqrt(d_C) (causal, token 0 right, the right absorbed query)": _absorbed_content_scale,
    },
    ("hw_cache_attention", "sink", "my_sink_attention"): {
        "plain attention, the sink left out (rows that sum to 1, the output their mix of v)": _sink_left_out,
    },
    ("hw_cheaper_mixing", "delta-step", "my_delta_step"): {
        "the linear write S + beta k v^T (right on an empty memory)":
            lambda state, k, v, beta: np.asarray(state, dtype=float) + beta * np.outer(k, v),
    },
    ("hw_cheaper_mixing", "gate", "my_gate"): {
        "the heads split channel by channel (values in (0, 1), the right shape)": _gate_split_by_channel,
    },
    ("hw_modern_block", "rms-norm", "my_rms_norm"): {
        "the sign of x (right on constant rows, not centred)": lambda x, gamma, eps=1e-6: np.sign(x) * gamma,
    },
    ("hw_modern_block", "grouped", "my_grouped_attention"): {
        "unscaled scores (rows that sum to 1, the one shared value head, heads that differ)": _unscaled_grouped,
    },
    ("hw_multi_head_attention", "multi-head", "my_multi_head_self_attention"): {
        "uniform weights beside the right output (rows that sum to 1)": _uniform_multi_head,
    },
    ("hw_positional_encoding", "encoding", "my_sinusoidal_encoding"): {
        "sine and cosine swapped (values in [-1, 1], the right frequencies)": _sin_cos_swapped,
    },
    ("hw_positions_today", "rotary", "my_apply_rotary"): {
        "x unchanged (lengths kept, scores that depend on the offset alone)":
            lambda x, positions, base=10000.0: np.array(x, dtype=float),
    },
    ("hw_pretrained", "share", "my_weight_share"): {
        "the mean over every query, padding included (shares in [0, 1])": _share_over_every_query,
    },
    ("hw_pretrained", "leave-one-out", "my_leave_one_out"): {
        "the attention each word token receives (one number per word token)": _attention_received,
    },
    ("hw_pretrained", "without-head", "my_similarity_without_head"): {
        "the similarity with every head (a similarity in [-1, 1])": _similarity_of_the_whole_model,
        "the head of the next layer removed (a head removed)": _similarity_without_the_next_layer,
    },
    ("hw_scaled_dot_product_attention", "softmax", "my_softmax"): {
        "a hard maximum that shares ties (rows that sum to 1, right on logits of ±10000)": _hard_max,
    },
    ("hw_scaled_dot_product_attention", "attention", "my_attention"): {
        "uniform weights (rows that sum to 1, the output their mix of v)": _uniform_attention,
    },
    ("hw_self_attention_layer", "layer", "my_self_attention"): {
        "uniform weights (equivariant, rows that sum to 1, the output the weights times V)": _uniform_self_attention,
    },
    ("hw_tokens", "merge", "my_merge_pair"): {
        "overlapping pairs merged from the end (the right length)": _right_to_left_merge,
    },
    ("hw_tokens", "one-hot", "my_one_hot"): {
        "the next id's row (one 1 per row)": lambda ids, size: np.eye(size)[(np.asarray(ids) + 1) % size],
    },
    ("hw_transformer", "layer-norm", "my_layer_norm"): {
        "centred, not divided by the deviation (mean 0, a constant row to zeros)":
            lambda x, gamma, beta, eps=1e-5: (x - np.mean(x, axis=-1, keepdims=True)) * gamma + beta,
    },
    ("hw_transformers_that_learn", "layer-norm-backward", "my_layer_norm_backward"): {
        "dx without gamma (orthogonal to 1 and x_hat, dgamma and dbeta right)": _dx_without_gamma,
    },
    ("hw_transformers_that_learn", "nucleus", "my_nucleus_filter"): {
        "the top token only (the top token kept, the others -inf)": _top_token_only,
    },
    ("hw_why_attention", "rnn", "my_rnn_states"): {
        "no recurrence, h_t = tanh(x_t W_x + b) (causal, h_1 right)":
            lambda x, w_x, w_h, b: np.tanh(np.asarray(x) @ w_x + b),
    },
    ("hw_why_attention", "macs", "my_attention_macs"): {
        "the scores alone, n^2 d (quadratic in n)": lambda n, d: n * n * d,
    },
}


@pytest.mark.parametrize(("homework", "task", "name", "what"),
                         [pytest.param(*key, what, id=f"{key[0]}-{key[2]}-{what}")
                          for key, answers in PROPERTY_KEEPING.items() for what in answers])
def test_a_wrong_answer_that_keeps_a_property_gets_no_point(homework, task, name, what):
    """Each hidden test compares the answer with the reference, beside the property it tests."""
    users, passed = issue_example(homework, task, name, PROPERTY_KEEPING[homework, task, name][what])
    assert users, f"no hidden test of task {task} uses {name}"
    assert passed == [], f"{homework}: {name} as {what} keeps the points of {', '.join(passed)}"


def test_every_homework_has_a_wrong_answer_that_keeps_a_property():
    assert {homework for homework, _, _ in PROPERTY_KEEPING} == set(HOMEWORKS)
