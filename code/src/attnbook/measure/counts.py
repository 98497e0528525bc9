"""The book's closed-form counts of work and reach: multiply-adds, score pairs, sequential steps, path lengths.

Multiply-adds (checked by doing in :mod:`attnbook.measure.counted`), score pairs, sequential operations and
path lengths in one vocabulary of layer kinds ``LAYER_KINDS``; every count an exact Python integer.

Examples
--------
>>> self_attention_macs(n=4, d=8)          # 3 n d^2 (projections) + 2 n^2 d (scores and weighted sum)
1024
>>> attention_pair_count(1000), attention_pair_count(1000, window=50)
(1000000, 98450)
>>> path_length("recurrent", 9), path_length("convolutional", 9, reach=2), path_length("self-attention", 9)
(10, 5, 1)
"""

from __future__ import annotations

from ..validation import check_bool, check_positive_int

__all__ = [
    "CACHE_KINDS",
    "DECODE_STRATEGIES",
    "DEEPSEEK_V3",
    "LAYER_KINDS",
    "QWEN3_NEXT",
    "attention_pair_count",
    "conv1d_macs",
    "decode_multiply_adds",
    "hybrid_cache_bytes",
    "kv_cache_bytes_per_token",
    "path_length",
    "restricted_attention_macs",
    "rnn_macs",
    "self_attention_macs",
    "sequential_operations",
]

#: The kinds of sequence layer the book compares: the rows of Table 1 of "Attention Is All You Need",
#: with the convolution split into contiguous and dilated kernels. Every function here that takes a
#: ``kind`` takes one of these.
LAYER_KINDS = ("self-attention", "restricted self-attention", "recurrent", "convolutional",
               "dilated convolutional")

#: The three ways of decoding token by token that ``decode_multiply_adds`` counts (the strategies of
#: ``attnbook.kv_cache.decode``).
DECODE_STRATEGIES = ("cache", "recompute_kv", "recompute_all")


#: The attention layers whose decoding cache ``kv_cache_bytes_per_token`` counts: multi-head, grouped-query,
#: multi-query and multi-head latent attention.
CACHE_KINDS = ("mha", "gqa", "mqa", "mla")

#: DeepSeek-V3's published attention sizes (the model hyper-parameters of its technical report, DeepSeek-AI
#: 2024; the defaults of ``transformers.DeepseekV3Config``, checked by code/tests/recent/test_cache_sizes.py):
#: 61 layers, 128 heads, each with a 128-wide content key, a 64-wide rotary key and a 128-wide value, and a
#: 512-wide latent.
DEEPSEEK_V3 = {"n_layers": 61, "n_heads": 128, "d_nope": 128, "d_rope": 64, "d_v": 128, "kv_rank": 512,
               "q_rank": 1536}

#: Qwen3-Next-80B-A3B's attention sizes (the defaults of ``transformers.Qwen3NextConfig``, checked by
#: code/tests/recent/test_cache_sizes.py): 48 layers, one in 4 full (gated) attention with 2 key-value heads of
#: width 256, the other three Gated DeltaNet with 32 value heads, each a 128 x 128 memory, and a short convolution
#: of kernel 4 over 16 query heads, 16 key heads (width 128) and 32 value heads (width 128).
QWEN3_NEXT = {"n_layers": 48, "full_every": 4, "n_kv_heads": 2, "d_head": 256, "n_k_heads": 16, "n_v_heads": 32,
              "d_k": 128, "d_v": 128, "kernel": 4}


def _checked_kind(kind) -> str:
    if kind not in LAYER_KINDS:
        raise ValueError(f"kind must be one of {', '.join(repr(k) for k in LAYER_KINDS)}; got {kind!r}")
    return kind


# --- (query, key) pairs ---------------------------------------------------------------------------


def attention_pair_count(n: int, window: int | None = None, causal: bool = False) -> int:
    r"""Number of (query, key) pairs of ``n`` positions that a mask lets attend, in closed form.

    With ``w = min(window, n - 1)``, the count is the number of True entries of the mask:

    .. math::

        \text{full: } n^2, \qquad \text{causal: } \frac{n (n + 1)}{2}, \qquad
        \text{band } |i - j| \le w: \; n (2w + 1) - w (w + 1), \qquad
        \text{causal band: } n (w + 1) - \frac{w (w + 1)}{2}.

    The ``w`` rows at each end of the band lose ``1 + 2 + ... + w`` keys. No mask is built.

    Parameters
    ----------
    n : int
        Number of positions (queries and keys), at least 1.
    window, causal : optional
        As in :func:`attnbook.banded_mask` (``window`` None: no band).

    Returns
    -------
    int
        The number of allowed pairs.

    Examples
    --------
    >>> attention_pair_count(4), attention_pair_count(4, causal=True)
    (16, 10)
    >>> attention_pair_count(4, window=1), attention_pair_count(4, window=1, causal=True), attention_pair_count(4, window=9)
    (10, 7, 16)
    >>> attention_pair_count(4, window=-1)
    Traceback (most recent call last):
    ...
    ValueError: window must be at least 0, got -1
    """
    n = check_positive_int(n, "n")
    causal = check_bool(causal, "causal")
    w = n - 1 if window is None else min(check_positive_int(window, "window", minimum=0), n - 1)
    if causal:
        return n * (w + 1) - w * (w + 1) // 2
    return n * (2 * w + 1) - w * (w + 1)


# --- multiply-adds, in closed form ----------------------------------------------------------------


def self_attention_macs(n: int, d: int, projections: bool = True) -> int:
    r"""Multiply-adds of one self-attention head with ``d_model = d_k = d_v = d`` on ``n`` positions.

    .. math:: \underbrace{3 n d^2}_{X W_Q,\, X W_K,\, X W_V} + \underbrace{n^2 d}_{Q K^T}
              + \underbrace{n^2 d}_{A V}

    ``projections=False`` leaves out the projections, as Table 1 of the Transformer paper.

    Parameters
    ----------
    n, d : int
        Number of positions and width of every vector, each at least 1.
    projections : bool, optional
        Count the three projections (default True) or only the attention core.

    Returns
    -------
    int
        The number of multiply-adds.

    Examples
    --------
    >>> self_attention_macs(3, 2), self_attention_macs(3, 2, projections=False)   # 36 + 36, 2 * 3^2 * 2
    (72, 36)
    >>> self_attention_macs(0, 2)
    Traceback (most recent call last):
    ...
    ValueError: n must be at least 1, got 0
    """
    n, d = check_positive_int(n, "n"), check_positive_int(d, "d")
    core = 2 * n * n * d
    return core + 3 * n * d * d if check_bool(projections, "projections") else core


def rnn_macs(n: int, d_in: int, d_h: int | None = None) -> int:
    r"""Multiply-adds of the recurrent layer ``attnbook.rnn_forward`` on ``n`` positions.

    .. math:: \underbrace{n\, d_{in} d_h}_{x_t W_x} + \underbrace{n\, d_h^2}_{h_{t-1} W_h}

    Parameters
    ----------
    n, d_in : int
        Number of positions and input width, each at least 1.
    d_h : int or None, optional
        Width of the state; defaults to ``d_in``.

    Returns
    -------
    int
        The number of multiply-adds.

    Examples
    --------
    >>> rnn_macs(3, 2), rnn_macs(3, 2, 5)
    (24, 105)
    """
    n, d_in = check_positive_int(n, "n"), check_positive_int(d_in, "d_in")
    d_h = d_in if d_h is None else check_positive_int(d_h, "d_h")
    return n * d_in * d_h + n * d_h * d_h


def conv1d_macs(n: int, d_in: int, k: int, d_out: int | None = None) -> int:
    """Multiply-adds of a 1-D convolution with kernel width ``k`` computed densely: ``k n d_in d_out``.

    The zero padding included: ``counted_conv1d`` performs this many, ``attnbook.beyond.modalities.conv1d`` a few fewer.

    Parameters
    ----------
    n, d_in, k : int
        Number of positions, input width and kernel width, each at least 1.
    d_out : int or None, optional
        Output width; defaults to ``d_in``.

    Returns
    -------
    int
        The number of multiply-adds.

    Examples
    --------
    >>> conv1d_macs(3, 2, k=2), conv1d_macs(3, 2, k=2, d_out=1)
    (24, 12)
    """
    n, d_in, k = check_positive_int(n, "n"), check_positive_int(d_in, "d_in"), check_positive_int(k, "k")
    d_out = d_in if d_out is None else check_positive_int(d_out, "d_out")
    return k * n * d_in * d_out


def restricted_attention_macs(n: int, d: int, window: int) -> int:
    r"""Multiply-adds of scores and weighted sum when only the band ``|i - j| <= window`` is computed.

    .. math:: 2 d \cdot \#\{(i, j) : |i - j| \le w\} = 2 d \big(n (2w + 1) - w (w + 1)\big)

    Close to ``2 r n d`` with ``r = 2 window + 1``: Table 1's O(r n d) (see :func:`attention_pair_count`).

    Parameters
    ----------
    n, d : int
        Number of positions and width of queries, keys and values, each at least 1.
    window : int
        As in :func:`attnbook.banded_mask`.

    Returns
    -------
    int
        The number of multiply-adds.

    Examples
    --------
    >>> restricted_attention_macs(5, 2, window=1)   # 2 * d * (13 allowed pairs)
    52
    """
    d = check_positive_int(d, "d")
    return 2 * d * attention_pair_count(n, window=window)


def decode_multiply_adds(t: int, d_model: int, d_k: int, d_v: int, strategy: str = "cache",
                         batch: int = 1) -> int:
    r"""Multiply-adds of decoding ``t`` tokens one at a time with one causal self-attention head.

    With ``P = d_model (2 d_k + d_v)`` (the three projections of one token) and
    ``T_2 = t (t + 1) / 2``:

    .. math::

        \text{cache: } t P + (d_k + d_v) T_2, \qquad
        \text{recompute\_kv: } t\, d_{model} d_k + (d_{model} (d_k + d_v) + d_k + d_v) T_2,

        \text{recompute\_all: } P T_2 + (d_k + d_v) \frac{t (t + 1) (2t + 1)}{6}.

    ``attnbook.efficient.kv_cache.decode`` counts the same products as it performs them.

    Parameters
    ----------
    t : int
        Number of tokens decoded, at least 0.
    d_model, d_k, d_v : int
        Width of the tokens, of queries and keys, and of values, each at least 1.
    strategy : str, optional
        One of ``DECODE_STRATEGIES``, as in ``attnbook.efficient.kv_cache.decode``.
    batch : int, optional
        Number of sequences decoded together, at least 0. Default 1.

    Returns
    -------
    int
        The number of multiply-adds.

    Examples
    --------
    >>> decode_multiply_adds(5, 8, 4, 4, "cache"), decode_multiply_adds(5, 8, 4, 4, "recompute_all")
    (600, 1880)
    >>> decode_multiply_adds(5, 8, 4, 4, "lazy")
    Traceback (most recent call last):
    ...
    ValueError: strategy must be one of ('cache', 'recompute_kv', 'recompute_all'), got 'lazy'
    """
    t = check_positive_int(t, "t", minimum=0)
    d_model = check_positive_int(d_model, "d_model")
    d_k = check_positive_int(d_k, "d_k")
    d_v = check_positive_int(d_v, "d_v")
    batch = check_positive_int(batch, "batch", minimum=0)
    if strategy not in DECODE_STRATEGIES:
        raise ValueError(f"strategy must be one of {DECODE_STRATEGIES}, got {strategy!r}")
    per_token = d_model * (2 * d_k + d_v)
    pairs = t * (t + 1) // 2  # sum of s for s = 1 .. t
    squares = t * (t + 1) * (2 * t + 1) // 6  # sum of s^2 for s = 1 .. t
    if strategy == "cache":
        count = t * per_token + (d_k + d_v) * pairs
    elif strategy == "recompute_kv":
        count = t * d_model * d_k + (d_model * (d_k + d_v) + d_k + d_v) * pairs
    else:
        count = per_token * pairs + (d_k + d_v) * squares
    return batch * count


def sequential_operations(kind: str, n: int) -> int:
    """Operations of one layer on ``n`` positions that must run one after another.

    Parameters
    ----------
    kind, n
        One of ``LAYER_KINDS``; the number of positions, at least 1.

    Returns
    -------
    int
        ``n`` for ``"recurrent"``, otherwise 1.

    Examples
    --------
    >>> sequential_operations("recurrent", 7), sequential_operations("convolutional", 7)
    (7, 1)
    """
    _checked_kind(kind)
    n = check_positive_int(n, "n")
    return n if kind == "recurrent" else 1


def path_length(kind: str, distance: int, reach: int | None = None) -> int:
    r"""Sequential steps that carry information from one input to an output ``distance`` positions away.

    A step is one layer of a stack, or, for a recurrent layer, one step of the recurrence. With
    ``D = distance`` and ``r = reach`` (how many positions one layer bridges):

    .. math::

        \text{self-attention: } 1, \qquad \text{recurrent: } D + 1, \qquad
        \text{convolutional, restricted self-attention: } \max\!\big(1, \lceil D / r \rceil\big),

        \text{dilated convolutional: the smallest } L \ge 1 \text{ with } (r + 1)^L > D.

    A causal convolution of width ``k`` bridges ``r = k - 1``, a centred one of width ``2r + 1`` bridges
    ``r``, a band of ``window`` bridges ``r = window``; dilations ``1, k, k^2, ...`` reach ``k^L - 1``.

    Parameters
    ----------
    kind : str
        One of ``LAYER_KINDS``.
    distance : int
        How many positions apart the input and the output are, at least 0.
    reach : int or None, optional
        Positions bridged by one layer, at least 1; needed for the convolutions and restricted
        self-attention, ignored by the others.

    Returns
    -------
    int
        The number of sequential steps, at least 1.

    Examples
    --------
    >>> [path_length(kind, 99) for kind in ("recurrent", "self-attention")]
    [100, 1]
    >>> path_length("convolutional", 99, reach=2), path_length("restricted self-attention", 99, reach=10)
    (50, 10)
    >>> [path_length("dilated convolutional", n - 1, reach=2) for n in (1, 3, 4, 9, 10, 1000)]
    [1, 1, 2, 2, 3, 7]
    >>> path_length("convolutional", 5)
    Traceback (most recent call last):
    ...
    ValueError: kind 'convolutional' needs reach=, the number of positions one layer bridges
    """
    _checked_kind(kind)
    distance = check_positive_int(distance, "distance", minimum=0)
    if kind == "self-attention":
        return 1
    if kind == "recurrent":
        return distance + 1
    if reach is None:
        raise ValueError(f"kind {kind!r} needs reach=, the number of positions one layer bridges")
    reach = check_positive_int(reach, "reach")
    if kind == "dilated convolutional":
        layers, bridged = 1, reach  # after L layers of kernel width k = reach + 1: k**L - 1 positions
        while bridged < distance:
            layers, bridged = layers + 1, (bridged + 1) * (reach + 1) - 1
        return layers
    return max(1, -(-distance // reach))


def kv_cache_bytes_per_token(kind: str, n_layers: int, d_k: int, d_v: int, n_heads: int = 1,
                             n_kv_heads: int | None = None, kv_rank: int | None = None, d_rope: int | None = None,
                             bytes_per_number: int = 2) -> int:
    r"""Bytes a decoder caches per token, over all its layers, for each kind of attention in ``CACHE_KINDS``.

    .. math::

        \text{mha: } L\, h\, (d_k + d_v), \qquad \text{gqa: } L\, h_{kv} (d_k + d_v), \qquad
        \text{mqa: } L\, (d_k + d_v), \qquad \text{mla: } L\, (r + d_R)

    numbers, times ``bytes_per_number``. Latent attention caches one latent of ``r`` numbers and one rotary
    key of :math:`d_R` numbers per token and layer (:class:`attnbook.recent.latent.LatentCache`), whatever
    the heads; the others a key and a value per key-value head.

    Parameters
    ----------
    kind : str
        One of ``CACHE_KINDS``.
    n_layers, d_k, d_v : int
        The layers, and the widths of each head's key and value (``mla`` ignores ``d_k`` and ``d_v``).
    n_heads : int, optional
        The query heads (``mha`` caches a key and a value for each); default 1.
    n_kv_heads : int, optional
        The key-value heads of ``gqa``, dividing ``n_heads``; required there only.
    kv_rank, d_rope : int, optional
        The latent's width and the rotary key's of ``mla``; required there only.
    bytes_per_number : int, optional
        2 for bfloat16 or float16 (default), 4 for float32, 1 for 8-bit formats.

    Returns
    -------
    int
        Bytes per token.

    Examples
    --------
    >>> v3 = dict(n_layers=61, d_k=128 + 64, d_v=128, n_heads=128)
    >>> kv_cache_bytes_per_token("mha", **v3), kv_cache_bytes_per_token("mla", **v3, kv_rank=512, d_rope=64)
    (4997120, 70272)
    >>> kv_cache_bytes_per_token("gqa", **v3)
    Traceback (most recent call last):
    ...
    ValueError: kind 'gqa' needs n_kv_heads, the number of key-value heads
    """
    if kind not in CACHE_KINDS:
        raise ValueError(f"kind must be one of {CACHE_KINDS}, got {kind!r}")
    n_layers = check_positive_int(n_layers, "n_layers")
    d_k, d_v = check_positive_int(d_k, "d_k"), check_positive_int(d_v, "d_v")
    n_heads = check_positive_int(n_heads, "n_heads")
    bytes_per_number = check_positive_int(bytes_per_number, "bytes_per_number")
    if kind == "mha":
        numbers = n_heads * (d_k + d_v)
    elif kind == "mqa":
        numbers = d_k + d_v
    elif kind == "gqa":
        if n_kv_heads is None:
            raise ValueError("kind 'gqa' needs n_kv_heads, the number of key-value heads")
        n_kv_heads = check_positive_int(n_kv_heads, "n_kv_heads")
        if n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads = {n_kv_heads} does not divide n_heads = {n_heads}")
        numbers = n_kv_heads * (d_k + d_v)
    else:
        if kv_rank is None or d_rope is None:
            raise ValueError("kind 'mla' needs kv_rank and d_rope, the widths of the latent and the rotary key")
        numbers = check_positive_int(kv_rank, "kv_rank") + check_positive_int(d_rope, "d_rope", minimum=0)
    return n_layers * numbers * bytes_per_number


def hybrid_cache_bytes(n_tokens: int, n_layers: int, full_every: int, n_kv_heads: int, d_head: int, n_k_heads: int,
                       n_v_heads: int, d_k: int, d_v: int, kernel: int = 1, bytes_per_number: int = 2) -> int:
    r"""Bytes a hybrid decoder caches after ``n_tokens`` tokens: full attention in one layer of ``full_every``, a linear one (delta rule) in the rest.

    .. math::

        \underbrace{L_\text{full}\; t\; h_{kv}\, 2 d_h}_\text{keys and values}
        \;+\; \underbrace{L_\text{lin} \bigl(h_v\, d_k d_v + (\text{kernel} - 1)(2 h_k d_k + h_v d_v)\bigr)}_\text{memories and convolution inputs}

    numbers, times ``bytes_per_number``, with :math:`L_\text{full} = \lfloor L / \text{full\_every} \rfloor`
    (layers ``full_every - 1, 2 full_every - 1, ...``, as Qwen3-Next and Kimi Linear place them) and
    :math:`L_\text{lin} = L - L_\text{full}`. A linear layer keeps one memory :math:`S` of
    :math:`d_k \times d_v` numbers per value head (:func:`attnbook.recent.delta.delta_rule_recurrent`'s
    ``state``) and the last ``kernel - 1`` inputs of its causal short convolution over the queries, keys and
    values, whatever ``n_tokens``; ``full_every = 1`` is the model with full attention in every layer.

    Parameters
    ----------
    n_tokens : int
        The tokens read so far, at least 0.
    n_layers, full_every : int
        The layers, and one full-attention layer in every ``full_every`` (at most ``n_layers``).
    n_kv_heads, d_head : int
        The key-value heads of a full-attention layer and the width of each key and value.
    n_k_heads, n_v_heads, d_k, d_v : int
        The query-key heads and value heads of a linear layer, and their widths; each value head has a memory.
    kernel : int, optional
        The short convolution's kernel (Gated DeltaNet's 4); default 1, no convolution.
    bytes_per_number : int, optional
        2 for bfloat16 (default), 4 for float32.

    Returns
    -------
    int
        Bytes of the cache.

    Examples
    --------
    >>> sizes = dict(n_layers=4, n_kv_heads=1, d_head=2, n_k_heads=1, n_v_heads=1, d_k=2, d_v=2, bytes_per_number=1)
    >>> hybrid_cache_bytes(10, full_every=1, **sizes)         # 4 layers x 10 tokens x (2 + 2)
    160
    >>> hybrid_cache_bytes(10, full_every=4, **sizes)         # 1 x 10 x 4 + 3 memories of 2 x 2
    52
    >>> hybrid_cache_bytes(10, full_every=5, **sizes)
    Traceback (most recent call last):
    ...
    ValueError: full_every = 5 must be at most n_layers = 4
    """
    n_tokens = check_positive_int(n_tokens, "n_tokens", minimum=0)
    n_layers, full_every = check_positive_int(n_layers, "n_layers"), check_positive_int(full_every, "full_every")
    if full_every > n_layers:
        raise ValueError(f"full_every = {full_every} must be at most n_layers = {n_layers}")
    n_kv_heads, d_head = check_positive_int(n_kv_heads, "n_kv_heads"), check_positive_int(d_head, "d_head")
    n_k_heads, n_v_heads = check_positive_int(n_k_heads, "n_k_heads"), check_positive_int(n_v_heads, "n_v_heads")
    d_k, d_v, kernel = check_positive_int(d_k, "d_k"), check_positive_int(d_v, "d_v"), check_positive_int(kernel, "kernel")
    bytes_per_number = check_positive_int(bytes_per_number, "bytes_per_number")
    n_full = n_layers // full_every
    full = n_tokens * n_kv_heads * 2 * d_head  # keys and values of every token, per full layer
    linear = n_v_heads * d_k * d_v + (kernel - 1) * (2 * n_k_heads * d_k + n_v_heads * d_v)  # per linear layer
    return (n_full * full + (n_layers - n_full) * linear) * bytes_per_number
