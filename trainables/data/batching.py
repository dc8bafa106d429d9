"""Length-grouped batches with dynamic padding.

The order of an epoch is a pure function of (seed, epoch): resuming a trial needs only the
epoch and the number of batches already consumed, not a pickled sampler.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from trainables.data.encoding import IGNORE_INDEX, Window

# Sort within pools of this many batches: long enough to cut padding, short enough that a
# batch still mixes sentences from across the corpus.
POOL_BATCHES = 50


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """One epoch's generator. The mix is taken modulo 2**64, the most torch.manual_seed takes,
    so every seed up to MAX_SEED works; below 2**64 / 1_000_003 (about 1.8e13) it changes
    nothing."""
    return torch.Generator().manual_seed((seed * 1_000_003 + epoch) % 2**64)


def train_batches(
    lengths: Sequence[int], batch_size: int, seed: int, epoch: int
) -> list[list[int]]:
    """Shuffle, sort by length inside pools, cut into batches, shuffle the batches."""
    g = epoch_generator(seed, epoch)
    order = torch.randperm(len(lengths), generator=g).tolist()
    pool = batch_size * POOL_BATCHES
    batches: list[list[int]] = []
    for p in range(0, len(order), pool):
        chunk = sorted(order[p : p + pool], key=lambda i: -lengths[i])
        batches.extend(chunk[b : b + batch_size] for b in range(0, len(chunk), batch_size))
    return [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]


def eval_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Longest first, packed up to a padded token budget: evaluation needs no shuffling."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = lengths[current[0]] if current else lengths[i]
        if current and width * (len(current) + 1) > max_tokens:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def collate(windows: Sequence[Window], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad to the longest window in the batch, not to max_length."""
    width = max(len(w) for w in windows)
    ids = torch.full((len(windows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(windows), width), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(windows), width), dtype=torch.long)
    for row, w in enumerate(windows):
        n = len(w)
        ids[row, :n] = torch.tensor(w.input_ids)
        labels[row, :n] = torch.tensor(w.labels)
        mask[row, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
