"""Embedding gradients written into one kept buffer on CPU, touching only the rows a batch used.

torch's embedding backward makes a dense zero-filled gradient of the whole table at every
step (30522 x 384, 47 MB, for MiniLM's word embeddings) and adds a batch's few hundred rows
into it; the optimizer step then frees it. On one thread of the 2-core CPU that zero fill and
scatter cost 5.7 ms, against 0.45 ms for zeroing only the rows the previous step wrote and
adding the new ones into the same buffer. At two threads, when the other core is busy, the
dense fill waits on it: 19-24 ms.

The gradient is the same tensor bit for bit: rows are added in the same order as torch's CPU
kernel adds them (tests/trainables/model/test_embedding_gradient.py compares the two), the
padding row gets none, and every row the batch did not use is exactly zero. AdamW still sees
a dense gradient, so its update of every row (momentum, weight decay) is unchanged.

Gradient clipping reads and scales only the rows a step wrote (`gradient_rows`, used by
trainables/training/optimization.py where a row's width lets that be bit for bit): the norm
of the whole table and its multiply by the clipping factor were two more passes over the
47 MB (3.6 ms of norm on one AVX2 thread, against 0.11 ms over the used rows).

What it relies on: nothing keeps a reference to a gradient across `zero_grad(set_to_none=True)`
(the buffer is reused on the next backward), and the only in-place changes to a gradient are
scalings (clipping), which keep unused rows at zero. Elsewhere than CPU, in evaluation and
for frozen tables, the plain lookup runs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class _Lookup(torch.autograd.Function):
    """`F.embedding` whose backward hands the gradient to its module instead of autograd."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor, ids: torch.Tensor, table: RowGradientEmbedding):
        ctx.table = table
        ctx.save_for_backward(ids)
        return F.embedding(ids, weight, table.padding_idx)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        (ids,) = ctx.saved_tensors
        ctx.table.add_gradient(ids, grad_output)
        return None, None, None  # weight.grad is set by add_gradient


class RowGradientEmbedding(nn.Embedding):
    """An `nn.Embedding` (same weight Parameter, same state-dict keys) whose CPU training
    gradient lives in one buffer that only the used rows are written to and cleared from."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        weight = self.weight
        if weight.device.type != "cpu" or not (weight.requires_grad and torch.is_grad_enabled()):
            return super().forward(ids)
        return _Lookup.apply(weight, ids, self)

    def add_gradient(self, ids: torch.Tensor, grad_output: torch.Tensor) -> None:
        rows = ids.reshape(-1)
        values = grad_output.reshape(-1, grad_output.shape[-1]).to(self.weight.dtype)
        if self.padding_idx is not None:
            used = rows != self.padding_idx
            rows, values = rows[used], values[used]
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # hundreds of row-sized adds: a parallel region each
        try:
            self._add_rows(rows, values)
        finally:
            torch.set_num_threads(threads)

    def gradient_rows(self) -> torch.Tensor | None:
        """The rows of `weight.grad` that may be non-zero (ascending, once each) while the
        gradient is this table's buffer; None when it is not, and any row may be."""
        grad = self.weight.grad
        if grad is None or grad is not getattr(self, "_buffer", None):
            return None
        return torch.unique(self._written)

    def _add_rows(self, rows: torch.Tensor, values: torch.Tensor) -> None:
        weight, grad = self.weight, self.weight.grad
        buffer: torch.Tensor | None = getattr(self, "_buffer", None)
        if grad is None:
            if buffer is None or buffer.shape != weight.shape or buffer.dtype != weight.dtype:
                buffer = self._buffer = torch.zeros_like(weight)
            else:
                buffer.index_fill_(0, self._written, 0.0)
            self._written = rows
            weight.grad = buffer.index_add_(0, rows, values)
            return
        # a gradient is there already (a second lookup before the optimizer step): autograd
        # would add this lookup's whole gradient to it, so its rows are summed apart first
        used, where = torch.unique(rows, return_inverse=True)
        summed = values.new_zeros(len(used), values.shape[1]).index_add_(0, where, values)
        grad.index_add_(0, used, summed)
        if grad is buffer:
            self._written = torch.cat([self._written, used])


def row_gradient_tables(model: nn.Module) -> dict[int, RowGradientEmbedding]:
    """The turned tables of `model`, by `id` of their weight Parameter."""
    return {id(m.weight): m for m in model.modules() if isinstance(m, RowGradientEmbedding)}


def use_row_gradient_embeddings(model: nn.Module) -> int:
    """Turn every plain `nn.Embedding` inside `model` (not sparse, no max_norm, no frequency
    scaling) into a `RowGradientEmbedding` in place; returns how many were turned."""
    turned = 0
    for module in model.modules():
        if type(module) is not nn.Embedding:
            continue
        if not (module.sparse or module.max_norm is not None or module.scale_grad_by_freq):
            module.__class__ = RowGradientEmbedding
            turned += 1
    return turned
