"""Verdicts of the primary comparisons, and the interval of the test that decided each.

At one look, one family-wise error covers every verdict the study can draw: a closed test
over all the hypotheses of all the primary comparisons, the two-sided t-test and TOST at
alpha, non-inferiority one-sided at `Analysis.ni_level` (alpha / 2 unless declared, as ICH E9
and CONSORT), whose shortcut is Holm's step-down over the comparisons
(`_multiplicity.holm_by_group`). Holm run per kind of test let each kind spend alpha: a false
'better' on one comparison and a false 'equivalent' on another added up (0.063 at 20 seeds
for a declared 0.05, docs/statistics.md). When the confirm phase runs in rounds, the
group-sequential rule of `study.stats.sequential` decides, with alpha (and the
non-inferiority level) split over the comparisons (Bonferroni), which covers every kind at
once where each comparison's rule errs at most at its share whatever its verdict (simulated:
docs/statistics.md).

Every verdict is shown with the interval of the test that decided it, at that test's level,
so that interval and verdict cannot disagree: the two-sided 1 - level t interval for *better*
(excludes 0), the 1 - 2 x level TOST interval for *equivalent* (inside ±margin), the one-sided
1 - level bound for *non-inferior* (beyond -margin on the claimed side), and for
*inconclusive* the two-sided interval at the smallest level of the tests that failed, so that
it shows all of them failing (contains 0, and both -margin and +margin when a margin applies).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from study.analysis import Analysis
from study.stats import sequential
from study.stats._intervals import t_interval, with_level
from study.stats._multiplicity import holm_by_group
from study.stats._rank import wilcoxon_min_p
from study.stats._record import Comparison
from study.stats._units import pair_scores

_P_FIELDS = ("p_t", "p_equivalence", "p_a_noninferior", "p_b_noninferior")


class Levels(NamedTuple):
    """The level each test of one comparison was run at: two-sided (better), one-sided
    (each of TOST's tests; its interval is at 1 - 2 x this), and one-sided for A's and B's
    non-inferiority."""

    two: float
    equivalence: float
    a_noninferior: float
    b_noninferior: float


def holm_verdicts(
    family: list[Comparison], analysis: Analysis, scores: Mapping
) -> list[Comparison]:
    """Each tested comparison with its adjusted p-values, its verdict, and its intervals and
    power at the levels the family's step-down used for it."""
    out = []
    for c, v in zip(family, family_verdicts(family, analysis), strict=True):
        if v is None:
            out.append(c)
            continue
        c = dataclasses.replace(
            c,
            p_holm=v.adjusted["p_t"],
            p_equivalence_holm=v.adjusted["p_equivalence"],
            p_a_noninferior_holm=v.adjusted["p_a_noninferior"],
            p_b_noninferior_holm=v.adjusted["p_b_noninferior"],
            outcome=v.outcome,
        )
        diffs = _diffs(scores, c.arm_a, c.arm_b, c.metric)
        c = with_level(c, diffs, v.levels.two, v.levels.equivalence)
        out.append(with_decided_interval(c, diffs, v.levels))
    return out


class Verdict(NamedTuple):
    """One comparison's verdict at one look, the adjusted p-values it rests on (by the raw
    p's field name; non-inferiority's on its own scale, to be read against `ni_level`) and
    the level each test was run at."""

    outcome: str
    adjusted: dict[str, float]
    levels: Levels


def family_verdicts(family: Sequence[Comparison], analysis: Analysis) -> list[Verdict | None]:
    """The verdict of every comparison of the family at one look, from its raw p-values
    alone (None where fewer than 2 seeds left nothing to test): what `holm_verdicts` draws,
    without the intervals, so that the error of the verdicts can be simulated quickly.

    One step-down over all four tests of all comparisons (`holm_by_group`), non-inferiority
    weighted by ni_level / alpha: the chance of any false verdict is at most alpha (at most
    the declared `ni_alpha` where that is larger than alpha: one comparison alone allows
    that). Without a margin (or with 0) a comparison has only its t-test: TOST and
    non-inferiority draw no verdict, and against a margin of 0 they would hold together with
    the t-test's null at a difference of 0, which the closed test must not assume."""
    ratio = analysis.ni_level / analysis.alpha
    groups = [
        [getattr(c, f) if c.n >= 2 and (f == "p_t" or c.margin > 0) else math.nan
         for f in _P_FIELDS]
        for c in family
    ]  # fmt: skip
    adjusted, levels = holm_by_group(groups, analysis.alpha, (1.0, 1.0, ratio, ratio))
    out: list[Verdict | None] = []
    for c, p_values, tested_at in zip(family, adjusted, levels, strict=True):
        if c.n < 2:
            out.append(None)
            continue
        p = dict(zip(_P_FIELDS, p_values, strict=True))
        # a test that draws no verdict (margin 0) keeps an interval at its comparison's share
        shown = [w * tested_at[0] if math.isnan(lv) else lv
                 for lv, w in zip(tested_at, (1.0, 1.0, ratio, ratio), strict=True)]  # fmt: skip
        out.append(Verdict(outcome(c, p, analysis.alpha, analysis.ni_level), p,
                           Levels(*shown)))  # fmt: skip
    return out


def outcome(c: Comparison, p: Mapping[str, float], alpha: float, ni_level: float) -> str:
    """The first claim the adjusted p-values support, in the order better, equivalent,
    non-inferior (the last at the non-inferiority level)."""
    if p["p_t"] < alpha:
        return "A better" if c.a_better else "B better"
    if c.margin > 0 and p["p_equivalence"] < alpha:
        return "equivalent"
    if c.margin > 0 and p["p_a_noninferior"] < ni_level:
        return "A non-inferior"
    if c.margin > 0 and p["p_b_noninferior"] < ni_level:
        return "B non-inferior"
    return "inconclusive"


def with_decided_interval(c: Comparison, diffs: np.ndarray, levels: Levels) -> Comparison:
    """The interval of the test that decided the verdict, at that test's level, named; and
    whether an exact signed-rank test could have reached that level at all with n seeds."""
    interval, by, level = _decided(c, diffs, levels)
    return dataclasses.replace(
        c,
        decided_low=interval[0],
        decided_high=interval[1],
        decided_by=by,
        ni_level=levels.b_noninferior if c.outcome == "B non-inferior" else levels.a_noninferior,
        rests_on_normality=wilcoxon_min_p(c.n) > level,
    )


def _decided(
    c: Comparison, diffs: np.ndarray, levels: Levels
) -> tuple[tuple[float, float], str, float]:
    """(interval, its name, the two-sided level a rank test would have to reach)."""
    if c.outcome in ("A better", "B better"):
        return (
            t_interval(diffs, 1 - levels.two),
            f"two-sided {_pct(levels.two)} t interval",
            (levels.two),
        )
    if c.outcome == "equivalent":
        two = 2 * levels.equivalence
        return t_interval(diffs, 1 - two), f"{_pct(two)} TOST interval (1 − 2α)", two
    if c.outcome in ("A non-inferior", "B non-inferior"):
        a_side = c.outcome == "A non-inferior"
        level = levels.a_noninferior if a_side else levels.b_noninferior
        low, high = t_interval(diffs, 1 - 2 * level)
        lower = a_side == c.higher_is_better  # A - B bounded from below
        interval = (low, np.inf) if lower else (-np.inf, high)
        return (
            interval,
            f"one-sided {_pct(level)} {'lower' if lower else 'upper'} bound",
            (2 * level),
        )
    tested = [levels.two]
    if c.margin > 0:
        tested += [2 * levels.equivalence, 2 * levels.a_noninferior, 2 * levels.b_noninferior]
    level = min(tested)
    return t_interval(diffs, 1 - level), f"two-sided {_pct(level)} t interval", level


def _pct(level: float) -> str:
    return f"{100 * (1 - level):.4g}%"


def sequential_decision(
    a: Mapping[Any, float], b: Mapping[Any, float], analysis: Analysis, family_size: int,
    higher_is_better: bool = True, more_can_come: bool = False,
) -> tuple[sequential.Decision, list]:  # fmt: skip
    """The group-sequential decision on the paired seeds in round order (each seed's mean
    over its data seeds), and those seeds: what the driver asks after each round and the
    report asks at the end. The looks count seeds, the unit of analysis."""
    seeds, xa, xb, _ = pair_scores(a, b)
    order = analysis.ordered(seeds)
    index = {s: i for i, s in enumerate(seeds)}
    sign = 1.0 if higher_is_better else -1.0
    diffs = np.array([sign * (xa[index[s]] - xb[index[s]]) for s in order], float)
    margin = analysis.margin_for(analysis.primary) or 0.0
    decision = sequential.decide(diffs, analysis.looks,
                                 analysis.alpha / family_size, margin, analysis.spending,
                                 more_can_come=more_can_come,
                                 ni_level=analysis.ni_level / family_size)  # fmt: skip
    return decision, order


def sequential_levels(decision: sequential.Decision) -> Levels:
    return Levels(decision.level_two_sided, decision.level_one_sided,
                  decision.level_noninferior, decision.level_noninferior)  # fmt: skip


def _diffs(scores: Mapping, a: str, b: str, metric: str) -> np.ndarray:
    _, xa, xb, _ = pair_scores(scores.get(a, {}).get(metric, {}), scores.get(b, {}).get(metric, {}))
    return xa - xb
