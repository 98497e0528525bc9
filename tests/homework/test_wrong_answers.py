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
