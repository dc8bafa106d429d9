"""Group-sequential decisions over confirm rounds, and power that holds at every n.

A study that adds seeds until a comparison is clear must not look at the data more often than
its error rate allows. The looks are planned in the study file (seed counts after each round),
and Lan-DeMets alpha spending (O'Brien-Fleming or Pocock type) gives each look a nominal level
such that the chance of a false "better" over all looks stays at alpha. The paired t-test's p
at a look is compared with that nominal level (the usual p-value form of the boundary).
`decide` is the one rule both the driver (after each round) and the report (at the end) apply,
so the report says exactly what the driver did; `simulate` runs the same rule, vectorised, over
simulated studies so that its error rates and seed use can be checked.

Power is computed by integrating over the variance's chi-square distribution: scipy's
noncentral t (and statsmodels, which uses it) returns NaN at 1-3 degrees of freedom for large
effects, which is where a few-seed study lives.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import integrate, optimize, special
from scipy import stats as sps

SPENDING_KINDS = ("obrien_fleming", "pocock")
VERDICTS = ("A better", "B better", "equivalent", "A non-inferior", "B non-inferior",
            "inconclusive", "continue")  # fmt: skip
_CODE = {verdict: code for code, verdict in enumerate(VERDICTS)}

# A standard normal exceeds 9 with probability ~1e-19: the grid of the boundary recursion ends
# there, where no boundary can matter.
_Z_LIMIT = 9.0
# Simpson grid points per sd of the smaller of the two steps a grid serves; 12 puts the
# boundaries within ~1e-6 of the exact ones (tests compare with scipy's multivariate normal).
_POINTS_PER_SD = 12
_MAX_POINTS = 6001
_ROWS_PER_BLOCK = 512  # rows of the transition kernel held in memory at once


# --- alpha spending and nominal levels -------------------------------------------------------


def spent_alpha(t: float, alpha: float, kind: str) -> float:
    """Alpha spent by information fraction t for a one-sided level alpha: the Lan-DeMets
    O'Brien-Fleming type 2 - 2 Phi(z_(1 - alpha/2) / sqrt(t)) (spends almost nothing early,
    so the final look keeps nearly the full level), or the Pocock type alpha ln(1 + (e - 1) t)
    (spends evenly, so early looks can stop a clear effect). Both spend alpha at t = 1.
    A two-sided test at alpha spends this at alpha/2 on each side, as the published symmetric
    designs (and gsDesign) do."""
    if not 0 < t <= 1:
        raise ValueError(f"an information fraction is in (0, 1], got {t}")
    if kind == "obrien_fleming":
        return float(2 * sps.norm.sf(sps.norm.isf(alpha / 2) / math.sqrt(t)))
    if kind == "pocock":
        return float(alpha * math.log1p((math.e - 1) * t))
    raise ValueError(f"unknown alpha spending {kind!r}; one of {', '.join(SPENDING_KINDS)}")


def nominal_levels(
    looks: Sequence[int], alpha: float, kind: str, sided: int = 2
) -> tuple[float, ...]:
    """Per look, the nominal p threshold that keeps the chance of any false rejection over all
    looks at alpha: two-sided (|Z_k| >= c_k, alpha/2 spent on each side) or one-sided
    (Z_k >= c_k, alpha spent on the one side, so that a one-sided test at alpha/2 has the
    boundaries of one side of the two-sided test at alpha, up to the rare paths that would
    cross both sides: ~1e-5 in z). A single look is plain alpha.
    Cached: the driver, the report and the simulations ask for the same plans over and over."""
    plan = _checked_looks(looks)
    _check_alpha(alpha)
    if sided not in (1, 2):
        raise ValueError(f"sided is 1 or 2, got {sided}")
    spent_alpha(1.0, alpha, kind)  # refuses an unknown kind before anything is cached
    return _levels(plan, float(alpha), kind, sided)


def _checked_looks(looks: Sequence[int]) -> tuple[int, ...]:
    plan = tuple(looks)
    if (
        not plan
        or any(isinstance(n, bool) or int(n) != n or n < 1 for n in plan)
        or any(b <= a for a, b in zip(plan, plan[1:], strict=False))
    ):
        raise ValueError(f"looks must be strictly increasing positive seed counts, got {plan}")
    return tuple(int(n) for n in plan)


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha is in (0, 1), got {alpha}")


@functools.lru_cache(maxsize=512)
def _levels(looks: tuple[int, ...], alpha: float, kind: str, sided: int) -> tuple[float, ...]:
    if len(looks) == 1:
        return (alpha,)
    fractions = [n / looks[-1] for n in looks]
    per_side = [spent_alpha(t, alpha / sided, kind) for t in fractions]
    increments = np.diff([0.0, *per_side])  # each look's share, on one side
    bounds = _boundaries(fractions, increments, two_sided=sided == 2)
    return tuple(float(sided * sps.norm.sf(c)) for c in bounds)


def _boundaries(fractions: list[float], increments: np.ndarray, two_sided: bool) -> list[float]:
    """c_1..c_K one after another, each such that P(first crossing at look k) under H0 is that
    look's share of alpha (per side). Z_k = S_k / sqrt(t_k) with S a Brownian motion in
    information time, so corr(Z_j, Z_k) = sqrt(t_j / t_k). The sub-density of S_k on the paths
    that have not crossed yet is carried from look to look by numerical integration on a
    Simpson grid (deterministic, no Monte Carlo), so each c_k is a one-dimensional root."""
    steps = np.sqrt(np.diff([0.0, *fractions]))  # sd of each look's increment of S
    sides = 2 if two_sided else 1
    bounds = [float(sps.norm.isf(increments[0]))]  # P(|Z_1| >= c) = 2 x share: closed form
    grid, mass = _first_grid(fractions[0], bounds[0], steps, two_sided)
    for k in range(1, len(fractions)):
        share = sides * float(increments[k])
        bounds.append(_bound(grid, mass, steps[k], math.sqrt(fractions[k]), share, two_sided))
        if k < len(fractions) - 1:
            grid, mass = _next_grid(grid, mass, fractions[k], bounds[k], steps, k, two_sided)
    return bounds


def _first_grid(
    t: float, c: float, steps: np.ndarray, two_sided: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The continuation region of look 1 on a grid, with S_1 ~ N(0, t_1) on it."""
    grid, weights = _simpson_grid(t, c, min(steps[0], steps[1]), two_sided)
    return grid, weights * sps.norm.pdf(grid, 0.0, steps[0])


def _next_grid(
    grid: np.ndarray,
    mass: np.ndarray,
    t: float,
    c: float,
    steps: np.ndarray,
    k: int,
    two_sided: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Carry the not-yet-crossed sub-density from look k-1 to look k's continuation region:
    f_k(y) = sum_x mass(x) phi((y - x) / sd_k) / sd_k, in row blocks to bound memory."""
    new, weights = _simpson_grid(t, c, min(steps[k], steps[k + 1]), two_sided)
    density = np.empty_like(new)
    norm = steps[k] * math.sqrt(2 * math.pi)
    for start in range(0, len(new), _ROWS_PER_BLOCK):
        z = (new[start : start + _ROWS_PER_BLOCK, None] - grid[None, :]) / steps[k]
        density[start : start + len(z)] = np.exp(-0.5 * z * z) @ mass / norm
    return new, weights * density


def _simpson_grid(t: float, c: float, sd: float, two_sided: bool) -> tuple[np.ndarray, np.ndarray]:
    """Points and Simpson weights over look k's continuation region in S units: (-c, c) sqrt(t)
    two-sided, (-inf, c) sqrt(t) one-sided, cut where the normal has no mass left."""
    top = min(c, _Z_LIMIT) * math.sqrt(t)
    bottom = -top if two_sided else -_Z_LIMIT * math.sqrt(t)
    intervals = math.ceil((top - bottom) * _POINTS_PER_SD / sd / 2) * 2
    intervals = max(2, min(intervals, _MAX_POINTS - 1))
    grid = np.linspace(bottom, top, intervals + 1)
    weights = np.ones(intervals + 1)
    weights[1:-1:2], weights[2:-1:2] = 4.0, 2.0
    return grid, weights * (grid[1] - grid[0]) / 3


def _crossing(grid: np.ndarray, mass: np.ndarray, sd: float, bound: float, two_sided: bool):
    """P(no crossing before look k, S_k beyond the bound at look k)."""
    upper = special.ndtr((grid - bound) / sd)
    if two_sided:
        upper = upper + special.ndtr((-bound - grid) / sd)
    return float(mass @ upper)


def _bound(
    grid: np.ndarray, mass: np.ndarray, sd: float, scale: float, share: float, two_sided: bool
) -> float:
    """The boundary c (in Z units; S = Z x scale) where the crossing probability, decreasing
    in c, meets the look's share of alpha."""

    def excess(c: float) -> float:
        return _crossing(grid, mass, sd, c * scale, two_sided) - share

    low, high = (0.0 if two_sided else -_Z_LIMIT), _Z_LIMIT
    if excess(high) >= 0:  # a share too small to see on the grid: practically never cross
        return high
    if excess(low) <= 0:  # a share as large as what is left: always cross
        return low
    return float(optimize.brentq(excess, low, high, xtol=1e-12, rtol=1e-12))


# --- power -----------------------------------------------------------------------------------


def paired_power(d: float, n: int, alpha: float = 0.05, sided: int = 2) -> float:
    """Power of the paired t-test with n pairs at true standardised effect d (mean difference
    over the sd of the differences); one-sided tests look for d > 0. Exact up to quadrature:
    T = (Z + d sqrt(n)) / U with U = sqrt(V / df), V ~ chi2(df), so power is a one-dimensional
    integral over U of normal tail probabilities, which stays finite at every n >= 2 where the
    noncentral t gives NaN. An infinite effect is found surely (never, one-sided at -inf)."""
    if n < 2 or int(n) != n:
        raise ValueError(f"a paired t-test needs a whole number of at least 2 pairs, got {n}")
    _check_alpha(alpha)
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


# --- the decision rule -----------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """What the rule concluded, at which look, on how many differences, with its p-values."""

    verdict: str  # one of VERDICTS
    look: int  # index of the look that decided (or the last look with data)
    n: int  # differences used at that look
    level_two_sided: float  # nominal two-sided level at that look
    level_one_sided: float  # nominal one-sided level at that look
    p_two_sided: float  # paired t-test, H0: mean difference 0
    p_equivalence: float  # TOST: the larger one-sided p for -margin < mean < +margin
    p_a_noninferior: float  # one-sided, H0: mean difference <= -margin
    p_b_noninferior: float  # one-sided, H0: mean difference >= +margin
    final: bool  # no later look can follow (last planned look, or no more data)


def decide(
    diffs: Sequence[float],
    looks: Sequence[int],
    alpha: float,
    margin: float,
    kind: str = "obrien_fleming",
    *,
    more_can_come: bool = True,
) -> Decision:
    """Walk the planned looks in order on the differences in seed order (positive = A better),
    the first looks[k] of them at look k. At each look: a two-sided t-test below the look's
    two-sided level decides 'A better' or 'B better'; else TOST below the one-sided level
    decides 'equivalent' (only with a margin > 0); at the final look non-inferiority either
    way (margin > 0), else 'inconclusive'.

    Only the caller knows whether more seeds can come. While they can, data that end before
    the next look give 'continue' (final=False): the study should run more seeds. When they
    cannot (`more_can_come=False`), the data are judged finally where they end: at their own
    count with the levels of the look not reached, or, if they end exactly at a look, at that
    look. Fewer than 2 differences can show nothing: NaN p-values, 'inconclusive' when final.
    Differences beyond the last look are not used."""
    values = np.asarray(diffs, dtype=float)
    if values.ndim != 1 or not np.isfinite(values).all():
        raise ValueError("diffs is one sequence of finite per-seed differences")
    _check_margin(margin)
    plan = _checked_looks(looks)
    two = nominal_levels(plan, alpha, kind, 2)
    one = nominal_levels(plan, alpha, kind, 1)
    available = len(values)
    latest: Decision | None = None
    for k, planned in enumerate(plan):
        last = k == len(plan) - 1
        if available >= planned:
            latest = _at_look(values[:planned], k, two[k], one[k], margin, last)
            if latest.verdict != "continue":
                return latest
            continue
        if more_can_come:
            return latest or _waiting(available, two[0], one[0])
        at = k - 1 if k and available == plan[k - 1] else k  # ended exactly at a look: that one
        return _at_look(values, at, two[at], one[at], margin, True)
    raise AssertionError("the last planned look always decides")


def _check_margin(margin: float) -> None:
    if not margin >= 0:
        raise ValueError(f"the margin is >= 0 (0: no equivalence margin), got {margin}")


def _waiting(available: int, level2: float, level1: float) -> Decision:
    """No look reached yet: nothing tested, more seeds to run."""
    return Decision("continue", 0, available, level2, level1, *[math.nan] * 4, final=False)


def _at_look(
    values: np.ndarray, k: int, level2: float, level1: float, margin: float, final: bool
) -> Decision:
    mean, p_values = _statistics(values[None, :], margin)
    code = _verdict_codes(mean, *p_values, level2, level1, margin, final)[0]
    p2, equivalence, a_ok, b_ok = (float(p[0]) for p in p_values)
    return Decision(VERDICTS[code], k, len(values), level2, level1, p2, equivalence, a_ok, b_ok,
                    final)  # fmt: skip


def _statistics(values: np.ndarray, margin: float) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Per row (one study's first n differences): the mean and the p-values (two-sided of mean
    0, TOST, A non-inferior, B non-inferior), from the t distribution directly, for many rows
    at once. Rows with no spread (all differences equal, c) make every test certain: p 0 where
    the t statistic is infinite in the test's direction, 1 where it is 0/0 or points away."""
    rows, n = values.shape
    if n < 2:
        nan = np.full(rows, math.nan)
        return nan, (nan, nan, nan, nan)
    mean = values.mean(axis=1)
    constant = np.ptp(values, axis=1) == 0
    mean = np.where(constant, values[:, 0], mean)  # c exactly, not c up to rounding
    se = values.std(axis=1, ddof=1) / math.sqrt(n)
    se = np.where(constant, 1.0, se)  # placeholder; constant rows are replaced below
    df = n - 1
    two = 2 * sps.t.sf(np.abs(mean) / se, df)
    a_ok = sps.t.sf((mean + margin) / se, df)  # H0: mean <= -margin
    b_ok = sps.t.cdf((mean - margin) / se, df)  # H0: mean >= +margin
    two = np.where(constant, np.where(mean == 0, 1.0, 0.0), two)
    a_ok = np.where(constant, np.where(mean > -margin, 0.0, 1.0), a_ok)
    b_ok = np.where(constant, np.where(mean < margin, 0.0, 1.0), b_ok)
    return mean, (two, np.maximum(a_ok, b_ok), a_ok, b_ok)


def _verdict_codes(
    mean: np.ndarray,
    two: np.ndarray,
    equivalence: np.ndarray,
    a_ok: np.ndarray,
    b_ok: np.ndarray,
    level2: float,
    level1: float,
    margin: float,
    final: bool,
) -> np.ndarray:
    """The rule at one look, as indices into VERDICTS, for many rows at once (NaN p-values
    never reject). The first condition that holds wins."""
    better = two < level2
    with_margin = margin > 0
    conditions = [better & (mean > 0), better & (mean <= 0), with_margin & (equivalence < level1)]
    choices = [_CODE["A better"], _CODE["B better"], _CODE["equivalent"]]
    if final:
        conditions += [with_margin & (a_ok < level1), with_margin & (b_ok < level1)]
        choices += [_CODE["A non-inferior"], _CODE["B non-inferior"]]
    default = _CODE["inconclusive" if final else "continue"]
    return np.select(conditions, choices, default)


def simulate(
    true_diff: float,
    sd: float,
    looks: Sequence[int],
    alpha: float,
    margin: float,
    kind: str,
    studies: int,
    rng: np.random.Generator,
) -> dict[str, float]:
    """Simulated studies of normal differences under `decide`'s rule, every planned look run
    (no more seeds after the last): the rate of each verdict and the mean number of seeds the
    rule used ('mean_seeds'). For checking the rule's error rates and savings, never for
    findings. Draws rng.normal(true_diff, sd, (studies, looks[-1])), one row per study, and
    decides all studies still open at a look at once."""
    if studies < 1:
        raise ValueError(f"simulate at least one study, got {studies}")
    _check_margin(margin)
    plan = _checked_looks(looks)
    two = nominal_levels(plan, alpha, kind, 2)
    one = nominal_levels(plan, alpha, kind, 1)
    draws = rng.normal(true_diff, sd, (studies, plan[-1]))
    verdicts = np.full(studies, _CODE["continue"])
    used = np.zeros(studies)
    open_rows = np.arange(studies)
    for k, n in enumerate(plan):
        mean, p_values = _statistics(draws[open_rows, :n], margin)
        codes = _verdict_codes(mean, *p_values, two[k], one[k], margin, k == len(plan) - 1)
        done = codes != _CODE["continue"]
        verdicts[open_rows[done]] = codes[done]
        used[open_rows[done]] = n
        open_rows = open_rows[~done]
    counts = np.bincount(verdicts, minlength=len(VERDICTS))
    out = {verdict: float(counts[code]) / studies for verdict, code in _CODE.items()}
    out["mean_seeds"] = float(used.mean())
    return out
