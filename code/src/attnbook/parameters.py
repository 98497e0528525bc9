"""Counting the learned parameters of an encoder-decoder Transformer, part by part.

With the sizes of Vaswani et al. (2017), Table 3, and a shared source/target vocabulary of about
37,000 byte-pair tokens (their English-German setting), the counts come to about 63 M for the base
model and 214 M for the big one; the paper reports 65 M and 213 M. The chapter on the Transformer
examines the gap: no single vocabulary size reproduces both reported figures, and sharing choices
or rounding do not close it.

>>> counts = transformer_parameter_count(d_model=512, d_ff=2048, n_heads=8, n_layers=6, vocab_size=37000)
>>> round(counts["total"] / 1e6, 1)
63.1
"""

from __future__ import annotations

from .multihead import count_multi_head_parameters
from .validation import check_positive_int

__all__ = ["transformer_parameter_count"]


def transformer_parameter_count(d_model: int, d_ff: int, n_heads: int, n_layers: int, vocab_size: int,
                                n_decoder_layers: int | None = None, shared_embeddings: bool = True,
                                tied_output: bool = True) -> dict[str, int]:
    """Parameter counts of a post-norm encoder-decoder Transformer with biases, by part, and their total.

    ``shared_embeddings``: one embedding matrix for source and target tokens (as in the paper's
    shared BPE vocabulary); ``tied_output``: the pre-softmax projection reuses that matrix.
    Sinusoidal positional encodings have no parameters.

    >>> transformer_parameter_count(512, 2048, 8, 6, 0)
    Traceback (most recent call last):
    ...
    ValueError: vocab_size must be at least 1, got 0
    """
    d_model = check_positive_int(d_model, "d_model")
    d_ff = check_positive_int(d_ff, "d_ff")
    n_layers = check_positive_int(n_layers, "n_layers")
    vocab_size = check_positive_int(vocab_size, "vocab_size")
    for name, flag in (("shared_embeddings", shared_embeddings), ("tied_output", tied_output)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be True or False, got {flag!r}")
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
