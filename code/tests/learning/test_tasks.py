"""Tests of attnbook.learning.tasks: the reversal task and its alignment, the repeated-token task, the shipped
digits (equal to scikit-learn's), their split and their patches; and tools.make_digits' reproducible file."""

import math

import numpy as np
import pytest

from attnbook.learning.tasks import (
    BOS,
    EOS,
    FIRST_SYMBOL,
    PAD,
    alignment_agreement,
    in_context_loss,
    repeated_sequence_batch,
    reversal_alignment,
    reversal_batch,
)
from attnbook.beyond.modalities import image_to_patches
from attnbook.learning.digits import image_patches, load_digits, load_digits_split

# --- reversal ---------------------------------------------------------------------------------------


def test_reversal_targets_are_the_reversed_sources_with_bos_eos_and_padding():
    batch = reversal_batch(50, n_symbols=7, min_length=1, max_length=9, seed=3)
    lengths = batch.source_mask.sum(axis=1)
    assert batch.target_in.shape == batch.target_out.shape == (50, batch.source.shape[1] + 1)
    assert set(lengths.tolist()) <= set(range(1, 10)) and lengths.max() == batch.source.shape[1]
    for source, t_in, t_out, s_mask, t_mask, n in zip(*batch, lengths):
        symbols = source[:n].tolist()
        assert all(FIRST_SYMBOL <= s < FIRST_SYMBOL + 7 for s in symbols)
        padding = len(source) - n
        assert source[n:].tolist() == [PAD] * padding and s_mask.tolist() == [True] * n + [False] * padding
        assert t_in.tolist() == [BOS] + symbols[::-1] + [PAD] * (len(source) - n)
        assert t_out.tolist() == symbols[::-1] + [EOS] + [PAD] * (len(source) - n)
        assert t_mask.tolist() == [True] * (n + 1) + [False] * (len(source) - n)
    # teacher forcing: the decoder's input is its target shifted right by one
    np.testing.assert_array_equal(batch.target_in[:, 1:][batch.target_mask[:, 1:]],
                                  batch.target_out[:, :-1][batch.target_mask[:, 1:]])


def test_reversal_is_seeded_and_validated():
    a, b = reversal_batch(4, 5, 2, 6, seed=9), reversal_batch(4, 5, 2, 6, seed=np.random.default_rng(9))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(reversal_batch(4, 5, 6, 6, seed=1).source, reversal_batch(4, 5, 6, 6, seed=2).source)
    with pytest.raises(ValueError, match="min_length = 4 is more than max_length = 2"):
        reversal_batch(1, 3, 4, 2)
    with pytest.raises(TypeError, match="n_symbols"):
        reversal_batch(1, 2.0, 1, 2)
    with pytest.raises(ValueError, match="seed"):
        reversal_batch(1, 2, 1, 2, seed=-1)


def test_the_reversal_alignment_reads_the_source_backwards():
    batch = reversal_batch(20, n_symbols=9, min_length=1, max_length=7, seed=0)
    lengths = batch.source_mask.sum(axis=1)
    alignment = reversal_alignment(lengths)  # (batch, n_tgt, n_src)
    assert alignment.shape == batch.target_out.shape + (batch.source.shape[1],)
    # reading the source through the alignment gives the target, at every real output symbol
    read = np.einsum("bij,bj->bi", alignment, batch.source)
    symbol = batch.target_mask & (batch.target_out != EOS)
    np.testing.assert_array_equal(read[symbol], batch.target_out[symbol])
    assert np.all(alignment[~symbol] == 0) and np.all(alignment.sum(axis=2)[symbol] == 1)
    assert alignment_agreement(alignment, lengths) == 1.0
    # attending to the same position instead of the mirrored one agrees only at the middle of an odd length
    identity = np.broadcast_to(np.eye(alignment.shape[1], alignment.shape[2]), alignment.shape)
    odd = int((lengths % 2).sum())
    assert alignment_agreement(identity, lengths) == pytest.approx(odd / lengths.sum())


def test_reversal_alignment_refuses_bad_lengths():
    with pytest.raises(ValueError, match="lengths"):
        reversal_alignment([0, 2])
    with pytest.raises(ValueError, match="n_source must be at least 3"):
        reversal_alignment([3], n_source=2)
    with pytest.raises(ValueError, match="weights must be"):
        alignment_agreement(np.ones((2, 3)), [1, 2])


# --- repeated tokens ---------------------------------------------------------------------------------


def test_repeated_sequences_repeat_their_first_half():
    tokens = repeated_sequence_batch(200, half_length=6, vocab_size=11, seed=1)
    assert tokens.shape == (200, 12) and tokens.dtype == np.int64
    np.testing.assert_array_equal(tokens[:, :6], tokens[:, 6:])
    assert tokens.min() == 0 and tokens.max() == 10
    np.testing.assert_array_equal(tokens, repeated_sequence_batch(200, 6, 11, seed=1))
    with pytest.raises(ValueError, match="half_length must be at least 2"):
        repeated_sequence_batch(1, 1, 5)


def test_in_context_loss_of_the_ideal_copier_is_ln_v_then_zero():
    # the best a model can do: uniform over V on the first half (and the repeat's first token), certain after
    v, h = 7, 5
    losses = np.r_[np.full(h, math.log(v)), np.zeros(h - 1)][None, :]  # targets 1 .. 2h-1
    assert in_context_loss(losses) == pytest.approx((math.log(v), 0.0))
    assert in_context_loss(np.arange(9.0)) == (pytest.approx(1.5), pytest.approx(6.5))  # h = 5: 0..3 | 4 | 5..8
    with pytest.raises(ValueError, match="odd last axis"):
        in_context_loss(np.zeros((2, 6)))


# --- digits ----------------------------------------------------------------------------------------------


@pytest.mark.sklearn
def test_the_shipped_digits_are_scikit_learns():
    from sklearn.datasets import load_digits as sklearn_digits

    reference = sklearn_digits()
    images, labels = load_digits()
    assert images.dtype == labels.dtype == np.uint8
    np.testing.assert_array_equal(images, reference.images)
    np.testing.assert_array_equal(labels, reference.target)
    np.testing.assert_array_equal(images.reshape(len(images), -1), reference.data)


@pytest.mark.sklearn
def test_make_digits_writes_the_shipped_bytes_reproducibly(tmp_path):
    from tools import make_digits

    first, second = tmp_path / "a.npz", tmp_path / "b.npz"
    assert make_digits.main([], out=first) == 0 and make_digits.main([], out=second) == 0
    assert first.read_bytes() == second.read_bytes()
    assert make_digits.main(["--check"]) == 0, "the shipped digits.npz is stale: run `python -m tools.make_digits`"
    with np.load(first) as archive:
        assert archive.files == ["images", "labels"]


def test_the_digit_split_is_stratified_disjoint_and_seeded():
    images, labels = load_digits()
    split = load_digits_split(test_fraction=0.2, seed=0)
    assert len(split.train_labels) + len(split.test_labels) == len(labels) == 1797
    counts, test_counts = np.bincount(labels), np.bincount(split.test_labels, minlength=10)
    np.testing.assert_array_equal(test_counts, np.round(0.2 * counts))
    # every image lands in exactly one set (compare as multisets of (image, label) rows)
    rows = lambda x, y: sorted(map(bytes, np.c_[x.reshape(len(x), -1), y]))  # noqa: E731
    assert rows(np.r_[split.train_images, split.test_images], np.r_[split.train_labels, split.test_labels]) \
        == rows(images, labels)
    again, other = load_digits_split(seed=0), load_digits_split(seed=1)
    np.testing.assert_array_equal(split.test_images, again.test_images)
    assert not np.array_equal(split.test_labels, other.test_labels)
    for bad in (0, 1, 1.5, True):
        with pytest.raises(ValueError, match="test_fraction"):
            load_digits_split(test_fraction=bad)


@pytest.mark.parametrize("patch, n_patches", [(1, 64), (2, 16), (4, 4), (8, 1)])
def test_patches_are_row_major_and_match_the_single_image_version(patch, n_patches):
    images = load_digits()[0][:5]
    patches = image_patches(images, patch)
    assert patches.shape == (5, n_patches, patch * patch)
    for image, mine in zip(images, patches):
        np.testing.assert_array_equal(mine, image_to_patches(image, patch))
    # the top-left patch is the image's top-left corner, the next one is to its right
    np.testing.assert_array_equal(patches[:, 0], images[:, :patch, :patch].reshape(5, -1))
    if n_patches > 1:
        np.testing.assert_array_equal(patches[:, 1], images[:, :patch, patch:2 * patch].reshape(5, -1))


def test_patches_refuse_a_patch_that_does_not_divide_the_image():
    with pytest.raises(ValueError, match="patch = 3 must divide"):
        image_patches(np.zeros((1, 8, 8)), 3)
    with pytest.raises(ValueError, match=r"images must be \(n, H, W\)"):
        image_patches(np.zeros((8, 8)), 2)
