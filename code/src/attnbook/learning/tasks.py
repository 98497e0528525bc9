"""Data for attention that learns: three tasks whose answers are known, so what a model learns can be checked.

* **Reversal** (sequence to sequence): the target is the source read backwards. Its alignment is known
  exactly: output position ``i`` reads source position ``len - 1 - i``, so a trained encoder-decoder's
  cross-attention map can be compared with :func:`reversal_alignment`.
* **Repeated random tokens** (decoder only): random tokens, then the same tokens again. Only copying
  predicts the second half, which is what an *induction head* learns (Olsson et al., 2022).
* **Handwritten digits** (vision): scikit-learn's 8 x 8 digits, shipped inside the package as
  ``attnbook/data/digits.npz`` (written by ``python -m tools.make_digits``), and cut into patches.

Token conventions of the sequence tasks: ``PAD = 0``, ``BOS = 1``, ``EOS = 2``; the symbols are
``FIRST_SYMBOL = 3`` onwards, so a task with ``n_symbols`` symbols has ``n_symbols + 3`` tokens.

>>> batch = reversal_batch(1, n_symbols=5, min_length=4, max_length=4, seed=0)
>>> batch.source.tolist(), batch.target_out.tolist()
([[7, 6, 5, 4]], [[4, 5, 6, 7, 2]])
"""

from __future__ import annotations

from importlib import resources
from typing import NamedTuple

import numpy as np

from ..validation import as_float_array, check_positive_int, check_seed

__all__ = [
    "BOS",
    "DIGITS_FILE",
    "EOS",
    "FIRST_SYMBOL",
    "PAD",
    "DigitsSplit",
    "InContextLoss",
    "Seq2SeqBatch",
    "alignment_agreement",
    "image_patches",
    "in_context_loss",
    "load_digits",
    "load_digits_split",
    "repeated_sequence_batch",
    "reversal_alignment",
    "reversal_batch",
]

PAD, BOS, EOS = 0, 1, 2
FIRST_SYMBOL = 3
DIGITS_FILE = "digits.npz"


# --- reversal: sequence to sequence with a known alignment ------------------------------------------------


class Seq2SeqBatch(NamedTuple):
    """A padded batch of (source, target) pairs for an encoder-decoder, with teacher forcing.

    Attributes
    ----------
    source : ndarray
        ``(batch, n_src)`` int64 source tokens, PAD after each sequence's end.
    target_in : ndarray
        ``(batch, n_tgt)`` the decoder's input: BOS, then the target, then PAD (``n_tgt = n_src + 1``).
    target_out : ndarray
        ``(batch, n_tgt)`` what the decoder must predict: the target, then EOS, then PAD.
    source_mask : ndarray
        ``(batch, n_src)`` bool, True on real source tokens.
    target_mask : ndarray
        ``(batch, n_tgt)`` bool, True on real target positions (those whose loss counts).

    Examples
    --------
    >>> b = reversal_batch(1, n_symbols=4, min_length=3, max_length=3, seed=0)
    >>> b.source.tolist(), b.target_in.tolist(), b.target_out.tolist()
    ([[6, 5, 5]], [[1, 5, 5, 6]], [[5, 5, 6, 2]])
    """

    source: np.ndarray  # (batch, n_src)
    target_in: np.ndarray  # (batch, n_tgt): BOS + target + PAD
    target_out: np.ndarray  # (batch, n_tgt): target + EOS + PAD
    source_mask: np.ndarray  # (batch, n_src): True on real tokens
    target_mask: np.ndarray  # (batch, n_tgt): True on real positions


def reversal_batch(n_sequences: int, n_symbols: int, min_length: int, max_length: int,
                   seed: int | np.random.Generator = 0) -> Seq2SeqBatch:
    r"""Random symbol strings of random length, each with its reversal as the target.

    .. math:: y_i = x_{\ell - 1 - i}, \qquad i = 0, \dots, \ell - 1

    Each length :math:`\ell` is uniform in ``[min_length, max_length]``, each symbol uniform in
    ``FIRST_SYMBOL .. FIRST_SYMBOL + n_symbols - 1``. Arrays are padded with PAD to the batch's longest
    sequence. The alignment is known: the decoder's position ``i`` (input ``target_in[i]``, prediction
    ``target_out[i]``) reads source position :math:`\ell - 1 - i`; its last real position predicts EOS
    and has no source position (see :func:`reversal_alignment`).

    Parameters
    ----------
    n_sequences : int
        Batch size.
    n_symbols : int
        Number of distinct symbols.
    min_length, max_length : int
        The shortest and longest source, ``1 <= min_length <= max_length``.
    seed : int or numpy Generator, optional
        The random source.

    Returns
    -------
    Seq2SeqBatch
        Source ``(batch, n_src)``, target_in and target_out ``(batch, n_src + 1)``, and their masks,
        where ``n_src`` is the longest length drawn.

    Examples
    --------
    >>> b = reversal_batch(3, n_symbols=6, min_length=1, max_length=4, seed=1)
    >>> b.source.shape[1] + 1 == b.target_in.shape[1], b.source_mask.sum(axis=1).tolist()
    (True, [2, 3, 4])
    >>> bool(np.all((b.target_out == EOS).sum(axis=1) == 1))
    True
    >>> reversal_batch(1, n_symbols=3, min_length=4, max_length=2)
    Traceback (most recent call last):
    ...
    ValueError: min_length = 4 is more than max_length = 2
    """
    n_sequences = check_positive_int(n_sequences, "n_sequences")
    n_symbols = check_positive_int(n_symbols, "n_symbols")
    min_length = check_positive_int(min_length, "min_length")
    max_length = check_positive_int(max_length, "max_length")
    if min_length > max_length:
        raise ValueError(f"min_length = {min_length} is more than max_length = {max_length}")
    return draw_reversal(check_seed(seed), n_sequences, n_symbols, min_length, max_length)


def draw_reversal(rng: np.random.Generator, n_sequences: int, n_symbols: int, min_length: int,
                  max_length: int) -> Seq2SeqBatch:
    """Unchecked kernel of :func:`reversal_batch`.

    >>> draw_reversal(np.random.default_rng(0), 2, 3, 2, 2).target_out.shape
    (2, 3)
    """
    lengths = rng.integers(min_length, max_length + 1, size=n_sequences)  # (batch,)
    n_src = int(lengths.max())
    symbols = rng.integers(FIRST_SYMBOL, FIRST_SYMBOL + n_symbols, size=(n_sequences, n_src))  # (batch, n_src)
    positions = np.arange(n_src)  # (n_src,)
    source_mask = positions < lengths[:, None]  # (batch, n_src)
    source = np.where(source_mask, symbols, PAD)  # (batch, n_src)
    backwards = np.clip(lengths[:, None] - 1 - positions, 0, None)  # (batch, n_src): l - 1 - i
    reversed_ = np.where(source_mask, np.take_along_axis(source, backwards, axis=1), PAD)  # (batch, n_src)
    padded = np.concatenate([reversed_, np.full((n_sequences, 1), PAD)], axis=1)  # (batch, n_src + 1)
    target_out = padded.copy()  # (batch, n_src + 1)
    target_out[np.arange(n_sequences), lengths] = EOS
    target_in = np.concatenate([np.full((n_sequences, 1), BOS), reversed_], axis=1)  # (batch, n_src + 1)
    target_mask = np.arange(n_src + 1) <= lengths[:, None]  # (batch, n_src + 1)
    return Seq2SeqBatch(source.astype(np.int64), target_in.astype(np.int64), target_out.astype(np.int64),
                        source_mask, target_mask)


def reversal_alignment(lengths, n_source: int | None = None, n_target: int | None = None) -> np.ndarray:
    r"""The cross-attention map that solves reversal: decoder position ``i`` on source position ``len - 1 - i``.

    .. math:: A_{i j} = [\, j = \ell - 1 - i \,], \qquad 0 \le i < \ell

    Rows of the EOS prediction (``i = len``) and of padding are zero: no source position holds their answer.

    Parameters
    ----------
    lengths : array_like of int
        ``(batch,)`` source lengths, e.g. ``batch.source_mask.sum(axis=1)``.
    n_source : int, optional
        Columns; default ``max(lengths)`` (the batch's ``n_src``).
    n_target : int, optional
        Rows; default ``max(lengths) + 1`` (the batch's ``n_tgt``).

    Returns
    -------
    ndarray
        ``(batch, n_target, n_source)`` float, a one-hot row for each real output symbol.

    Examples
    --------
    >>> reversal_alignment([3, 2])[1].astype(int).tolist()
    [[0, 1, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0]]
    """
    lengths = np.asarray(lengths)  # (batch,)
    if lengths.ndim != 1 or lengths.size == 0 or lengths.dtype.kind not in "iu" or np.any(lengths < 1):
        raise ValueError(f"lengths must be a non-empty 1-D array of positive integers, got {lengths!r}")
    longest = int(lengths.max())
    n_source = longest if n_source is None else check_positive_int(n_source, "n_source", longest)
    n_target = longest + 1 if n_target is None else check_positive_int(n_target, "n_target")
    rows = np.arange(n_target)[:, None]  # (n_target, 1)
    columns = np.arange(n_source)[None, :]  # (1, n_source)
    ell = lengths[:, None, None]  # (batch, 1, 1)
    return ((columns == ell - 1 - rows) & (rows < ell)).astype(np.float64)  # (batch, n_target, n_source)


def alignment_agreement(weights, lengths) -> float:
    r"""Share of real output symbols whose largest cross-attention weight falls on the reversal's source position.

    .. math:: \frac{1}{\sum_b \ell_b} \sum_b \sum_{i < \ell_b} [\, \arg\max_j w_{b i j} = \ell_b - 1 - i \,]

    Parameters
    ----------
    weights : array_like
        ``(batch, n_tgt, n_src)`` cross-attention weights (average the heads first, or pass one head).
    lengths : array_like of int
        ``(batch,)`` source lengths.

    Returns
    -------
    float
        The agreement, in ``[0, 1]``; 1 for :func:`reversal_alignment` itself.

    Examples
    --------
    >>> alignment_agreement(reversal_alignment([3, 1]), [3, 1])
    1.0
    >>> alignment_agreement(np.full((1, 3, 2), 0.5), [2])
    0.5
    """
    weights = as_float_array(weights, "weights")  # (batch, n_tgt, n_src)
    lengths = np.asarray(lengths)  # (batch,)
    if weights.ndim != 3 or lengths.shape != weights.shape[:1]:
        raise ValueError(f"weights must be (batch, n_tgt, n_src) and lengths (batch,); got shapes "
                         f"{weights.shape} and {lengths.shape}")
    expected = reversal_alignment(lengths, weights.shape[2], weights.shape[1])  # (batch, n_tgt, n_src)
    real = expected.any(axis=2)  # (batch, n_tgt): output positions with a source position
    hits = weights.argmax(axis=2) == expected.argmax(axis=2)  # (batch, n_tgt)
    return float(hits[real].mean())


# --- repeated random tokens: the induction task -----------------------------------------------------------


def repeated_sequence_batch(n_sequences: int, half_length: int, vocab_size: int,
                            seed: int | np.random.Generator = 0) -> np.ndarray:
    r"""Random tokens, then the same tokens again: the task that an induction head solves.

    .. math:: x_{h + t} = x_t, \qquad x_0, \dots, x_{h-1} \sim \mathrm{Uniform}\{0, \dots, V - 1\}

    Nothing in the first half predicts the next token, so any model's expected next-token loss there is
    at least :math:`\ln V`. In the second half the next token is the one that followed the current token's
    earlier occurrence: a model that copies it (look back to the previous occurrence, attend to the token
    after it, as an induction head does; Olsson et al., 2022) drives the loss towards 0. The first token of
    the repeat, :math:`x_h`, is not predictable by copying. :func:`in_context_loss` splits the loss this way.
    All tokens are symbols here: no PAD, BOS or EOS.

    Parameters
    ----------
    n_sequences : int
        Batch size.
    half_length : int
        :math:`h`, tokens before the repeat; at least 2.
    vocab_size : int
        :math:`V`, tokens ``0 .. V - 1``; at least 2.
    seed : int or numpy Generator, optional
        The random source.

    Returns
    -------
    ndarray
        ``(n_sequences, 2 * half_length)`` int64.

    Examples
    --------
    >>> repeated_sequence_batch(1, half_length=4, vocab_size=10, seed=0).tolist()
    [[8, 6, 5, 2, 8, 6, 5, 2]]
    """
    n_sequences = check_positive_int(n_sequences, "n_sequences")
    half_length = check_positive_int(half_length, "half_length", 2)
    vocab_size = check_positive_int(vocab_size, "vocab_size", 2)
    first = check_seed(seed).integers(0, vocab_size, size=(n_sequences, half_length))  # (batch, h)
    return np.concatenate([first, first], axis=1).astype(np.int64)  # (batch, 2h)


class InContextLoss(NamedTuple):
    """Mean next-token losses of the two halves of a repeated sequence (see :func:`in_context_loss`).

    Attributes
    ----------
    first_half : float
        Mean loss of predicting tokens ``1 .. h - 1``: at least ``ln V`` in expectation.
    second_half : float
        Mean loss of predicting tokens ``h + 1 .. 2h - 1``: the copyable ones.

    Examples
    --------
    >>> in_context_loss(np.ones((1, 5))).first_half
    1.0
    """

    first_half: float
    second_half: float


def in_context_loss(losses) -> InContextLoss:
    r"""Split per-position next-token losses of repeated sequences into the two halves' means.

    .. math:: L_1 = \operatorname{mean}_{1 \le t < h} \ell_t, \qquad L_2 = \operatorname{mean}_{h < t < 2h} \ell_t

    where :math:`\ell_t` is the loss of predicting token :math:`t` from tokens :math:`0 .. t-1`. The
    prediction of :math:`x_h` (the repeat's first token, not copyable) counts in neither half.

    Parameters
    ----------
    losses : array_like
        ``(..., 2h - 1)`` losses, entry ``t - 1`` that of predicting token ``t``: the layout of
        ``logits[:, :-1]`` against ``tokens[:, 1:]``.

    Returns
    -------
    InContextLoss
        ``(first_half, second_half)``.

    Examples
    --------
    >>> in_context_loss([[2.3, 2.3, 2.3, 0.1, 0.1]])  # h = 3: targets 1, 2 | 3 left out | 4, 5
    InContextLoss(first_half=2.3, second_half=0.1)
    """
    losses = as_float_array(losses, "losses")  # (..., 2h - 1)
    if losses.ndim == 0 or losses.shape[-1] % 2 == 0 or losses.shape[-1] < 3:
        raise ValueError(f"losses must have an odd last axis 2h - 1 >= 3 (one loss per predicted token), "
                         f"got shape {losses.shape}")
    h = (losses.shape[-1] + 1) // 2
    return InContextLoss(float(losses[..., : h - 1].mean()), float(losses[..., h:].mean()))


# --- handwritten digits: images for a Vision Transformer ---------------------------------------------------


class DigitsSplit(NamedTuple):
    """The digits, split into a training and a test set.

    Attributes
    ----------
    train_images : ndarray
        ``(n_train, 8, 8)`` uint8 grey levels ``0 .. 16``.
    train_labels : ndarray
        ``(n_train,)`` uint8 digits ``0 .. 9``.
    test_images : ndarray
        ``(n_test, 8, 8)`` uint8.
    test_labels : ndarray
        ``(n_test,)`` uint8.

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

    The data are the test set of the UCI "Optical Recognition of Handwritten Digits" data set
    (E. Alpaydin and C. Kaynak, 1998; https://doi.org/10.24432/C50P49), licensed CC BY 4.0, as bundled
    by scikit-learn (``sklearn.datasets.load_digits``): 32 x 32 bitmaps of 43 writers, counted in
    non-overlapping 4 x 4 blocks, giving 8 x 8 images of grey levels 0 to 16. ``python -m tools.make_digits``
    copies them into ``attnbook/data/digits.npz``, so reading them needs neither scikit-learn nor a download.

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

    Each digit's images are shuffled and the first :math:`\operatorname{round}(f\,n(c))` go to the test
    set, so both sets hold the ten digits in the proportions of the whole; each set is then shuffled.

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

    An 8 x 8 image with ``patch = 2`` gives 16 patches of 4 pixels; with ``patch = 4``, 4 patches of 16.
    The order is that of :func:`attnbook.modalities.image_to_patches`, for a batch of grey images.

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
