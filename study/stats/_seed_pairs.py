"""A mean over all pairs of seeds, with an interval that respects what is independent.

Comparing fine-tuned models with each other gives one value per *pair* of seeds, but the
pairs are not independent draws: with 5 seeds the 10 pairs share seeds, and a t interval
over the 10 values as if they were 10 draws would be too narrow. The mean over all pairs is a
U-statistic of the seeds, whose variance the jackknife over seeds estimates consistently
(Arvesen 1969): leave one seed out, take the mean over the pairs left, and measure how much
those means spread. The interval is that standard error times Student's t with n - 1
degrees of freedom (n seeds): an approximation, wide at 5 seeds, as it should be.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

import numpy as np
from scipy import stats

MIN_SEEDS = 3  # leaving one seed out must leave at least one pair


def seed_pair_interval(
    values: Mapping[tuple[Hashable, Hashable], float], confidence: float = 0.95
) -> dict[str, float]:
    """`mean` over the pairs, its jackknife-over-seeds interval `low`..`high` at
    `confidence`, `seeds` and `pairs` (NaN bounds below MIN_SEEDS seeds or with a missing
    value, or when some pair of the seeds is not there)."""
    finite = {pair: v for pair, v in values.items() if math.isfinite(v)}
    seeds = sorted({s for pair in finite for s in pair}, key=str)
    out = {"mean": float(np.mean(list(finite.values()))) if finite else math.nan,
           "low": math.nan, "high": math.nan, "seeds": float(len(seeds)),
           "pairs": float(len(finite))}  # fmt: skip
    complete = len(finite) == len(values) == len(seeds) * (len(seeds) - 1) // 2
    if len(seeds) < MIN_SEEDS or not complete:  # every pair once, or the jackknife is off
        return out
    left_out = np.array([
        np.mean([v for pair, v in finite.items() if seed not in pair]) for seed in seeds
    ])  # fmt: skip
    n = len(seeds)
    error = math.sqrt((n - 1) / n * float(np.sum((left_out - left_out.mean()) ** 2)))
    if error == 0:
        out["low"] = out["high"] = out["mean"]
        return out
    low, high = stats.t.interval(confidence, n - 1, loc=out["mean"], scale=error)
    out["low"], out["high"] = float(low), float(high)
    return out
