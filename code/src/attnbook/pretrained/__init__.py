"""A pretrained model run by the book's own code: all-MiniLM-L6-v2, a 6-layer BERT encoder (code/README.md lists
the modules). Import from the modules: ``from attnbook.pretrained.bert import encode_sentences``.
"""
