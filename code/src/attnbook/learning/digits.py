"""Scikit-learn's 8 x 8 handwritten digits, shipped in the package's ``data/``: the images, a stratified split,
and their patches, for the Vision Transformer (:mod:`attnbook.learning.models.vit`).

``python -m tools.make_digits`` wrote ``data/digits.npz`` from scikit-learn's copy of the UCI data (E. Alpaydin
and C. Kaynak, 1998; CC BY 4.0); reading it needs no scikit-learn.

>>> images, labels = load_digits()
>>> images.shape, int(images.max())
((1797, 8, 8), 16)
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import NamedTuple

import numpy as np

from ..validation import as_float_array, check_positive_int, check_seed

__all__ = ["DIGITS_FILE", "GREY_LEVELS", "DigitsSplit", "check_digits", "image_patches", "load_digits",
           "load_digits_split"]

DIGITS_FILE = "digits.npz"
GREY_LEVELS = 16  # the digits' pixels are counts 0 .. 16 of a 4 x 4 block


class DigitsSplit(NamedTuple):
    """The digits, split into a training and a test set.

    Attributes
    ----------
    train_images, train_labels, test_images, test_labels : ndarray
        ``(n, 8, 8)`` images and ``(n,)`` labels, as :func:`load_digits` returns them.

    Examples
    --------
    >>> split = load_digits_split()
    >>> split.train_images.shape, split.test_images.shape
    ((1438, 8, 8), (359, 8, 8))
    """

    train_images: np.ndarray  # (n_train, 8, 8)
    train_labels: np.ndarray  # (n_train,)
    test_images: np.ndarray  # (n_test, 8, 8)
    test_labels: np.ndarray  # (n_test,)


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 handwritten digits shipped with the package, in scikit-learn's order.

    The UCI "Optical Recognition of Handwritten Digits" test set (https://doi.org/10.24432/C50P49, CC BY 4.0)
    as ``sklearn.datasets.load_digits`` bundles it.

    Returns
    -------
    images : ndarray
        ``(1797, 8, 8)`` uint8, grey levels ``0 .. 16``.
    labels : ndarray
        ``(1797,)`` uint8, the digits ``0 .. 9``.

    Examples
    --------
    >>> images, labels = load_digits()
    >>> images.shape, int(images.max()), labels[:10].tolist()
    ((1797, 8, 8), 16, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    """
    with resources.files("attnbook").joinpath("data", DIGITS_FILE).open("rb") as file:
        with np.load(file) as archive:
            return archive["images"], archive["labels"]


def load_digits_split(test_fraction: float = 0.2, seed: int | np.random.Generator = 0) -> DigitsSplit:
    r"""The digits split at random into training and test sets, stratified by digit.

    .. math:: n_\text{test}(c) = \operatorname{round}(f \, n(c)) \quad \text{for each digit } c

    Parameters
    ----------
    test_fraction : float, optional
        :math:`f`, in ``(0, 1)``; default 0.2.
    seed : int or numpy Generator, optional
        The random source of the shuffles.

    Returns
    -------
    DigitsSplit
        Training and test images ``(n, 8, 8)`` and labels ``(n,)``.

    Examples
    --------
    >>> split = load_digits_split(test_fraction=0.25, seed=1)
    >>> np.bincount(split.test_labels).tolist()
    [44, 46, 44, 46, 45, 46, 45, 45, 44, 45]
    """
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float)) or not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be a number in (0, 1), got {test_fraction!r}")
    rng = check_seed(seed)
    images, labels = load_digits()  # (n, 8, 8), (n,)
    test = np.zeros(labels.shape, dtype=bool)  # (n,)
    for digit in range(10):
        members = rng.permutation(np.flatnonzero(labels == digit))  # (n(c),)
        test[members[: round(test_fraction * members.size)]] = True
    train_order = rng.permutation(np.flatnonzero(~test))  # (n_train,)
    test_order = rng.permutation(np.flatnonzero(test))  # (n_test,)
    return DigitsSplit(images[train_order], labels[train_order], images[test_order], labels[test_order])


def image_patches(images, patch: int) -> np.ndarray:
    r"""Cut square images into non-overlapping ``patch x patch`` patches, row-major, each flattened row-major.

    .. math:: P_{b,\, r (W/p) + c} = \operatorname{vec}\bigl(X_b[\, r p : (r+1) p,\ c p : (c+1) p \,]\bigr)

    The order of :func:`attnbook.beyond.modalities.image_to_patches`, for a batch of grey images.

    Parameters
    ----------
    images : array_like
        ``(n, H, W)`` images; ``patch`` divides ``H`` and ``W``.
    patch : int
        :math:`p`, the side of a patch.

    Returns
    -------
    ndarray
        ``(n, (H / p) (W / p), p * p)`` float64: the tokens of a Vision Transformer.

    Examples
    --------
    >>> image = np.arange(16).reshape(1, 4, 4)
    >>> image_patches(image, 2)[0].astype(int).tolist()
    [[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]]
    """
    images = as_float_array(images, "images")  # (n, H, W)
    patch = check_positive_int(patch, "patch")
    if images.ndim != 3:
        raise ValueError(f"images must be (n, H, W), got shape {images.shape}")
    n, height, width = images.shape
    if height % patch or width % patch:
        raise ValueError(f"patch = {patch} must divide the image's height and width, got {height} x {width}")
    grid = images.reshape(n, height // patch, patch, width // patch, patch)  # (n, H/p, p, W/p, p)
    return grid.transpose(0, 1, 3, 2, 4).reshape(n, -1, patch * patch)  # (n, (H/p)(W/p), p*p)


def shifted(images: np.ndarray, rng: np.random.Generator, shift: int) -> np.ndarray:
    """Unchecked kernel: each image translated by a random whole number of pixels in ``-shift .. shift`` per axis.

    Pixels that leave the frame are dropped; zeros (blank paper) fill in.

    >>> out = shifted(np.ones((2, 8, 8)), np.random.default_rng(0), 1)
    >>> out.shape, float(out.max())
    ((2, 8, 8), 1.0)
    """
    if shift == 0:
        return images
    n, side, _ = images.shape
    padded = np.pad(images, ((0, 0), (shift, shift), (shift, shift)))  # (n, H + 2s, W + 2s)
    rows, cols = rng.integers(0, 2 * shift + 1, size=(2, n))  # (n,), (n,): the window's corner
    index = np.arange(side)  # (H,)
    r = (rows[:, None] + index[None, :])[:, :, None]  # (n, H, 1)
    c = (cols[:, None] + index[None, :])[:, None, :]  # (n, 1, W)
    return padded[np.arange(n)[:, None, None], r, c]  # (n, H, W)


@lru_cache(maxsize=4)
def _training_set(test_fraction: float, split_seed: int) -> tuple:
    split = load_digits_split(test_fraction, split_seed)
    return split.train_images.astype(np.float64), split.train_labels.astype(np.int64)  # (n_train, H, W), (n_train,)


def draw_digits(rng: np.random.Generator, batch_size: int, shift: int, test_fraction: float, split_seed: int) -> tuple:
    """Unchecked kernel: a training batch, ``batch_size`` digits of the split's training set, each :func:`shifted`.

    >>> images, labels = draw_digits(np.random.default_rng(0), 3, 1, 0.2, 0)
    >>> images.shape, labels.dtype
    ((3, 8, 8), dtype('int64'))
    """
    images, labels = _training_set(test_fraction, split_seed)  # (n_train, H, W), (n_train,)
    chosen = rng.integers(0, labels.size, size=batch_size)  # (B,)
    return shifted(images[chosen], rng, shift), labels[chosen]  # (B, H, W), (B,)


def check_digits(images, labels=None, side: int = 8, n_classes: int = 10, name: str = "images") -> tuple:
    """Images of grey levels ``0 .. 16`` and (optionally) one integer label each, or an error saying what is wrong.

    Parameters
    ----------
    images : array_like
        ``(n, side, side)`` grey levels, as :func:`load_digits_split` gives them.
    labels : array_like of int, optional
        ``(n,)`` classes ``0 .. n_classes - 1``.
    side, n_classes : int, optional
        The images' side and the number of classes.
    name : str, optional
        What the errors call the images.

    Returns
    -------
    tuple
        ``(pixels, labels)``: float64 ``(n, side, side)`` and int64 ``(n,)`` (None without ``labels``).

    Examples
    --------
    >>> check_digits(np.zeros((2, 8, 8)), [1, 10])
    Traceback (most recent call last):
    ...
    ValueError: labels must lie in 0 .. 9
    """
    pixels = as_float_array(images, name)  # (n, H, W)
    if pixels.ndim != 3 or pixels.shape[1:] != (side, side):
        raise ValueError(f"{name} has shape {pixels.shape}; expected (n, {side}, {side}) grey levels 0 .. 16")
    if pixels.size and (pixels.min() < 0 or pixels.max() > GREY_LEVELS):
        raise ValueError(f"{name} must hold grey levels 0 .. 16 (as load_digits_split gives them), "
                         f"got values in [{pixels.min():g}, {pixels.max():g}]")
    if labels is None:
        return pixels, None
    labels, n = np.asarray(labels), pixels.shape[0]  # (n,)
    if labels.shape != (n,) or labels.dtype.kind not in "iu":
        raise ValueError(f"labels must be ({n},) integers, one per image, got shape {labels.shape} and dtype "
                         f"{labels.dtype}")
    if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        raise ValueError(f"labels must lie in 0 .. {n_classes - 1}")
    return pixels, labels.astype(np.int64)
