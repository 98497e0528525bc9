"""Public checks for the homework: run a student's function, compare it with the package, say what is wrong.

Every check calls the student's function on seeded inputs, compares the result with the package's by
:func:`check_array`, and reports the first problem in plain words, never a traceback or the reference
values; it returns a :class:`CheckResult` (see :func:`attnbook.homework.verdict.check`).

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
