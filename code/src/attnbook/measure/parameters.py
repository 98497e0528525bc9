"""Learned parameters of the book's layers and models, and the bytes of a key-value cache, in closed form.

>>> count_multi_head_parameters(512, 8)                   # 4 d^2 + 4 d (Vaswani et al., 2017)
1050624
"""

from __future__ import annotations

import math

from ..multihead import check_heads, check_kv_heads
from ..validation import check_bool, check_positive_int

__all__ = ["count_multi_head_parameters", "decoder_block_parameter_count", "kv_cache_bytes",
           "self_attention_parameter_count", "transformer_parameter_count"]


def self_attention_parameter_count(d_model: int, d_k: int, d_v: int | None = None, bias: bool = False) -> int:
    r"""Learned numbers of one self-attention head, whatever the length of the sequence.

    .. math:: \underbrace{d_{model} (2 d_k + d_v)}_{W_Q,\, W_K,\, W_V}
              \; + \; \underbrace{2 d_k + d_v}_{\text{biases, if any}}

    Parameters
    ----------
    d_model, d_k : int
        Width of the tokens and of queries and keys, each at least 1.
    d_v : int or None, optional
        Width of the values; defaults to ``d_k``.
    bias : bool, optional
        Count a bias per projection. Default False.

    Returns
    -------
    int
        The number of learned parameters.

    Examples
    --------
    >>> self_attention_parameter_count(2, 2, 3), self_attention_parameter_count(512, 64, bias=True)
    (14, 98496)
    >>> self_attention_parameter_count(512, 0)
    Traceback (most recent call last):
    ...
    ValueError: d_k must be at least 1, got 0
    """
    d_model = check_positive_int(d_model, "d_model")
    d_k = check_positive_int(d_k, "d_k")
    d_v = d_k if d_v is None else check_positive_int(d_v, "d_v")
    bias = check_bool(bias, "bias")
    weights = d_model * d_k + d_model * d_k + d_model * d_v  # W_Q, W_K, W_V
    biases = d_k + d_k + d_v  # b_Q, b_K, b_V
    return weights + (biases if bias else 0)


def count_multi_head_parameters(d_model: int, n_heads: int, bias: bool = True) -> int:
    r"""Learned numbers of multi-head attention, the same for every number of heads.

    .. math:: \underbrace{4 d_{model}^2}_{W_Q,\, W_K,\, W_V,\, W_O} + \underbrace{4 d_{model}}_{\text{biases}}

    Parameters
    ----------
    d_model, n_heads : int
        As in :func:`attnbook.multi_head_attention`.
    bias : bool, optional
        Count the four bias vectors. Default True.

    Returns
    -------
    int
        The number of learned parameters.

    Examples
    --------
    >>> count_multi_head_parameters(512, 8), count_multi_head_parameters(512, 1, bias=False)
    (1050624, 1048576)
    >>> count_multi_head_parameters(10, 4)
    Traceback (most recent call last):
    ...
    ValueError: d_model = 10 is not divisible by n_heads = 4; each head needs d_model / n_heads dimensions
    """
    d_model = check_positive_int(d_model, "d_model")
    check_heads(d_model, n_heads)
    bias = check_bool(bias, "bias")
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


def transformer_parameter_count(d_model: int, d_ff: int, n_heads: int, n_layers: int, vocab_size: int,
                                n_decoder_layers: int | None = None, shared_embeddings: bool = True,
                                tied_output: bool = True) -> dict[str, int]:
    r"""Parameters of a post-norm encoder-decoder Transformer with biases, part by part, and their total.

    With ``A = 4 d^2 + 4 d`` (one multi-head attention), ``F = 2 d d_ff + d_ff + d`` (one feed-forward
    block) and ``N = 2 d`` (one layer norm):

    .. math::

        \text{encoder layer} = A + F + 2N, \qquad \text{decoder layer} = 2A + F + 3N,

        \text{total} = n_{enc} (A + F + 2N) + n_{dec} (2A + F + 3N) + \text{embeddings} + \text{output}.

    One shared embedding matrix has ``V d`` numbers; an untied output layer adds ``V d + V``.

    Parameters
    ----------
    d_model, d_ff, n_heads, n_layers, vocab_size : int
        Model width, width of the feed-forward layer, number of heads (dividing ``d_model``), number
        of encoder layers and vocabulary size, each at least 1.
    n_decoder_layers : int or None, optional
        Number of decoder layers; defaults to ``n_layers``.
    shared_embeddings : bool, optional
        One embedding matrix for source and target tokens (default True).
    tied_output : bool, optional
        The pre-softmax projection reuses the embedding matrix (default True).

    Returns
    -------
    dict of str to int
        The counts of ``"attention per layer"``, ``"feed-forward per layer"``, ``"encoder layer"``,
        ``"decoder layer"``, ``"encoder"``, ``"decoder"``, ``"embeddings"``, ``"output projection"``
        and ``"total"``.

    Examples
    --------
    >>> counts = transformer_parameter_count(d_model=512, d_ff=2048, n_heads=8, n_layers=6, vocab_size=37000)
    >>> round(counts["total"] / 1e6, 1)
    63.1
    >>> transformer_parameter_count(512, 2048, 8, 6, 0)
    Traceback (most recent call last):
    ...
    ValueError: vocab_size must be at least 1, got 0
    """
    d_model = check_positive_int(d_model, "d_model")
    d_ff = check_positive_int(d_ff, "d_ff")
    n_layers = check_positive_int(n_layers, "n_layers")
    vocab_size = check_positive_int(vocab_size, "vocab_size")
    shared_embeddings = check_bool(shared_embeddings, "shared_embeddings")
    tied_output = check_bool(tied_output, "tied_output")
    n_dec = n_layers if n_decoder_layers is None else check_positive_int(n_decoder_layers, "n_decoder_layers")
    attention = count_multi_head_parameters(d_model, n_heads)  # 4 d^2 + 4 d
    feed_forward = d_model * d_ff + d_ff + d_ff * d_model + d_model
    norm = 2 * d_model  # gamma and beta
    encoder_layer = attention + feed_forward + 2 * norm
    decoder_layer = 2 * attention + feed_forward + 3 * norm
    embedding = vocab_size * d_model
    embeddings = embedding if shared_embeddings else 2 * embedding
    output = 0 if tied_output else embedding + vocab_size
    counts = {
        "attention per layer": attention,
        "feed-forward per layer": feed_forward,
        "encoder layer": encoder_layer,
        "decoder layer": decoder_layer,
        "encoder": n_layers * encoder_layer,
        "decoder": n_dec * decoder_layer,
        "embeddings": embeddings,
        "output projection": output,
    }
    counts["total"] = counts["encoder"] + counts["decoder"] + embeddings + output
    return counts


# --- memory ---------------------------------------------------------------------------------------


def kv_cache_bytes(n_tokens: int, n_layers: int, n_heads: int, d_head: int, itemsize: int = 2,
                   batch: int = 1, n_kv_heads: int | None = None) -> int:
    r"""Bytes a key-value cache holds: a key and a value of ``d_head`` numbers per token, key head and layer.

    .. math:: 2 \cdot \text{batch} \cdot n_{layers} \cdot n_{kv} \cdot n_{tokens} \cdot d_{head}
              \cdot \text{itemsize}

    Parameters
    ----------
    n_tokens : int
        Tokens held, at least 0.
    n_layers, n_heads, d_head : int
        Layers, (query) heads per layer and width of one head's keys and values, each at least 1.
    itemsize : int, optional
        Bytes per number: 2 (default) for float16, 4 for float32.
    batch : int, optional
        Sequences held, at least 1. Default 1.
    n_kv_heads : int, optional
        As in :func:`attnbook.multi_head_attention`.

    Returns
    -------
    int
        The number of bytes.

    Examples
    --------
    >>> kv_cache_bytes(n_tokens=1024, n_layers=12, n_heads=12, d_head=64) / 2**20   # MiB
    36.0
    >>> kv_cache_bytes(n_tokens=1024, n_layers=12, n_heads=12, d_head=64, n_kv_heads=3) / 2**20
    9.0
    """
    sizes = {"n_tokens": n_tokens, "n_layers": n_layers, "n_heads": n_heads, "d_head": d_head,
             "itemsize": itemsize, "batch": batch}
    checked = {name: check_positive_int(value, name, minimum=0 if name == "n_tokens" else 1)
               for name, value in sizes.items()}
    if n_kv_heads is not None:
        checked["n_heads"] = check_kv_heads(checked["n_heads"], n_kv_heads)  # only the key heads are cached
    return 2 * math.prod(checked.values())


def decoder_block_parameter_count(d_model: int, d_ff: int, n_heads: int, n_kv_heads: int | None = None,
                                  gated: bool = True) -> dict[str, int]:
    r"""Parameters of one bias-free pre-norm decoder-only block with RMSNorm, part by part.

    With :math:`d_h = d / h` and :math:`n_{kv}` key and value heads:

    .. math::

        \underbrace{2 d^2 + 2 d \, n_{kv} d_h}_{W_Q,\, W_O;\; W_K,\, W_V}
        \; + \; \underbrace{3 d \, d_\text{ff}}_{W_\text{gate},\, W_\text{up},\, W_\text{down}}
        \; + \; \underbrace{2 d}_{\text{two RMSNorm gains}}

    (``gated=False``: a ReLU network, :math:`2 d \, d_\text{ff}`). The 2017 block with biases and
    layer norms is :func:`transformer_parameter_count`'s ``"encoder layer"``.

    Parameters
    ----------
    d_model, d_ff : int
        Model width and hidden width of the feed-forward network, each at least 1.
    n_heads, n_kv_heads : int
        As in :func:`attnbook.multi_head_attention`.
    gated : bool, optional
        A SwiGLU network with three matrices (default) or a two-matrix one.

    Returns
    -------
    dict of str to int
        ``"attention"``, ``"feed-forward"``, ``"norms"`` and ``"block"`` (their sum).

    Examples
    --------
    >>> decoder_block_parameter_count(d_model=4096, d_ff=14336, n_heads=32, n_kv_heads=8)["block"]
    218112000
    >>> decoder_block_parameter_count(8, 16, n_heads=4, n_kv_heads=3)
    Traceback (most recent call last):
    ...
    ValueError: n_heads = 4 is not divisible by n_kv_heads = 3; each key and value head serves n_heads / n_kv_heads query heads
    """
    d_model = check_positive_int(d_model, "d_model")
    d_ff = check_positive_int(d_ff, "d_ff")
    n_heads = check_heads(d_model, n_heads)
    n_kv = n_heads if n_kv_heads is None else check_kv_heads(n_heads, n_kv_heads)
    gated = check_bool(gated, "gated")
    d_kv = n_kv * (d_model // n_heads)  # width of all key (or value) heads together
    counts = {
        "attention": 2 * d_model * d_model + 2 * d_model * d_kv,
        "feed-forward": (3 if gated else 2) * d_model * d_ff,
        "norms": 2 * d_model,
    }
    counts["block"] = sum(counts.values())
    return counts
