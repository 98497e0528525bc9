"""The PyTorch side of `make bench`'s pretrained-model section: Hugging Face's ``BertModel`` on the files of
all-MiniLM-L6-v2 that ``attnbook.pretrained`` reads (hash-checked by it), on the CPU in float32, in inference mode.

Two configurations: transformers' default (scaled dot-product attention, the last layer's states only), its
fastest forward pass; and eager attention returning every layer's states and every head's weights, which is what
``attnbook.pretrained.bert.bert_forward`` computes and returns. ``code/tests/pretrained/test_bert_transformers.py``
checks the two models give the same numbers. Imported as ``torch_minilm`` by `benchmarks/run.py`.
"""

from __future__ import annotations

import numpy as np
import torch

from attnbook.pretrained.files import checked_file, model_folder

__all__ = ["MODES", "forward_call"]

#: transformers' configurations: {name: (attention implementation, return every layer's states and weights)}
MODES = {"torch_sdpa": ("sdpa", False), "torch_eager_all_outputs": ("eager", True)}


def forward_call(mode: str, ids: np.ndarray, mask: np.ndarray):
    """A zero-argument call of BertModel's forward pass on ``ids`` ``(batch, n)`` and ``mask``, and its last states."""
    from transformers import BertModel

    for name in ("model.safetensors", "config.json"):  # the files BertModel reads, checked as the package's are
        checked_file(name)
    implementation, outputs = MODES[mode]
    model = BertModel.from_pretrained(str(model_folder()), attn_implementation=implementation,
                                      local_files_only=True).eval()
    ids_t, mask_t = torch.from_numpy(ids), torch.from_numpy(mask.astype(np.int64))

    def call():
        with torch.inference_mode():
            return model(input_ids=ids_t, attention_mask=mask_t, output_hidden_states=outputs,
                         output_attentions=outputs)

    return call, call().last_hidden_state.numpy()
