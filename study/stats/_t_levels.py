"""Nominal levels of the paired t-test at each look, such that alpha is spent as planned.

`_spending` gives the Lan-DeMets boundaries of a normal statistic with known variance. The
rule tests a paired *t* statistic, whose variance is estimated afresh at every look; comparing
its p with the normal boundary's nominal level (the "significance level" approach of Jennison
and Turnbull, Group Sequential Methods, 2000, sections 3.8 and 11.5) makes every look right on
its own but not the looks together: at 5-20 seeds its false "better" rate is 0.0514
(O'Brien-Fleming) and 0.0539 (Pocock) at alpha 0.05.

Here the boundaries come from the joint null law of the looks' t statistics instead of the
Brownian motion's, by the same error-spending recursion: at look k the boundary is the value
that the paths not stopped before k cross with exactly the look's share of alpha. That law is
free of the unknown sd (a t statistic is scale invariant), so it can be drawn exactly: per
round, the round's sum of standard normals (normal, variance = its seeds) and its sum of
squares about its own mean (chi-square, seeds - 1 df); the looks' means and sds follow from
the running totals. It has no closed form, so the boundaries are quantiles over a fixed set of
`PATHS` draws (seeded: the driver, the report and every rerun get the same levels); each
look's spend is then off by at most its Monte-Carlo error, about 2e-4 at alpha 0.05. The
levels are returned as p thresholds of the t-test with that look's degrees of freedom, so
`decide` compares a t-test's p with them as before. A look at fewer than 2 seeds has no t
statistic: it never rejects, and its share of alpha is not spent again.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import stats as sps

from study.stats._spending import check_alpha, checked_looks, nominal_levels, spent_alpha

PATHS = 1 << 20  # draws of the null t path; the spend's Monte-Carlo se is ~2e-4 at alpha 0.05
_SEED = 20_261_125
_BLOCK = 1 << 17  # paths drawn at once, to bound memory


def t_levels(looks: tuple[int, ...], alpha: float, kind: str, sided: int = 2) -> tuple[float, ...]:
    """Per look, the p threshold of the paired t-test (two-sided, or one-sided toward the
    alternative) that spends alpha over the looks as `nominal_levels` does for a normal
    statistic. A single look is plain alpha, exactly."""
    plan = checked_looks(looks)
    check_alpha(alpha)
    nominal_levels(plan, alpha, kind, sided)  # refuses what the normal design refuses
    return _levels(plan, float(alpha), kind, sided)


@functools.lru_cache(maxsize=256)
def _levels(looks: tuple[int, ...], alpha: float, kind: str, sided: int) -> tuple[float, ...]:
    if len(looks) == 1:
        return (alpha,)
    paths = null_t_paths(looks, PATHS, np.random.default_rng(_SEED))
    stat = np.abs(paths) if sided == 2 else paths
    cumulative = [sided * spent_alpha(n / looks[-1], alpha / sided, kind) for n in looks]
    shares = np.diff([0.0, *cumulative]) * PATHS  # paths each look may stop, in expectation
    normal = nominal_levels(looks, alpha, kind, sided)
    alive = np.ones(PATHS, bool)
    levels = []
    for k, n in enumerate(looks):
        if n < 2:  # no t statistic: nothing can be rejected here
            levels.append(normal[k])
            continue
        if k == 0:  # the first look's t-test is exact on its own: its share is its level
            alive &= stat[:, k] < sps.t.isf(normal[k] / sided, n - 1)
            levels.append(normal[k])
            continue
        c = _bound(stat[alive, k], shares[k])
        alive &= stat[:, k] < c
        levels.append(float(sided * sps.t.sf(c, n - 1)))
    return tuple(levels)


def _bound(values: np.ndarray, share: float) -> float:
    """The value crossed (>=) by `share` of `values`: midway between the share-th largest
    and the next, so that exactly round(share) of them cross."""
    count = int(round(share))
    if count <= 0:
        return np.inf
    if count >= len(values):
        return -np.inf
    top = np.partition(values, len(values) - count - 1)[len(values) - count - 1 :]
    above, below = np.partition(top, 1)[1], top.min()
    return float((above + below) / 2)


def null_t_paths(looks: tuple[int, ...], paths: int, rng: np.random.Generator) -> np.ndarray:
    """(paths, looks) draws of the paired t statistics at the looks under H0 (NaN where a
    look has fewer than 2 seeds), from each round's normal sum and chi-square spread."""
    sizes = np.diff([0, *looks])
    out = np.empty((paths, len(looks)))
    for start in range(0, paths, _BLOCK):
        rows = min(_BLOCK, paths - start)
        sums = rng.standard_normal((rows, len(sizes))) * np.sqrt(sizes)
        within = np.stack([rng.chisquare(m - 1, rows) if m > 1 else np.zeros(rows)
                           for m in sizes], axis=1)  # fmt: skip
        total, squares = np.cumsum(sums, axis=1), np.cumsum(sums**2 / sizes + within, axis=1)
        n = np.asarray(looks, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            sd = np.sqrt((squares - total**2 / n) / (n - 1))
            out[start : start + rows] = total / (np.sqrt(n) * sd)
    return out
