"""Power of the paired t-test, exact at every n >= 2, and the seeds a margin needs.

scipy's noncentral t (and statsmodels, which uses it) returns NaN at 1-3 degrees of freedom
for large effects, which is where a few-seed study lives; integrating over the variance's
chi-square distribution stays finite everywhere.
"""

from __future__ import annotations

import math

from scipy import integrate
from scipy import stats as sps

from study.stats._spending import check_alpha


def paired_power(d: float, n: int, alpha: float = 0.05, sided: int = 2) -> float:
    """Power of the paired t-test with n pairs at true standardised effect d (mean difference
    over the sd of the differences); one-sided tests look for d > 0. Exact up to quadrature:
    T = (Z + d sqrt(n)) / U with U = sqrt(V / df), V ~ chi2(df), so power is a one-dimensional
    integral over U of normal tail probabilities, which stays finite at every n >= 2 where the
    noncentral t gives NaN. An infinite effect is found surely (never, one-sided at -inf)."""
    if n < 2 or int(n) != n:
        raise ValueError(f"a paired t-test needs a whole number of at least 2 pairs, got {n}")
    check_alpha(alpha)
    if sided not in (1, 2):
        raise ValueError(f"sided is 1 or 2, got {sided}")
    if math.isnan(d):
        raise ValueError("the effect size is NaN")
    if math.isinf(d):
        return 1.0 if sided == 2 or d > 0 else 0.0
    df = int(n) - 1
    shift = d * math.sqrt(n)
    crit = float(sps.t.isf(alpha / sided, df))

    def rejects(u: float) -> float:
        power = _phi(shift - crit * u)
        if sided == 2:
            power += _phi(-shift - crit * u)
        return power * _scale_density(u, df)

    low, high, points = _scale_range(df, abs(shift) / crit)
    total = integrate.quad(rejects, low, high, points=points, limit=200, epsabs=1e-13,
                           epsrel=1e-11)[0]  # fmt: skip
    return float(min(1.0, max(0.0, total)))


def _phi(x: float) -> float:
    """Standard normal cdf, accurate in both tails (math, not scipy: quad calls it a lot)."""
    return 0.5 * math.erfc(-x / math.sqrt(2))


def _scale_density(u: float, df: int) -> float:
    """Density of U = sqrt(V / df), V ~ chi2(df): 2 (df/2)^(df/2) / Gamma(df/2) u^(df-1)
    exp(-df u^2 / 2). In U rather than V it is bounded even at df = 1, where V's density has
    a pole at 0 that quadrature would resolve badly."""
    if u <= 0:
        return 2 / math.sqrt(2 * math.pi) if df == 1 else 0.0
    half = df / 2
    log = math.log(2) + half * math.log(half) - math.lgamma(half) - half * u * u
    return math.exp(log + (df - 1) * math.log(u))


def _scale_range(df: int, turn: float) -> tuple[float, float, list[float]]:
    """Where U has its mass (sd about 1/sqrt(2 df) around 1; ~9 at most for df = 1), and
    the points quadrature should split at: the bulk and where rejection turns on (u = turn)."""
    spread = 1 / math.sqrt(2 * df)
    low, high = max(0.0, 1 - 14 * spread), 1 + 14 * spread
    marks = [1 - 3 * spread, 1.0, 1 + 3 * spread, turn]
    return low, high, sorted(p for p in marks if low < p < high)


def seeds_for_power(
    d: float, power: float = 0.8, alpha: float = 0.05, sided: int = 2, limit: int = 100_000
) -> int | None:
    """The smallest number of pairs (>= 2) whose t-test reaches `power` at effect d: what a
    reader needs to turn "inconclusive" into a plan. None when there is no effect to detect,
    `limit` when even that many would not do. Power grows with n, so doubling then bisection
    needs only ~2 log2(n) power evaluations."""
    if not 0 < power < 1:
        raise ValueError(f"power is in (0, 1), got {power}")
    if d == 0 or math.isnan(d):
        return None
    if paired_power(d, 2, alpha, sided) >= power:
        return 2
    low, high = 2, 4  # power(low) < target throughout
    while paired_power(d, min(high, limit), alpha, sided) < power:
        if high >= limit:
            return limit
        low, high = high, 2 * high
    high = min(high, limit)
    while high - low > 1:
        mid = (low + high) // 2
        if paired_power(d, mid, alpha, sided) >= power:
            high = mid
        else:
            low = mid
    return high
