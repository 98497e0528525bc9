"""The one scaffold of the book's trained models: a few functions of ``(params, config)``, trained by ``fit``.

A :class:`Model` says how to initialise the parameters, run the taped forward pass, score it and draw a
training batch; :func:`loss_and_gradients` chains them, :func:`train` trains the model with
:func:`attnbook.learning.loop.fit` (Adam, the schedule, clipping, seeded batches, the progress bar) and
:func:`load` reads a stored one back (:mod:`attnbook.learning.store`). Every model's configuration is a
NamedTuple checked by :func:`~.boundary.check_config`; its parameters a NamedTuple of arrays whose fields
declare their layouts, checked with the configuration by :func:`~.boundary.check_model`, the boundary every
model's public functions and analyses share (:mod:`attnbook.learning.models.boundary`, its names also
here); :func:`~.boundary.batcher` and :func:`loader` make a model's checked batches and its stored
weights' loader. A forward pass returns :class:`Forward` (or the model's own richer tuple).

>>> from attnbook.learning.models.recall import MODEL, RecallConfig
>>> config = RecallConfig(n_steps=3, batch_size=4)
>>> params, record = train(MODEL, config, progress=False)
>>> len(record["losses"]), sorted(record)
(3, ['config', 'losses', 'metrics', 'n_steps', 'seconds', 'seed'])
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import NamedTuple

from ...validation import check_positive_int
from ..gradients import entropy, entropy_grads
from ..loop import fit
from ..store import load_trained, trained_path
from .boundary import batcher, check_config, check_model, config_dims

__all__ = ["Forward", "Model", "Trained", "batcher", "check_config", "check_model", "config_dims", "load", "loader",
           "loss_and_gradients", "train"]


class Model(NamedTuple):
    """A trainable model: the functions the scaffold calls, each of the parameters and the configuration.

    Attributes
    ----------
    name : str
        The stored model's name (``data/trained/<name>.npz``); empty for a model the chapters train.
    config : type
        The NamedTuple of its hyperparameters.
    init : callable
        ``init(config, seed) -> params``.
    forward : callable
        ``forward(params, batch, config) -> (outputs, back)``, taped: ``outputs.logits`` are what the loss
        scores, and ``back(d_logits)`` returns the gradient of every parameter, a tree like ``params``.
    loss : callable
        ``loss(logits, batch, config) -> (loss, d_logits)``.
    batch : callable
        ``batch(rng, config) -> batch``, a training batch drawn from ``rng``.
    evaluate : callable
        ``evaluate(params, config) -> dict``, the metrics of a training record.
    fit_options : callable
        ``fit_options(config) -> dict``, the keywords of :func:`attnbook.learning.loop.fit` (rate, clipping).
    layout, check, dims : optional
        For :func:`~.boundary.check_model`: the NamedTuple of the parameters, ``check(config) -> config`` (the model's
        :func:`~.boundary.check_config` and its own), ``dims(config) ->`` the sizes of :func:`~.boundary.config_dims`.

    Examples
    --------
    >>> from attnbook.learning.models.vit import MODEL
    >>> MODEL.name, MODEL.config.__name__
    ('digits_vit', 'ViTConfig')
    """

    name: str
    config: type
    init: Callable
    forward: Callable
    loss: Callable
    batch: Callable
    evaluate: Callable
    fit_options: Callable
    layout: type | None = None
    check: Callable | None = None
    dims: Callable | None = None


class Forward(NamedTuple):
    """A decoder's (or encoder's) forward pass: the scores and every layer's attention, ``logits, attention = ...``.

    Attributes
    ----------
    logits, attention : ndarray
        ``(batch, n, V)`` the scores of each position; ``(n_layers, batch, n_heads, n, n)`` every layer's
        attention weights (the model's docstring says its own layout).

    Examples
    --------
    >>> Forward(logits=None, attention=None)._fields
    ('logits', 'attention')
    """

    logits: object  # (batch, n, V)
    attention: object  # (n_layers, batch, h, n, n)


class Trained(NamedTuple):
    """A stored model as :func:`load` reads it: ``params, config, record = ...``.

    Attributes
    ----------
    params, config, record
        The parameters, the configuration they were trained with, the training record (a dict).

    Examples
    --------
    >>> Trained(None, None, {"seed": 0}).record["seed"]
    0
    """

    params: object
    config: object
    record: dict


def entropy_loss(logits, targets) -> tuple:
    """Unchecked kernel: the mean cross-entropy of ``logits`` against ``targets`` and its gradient ``dL/dlogits``.

    >>> import numpy as np
    >>> loss, d_logits = entropy_loss(np.zeros((1, 2, 4)), np.array([[0, 3]]))
    >>> round(loss, 4), d_logits.shape
    (1.3863, (1, 2, 4))
    """
    return entropy(logits, targets), entropy_grads(logits, targets)


def loss_and_gradients(model: Model, params, batch, config) -> tuple:
    """The loss of a batch and its gradient for every parameter: the taped forward, the loss, ``back``.

    .. math:: (L, \\nabla_\\theta L) = (\\ell(z), \\operatorname{back}(\\partial \\ell / \\partial z)), \\qquad z = f_\\theta(\\text{batch})

    Parameters
    ----------
    model : Model
        The model.
    params : NamedTuple
        Its parameters, checked.
    batch : object
        A batch of ``model.batch``.
    config : NamedTuple
        The configuration, checked.

    Returns
    -------
    tuple
        ``(loss, grads)``.

    Examples
    --------
    >>> import numpy as np
    >>> from attnbook.learning.models.recall import MODEL, RecallConfig
    >>> config = RecallConfig()
    >>> params = MODEL.init(config, 0)
    >>> loss, grads = loss_and_gradients(MODEL, params, MODEL.batch(np.random.default_rng(0), config), config)
    >>> grads.w_o.shape == params.w_o.shape
    True
    """
    outputs, back = model.forward(params, batch, config)
    loss, d_logits = model.loss(outputs.logits, batch, config)
    return loss, back(d_logits)


def train(model: Model, config, seed: int = 0, progress: bool = True, n_steps: int | None = None, *,
          rng=None, on_step=None) -> tuple:
    """Train ``model.init(config, seed)`` with :func:`attnbook.learning.loop.fit`; returns ``(params, record)``.

    .. math:: \\theta^\\ast = \\operatorname{fit}(\\theta_0, \\nabla L, \\text{batches})

    Parameters
    ----------
    model : Model
        The model.
    config : NamedTuple
        Its configuration, checked by the model's ``init``.
    seed : int, optional
        Seeds the parameters and (unless ``rng``) the batches.
    progress : bool, optional
        Show ``fit``'s progress bar.
    n_steps : int, optional
        Stop after this many steps; default ``config.n_steps``.
    rng : numpy.random.Generator, optional
        The generator of the batches, when not ``seed``'s.
    on_step : callable, optional
        ``on_step(step, params, loss)`` after every step (see :func:`attnbook.learning.loop.fit`).

    Returns
    -------
    tuple
        ``(params, record)``, the record a JSON-serialisable dict: ``config``, ``seed``, ``n_steps``,
        ``losses``, ``metrics`` (``model.evaluate``) and ``seconds``.

    Examples
    --------
    >>> from attnbook.learning.models.recall import MODEL, RecallConfig
    >>> train(MODEL, RecallConfig(), n_steps=0)
    Traceback (most recent call last):
    ...
    ValueError: n_steps must be at least 1, got 0
    """
    total = config.n_steps if n_steps is None else check_positive_int(n_steps, "n_steps")
    params = model.init(config, seed)
    start = time.perf_counter()
    params, history = fit(params, lambda p, batch: loss_and_gradients(model, p, batch, config),
                          lambda generator: model.batch(generator, config), total,
                          seed=seed if rng is None else rng, progress=progress, on_step=on_step,
                          **model.fit_options(config))
    seconds = time.perf_counter() - start
    return params, {"config": config._asdict(), "seed": int(seed), "n_steps": int(total),
                    "losses": [float(loss) for loss in history.losses], "metrics": model.evaluate(params, config),
                    "seconds": round(seconds, 1)}


def load(model: Model, directory=None) -> tuple:
    """A stored model: ``(params, config, record)``, read from ``attnbook/data/trained/<model.name>``.

    .. math:: \\texttt{name.npz}, \\texttt{name.json} \\mapsto (\\theta, \\text{config}, \\text{record})

    Parameters
    ----------
    model : Model
        The model (its ``name`` and ``config``).
    directory : str or Path, optional
        Another folder of trained models; default the package's ``data/trained``.

    Returns
    -------
    tuple
        ``(params, config, record)``: the parameters, the configuration they were trained with, and the
        training record.

    Examples
    --------
    >>> from attnbook.learning.models.induction import MODEL
    >>> params, config, record = load(MODEL)
    >>> record["seed"], type(config).__name__
    (0, 'InductionConfig')
    """
    path = trained_path(model.name, ".json", directory)
    if not path.exists():
        raise FileNotFoundError(f"no trained model {model.name!r} in {path.parent}: run `make train` to make it")
    config = model.config(**json.loads(path.read_text())["config"])  # the template's sizes
    params, record = load_trained(model.name, model.init(config, 0), directory)
    return params, config, record


def loader(model: Model) -> Callable:
    r"""The loader of a stored model, ``load_<model>(directory=None)``: :func:`load` of ``model``, a :class:`Trained`.

    .. math:: \texttt{directory} \mapsto \operatorname{Trained}(\operatorname{load}(\text{model}, \texttt{directory}))

    Parameters
    ----------
    model : Model
        The stored model.

    Returns
    -------
    callable
        ``load_model(directory=None)``, documented as :func:`load` is.

    Examples
    --------
    >>> from attnbook.learning.models.induction import MODEL
    >>> trained = loader(MODEL)()
    >>> trained.record["seed"], type(trained.config).__name__
    (0, 'InductionConfig')
    """
    def load_model(directory=None):
        return Trained._make(load(model, directory))

    load_model.__doc__ = (f"The stored model {model.name!r}, read from ``attnbook/data/trained`` (or ``directory``) by "
                          f":func:`attnbook.learning.models.scaffold.load`: a ``Trained`` ``(params, config, record)``.")
    return load_model
