"""Verdicts of the primary comparisons: Holm's step-down over the family at one look, or the
group-sequential rule of `study.stats.sequential` when the confirm phase runs in rounds."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from study.analysis import Analysis
from study.stats import sequential
from study.stats._intervals import with_level
from study.stats._multiplicity import holm
from study.stats._record import Comparison
from study.stats._units import pair_scores

_P_FIELDS = ("p_t", "p_equivalence", "p_a_noninferior", "p_b_noninferior")


def holm_verdicts(
    family: list[Comparison], analysis: Analysis, scores: Mapping
) -> list[Comparison]:
    """Each tested comparison with its Holm-adjusted p-values, its verdict, and its intervals
    and power at the level Holm's step used for it."""
    alpha = analysis.alpha
    adjusted = {f: holm([getattr(c, f) for c in family], alpha) for f in _P_FIELDS}
    out = []
    for i, c in enumerate(family):
        if c.n < 2:
            out.append(c)
            continue
        p = {f: adjusted[f][0][i] for f in _P_FIELDS}
        c = dataclasses.replace(
            c,
            p_holm=p["p_t"],
            p_equivalence_holm=p["p_equivalence"],
            p_a_noninferior_holm=p["p_a_noninferior"],
            p_b_noninferior_holm=p["p_b_noninferior"],
            outcome=outcome(c, p, alpha),
        )
        diffs = _diffs(scores, c.arm_a, c.arm_b, c.metric)
        out.append(with_level(c, diffs, adjusted["p_t"][1][i], adjusted["p_equivalence"][1][i]))
    return out


def outcome(c: Comparison, p: Mapping[str, float], alpha: float) -> str:
    """The first claim the adjusted p-values support, in the order better, equivalent,
    non-inferior."""
    if p["p_t"] < alpha:
        return "A better" if c.a_better else "B better"
    if c.margin > 0 and p["p_equivalence"] < alpha:
        return "equivalent"
    if c.margin > 0 and p["p_a_noninferior"] < alpha:
        return "A non-inferior"
    if c.margin > 0 and p["p_b_noninferior"] < alpha:
        return "B non-inferior"
    return "inconclusive"


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


def _diffs(scores: Mapping, a: str, b: str, metric: str) -> np.ndarray:
    _, xa, xb, _ = pair_scores(scores.get(a, {}).get(metric, {}), scores.get(b, {}).get(metric, {}))
    return xa - xb
