"""Trained weights as package data: save a parameter tree and its training record, load them back.

A trained model lives in ``attnbook/data/trained/`` as two files: ``<name>.npz``, one array per leaf of
the parameter tree, named by its path (``encoder.0.self_attention.w_q``), and ``<name>.json``, the
record of its training (configuration, seed, loss curve, final metrics, training time). The ``.npz``
is written byte for byte the same from the same arrays (fixed member order and timestamps), so a
retrained model that computes the same numbers leaves ``git status`` clean.

>>> import tempfile
>>> from attnbook.transformer import init_feed_forward
>>> params = init_feed_forward(2, 3, seed=0)
>>> folder = tempfile.mkdtemp()
>>> save_trained("tiny", params, {"seed": 0}, directory=folder)
>>> loaded, record = load_trained("tiny", init_feed_forward(2, 3, seed=1), directory=folder)
>>> bool(np.array_equal(loaded.w_1, params.w_1)), record
(True, {'seed': 0})
"""

from __future__ import annotations

import io
import json
import zipfile
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = ["TRAINED_DIRECTORY", "load_trained", "named_leaves", "save_trained", "trained_path"]

TRAINED_DIRECTORY = ("data", "trained")  # inside the attnbook package
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip member can carry: no build time in the file


def named_leaves(tree, prefix: str = "") -> list[tuple[str, np.ndarray]]:
    """The arrays of a parameter tree with their paths, in order.

    .. math:: \\text{tree} \\mapsto [(\\text{path}_i, \\text{leaf}_i)]_{i}

    A tree is an array, or a NamedTuple, tuple or list of trees; a NamedTuple's children are named by
    their fields, a tuple's or list's by their index.

    Parameters
    ----------
    tree : ndarray or NamedTuple or tuple or list
        The parameters.
    prefix : str
        Prepended to every path (used by the recursion).

    Returns
    -------
    list of (str, ndarray)
        Every leaf with its dotted path, in the order of the fields.

    Examples
    --------
    >>> from attnbook.transformer import init_feed_forward
    >>> [name for name, _ in named_leaves((init_feed_forward(2, 3), np.zeros(1)))]
    ['0.w_1', '0.b_1', '0.w_2', '0.b_2', '1']
    """
    if isinstance(tree, (tuple, list)):
        keys = tree._fields if hasattr(tree, "_fields") else [str(i) for i in range(len(tree))]
        leaves = []
        for key, child in zip(keys, tree):
            leaves += named_leaves(child, f"{prefix}{key}.")
        return leaves
    if isinstance(tree, np.ndarray) or np.isscalar(tree):
        return [(prefix.rstrip("."), np.asarray(tree))]
    raise TypeError(f"a parameter tree holds arrays, NamedTuples, tuples and lists, not {type(tree).__name__} "
                    f"(at {prefix.rstrip('.') or 'the root'})")


def _rebuild(template, arrays: dict, prefix: str = ""):
    if isinstance(template, (tuple, list)):
        keys = template._fields if hasattr(template, "_fields") else [str(i) for i in range(len(template))]
        children = [_rebuild(child, arrays, f"{prefix}{key}.") for key, child in zip(keys, template)]
        if hasattr(template, "_fields"):
            return type(template)(*children)
        return type(template)(children)
    name = prefix.rstrip(".")
    array = arrays[name]
    if array.shape != np.shape(template):
        raise ValueError(f"the stored {name} has shape {array.shape} but the template's has shape "
                         f"{np.shape(template)}; build the template with the stored configuration")
    return array


def trained_path(name: str, suffix: str, directory=None) -> Path:
    """Where the trained model ``name`` is stored: ``attnbook/data/trained/<name><suffix>``.

    .. math:: \\text{name} \\mapsto \\texttt{data/trained/name.npz}

    Parameters
    ----------
    name : str
        The model's name, e.g. ``"reversal"``.
    suffix : str
        ``".npz"`` (weights) or ``".json"`` (training record).
    directory : str or Path, optional
        Another folder (tests, or ``make train`` writing elsewhere); default the package's data.

    Returns
    -------
    Path
        The file's path.

    Examples
    --------
    >>> trained_path("reversal", ".npz").parts[-3:]
    ('data', 'trained', 'reversal.npz')
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name must be an identifier such as 'reversal', got {name!r}")
    if suffix not in (".npz", ".json"):
        raise ValueError(f"suffix must be '.npz' or '.json', got {suffix!r}")
    folder = Path(str(resources.files("attnbook").joinpath(*TRAINED_DIRECTORY))) if directory is None \
        else Path(directory)
    return folder / f"{name}{suffix}"


def save_trained(name: str, params, record: dict, directory=None) -> None:
    """Write a parameter tree to ``<name>.npz`` and its training record to ``<name>.json``.

    .. math:: (\\theta, \\text{record}) \\mapsto \\texttt{name.npz}, \\texttt{name.json}

    Parameters
    ----------
    name : str
        The model's name.
    params : NamedTuple or tuple or list of arrays
        The parameter tree.
    record : dict
        JSON-serialisable facts of the run: configuration, seed, curves, metrics, seconds.
    directory : str or Path, optional
        Another folder; default the package's ``data/trained``.

    Returns
    -------
    None

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> save_trained("pair", (np.ones(2), np.zeros(1)), {"loss": 0.5}, directory=folder)
    >>> sorted(p.name for p in Path(folder).iterdir())
    ['pair.json', 'pair.npz']
    """
    leaves = named_leaves(params)
    weights_path = trained_path(name, ".npz", directory)
    weights_path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for leaf_name, array in leaves:
            member = zipfile.ZipInfo(f"{leaf_name}.npy", date_time=_EPOCH)
            member.compress_type = zipfile.ZIP_DEFLATED
            data = io.BytesIO()
            np.lib.format.write_array(data, np.ascontiguousarray(array), allow_pickle=False)
            archive.writestr(member, data.getvalue())
    weights_path.write_bytes(buffer.getvalue())
    trained_path(name, ".json", directory).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def load_trained(name: str, template, directory=None):
    """Read a stored model into the structure of ``template``; returns ``(params, record)``.

    .. math:: \\texttt{name.npz}, \\texttt{name.json} \\mapsto (\\theta, \\text{record})

    Parameters
    ----------
    name : str
        The model's name.
    template : NamedTuple or tuple or list of arrays
        A tree of the stored structure and shapes (e.g. a freshly initialised model of the stored
        configuration); its values are not used.
    directory : str or Path, optional
        Another folder; default the package's ``data/trained``.

    Returns
    -------
    tuple
        The parameters (the template's structure, the stored values) and the record (dict).

    Examples
    --------
    >>> load_trained("no_such_model", np.zeros(1))
    Traceback (most recent call last):
    ...
    FileNotFoundError: no trained model 'no_such_model' in the package: run `make train` to make it
    """
    weights_path = trained_path(name, ".npz", directory)
    if not weights_path.exists():
        raise FileNotFoundError(f"no trained model {name!r} in the package: run `make train` to make it")
    with np.load(weights_path, allow_pickle=False) as stored:
        arrays = {key: stored[key] for key in stored.files}
    expected = [leaf_name for leaf_name, _ in named_leaves(template)]
    if sorted(expected) != sorted(arrays):
        missing, extra = set(expected) - set(arrays), set(arrays) - set(expected)
        raise ValueError(f"the stored {name!r} does not have the template's structure: missing "
                         f"{sorted(missing)}, unexpected {sorted(extra)}")
    record = json.loads(trained_path(name, ".json", directory).read_text())
    return _rebuild(template, arrays), record
