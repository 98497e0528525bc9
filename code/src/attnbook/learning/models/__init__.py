"""The book's trained models, one module each, on one scaffold (``scaffold``): ``seq2seq`` (an encoder-decoder
that reverses strings), ``vit`` (a Vision Transformer on the digits), ``induction`` (a two-layer model that
forms an induction head), ``induction_gated`` (the same with a gate on each head's output), ``lengths`` (five
position schemes, tested at longer lengths) and ``recall`` (associative recall). Each says how to initialise,
run (taped), score and batch; training and storing are the scaffold's. What the trained models do is
:mod:`attnbook.learning.analysis`.
"""
