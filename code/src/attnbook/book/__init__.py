"""The book's own machinery, not a subject of the book: gluing numbers into the prose and static figures.

- ``attnbook.book.prose``: ``glue_number`` and ``glue_count`` store a computed number for the text
  of a chapter, rounded to the digits every machine agrees on;
- ``attnbook.book.static_widgets``: an interactive figure's every state, precomputed, so that the
  static website can show it without a running kernel.

The chapters import both in their setup cell; a reader studying attention does not need either.
"""
