"""Positions: sinusoidal encodings and their shift matrices, rotary embeddings (RoPE), and ALiBi biases.

Sinusoidal encodings (:func:`sinusoidal_encoding`) shift by one matrix: ``PE[p + k] = PE[p] @ M_k``.

>>> import numpy as np
>>> pe = sinusoidal_encoding(6, 4)
>>> bool(np.allclose(pe[1:] , pe[:-1] @ sinusoidal_shift_matrix(1, 4)))
True

Rotary scores (:func:`apply_rotary`) depend on the offset alone; ALiBi (:func:`alibi_bias`) biases the scores.

>>> q = np.ones((5, 4))                                           # (n, d_head)
>>> s = rotary_scores(q, q)                                       # (n, n)
>>> bool(np.allclose(s[3, 1], s[4, 2]))                           # same offset, same score
True
>>> alibi_slopes(4).tolist()
[0.25, 0.0625, 0.015625, 0.00390625]
"""

from __future__ import annotations

import numpy as np

from .validation import as_float_array, check_min_ndim, check_positive_int

__all__ = [
    "ROTARY_SCALINGS",
    "alibi_bias",
    "alibi_slopes",
    "apply_rotary",
    "apply_rotary_halves",
    "check_rotary_positions",
    "rotary_decay_bound",
    "rotary_frequencies",
    "rotary_scores",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "sinusoidal_shift_matrix",
    "yarn_attention_factor",
]

ROTARY_SCALINGS = ("none", "interpolation", "ntk", "yarn")  # the context extensions of rotary_frequencies


def _check_model_width(d_model) -> int:
    d_model = check_positive_int(d_model, "d_model")
    if d_model % 2:
        raise ValueError(f"d_model = {d_model} is odd; sinusoidal encodings pair a sine with a cosine")
    return d_model


def _check_base(base) -> float:
    if isinstance(base, bool) or not isinstance(base, (int, float, np.integer, np.floating)):
        raise TypeError(f"base must be a real number, got {base!r}")
    if not np.isfinite(base) or base <= 1:
        raise ValueError(f"base must be a finite number greater than 1, got {base!r}")
    return float(base)


def sinusoidal_frequencies(d_model: int, base: float = 10000.0) -> np.ndarray:
    r"""Angular frequencies ``omega_i = base^(-2i/d_model)`` of the ``d_model / 2`` sine/cosine pairs.

    .. math:: \omega_i = \mathrm{base}^{-2i/d_\mathrm{model}}, \qquad i = 0, \dots, d_\mathrm{model}/2 - 1

    Parameters
    ----------
    d_model : int
        Width of the encoding; positive and even (one sine and one cosine per frequency).
    base : float, optional
        Real number greater than 1. Default 10000, as in Vaswani et al. (2017).

    Returns
    -------
    ndarray
        ``(d_model / 2,)`` float64 frequencies, from 1 down to nearly ``1 / base``.

    Examples
    --------
    >>> sinusoidal_frequencies(4, base=100.0).tolist()
    [1.0, 0.1]
    """
    d_model = _check_model_width(d_model)
    base = _check_base(base)
    return base ** (-np.arange(0, d_model, 2) / d_model)  # (d_model / 2,)


def sinusoidal_encoding(n_positions: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    r"""The ``(n_positions, d_model)`` matrix of sinusoidal encodings; row ``p`` encodes position ``p``.

    .. math:: \mathrm{PE}_{p, 2i} = \sin(p\,\omega_i), \qquad \mathrm{PE}_{p, 2i+1} = \cos(p\,\omega_i)

    with the frequencies :math:`\omega_i` of :func:`sinusoidal_frequencies`.

    Parameters
    ----------
    n_positions : int
        How many positions (rows) to encode, ``0, 1, ..., n_positions - 1``; positive.
    d_model, base
        As in :func:`sinusoidal_frequencies`.

    Returns
    -------
    ndarray
        ``(n_positions, d_model)`` float64; even columns are sines, odd columns cosines.

    Examples
    --------
    >>> np.round(sinusoidal_encoding(2, 2), 4).tolist()
    [[0.0, 1.0], [0.8415, 0.5403]]
    >>> sinusoidal_encoding(4, 5)
    Traceback (most recent call last):
    ...
    ValueError: d_model = 5 is odd; sinusoidal encodings pair a sine with a cosine
    """
    n_positions = check_positive_int(n_positions, "n_positions")
    omega = sinusoidal_frequencies(d_model, base)  # (d_model / 2,)
    angles = np.arange(n_positions)[:, None] * omega[None, :]  # (n_positions, d_model / 2)
    encoding = np.empty((n_positions, 2 * omega.size))  # (n_positions, d_model)
    encoding[:, 0::2] = np.sin(angles)
    encoding[:, 1::2] = np.cos(angles)
    return encoding


def sinusoidal_shift_matrix(offset: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    r"""The ``(d_model, d_model)`` matrix ``M_k`` with ``PE[p + k] = PE[p] @ M_k`` for every position p.

    Block i is the 2 x 2 rotation by ``k * omega_i`` acting on the (sin, cos) pair of frequency i:

    .. math:: \bigl(\sin((p+k)\omega_i),\ \cos((p+k)\omega_i)\bigr) = \bigl(\sin(p\omega_i),\ \cos(p\omega_i)\bigr)
              \begin{pmatrix} \cos k\omega_i & -\sin k\omega_i \\ \sin k\omega_i & \cos k\omega_i \end{pmatrix}

    Parameters
    ----------
    offset : int
        The shift ``k`` in positions; any integer (negative shifts move back).
    d_model, base
        As in :func:`sinusoidal_frequencies`.

    Returns
    -------
    ndarray
        ``(d_model, d_model)`` float64, block-diagonal with ``d_model / 2`` rotation blocks.

    Examples
    --------
    >>> print(np.round(sinusoidal_shift_matrix(1, 2), 4))
    [[ 0.5403 -0.8415]
     [ 0.8415  0.5403]]
    >>> bool(np.allclose(sinusoidal_shift_matrix(0, 8), np.eye(8)))
    True
    """
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
        raise TypeError(f"offset must be an integer number of positions, got {offset!r}")
    omega = sinusoidal_frequencies(d_model, base)  # (d_model / 2,)
    cos, sin = np.cos(offset * omega), np.sin(offset * omega)  # (d_model / 2,) each
    shift = np.zeros((2 * omega.size, 2 * omega.size))  # (d_model, d_model)
    pair = np.arange(omega.size) * 2  # (d_model / 2,): index of each sine column
    # row vector (s, c) @ [[cos, -sin], [sin, cos]] = (s cos + c sin, c cos - s sin) = (sin(a+b), cos(a+b))
    shift[pair, pair] = cos
    shift[pair, pair + 1] = -sin
    shift[pair + 1, pair] = sin
    shift[pair + 1, pair + 1] = cos
    return shift


# --- rotary position embeddings (RoPE) -------------------------------------------------------------


def _check_factor(factor) -> float:
    if isinstance(factor, bool) or not isinstance(factor, (int, float, np.integer, np.floating)):
        raise TypeError(f"factor must be a real number, got {factor!r}")
    if not np.isfinite(factor) or factor < 1:
        raise ValueError(f"factor must be a finite number of at least 1 (the trained length is stretched "
                         f"by it), got {factor!r}")
    return float(factor)


def rotary_frequencies(d_head: int, base: float = 10000.0, scaling: str = "none", factor: float = 1.0,
                       trained_length: int | None = None, alpha: float = 1.0, beta: float = 32.0) -> np.ndarray:
    r"""The ``d_head / 2`` rotation frequencies of RoPE, plain or stretched to a longer context.

    The plain frequencies are those of the sinusoidal encoding, :math:`\theta_i = b^{-2i/d}`. To use a
    model trained on ``trained_length`` = :math:`L` positions on :math:`sL` positions (``factor`` = :math:`s`):

    .. math::
        \text{interpolation (Chen et al., 2023):}\quad & \theta_i' = \theta_i / s \\
        \text{NTK-aware (bloc97, 2023):}\quad & \theta_i' = \bigl(b\, s^{d/(d-2)}\bigr)^{-2i/d} \\
        \text{YaRN (Peng et al., 2023):}\quad & \theta_i' = (1 - \gamma_i)\, \theta_i / s + \gamma_i\, \theta_i,
        \quad \gamma_i = \operatorname{clip}\Bigl(\frac{L\theta_i/(2\pi) - \alpha}{\beta - \alpha}, 0, 1\Bigr)

    YaRN's logit scale is :func:`yarn_attention_factor`.

    Parameters
    ----------
    d_head, base
        As ``d_model`` and ``base`` in :func:`sinusoidal_frequencies`: the width of each query and key.
    scaling : {"none", "interpolation", "ntk", "yarn"}, optional
        How to stretch the context; default "none" (then ``factor`` must be 1).
    factor : float, optional
        The stretch :math:`s \ge 1`: the new context length over the trained one.
    trained_length : int, optional
        :math:`L`, the context length of training; required by "yarn" only.
    alpha, beta : float, optional
        YaRN's ramp, in turns over :math:`L`; defaults 1 and 32 (the paper's values for LLaMA).

    Returns
    -------
    ndarray
        ``(d_head / 2,)`` float64 angular frequencies, radians per position.

    Examples
    --------
    >>> rotary_frequencies(4, base=100.0).tolist()
    [1.0, 0.1]
    >>> rotary_frequencies(4, base=100.0, scaling="interpolation", factor=4).tolist()
    [0.25, 0.025]
    >>> print(np.round(rotary_frequencies(4, base=100.0, scaling="ntk", factor=4), 6))
    [1.    0.025]
    >>> rotary_frequencies(4, scaling="yarn", factor=4)
    Traceback (most recent call last):
    ...
    ValueError: scaling 'yarn' needs trained_length, the context length the model was trained on
    """
    theta = sinusoidal_frequencies(d_head, base)  # (d_head / 2,)
    if scaling not in ROTARY_SCALINGS:
        raise ValueError(f"scaling must be one of {ROTARY_SCALINGS}, got {scaling!r}")
    factor = _check_factor(factor)
    if scaling == "none":
        if factor != 1.0:
            raise ValueError(f"scaling 'none' keeps the trained frequencies; factor must be 1, got {factor!r}")
        return theta
    if scaling == "interpolation":
        return theta / factor  # (d_head / 2,)
    if scaling == "ntk":
        if theta.size < 2:
            raise ValueError("scaling 'ntk' needs d_head >= 4: with one pair there is no base to raise")
        return ntk_frequencies(theta.size * 2, float(base), factor)
    if trained_length is None:
        raise ValueError("scaling 'yarn' needs trained_length, the context length the model was trained on")
    trained_length = check_positive_int(trained_length, "trained_length")
    if not 0 <= alpha < beta:
        raise ValueError(f"YaRN's ramp needs 0 <= alpha < beta, got alpha = {alpha!r}, beta = {beta!r}")
    return yarn_frequencies(theta, factor, trained_length, float(alpha), float(beta))


def ntk_frequencies(d_head: int, base: float, factor: float) -> np.ndarray:
    """Unchecked kernel: the frequencies with the base raised to ``base * factor^(d / (d - 2))``.

    >>> print(np.round(ntk_frequencies(4, 100.0, 4.0), 6))
    [1.    0.025]
    """
    new_base = base * factor ** (d_head / (d_head - 2))
    return new_base ** (-np.arange(0, d_head, 2) / d_head)  # (d_head / 2,)


def yarn_frequencies(theta: np.ndarray, factor: float, trained_length: int, alpha: float,
                     beta: float) -> np.ndarray:
    """Unchecked kernel: YaRN's ramp between interpolated (slow pairs) and unchanged (fast pairs) frequencies.

    >>> yarn_frequencies(np.array([1.0, 0.001]), 4.0, 256, 1.0, 32.0).tolist()  # 40.7 and 0.04 turns
    [1.0, 0.00025]
    """
    turns = trained_length * theta / (2 * np.pi)  # (d_head / 2,): turns of each pair over L positions
    gamma = np.clip((turns - alpha) / (beta - alpha), 0.0, 1.0)  # (d_head / 2,): 0 interpolate, 1 keep
    return (1 - gamma) * theta / factor + gamma * theta  # (d_head / 2,)


def yarn_attention_factor(factor: float) -> float:
    r"""YaRN's multiplier of the queries and keys, :math:`\sqrt{1/t} = 0.1 \ln s + 1` (Peng et al., 2023).

    Every logit is multiplied by :math:`1/t = (0.1 \ln s + 1)^2`, a slightly sharper softmax.

    Parameters
    ----------
    factor : float
        As in :func:`rotary_frequencies`.

    Returns
    -------
    float
        :math:`0.1 \ln s + 1`; 1 when :math:`s = 1`.

    Examples
    --------
    >>> round(yarn_attention_factor(4.0), 6)
    1.138629
    """
    return 0.1 * float(np.log(_check_factor(factor))) + 1.0


def _checked_positions(positions, n: int, name: str) -> np.ndarray:
    if positions is None:
        return np.arange(n, dtype=np.float64)  # (n,)
    positions = as_float_array(positions, name)  # (n,)
    if positions.shape != (n,):
        raise ValueError(f"{name} has shape {positions.shape}; expected one position per row, ({n},)")
    return positions


def _checked_frequencies(frequencies, d_head: int) -> np.ndarray:
    if d_head % 2:
        raise ValueError(f"the last dimension is {d_head}, which is odd; rotary embeddings turn pairs of coordinates")
    if frequencies is None:
        return sinusoidal_frequencies(d_head)  # (d_head / 2,)
    frequencies = as_float_array(frequencies, "frequencies")  # (d_head / 2,)
    if frequencies.shape != (d_head // 2,):
        raise ValueError(f"frequencies has shape {frequencies.shape}; expected one per pair of coordinates, "
                         f"({d_head // 2},)")
    return frequencies


def check_rotary_positions(positions, frequencies, n: int, d_rotary: int, start: int = 0) -> tuple:
    """The positions ``(n,)`` of ``n`` tokens and the frequencies ``(d_rotary / 2,)`` of a layer's rotary part.

    Parameters
    ----------
    positions : array_like or None
        ``(n,)`` the tokens' positions, or None for ``start, .., start + n - 1``.
    frequencies : array_like or None
        ``(d_rotary / 2,)`` the angular frequencies, or None for ``rotary_frequencies(d_rotary)``.
    n, d_rotary : int
        The number of tokens and the (even) width that turns; 0 turns nothing (frequencies None).
    start : int, optional
        The first default position (the tokens already cached); default 0.

    Returns
    -------
    tuple
        ``(positions, frequencies)`` checked.

    Examples
    --------
    >>> p, f = check_rotary_positions(None, None, 3, 4, start=2)
    >>> p.tolist(), f.tolist()
    ([2.0, 3.0, 4.0], [1.0, 0.01])
    >>> check_rotary_positions([0.0, 1.0], None, 3, 4)
    Traceback (most recent call last):
    ...
    ValueError: positions has shape (2,); expected one position per row, (3,)
    """
    if positions is None:
        positions = np.arange(start, start + n, dtype=np.float64)  # (n,)
    positions = _checked_positions(positions, n, "positions")  # (n,)
    if d_rotary == 0:
        return positions, None
    return positions, _checked_frequencies(frequencies, d_rotary)  # (n,), (d_rotary / 2,)


def apply_rotary(x, positions=None, frequencies=None) -> np.ndarray:
    r"""Rotary position embedding: turn pair :math:`i` of the row at position :math:`p` by :math:`p\,\theta_i`.

    .. math::
        \begin{pmatrix} x'_{2i} \\ x'_{2i+1} \end{pmatrix} =
        \begin{pmatrix} \cos p\theta_i & -\sin p\theta_i \\ \sin p\theta_i & \cos p\theta_i \end{pmatrix}
        \begin{pmatrix} x_{2i} \\ x_{2i+1} \end{pmatrix},
        \qquad\text{in complex numbers}\quad x'_{2i} + \mathrm{i}\,x'_{2i+1} = e^{\mathrm{i} p\theta_i}(x_{2i} + \mathrm{i}\,x_{2i+1})

    the convention of Su et al. (2021), pairs interleaved. In the book's row-vector notation this is
    ``x @ sinusoidal_shift_matrix(-p, d)``, i.e. :math:`x R_p^\top`.

    Parameters
    ----------
    x : array_like
        ``(..., n, d_head)`` queries or keys, one row per position; ``d_head`` even.
    positions : array_like, optional
        ``(n,)`` the position of each row (real numbers allowed); default ``0, 1, ..., n - 1``.
    frequencies : array_like, optional
        ``(d_head / 2,)`` the angular frequencies; default ``rotary_frequencies(d_head)``.

    Returns
    -------
    ndarray
        ``(..., n, d_head)``, each pair turned; every row keeps its length.

    Examples
    --------
    >>> print(np.round(apply_rotary(np.array([[1.0, 0.0], [1.0, 0.0]])), 4))   # positions 0 and 1
    [[1.     0.    ]
     [0.5403 0.8415]]
    """
    x = as_float_array(x, "x")  # (..., n, d_head)
    check_min_ndim(x, "x", 2, "(..., n, d_head)")
    theta = _checked_frequencies(frequencies, x.shape[-1])  # (d_head / 2,)
    p = _checked_positions(positions, x.shape[-2], "positions")  # (n,)
    return rotate(x, p[:, None] * theta[None, :])


def apply_rotary_halves(x, positions=None, frequencies=None) -> np.ndarray:
    r"""Rotary embedding in the half-split layout: pair :math:`i` is ``(x[i], x[i + d/2])``, not ``(x[2i], x[2i+1])``.

    .. math:: x'_i + \mathrm{i}\, x'_{i + d/2} = e^{\mathrm{i} p\theta_i} (x_i + \mathrm{i}\, x_{i + d/2})

    The layout of Hugging Face's ``rotate_half`` (Llama, Qwen, gpt-oss). It is :func:`apply_rotary` on the
    coordinates reordered to interleaved pairs, then put back; a query and a key turned in the same layout
    have the same dot product in either.

    Parameters
    ----------
    x, positions, frequencies
        As in :func:`apply_rotary`.

    Returns
    -------
    ndarray
        ``(..., n, d_head)``, each pair turned.

    Examples
    --------
    >>> print(np.round(apply_rotary_halves(np.array([[1.0, 0.0], [1.0, 0.0]])), 4))   # d = 2: one pair either way
    [[1.     0.    ]
     [0.5403 0.8415]]
    >>> x = np.arange(4.0)[None, :]
    >>> apply_rotary_halves(x, positions=[0.0]).tolist()                                # position 0 turns nothing
    [[0.0, 1.0, 2.0, 3.0]]
    """
    x = as_float_array(x, "x")  # (..., n, d_head)
    check_min_ndim(x, "x", 2, "(..., n, d_head)")
    d = x.shape[-1]
    theta = _checked_frequencies(frequencies, d)  # (d_head / 2,)
    p = _checked_positions(positions, x.shape[-2], "positions")  # (n,)
    order = np.stack([np.arange(d // 2), np.arange(d // 2) + d // 2], axis=-1).reshape(d)  # (d_head,): 0, d/2, 1, ...
    turned = rotate(x[..., order], p[:, None] * theta[None, :])  # (..., n, d_head): interleaved pairs turned
    return turned[..., np.argsort(order)]  # (..., n, d_head): back to halves


def rotate(x: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """Unchecked kernel: turn the pairs ``(x[..., 2i], x[..., 2i+1])`` of each row by ``angles[row, i]``.

    >>> print(rotate(np.array([[0.0, 1.0]]), np.array([[np.pi / 2]])).round(4))
    [[-1.  0.]]
    """
    cos, sin = np.cos(angles), np.sin(angles)  # (n, d_head / 2) each
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., n, d_head / 2) each
    out = np.empty(x.shape, dtype=np.result_type(x, np.float64))  # (..., n, d_head)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def rotary_scores(q, k, q_positions=None, k_positions=None, frequencies=None) -> np.ndarray:
    r"""Dot products of rotated queries and keys: :math:`s_{mn} = \tilde q_m \cdot \tilde k_n`, unscaled.

    .. math:: s_{mn} = (q_m R_m^\top) \cdot (k_n R_n^\top) = q_m\, R_{n - m}\, k_n^\top
              = \operatorname{Re} \sum_i (q_{m,2i} + \mathrm{i} q_{m,2i+1})\overline{(k_{n,2i} + \mathrm{i} k_{n,2i+1})}\, e^{\mathrm{i}(m - n)\theta_i}

    so a score depends on the positions only through the offset :math:`m - n` (Su et al., 2021).
    Divide by :math:`\sqrt{d}` (and mask) to use them in attention.

    Parameters
    ----------
    q, k : array_like
        ``(..., n_q, d_head)`` queries and ``(..., n_k, d_head)`` keys.
    q_positions, k_positions, frequencies : array_like, optional
        As ``positions`` and ``frequencies`` in :func:`apply_rotary`.

    Returns
    -------
    ndarray
        ``(..., n_q, n_k)`` scores.

    Examples
    --------
    >>> q = np.array([[1.0, 0.0, 1.0, 0.0]] * 6)                     # (6, 4): the same query everywhere
    >>> s = rotary_scores(q, q)                                        # (6, 6)
    >>> bool(np.allclose(np.diagonal(s, -2), s[2, 0]))               # constant along each diagonal
    True
    """
    q = as_float_array(q, "q")  # (..., n_q, d_head)
    k = as_float_array(k, "k")  # (..., n_k, d_head)
    check_min_ndim(q, "q", 2, "(..., n_q, d_head)")
    check_min_ndim(k, "k", 2, "(..., n_k, d_head)")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q has shape {q.shape} but k has shape {k.shape}; the last dimensions (d_head) must match")
    theta = _checked_frequencies(frequencies, q.shape[-1])  # (d_head / 2,)
    p_q = _checked_positions(q_positions, q.shape[-2], "q_positions")  # (n_q,)
    p_k = _checked_positions(k_positions, k.shape[-2], "k_positions")  # (n_k,)
    q_rot = rotate(q, p_q[:, None] * theta[None, :])  # (..., n_q, d_head)
    k_rot = rotate(k, p_k[:, None] * theta[None, :])  # (..., n_k, d_head)
    return q_rot @ np.swapaxes(k_rot, -1, -2)  # (..., n_q, n_k)


def rotary_decay_bound(offsets, d_head: int, base: float = 10000.0) -> np.ndarray:
    r"""Su et al.'s relative upper bound of a rotary score, as a function of the offset.

    .. math:: B(\Delta) = \frac{1}{d/2} \sum_{j=1}^{d/2} |S_j(\Delta)|, \qquad
              S_j(\Delta) = \sum_{i=0}^{j-1} e^{\mathrm{i}\Delta\theta_i}

    For every query and key, :math:`|q_m R_{n-m} k_n^\top| \le \max_i |h_{i+1} - h_i| \cdot (d/2)\, B(m - n)`,
    with :math:`h_i` the complex product of pair :math:`i` of :math:`q` and of :math:`\bar k` and
    :math:`h_{d/2} = 0`.

    Parameters
    ----------
    offsets : array_like
        Offsets :math:`\Delta = m - n`, any shape; real numbers.
    d_head, base
        As in :func:`rotary_frequencies`.

    Returns
    -------
    ndarray
        :math:`B(\Delta)`, the shape of ``offsets``; at offset 0 it is :math:`(d/2 + 1)/2`, its largest value.

    Examples
    --------
    >>> rotary_decay_bound(0, 8).tolist()                     # S_j(0) = j: (1 + 2 + 3 + 4) / 4
    2.5
    >>> b = rotary_decay_bound([0, 10, 100], 128)
    >>> bool(b[0] > b[1] > b[2])
    True
    """
    delta = as_float_array(offsets, "offsets")  # (...)
    theta = sinusoidal_frequencies(d_head, base)  # (d/2,)
    phases = np.exp(1j * delta[..., None] * theta)  # (..., d/2)
    partial = np.cumsum(phases, axis=-1)  # (..., d/2): S_1 .. S_{d/2}
    return np.abs(partial).mean(axis=-1)  # (...)


# --- ALiBi ---------------------------------------------------------------------------------------------


def alibi_slopes(n_heads: int) -> np.ndarray:
    r"""ALiBi's head slopes (Press et al., 2022): a geometric sequence that starts and shrinks by :math:`2^{-8/n}`.

    .. math:: m_h = 2^{-8h/n}, \qquad h = 1, \dots, n \quad (n \text{ a power of two})

    For other :math:`n` the paper's code takes the :math:`n'` slopes of the largest power of two
    :math:`n' < n` and adds the first, third, fifth, ... slope of :math:`2n'` heads until it has :math:`n`.

    Parameters
    ----------
    n_heads : int
        Number of heads; positive.

    Returns
    -------
    ndarray
        ``(n_heads,)`` float64 slopes in ``(0, 1)``.

    Examples
    --------
    >>> (1 / alibi_slopes(8)).tolist()
    [2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0]
    >>> print(np.round(alibi_slopes(3), 4))
    [0.0625 0.0039 0.25  ]
    """
    n_heads = check_positive_int(n_heads, "n_heads")
    return slopes(n_heads)


def slopes(n_heads: int) -> np.ndarray:
    """Unchecked kernel of :func:`alibi_slopes`.

    >>> slopes(2).tolist()
    [0.0625, 0.00390625]
    """
    power = 1 << (n_heads.bit_length() - 1)  # (): the largest power of two <= n_heads
    geometric = 2.0 ** (-8.0 * np.arange(1, power + 1) / power)  # (power,)
    if power == n_heads:
        return geometric
    extra = 2.0 ** (-8.0 * np.arange(1, 2 * power + 1) / (2 * power))[0::2]  # (power,): odd-numbered of 2 power
    return np.concatenate([geometric, extra[: n_heads - power]])  # (n_heads,)


def alibi_bias(n_positions: int, slopes_per_head) -> np.ndarray:
    r"""ALiBi's additive score bias: :math:`-m_h\,|i - j|` for query :math:`i`, key :math:`j` and head :math:`h`.

    .. math:: \mathrm{score}_{h,ij} = \frac{q_i \cdot k_j}{\sqrt{d}} - m_h\, |i - j|

    Under a causal mask only :math:`j \le i` is used, as in Press et al. (2022).

    Parameters
    ----------
    n_positions : int
        Sequence length ``n``; positive.
    slopes_per_head : array_like
        ``(heads,)`` the slopes, e.g. :func:`alibi_slopes`; finite and non-negative.

    Returns
    -------
    ndarray
        ``(heads, n, n)`` float64 biases, 0 on the diagonal.

    Examples
    --------
    >>> print(alibi_bias(3, [0.5])[0])
    [[ 0.  -0.5 -1. ]
     [-0.5  0.  -0.5]
     [-1.  -0.5  0. ]]
    """
    n_positions = check_positive_int(n_positions, "n_positions")
    m = as_float_array(slopes_per_head, "slopes_per_head")  # (heads,)
    if m.ndim != 1 or np.any(m < 0):
        raise ValueError(f"slopes_per_head must be a 1-D array of non-negative slopes, got shape {m.shape}")
    positions = np.arange(n_positions)  # (n,)
    distance = np.abs(positions[:, None] - positions[None, :])  # (n, n)
    return m[:, None, None] * -distance[None, :, :]  # (heads, n, n): integer -0 is 0, no -0.0
