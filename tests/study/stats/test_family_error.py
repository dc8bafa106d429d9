"""The chance of any false verdict in a study, over every verdict kind and every primary
comparison at one look, simulated: it must stay at the declared alpha.

Each simulated study has three primary comparisons of normal paired differences (sd 1), at
true differences 0, +margin and -margin (margin 0.5 sd), the least favourable for a false
*better*, for a false *equivalent* or *B non-inferior*, and for a false *equivalent* or *A
non-inferior*. The raw p-values are computed here with scipy (two-sided t-test, TOST against
±margin, the two one-sided non-inferiority tests); the verdicts are drawn by the project's own
path at one look (`family_verdicts`, what `holm_verdicts` and so `compare_arms` draw, which
the last test checks); whether a verdict is false is read from the true difference alone.
Holm run separately per verdict kind failed this (0.064 at 20 seeds, docs/statistics.md).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from study import stats
from study.analysis import Analysis
from study.stats import _compare
from study.stats._multiplicity import holm_by_group
from study.stats._record import Comparison
from study.stats._verdicts import family_verdicts

ALPHA, MARGIN, SD = 0.05, 0.5, 1.0
TRUE_DIFFS = (0.0, MARGIN, -MARGIN)
STUDIES = 8_000


def raw_p_values(x: np.ndarray, margin: float) -> dict[str, np.ndarray]:
    """The four raw p-values of each row of paired differences A - B (last axis)."""
    p_a = sps.ttest_1samp(x, -margin, axis=-1, alternative="greater").pvalue  # H0: <= -margin
    p_b = sps.ttest_1samp(x, margin, axis=-1, alternative="less").pvalue  # H0: >= +margin
    return {
        "p_t": sps.ttest_1samp(x, 0.0, axis=-1).pvalue,
        "p_equivalence": np.maximum(p_a, p_b),
        "p_a_noninferior": p_a,
        "p_b_noninferior": p_b,
    }


def is_false(verdict: str, true_diff: float, margin: float) -> bool:
    """Whether a verdict's claim about A - B is untrue at the true difference."""
    return {
        "A better": true_diff <= 0,
        "B better": true_diff >= 0,
        "equivalent": abs(true_diff) >= margin,
        "A non-inferior": true_diff <= -margin,
        "B non-inferior": true_diff >= margin,
        "inconclusive": False,
    }[verdict]


def family_of(p: dict[str, np.ndarray], means: np.ndarray, study: int, n: int):
    """One study's primary comparisons, carrying only what a verdict is drawn from."""
    return [
        Comparison("test_f1", f"A{j}", "B", "k", True, tuple(range(n)), (), primary=True,
                   margin=MARGIN, diff=float(means[study, j]),
                   **{field: float(values[study, j]) for field, values in p.items()})
        for j in range(means.shape[1])
    ]  # fmt: skip


def any_false_rate(n: int, studies: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    truth = np.array(TRUE_DIFFS)
    x = rng.normal(truth[None, :, None], SD, (studies, len(truth), n))
    p, means = raw_p_values(x, MARGIN), x.mean(axis=-1)
    analysis = Analysis(margin=MARGIN, alpha=ALPHA)
    wrong = 0
    for study in range(studies):
        verdicts = family_verdicts(family_of(p, means, study, n), analysis)
        wrong += any(is_false(v.outcome, d, MARGIN) for v, d in zip(verdicts, truth, strict=True))
    return wrong / studies


@pytest.mark.parametrize("n", [5, 10, 20])
def test_the_chance_of_any_false_verdict_stays_at_alpha(n):
    rate = any_false_rate(n, STUDIES, seed=n)
    se = math.sqrt(ALPHA * (1 - ALPHA) / STUDIES)
    assert rate <= ALPHA + 2 * se, (n, rate, se)


def test_the_simulated_path_is_the_one_the_report_draws(monkeypatch):
    """compare_arms' verdicts are those of `family_verdicts` on the p-values computed here."""
    monkeypatch.setattr(_compare, "with_family_aso", lambda family, *args: family)
    rng = np.random.default_rng(4)
    analysis = Analysis(margin=0.01, alpha=ALPHA)
    seen = set()
    for _ in range(25):
        n = int(rng.integers(4, 12))
        base = rng.normal(0.5, 0.01, n)
        arms = {f"k={k}": {"k": k} for k in range(4)}
        scores = {"k=0": {"test_f1": dict(enumerate(base))}}
        for k in (1, 2, 3):
            shift = rng.choice([0.0, 0.01, -0.01, 0.005, 0.03])
            diff = rng.normal(shift, rng.choice([0.003, 0.01]), n)
            scores[f"k={k}"] = {"test_f1": dict(enumerate(base + diff))}
        out = stats.compare_arms(scores, arms, {}, ["test_f1"], baseline={"k": 0},
                                 analysis=analysis)  # fmt: skip
        x = np.array([[scores[c.arm_a]["test_f1"][s] - scores[c.arm_b]["test_f1"][s]
                       for s in range(n)] for c in out])  # fmt: skip
        p, means = raw_p_values(x[None], 0.01), x.mean(axis=-1)[None]
        family = [
            Comparison("test_f1", c.arm_a, c.arm_b, "k", True, tuple(range(n)), (),
                       primary=True, margin=0.01, diff=float(means[0, j]),
                       **{f: float(v[0, j]) for f, v in p.items()})
            for j, c in enumerate(out)
        ]  # fmt: skip
        expected = [v.outcome for v in family_verdicts(family, analysis)]
        assert [c.outcome for c in out] == expected
        seen |= set(expected)
    assert len(seen) >= 4, seen


def test_the_step_down_is_holm_with_each_hypothesis_in_its_comparisons_place():
    """`holm_by_group` against its definition, with statsmodels' Holm (`stats.holm`): a
    hypothesis' weighted p among the other comparisons' largest weighted p; its adjusted p on
    its own scale, and its level, agree with each other."""
    rng = np.random.default_rng(9)
    weights = (1.0, 1.0, 0.5, 0.5)
    for _ in range(200):
        k = int(rng.integers(1, 6))
        groups = rng.uniform(0, 0.12, (k, 4)) ** rng.choice([1, 2, 4], (k, 4))
        groups[rng.uniform(size=(k, 4)) < 0.15] = np.nan
        adjusted, levels = holm_by_group(groups.tolist(), ALPHA, weights)
        weighted = groups / np.array(weights)
        largest = [np.nanmax(row) if not np.isnan(row).all() else np.nan for row in weighted]
        for c in range(k):
            for i, w in enumerate(weights):
                if np.isnan(groups[c, i]):
                    assert math.isnan(adjusted[c][i]) and math.isnan(levels[c][i])
                    continue
                others = [q for j, q in enumerate(largest) if j != c]
                ref_adjusted, ref_levels = stats.holm([weighted[c, i], *others], ALPHA)
                assert levels[c][i] == pytest.approx(w * ref_levels[0])
                if ref_adjusted[0] < 1:
                    assert adjusted[c][i] == pytest.approx(w * ref_adjusted[0])
                assert (adjusted[c][i] < w * ALPHA) == (groups[c, i] < levels[c][i])


def test_one_comparison_keeps_each_test_at_its_own_level():
    adjusted, levels = holm_by_group([[0.03, 0.2, 0.01, 0.2]], ALPHA, (1, 1, 0.5, 0.5))
    assert adjusted == [pytest.approx([0.03, 0.2, 0.01, 0.2])]
    assert levels == [pytest.approx([ALPHA, ALPHA, ALPHA / 2, ALPHA / 2])]
