"""The optimizer side of a trial: its step budget, AdamW with a head learning rate under warmup
and decay, and gradient clipping. Used by `trainables.training.train.Trial`."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from trainables.model.embedding_gradient import RowGradientEmbedding
from trainables.model.tagger import Tagger, param_groups
from trainables.settings.config import TrialConfig
from trainables.training.torch_internals import foreach_mul_, foreach_norm


def lr_multiplier(schedule: str, warmup: int, total: int):
    """Learning-rate factor per step: linear warmup, then linear/cosine decay or constant."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        if schedule == "linear":
            return max(0.0, 1.0 - progress)
        if schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return 1.0

    return factor


def step_budget(cfg: TrialConfig, train_windows: int) -> tuple[int, int]:
    """Batches per epoch and optimizer steps at most (what the lr schedule spans): `epochs`
    of them, or the `budget`'s steps, or its `until_plateau.max_epochs`, capped by
    `max_steps` (trainables/settings/budget.py)."""
    batches_per_epoch = math.ceil(train_windows / cfg.batch_size)
    return batches_per_epoch, cfg.planned_steps(batches_per_epoch)


def make_optimizer(
    model: Tagger, cfg: TrialConfig, device: torch.device, total_steps: int
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW with its own learning rate for the head, under warmup and decay to `total_steps`."""
    # the fused kernel updates all parameters in one pass: on CPU the default per-tensor
    # loop costs about a sixth of a MiniLM step; results stay deterministic
    optimizer = torch.optim.AdamW(
        param_groups(model, cfg.lr, cfg.head_lr, cfg.weight_decay),
        fused=device.type in ("cpu", "cuda"),
    )
    warmup = int(cfg.warmup_ratio * total_steps)
    schedule = lr_multiplier(cfg.schedule, warmup, total_steps)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


# A table's norm over its written rows alone equals torch's over the whole table only when
# each element falls in the same running sum of torch's vectorised reduction in both, that
# is when a row's width is a multiple of the sums' span (8 floats on AVX2; 64 is kept for
# wider vectors). On AVX2, at 1 and 2 threads, 0 of 100-200 random tables differed at widths
# 32 to 768 that are multiples of 8, and 37-46% did at widths 5, 12, 36 and 100.
ROW_SPAN = 64


def clip_gradients(
    parameters: list[torch.nn.Parameter],
    max_norm: float,
    tables: Mapping[int, RowGradientEmbedding] | None = None,
) -> None:
    """`torch.nn.utils.clip_grad_norm_` (foreach, one device and dtype, as a trial's
    gradients are), bit for bit, with passes left out that change nothing:
    - no multiply of every gradient by exactly 1.0 when the norm is already within
      `max_norm`: a pass over all 22.6M MiniLM gradients (3.4 ms of a ~145 ms bf16 step on
      one thread) on about two thirds of the steps;
    - a table's row gradient (`tables`, by id of its weight: trainables/model/embedding_gradient.py)
      is normed and scaled over the rows its step wrote, the others being exactly zero, when
      its width is a multiple of `ROW_SPAN` (MiniLM's 384, BERT's 768): the word table is half
      of MiniLM's parameters. Other widths take the whole table.
    A NaN norm makes every gradient NaN, as torch does, but a table's unwritten rows stay 0."""
    tables = tables or {}
    grads = [p.grad for p in parameters if p.grad is not None]
    rows = [written_rows(p, tables) for p in parameters if p.grad is not None]
    dense = [g for g, r in zip(grads, rows, strict=True) if r is None]
    dense_norms = iter(foreach_norm(dense, 2.0) if dense else [])
    norms = [
        next(dense_norms) if r is None else torch.linalg.vector_norm(g.index_select(0, r))
        for g, r in zip(grads, rows, strict=True)
    ]
    if not norms:
        return
    norm = torch.linalg.vector_norm(torch.stack(norms), 2.0)
    factor = max_norm / (norm + 1e-6)  # torch's own factor; NaN still multiplies
    if bool(factor >= 1.0):
        return
    factor = torch.clamp(factor, max=1.0)
    if dense:
        foreach_mul_(dense, factor)
    for g, r in zip(grads, rows, strict=True):
        if r is not None:
            g.index_copy_(0, r, g.index_select(0, r).mul_(factor))


def written_rows(
    param: torch.nn.Parameter, tables: Mapping[int, RowGradientEmbedding]
) -> torch.Tensor | None:
    """The rows of `param`'s gradient that clipping reads alone, or None for all of it."""
    table = tables.get(id(param))
    if table is None or param.dim() != 2 or param.shape[1] % ROW_SPAN:
        return None
    return table.gradient_rows()
