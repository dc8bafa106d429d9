"""Holm's step-down, with the level each hypothesis was tested at, so that an interval can be
drawn at the level that agrees with its adjusted p: over plain hypotheses (`holm`), and over
groups of them, one group per primary comparison, so that one family-wise error covers every
kind of verdict a study draws (`holm_by_group`)."""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
from statsmodels.stats.multitest import multipletests

ALPHA = 0.05  # default family-wise level; a study declares its own in `analysis`


def holm(pvalues: Sequence[float], alpha: float = ALPHA) -> tuple[list[float], list[float]]:
    """Holm-adjusted p-values (statsmodels) in input order, and for each hypothesis the
    per-test level Holm's step-down used for it: alpha/(m - j + 1) for the j-th smallest p
    while the steps reject, and the level of the step that stopped for every later one. An
    interval at that level agrees with the adjusted p. NaN stays NaN and is not counted."""
    values = np.asarray(pvalues, float)
    adjusted = np.full(values.shape, np.nan)
    levels = np.full(values.shape, np.nan)
    tested = np.flatnonzero(~np.isnan(values))
    if len(tested) == 0:
        return adjusted.tolist(), levels.tolist()
    with _older_objects_frozen():
        adjusted[tested] = multipletests(values[tested], alpha=alpha, method="holm")[1]
    order = tested[np.argsort(values[tested], kind="stable")]
    m, stopped = len(order), False
    for j, index in enumerate(order):
        level = alpha / (m - j)
        if not stopped and values[index] > level:
            stopped, stop_level = True, level
        levels[index] = stop_level if stopped else level
    return adjusted.tolist(), levels.tolist()


def holm_by_group(
    groups: Sequence[Sequence[float]], alpha: float = ALPHA, weights: Sequence[float] = ()
) -> tuple[list[list[float]], list[list[float]]]:
    """Closed testing over every hypothesis of every group, for groups (one per comparison)
    in which the hypotheses that can be true at once are, tested at a level g, rejected with
    chance at most g: a comparison's t-test (null: difference 0) is true alone; TOST's null
    (|difference| >= margin) is true with one non-inferiority null (<= -margin, or >=
    +margin), and TOST rejects only where that one's p is below g too. Hypothesis i of a group
    is tested at `weights[i]` (1 each unless given) times the group's level, which keeps that
    chance at most g for weights <= 1 (non-inferiority's alpha/2 against alpha).

    Each intersection of true hypotheses is tested by Bonferroni over the groups it touches,
    so one level splits over comparisons, not over kinds of test as well (Holm per kind lets
    each kind spend alpha: 0.063 at 20 seeds for a declared 0.05, docs/statistics.md). The
    shortcut of that closed test is Holm's step-down over the groups, each group standing in
    at its largest weighted p (the hypothesis most likely true): a hypothesis is rejected
    when Holm over its own weighted p in place of its group's would reject it. So a
    comparison frees its share of alpha for the others only when every one of its hypotheses
    is rejected (as 'better' and 'equivalent' both); otherwise the levels stay near alpha /
    comparisons.

    Returns, per group and hypothesis in input order, the adjusted p (on the hypothesis' own
    scale: reject where below weight x alpha) and the level its test was run at (weight x
    the Holm step's level, or the level of the step that stopped), so that p < level exactly
    where adjusted p < weight x alpha. NaN stays NaN, and a group of NaN is no comparison."""
    values = [np.asarray(group, float) for group in groups]
    scale = [np.asarray(weights, float) if len(weights) else np.ones(len(v)) for v in values]
    weighted = [v / w for v, w in zip(values, scale, strict=True)]
    largest = np.array([np.max(v[~np.isnan(v)], initial=-np.inf) for v in weighted])
    steps = np.sort(largest[largest > -np.inf])
    k = len(steps)
    # Holm's adjusted p of the j-th smallest group, not capped at 1 (statsmodels' values,
    # before its cap), so that a weighted hypothesis' adjusted p stays exact; a 0 in front
    # for the hypotheses with no group below them
    running = np.concatenate(([0.0], np.maximum.accumulate((k - np.arange(k)) * steps)))
    stopped = running >= alpha
    stop_level = alpha / (k + 1 - np.argmax(stopped)) if stopped.any() else math.nan
    adjusted, levels = [], []
    for v, w in zip(weighted, scale, strict=True):
        # how many groups lie below this p (never its own: its largest is not below it)
        below = np.searchsorted(steps, np.nan_to_num(v, nan=np.inf), side="left")
        own = np.where(np.isnan(v), np.nan, np.maximum(running[below], (k - below) * v))
        level = np.where(stopped[below], stop_level, alpha / np.maximum(k - below, 1))
        adjusted.append(np.minimum(1.0, w * own).tolist())
        levels.append(np.where(np.isnan(v), np.nan, w * level).tolist())
    return adjusted, levels


@contextmanager
def _older_objects_frozen() -> Iterator[None]:
    """statsmodels' Holm runs a full `gc.collect()` on every call (statsmodels 0.15), about
    70 ms in a process that holds torch and transformers, and a report calls it hundreds of
    times. With the objects that exist before the call frozen, that collection scans only the
    call's own; unfreezing puts them back where the collector sees them, so nothing leaks."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
