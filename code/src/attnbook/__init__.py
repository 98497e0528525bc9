"""attnbook: the attention package of the executable textbook.

One implementation, imported by every chapter and reused by every exercise check.

>>> import numpy as np
>>> from attnbook import scaled_dot_product_attention, causal_mask
>>> out, w = scaled_dot_product_attention(np.eye(3), np.eye(3), np.eye(3), mask=causal_mask(3))
>>> print(np.round(w, 3))
[[1.    0.    0.   ]
 [0.36  0.64  0.   ]
 [0.264 0.264 0.471]]
"""

from .attention import AttentionResult, attention_scores, scaled_dot_product_attention
from .masks import causal_mask
from .normalizers import relu_weights
from .plotting import COLOUR_MAP, figure_to_img_html, plot_convex_combination, plot_heatmap
from .projections import self_attention
from .softmax import softmax, softmax_jacobian
from .statistics import DotProductVariance, dot_product_variance

__version__ = "0.1.0"

__all__ = [
    "AttentionResult",
    "COLOUR_MAP",
    "DotProductVariance",
    "attention_scores",
    "causal_mask",
    "dot_product_variance",
    "figure_to_img_html",
    "plot_convex_combination",
    "plot_heatmap",
    "relu_weights",
    "scaled_dot_product_attention",
    "self_attention",
    "softmax",
    "softmax_jacobian",
]
