"""Holm's step-down over the primary comparisons, with the level each hypothesis was tested
at, so that an interval can be drawn at the level that agrees with its adjusted p."""

from __future__ import annotations

import gc
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
