"""Paired comparisons of arms over seeds: is a difference between two arms real?

Seed s fixes the data subset, data order and head initialisation identically in every arm, so
the unit of analysis is the per-seed *difference* between two arms, not two independent
samples. Seed noise on NER is about one F1 point, the size of the effects studied, so every
figure a reader needs to judge a difference is computed: paired t and Wilcoxon p, a bootstrap
CI of the mean difference, Cohen's d_z, almost stochastic order (deepsig), Holm correction over
all the study's comparisons, and how many seeds a difference of this size would need.
Only confirm-phase trials enter here; missing pairs and too few seeds are stated, not hidden.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from study.aso_speedup import aso

ALPHA = 0.05  # significance level for the Holm-corrected paired t-test
ASO_TAU = 0.2  # A almost stochastically dominates B when eps_min < tau (Ulmer et al. 2022)
POWER = 0.8
# Metrics compared, and which direction is better. Extra eval sets add `<name>_f1` (max).
DIRECTIONS = {"dev_f1": "max", "test_f1": "max", "curve_area": "max", "steps_to_95": "min"}


@dataclass(frozen=True)
class Comparison:
    """Arm A against arm B on one metric, paired by seed; `diff` is A − B in metric units."""

    metric: str
    arm_a: str
    arm_b: str
    factor: str  # the one factor in which the two arms differ
    higher_is_better: bool
    seeds: tuple[int, ...]  # seeds present, with a finite value, in both arms
    unpaired: tuple[int, ...]  # seeds present in only one arm, or not finite in one
    mean_a: float = math.nan
    mean_b: float = math.nan
    diff: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    p_t: float = math.nan
    p_wilcoxon: float = math.nan
    p_holm: float = math.nan  # Holm-corrected p_t across every comparison of the study
    p_wilcoxon_holm: float = math.nan
    cohens_d: float = math.nan  # d_z: mean difference / std of the differences
    eps_min: float = math.nan  # ASO: A better than B when < ASO_TAU
    eps_min_reverse: float = math.nan  # ASO: B better than A when < ASO_TAU
    seeds_for_power: int | None = None  # seeds for 80% power at this d_z; None: no effect
    note: str = ""

    @property
    def n(self) -> int:
        return len(self.seeds)

    @property
    def a_better(self) -> bool:
        return self.diff > 0 if self.higher_is_better else self.diff < 0

    @property
    def significant(self) -> bool:
        return self.p_holm < ALPHA  # False for NaN

    def verdict(self) -> str:
        """One plain-language line a reader can quote, with the figures that support it."""
        if self.n < 2:
            return f"{self.arm_a} vs {self.arm_b} on {self.metric}: not tested ({self.note})"
        figures = (
            f"{self.diff:+.4g}, CI [{self.ci_low:.4g}, {self.ci_high:.4g}], "
            f"Holm p = {self.p_holm:.3g}, eps_min {self.eps_winner:.2f}, n = {self.n}"
        )
        if self.significant:
            winner, loser = (self.arm_a, self.arm_b) if self.a_better else (self.arm_b, self.arm_a)
            return f"{winner} beats {loser} on {self.metric}: {figures}"
        need = (
            f"; about {self.seeds_for_power} seeds would detect a difference this size"
            if self.seeds_for_power
            else ""
        )
        return (
            f"no significant difference between {self.arm_a} and {self.arm_b} on "
            f"{self.metric}: {figures}{need}"
        )

    @property
    def eps_winner(self) -> float:
        """ASO in the direction the mean points to: how far the better-looking arm is from
        dominating the other (0 = dominates completely, 0.5 = no order)."""
        return self.eps_min if self.a_better else self.eps_min_reverse

    def row(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.update(
            n=self.n,
            seeds=" ".join(map(str, self.seeds)),
            unpaired=" ".join(map(str, self.unpaired)),
            significant=self.significant,
            verdict=self.verdict(),
        )
        return out


def pair_scores(
    a: Mapping[int, float], b: Mapping[int, float]
) -> tuple[list[int], np.ndarray, np.ndarray, list[int]]:
    """Seeds with a finite score in both arms (sorted), their scores, and the other seeds."""
    finite = {s for s in a if _finite(a[s])} & {s for s in b if _finite(b[s])}
    seeds = sorted(finite)
    unpaired = sorted((set(a) | set(b)) - finite)
    return (
        seeds,
        np.array([a[s] for s in seeds], float),
        np.array([b[s] for s in seeds], float),
        unpaired,
    )


def _finite(value: Any) -> bool:
    return value is not None and math.isfinite(float(value))


def compare(
    a: Mapping[int, float],
    b: Mapping[int, float],
    *,
    metric: str,
    arm_a: str,
    arm_b: str,
    factor: str = "",
    higher_is_better: bool = True,
    aso_comparisons: int = 1,
    seed: int = 0,
    aso_kwargs: Mapping[str, Any] | None = None,
) -> Comparison:
    """Compare A with B over the seeds both have. `aso_comparisons` is passed to deepsig,
    which Bonferroni-corrects eps_min for that many comparisons in the study."""
    seeds, xa, xb, unpaired = pair_scores(a, b)
    base = Comparison(metric, arm_a, arm_b, factor, higher_is_better, tuple(seeds), tuple(unpaired))
    notes = [f"seeds {', '.join(map(str, unpaired))} unpaired or not finite"] if unpaired else []
    if len(seeds) < 2:
        notes.insert(0, f"{len(seeds)} paired seed(s); at least 2 are needed")
        if not a and not b:
            notes.append("neither arm recorded a finite value")
        return dataclasses.replace(base, note="; ".join(notes))
    diffs = xa - xb
    t_p, w_p = _paired_tests(diffs)
    low, high = bootstrap_ci(diffs, seed=seed)
    d = cohens_dz(diffs)
    sign = 1.0 if higher_is_better else -1.0
    kwargs = {"seed": seed, "show_progress": False, "num_comparisons": aso_comparisons}
    kwargs.update(aso_kwargs or {})
    eps, eps_rev = _aso_both_ways(sign * xa, sign * xb, kwargs)
    return dataclasses.replace(
        base,
        mean_a=float(xa.mean()),
        mean_b=float(xb.mean()),
        diff=float(diffs.mean()),
        ci_low=low,
        ci_high=high,
        p_t=t_p,
        p_wilcoxon=w_p,
        cohens_d=d,
        eps_min=eps,
        eps_min_reverse=eps_rev,
        seeds_for_power=seeds_for_power(d),
        note="; ".join(notes),
    )


def _paired_tests(diffs: np.ndarray) -> tuple[float, float]:
    """Paired t and Wilcoxon signed-rank p. Identical arms (all differences 0) have p = 1:
    scipy returns NaN there, which would read as 'not tested' rather than 'no difference'."""
    if np.all(diffs == 0):
        return 1.0, 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # constant non-zero diffs: t is inf
        t_p = float(stats.ttest_rel(diffs, np.zeros_like(diffs)).pvalue)
        w_p = float(stats.wilcoxon(diffs).pvalue)
    if math.isnan(t_p):  # every difference equal and non-zero: as certain as n allows
        t_p = 0.0
    return t_p, w_p


def bootstrap_ci(diffs: np.ndarray, confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean paired difference. Percentile, not BCa: with the
    5-10 seeds a study has, BCa's acceleration estimate is unstable or undefined."""
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


def cohens_dz(diffs: np.ndarray) -> float:
    """Standardised paired effect: mean difference over the std of the differences."""
    spread = float(np.std(diffs, ddof=1))
    if spread == 0:
        return 0.0 if float(np.mean(diffs)) == 0 else math.copysign(math.inf, np.mean(diffs))
    return float(np.mean(diffs)) / spread


def paired_power(d: float, n: int, alpha: float = ALPHA) -> float:
    """Power of a two-sided paired t-test with n pairs at true effect d_z (noncentral t)."""
    df = n - 1
    crit = stats.t.ppf(1 - alpha / 2, df)
    shift = d * math.sqrt(n)
    return float(stats.nct.sf(crit, df, shift) + stats.nct.cdf(-crit, df, shift))


def seeds_for_power(
    d: float, power: float = POWER, alpha: float = ALPHA, limit: int = 100_000
) -> int | None:
    """Smallest number of paired seeds whose t-test reaches `power` at effect d_z; None
    when there is no effect to detect, `limit` when even that many would not do."""
    if not math.isfinite(d):
        return 2 if d != 0 else None
    if d == 0:
        return None
    # power grows with n: double until it is reached, then bisect. Never evaluating huge n
    # matters, since scipy's noncentral t loses accuracy there
    high = 2
    while paired_power(d, high, alpha) < power:
        if high >= limit:
            return limit
        high = min(2 * high, limit)
    low = max(2, high // 2)
    while low < high:
        mid = (low + high) // 2
        if paired_power(d, mid, alpha) >= power:
            high = mid
        else:
            low = mid + 1
    return low


def _aso_both_ways(a: np.ndarray, b: np.ndarray, kwargs: dict[str, Any]) -> tuple[float, float]:
    """deepsig's ASO eps_min for 'A better than B' and for 'B better than A' (higher = better
    after the caller's sign flip). Identical score lists have no order: 1.0 both ways."""
    if np.array_equal(np.sort(a), np.sort(b)):
        return 1.0, 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(aso(a, b, **kwargs)), float(aso(b, a, **kwargs))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order; NaN stays NaN and does not count
    towards the number of tests. (scipy and numpy provide Benjamini-Hochberg only.)"""
    values = np.asarray(pvalues, float)
    out = np.full(values.shape, np.nan)
    tested = np.flatnonzero(~np.isnan(values))
    order = tested[np.argsort(values[tested], kind="stable")]
    m = len(order)
    scaled = (m - np.arange(m)) * values[order]
    out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out.tolist()


def with_holm(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """Holm over every comparison of the study (all arm pairs x all metrics), for the t and
    the Wilcoxon p-values separately."""
    p_t = holm([c.p_t for c in comparisons])
    p_w = holm([c.p_wilcoxon for c in comparisons])
    return [
        dataclasses.replace(c, p_holm=t, p_wilcoxon_holm=w)
        for c, t, w in zip(comparisons, p_t, p_w, strict=True)
    ]


def arm_pairs(
    factors: Sequence[Mapping[str, Any]],
    grid: Mapping[str, Sequence[Any]],
    baseline: Mapping[str, Any] | None = None,
) -> list[tuple[int, int, str]]:
    """(a, b, factor) for every pair of arms that differ in exactly one factor; A holds the
    value listed later in the grid, so `diff` reads 'later minus earlier' (depth full-1 minus
    full). With a baseline (e.g. {reinit_from: 6}), each other arm is compared only with the
    baseline arm that equals it in every other factor."""
    if baseline is not None:
        return _baseline_pairs(factors, baseline)
    pairs = []
    for i, j in _index_pairs(len(factors)):
        factor = _differing(factors[i], factors[j])
        if factor is None:
            continue
        values = list(grid[factor])
        later_i = values.index(factors[i][factor]) > values.index(factors[j][factor])
        pairs.append((i, j, factor) if later_i else (j, i, factor))
    return pairs


def _baseline_pairs(
    factors: Sequence[Mapping[str, Any]], baseline: Mapping[str, Any]
) -> list[tuple[int, int, str]]:
    def is_base(f: Mapping[str, Any]) -> bool:
        return all(f.get(k) == v for k, v in baseline.items())

    bases = [i for i, f in enumerate(factors) if is_base(f)]
    if not bases:
        raise ValueError(f"no arm matches the baseline {dict(baseline)}")
    pairs = []
    for i, arm in enumerate(factors):
        if is_base(arm):
            continue
        rest = {k: v for k, v in arm.items() if k not in baseline}
        match = [b for b in bases if all(factors[b].get(k) == v for k, v in rest.items())]
        if match:
            pairs.append((i, match[0], ",".join(k for k in baseline if arm.get(k) != baseline[k])))
    return pairs


def _index_pairs(n: int) -> Iterable[tuple[int, int]]:
    return ((i, j) for i in range(n) for j in range(i + 1, n))


def _differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """The one factor in which two arms differ, else None."""
    diff = [k for k in a if a[k] != b.get(k)]
    return diff[0] if len(diff) == 1 else None


def direction(metric: str) -> str:
    return DIRECTIONS.get(metric, "min" if metric.endswith("_loss") else "max")


def compare_arms(
    scores: Mapping[str, Mapping[str, Mapping[int, float]]],
    arm_factors: Mapping[str, Mapping[str, Any]],
    grid: Mapping[str, Sequence[Any]],
    metrics: Sequence[str],
    baseline: Mapping[str, Any] | None = None,
    aso_kwargs: Mapping[str, Any] | None = None,
) -> list[Comparison]:
    """Every planned comparison of a study: arm pairs (see `arm_pairs`) x metrics, with Holm
    over all of them. `scores[arm][metric][seed]`; `arm_factors` is in plan order."""
    ids = list(arm_factors)
    pairs = arm_pairs([arm_factors[i] for i in ids], grid, baseline)
    out = []
    for a, b, factor in pairs:
        for metric in metrics:
            out.append(
                compare(
                    scores.get(ids[a], {}).get(metric, {}),
                    scores.get(ids[b], {}).get(metric, {}),
                    metric=metric,
                    arm_a=ids[a],
                    arm_b=ids[b],
                    factor=factor,
                    higher_is_better=direction(metric) == "max",
                    aso_comparisons=max(1, len(pairs)),
                    aso_kwargs=aso_kwargs,
                )
            )
    return with_holm(out)
