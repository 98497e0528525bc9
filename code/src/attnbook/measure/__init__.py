"""Measuring attention: what it costs and what it depends on, in closed forms and by experiment.

``counts`` (multiply-adds, (query, key) pairs, sequential operations, path lengths, parameters, KV-cache
bytes), ``probes`` (which output depends on which input: perturbations, Jacobians, influence) and
``timing`` (one timer, log-log slopes, the benchmark's figures). Import from the modules:
``from attnbook.measure.counts import self_attention_macs``.
"""
