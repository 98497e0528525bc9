"""Learning attention: backward passes (``gradients``; ``layers``, of every layer of a Transformer),
optimisers on parameter trees (``optim``), a training loop (``loop``) and two small training tasks
(``training``, ``lengths``). Import from the modules: ``from attnbook.learning.layers import encoder_layer_vjp``.
"""
