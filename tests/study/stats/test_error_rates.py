"""Every verdict's false rate, simulated against a reference implementation of the rule that
shares no code with `sequential.decide` (scipy's t-tests, written out from docs/statistics.md),
and the reference tied to `decide` by agreeing on every study of a smaller sample.

A verdict is false when its claim is untrue at the least favourable true difference: *better*
at 0, *equivalent* at exactly +margin (the boundary of the null), *A non-inferior* at exactly
-margin, *B non-inferior* at +margin. Each rate must stay at its level plus two Monte-Carlo
standard errors: alpha for better and equivalent, the non-inferiority level for the rest.
`bench/error_rates.py` prints the same table with more simulations (docs/statistics.md).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from study import stats
from study.analysis import Analysis
from study.stats import sequential

ALPHA, MARGIN, SD = 0.05, 0.5, 1.0
PLANS = [((5,), "obrien_fleming"), ((5, 10, 15, 20), "obrien_fleming"),
         ((5, 10, 15, 20), "pocock"), ((4, 8), "pocock")]  # fmt: skip
STUDIES = 100_000


def reference_verdicts(
    draws: np.ndarray, looks: tuple[int, ...], alpha: float, margin: float, kind: str,
    ni_level: float,
) -> np.ndarray:  # fmt: skip
    """The rule of docs/statistics.md, one row per study: at each look in turn, a two-sided
    t-test below the look's level decides better; else both one-sided tests of TOST below the
    look's one-sided level decide equivalent; at the last look, a one-sided test against the
    margin below the non-inferiority level decides non-inferior; else inconclusive. Levels:
    the public t boundaries (`sequential.t_levels`), whose spend these rates check."""
    two = sequential.t_levels(looks, alpha, kind, 2)
    one = sequential.t_levels(looks, alpha, kind, 1)
    verdict = np.full(len(draws), "", dtype=object)
    for k, n in enumerate(looks):
        x, open_ = draws[:, :n], verdict == ""
        p_two = sps.ttest_1samp(x, 0.0, axis=1).pvalue
        p_a = sps.ttest_1samp(x, -margin, axis=1, alternative="greater").pvalue
        p_b = sps.ttest_1samp(x, margin, axis=1, alternative="less").pvalue
        better = open_ & (p_two < two[k])
        verdict[better] = np.where(x[better].mean(axis=1) > 0, "A better", "B better")
        equivalent = open_ & ~better & (np.maximum(p_a, p_b) < one[k]) & (margin > 0)
        verdict[equivalent] = "equivalent"
        if k == len(looks) - 1:
            rest = verdict == ""
            verdict[rest & (p_a < ni_level) & (margin > 0)] = "A non-inferior"
            rest = verdict == ""
            verdict[rest & (p_b < ni_level) & (margin > 0)] = "B non-inferior"
            verdict[verdict == ""] = "inconclusive"
    return verdict


def false_rates(looks, kind, studies=STUDIES, seed=0, ni_level=ALPHA / 2) -> dict[str, float]:
    """The four false rates of one plan, each at its least favourable true difference."""
    rng = np.random.default_rng(seed)
    at = {d: reference_verdicts(rng.normal(d, SD, (studies, looks[-1])), looks, ALPHA,
                                MARGIN if d else 0.0, kind, ni_level)
          for d in (0.0, MARGIN, -MARGIN)}  # fmt: skip
    return {
        "better": float(np.mean(np.isin(at[0.0], ("A better", "B better")))),
        "equivalent": float(np.mean(at[MARGIN] == "equivalent")),
        "A non-inferior": float(np.mean(at[-MARGIN] == "A non-inferior")),
        "B non-inferior": float(np.mean(at[MARGIN] == "B non-inferior")),
    }


def mc_se(level: float, studies: int = STUDIES) -> float:
    return math.sqrt(level * (1 - level) / studies)


@pytest.mark.parametrize(("looks", "kind"), PLANS)
def test_the_reference_is_the_rule_decide_applies(looks, kind):
    rng = np.random.default_rng(3)
    for true_diff in (0.0, MARGIN, -MARGIN, 0.2, 1.0):
        draws = rng.normal(true_diff, SD, (150, looks[-1]))
        expected = reference_verdicts(draws, looks, ALPHA, MARGIN, kind, ALPHA / 2)
        got = [sequential.decide(row, looks, ALPHA, MARGIN, kind, more_can_come=False).verdict
               for row in draws]  # fmt: skip
        assert list(expected) == got, true_diff


@pytest.mark.parametrize(("looks", "kind"), PLANS)
def test_every_false_verdict_stays_at_its_level(looks, kind):
    """better at a true difference of 0 with no margin (no equivalence to stop it early),
    equivalence and non-inferiority at the boundary of the margin."""
    rates = false_rates(looks, kind, seed=len(looks))
    levels = {"better": ALPHA, "equivalent": ALPHA, "A non-inferior": ALPHA / 2,
              "B non-inferior": ALPHA / 2}  # fmt: skip
    for verdict, level in levels.items():
        assert rates[verdict] <= level + 2 * mc_se(level), (verdict, rates[verdict])
    # not conservative by much: the t boundaries spend alpha, they do not hoard it
    assert rates["better"] >= ALPHA - 3 * mc_se(ALPHA)


def test_a_declared_non_inferiority_level_is_the_one_tested():
    """One-sided p of A's non-inferiority 0.017: non-inferior at the default alpha / 2, not at
    a declared 0.01; TOST and the two-sided test fail either way."""
    x = np.sin(np.arange(1, 11) * 1.7)
    diffs = 0.3 + 0.32 * math.sqrt(10) * (x - x.mean()) / x.std(ddof=1)
    default = sequential.decide(diffs, (10,), ALPHA, MARGIN)
    assert 0.01 < default.p_a_noninferior < ALPHA / 2 < 0.05 < default.p_b_noninferior
    assert (default.verdict, default.level_noninferior) == ("A non-inferior", ALPHA / 2)
    strict = sequential.decide(diffs, (10,), ALPHA, MARGIN, ni_level=0.01)
    assert (strict.verdict, strict.level_noninferior) == ("inconclusive", 0.01)


def test_the_normal_boundaries_were_too_liberal_for_t_statistics():
    """The fault the t boundaries fix, measured: the normal-theory levels let Pocock's false
    'better' rate exceed alpha by more than Monte-Carlo error (0.054)."""
    looks = (5, 10, 15, 20)
    rng = np.random.default_rng(11)
    x = rng.normal(0.0, SD, (STUDIES, looks[-1]))
    crossed = np.zeros(STUDIES, bool)
    for n, level in zip(looks, sequential.nominal_levels(looks, ALPHA, "pocock"), strict=True):
        crossed |= sps.ttest_1samp(x[:, :n], 0.0, axis=1).pvalue < level
    assert crossed.mean() > ALPHA + 2 * mc_se(ALPHA)


# --- the seed as the unit of analysis ---------------------------------------------------------

SEEDS, DATA_SEEDS = 5, 3


def crossed_null(sims: int, rng: np.random.Generator) -> np.ndarray:
    """A - B per (seed, data seed) with no true difference: an arm x seed interaction (sd 1),
    an arm x data-seed interaction (sd 1; a fixed effect of the study's data seeds, so it sums
    to 0 over them: no difference on average over the data orders studied), and an arm x
    seed x data-seed residual (sd 0.5)."""
    seed_effect = rng.normal(0, 1.0, (sims, SEEDS, 1))
    data_effect = rng.normal(0, 1.0, (sims, 1, DATA_SEEDS))
    data_effect -= data_effect.mean(axis=2, keepdims=True)
    return seed_effect + data_effect + rng.normal(0, 0.5, (sims, SEEDS, DATA_SEEDS))


def test_pairs_are_seeds_averaged_over_their_data_seeds():
    diffs = crossed_null(40, np.random.default_rng(1))
    for row in diffs:
        a = {(s, d): 0.5 + row[s, d] for s in range(SEEDS) for d in range(DATA_SEEDS)}
        b = {unit: 0.5 for unit in a}
        c = stats.compare(a, b, metric="test_f1", arm_a="A", arm_b="B", with_aso=False)
        assert c.seeds == tuple(range(SEEDS))
        assert c.p_t == pytest.approx(sps.ttest_1samp(row.mean(axis=1), 0.0).pvalue, rel=1e-9)


def test_with_data_seeds_the_false_better_rate_stays_at_alpha():
    """Seed means (what `compare` tests) keep the size; the (seed, data seed) units taken as
    independent pairs, as before, do not (about 0.2)."""
    sims = 100_000
    diffs = crossed_null(sims, np.random.default_rng(2))
    by_seed = sps.ttest_1samp(diffs.mean(axis=2), 0.0, axis=1).pvalue < ALPHA
    assert abs(by_seed.mean() - ALPHA) <= 2 * mc_se(ALPHA, sims)
    by_unit = sps.ttest_1samp(diffs.reshape(sims, -1), 0.0, axis=1).pvalue < ALPHA
    assert by_unit.mean() > 0.1


def test_sequential_looks_count_seeds():
    analysis = Analysis(looks=(3, 5), seed_order=(0, 1, 2, 3, 4), data_seeds=DATA_SEEDS)
    a = {(s, d): 0.6 + 0.01 * d for s in range(SEEDS) for d in range(DATA_SEEDS)}
    b = {(s, d): 0.5 + 0.02 * s for s in range(SEEDS) for d in range(DATA_SEEDS)}
    decision, seeds = stats.sequential_decision(a, b, analysis, 1, more_can_come=True)
    assert seeds == list(range(SEEDS)) and decision.n in (3, 5)
