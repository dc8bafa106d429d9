"""The group-sequential rule and the power function, against published boundaries, the exact
multivariate normal, Monte Carlo, statsmodels and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.power import TTestPower
from statsmodels.stats.weightstats import ttost_paired

from study.stats import sequential

LOOKS = (5, 10, 15, 20)
KINDS = sequential.SPENDING_KINDS


def z_bounds(levels: tuple[float, ...], sided: int) -> np.ndarray:
    return np.array([sps.norm.isf(p / sided) for p in levels])


def look_correlation(looks: tuple[int, ...]) -> np.ndarray:
    n = np.asarray(looks, float)
    return np.sqrt(np.minimum.outer(n, n) / np.maximum.outer(n, n))


@pytest.fixture(scope="module")
def null_z() -> np.ndarray:
    """200k draws of the look statistics under H0: scaled partial sums of normals."""
    rng = np.random.default_rng(20)
    steps = rng.normal(size=(200_000, len(LOOKS))) * np.sqrt(np.diff((0, *LOOKS)))
    return np.cumsum(steps, axis=1) / np.sqrt(LOOKS)


def standardised(n: int) -> np.ndarray:
    """n numbers with mean exactly 0 and sd exactly 1, so a test's statistic can be set."""
    x = np.sin(np.arange(1, n + 1) * 1.7)
    return (x - x.mean()) / x.std(ddof=1)


# --- spending and nominal levels -------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_single_look_is_plain_alpha(kind):
    assert sequential.nominal_levels((5,), 0.05, kind, 2) == (0.05,)
    assert sequential.nominal_levels((5,), 0.05, kind, 1) == (0.05,)
    assert sequential.spent_alpha(1.0, 0.05, kind) == pytest.approx(0.05, rel=1e-12)


@pytest.mark.parametrize(
    ("looks", "kind", "published"),
    [
        (LOOKS, "obrien_fleming", (4.333, 2.963, 2.359, 2.014)),
        ((1, 2, 3, 4, 5), "obrien_fleming", (4.877, 3.357, 2.680, 2.290, 2.031)),
        ((1, 2, 3, 4, 5), "pocock", (2.438, 2.427, 2.410, 2.397, 2.386)),
    ],
)
def test_two_sided_boundaries_match_the_published_ones(looks, kind, published):
    """Lan-DeMets boundaries, equally spaced looks, two-sided 0.05 (DeMets and Lan 1994,
    Statistics in Medicine 13: 1341; Jennison and Turnbull; gsDesign's sfLDOF/sfLDPocock)."""
    bounds = z_bounds(sequential.nominal_levels(looks, 0.05, kind, 2), 2)
    assert bounds == pytest.approx(published, abs=0.001)


@pytest.mark.parametrize("kind", KINDS)
def test_one_sided_at_half_alpha_is_one_side_of_the_two_sided_design(kind):
    """Equal but for the rare paths that would cross both sides (1e-5 in z at most here)."""
    two = z_bounds(sequential.nominal_levels(LOOKS, 0.05, kind, 2), 2)
    one = z_bounds(sequential.nominal_levels(LOOKS, 0.025, kind, 1), 1)
    assert one == pytest.approx(two, abs=1e-4)
    assert one[0] == pytest.approx(two[0], abs=1e-12)  # the first look has no earlier paths


@pytest.mark.parametrize("looks", [LOOKS, (3, 7, 12), (2, 3, 5, 8, 13, 21)])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("sided", [1, 2])
def test_each_look_spends_its_share_exactly(looks, kind, sided):
    """P(crossing by look k) under H0 from scipy's multivariate normal (a fixed rng: the
    same number every run) equals the alpha spent by t_k, look by look."""
    bounds = z_bounds(sequential.nominal_levels(looks, 0.05, kind, sided), sided)
    corr = look_correlation(looks)
    for k in range(1, len(looks) + 1):
        upper = bounds[:k]
        lower = -upper if sided == 2 else np.full(k, -np.inf)
        inside = sps.multivariate_normal.cdf(upper, cov=corr[:k, :k], lower_limit=lower,
                                             abseps=1e-7, releps=0, maxpts=200_000,
                                             rng=np.random.default_rng(0))  # fmt: skip
        spent = sided * sequential.spent_alpha(looks[k - 1] / looks[-1], 0.05 / sided, kind)
        assert 1 - inside == pytest.approx(spent, abs=1e-5)  # scipy's own error, at six looks


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("sided", [1, 2])
def test_the_boundaries_spend_alpha_over_all_looks_by_monte_carlo(null_z, kind, sided):
    bounds = z_bounds(sequential.nominal_levels(LOOKS, 0.05, kind, sided), sided)
    crossed = (np.abs(null_z) if sided == 2 else null_z) >= bounds
    assert crossed.any(axis=1).mean() == pytest.approx(0.05, abs=0.002)  # MC se ~0.0005


def test_levels_fall_from_first_look_to_last_under_obrien_fleming():
    levels = sequential.nominal_levels(LOOKS, 0.05, "obrien_fleming", 2)
    assert list(levels) == sorted(levels)
    assert levels[-1] < 0.05  # the earlier looks cost something at the last
    assert sequential.nominal_levels(LOOKS, 0.05, "obrien_fleming", 2) == levels  # repeatable


# --- power -----------------------------------------------------------------------------------


def simulated_power(d: float, n: int, sided: int, rng: np.random.Generator) -> float:
    draws = rng.normal(d, 1.0, (40_000, n))
    t = draws.mean(axis=1) / (draws.std(axis=1, ddof=1) / math.sqrt(n))
    critical = sps.t.isf(0.05 / sided, n - 1)
    return float(np.mean((np.abs(t) if sided == 2 else t) > critical))


@pytest.mark.parametrize("n", [2, 3, 4, 5, 10])
@pytest.mark.parametrize("d", [0.3, 1.0, 3.0, 8.62])
def test_power_matches_monte_carlo_at_every_n(n, d):
    power = sequential.paired_power(d, n, 0.05)
    assert math.isfinite(power)
    simulated = simulated_power(d, n, 2, np.random.default_rng(int(n * 100 + d * 10)))
    assert power == pytest.approx(simulated, abs=0.012)  # MC se <= 0.0025
    library = TTestPower().power(d, n, 0.05)  # NaN where scipy's noncentral t gives up
    if math.isfinite(library):
        assert power == pytest.approx(library, abs=1e-8)


@pytest.mark.parametrize(("n", "d"), [(2, 0.3), (2, 8.62), (3, 3.0), (5, 1.0), (10, -0.3)])
def test_one_sided_power_matches_monte_carlo(n, d):
    power = sequential.paired_power(d, n, 0.05, sided=1)
    simulated = simulated_power(d, n, 1, np.random.default_rng(n))
    assert power == pytest.approx(simulated, abs=0.012)
    library = TTestPower().power(d, n, 0.05, alternative="larger")
    if math.isfinite(library):
        assert power == pytest.approx(library, abs=1e-8)


def test_power_where_the_noncentral_t_fails():
    power = sequential.paired_power(8.62, 2, 0.05)  # statsmodels: NaN (scipy 1.17)
    assert math.isfinite(power) and 0.6 < power < 0.75
    assert sequential.paired_power(100.0, 2, 0.05) > power
    assert sequential.paired_power(-1.0, 6) == pytest.approx(sequential.paired_power(1.0, 6))
    assert sequential.paired_power(math.inf, 3) == 1.0
    assert sequential.paired_power(-math.inf, 3, sided=1) == 0.0


@pytest.mark.parametrize("n", [2, 3, 30, 10_000])
@pytest.mark.parametrize("sided", [1, 2])
def test_power_without_an_effect_is_alpha(n, sided):
    assert sequential.paired_power(0.0, n, 0.05, sided) == pytest.approx(0.05, abs=1e-9)


def brute_force_seeds(d: float, alpha: float, sided: int) -> int:
    n = 2
    while sequential.paired_power(d, n, alpha, sided) < 0.8:
        n += 1
    return n


@pytest.mark.parametrize("d", [0.3, 0.5, 1.0, 2.5, 8.62])
@pytest.mark.parametrize(("alpha", "sided"), [(0.05, 2), (0.05, 1), (0.01, 2)])
def test_seeds_for_power_is_the_smallest_sufficient_n(d, alpha, sided):
    assert sequential.seeds_for_power(d, 0.8, alpha, sided) == brute_force_seeds(d, alpha, sided)


def test_seeds_for_power_known_values_and_edges():
    assert sequential.seeds_for_power(0.5) == 34  # the textbook paired t figure
    assert sequential.seeds_for_power(8.62) == 3  # where the noncentral t gives NaN
    assert sequential.seeds_for_power(-0.5) == 34
    assert sequential.seeds_for_power(0.0) is None
    assert sequential.seeds_for_power(1e-4) == 100_000
    assert sequential.seeds_for_power(0.1, limit=50) == 50
    assert sequential.seeds_for_power(-1.0, sided=1, limit=1000) == 1000


# --- the decision rule -----------------------------------------------------------------------


def test_p_values_are_statsmodels_and_scipys():
    rng = np.random.default_rng(3)
    for _ in range(30):
        n = int(rng.integers(2, 25))
        diffs = rng.normal(rng.uniform(-0.02, 0.02), rng.uniform(0.001, 0.02), n)
        got = sequential.decide(diffs, (n,), 0.05, 0.01, more_can_come=False)
        tost, lower, upper = ttost_paired(diffs, np.zeros(n), -0.01, 0.01)
        expected = {
            "p_two_sided": sps.ttest_rel(diffs, np.zeros(n)).pvalue,
            "p_equivalence": tost,
            "p_a_noninferior": sps.ttest_1samp(diffs, -0.01, alternative="greater").pvalue,
            "p_b_noninferior": sps.ttest_1samp(diffs, 0.01, alternative="less").pvalue,
        }
        assert lower[1] == pytest.approx(expected["p_a_noninferior"], abs=1e-12)
        assert upper[1] == pytest.approx(expected["p_b_noninferior"], abs=1e-12)
        for name, value in expected.items():
            assert getattr(got, name) == pytest.approx(value, abs=1e-10, rel=1e-10), name


def test_decide_walks_the_looks():
    clear = 0.05 + 0.001 * standardised(20)
    first = sequential.decide(clear, LOOKS, 0.05, 0.01)
    assert (first.verdict, first.look, first.n, first.final) == ("A better", 0, 5, False)
    assert first.level_two_sided == sequential.t_levels(LOOKS, 0.05, "obrien_fleming")[0]
    assert sequential.decide(-clear, LOOKS, 0.05, 0.01).verdict == "B better"
    # a weak effect: too weak for O'Brien-Fleming's first looks, enough for Pocock's
    weak = 0.025 + 0.01 * standardised(20)  # p = 0.005 at 5 seeds, 5e-5 at 10
    assert sequential.decide(weak, LOOKS, 0.05, 0.0).look == 1
    assert sequential.decide(weak, LOOKS, 0.05, 0.0, "pocock").look == 0


def test_decide_waits_for_seeds_while_more_can_come():
    noisy = np.random.default_rng(4).normal(0, 0.05, 25)
    early = sequential.decide(noisy[:7], LOOKS, 0.05, 0.0)
    assert (early.verdict, early.look, early.n, early.final) == ("continue", 0, 5, False)
    assert math.isfinite(early.p_two_sided)
    none_yet = sequential.decide(noisy[:3], LOOKS, 0.05, 0.01)
    assert (none_yet.verdict, none_yet.n, none_yet.final) == ("continue", 3, False)
    assert math.isnan(none_yet.p_two_sided)
    assert sequential.decide([0.01], LOOKS, 0.05, 0.01).verdict == "continue"
    assert sequential.decide(noisy[:10], LOOKS, 0.05, 0.0).verdict == "continue"
    beyond = sequential.decide(noisy, LOOKS, 0.05, 0.0)  # 25 differences, 20 planned
    assert beyond.final and beyond.n == 20 and beyond.look == 3
    assert beyond.verdict == "inconclusive"


def test_decide_judges_the_data_finally_when_no_more_can_come():
    noisy = np.random.default_rng(4).normal(0, 0.05, 20)
    levels = sequential.t_levels(LOOKS, 0.05, "obrien_fleming", 2)
    between = sequential.decide(noisy[:7], LOOKS, 0.05, 0.0, more_can_come=False)
    assert (between.verdict, between.look, between.n, between.final) == ("inconclusive", 1, 7,
                                                                        True)  # fmt: skip
    assert between.level_two_sided == levels[1]
    at_look = sequential.decide(noisy[:10], LOOKS, 0.05, 0.0, more_can_come=False)
    assert (at_look.look, at_look.n, at_look.final) == (1, 10, True)
    short = sequential.decide(noisy[:3], LOOKS, 0.05, 0.0, more_can_come=False)
    assert (short.look, short.n, short.final) == (0, 3, True)
    for few in ([], [0.01]):
        decision = sequential.decide(few, LOOKS, 0.05, 0.01, more_can_come=False)
        assert (decision.verdict, decision.n, decision.final) == ("inconclusive", len(few), True)
        assert math.isnan(decision.p_two_sided) and math.isnan(decision.p_equivalence)
    assert sequential.decide([0.01], (1,), 0.05, 0.01).verdict == "inconclusive"


@pytest.mark.parametrize(
    ("mean", "sd", "margin", "verdict"),
    [
        (0.004, 0.02, 0.01, "A non-inferior"),  # t = 0.89: not better; 3.1 above -margin
        (-0.004, 0.02, 0.01, "B non-inferior"),
        (0.0, 0.01, 0.01, "equivalent"),
        (0.004, 0.1, 0.01, "inconclusive"),
        (0.004, 0.02, 0.0, "inconclusive"),  # no margin: no equivalence, no non-inferiority
        (0.0, 0.01, 0.0, "inconclusive"),
    ],
)
def test_the_final_look_verdicts(mean, sd, margin, verdict):
    diffs = mean + sd * standardised(20)
    decision = sequential.decide(diffs, (20,), 0.05, margin)
    assert decision.verdict == verdict and decision.final


@pytest.mark.parametrize(
    ("value", "margin", "verdict", "p_two", "p_equivalence"),
    [
        (0.0, 0.01, "equivalent", 1.0, 0.0),
        (0.0, 0.0, "inconclusive", 1.0, 1.0),
        (0.005, 0.01, "A better", 0.0, 0.0),
        (-0.02, 0.01, "B better", 0.0, 1.0),
        (0.01, 0.01, "A better", 0.0, 1.0),  # on the margin: not inside it
    ],
)
def test_identical_differences_make_every_test_certain(value, margin, verdict, p_two,
                                                       p_equivalence):  # fmt: skip
    decision = sequential.decide(np.full(5, value), (5,), 0.05, margin)
    got = (decision.verdict, decision.p_two_sided, decision.p_equivalence)
    assert got == (verdict, p_two, p_equivalence)
    assert decision.p_a_noninferior == (0.0 if value > -margin else 1.0)
    assert decision.p_b_noninferior == (0.0 if value < margin else 1.0)
    repeated = np.full(5, 0.1)  # its float mean is not exactly 0.1: still "no spread"
    assert sequential.decide(repeated, (5,), 0.05, 0.2).p_equivalence == 0.0


# --- simulation ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_simulate_applies_decide_to_every_study(kind):
    studies, looks = 300, LOOKS
    rates = sequential.simulate(0.4, 1.0, looks, 0.05, 0.5, kind, studies,
                                np.random.default_rng(8))  # fmt: skip
    draws = np.random.default_rng(8).normal(0.4, 1.0, (studies, looks[-1]))
    decisions = [sequential.decide(row, looks, 0.05, 0.5, kind, more_can_come=False)
                 for row in draws]  # fmt: skip
    for verdict in sequential.VERDICTS:
        expected = sum(d.verdict == verdict for d in decisions) / studies
        assert rates[verdict] == pytest.approx(expected, abs=1e-12), verdict
    assert rates["mean_seeds"] == pytest.approx(np.mean([d.n for d in decisions]))
    assert len({d.verdict for d in decisions}) >= 3  # the comparison exercised several paths


@pytest.mark.parametrize(("kind", "margin"), [(k, m) for k in KINDS for m in (1.0, 0.0)])
def test_no_true_difference_keeps_false_better_verdicts_at_alpha(kind, margin):
    """With a margin of one sd, equivalence stops many studies before a false 'better' can
    happen; without one, every study runs until 'better' or the end, and the t boundaries
    land near alpha. The exact tolerance is tests/study/stats/test_error_rates.py's."""
    rates = sequential.simulate(0.0, 1.0, LOOKS, 0.05, margin, kind, 20_000,
                                np.random.default_rng(5))  # fmt: skip
    false_better = rates["A better"] + rates["B better"]
    assert false_better <= 0.05 + 0.01
    if margin == 0:
        assert false_better >= 0.05 - 0.01
        assert rates["equivalent"] == rates["A non-inferior"] == 0.0
    assert rates["continue"] == 0.0


@pytest.mark.parametrize(("kind", "most"), [("obrien_fleming", 15.0), ("pocock", 12.0)])
def test_a_true_difference_of_one_margin_stops_early(kind, most):
    rates = sequential.simulate(1.0, 1.0, LOOKS, 0.05, 1.0, kind, 5000,
                                np.random.default_rng(6))  # fmt: skip
    assert rates["mean_seeds"] < most <= 0.75 * 20  # measured: 14.0 and 11.0 of the 20
    assert rates["A better"] > 0.9


# --- bad input -------------------------------------------------------------------------------


def test_bad_plans_are_refused():
    with pytest.raises(ValueError, match="unknown alpha spending"):
        sequential.nominal_levels(LOOKS, 0.05, "haybittle")
    with pytest.raises(ValueError, match="unknown alpha spending"):
        sequential.spent_alpha(0.5, 0.05, "haybittle")
    with pytest.raises(ValueError, match="unknown alpha spending"):
        sequential.decide([0.1, 0.2], (2,), 0.05, 0.01, "haybittle")
    for looks in [(5, 5, 10), (10, 5), (), (0, 5), (2.5, 5), (True, 5)]:
        with pytest.raises(ValueError, match="increasing"):
            sequential.nominal_levels(looks, 0.05, "pocock")
    with pytest.raises(ValueError, match="increasing"):
        sequential.simulate(0.0, 1.0, (10, 5), 0.05, 0.1, "pocock", 10, np.random.default_rng())
    for alpha in (0.0, 1.0, math.nan):
        with pytest.raises(ValueError, match="alpha"):
            sequential.nominal_levels(LOOKS, alpha, "pocock")
    with pytest.raises(ValueError, match="sided"):
        sequential.nominal_levels(LOOKS, 0.05, "pocock", 3)
    with pytest.raises(ValueError, match="information fraction"):
        sequential.spent_alpha(0.0, 0.05, "pocock")


def test_bad_data_and_power_requests_are_refused():
    with pytest.raises(ValueError, match="margin"):
        sequential.decide([0.1, 0.2], LOOKS, 0.05, -0.01)
    with pytest.raises(ValueError, match="finite"):
        sequential.decide([0.1, math.nan], LOOKS, 0.05, 0.01)
    with pytest.raises(ValueError, match="2 pairs"):
        sequential.paired_power(1.0, 1)
    with pytest.raises(ValueError, match="NaN"):
        sequential.paired_power(math.nan, 5)
    with pytest.raises(ValueError, match="power"):
        sequential.seeds_for_power(1.0, power=1.0)
