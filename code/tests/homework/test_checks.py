"""Tests of attnbook.homework: each check passes the package's own functions, names each typical mistake
in plain words, reports unfinished stubs as "not done yet", and never raises or prints a traceback."""

import copy
import inspect
import math
import re

import numpy as np
import pytest

from attnbook import (
    causal_mask,
    layer_norm,
    merge_heads,
    scaled_dot_product_attention,
    self_attention,
    sinusoidal_encoding,
    softmax,
    split_heads,
)
from attnbook.learning.decoding import bigram_step, greedy_decode, nucleus_filter
from attnbook.learning.layers import layer_norm_vjp
from attnbook.homework import (
    check,
    CheckResult,
    check_array,
    check_attention,
    check_causal_mask,
    check_function,
    check_greedy_decode,
    check_layer_norm_backward,
    check_merge_heads,
    check_nucleus_filter,
    check_number,
    check_self_attention,
    check_sinusoidal_encoding,
    check_softmax,
    check_split_heads,
)



def layer_norm_backward(x, gamma, dy):
    """The package's backward pass of layer norm, as the student's function is called."""
    return layer_norm_vjp(x, gamma, np.zeros_like(gamma))[1](dy)


FUNCTION_CHECKS = [check_softmax, check_attention, check_self_attention, check_causal_mask,
                   check_split_heads, check_merge_heads, check_sinusoidal_encoding,
                   check_layer_norm_backward, check_nucleus_filter, check_greedy_decode]
REFERENCES = {check_softmax: softmax, check_attention: scaled_dot_product_attention,
              check_self_attention: self_attention, check_causal_mask: causal_mask,
              check_split_heads: split_heads, check_merge_heads: merge_heads,
              check_sinusoidal_encoding: sinusoidal_encoding, check_layer_norm_backward: layer_norm_backward,
              check_nucleus_filter: nucleus_filter, check_greedy_decode: greedy_decode}


def verdict(result: CheckResult) -> str:
    assert isinstance(result, CheckResult)
    assert isinstance(result.passed, bool) and isinstance(result.message, str)
    return result.message


# --- every check ------------------------------------------------------------------------------------


@pytest.mark.parametrize("check", FUNCTION_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("seed", [0, 1, 5])
def test_the_package_reference_passes_its_own_check(check, seed):
    result = check(REFERENCES[check], seed=seed, quiet=True)
    assert result.passed, result.message


@pytest.mark.parametrize("check", FUNCTION_CHECKS, ids=lambda c: c.__name__)
def test_an_unfinished_stub_is_not_done_yet(check):
    def stub(*args):
        raise NotImplementedError("your code here")

    result = check(stub, quiet=True)
    assert not result.passed
    assert verdict(result) == ("stub: not done yet (it still raises NotImplementedError); "
                               "write its body, then run this check again")


@pytest.mark.parametrize("check", FUNCTION_CHECKS, ids=lambda c: c.__name__)
def test_a_function_returning_none_is_not_done_yet(check):
    def forgot_return(*args):
        _ = args

    result = check(forgot_return, quiet=True)
    assert not result.passed and "not done yet (it returned None; is a `return` missing?)" in result.message


@pytest.mark.parametrize("check", FUNCTION_CHECKS, ids=lambda c: c.__name__)
def test_an_exception_is_named_without_a_traceback(check):
    def broken(*args):
        return {}["missing"]

    result = check(broken, quiet=True)
    assert not result.passed
    assert result.message.startswith("broken raised KeyError: 'missing' (called with (")
    assert "Traceback" not in result.message and "File " not in result.message


@pytest.mark.parametrize("check", FUNCTION_CHECKS, ids=lambda c: c.__name__)
def test_something_that_is_not_a_function_is_reported(check):
    result = check(None, quiet=True)
    assert not result.passed
    assert result.message == "your function is not a function (it is NoneType); define it with def"


@pytest.mark.parametrize("check", FUNCTION_CHECKS, ids=lambda c: c.__name__)
def test_an_odd_return_value_gives_a_verdict_not_an_exception(check):
    result = check(lambda *args: object(), quiet=True)
    assert not result.passed and result.message


@pytest.mark.parametrize("check", FUNCTION_CHECKS, ids=lambda c: c.__name__)
def test_a_function_that_overwrites_its_inputs_cannot_spoil_the_reference(check):
    def vandal(*args):
        answer = copy.deepcopy(REFERENCES[check](*args))  # not a view of the inputs
        for arg in args:
            if isinstance(arg, np.ndarray):
                arg[...] = 0  # scribbles over the arrays it was given, after computing the right answer
        return answer

    result = check(vandal, quiet=True)
    assert result.passed, result.message


@pytest.mark.parametrize("check", FUNCTION_CHECKS, ids=lambda c: c.__name__)
def test_a_check_prints_its_message_after_a_mark(check, capsys):
    result = check(REFERENCES[check])
    assert capsys.readouterr().out == f"✓ {result.message}\n"
    result = check(lambda *a: 1 / 0)
    assert capsys.readouterr().out == f"✗ {result.message}\n"


@pytest.mark.parametrize("check", FUNCTION_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("seed", [-1, 1.5, True, "0"])
def test_a_bad_seed_is_refused(check, seed):
    with pytest.raises(ValueError, match=r"^seed must be a non-negative integer, got "):
        check(softmax, seed=seed)


@pytest.mark.parametrize("check", FUNCTION_CHECKS, ids=lambda c: c.__name__)
def test_a_non_boolean_quiet_is_refused(check):
    with pytest.raises(TypeError, match=r"^quiet must be True or False, got 1$"):
        check(softmax, quiet=1)


@pytest.mark.parametrize("check", FUNCTION_CHECKS, ids=lambda c: c.__name__)
def test_every_check_accepts_a_numpy_bool_for_quiet(check):
    assert check(REFERENCES[check], quiet=np.bool_(True)).passed


@pytest.mark.parametrize("check, option", [(check_softmax, "large_logits"), (check_attention, "large_scores")])
def test_a_boolean_option_of_a_check_is_refused_unless_true_or_false(check, option):
    with pytest.raises(TypeError, match=rf"^{option} must be True or False, got 'no'$"):
        check(REFERENCES[check], **{option: "no"})


def test_a_check_refuses_an_option_it_does_not_have():
    with pytest.raises(TypeError, match=r"^check_causal_mask\(\) got an unexpected keyword argument 'large_logits'$"):
        check_causal_mask(causal_mask, large_logits=False)


@pytest.mark.parametrize("check", FUNCTION_CHECKS, ids=lambda c: c.__name__)
def test_every_check_shows_its_public_signature(check):
    parameters = inspect.signature(check).parameters
    assert list(parameters)[0] == "fn" and "seed" in parameters and "quiet" in parameters
    assert "rng" not in parameters and "label" not in parameters


def test_the_check_decorator_gives_the_same_inputs_for_the_same_seed():
    drawn = []

    @check
    def check_draw(fn, label, rng, seed):
        drawn.append(rng.random())
        return f"{label}: drew"

    check_draw(abs, seed=3, quiet=True)
    check_draw(abs, seed=3, quiet=True)
    check_draw(abs, seed=4, quiet=True)
    assert drawn[0] == drawn[1] != drawn[2]


def test_the_check_decorator_turns_an_unforeseen_error_into_a_failure_without_traceback(capsys):
    @check
    def check_odd(fn, label, rng, seed):
        return 1 / 0

    result = check_odd(abs)
    assert not result.passed and "the check could not finish (ZeroDivisionError" in result.message
    assert "Traceback" not in capsys.readouterr().out


def test_the_check_decorator_writes_the_shared_parts_of_the_docstring():
    @check
    def check_even(fn, label, rng, seed, *, strict: bool = True):
        """Check that ``fn(n)`` is even.

        Parameters
        ----------
        fn : callable
            The student's ``fn(n)``,
            returning an integer.
        strict : bool
            Refuse odd answers.

        Examples
        --------
        >>> check_even(lambda n: 2 * n).passed
        True
        """
        return f"{label}: even"

    doc = inspect.getdoc(check_even)
    assert doc.startswith("Check that ``fn(n)`` is even.\n\nUsed as ``check_even(fn, *, seed=0, strict=True, "
                          "quiet=False)``")
    parameters = doc.split("Parameters\n----------\n")[1].split("\n\n")[0]
    assert [line.split(" : ")[0] for line in parameters.splitlines() if not line.startswith(" ")] == [
        "fn", "seed", "strict", "quiet"]
    assert "returning an integer.\nseed : int" in parameters
    assert doc.index("Returns\n-------\nCheckResult") < doc.index("Examples") and doc.endswith("True")


def test_a_check_body_whose_docstring_lacks_the_sections_is_refused():
    def check_bare(fn, label, rng, seed):
        """Check nothing; no Parameters or Examples."""
        return label

    with pytest.raises(ValueError, match="check_bare: a check's docstring needs Parameters starting with fn"):
        check(check_bare)


def test_warnings_of_the_students_code_are_silenced(recwarn):
    def noisy(x):
        e = np.exp(x)  # overflows at 1000: a RuntimeWarning outside the check
        return e / e.sum(axis=-1, keepdims=True)

    result = check_softmax(noisy, quiet=True)
    assert not result.passed and not recwarn.list


def test_messages_are_the_same_on_every_run():
    def unscaled(q, k, v):
        w = softmax(q @ np.swapaxes(k, -1, -2))
        return w @ v, w

    assert check_attention(unscaled, quiet=True) == check_attention(unscaled, quiet=True)


def test_a_result_prints_as_its_marked_message():
    assert str(CheckResult(True, "fine")) == "✓ fine"
    assert str(CheckResult(False, "wrong")) == "✗ wrong"


# --- softmax ----------------------------------------------------------------------------------------


def naive_softmax(x):
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def test_softmax_overflowing_at_large_logits_is_not_stable():
    result = check_softmax(naive_softmax, quiet=True)
    assert result.message.startswith("naive_softmax: not stable for large inputs: logits of 1000 give NaN or inf")
    assert "subtract each row's maximum before exp" in result.message


def test_softmax_stability_can_be_left_out():
    assert check_softmax(naive_softmax, large_logits=False, quiet=True).passed


def test_softmax_normalised_over_columns_is_on_the_wrong_axis():
    result = check_softmax(lambda x: softmax(x, axis=0), quiet=True)
    assert "normalised along the wrong axis" in result.message and "use axis=-1" in result.message


def test_softmax_rows_that_do_not_sum_to_one_are_named():
    result = check_softmax(np.exp, quiet=True)
    assert "the rows do not sum to 1" in result.message and "(one sums to " in result.message


def test_softmax_with_negative_weights_is_named():
    result = check_softmax(lambda x: x - x.mean(axis=-1, keepdims=True) + 1 / x.shape[-1], quiet=True)
    assert "negative weights" in result.message and "never negative" in result.message


def test_softmax_of_the_transposed_shape_is_named():
    result = check_softmax(lambda x: softmax(np.swapaxes(x, -1, -2)), quiet=True)
    assert result.message == ("your function: wrong shape on a 3 x 6 array: expected (3, 6), got (6, 3) "
                              "(the last two axes are swapped: a transpose?)")


def test_softmax_returning_one_number_per_row_is_a_shape_error():
    result = check_softmax(lambda x: x.sum(axis=-1), quiet=True)
    assert "expected (3, 6), got (3,)" in result.message and "one weight per logit" in result.message


def test_softmax_dividing_by_the_whole_sum_is_explained():
    result = check_softmax(lambda x: np.exp(x) / np.exp(x).sum(), quiet=True)
    assert not result.passed and "rows do not sum to 1" in result.message


def test_softmax_subtracting_the_logits_from_the_maximum_is_explained():
    def reversed_shift(x):
        e = np.exp(x.max(axis=-1, keepdims=True) - x)
        return e / e.sum(axis=-1, keepdims=True)

    result = check_softmax(reversed_shift, quiet=True)
    assert "the logits are negated: subtract each row's maximum from x" in result.message


def test_softmax_working_only_in_two_dimensions_fails_on_the_batch():
    def two_d(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    result = check_softmax(two_d, quiet=True)
    assert "on a batch of shape (2, 3, 6)" in result.message


def test_softmax_check_never_shows_the_reference_values():
    x = np.random.default_rng(0).normal(scale=2.0, size=(3, 6))
    reference = softmax(x)
    result = check_softmax(lambda x: np.full(x.shape, 1 / x.shape[-1]), quiet=True)
    assert not result.passed
    for value in reference.ravel():
        assert f"{value:.3g}" not in result.message


# --- attention --------------------------------------------------------------------------------------


def attention_with(scores_fn, axis=-1):
    def attention(q, k, v):
        w = softmax(scores_fn(q, k), axis=axis)
        return w @ v, w
    return attention


def test_attention_without_the_scaling_factor_is_off_by_it():
    result = check_attention(attention_with(lambda q, k: q @ np.swapaxes(k, -1, -2)), quiet=True)
    assert "off by the scaling factor: divide the scores Q K^T by sqrt(d_k) = 2" in result.message


def test_attention_divided_by_d_k_is_named():
    result = check_attention(attention_with(lambda q, k: q @ np.swapaxes(k, -1, -2) / q.shape[-1]), quiet=True)
    assert "the scores are divided by d_k = 4; the factor is sqrt(d_k) = 2" in result.message


def test_attention_with_transposed_weights_is_named():
    def transposed(q, k, v):
        out, w = scaled_dot_product_attention(q, k, v)
        return out, np.swapaxes(w, -1, -2)

    result = check_attention(transposed, quiet=True)
    assert "wrong shape" in result.message and "(the last two axes are swapped: a transpose?)" in result.message


def test_attention_with_scores_k_q_transposed_is_named():
    def keys_first(q, k, v):
        w = softmax(k @ np.swapaxes(q, -1, -2) / 2.0)  # (n_k, n_q): K Q^T
        return scaled_dot_product_attention(q, k, v).output, w

    result = check_attention(keys_first, quiet=True)
    assert "expected (3, 5) (n_q, n_k), got (5, 3)" in result.message


def test_attention_normalised_over_the_queries_is_named():
    result = check_attention(attention_with(lambda q, k: q @ np.swapaxes(k, -1, -2) / 2.0, axis=-2), quiet=True)
    assert "the softmax runs over the queries" in result.message


def test_attention_using_k_dot_t_fails_on_a_batch_with_a_hint():
    def k_dot_t(q, k, v):
        w = softmax(q @ k.T / np.sqrt(q.shape[-1]))
        return w @ v, w

    result = check_attention(k_dot_t, quiet=True)
    assert result.message.startswith("k_dot_t raised ValueError")
    assert result.message.endswith("transpose only the last two axes of k: np.swapaxes(k, -1, -2), not k.T")


def test_attention_returning_only_the_output_is_asked_for_the_pair():
    result = check_attention(lambda q, k, v: scaled_dot_product_attention(q, k, v).output, quiet=True)
    assert "returned only the output" in result.message and "return the pair (output, weights)" in result.message


def test_attention_with_an_overflowing_softmax_is_not_stable():
    result = check_attention(attention_with(lambda q, k: q @ np.swapaxes(k, -1, -2) / 2.0), quiet=True)
    assert result.passed  # the package softmax is stable: the attention built on it passes

    def naive(q, k, v):
        w = naive_softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
        return w @ v, w

    assert "not stable for large scores" in check_attention(naive, quiet=True).message
    assert check_attention(naive, large_scores=False, quiet=True).passed


def test_attention_with_a_wrong_output_names_the_output():
    def wrong_output(q, k, v):
        out, w = scaled_dot_product_attention(q, k, v)
        return out + 1.0, w

    result = check_attention(wrong_output, quiet=True)
    assert result.message.startswith("the output of wrong_output: wrong values") and "weights @ v" in result.message


def test_self_attention_without_the_value_projection_is_named():
    def unprojected_values(x, w_q, w_k, w_v):
        _, w = self_attention(x, w_q, w_k, w_v)
        return w @ x[..., : w_v.shape[1]], w

    result = check_self_attention(unprojected_values, quiet=True)
    assert "the values are V = X W_V" in result.message


def test_self_attention_scoring_x_itself_is_told_to_project():
    def unprojected(x, w_q, w_k, w_v):
        w = softmax(x @ np.swapaxes(x, -1, -2) / np.sqrt(x.shape[-1]))
        return w @ (x @ w_v), w

    result = check_self_attention(unprojected, quiet=True)
    assert "project first: Q = X W_Q and K = X W_K" in result.message


# --- masks ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mask_fn", "words"), [
    (lambda n: np.triu(np.ones((n, n), dtype=bool)), "transposed for n = 4: True above the diagonal"),
    (lambda n: ~np.tril(np.ones((n, n), dtype=bool)), "True and False swapped for n = 4"),
    (lambda n: np.tril(np.ones((n, n), dtype=bool), k=-1), "False on the diagonal for n = 4"),
    (lambda n: np.tril(np.ones((n, n))), "0s and 1s of dtype float64 for n = 4; booleans are expected"),
    (lambda n: np.where(np.tril(np.ones((n, n), dtype=bool)), 0.0, -np.inf), "returned an additive mask"),
    (lambda n: np.ones((n, n + 1), dtype=bool), "wrong shape for n = 4: expected (4, 4), got (4, 5)"),
    (lambda n: np.eye(n, dtype=bool), "wrong values for n = 4: 6 of 16 entries differ"),
])
def test_causal_mask_mistakes_are_named(mask_fn, words):
    result = check_causal_mask(mask_fn, quiet=True)
    assert not result.passed and words in result.message


# --- heads ------------------------------------------------------------------------------------------


def test_split_heads_reshaped_without_moving_axes_is_explained():
    result = check_split_heads(lambda x, h: x.reshape(*x.shape[:-2], h, x.shape[-2], -1), quiet=True)
    assert "reshaping straight to (..., n_heads, n, d_head) mixes tokens" in result.message


def test_split_heads_without_the_swap_names_the_layout():
    result = check_split_heads(lambda x, h: x.reshape(*x.shape[:-1], h, -1), quiet=True)
    assert "that is (..., n, n_heads, d_head); swap the axes -3 and -2" in result.message


def test_split_heads_with_interleaved_columns_is_explained():
    result = check_split_heads(lambda x, h: np.moveaxis(x.reshape(*x.shape[:-1], -1, h), -1, -3), quiet=True)
    assert "head i got every n_heads-th column" in result.message


def test_merge_heads_reshaped_without_the_swap_is_explained():
    result = check_merge_heads(lambda x: x.reshape(*x.shape[:-3], x.shape[-2], -1), quiet=True)
    assert "swap the axes -3 and -2 first, then reshape" in result.message


# --- positional encodings ---------------------------------------------------------------------------


def variant(n, d, *, swap=False, concat=False, start=0, exponent=None):
    pairs = np.arange(d // 2)
    power = 2 * pairs / d if exponent is None else exponent(pairs, d)
    angles = np.arange(start, start + n)[:, None] / 10000.0 ** power[None, :]
    a, b = (np.cos(angles), np.sin(angles)) if swap else (np.sin(angles), np.cos(angles))
    if concat:
        return np.concatenate([a, b], axis=1)
    out = np.empty((n, d))
    out[:, 0::2], out[:, 1::2] = a, b
    return out


@pytest.mark.parametrize(("encoding", "words"), [
    (lambda n, d: variant(n, d, swap=True), "sine and cosine are swapped"),
    (lambda n, d: variant(n, d, concat=True), "all sines come first and all cosines after"),
    (lambda n, d: variant(n, d, exponent=lambda i, dd: i / dd), "the exponent is i/d_model"),
    (lambda n, d: variant(n, d, exponent=lambda i, dd: -2 * i / dd), "the frequencies grow"),
    (lambda n, d: variant(n, d, start=1), "the positions start at 1"),
    (lambda n, d: sinusoidal_encoding(n, d).T, "one row per position (a transpose?)"),
])
def test_sinusoidal_encoding_mistakes_are_named(encoding, words):
    result = check_sinusoidal_encoding(encoding, quiet=True)
    assert not result.passed and words in result.message


def test_sinusoidal_encoding_with_each_column_its_own_exponent_is_named():
    def own_exponent(n, d):
        column = np.arange(d)
        angles = np.arange(n)[:, None] / 10000.0 ** (column / d)[None, :]
        return np.where(column % 2 == 0, np.sin(angles), np.cos(angles))

    assert "column 2i+1 uses its own index" in check_sinusoidal_encoding(own_exponent, quiet=True).message


# --- arrays: the one comparison ----------------------------------------------------------------------


@pytest.mark.parametrize("answer", [np.zeros((0, 1, 1), dtype=bool), np.zeros((0, 3), dtype=bool),
                                    causal_mask(3)[:1], causal_mask(3)[None], causal_mask(3)[0]])
def test_an_answer_that_would_broadcast_is_a_wrong_shape(answer):
    result = check_array(answer, causal_mask(3), "mask", quiet=True)
    assert not result.passed
    assert result.message.startswith(f"mask: wrong shape: expected (3, 3), got {answer.shape}")


def test_a_wrong_shape_is_explained_by_its_layout():
    def message(answer):
        return check_array(answer, np.zeros((2, 3)), "x", quiet=True).message

    assert message(np.zeros((0, 1, 1))).endswith("(an empty array: it holds no values at all)")
    assert message(np.zeros((3, 2))).endswith("(the last two axes are swapped: a transpose?)")
    assert message(np.zeros(6)).endswith("(the right number of values in the wrong layout: check the reshape "
                                         "and the axis order)")
    assert message(np.zeros((1, 3))).endswith("(numpy would broadcast it to the expected shape, but the shape "
                                              "itself must be the expected one)")


@pytest.mark.parametrize(("answer", "expected", "words"), [
    (np.tril(np.ones((3, 3))), causal_mask(3), "mask: 0s and 1s of dtype float64; booleans are expected"),
    (np.full((3, 3), 2), causal_mask(3), "mask: integers of dtype int64; booleans are expected"),
    (np.array([3.0, 5.0]), np.array([3, 5]), "mask: floats of dtype float64; integers are expected"),
    (np.array([True, False]), np.array([1, 0]), "mask: booleans of dtype bool; integers are expected"),
    (np.array([1, 0]), np.array([1.0, 0.0]), "mask: integers of dtype int64; real numbers (floats) are expected"),
    (np.array([1.0, 2.0]) + 0j, np.array([1.0, 2.0]), "mask is complex; real numbers are expected"),
    (np.array(["a", "b"]), np.array([1.0, 2.0]), "mask holds text, not numbers"),
])
def test_an_answer_of_another_dtype_kind_is_refused_even_with_the_right_values(answer, expected, words):
    result = check_array(answer, expected, "mask", quiet=True)
    assert not result.passed and result.message.startswith(words), result.message


@pytest.mark.parametrize("answer", [np.float32([0.5, 0.25]), [0.5, 0.25], (0.5, 0.25), np.longdouble([0.5, 0.25])])
def test_a_float_answer_of_any_width_or_container_is_compared_by_value(answer):
    assert check_array(answer, np.array([0.5, 0.25]), "x", quiet=True).passed


def test_integers_of_any_width_are_compared_exactly():
    assert check_array(np.array([1, 2], dtype=np.uint8), np.array([1, 2]), "ids", quiet=True).passed
    result = check_array(np.array([1, 3]), np.array([1, 2]), "ids", atol=5.0, quiet=True)
    assert result.message == "ids: wrong values: 1 of 2 are wrong (largest difference 1)"


def test_nan_or_inf_where_a_finite_value_is_expected_is_named_before_the_values():
    result = check_array(np.array([1.0, np.nan]), np.array([1.0, 2.0]), "x", context="for n = 2", quiet=True)
    assert result.message == "x: NaN or inf for n = 2"
    assert check_array(np.array([0.5, -np.inf]), np.array([0.5, -np.inf]), "logits", quiet=True).passed
    result = check_array(np.array([0.5, 0.0]), np.array([0.5, -np.inf]), "logits", quiet=True)
    assert result.message == "logits: wrong values: 1 of 2 are wrong"


def test_wrong_values_are_counted_and_a_transpose_is_named():
    x = np.arange(9.0).reshape(3, 3)
    assert check_array(x.T, x, "x", quiet=True).message == "x: off by a transpose (rows and columns are swapped)"
    assert check_array(x + np.eye(3), x, "x", quiet=True).message == (
        "x: wrong values: 3 of 9 are wrong (largest difference 1)")
    mask = causal_mask(3)
    assert check_array(~mask, mask, "m", quiet=True).message == "m: wrong values: 9 of 9 entries differ"


def test_values_false_compares_shape_dtype_and_finiteness_only():
    assert check_array(np.ones((2, 3)), np.zeros((2, 3)), "x", values=False, quiet=True).passed
    assert not check_array(np.full((2, 3), np.inf), np.zeros((2, 3)), "x", values=False, quiet=True).passed
    assert not check_array(np.ones((2, 3), dtype=int), np.zeros((2, 3)), "x", values=False, quiet=True).passed


def test_check_array_prints_its_verdict_after_a_mark(capsys):
    check_array(causal_mask(2), causal_mask(2), "mask", context="for n = 2")
    check_array(np.ones(2), np.zeros(2), "x", values=False)
    assert capsys.readouterr().out == ("✓ mask: correct for n = 2 (shape (2, 2), booleans)\n"
                                       "✓ x: shape (2,) and floats as expected (values not compared)\n")


@pytest.mark.parametrize(("arguments", "error", "words"), [
    ({"expected": [1.0, np.nan]}, ValueError, "expected must not hold NaN (infinite entries are compared as such)"),
    ({"expected": ["a", "b"]}, ValueError, "expected must hold booleans or real numbers, got dtype <U1"),
    ({"expected": [[1.0], [2.0, 3.0]]}, ValueError, "expected must be a rectangular array, got a list"),
    ({"name": ""}, TypeError, "name must be a non-empty string, got ''"),
    ({"rtol": -1.0}, ValueError, "rtol must be a non-negative finite number, got -1.0"),
    ({"atol": math.nan}, ValueError, "atol must be a non-negative finite number, got nan"),
    ({"values": 1}, TypeError, "values must be True or False"),
    ({"context": 3}, TypeError, "context must be a string, got 3"),
    ({"quiet": "yes"}, TypeError, "quiet must be True or False"),
])
def test_instructor_mistakes_in_check_array_raise_an_error_naming_the_argument(arguments, error, words):
    with pytest.raises(error, match="^" + re.escape(words)):
        check_array(**{"answer": np.ones(2), "expected": np.ones(2), "name": "x", **arguments})


def test_check_function_refuses_a_float_mask_and_float_counts():
    result = check_function(lambda n: causal_mask(n).astype(float), causal_mask, [(3,)], name="f", quiet=True)
    assert result.message.startswith("f: 0s and 1s of dtype float64 on case 1 of 1")
    result = check_function(lambda n: float(n * n), lambda n: n * n, [(3,)], name="count", quiet=True)
    assert result.message.startswith("count: floats of dtype float64 on case 1 of 1")
    result = check_function(lambda n: [n * n], lambda n: n * n, [(3,)], name="count", quiet=True)
    assert result.message.startswith("count is a list of shape (1,) on case 1 of 1")


# --- numbers ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [None, ...])
def test_a_missing_number_is_not_done_yet(answer):
    result = check_number(answer, 3.0, "answer_x", quiet=True)
    assert not result.passed and result.message == "answer_x: not done yet (set it to your number)"


@pytest.mark.parametrize("answer", [3, 3.0, np.int64(3), np.float32(3.0), np.array(3.0), np.array(3)])
def test_a_right_number_passes_whatever_its_type(answer):
    assert check_number(answer, 3, "answer_x", quiet=True).message == "answer_x is right"


@pytest.mark.parametrize(("answer", "words"), [
    ("3", "answer_x is the text '3'; write the number itself, without quotes"),
    (True, "answer_x is True; a number is expected"),
    (np.array([3.0, 4.0]), "answer_x is an array of shape (2,); a single number is expected"),
    (np.array([3.0]), "answer_x is an array of shape (1,); a single number is expected"),
    ([3.0], "answer_x is a list of shape (1,); a single number is expected"),
    (np.zeros((0, 1, 1)), "answer_x is an array of shape (0, 1, 1); a single number is expected"),
    (3 + 0j, "answer_x is complex; a real number is expected"),
    (float("nan"), "answer_x is nan; a finite number is expected"),
    (-3.0, "answer_x = -3 has the right size but the wrong sign"),
    (3.01, "answer_x = 3.01 is close but not within a relative tolerance of 1e-06"),
    (4.0, "answer_x = 4 is not right"),
])
def test_a_wrong_number_is_described_without_the_expected_value(answer, words):
    result = check_number(answer, 3.0, "answer_x", quiet=True)
    assert not result.passed and result.message.startswith(words)


def test_a_hint_is_added_to_a_wrong_answer():
    result = check_number(1.0, 3.0, "answer_x", hint="count the three projections", quiet=True)
    assert result.message == "answer_x = 1 is not right; hint: count the three projections"


def test_an_absolute_tolerance_accepts_zero_answers():
    assert check_number(1e-15, 0.0, "answer_w3", abs_tol=1e-12, quiet=True).passed
    assert not check_number(1e-15, 0.0, "answer_w3", quiet=True).passed


@pytest.mark.parametrize(("kwargs", "error", "words"), [
    ({"expected": math.inf}, ValueError, "expected must be a finite real number, got inf"),
    ({"expected": "3"}, ValueError, "expected must be a finite real number, got '3'"),
    ({"name": ""}, TypeError, "name must be a non-empty string, got ''"),
    ({"rel_tol": -1.0}, ValueError, "rel_tol must be a non-negative finite number, got -1.0"),
    ({"hint": 3}, TypeError, "hint must be a string or None, got 3"),
])
def test_instructor_mistakes_in_check_number_raise_clear_errors(kwargs, error, words):
    arguments = {"answer": 1.0, "expected": 1.0, "name": "x", **kwargs}
    with pytest.raises(error, match="^" + words.replace("(", r"\(").replace(")", r"\)") + "$"):
        check_number(**arguments)


# --- any function -----------------------------------------------------------------------------------


def test_check_function_compares_every_part_of_a_named_tuple():
    q = np.random.default_rng(0).standard_normal((3, 2))

    def only_weights_wrong(q, k, v):
        out, w = scaled_dot_product_attention(q, k, v)
        return out, w * 2

    result = check_function(only_weights_wrong, scaled_dot_product_attention, [(q, q, q)], quiet=True)
    assert result.message.startswith("only_weights_wrong (weights): wrong values on case 1 of 1")


def test_check_function_asks_for_every_result_of_a_tuple():
    q = np.ones((2, 2))
    result = check_function(lambda q, k, v: q, scaled_dot_product_attention, [(q, q, q)], name="f", quiet=True)
    assert result.message == "f: returned a single ndarray; expected 2 results (output, weights) on case 1 of 1, " \
                             "inputs (an array of shape (2, 2), an array of shape (2, 2), an array of shape (2, 2))"


def test_check_function_counts_its_cases():
    x = np.ones((2, 3))
    assert check_function(layer_norm, layer_norm, [(x,), (x,)], quiet=True).message == (
        "layer_norm: matches the reference on all 2 cases")


def test_check_function_reports_a_transposed_square_result():
    x = np.arange(9.0).reshape(3, 3)
    result = check_function(lambda x: np.tanh(x).T, np.tanh, [(x,)], name="f", quiet=True)
    assert result.message.startswith("f: off by a transpose on case 1 of 1")


@pytest.mark.parametrize(("arguments", "error"), [
    ({"reference": 3, "cases": [(1,)]}, TypeError),
    ({"reference": abs, "cases": [1]}, ValueError),
    ({"reference": abs, "cases": [(1,)], "name": 3}, TypeError),
    ({"reference": abs, "cases": [(1,)], "atol": -1}, ValueError),
])
def test_instructor_mistakes_in_check_function_raise_clear_errors(arguments, error):
    with pytest.raises(error):
        check_function(abs, **arguments)


# --- learning: layer norm's backward pass, nucleus filtering, greedy decoding ---------------------------


def layer_norm_parts(x, gamma, dy, eps=1e-5):
    sigma = np.sqrt(x.var(axis=-1, keepdims=True) + eps)  # (..., 1)
    x_hat = (x - x.mean(axis=-1, keepdims=True)) / sigma  # (..., d)
    g = dy * gamma  # (..., d)
    sums = tuple(range(x.ndim - 1))
    return sigma, x_hat, g, (dy * x_hat).sum(axis=sums), dy.sum(axis=sums)


def backward_without_x_hat_term(x, gamma, dy):
    sigma, _, g, dgamma, dbeta = layer_norm_parts(x, gamma, dy)
    return (g - g.mean(axis=-1, keepdims=True)) / sigma, dgamma, dbeta


def backward_without_gamma(x, gamma, dy):
    return layer_norm_backward(x, np.ones_like(gamma), dy)[0], *layer_norm_backward(x, gamma, dy)[1:]


def backward_with_swapped_parameter_gradients(x, gamma, dy):
    dx, dgamma, dbeta = layer_norm_backward(x, gamma, dy)
    return dx, dbeta, dgamma


def backward_unsummed(x, gamma, dy):
    sigma, x_hat, _, _, _ = layer_norm_parts(x, gamma, dy)
    return layer_norm_backward(x, gamma, dy)[0], dy * x_hat, dy


def backward_without_the_mean_term(x, gamma, dy):
    sigma, x_hat, g, dgamma, dbeta = layer_norm_parts(x, gamma, dy)
    return (g - x_hat * (g * x_hat).mean(axis=-1, keepdims=True)) / sigma, dgamma, dbeta


@pytest.mark.parametrize(("backward", "words"), [
    (backward_without_x_hat_term, "the term -x_hat * mean(g * x_hat) is missing"),
    (backward_without_the_mean_term, "the term -mean(g) is missing: the mean depends on x too"),
    (backward_without_gamma, "gamma is missing: the gradient reaching x_hat is g = dy * gamma"),
    (backward_with_swapped_parameter_gradients, "it is sum(dy) over the positions, which is dbeta"),
    (backward_unsummed, "wrong shape for x (4, 6): expected (6,), got (4, 6) (sum over every position"),
])
def test_layer_norm_backward_mistakes_are_named(backward, words):
    result = check_layer_norm_backward(backward, quiet=True)
    assert not result.passed and words in result.message, result.message


def test_layer_norm_backward_is_compared_with_finite_differences_not_the_package():
    # a gradient within the tolerance of central differences passes; one off by 1e-4 does not
    def nearly(x, gamma, dy):
        dx, dgamma, dbeta = layer_norm_backward(x, gamma, dy)
        return dx * (1 + 1e-8), dgamma, dbeta

    def off(x, gamma, dy):
        dx, dgamma, dbeta = layer_norm_backward(x, gamma, dy)
        return dx * (1 + 1e-4), dgamma, dbeta

    assert check_layer_norm_backward(nearly, quiet=True).passed
    assert "relative error" in check_layer_norm_backward(off, quiet=True).message


def nucleus_dropping_the_top(logits, p):
    order = np.argsort(-logits, axis=-1, kind="stable")
    probs = softmax(np.take_along_axis(logits, order, axis=-1))
    kept = np.zeros(logits.shape, dtype=bool)
    np.put_along_axis(kept, order, np.cumsum(probs, axis=-1) <= p, axis=-1)
    return np.where(kept, logits, -np.inf)


def nucleus_ties_to_the_higher_index(logits, p):
    flipped = nucleus_filter(logits[..., ::-1], p)
    return flipped[..., ::-1]


@pytest.mark.parametrize(("nucleus", "words"), [
    (nucleus_dropping_the_top, "the token whose probability carries the sum past p is dropped"),
    (nucleus_ties_to_the_higher_index, "ties go to the lower index"),
    (lambda logits, p: nucleus_filter(-logits, p), "wrong tokens kept"),
    (lambda logits, p: np.where(np.isfinite(nucleus_filter(logits, p)), softmax(logits), -np.inf),
     "return the logits themselves where kept"),
    (lambda logits, p: nucleus_filter(logits, p)[..., 0], "wrong shape"),
])
def test_nucleus_filter_mistakes_are_named(nucleus, words):
    result = check_nucleus_filter(nucleus, quiet=True)
    assert not result.passed and words in result.message, result.message


def test_a_nucleus_filter_that_drops_the_top_token_fails_on_a_dominant_token():
    def strict(logits, p):  # keeps a token only while the sum with it stays below p: drops a token above p
        kept = nucleus_dropping_the_top(logits, p)
        return np.where(np.isfinite(kept), kept, -np.inf)

    row = np.log(np.array([[0.05, 0.9, 0.05]]))
    assert np.all(np.isinf(strict(row, 0.6)))  # the mistake leaves the row empty
    assert "a row keeps no token" in check_nucleus_filter(strict, quiet=True).message or \
        "carries the sum past p" in check_nucleus_filter(strict, quiet=True).message


def greedy_with(change):
    """greedy_decode with its output changed by ``change(tokens, log_probs, lengths)``."""
    def decode(step, state, batch_size, max_length, bos, eos):
        return change(*greedy_decode(step, state, batch_size, max_length, bos, eos))
    return decode


def greedy_ties_to_the_higher_index(step, state, batch_size, max_length, bos, eos):
    tokens, total = np.zeros((batch_size, max_length), dtype=int), np.zeros(batch_size)
    lengths, alive, current = np.zeros(batch_size, dtype=int), np.ones(batch_size, dtype=bool), np.full(batch_size, bos)
    for t in range(max_length):
        logits, state = step(state, current)
        logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        chosen = np.where(alive, logp.shape[1] - 1 - logp[:, ::-1].argmax(axis=1), 0)  # ties: the higher index
        total += np.where(alive, logp[np.arange(batch_size), chosen], 0.0)
        tokens[:, t], lengths, current = chosen, lengths + alive, chosen
        alive &= chosen != eos
        if not alive.any():
            break
    return tokens[:, :lengths.max()], total, lengths


@pytest.mark.parametrize(("decode", "words"), [
    (greedy_with(lambda t, lp, n: (np.where(t == 0, 9, t), lp, n)), "wrong tokens after EOS"),
    (greedy_with(lambda t, lp, n: (t, lp, n - 1)), "the lengths of decode: wrong values"),
    (greedy_with(lambda t, lp, n: (t, lp - 0.1, n)), "the log_probs of decode: wrong values"),
    (greedy_with(lambda t, lp, n: (np.pad(t, ((0, 0), (0, 1))), lp, n)), "stop as soon as every row has ended"),
    (greedy_with(lambda t, lp, n: t), "return (tokens, log_probs, lengths)"),
    (greedy_ties_to_the_higher_index, "wrong tokens for tied probabilities"),
])
def test_greedy_decode_mistakes_are_named(decode, words):
    result = check_greedy_decode(decode, quiet=True)
    assert not result.passed and words in result.message, result.message


def test_greedy_decode_check_accepts_a_plain_tuple_and_the_bigram_model_works():
    assert check_greedy_decode(greedy_with(lambda t, lp, n: (t, lp, n)), quiet=True).passed
    step = bigram_step([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    assert greedy_decode(step, None, 1, 3, bos=1, eos=2).tokens.tolist() == [[2]]
