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
SD_CONFIDENCE = 0.8  # the sd's interval over which the seeds needed are given as a range


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


def sd_interval(sd: float, df: int, confidence: float = SD_CONFIDENCE) -> tuple[float, float]:
    """The chi-square interval of a normal sample's sd from its estimate with df degrees of
    freedom: (df s^2 / chi2_(1 - a/2), df s^2 / chi2_(a/2)) square rooted (scipy)."""
    tail = (1 - confidence) / 2
    low, high = stats.chi2.isf(tail, df), stats.chi2.ppf(tail, df)
    return sd * math.sqrt(df / low), sd * math.sqrt(df / high)


def with_level(
    c: Comparison, diffs: np.ndarray, level: float, one_sided: float, seed: int = 0
) -> Comparison:
    """Intervals and power at the level the comparison is tested at, so that they agree with
    the test: the t interval at 1 - level excludes 0 exactly when p_t < level, and the
    equivalence interval at 1 - 2 x one_sided lies inside ±margin exactly when TOST rejects.
    Without a margin in the metric's units there is no TOST interval and no power."""
    low, high = t_interval(diffs, 1 - level)
    has_margin = not math.isnan(c.margin)
    tost = t_interval(diffs, 1 - 2 * one_sided) if has_margin else (math.nan, math.nan)
    boot = bootstrap_ci(diffs, 1 - level, seed) if len(diffs) >= BOOTSTRAP_MIN_SEEDS else None
    out = dataclasses.replace(
        c,
        level=level,
        equivalence_level=one_sided if has_margin else math.nan,
        ci_low=low,
        ci_high=high,
        tost_low=tost[0],
        tost_high=tost[1],
        boot_low=boot[0] if boot else math.nan,
        boot_high=boot[1] if boot else math.nan,
    )
    return _with_power(out, len(diffs), level)


def _with_power(c: Comparison, n: int, level: float) -> Comparison:
    """Power against a true difference of one margin at the observed sd, and the seeds that
    80% power needs: at the sd itself and over its 80% interval (an sd from 4 seeds is known
    only to within a factor of about 2, and the seeds needed go with its square)."""
    if not (c.margin > 0 and math.isfinite(c.sd_diff)):
        return c
    if c.sd_diff == 0:
        need = sequential.seeds_for_power(math.inf, POWER, level)
        return dataclasses.replace(
            c, power_at_margin=1.0, seeds_for_margin=need, seeds_for_margin_low=need,
            seeds_for_margin_high=need,
        )  # fmt: skip
    sd_low, sd_high = sd_interval(c.sd_diff, n - 1)
    return dataclasses.replace(
        c,
        power_at_margin=sequential.paired_power(c.margin / c.sd_diff, n, level),
        seeds_for_margin=sequential.seeds_for_power(c.margin / c.sd_diff, POWER, level),
        seeds_for_margin_low=sequential.seeds_for_power(c.margin / sd_low, POWER, level),
        seeds_for_margin_high=sequential.seeds_for_power(c.margin / sd_high, POWER, level),
    )
