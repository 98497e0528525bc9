"""Sphinx extensions of the book build, named in _config.yml (``sphinx.extra_extensions``)."""
