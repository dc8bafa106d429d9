"""Test helpers: the tiny encoders of `trainables.model.tiny`, architectures, random batches."""

from __future__ import annotations

import torch

from trainables.model.tiny import (  # noqa: F401  (re-exported for the tests)
    HEADS,
    HIDDEN,
    MODEL_TYPES,
    VOCAB_SIZE,
    tiny_config,
    tiny_encoder,
    tiny_model_folder,
    tiny_tokenizer,
)
from trainables.settings.config import Architecture, TrialConfig


def arch(**settings: object) -> Architecture:
    """What `build_tagger` builds from these trial settings (the rest at their defaults)."""
    return TrialConfig(**settings).architecture()  # type: ignore[arg-type]


def sample_batch(
    batch: int = 2, length: int = 7, *, vocab_size: int = VOCAB_SIZE, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids (avoiding the low ids used for special/pad tokens) and a mask with padding
    in the last row, so tests exercise masked positions too."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, vocab_size, (batch, length), generator=generator)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    if batch > 1 and length > 2:
        attention_mask[-1, -2:] = 0
    return input_ids, attention_mask
