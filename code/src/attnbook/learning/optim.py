"""Optimisers for a tree of parameter arrays: plain gradient descent and Adam, the Noam schedule, clipping.

A parameter *tree* is a NamedTuple whose fields are arrays or, nested to any depth, NamedTuples, tuples
and lists of arrays: a model holding a tuple of :class:`attnbook.EncoderLayerWeights` is one. Its
gradients form a tree of the same structure; :func:`tree_leaves` and :func:`tree_map` walk both.

>>> import numpy as np
>>> from attnbook.learning.models.recall import RecallParameters
>>> p = RecallParameters(*[np.ones(2)] * 4)
>>> sgd_step(p, p, 0.5).w_q.tolist()
[0.5, 0.5]
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..validation import check_positive_int

__all__ = [
    "AdamState",
    "adam_step",
    "check_gradients",
    "check_learning_rate",
    "clip_by_global_norm",
    "decay_weights",
    "init_adam",
    "noam_rate",
    "sgd_step",
    "tree_leaves",
    "tree_map",
    "warmup_cosine_rate",
]


class AdamState(NamedTuple):
    """Running moments of Adam, one array per parameter, and the number of steps taken.

    Attributes
    ----------
    m, v : tuple of ndarray
        First and second moments (of the gradients, of their squares), one per leaf (:func:`tree_leaves`).
    step : int
        Steps taken so far, ``t`` in the bias corrections.

    Examples
    --------
    >>> init_adam((np.ones(2),))
    AdamState(m=(array([0., 0.]),), v=(array([0., 0.]),), step=0)
    """

    m: tuple  # first moments, one per leaf of the parameters, shaped like it
    v: tuple  # second moments, one per leaf
    step: int


def check_learning_rate(learning_rate) -> float:
    """Return ``learning_rate`` as a float if it is a positive finite number.

    Parameters
    ----------
    learning_rate : float
        The step size.

    Returns
    -------
    float
        ``learning_rate``.

    Examples
    --------
    >>> check_learning_rate(0.1)
    0.1
    >>> check_learning_rate(0)
    Traceback (most recent call last):
    ...
    ValueError: learning_rate must be a positive finite number, got 0
    """
    return _positive_number(learning_rate, "learning_rate")


def _positive_number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def tree_leaves(tree) -> list:
    r"""The arrays of a parameter tree, depth first, in the order of the fields.

    .. math:: \operatorname{leaves}((t_1, \dots, t_k)) = \operatorname{leaves}(t_1) \,\Vert\, \dots
              \,\Vert\, \operatorname{leaves}(t_k), \qquad \operatorname{leaves}(a) = [a]

    NamedTuples, tuples and lists are branches; anything else (an array, a number) is a leaf.

    Parameters
    ----------
    tree : NamedTuple, tuple, list or ndarray
        The tree.

    Returns
    -------
    list
        Its leaves.

    Examples
    --------
    >>> from attnbook import init_encoder_layer
    >>> len(tree_leaves(init_encoder_layer(4, 8)))                     # 8 + 4 + 2 + 2
    16
    >>> tree_leaves(((np.zeros(1), [np.ones(2)]), np.ones(3)))[1].tolist()
    [1.0, 1.0]
    """
    if isinstance(tree, (tuple, list)):
        return [leaf for branch in tree for leaf in tree_leaves(branch)]
    return [tree]


def tree_map(f, tree, *rest):
    r"""Apply ``f`` to the leaves of ``tree`` (and the matching leaves of ``rest``), keeping the structure.

    .. math:: \operatorname{map}(f, (t_1, \dots, t_k), (r_1, \dots, r_k))
              = (\operatorname{map}(f, t_1, r_1), \dots, \operatorname{map}(f, t_k, r_k))

    Parameters
    ----------
    f : callable
        Takes one leaf of ``tree`` and the matching leaf of each of ``rest``.
    tree : NamedTuple, tuple, list or ndarray
        The tree whose structure the result takes.
    *rest : trees
        Trees of the same structure and leaf shapes as ``tree``.

    Returns
    -------
    tree
        ``f``'s results, in the structure (and NamedTuple types) of ``tree``.

    Examples
    --------
    >>> from attnbook.learning.models.recall import RecallParameters
    >>> p = RecallParameters(*[np.ones(2)] * 4)
    >>> tree_map(lambda w, g: w - 0.5 * g, p, p).w_k.tolist()
    [0.5, 0.5]
    >>> tree_map(np.add, (np.ones(2), [np.ones(1)]), (np.ones(2), (np.ones(1),)))
    Traceback (most recent call last):
    ...
    TypeError: rest[0][1] is a tuple of 1 but tree[1] is a list of 1; rest[0] must have the structure of tree
    """
    if not callable(f):
        raise TypeError(f"f must be callable, got {type(f).__name__}")
    for index, other in enumerate(rest):
        _check_same_tree(tree, other, "tree", f"rest[{index}]")
    return map_tree(f, tree, *rest)


def map_tree(f, tree, *rest):
    """Unchecked kernel of :func:`tree_map`.

    >>> map_tree(lambda a: 2 * a, [np.ones(1), (np.ones(1),)])[1][0].tolist()
    [2.0]
    """
    if isinstance(tree, (tuple, list)):
        branches = [map_tree(f, *parts) for parts in zip(tree, *rest)]
        return type(tree)(*branches) if hasattr(tree, "_fields") else type(tree)(branches)
    return f(tree, *rest)


def _describe(node) -> str:
    return f"a {type(node).__name__}" + (f" of {len(node)}" if isinstance(node, (tuple, list)) else "")


def _check_same_tree(reference, other, reference_name: str, other_name: str, path: str = "",
                     named: str = "") -> None:
    """Refuse ``other`` unless it has the structure and leaf shapes of ``reference``, naming the first
    difference by its index path (``grads[1][0]``) and, for a leaf in NamedTuples, by its field path
    (``params.layers[0].feed_forward.w_1``)."""
    if isinstance(reference, (tuple, list)) or isinstance(other, (tuple, list)):
        if type(other) is not type(reference) or len(other) != len(reference):
            raise TypeError(f"{other_name}{path} is {_describe(other)} but {reference_name}{path} is "
                            f"{_describe(reference)}; {other_name} must have the structure of {reference_name}")
        fields = getattr(reference, "_fields", None)
        for index, (a, b) in enumerate(zip(reference, other)):
            step = f".{fields[index]}" if fields else f"[{index}]"
            _check_same_tree(a, b, reference_name, other_name, f"{path}[{index}]", named + step)
    elif np.shape(reference) != np.shape(other):
        leaf = f" (the leaf {reference_name}{named})" if named != path else ""
        raise ValueError(f"{other_name}{path} has shape {np.shape(other)} but {reference_name}{path} has shape "
                         f"{np.shape(reference)}{leaf}")


def check_gradients(params, grads) -> None:
    """Refuse parameters that are not a tree in a NamedTuple, and gradients of another structure or shape.

    Parameters
    ----------
    params, grads : NamedTuple
        The parameter tree (see the module docstring) and its gradients, of the same structure and shapes.

    Examples
    --------
    >>> from attnbook.learning.models.recall import RecallParameters
    >>> p = RecallParameters(*[np.zeros(2)] * 4)
    >>> check_gradients(p, p._replace(w_v=np.zeros(3)))
    Traceback (most recent call last):
    ...
    ValueError: grads[2] has shape (3,) but params[2] has shape (2,) (the leaf params.w_v)
    """
    if not (isinstance(params, tuple) and hasattr(params, "_fields")):
        raise TypeError(f"params must be a NamedTuple of arrays, got {type(params).__name__}; a tree nests "
                        "NamedTuples, tuples and lists of arrays in one NamedTuple")
    _check_same_tree(params, grads, "params", "grads")


def sgd_step(params, grads, learning_rate: float = 0.1):
    r"""Plain gradient descent, ``w <- w - learning_rate * dL/dw``, for a NamedTuple of arrays.

    .. math:: w \leftarrow w - \eta\, \frac{\partial L}{\partial w}

    Parameters
    ----------
    params, grads
        As in :func:`check_gradients`.
    learning_rate : float
        The step size ``eta``.

    Returns
    -------
    NamedTuple of ndarray
        The new parameters.

    Examples
    --------
    >>> from attnbook.learning.models.recall import RecallParameters
    >>> sgd_step(RecallParameters(*[np.ones(2)] * 4), RecallParameters(*[np.ones(2)] * 4), 0.5).w_q.tolist()
    [0.5, 0.5]
    """
    rate = check_learning_rate(learning_rate)
    check_gradients(params, grads)
    return descend(params, grads, rate)


def descend(params, grads, rate: float):
    """Unchecked kernel of :func:`sgd_step`: ``w - rate * g`` for every parameter.

    >>> from attnbook.learning.models.recall import RecallParameters
    >>> descend(RecallParameters(*[np.ones(1)] * 4), RecallParameters(*[np.ones(1)] * 4), 0.5).w_k.tolist()
    [0.5]
    """
    return map_tree(lambda w, g: w - rate * g, params, grads)


def init_adam(params) -> AdamState:
    r"""Zero moments for :func:`adam_step`.

    .. math:: m_0 = 0, \quad v_0 = 0, \quad t = 0

    Parameters
    ----------
    params : NamedTuple of ndarray
        The parameters the moments will follow (a tree).

    Returns
    -------
    AdamState
        Zero first and second moments shaped like the leaves of the parameters, and step 0.

    Examples
    --------
    >>> init_adam((np.ones(2),)).step
    0
    """
    leaves = tree_leaves(params)
    return AdamState(tuple(np.zeros_like(w) for w in leaves), tuple(np.zeros_like(w) for w in leaves), 0)


def adam_step(params, grads, state: AdamState, learning_rate: float = 0.01, beta1: float = 0.9,
              beta2: float = 0.999, eps: float = 1e-8):
    r"""One step of Adam (Kingma and Ba, 2015); returns ``(new_params, new_state)``.

    .. math:: m \leftarrow \beta_1 m + (1 - \beta_1) g, \quad v \leftarrow \beta_2 v + (1 - \beta_2) g^2, \quad
              w \leftarrow w - \eta\, \frac{m / (1 - \beta_1^t)}{\sqrt{v / (1 - \beta_2^t)} + \epsilon}

    Parameters
    ----------
    params, grads
        As in :func:`check_gradients`.
    state : AdamState
        The moments so far (see :func:`init_adam`).
    learning_rate : float
        ``eta``.
    beta1, beta2 : float
        Decay rates of the moments, in ``[0, 1)``.
    eps : float
        Added to the denominator.

    Returns
    -------
    tuple
        ``(new_params, new_state)``.

    Examples
    --------
    >>> from attnbook.learning.models.recall import RecallParameters
    >>> p = RecallParameters(*[np.zeros(1)] * 4)
    >>> p, state = adam_step(p, RecallParameters(*[np.full(1, 1e-3)] * 4), init_adam(p), 0.1)
    >>> print(np.round(p.w_q, 4), state.step)
    [-0.1] 1
    """
    rate = check_learning_rate(learning_rate)
    check_gradients(params, grads)
    if not isinstance(state, AdamState) or len(state.m) != len(tree_leaves(params)):
        raise TypeError("state must be the AdamState of these parameters (see init_adam)")
    for name, beta in (("beta1", beta1), ("beta2", beta2)):
        if not 0 <= beta < 1:
            raise ValueError(f"{name} must be in [0, 1), got {beta!r}")
    return adam_update(params, grads, state, rate, beta1, beta2, eps)


def adam_update(params, grads, state: AdamState, rate: float, beta1: float = 0.9, beta2: float = 0.999,
                eps: float = 1e-8):
    """Unchecked kernel of :func:`adam_step`; returns ``(new_params, new_state)``.

    >>> from attnbook.learning.models.recall import RecallParameters
    >>> p = RecallParameters(*[np.zeros(1)] * 4)
    >>> adam_update(p, RecallParameters(*[np.ones(1)] * 4), init_adam(p), 0.1)[0].w_q.round(4).tolist()
    [-0.1]
    """
    step = state.step + 1
    grads = tree_leaves(grads)
    m = tuple(beta1 * m_i + (1 - beta1) * g for m_i, g in zip(state.m, grads))
    v = tuple(beta2 * v_i + (1 - beta2) * g * g for v_i, g in zip(state.v, grads))
    new = []
    for w, m_i, v_i in zip(tree_leaves(params), m, v):
        m_hat = m_i / (1 - beta1**step)  # bias correction: the moments start at 0
        v_hat = v_i / (1 - beta2**step)
        new.append(w - rate * m_hat / (np.sqrt(v_hat) + eps))
    stepped = iter(new)
    return map_tree(lambda _: next(stepped), params), AdamState(m, v, step)  # the leaves back in the tree


def noam_rate(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    r"""The learning rate of Vaswani et al. (2017, section 5.3): a linear warm-up, then a decay as ``step^-1/2``.

    .. math:: \eta(s) = f \cdot d_\text{model}^{-1/2} \cdot \min\left(s^{-1/2},\; s \cdot w^{-3/2}\right)

    The rate peaks at ``step = warmup``.

    Parameters
    ----------
    step, d_model, warmup : int
        The step, from 1; the model width; ``w``, the steps of the warm-up (4000 in the paper).
    factor : float
        A multiplier ``f``; 1 in the paper.

    Returns
    -------
    float
        The learning rate at ``step``.

    Examples
    --------
    >>> round(noam_rate(4000, 512, 4000), 7)                           # the paper's peak
    0.0006988
    >>> bool(np.isclose(noam_rate(2000, 512, 4000), noam_rate(4000, 512, 4000) / 2))   # half-way up
    True
    """
    step = check_positive_int(step, "step")
    d_model = check_positive_int(d_model, "d_model")
    warmup = check_positive_int(warmup, "warmup")
    return noam(step, d_model, warmup, _positive_number(factor, "factor"))


def noam(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """Unchecked kernel of :func:`noam_rate`.

    >>> noam(1, 1, 1)
    1.0
    """
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def warmup_cosine_rate(step: int, peak: float, warmup: int, n_steps: int, floor: float = 0.1) -> float:
    r"""A linear warm-up to ``peak``, then a half cosine down to ``floor * peak`` at the last step.

    .. math:: \eta(s) = \begin{cases} \eta_\text{max}\, s / w & s \le w \\
              \eta_\text{max} \left(f + (1 - f)\, \tfrac{1}{2} \left(1 + \cos \pi \tfrac{s - w}{S - w}\right)\right)
              & w < s \le S \end{cases}

    The schedule of most language models since GPT-3 (Brown et al. 2020; Hoffmann et al. 2022): unlike
    :func:`noam_rate`, it knows the run's length ``S`` and spends its last steps at small rates.

    Parameters
    ----------
    step : int
        The step, from 1.
    peak : float
        ``eta_max``, the rate at the end of the warm-up.
    warmup, n_steps : int
        ``w``, the steps of the warm-up; ``S``, the steps of the run (``w < S``).
    floor : float
        ``f``, the last rate as a fraction of ``peak``, in ``[0, 1]``.

    Returns
    -------
    float
        The learning rate at ``step``.

    Examples
    --------
    >>> [round(warmup_cosine_rate(s, 1e-3, 10, 110), 6) for s in (5, 10, 60, 110)]
    [0.0005, 0.001, 0.00055, 0.0001]
    >>> warmup_cosine_rate(1, 1e-3, 10, 10)
    Traceback (most recent call last):
    ...
    ValueError: warmup = 10 must be smaller than n_steps = 10
    """
    step, warmup, n_steps = (check_positive_int(v, name) for v, name in
                             ((step, "step"), (warmup, "warmup"), (n_steps, "n_steps")))
    if warmup >= n_steps:
        raise ValueError(f"warmup = {warmup} must be smaller than n_steps = {n_steps}")
    if not 0 <= floor <= 1:
        raise ValueError(f"floor must be in [0, 1], got {floor!r}")
    return warmup_cosine(step, _positive_number(peak, "peak"), warmup, n_steps, float(floor))


def warmup_cosine(step: int, peak: float, warmup: int, n_steps: int, floor: float) -> float:
    """Unchecked kernel of :func:`warmup_cosine_rate`.

    >>> warmup_cosine(3, 1.0, 2, 3, 0.0)
    0.0
    """
    if step <= warmup:
        return peak * step / warmup
    done = min(1.0, (step - warmup) / (n_steps - warmup))  # the fraction of the decay behind us
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * done)))


def decay_weights(params, amount: float):
    r"""Decoupled weight decay (Loshchilov and Hutter 2019): every matrix shrinks by the factor ``1 - amount``.

    .. math:: W \leftarrow (1 - \eta \lambda)\, W \qquad \text{for every parameter with two or more axes}

    After an Adam step this is AdamW: the decay does not pass through Adam's normalisation, so it pulls each
    weight matrix toward 0 at the same rate whatever its gradient's scale. Vectors (norm gains, biases) are
    left alone, as is usual.

    Parameters
    ----------
    params : NamedTuple
        The parameter tree.
    amount : float
        ``eta * lambda``: the learning rate times the decay, in ``[0, 1)``.

    Returns
    -------
    NamedTuple
        The decayed tree, each leaf in its own dtype.

    Examples
    --------
    >>> from attnbook.learning.models.recall import RecallParameters
    >>> p = decay_weights(RecallParameters(np.ones((2, 2)), np.ones(2), np.ones((2, 2)), np.ones(2)), 0.25)
    >>> p.w_q.tolist(), p.w_k.tolist()
    ([[0.75, 0.75], [0.75, 0.75]], [1.0, 1.0])
    """
    if not 0 <= amount < 1:
        raise ValueError(f"amount must be in [0, 1), got {amount!r}")
    return map_tree(lambda w: w * w.dtype.type(1 - amount) if np.ndim(w) >= 2 else w, params)


def clip_by_global_norm(grads, max_norm: float) -> tuple:
    r"""Scale a tree of gradients down to a global norm of at most ``max_norm``; returns ``(clipped, norm)``.

    .. math:: \lVert g \rVert = \sqrt{\textstyle\sum_\text{leaves} \sum g^2}, \qquad
              g \leftarrow g \cdot \min\left(1, \frac{c}{\lVert g \rVert}\right)

    Parameters
    ----------
    grads : NamedTuple, tuple, list or ndarray
        The gradients, a tree.
    max_norm : float
        The largest norm ``c`` let through (positive).

    Returns
    -------
    tuple
        ``(clipped, norm)``: the gradients, of the same structure (the same object when the norm is at
        most ``max_norm``), and their global norm before clipping, a float.

    Examples
    --------
    >>> clipped, norm = clip_by_global_norm((np.array([3.0]), np.array([4.0])), max_norm=1.0)
    >>> norm, [np.round(g, 4).tolist() for g in clipped]
    (5.0, [[0.6], [0.8]])
    """
    return clip_tree(grads, _positive_number(max_norm, "max_norm"))


def global_norm(tree) -> float:
    """Unchecked kernel: the Euclidean norm of all the leaves of ``tree`` together.

    >>> global_norm([np.array([3.0]), (np.array([4.0]),)])
    5.0
    """
    return math.sqrt(sum(float(np.sum(np.square(leaf))) for leaf in tree_leaves(tree)))


def clip_tree(grads, max_norm: float) -> tuple:
    """Unchecked kernel of :func:`clip_by_global_norm`.

    >>> clip_tree([np.array([0.5])], 1.0)[1]
    0.5
    """
    norm = global_norm(grads)
    if norm <= max_norm:
        return grads, norm
    scale = max_norm / norm
    return map_tree(lambda g: g * scale, grads), norm
