"""Sinusoidal positional encodings, and the linear map that shifts them by a fixed offset.

``PE[p, 2i] = sin(p / base^(2i/d_model))`` and ``PE[p, 2i+1] = cos(p / base^(2i/d_model))``
(Vaswani et al., 2017, with base 10000). Each pair of columns is a point on a circle turning at
its own frequency, so moving every position by ``k`` is the same rotation for every ``p``:
``PE[p + k] = PE[p] @ M_k`` with a block-diagonal ``M_k`` that does not depend on ``p``.

>>> import numpy as np
>>> pe = sinusoidal_encoding(6, 4)
>>> bool(np.allclose(pe[1:] , pe[:-1] @ sinusoidal_shift_matrix(1, 4)))
True
"""

from __future__ import annotations

import numpy as np

from .validation import check_positive_int

__all__ = ["sinusoidal_encoding", "sinusoidal_frequencies", "sinusoidal_shift_matrix"]


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
        Real number greater than 1; the slowest pair turns with ``base^(-(d_model - 2)/d_model)``.
        Default 10000, as in Vaswani et al. (2017).

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
    d_model : int
        Width of each encoding; positive and even.
    base : float, optional
        Real number greater than 1 setting the frequencies; default 10000.

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
    d_model : int
        Width of the encodings; positive and even.
    base : float, optional
        Real number greater than 1 setting the frequencies; default 10000.

    Returns
    -------
    ndarray
        ``(d_model, d_model)`` float64, block-diagonal with ``d_model / 2`` rotation blocks; it does not
        depend on the position ``p``.

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
