"""Take a layer fingerprint of an encoder on the dynamics sample (torch: the trainable's side).

One forward pass per batch, measured as the layer dynamics measure (eval mode, eager
attention, no gradients). Only real tokens are kept: padding rows, padding keys and
sentences without a real token never reach the file. Under a size cap the sample's last
sentences are dropped until the rest fits, and the fingerprint says how many it kept of how
many, so the sample stays the same prefix for every trial of a study.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from trainables.measures.dynamics import Batch, encoder_outputs
from trainables.measures.fingerprints.record import (
    HALF,
    LayerFingerprint,
    kept_counts,
    sentences_within,
)
from trainables.settings.config import TrialConfig
from trainables.settings.sizes import parse_size

log = logging.getLogger(__name__)


def take_fingerprint(
    encoder: nn.Module, sample: Sequence[Batch], cfg: TrialConfig
) -> tuple[LayerFingerprint | None, dict[str, float]]:
    """A trial's final fingerprint under its cap, and what it cost: `fingerprint_bytes` (0
    when the cap holds no sentence), `fingerprint_sentences` and `fingerprint_s`."""
    started = time.perf_counter()
    cap = cfg.fingerprint_max_bytes
    kept = capture(encoder, sample, None if cap is None else parse_size(cap), cfg.model)
    if kept is None:
        log.warning("fingerprint_max_bytes %s holds no sentence: no fingerprint kept", cap)
    return kept, {**kept_counts(kept), "fingerprint_s": time.perf_counter() - started}


def capture(
    encoder: nn.Module, batches: Sequence[Batch], max_bytes: int | None = None, model: str = ""
) -> LayerFingerprint | None:
    """The fingerprint of `encoder` on `batches`, or None when not one sentence fits
    `max_bytes` (or the sample has none)."""
    lengths = [int(n) for batch in batches for n in batch["attention_mask"].sum(1) if n > 0]
    kept = _Kept()
    outputs = encoder_outputs(encoder, batches)
    with contextlib.closing(outputs):  # stopping early gives the model its modes back now
        for (attn, states, mask), batch in zip(outputs, batches, strict=False):
            if kept.limit is None:  # the shapes are known once the first batch ran
                features = states[0].shape[-1]
                kept.limit = sentences_within(lengths, len(attn), attn[0].shape[1], features,
                                              max_bytes)  # fmt: skip
            for row in range(mask.shape[0]):
                if kept.full:
                    break
                kept.add(batch["input_ids"][row], mask[row], [s[row] for s in states],
                         [a[row] for a in attn])  # fmt: skip
            if kept.full:
                break
    if not kept.ids:
        return None
    meta = {"model": model, "sample_sentences": str(len(lengths))}
    return LayerFingerprint.from_arrays(
        [np.concatenate(h) for h in kept.hidden],
        [np.concatenate(a, axis=1) for a in kept.attention],
        [len(i) for i in kept.ids],
        np.concatenate(kept.ids),
        meta,
    )


class _Kept:
    """The sentences kept so far: per layer, their real tokens' rows and maps in half
    precision."""

    def __init__(self) -> None:
        self.limit: int | None = None
        self.ids: list[np.ndarray] = []
        self.hidden: list[list[np.ndarray]] = []
        self.attention: list[list[np.ndarray]] = []

    @property
    def full(self) -> bool:
        return self.limit is not None and len(self.ids) >= self.limit

    def add(
        self, ids: torch.Tensor, mask: torch.Tensor, states: list[torch.Tensor],
        attention: list[torch.Tensor],
    ) -> None:  # fmt: skip
        """One sentence: its hidden states [tokens, features] and attention [heads, q, k]."""
        real = mask.bool()
        if not real.any():
            return
        self.ids.append(ids[real].numpy())
        real = real.to(states[0].device)
        self.hidden = self.hidden or [[] for _ in states]
        self.attention = self.attention or [[] for _ in attention]
        for kept, state in zip(self.hidden, states, strict=True):
            kept.append(_half(state[real]))
        for kept, maps in zip(self.attention, attention, strict=True):
            maps = maps[:, real][:, :, real]
            kept.append(_half(maps.reshape(maps.shape[0], -1)))


def _half(values: torch.Tensor) -> np.ndarray:
    return values.detach().to("cpu", torch.float16).numpy().astype(HALF, copy=False)
