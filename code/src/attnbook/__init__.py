"""attnbook: the attention package of the executable textbook.

The core is this folder's modules; the companions, folders named by their job, use the core, never the
other way round (code/README.md describes every module).

>>> import numpy as np
>>> from attnbook import scaled_dot_product_attention, causal_mask
>>> out, w = scaled_dot_product_attention(np.eye(3), np.eye(3), np.eye(3), mask=causal_mask(3))
>>> print(np.round(w, 3))
[[1.    0.    0.   ]
 [0.36  0.64  0.   ]
 [0.264 0.264 0.471]]
"""

from importlib.metadata import PackageNotFoundError, version

from .attention import AttentionResult, attention_scores, scaled_dot_product_attention, self_attention
from .masks import banded_mask, causal_mask, graph_mask, padding_mask
from .multihead import (
    MultiHeadWeights,
    init_multi_head_weights,
    merge_heads,
    multi_head_attention,
    multi_head_weights_from_torch,
    split_heads,
)
from .modern import (
    DecoderBlockWeights,
    SwiGLUWeights,
    decoder_block,
    init_decoder_block,
    init_swiglu_feed_forward,
    rms_norm,
    swiglu_feed_forward,
)
from .positional import (
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    rotary_decay_bound,
    rotary_frequencies,
    rotary_scores,
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_shift_matrix,
    yarn_attention_factor,
)
from .recurrent import rnn_forward
from .softmax import relu_weights, softmax, softmax_jacobian
from .transformer import (
    DecoderLayerWeights,
    EncoderLayerWeights,
    FeedForwardWeights,
    decoder_layer,
    encoder_layer,
    feed_forward,
    gelu,
    init_decoder_layer,
    init_encoder_layer,
    init_feed_forward,
    layer_norm,
)

# companions re-exported for the chapters that import them from the package (the one place the core's
# package imports a companion; no module of the package imports the package itself)
from .figures.plotting import COLOUR_MAP, figure_to_img_html, plot_convex_combination, plot_heatmap  # noqa: E402
from .measure.parameters import count_multi_head_parameters, transformer_parameter_count  # noqa: E402
from .measure.probes import DotProductVariance, dot_product_variance  # noqa: E402

try:
    __version__ = version("attnbook")
except PackageNotFoundError:  # the sources imported without installing them (e.g. a bare copy in Pyodide)
    __version__ = "0+unknown"

__all__ = [
    "AttentionResult",
    "COLOUR_MAP",
    "DecoderBlockWeights",
    "DecoderLayerWeights",
    "DotProductVariance",
    "EncoderLayerWeights",
    "FeedForwardWeights",
    "MultiHeadWeights",
    "SwiGLUWeights",
    "alibi_bias",
    "alibi_slopes",
    "apply_rotary",
    "attention_scores",
    "banded_mask",
    "causal_mask",
    "count_multi_head_parameters",
    "decoder_block",
    "decoder_layer",
    "dot_product_variance",
    "encoder_layer",
    "feed_forward",
    "figure_to_img_html",
    "gelu",
    "graph_mask",
    "init_decoder_block",
    "init_decoder_layer",
    "init_encoder_layer",
    "init_feed_forward",
    "init_multi_head_weights",
    "init_swiglu_feed_forward",
    "layer_norm",
    "merge_heads",
    "multi_head_attention",
    "multi_head_weights_from_torch",
    "padding_mask",
    "plot_convex_combination",
    "plot_heatmap",
    "relu_weights",
    "rms_norm",
    "rotary_decay_bound",
    "rotary_frequencies",
    "rotary_scores",
    "rnn_forward",
    "scaled_dot_product_attention",
    "self_attention",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "sinusoidal_shift_matrix",
    "softmax",
    "softmax_jacobian",
    "split_heads",
    "swiglu_feed_forward",
    "transformer_parameter_count",
    "yarn_attention_factor",
]

# the book's builds draw every figure a kernel shows in the book's other languages too (figures/languages.py)
from .figures.languages import install_formatter as _install_figure_translations  # noqa: E402

_install_figure_translations()
