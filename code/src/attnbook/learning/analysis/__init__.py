"""What the trained models are asked after training, one module per model: the reversal model's decoders
(``seq2seq_decoder``) and alignment and speed (``seq2seq``), the Vision Transformer's attention (``vit``), the
induction model's heads, probe and per-position losses (``induction``), the recall model's learning curve
(``recall``) and the length model's runs per position scheme (``lengths``). The stored models'
training runs, which record some of these measurements, are :mod:`attnbook.learning.trained`.
"""
