"""The book's figures: heatmaps and convex combinations (``plotting``), figures as accessible ``<img>`` tags,
and the figures of the trained models (``vit``). Everything that imports matplotlib lives here; the models
and measurements return numbers. Import from the modules: ``from attnbook.figures.plotting import plot_heatmap``.
"""
