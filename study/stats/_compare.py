"""Paired comparisons of arms over held-out seeds, under an analysis declared in advance.

Seed s fixes the data subset, data order and head initialisation identically in every arm, so
the unit of analysis is the per-seed *difference* between two arms. Seed noise on NER is about
one F1 point, the size of the effects studied, so a reader needs more than a p-value:

- Only the declared primary metric's comparisons get verdicts: *A better*, *B better*,
  *equivalent within ±margin* (two one-sided t-tests), *A non-inferior to B*, or
  *inconclusive* with the seeds that would decide it. One closed test over every hypothesis of
  those comparisons (Holm's step-down over them) holds the chance of any false verdict, of any
  kind, at alpha; every other metric is exploratory, with unadjusted p.
- The interval of record is the paired t interval at the level the test used, so it excludes
  0 exactly when the test rejects (a percentile bootstrap of 5 differences covers ~80%, not
  95%; it is shown only from 10 seeds on).
- When the confirm phase runs in rounds, each comparison is decided by the group-sequential
  rule of `study.stats.sequential` at the first look that decides it, with alpha split over the
  primary comparisons (Bonferroni) and spent over the looks.
- Power is for a true difference of one margin at the observed spread of the differences, not
  the post-hoc power of the observed effect (a function of p).

This module composes the families: `_units` (pairing), `_intervals`, `_rank`, `_effects`,
`_multiplicity`, `_verdicts` and `_aso`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from study.analysis import Analysis
from study.stats import sequential
from study.stats._aso import aso_both_ways, with_family_aso
from study.stats._effects import cohens_dz, win_probability
from study.stats._intervals import with_level
from study.stats._pairs import arm_pairs, direction
from study.stats._rank import wilcoxon_min_p, wilcoxon_p
from study.stats._record import Comparison, unit_text
from study.stats._units import of_seeds, pair_scores
from study.stats._verdicts import (
    holm_verdicts,
    sequential_decision,
    sequential_levels,
    with_decided_interval,
)

ASO_TAU = 0.2  # A almost stochastically dominates B when eps_min < tau (Ulmer et al. 2022)


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
    margin = analysis.margin_for(metric)
    base = Comparison(metric, arm_a, arm_b, factor, higher_is_better, tuple(seeds),
                      tuple(unpaired), margin=math.nan if margin is None else margin,
                      level=level)  # fmt: skip
    notes = (
        [f"seeds {', '.join(map(unit_text, unpaired))} unpaired or not finite"] if unpaired else []
    )
    if len(seeds) < 2:
        notes.insert(0, f"{len(seeds)} paired seed(s); at least 2 are needed")
        if not a and not b:
            notes.append("neither arm recorded a finite value")
        return dataclasses.replace(base, note="; ".join(notes), outcome="inconclusive")
    sign = 1.0 if higher_is_better else -1.0
    out = _figures(base, xa, xb, sign, level, analysis)
    if with_aso:
        confidence = 1 - analysis.alpha / max(1, aso_comparisons)
        eps = aso_both_ways(sign * xa, sign * xb, confidence, seed, aso_kwargs)
        out = dataclasses.replace(out, eps_min=eps[0], eps_min_reverse=eps[1],
                                  aso_confidence=confidence)  # fmt: skip
    out = dataclasses.replace(out, note="; ".join(notes))
    return with_level(out, xa - xb, level, one_sided, seed) if with_intervals else out


def _figures(
    base: Comparison, xa: np.ndarray, xb: np.ndarray, sign: float, level: float, analysis: Analysis
) -> Comparison:
    """Means, spread, the t-tests at one look, the rank test and the effect sizes. Without a
    margin in the metric's units, no equivalence or non-inferiority p."""
    diffs = xa - xb
    margin = 0.0 if math.isnan(base.margin) else base.margin
    decision = sequential.decide(sign * diffs, (len(diffs),), level, margin, analysis.spending,
                                 more_can_come=False)  # fmt: skip
    if math.isnan(base.margin):
        nan = math.nan
        decision = dataclasses.replace(
            decision, p_equivalence=nan, p_a_noninferior=nan, p_b_noninferior=nan
        )
    win = win_probability(sign * diffs, analysis.alpha)
    return dataclasses.replace(
        base,
        mean_a=float(xa.mean()),
        mean_b=float(xb.mean()),
        diff=float(diffs.mean()),
        sd_diff=float(np.std(diffs, ddof=1)),
        p_t=decision.p_two_sided,
        p_wilcoxon=wilcoxon_p(diffs),
        wilcoxon_min_p=wilcoxon_min_p(int(np.count_nonzero(diffs))),
        p_equivalence=decision.p_equivalence,
        p_a_noninferior=decision.p_a_noninferior,  # decide's diffs point the better way
        p_b_noninferior=decision.p_b_noninferior,
        cohens_d=cohens_dz(diffs),
        win_rate=win[0],
        win_low=win[1],
        win_high=win[2],
    )


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
                *_sides(scores, ids[a], ids[b], metric),
                **_kwargs(ids, a, b, factor, metric),
                analysis=analysis,
            )  # fmt: skip
            for a, b, factor in pairs
        ]
    return out


def _sides(scores: Mapping, a: str, b: str, metric: str) -> tuple[Mapping, Mapping]:
    return scores.get(a, {}).get(metric, {}), scores.get(b, {}).get(metric, {})


def _kwargs(ids: list[str], a: int, b: int, factor: str, metric: str) -> dict[str, Any]:
    return dict(metric=metric, arm_a=ids[a], arm_b=ids[b], factor=factor,
                higher_is_better=direction(metric) == "max", with_aso=False)  # fmt: skip


def _primary(
    scores: Mapping, ids: list[str], pairs: list, analysis: Analysis, aso_kwargs: Any
) -> list[Comparison]:
    """Verdicts for the primary comparisons: one step-down over every test of the family at
    one look (`holm_verdicts`), or, when the confirm phase ran in rounds, the group-sequential
    rule at alpha split evenly over the family (Bonferroni), each comparison reported at the
    look that decided it."""
    metric, out = analysis.primary, []
    for a, b, factor in pairs:
        pair_a, pair_b = _sides(scores, ids[a], ids[b], metric)
        kwargs = dict(_kwargs(ids, a, b, factor, metric), analysis=analysis)
        if analysis.sequential:
            out.append(_sequential(pair_a, pair_b, analysis, len(pairs), kwargs))
        else:
            # the step-down's levels set the intervals and power (`holm_verdicts`)
            c = compare(pair_a, pair_b, with_intervals=False, **kwargs)
            out.append(dataclasses.replace(c, primary=True))
    out = with_family_aso(out, scores, 1 - analysis.alpha / max(1, len(pairs)), aso_kwargs)
    return out if analysis.sequential else holm_verdicts(out, analysis, scores)


def _sequential(
    a: Mapping, b: Mapping, analysis: Analysis, family_size: int, kwargs: dict
) -> Comparison:
    """A comparison judged at the look that decided it, on the seeds that look used."""
    decision, seeds = sequential_decision(a, b, analysis, family_size, kwargs["higher_is_better"])
    used_a, used_b = of_seeds(a, seeds[: decision.n]), of_seeds(b, seeds[: decision.n])
    c = compare(used_a, used_b, level=decision.level_two_sided,
                one_sided=decision.level_one_sided, **kwargs)  # fmt: skip
    outcome = "inconclusive" if decision.verdict == "continue" else decision.verdict
    unpaired = tuple(sorted((set(a) | set(b)) - (set(used_a) & set(used_b))))
    c = dataclasses.replace(c, primary=True, outcome=outcome if c.n >= 2 else "inconclusive",
                            look=decision.look, unpaired=unpaired)  # fmt: skip
    if c.n < 2:
        return c
    _, xa, xb, _ = pair_scores(used_a, used_b)
    return with_decided_interval(c, xa - xb, sequential_levels(decision))
