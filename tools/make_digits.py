"""Copy scikit-learn's handwritten digits into the package, so readers need neither scikit-learn nor a download.

    python -m tools.make_digits            # write code/src/attnbook/data/digits.npz
    python -m tools.make_digits --check    # exit 1 if the shipped file differs from what this would write

The data are the UCI "Optical Recognition of Handwritten Digits" test set (Alpaydin and Kaynak, 1998,
CC BY 4.0) as bundled by scikit-learn (``sklearn.datasets.load_digits``, no download): 1,797 images of
8 x 8 grey levels 0 to 16. The file is a compressed ``.npz`` with two members, ``images`` ``(1797, 8, 8)``
and ``labels`` ``(1797,)``, both uint8, written in a fixed order with a fixed timestamp, so two runs
give the same bytes. ``attnbook.learning.digits.load_digits`` reads it. scikit-learn is a test and
instructor dependency (requirements-test.txt), not a reader's.
"""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

import numpy as np

from tools import ROOT, display_path

OUT = ROOT / "code" / "src" / "attnbook" / "data" / "digits.npz"
TIMESTAMP = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can store: no build time in the file


def digits_arrays() -> dict[str, np.ndarray]:
    """scikit-learn's digits as the package stores them: uint8 images (n, 8, 8) and labels (n,)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images, labels = digits.images, digits.target
    if not (np.array_equal(images, np.round(images)) and images.min() >= 0 and images.max() <= 16):
        raise ValueError("scikit-learn's digits are no longer grey levels 0 .. 16: check the copy")
    return {"images": images.astype(np.uint8), "labels": labels.astype(np.uint8)}


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """A compressed .npz of ``arrays``, byte-reproducible: members in the given order, a fixed timestamp."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=TIMESTAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, member.getvalue(), compresslevel=9)
    return buffer.getvalue()


def main(argv: list[str] | None = None, out: Path = OUT) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--check"]):
        print(__doc__, file=sys.stderr)
        return 2
    data = npz_bytes(digits_arrays())
    if args == ["--check"]:
        if out.is_file() and out.read_bytes() == data:
            print(f"{display_path(out)} is up to date")
            return 0
        print(f"{display_path(out)} is missing or stale: run `python -m tools.make_digits`", file=sys.stderr)
        return 1
    out.write_bytes(data)
    print(f"wrote {display_path(out)} ({len(data):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
