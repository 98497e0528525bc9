"""Text for the models that read and write it: the book's corpus (``text.corpus``), its tokens (``text.bpe``)."""
