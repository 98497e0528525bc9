"""What the comparisons with Hugging Face transformers share: its modules run in float64, their weights as
this package's matrices, rotary tables and masks in the layouts the modules take.

transformers computes norms, softmaxes and the delta-rule kernels in float32 on purpose (an upcast from
bfloat16); in float64 that cast is a downcast, which would bound every comparison near 1e-7. The fixture
``float64_reference`` maps float32 to float64 while a module runs, so the module's own code runs unchanged in
float64; nothing else of it is replaced.
"""

import numpy as np
import pytest

try:
    import torch
except ImportError:  # optional for readers; CI must have it (the transformers marker, code/tests/conftest.py)
    torch = None


@pytest.fixture
def float64_reference(monkeypatch):
    """transformers' float32 casts made float64 for the test (``torch.float32``, ``torch.float``, ``Tensor.float``)."""
    monkeypatch.setattr(torch, "float32", torch.float64)
    monkeypatch.setattr(torch, "float", torch.float64)
    monkeypatch.setattr(torch.Tensor, "float", lambda self, *args, **kwargs: self.to(torch.float64))
    torch.manual_seed(0)


def matrix(linear) -> np.ndarray:
    """An ``nn.Linear``'s weight as this package's ``(d_in, d_out)`` matrix (torch computes ``x W^T``)."""
    return linear.weight.detach().numpy().T.copy()


def array(tensor) -> np.ndarray:
    return tensor.detach().numpy().copy()


def rotary_tables(frequencies: np.ndarray, positions: np.ndarray, batch: int, twice: bool = True):
    """``(cos, sin)`` as transformers' rotary classes return them, ``(batch, n, d)`` with the angles twice
    (``(batch, n, d / 2)``, once, for gpt-oss), computed in float64 from the frequencies the package is given."""
    angles = positions[:, None] * frequencies[None, :]  # (n, d / 2)
    angles = np.concatenate([angles, angles], axis=-1) if twice else angles  # (n, d)
    cos, sin = (torch.tensor(np.broadcast_to(f(angles), (batch,) + angles.shape).copy()) for f in (np.cos, np.sin))
    return cos, sin


def additive_mask(allowed: np.ndarray, batch: int):
    """A boolean ``(n_q, n_k)`` mask as the ``(batch, 1, n_q, n_k)`` additive float64 mask the modules take."""
    bias = np.where(allowed, 0.0, np.finfo(np.float64).min)  # (n_q, n_k)
    return torch.tensor(np.broadcast_to(bias, (batch, 1) + bias.shape).copy())
