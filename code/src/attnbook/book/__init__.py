"""The book's own machinery, not a subject of the book: numbers glued into the prose (``prose``) and interactive
figures precomputed for the static website (``static_widgets``); the chapters import both in their setup cell.
"""
