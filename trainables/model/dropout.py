"""Dropout whose masks cost a third of torch's on CPU, with the same Bernoulli(1 - p) keep rule.

On a CPU that is not Intel's, torch draws a dropout mask one element at a time on one thread
(each a 64-bit draw of the global mt19937 turned into a double and compared with p). For a
MiniLM step (batch 16 x ~40 tokens, 14 hidden-state masks of 16 x 40 x 384) that was about 9%
of a bf16 step on one thread and more on two, where everything else runs in parallel. Here a
mask is 32 random bits per element from the same global generator, drawn 64 bits at a time
(`random_` over the full int64 range), and an element is kept when its bits are at or above
p·2³² (as a signed threshold): keep probability 1 - p to within 2⁻³², against 2⁻²⁴ for
`torch.rand(...) >= p`. Measured on the 2-core CPU in docs/benchmarks.md: mask + forward +
backward of a 16 x 40 x 384 bf16 dropout 0.80 ms instead of 1.30 ms of CPU time.

The masks differ from torch's for the same seed, so a trial's numbers differ from those of
the code before this module; they remain a function of the seed alone, and the draws come
from the global generator that trainables/training/train.py seeds and saves in checkpoints, so a
resumed trial continues the same stream. Elsewhere (CUDA) torch's own fused dropout is used.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from trainables.model import hf_internals

_WORD_BITS = 32


def keep_mask(shape: torch.Size, p: float, device: torch.device) -> torch.Tensor:
    """A bool tensor: True with probability 1 - p, independently per element."""
    n = shape.numel()
    words = torch.empty((n + 1) // 2, dtype=torch.int64, device=device)
    words.random_(-(2**63), None)  # the full int64 range: 64 uniform bits per word
    bits = words.view(torch.int32)[:n].view(shape)
    threshold = round(p * 2**_WORD_BITS) - 2 ** (_WORD_BITS - 1)
    return bits >= threshold


def mask_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """`F.dropout(x, p, training)` with `keep_mask`'s masks on CPU; the kept values are scaled
    by 1 / (1 - p) in x's dtype, as torch's CPU dropout does."""
    if not training or p == 0.0 or x.device.type != "cpu":
        return F.dropout(x, p, training)
    if p >= 1.0:
        return x * 0.0
    return x * mask_values(keep_mask(x.shape, p, x.device), x.dtype).div_(1.0 - p)


def mask_values(keep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`keep.to(dtype)`, the same 0s and 1s, through its bytes: torch converts a bool tensor to
    bf16 element by element, about 8 times slower than the same bytes as uint8 (0.20 against
    0.03 ms for a 16 x 40 x 384 mask on one thread; 20 masks a MiniLM step)."""
    return keep.view(torch.uint8).to(dtype)


class MaskDropout(nn.Dropout):
    """An `nn.Dropout` (same `p`, same train/eval switch) drawing its masks with `keep_mask`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return mask_dropout(x, self.p, self.training)


def use_mask_dropout(model: nn.Module) -> int:
    """Replace every plain `nn.Dropout` inside `model` by a `MaskDropout` of the same `p`;
    returns how many were replaced."""
    replaced = 0
    for parent in model.modules():
        for name, child in list(parent.named_children()):
            if type(child) is nn.Dropout:
                setattr(parent, name, MaskDropout(child.p).train(child.training))
                replaced += 1
    return replaced


# --- attention-probability dropout -------------------------------------------------------------
ATTENTION = "sdpa_mask_dropout"  # the name registered with transformers' AttentionInterface


def attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """transformers' `sdpa` attention, except in training on CPU with dropout: there torch's
    SDPA falls back to its fp32 math path with a torch mask, and this computes the same
    softmax(q·kᵀ·scaling + mask) · v with autocast's matmuls and a `keep_mask` on the
    probabilities."""
    sdpa_attention_forward = hf_internals.sdpa_attention()
    plain = not kwargs.get("position_bias") and getattr(module, "num_key_value_groups", 1) == 1
    if dropout == 0.0 or not module.training or query.device.type != "cpu" or not plain:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            attention_mask = torch.zeros_like(scores).masked_fill_(~attention_mask, -torch.inf)
        scores = scores + attention_mask
    probs = mask_dropout(torch.softmax(scores, dim=-1), dropout, True)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), None


def use_mask_attention_dropout(encoder: nn.Module) -> bool:
    """Switch an encoder that attends through `sdpa` to `attention`; False where it does not
    (its attention probabilities then keep torch's dropout)."""
    if hf_internals.attention_of(getattr(encoder, "config", None)) != "sdpa":
        return False
    hf_internals.register_attention(ATTENTION, attention)  # with sdpa's padding mask
    encoder.set_attn_implementation(ATTENTION)
    return True
