"""Attention since 2024: latent, gated, delta-rule, sparse and sink-aware attention, each equal to the reference
implementation of a model that uses it (code/README.md lists the modules). Import from the modules:
``from attnbook.recent.latent import latent_attention``.
"""
