"""Measuring attention: what it costs and what it depends on, in closed forms and by experiment (code/README.md
lists the modules). Import from the modules: ``from attnbook.measure.counts import self_attention_macs``.
"""
