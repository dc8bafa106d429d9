"""Paired comparisons of arms over held-out seeds, under an analysis declared in advance.

Seed s fixes the data subset, data order and head initialisation identically in every arm, so
the unit of analysis is the per-seed *difference* between two arms. Seed noise on NER is about
one F1 point, the size of the effects studied, so a reader needs more than a p-value:

- Only the declared primary metric's comparisons get verdicts: *A better*, *B better*,
  *equivalent within ±margin* (two one-sided t-tests), *A non-inferior to B*, or
  *inconclusive* with the seeds that would decide it. Holm controls the family-wise error over
  those comparisons; every other metric is exploratory, with unadjusted p.
- The interval of record is the paired t interval at the level the test used, so it excludes
  0 exactly when the test rejects (a percentile bootstrap of 5 differences covers ~80%, not
  95%; it is shown only from 10 seeds on).
- When the confirm phase runs in rounds, each comparison is decided by the group-sequential
  rule of `study.stats.sequential` at the first look that decides it, with alpha split over the
  primary comparisons (Bonferroni) and spent over the looks.
- Power is for a true difference of one margin at the observed spread of the differences, not
  the post-hoc power of the observed effect (a function of p).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from study.analysis import Analysis
from study.stats import sequential
from study.stats._aso import aso_both_ways, aso_both_ways_many
from study.stats._pairs import arm_pairs, direction
from study.stats._record import Comparison, unit_text

ALPHA = 0.05  # default family-wise level; a study declares its own in `analysis`
ASO_TAU = 0.2  # A almost stochastically dominates B when eps_min < tau (Ulmer et al. 2022)
POWER = 0.8
BOOTSTRAP_MIN_SEEDS = 10  # below this a percentile bootstrap under-covers badly


def pair_scores(
    a: Mapping[Any, float], b: Mapping[Any, float]
) -> tuple[list, np.ndarray, np.ndarray, list]:
    """Units with a finite score in both arms (sorted), their scores, and the other units."""
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
    a: Mapping[Any, float],
    b: Mapping[Any, float],
    *,
    metric: str,
    arm_a: str,
    arm_b: str,
    factor: str = "",
    higher_is_better: bool = True,
    analysis: Analysis | None = None,
    level: float | None = None,
    one_sided: float | None = None,
    aso_comparisons: int = 1,
    seed: int = 0,
    aso_kwargs: Mapping[str, Any] | None = None,
    with_aso: bool = True,
    with_intervals: bool = True,
) -> Comparison:
    """The figures of one comparison, its two-sided tests at `level` and its one-sided ones
    (equivalence, non-inferiority) at `one_sided`, both the analysis' alpha by default;
    `compare_arms` then applies multiplicity and the verdicts. Without `with_aso` the ASO
    fields stay NaN (not computed); without `with_intervals` so do the intervals and power,
    for a caller that sets them at another level (`with_level`)."""
    analysis = analysis or Analysis()
    level = analysis.alpha if level is None else level
    one_sided = level if one_sided is None else one_sided
    seeds, xa, xb, unpaired = pair_scores(a, b)
    base = Comparison(metric, arm_a, arm_b, factor, higher_is_better, tuple(seeds),
                      tuple(unpaired), margin=analysis.margin, level=level)  # fmt: skip
    notes = (
        [f"seeds {', '.join(map(unit_text, unpaired))} unpaired or not finite"] if unpaired else []
    )
    if len(seeds) < 2:
        notes.insert(0, f"{len(seeds)} paired seed(s); at least 2 are needed")
        if not a and not b:
            notes.append("neither arm recorded a finite value")
        return dataclasses.replace(base, note="; ".join(notes), outcome="inconclusive")
    diffs = xa - xb
    sign = 1.0 if higher_is_better else -1.0
    decision = sequential.decide(sign * diffs, (len(diffs),), level, analysis.margin,
                                 analysis.spending, more_can_come=False)  # fmt: skip
    confidence = 1 - analysis.alpha / max(1, aso_comparisons) if with_aso else math.nan
    eps, eps_rev = (
        aso_both_ways(sign * xa, sign * xb, confidence, seed, aso_kwargs)
        if with_aso
        else (math.nan, math.nan)
    )
    win = _win_probability(sign * diffs, analysis.alpha)
    out = dataclasses.replace(
        base,
        mean_a=float(xa.mean()),
        mean_b=float(xb.mean()),
        diff=float(diffs.mean()),
        sd_diff=float(np.std(diffs, ddof=1)),
        p_t=decision.p_two_sided,
        p_wilcoxon=_wilcoxon(diffs),
        wilcoxon_min_p=wilcoxon_min_p(int(np.count_nonzero(diffs))),
        p_equivalence=decision.p_equivalence,
        p_a_noninferior=decision.p_a_noninferior,  # decide's diffs point the better way
        p_b_noninferior=decision.p_b_noninferior,
        cohens_d=cohens_dz(diffs),
        eps_min=eps,
        eps_min_reverse=eps_rev,
        aso_confidence=confidence,
        win_rate=win[0],
        win_low=win[1],
        win_high=win[2],
        note="; ".join(notes),
    )
    return with_level(out, diffs, level, one_sided, seed) if with_intervals else out


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


def _wilcoxon(diffs: np.ndarray) -> float:
    if np.all(diffs == 0):
        return 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.wilcoxon(diffs).pvalue)


def wilcoxon_min_p(n: int) -> float:
    """The smallest two-sided p of the exact signed-rank test with n non-zero differences: all
    of one sign, 2 / 2^n (0.0625 for 5 seeds, so it can never reject at 0.05 below 6)."""
    return min(1.0, 2.0 / 2**n) if n else 1.0


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


def cohens_dz(diffs: np.ndarray) -> float:
    """Standardised paired effect: mean difference over the std of the differences."""
    spread = float(np.std(diffs, ddof=1))
    if spread == 0:
        return 0.0 if float(np.mean(diffs)) == 0 else math.copysign(math.inf, np.mean(diffs))
    return float(np.mean(diffs)) / spread


def _win_probability(better_diffs: np.ndarray, alpha: float) -> tuple[float, float, float]:
    """P(A beats B on a new seed): the share of seeds where A was better (a tie counts half),
    with a Clopper-Pearson interval at 1 - alpha (statsmodels). Half-wins are rounded down
    for the lower bound and up for the upper, so the interval never claims more than the
    seeds show."""
    n = len(better_diffs)
    wins = float(np.sum(better_diffs > 0) + 0.5 * np.sum(better_diffs == 0))
    low = proportion_confint(math.floor(wins), n, alpha=alpha, method="beta")[0]
    high = proportion_confint(math.ceil(wins), n, alpha=alpha, method="beta")[1]
    return wins / n, float(low), float(high)


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
    adjusted[tested] = multipletests(values[tested], alpha=alpha, method="holm")[1]
    order = tested[np.argsort(values[tested], kind="stable")]
    m, stopped = len(order), False
    for j, index in enumerate(order):
        level = alpha / (m - j)
        if not stopped and values[index] > level:
            stopped, stop_level = True, level
        levels[index] = stop_level if stopped else level
    return adjusted.tolist(), levels.tolist()


def compare_arms(
    scores: Mapping[str, Mapping[str, Mapping[Any, float]]],
    arm_factors: Mapping[str, Mapping[str, Any]],
    grid: Mapping[str, Sequence[Any]],
    metrics: Sequence[str],
    baseline: Mapping[str, Any] | None = None,
    aso_kwargs: Mapping[str, Any] | None = None,
    analysis: Analysis | None = None,
) -> list[Comparison]:
    """Every planned comparison of a study: arm pairs (see `arm_pairs`) x metrics. The primary
    metric's comparisons get verdicts under multiplicity control, and deepsig's ASO; the rest
    are exploratory, with their t interval and signed-rank test but no ASO: its bootstrap was
    nearly all of a report's time, and a grid compared all-pairs has hundreds of pairs per
    metric (docs/scale.md). `scores[arm][metric][unit]`; `arm_factors` is in plan order."""
    analysis = analysis or Analysis()
    ids = list(arm_factors)
    pairs = arm_pairs([arm_factors[i] for i in ids], grid, baseline)
    out = []
    for metric in metrics:
        if metric == analysis.primary:
            out += _primary(scores, ids, pairs, analysis, aso_kwargs)
            continue
        out += [
            compare(
                scores.get(ids[a], {}).get(metric, {}),
                scores.get(ids[b], {}).get(metric, {}),
                metric=metric,
                arm_a=ids[a],
                arm_b=ids[b],
                factor=factor,
                higher_is_better=direction(metric) == "max",
                analysis=analysis,
                with_aso=False,
            )
            for a, b, factor in pairs
        ]
    return out


def _primary(
    scores: Mapping, ids: list[str], pairs: list, analysis: Analysis, aso_kwargs: Any
) -> list[Comparison]:
    """Verdicts for the primary comparisons: Holm over the family at one look, or, when the
    confirm phase ran in rounds, the group-sequential rule at alpha split evenly over the
    family (Bonferroni), each comparison reported at the look that decided it."""
    metric, out = analysis.primary, []
    for a, b, factor in pairs:
        pair_a = scores.get(ids[a], {}).get(metric, {})
        pair_b = scores.get(ids[b], {}).get(metric, {})
        kwargs = dict(metric=metric, arm_a=ids[a], arm_b=ids[b], factor=factor,
                      higher_is_better=direction(metric) == "max", analysis=analysis,
                      with_aso=False)  # fmt: skip
        if analysis.sequential:
            out.append(_sequential(pair_a, pair_b, analysis, len(pairs), kwargs))
        else:
            # Holm's levels set the intervals and power (`_holm_verdicts`)
            c = compare(pair_a, pair_b, with_intervals=False, **kwargs)
            out.append(dataclasses.replace(c, primary=True))
    out = _with_aso(out, scores, 1 - analysis.alpha / max(1, len(pairs)), aso_kwargs)
    return out if analysis.sequential else _holm_verdicts(out, analysis, scores)


def _with_aso(
    family: list[Comparison], scores: Mapping, confidence: float, aso_kwargs: Any
) -> list[Comparison]:
    """The family's ASO, computed together (over the cores, when there are many) on the seeds
    each comparison used, as `compare` computes it for one comparison."""
    tested = [c for c in family if c.n >= 2]
    jobs = []
    for c in tested:
        sign = 1.0 if c.higher_is_better else -1.0
        a, b = (scores[arm][c.metric] for arm in (c.arm_a, c.arm_b))
        xa, xb = (np.array([side[u] for u in c.seeds], float) for side in (a, b))
        jobs.append((sign * xa, sign * xb, confidence, 0, aso_kwargs))
    eps = dict(zip(map(id, tested), aso_both_ways_many(jobs), strict=True))
    return [
        dataclasses.replace(c, eps_min=eps[id(c)][0], eps_min_reverse=eps[id(c)][1],
                            aso_confidence=confidence) if id(c) in eps else c
        for c in family
    ]  # fmt: skip


def sequential_decision(
    a: Mapping[Any, float], b: Mapping[Any, float], analysis: Analysis, family_size: int,
    higher_is_better: bool = True, more_can_come: bool = False,
) -> tuple[sequential.Decision, list]:  # fmt: skip
    """The group-sequential decision on the paired units in round order, and those units:
    what the driver asks after each round and the report asks at the end."""
    units, _, _, _ = pair_scores(a, b)
    units = analysis.ordered(units)
    sign = 1.0 if higher_is_better else -1.0
    diffs = np.array([sign * (a[u] - b[u]) for u in units], float)
    decision = sequential.decide(diffs, analysis.unit_looks, analysis.alpha / family_size,
                                 analysis.margin, analysis.spending,
                                 more_can_come=more_can_come)  # fmt: skip
    return decision, units


def _sequential(
    a: Mapping, b: Mapping, analysis: Analysis, family_size: int, kwargs: dict
) -> Comparison:
    decision, units = sequential_decision(a, b, analysis, family_size, kwargs["higher_is_better"])
    used = set(units[: decision.n])
    c = compare({u: a[u] for u in used}, {u: b[u] for u in used}, level=decision.level_two_sided,
                one_sided=decision.level_one_sided, **kwargs)  # fmt: skip
    outcome = "inconclusive" if decision.verdict == "continue" else decision.verdict
    unpaired = tuple(sorted((set(a) | set(b)) - used))
    return dataclasses.replace(c, primary=True, outcome=outcome if c.n >= 2 else "inconclusive",
                               look=decision.look, unpaired=unpaired)  # fmt: skip


def _holm_verdicts(
    family: list[Comparison], analysis: Analysis, scores: Mapping
) -> list[Comparison]:
    alpha = analysis.alpha
    fields = ("p_t", "p_equivalence", "p_a_noninferior", "p_b_noninferior")
    adjusted = {f: holm([getattr(c, f) for c in family], alpha) for f in fields}
    out = []
    for i, c in enumerate(family):
        if c.n < 2:
            out.append(c)
            continue
        p = {f: adjusted[f][0][i] for f in fields}
        c = dataclasses.replace(
            c,
            p_holm=p["p_t"],
            p_equivalence_holm=p["p_equivalence"],
            p_a_noninferior_holm=p["p_a_noninferior"],
            p_b_noninferior_holm=p["p_b_noninferior"],
            outcome=_outcome(c, p, alpha),
        )
        diffs = _diffs(scores, c.arm_a, c.arm_b, c.metric)
        out.append(with_level(c, diffs, adjusted["p_t"][1][i], adjusted["p_equivalence"][1][i]))
    return out


def _outcome(c: Comparison, p: Mapping[str, float], alpha: float) -> str:
    if p["p_t"] < alpha:
        return "A better" if c.a_better else "B better"
    if c.margin > 0 and p["p_equivalence"] < alpha:
        return "equivalent"
    if c.margin > 0 and p["p_a_noninferior"] < alpha:
        return "A non-inferior"
    if c.margin > 0 and p["p_b_noninferior"] < alpha:
        return "B non-inferior"
    return "inconclusive"


def _diffs(scores: Mapping, a: str, b: str, metric: str) -> np.ndarray:
    _, xa, xb, _ = pair_scores(scores.get(a, {}).get(metric, {}), scores.get(b, {}).get(metric, {}))
    return xa - xb
