"""The group-sequential rule and the power function, against published boundaries, Monte Carlo
and statsmodels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.power import TTestPower
from statsmodels.stats.weightstats import ttost_paired

from study.stats import sequential

LOOKS = (5, 10, 15, 20)


@pytest.mark.parametrize("kind", sequential.SPENDING_KINDS)
def test_a_single_look_is_plain_alpha(kind):
    assert sequential.nominal_levels((5,), 0.05, kind, 2) == (0.05,)
    assert sequential.nominal_levels((5,), 0.05, kind, 1) == (0.05,)


def test_obrien_fleming_boundaries_match_the_published_ones():
    """Lan-DeMets O'Brien-Fleming, 4 equally spaced looks, two-sided 0.05 (0.025 a side):
    4.333, 2.963, 2.359, 2.014 (Jennison and Turnbull; gsDesign's sfLDOF)."""
    levels = sequential.nominal_levels(LOOKS, 0.05, "obrien_fleming", 2)
    bounds = [sps.norm.isf(p / 2) for p in levels]
    assert bounds == pytest.approx([4.333, 2.963, 2.359, 2.014], abs=0.002)
    one_sided = sequential.nominal_levels(LOOKS, 0.025, "obrien_fleming", 1)
    assert [sps.norm.isf(p) for p in one_sided] == pytest.approx(bounds, abs=1e-4)


@pytest.mark.parametrize("kind", sequential.SPENDING_KINDS)
@pytest.mark.parametrize("sided", [1, 2])
def test_the_boundaries_spend_exactly_alpha_over_all_looks(kind, sided):
    """Monte Carlo of the look statistics (scaled partial sums of normals)."""
    rng = np.random.default_rng(sided)
    increments = rng.normal(size=(200_000, len(LOOKS))) * np.sqrt(np.diff((0, *LOOKS)))
    z = np.cumsum(increments, axis=1) / np.sqrt(LOOKS)
    levels = sequential.nominal_levels(LOOKS, 0.05, kind, sided)
    bounds = np.array([sps.norm.isf(p / sided) for p in levels])
    crossed = (np.abs(z) if sided == 2 else z) >= bounds
    rate = crossed.any(axis=1).mean()
    assert rate == pytest.approx(0.05, abs=0.002)  # MC standard error ~0.0005


@pytest.mark.parametrize("n", [2, 3, 4, 5, 10])
@pytest.mark.parametrize("d", [0.3, 1.0, 3.0, 8.62])
def test_power_matches_monte_carlo_at_every_n(n, d):
    rng = np.random.default_rng(int(n * 100 + d * 10))
    draws = rng.normal(d, 1.0, (40_000, n))
    t = draws.mean(axis=1) / (draws.std(axis=1, ddof=1) / math.sqrt(n))
    simulated = np.mean(np.abs(t) > sps.t.isf(0.025, n - 1))
    power = sequential.paired_power(d, n, 0.05)
    assert math.isfinite(power)
    assert power == pytest.approx(simulated, abs=0.012)
    library = TTestPower().power(d, n, 0.05)  # NaN where scipy's noncentral t gives up
    if math.isfinite(library):
        assert power == pytest.approx(library, abs=1e-4)


def test_power_where_the_noncentral_t_fails():
    assert math.isnan(TTestPower().power(8.62, 2, 0.05))  # why this module integrates itself
    assert 0.6 < sequential.paired_power(8.62, 2) < 0.75
    assert sequential.paired_power(-1.0, 6) == sequential.paired_power(1.0, 6)
    assert sequential.paired_power(math.inf, 3) == 1.0
    with pytest.raises(ValueError):
        sequential.paired_power(1.0, 1)


def test_seeds_for_power_is_the_smallest_sufficient_n():
    for d in (0.5, 1.0, 2.5, 8.62):
        n = sequential.seeds_for_power(d)
        assert sequential.paired_power(d, n) >= 0.8
        assert n == 2 or sequential.paired_power(d, n - 1) < 0.8
    assert sequential.seeds_for_power(0.5) == 34  # the textbook paired t figure
    assert sequential.seeds_for_power(8.62) == 3  # the NaN-prone case of the old code
    assert sequential.seeds_for_power(0.0) is None
    assert sequential.seeds_for_power(1e-4) == 100_000


def test_p_values_are_statsmodels_and_scipys():
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(2, 15))
        diffs = rng.normal(rng.uniform(-0.02, 0.02), rng.uniform(0.001, 0.02), n)
        two, tost, a_ok, b_ok = sequential.paired_p_values(diffs, 0.01)
        zeros = np.zeros(n)
        assert two == pytest.approx(sps.ttest_1samp(diffs, 0).pvalue, rel=1e-10)
        assert tost == pytest.approx(ttost_paired(diffs, zeros, -0.01, 0.01)[0], rel=1e-10)
        assert a_ok == pytest.approx(
            sps.ttest_1samp(diffs, -0.01, alternative="greater").pvalue, rel=1e-10
        )
        assert b_ok == pytest.approx(
            sps.ttest_1samp(diffs, 0.01, alternative="less").pvalue, rel=1e-10
        )


def test_decide_walks_the_looks_and_waits_for_data():
    clear = np.full(20, 0.05) + np.linspace(-0.001, 0.001, 20)
    decision = sequential.decide(clear, LOOKS, 0.05, 0.01)
    assert (decision.verdict, decision.look, decision.n) == ("A better", 0, 5)
    noisy = np.random.default_rng(4).normal(0, 0.05, 20)
    early = sequential.decide(noisy[:7], LOOKS, 0.05, 0.0)
    assert early.verdict == "continue" and early.n == 5 and not early.final
    final = sequential.decide(noisy[:7], LOOKS, 0.05, 0.0, more_can_come=False)
    assert final.final and final.n == 7 and final.verdict in ("inconclusive", "B better",
                                                              "A better")  # fmt: skip
    assert sequential.decide([0.01], LOOKS, 0.05, 0.01).verdict == "continue"
    assert sequential.decide([0.01], (1,), 0.05, 0.01).verdict == "inconclusive"
    same = sequential.decide(np.zeros(5), (5,), 0.05, 0.01)
    assert (same.verdict, same.p_two_sided, same.p_equivalence) == ("equivalent", 1.0, 0.0)


@pytest.mark.parametrize("kind", sequential.SPENDING_KINDS)
def test_no_true_difference_keeps_false_better_verdicts_at_alpha(kind):
    rng = np.random.default_rng(5)
    rates = sequential.simulate(0.0, 1.0, LOOKS, 0.05, 1.0, kind, 3000, rng)
    assert rates["A better"] + rates["B better"] <= 0.05 + 0.01


@pytest.mark.parametrize(("kind", "most"), [("obrien_fleming", 15.0), ("pocock", 12.5)])
def test_a_true_difference_of_one_margin_stops_early(kind, most):
    rng = np.random.default_rng(6)
    rates = sequential.simulate(1.0, 1.0, LOOKS, 0.05, 1.0, kind, 2000, rng)
    assert rates["mean_seeds"] < most < 20  # measured: 14.1 and 11.2 of the 20 allowed
    assert rates["A better"] > 0.9


def test_bad_plans_are_refused():
    with pytest.raises(ValueError, match="unknown alpha spending"):
        sequential.nominal_levels(LOOKS, 0.05, "haybittle")
    with pytest.raises(ValueError, match="increasing"):
        sequential.nominal_levels((5, 5, 10), 0.05, "pocock")
