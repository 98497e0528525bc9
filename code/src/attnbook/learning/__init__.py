"""Learning attention: backward passes (``gradients``), optimisers (``optim``) and a small training task
(``training``). Import from the modules: ``from attnbook.learning.gradients import attention_backward``.
"""
