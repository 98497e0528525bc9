"""The boundary every trained model shares: its configuration, its parameters against it, its batches.

A model's configuration is a NamedTuple whose annotations say what each field holds
(:func:`check_config`); the sizes it fixes (:func:`config_dims`) check every weight's layout
(:func:`check_model`, with the model's :class:`~attnbook.learning.models.scaffold.Model` fields
``layout``, ``check`` and ``dims``); :func:`batcher` puts a model's batches behind the same check. The
models' public functions and their analyses call these, so each check is written once.

>>> from attnbook.learning.models.gpt import MODEL, GPTConfig
>>> params, config = check_model(MODEL, MODEL.init(GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=8), 0),
...                              GPTConfig(d_model=8, n_heads=2, n_kv_heads=1, d_ff=6))
Traceback (most recent call last):
...
ValueError: params.layers[0].feed_forward.w_gate has shape (8, 8) but config.d_model = 8 and config.d_ff = 6; expected (8, 6)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ...validation import Dims, check_positive_int, check_weights

__all__ = ["batcher", "check_config", "check_model", "config_dims"]


def check_config(config, kind: type, minimum: dict | None = None, own: tuple = ()) -> NamedTuple:
    """``config`` if it is a ``kind`` whose fields hold what their annotations say, else an error naming the field.

    An ``int`` field must be an integer of at least 1 (or its entry in ``minimum``); a ``float`` field a
    positive finite number (``float | None``: or None). Other fields, and those in ``own``, are the
    model's own to check.

    Parameters
    ----------
    config : NamedTuple
        The configuration.
    kind : type
        The NamedTuple it must be.
    minimum : dict, optional
        The smallest value of an integer field, when not 1 (``{"shift": 0}``).
    own : tuple of str, optional
        Fields the model checks itself (a fraction in ``[0, 1)``).

    Returns
    -------
    NamedTuple
        ``config``.

    Examples
    --------
    >>> from attnbook.learning.models.vit import ViTConfig
    >>> check_config(ViTConfig(max_norm=0.0), ViTConfig)
    Traceback (most recent call last):
    ...
    ValueError: config.max_norm must be a positive finite number, got 0.0
    """
    if not isinstance(config, kind):
        article = "an" if kind.__name__[0] in "AEIOU" else "a"
        raise TypeError(f"config must be {article} {kind.__name__}, got {type(config).__name__}")
    minimum = minimum or {}
    for field, annotation in kind.__annotations__.items():
        value, name = getattr(config, field), f"config.{field}"
        annotation = getattr(annotation, "__forward_arg__", annotation)  # a NamedTuple keeps them as ForwardRef
        if field in own:
            continue
        if annotation in (int, "int"):
            check_positive_int(value, name, minimum.get(field, 1))
        elif annotation in (float, "float") or (annotation in ("float | None", float | None) and value is not None):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return config


def config_dims(config, names: tuple, **more) -> Dims:
    """The sizes ``config`` fixes for :func:`attnbook.validation.check_weights`, each said as ``config.<name> = <value>``.

    The key heads are as wide as the model (``d_kv`` is ``d_model``).

    Parameters
    ----------
    config : NamedTuple
        The configuration.
    names : tuple of str
        Its fields that are dimensions of the weights, by the same name.
    **more : tuple of (int, str)
        Other dimensions, ``name=(size, why)``.

    Returns
    -------
    Dims
        The dimensions.

    Examples
    --------
    >>> from attnbook.learning.models.vit import ViTConfig
    >>> dims = config_dims(ViTConfig(), ("d_model",), n_tokens=(17, "17 tokens"))
    >>> dims["d_kv"], dims.why(("d_model", "n_tokens"))
    (32, 'config.d_model = 32 and 17 tokens')
    """
    dims = Dims(**{name: (getattr(config, name), f"config.{name} = {getattr(config, name)}") for name in names}, **more)
    dims.alias("d_kv", "d_model")
    return dims


def check_model(model, params, config) -> tuple:
    """The boundary of a model's public functions: ``(params, config)``, each checked and against the other.

    ``model.check`` checks the configuration, :func:`attnbook.validation.check_weights` every weight's
    layout (``model.layout``) at the sizes ``model.dims(config)`` fixes.

    Parameters
    ----------
    model : Model
        The model, with its ``layout``, ``check`` and ``dims``.
    params, config : NamedTuple
        Its parameters and the configuration they were made with.

    Returns
    -------
    tuple
        ``(params, config)``, unchanged when they pass.

    Examples
    --------
    >>> from attnbook.learning.models.seq2seq import MODEL, ReversalConfig
    >>> check_model(MODEL, tuple(MODEL.init(ReversalConfig(), 0)), ReversalConfig())
    Traceback (most recent call last):
    ...
    TypeError: params must be ReversalParameters, got tuple
    """
    config = model.check(config)
    return check_weights(params, model.layout, "params", model.dims(config)), config


def batcher(model) -> Callable:
    """The checked batches of a model, ``draw_batch(rng, config)``: ``model.batch`` behind the checks of both.

    Parameters
    ----------
    model : Model
        The model, with its ``check``.

    Returns
    -------
    callable
        ``draw_batch(rng, config)``: ``config`` checked by ``model.check``, ``rng`` a ``numpy.random.Generator``.

    Examples
    --------
    >>> from attnbook.learning.models.gpt import MODEL, GPTConfig
    >>> batcher(MODEL)(0, GPTConfig())
    Traceback (most recent call last):
    ...
    TypeError: rng must be a numpy Generator, got int
    """
    def draw_batch(rng, config):
        config = model.check(config)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
        return model.batch(rng, config)

    draw_batch.__doc__ = (f"A training batch of {model.name!r} drawn from ``rng`` (a ``numpy.random.Generator``), "
                          f"its ``config`` checked: :func:`attnbook.learning.models.scaffold.batcher`.")
    return draw_batch
