"""Intervals of the mean paired difference: Student's t (the interval of record) and the
percentile bootstrap (a cross-check once there are enough seeds for it to cover as it claims),
and the figures that must sit at the level the comparison is tested at."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import stats

from study.stats import sequential
from study.stats._record import Comparison

POWER = 0.8
BOOTSTRAP_MIN_SEEDS = 10  # below this a percentile bootstrap under-covers badly


def t_interval(diffs: np.ndarray, confidence: float) -> tuple[float, float]:
    """The paired t interval of the mean difference (scipy); a point when every difference is
    the same (no spread to estimate)."""
    mean = float(np.mean(diffs))
    spread = float(np.std(diffs, ddof=1))
    if spread == 0:
        return mean, mean
    scale = spread / math.sqrt(len(diffs))
    low, high = stats.t.interval(confidence, len(diffs) - 1, loc=mean, scale=scale)
    return float(low), float(high)


def bootstrap_ci(diffs: np.ndarray, confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean paired difference, a cross-check of the t interval
    once there are enough seeds for it to cover as it claims."""
    if np.all(diffs == diffs[0]):
        return float(diffs[0]), float(diffs[0])
    result = stats.bootstrap(
        (diffs,),
        np.mean,
        confidence_level=confidence,
        method="percentile",
        n_resamples=9999,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def with_level(
    c: Comparison, diffs: np.ndarray, level: float, one_sided: float, seed: int = 0
) -> Comparison:
    """Intervals and power at the level the comparison is tested at, so that they agree with
    the test: the t interval at 1 - level excludes 0 exactly when p_t < level, and the
    equivalence interval at 1 - 2 x one_sided lies inside ±margin exactly when TOST rejects."""
    low, high = t_interval(diffs, 1 - level)
    tost_low, tost_high = t_interval(diffs, 1 - 2 * one_sided)
    boot = bootstrap_ci(diffs, 1 - level, seed) if len(diffs) >= BOOTSTRAP_MIN_SEEDS else None
    d_margin = c.margin / c.sd_diff if c.sd_diff > 0 else math.inf
    usable = c.margin > 0 and math.isfinite(c.sd_diff)
    return dataclasses.replace(
        c,
        level=level,
        ci_low=low,
        ci_high=high,
        tost_low=tost_low,
        tost_high=tost_high,
        boot_low=boot[0] if boot else math.nan,
        boot_high=boot[1] if boot else math.nan,
        power_at_margin=sequential.paired_power(d_margin, len(diffs), level)
        if usable
        else math.nan,
        seeds_for_margin=sequential.seeds_for_power(d_margin, POWER, level) if usable else None,
    )
