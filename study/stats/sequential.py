"""Group-sequential decisions over confirm rounds, and power that holds at every n.

A study that adds seeds until a comparison is clear must not look at the data more often
than its error rate allows. The looks are planned in the study file (seed counts after each
round), and Lan-DeMets alpha spending (O'Brien-Fleming or Pocock type) gives each look a
nominal level such that the chance of a false "better" over all looks stays at alpha. The
paired t-test's p at a look is compared with that nominal level (the usual p-value form of
the boundary). `decide` is the one rule both the driver (after each round) and the report
(at the end) apply, so the report says exactly what the driver did.

Power is computed by integrating over the variance's chi-square distribution: scipy's
noncentral t (and statsmodels, which uses it) returns NaN at 1-3 degrees of freedom for
large effects, which is where a few-seed study lives.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import integrate, optimize
from scipy import stats as sps

SPENDING_KINDS = ("obrien_fleming", "pocock")
VERDICTS = ("A better", "B better", "equivalent", "A non-inferior", "B non-inferior",
            "inconclusive", "continue")  # fmt: skip


def spent_alpha(t: float, alpha: float, kind: str) -> float:
    """One-sided alpha spent by information fraction t: the Lan-DeMets O'Brien-Fleming-type
    function 2 - 2 Phi(z_(1 - alpha/2) / sqrt(t)), or the Pocock-type alpha ln(1 + (e - 1) t).
    A two-sided test spends alpha/2 on each side (as gsDesign's symmetric designs do)."""
    if kind == "obrien_fleming":
        return float(2 - 2 * sps.norm.cdf(sps.norm.ppf(1 - alpha / 2) / math.sqrt(t)))
    if kind == "pocock":
        return float(alpha * math.log(1 + (math.e - 1) * t))
    raise ValueError(f"unknown alpha spending {kind!r}; one of {', '.join(SPENDING_KINDS)}")


def nominal_levels(
    looks: Sequence[int], alpha: float, kind: str, sided: int = 2
) -> tuple[float, ...]:
    """Per look, the nominal p threshold: two-sided (|Z| >= c) or one-sided (Z >= c, spending
    alpha one-sided). A single look is plain alpha."""
    looks = tuple(int(n) for n in looks)
    if (
        not looks
        or any(n < 1 for n in looks)
        or any(b <= a for a, b in zip(looks, looks[1:], strict=False))
    ):
        raise ValueError(f"looks must be increasing positive seed counts, got {list(looks)}")
    if sided not in (1, 2):
        raise ValueError("sided is 1 or 2")
    spent_alpha(1.0, alpha, kind)  # validates kind
    return _levels(looks, float(alpha), kind, sided)


@functools.lru_cache(maxsize=256)
def _levels(looks: tuple[int, ...], alpha: float, kind: str, sided: int) -> tuple[float, ...]:
    if len(looks) == 1:
        return (alpha,)
    fractions = [n / looks[-1] for n in looks]
    per_side = alpha / sided
    spent = [sided * spent_alpha(t, per_side, kind) for t in fractions]
    bounds: list[float] = []
    for k in range(len(looks)):
        target = spent[k] - (spent[k - 1] if k else 0.0)
        bounds.append(_boundary(fractions[: k + 1], bounds, target, sided))
    tail = 2 if sided == 2 else 1
    return tuple(float(tail * sps.norm.sf(c)) for c in bounds)


def _boundary(fractions: list[float], earlier: list[float], target: float, sided: int) -> float:
    """c_k with P(no crossing before look k, crossing at k) = target under H0."""
    if not earlier:
        return float(sps.norm.isf(target / (2 if sided == 2 else 1)))

    def excess(c: float) -> float:
        return _first_crossing(fractions, [*earlier, c], sided) - target

    return float(optimize.brentq(excess, 0.0, 40.0, xtol=1e-10))


def _first_crossing(fractions: list[float], bounds: list[float], sided: int) -> float:
    """P(Z_1..Z_{k-1} inside their bounds, Z_k outside c_k) for the canonical joint normal
    (Z_k a scaled partial sum: corr(Z_i, Z_j) = sqrt(t_i / t_j)), by recursive numerical
    integration over the partial sum on a grid, which is exact to the grid's accuracy and
    needs no Monte Carlo."""
    grid, density = None, None
    previous = 0.0
    for i, (t, c) in enumerate(zip(fractions, bounds, strict=True)):
        step = t - previous
        sd = math.sqrt(step)
        last = i == len(fractions) - 1
        lo, hi = (-c, c) if sided == 2 else (-12.0, c)
        if grid is None:  # S_1 ~ N(0, t_1); Z_1 = S_1 / sqrt(t_1)
            if last:
                return _outside(0.0, sd, c * math.sqrt(t), sided)
            grid = np.linspace(lo * math.sqrt(t), hi * math.sqrt(t), 801)
            density = sps.norm.pdf(grid, 0.0, sd)
        else:
            weights = density * _spacing(grid)
            if last:
                out = _outside(grid, sd, c * math.sqrt(t), sided)
                return float(np.sum(weights * out))
            new = np.linspace(lo * math.sqrt(t), hi * math.sqrt(t), 801)
            density = sps.norm.pdf(new[:, None], grid[None, :], sd) @ weights
            grid = new
        previous = t
    raise AssertionError("unreachable")


def _spacing(grid: np.ndarray) -> np.ndarray:
    """Trapezoid weights of a uniform grid."""
    h = grid[1] - grid[0]
    w = np.full(grid.shape, h)
    w[0] = w[-1] = h / 2
    return w


def _outside(mean, sd: float, bound: float, sided: int):
    """P(S_k beyond ±bound (two-sided) or above bound (one-sided)) given S_{k-1} = mean."""
    upper = sps.norm.sf(bound, mean, sd)
    return upper + sps.norm.cdf(-bound, mean, sd) if sided == 2 else upper


def paired_power(d: float, n: int, alpha: float = 0.05, sided: int = 2) -> float:
    """Power of the paired t-test with n pairs at true standardised effect d (mean difference
    over the sd of the differences), exact by one-dimensional integration over the sample
    variance: T = (Z + d sqrt(n)) / sqrt(V / df), V ~ chi2(df)."""
    if n < 2:
        raise ValueError("a paired t-test needs at least 2 pairs")
    if math.isinf(d):
        return 1.0
    df = n - 1
    shift = abs(d) * math.sqrt(n) if sided == 2 else d * math.sqrt(n)
    crit = sps.t.isf(alpha / 2 if sided == 2 else alpha, df)

    def given_scale(u: float) -> float:  # u = sqrt(V / df), the sd estimate's ratio
        power = sps.norm.sf(crit * u - shift)
        if sided == 2:
            power += sps.norm.cdf(-crit * u - shift)
        return power * _scale_density(u, df)

    mode = math.sqrt(max(df - 1, 0.0) / df) if df > 1 else 0.0
    pieces = [0.0, mode, 1.0, 3.0, 10.0, math.inf] if mode > 0 else [0.0, 1.0, 3.0, 10.0, math.inf]
    total = sum(
        integrate.quad(given_scale, a, b, limit=200, epsabs=1e-12)[0]
        for a, b in zip(pieces, pieces[1:], strict=False)
        if b > a
    )
    return float(min(1.0, max(0.0, total)))


def _scale_density(u: float, df: int) -> float:
    """Density of sqrt(V / df) for V ~ chi2(df)."""
    if u <= 0:
        return 0.0
    return float(sps.chi2.pdf(df * u * u, df) * 2 * df * u)


def seeds_for_power(
    d: float, power: float = 0.8, alpha: float = 0.05, sided: int = 2, limit: int = 100_000
) -> int | None:
    """The smallest number of pairs (>= 2) whose t-test reaches `power` at effect d; None
    when there is no effect to detect, `limit` when even that many would not do."""
    if d == 0 or math.isnan(d):
        return None
    high = 2
    while paired_power(d, high, alpha, sided) < power:
        if high >= limit:
            return limit
        high = min(2 * high, limit)
    low = max(2, high // 2)
    while low < high:
        mid = (low + high) // 2
        if paired_power(d, mid, alpha, sided) >= power:
            high = mid
        else:
            low = mid + 1
    return low


@dataclass(frozen=True)
class Decision:
    """What the rule concluded, at which look, on how many differences, with its p-values."""

    verdict: str
    look: int
    n: int
    level_two_sided: float
    level_one_sided: float
    p_two_sided: float
    p_equivalence: float
    p_a_noninferior: float
    p_b_noninferior: float
    final: bool


def paired_p_values(diffs: np.ndarray, margin: float) -> tuple[float, float, float, float]:
    """(two-sided p of mean 0, TOST p, p of 'A not worse by margin', p of 'B not worse'):
    diffs point the better way for A. Constant differences have no spread: the tests become
    certain one way or the other."""
    n = len(diffs)
    mean = float(np.mean(diffs))
    sd = float(np.std(diffs, ddof=1))
    if sd == 0:
        two = 1.0 if mean == 0 else 0.0
        a_ok = 0.0 if mean > -margin else 1.0
        b_ok = 0.0 if mean < margin else 1.0
        return two, max(a_ok, b_ok), a_ok, b_ok
    se = sd / math.sqrt(n)
    df = n - 1
    two = float(2 * sps.t.sf(abs(mean) / se, df))
    a_ok = float(sps.t.sf((mean + margin) / se, df))  # H0: mean <= -margin
    b_ok = float(sps.t.cdf((mean - margin) / se, df))  # H0: mean >= +margin
    return two, max(a_ok, b_ok), a_ok, b_ok


def decide(
    diffs: Sequence[float],
    looks: Sequence[int],
    alpha: float,
    margin: float,
    kind: str = "obrien_fleming",
    *,
    more_can_come: bool = True,
) -> Decision:
    """Walk the planned looks in order on the differences in seed order (positive = A better).
    At each look: a two-sided t-test below the look's level decides 'better'; else two
    one-sided tests below the one-sided level decide 'equivalent'; at the final look,
    non-inferiority either way, else 'inconclusive'. With fewer differences than the next look
    the verdict is 'continue' while `more_can_come`, else that last look is final."""
    values = np.asarray(diffs, float)
    looks = tuple(looks)
    two, one = nominal_levels(looks, alpha, kind, 2), nominal_levels(looks, alpha, kind, 1)
    waiting = Decision("continue", 0, len(values), two[0], one[0], *[math.nan] * 4, False)
    if len(values) < 2 and not (more_can_come and looks[0] > len(values)):
        return dataclasses.replace(waiting, verdict="inconclusive", final=True)
    for k, planned in enumerate(looks):
        if len(values) >= planned:
            decision = _at_look(values[:planned], k, two[k], one[k], margin, k == len(looks) - 1)
            if decision.verdict != "continue":
                return decision
            waiting = decision
            continue
        if more_can_come:
            return waiting
        # the data ended before this look: judge what there is, finally
        n = len(values) if len(values) > (looks[k - 1] if k else 1) else looks[k - 1]
        k = k if n == len(values) else k - 1
        return _at_look(values[:n], k, two[k], one[k], margin, True)
    return waiting  # unreachable: the last planned look always decides


def _at_look(
    values: np.ndarray, k: int, level2: float, level1: float, margin: float, final: bool
) -> Decision:
    two, equivalence, a_ok, b_ok = paired_p_values(values, margin)
    mean = float(np.mean(values))
    if two < level2 and mean != 0:
        verdict = "A better" if mean > 0 else "B better"
    elif margin > 0 and equivalence < level1:
        verdict = "equivalent"
    elif not final:
        verdict = "continue"
    elif margin > 0 and a_ok < level1:
        verdict = "A non-inferior"
    elif margin > 0 and b_ok < level1:
        verdict = "B non-inferior"
    else:
        verdict = "inconclusive"
    return Decision(verdict, k, len(values), level2, level1, two, equivalence, a_ok, b_ok, final)


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
    """Simulated studies of normal differences through `decide`: the rate of each verdict and
    the mean number of seeds the rule used. For checking the rule, never for findings."""
    counts = dict.fromkeys(VERDICTS, 0)
    used = 0
    draws = rng.normal(true_diff, sd, (studies, looks[-1]))
    for row in draws:
        decision = decide(row, looks, alpha, margin, kind, more_can_come=False)
        counts[decision.verdict] += 1
        used += decision.n
    out = {verdict: count / studies for verdict, count in counts.items()}
    out["mean_seeds"] = used / studies
    return out
