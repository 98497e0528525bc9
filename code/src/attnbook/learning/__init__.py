"""Learning attention: backward passes, optimisers, decoding, the tasks and the trained models (code/README.md
lists the modules). Import from the modules: ``from attnbook.learning.layers import encoder_layer_vjp``.
"""
