"""Public checks for the homework: run a student's function, compare it with the package, say what is wrong.

Every check chooses its own inputs (seeded), calls the student's function on copies of them, compares
the result with this package's reference implementation, and reports the first problem it finds in
plain words: wrong shape (expected vs got), rows that do not sum to 1, negative weights, NaN or inf at
large logits, a transposed result, a missing scaling factor, "not done yet" (the stub still raises
``NotImplementedError`` or returns ``None``), or the name of the exception the function raised. A
check never raises because of the student's code, never prints a traceback, and never prints the
reference values for its inputs. It returns a :class:`CheckResult` and prints its message after a
✓ or ✗ marker (``quiet=True`` only returns it). Hidden tests reuse the checks on other inputs
(``seed=``) and ``assert result.passed, result.message``.

Every result is judged by one comparison, :func:`check_array` (``_difference`` inside the checks): the
shape exactly, with no broadcasting (an empty ``(0, 1, 1)`` or a ``(1, n)`` answer to an ``(n, n)``
question is wrong), the dtype's kind (booleans for a mask, integers for token ids and counts, floats of
any width for the rest), NaN or inf, then the values within tolerances. A check's other tests (rows
summing to 1, the known mistakes) only explain a failure; hidden tests call :func:`check_array` for the
values they compare themselves.

>>> import numpy as np
>>> from attnbook import softmax
>>> result = check_softmax(softmax)
✓ softmax: correct on the rows of a 3 x 6 array, a batch of shape (2, 3, 6), a vector of 6 logits and logits of ±1000
>>> result.passed
True
>>> def naive_softmax(x):
...     e = np.exp(x)
...     return e / e.sum(axis=-1, keepdims=True)
>>> _ = check_softmax(naive_softmax)  # doctest: +ELLIPSIS
✗ naive_softmax: not stable for large inputs: logits of 1000 give NaN or inf ...
>>> def unfinished(x):
...     raise NotImplementedError
>>> _ = check_softmax(unfinished)
✗ unfinished: not done yet (it still raises NotImplementedError); write its body, then run this check again
"""

from .attention import (
    check_attention,
    check_causal_mask,
    check_merge_heads,
    check_self_attention,
    check_softmax,
    check_split_heads,
)
from .compare import check_array, check_function, check_number
from .transformer import check_greedy_decode, check_layer_norm_backward, check_nucleus_filter, check_sinusoidal_encoding
from .verdict import CheckResult, check

__all__ = [
    "CheckResult",
    "check",
    "check_array",
    "check_attention",
    "check_causal_mask",
    "check_function",
    "check_greedy_decode",
    "check_layer_norm_backward",
    "check_merge_heads",
    "check_nucleus_filter",
    "check_number",
    "check_self_attention",
    "check_sinusoidal_encoding",
    "check_softmax",
    "check_split_heads",
]
