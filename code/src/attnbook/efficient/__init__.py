"""Efficient attention: the same numbers as the reference, computed with less memory or time (code/README.md
lists the modules). Import from the modules: ``from attnbook.efficient.tiled import tiled_attention``.
"""
