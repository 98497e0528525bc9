"""Efficient attention: the same numbers as the reference, computed with less memory or time.

``online_softmax`` (the running-max recurrence), ``tiled`` (FlashAttention-style tiles),
``banded`` (only the band of a banded mask), ``kv_cache`` (autoregressive decoding) and
``batched`` (the chunked multi-core fast path of scaled dot-product attention). Import from the
modules: ``from attnbook.efficient.tiled import tiled_attention``.
"""
