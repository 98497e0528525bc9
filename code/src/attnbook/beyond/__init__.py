"""Attention beyond text: convolution as attention heads, relative-position scores, image patches and grid
masks (``modalities``). Import from the module: ``from attnbook.beyond.modalities import conv1d``.
"""
