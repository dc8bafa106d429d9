"""Every use the trainer makes of torch beyond its public API.

Each is done here and nowhere else, so a torch upgrade that changes one breaks this module
only; tests/trainables/training/test_torch_contract.py pins each against the installed torch and
fails, naming it, when one no longer holds.

The assumptions:
- `torch._foreach_norm(tensors, ord)` is the list of each tensor's vector norm, and
  `torch._foreach_mul_(tensors, scalar_tensor)` multiplies each in place; they are what
  `torch.nn.utils.clip_grad_norm_` runs with `foreach` (`_get_total_norm`,
  `_clip_grads_with_norm_`), so clipping through them (trainables/training/optimization.py)
  matches torch's bit for bit (`foreach_norm`, `foreach_mul_`).
"""

from __future__ import annotations

import torch


def foreach_norm(tensors: list[torch.Tensor], ord: float) -> list[torch.Tensor]:
    """Each tensor's vector norm, in one pass over the list."""
    return list(torch._foreach_norm(tensors, ord))


def foreach_mul_(tensors: list[torch.Tensor], factor: torch.Tensor) -> None:
    """Multiply each tensor in place by the 0-dim `factor`."""
    torch._foreach_mul_(tensors, factor)
