"""Statistics of paired seed comparisons, against scipy, statsmodels and deepsig."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import ttost_paired

from study import stats
from study.analysis import Analysis
from study.stats import sequential
from study.stats._record import EXPLORATORY

FAST_ASO = {"num_samples": 200, "num_bootstrap_iterations": 200}


def compare(a, b, **kwargs):
    kwargs.setdefault("metric", "test_f1")
    return stats.compare(a, b, arm_a="A", arm_b="B", aso_kwargs=FAST_ASO, **kwargs)


def seeded(values) -> dict[int, float]:
    return {seed: float(v) for seed, v in enumerate(values)}


def test_p_values_agree_with_scipy():
    rng = np.random.default_rng(0)
    b = rng.normal(0.5, 0.01, 8)
    a = b + rng.normal(0.004, 0.006, 8)
    result = compare(seeded(a), seeded(b))
    assert result.p_t == pytest.approx(sps.ttest_rel(a, b).pvalue)
    assert result.p_wilcoxon == pytest.approx(sps.wilcoxon(a - b).pvalue)
    assert result.diff == pytest.approx(np.mean(a - b))
    assert result.cohens_d == pytest.approx(np.mean(a - b) / np.std(a - b, ddof=1))
    assert result.mean_a == pytest.approx(a.mean()) and result.mean_b == pytest.approx(b.mean())


def primary(a, b, analysis=None, metric="test_f1", **kwargs):
    """One primary comparison A vs B through compare_arms, as the report makes it."""
    arms = {"A": {"depth": 5}, "B": {"depth": 6}}
    scores = {"A": {metric: a}, "B": {metric: b}}
    analysis = analysis or Analysis(primary=metric)
    out = stats.compare_arms(scores, arms, {"depth": [6, 5]}, [metric], aso_kwargs=FAST_ASO,
                             analysis=analysis, **kwargs)  # fmt: skip
    return out[0]


def test_clear_win_is_declared_with_an_interval_that_agrees():
    rng = np.random.default_rng(1)
    b = rng.normal(0.50, 0.01, 10)
    a = b + 0.05 + rng.normal(0, 0.005, 10)
    result = primary(seeded(a), seeded(b))
    assert result.primary and result.outcome == "A better" and result.significant
    assert 0 < result.ci_low < result.diff < result.ci_high
    low, high = sps.ttest_1samp(a - b, 0).confidence_interval(1 - result.level)
    assert (result.ci_low, result.ci_high) == pytest.approx((low, high))
    assert result.p_t < 1e-6 and result.p_wilcoxon < 0.01
    assert result.eps_min < stats.ASO_TAU < result.eps_min_reverse
    assert result.win_rate == 1.0 and result.win_low > 0.6
    assert result.verdict().startswith("A better than B on test_f1: +0.049")


def test_no_significant_difference_is_not_sold_as_as_good():
    rng = np.random.default_rng(2)
    b = rng.normal(0.50, 0.01, 6)
    a = b + np.array([0.03, -0.03, 0.036, -0.024, 0.012, -0.018])  # sd of the diffs ~ 3 points
    result = primary(seeded(a), seeded(b))
    assert result.outcome == "inconclusive" and not result.significant
    assert result.ci_low < 0 < result.ci_high
    assert result.tost_low < -0.01 or result.tost_high > 0.01  # equivalence not shown
    assert result.verdict().startswith("inconclusive, A vs B on test_f1")
    # seeds for 80% power against one margin at this spread: from the robust power function
    d = 0.01 / result.sd_diff
    assert result.seeds_for_margin == sequential.seeds_for_power(d, 0.8, result.level)
    assert sequential.paired_power(d, result.seeds_for_margin, result.level) >= 0.8
    assert f"about {result.seeds_for_margin} seeds" in result.verdict()


def test_equivalence_is_two_one_sided_tests_as_statsmodels():
    rng = np.random.default_rng(4)
    b = rng.normal(0.5, 0.01, 12)
    a = b + rng.normal(0.0005, 0.002, 12)
    result = primary(seeded(a), seeded(b))
    assert result.outcome == "equivalent"
    p_tost = ttost_paired(a, b, -0.01, 0.01)[0]
    assert result.p_equivalence == pytest.approx(p_tost, rel=1e-9)
    assert -0.01 < result.tost_low < result.tost_high < 0.01
    assert "equivalent on test_f1 within ±0.01" in result.verdict()


def test_non_inferiority_when_equivalence_is_not_shown():
    rng = np.random.default_rng(5)
    b = rng.normal(0.5, 0.01, 8)
    a = b + 0.008 + rng.normal(0, 0.004, 8)  # A a little better, not surely by < margin
    result = primary(seeded(a), seeded(b))
    one_sided = sps.ttest_1samp(a - b, -0.01, alternative="greater").pvalue
    assert result.p_a_noninferior == pytest.approx(one_sided)
    assert result.outcome in ("A better", "A non-inferior")
    if result.outcome == "A non-inferior":
        assert "A non-inferior to B on test_f1 (margin 0.01)" in result.verdict()


def test_identical_arms_are_equivalent_with_p_one_for_a_difference():
    values = seeded([0.5, 0.6, 0.55])
    result = primary(values, values)
    assert result.p_t == 1.0 and result.p_wilcoxon == 1.0
    assert (result.ci_low, result.ci_high) == (0.0, 0.0)
    assert result.outcome == "equivalent" and result.cohens_d == 0.0


def test_lower_is_better_metric_flips_the_winner():
    b = seeded([300, 310, 305, 320, 315, 300])
    a = seeded([200, 215, 205, 212, 220, 198])
    result = primary(a, b, Analysis(primary="steps_to_95", margin=10.0), metric="steps_to_95")
    assert result.diff < 0 and result.a_better and result.outcome == "A better"
    assert result.eps_min < stats.ASO_TAU
    assert result.verdict().startswith("A better than B on steps_to_95")


def test_missing_pairs_and_nan_are_stated_not_dropped_silently():
    a = {0: 0.5, 1: 0.52, 2: 0.51, 3: float("nan")}
    b = {0: 0.49, 1: 0.50, 2: 0.50, 3: 0.5, 4: 0.51}
    result = compare(a, b)
    assert result.seeds == (0, 1, 2) and result.unpaired == (3, 4)
    assert "seeds 3, 4 unpaired or not finite" in result.note


def test_fewer_than_two_pairs_is_not_tested():
    result = primary({0: 0.5, 1: 0.6}, {1: 0.55, 2: 0.4})
    assert result.n == 1 and math.isnan(result.p_t) and math.isnan(result.p_holm)
    assert "1 paired seed(s); at least 2 are needed" in result.note
    assert "not tested" in result.verdict()


def test_holm_is_statsmodels_and_its_levels_agree_with_the_adjusted_p():
    ps = [0.01, 0.04, 0.03, 0.005]
    adjusted, levels = stats.holm(ps)
    assert adjusted == pytest.approx(multipletests(ps, method="holm")[1].tolist())
    with_nan, _ = stats.holm([0.01, float("nan"), 0.04])  # NaN is not a test: m = 2
    assert with_nan[0] == pytest.approx(0.02) and math.isnan(with_nan[1])
    rng = np.random.default_rng(6)
    for _ in range(40):
        ps = rng.uniform(0, 0.08, rng.integers(1, 7)).tolist()
        adjusted, levels = stats.holm(ps)
        for p, adj, level in zip(ps, adjusted, levels, strict=True):
            assert (adj < 0.05) == (p < level)  # an interval at `level` agrees with Holm
    # the objects frozen around statsmodels' gc.collect() are handed back to the collector
    assert gc.get_freeze_count() == 0


def test_primary_intervals_agree_with_holm_over_several_comparisons():
    """Three arms against a baseline: each interval excludes 0 exactly when Holm rejects."""
    rng = np.random.default_rng(7)
    for _ in range(6):
        base = rng.normal(0.5, 0.01, 5)
        arms = {f"k={k}": {"k": k} for k in (1, 2, 3, 4)}
        scores = {"k=4": {"test_f1": seeded(base)}}
        for k in (1, 2, 3):
            shift = rng.uniform(-0.03, 0.03)
            scores[f"k={k}"] = {"test_f1": seeded(base + shift + rng.normal(0, 0.01, 5))}
        out = stats.compare_arms(scores, arms, {}, ["test_f1"], baseline={"k": 4},
                                 aso_kwargs=FAST_ASO, analysis=Analysis())  # fmt: skip
        for c in out:
            excludes_zero = c.ci_low > 0 or c.ci_high < 0
            assert excludes_zero == (c.p_holm < 0.05) == c.significant


def test_exploratory_metrics_get_unadjusted_p_and_no_verdict():
    rng = np.random.default_rng(3)
    arms = {"depth=6": {"depth": 6}, "depth=5": {"depth": 5}}
    base = rng.normal(0.5, 0.01, 6)
    scores = {
        "depth=6": {"test_f1": seeded(base), "steps_to_95": seeded([300] * 6)},
        "depth=5": {"test_f1": seeded(base + 0.03), "steps_to_95": seeded([300] * 6)},
    }
    out = stats.compare_arms(scores, arms, {"depth": [6, 5]}, ["test_f1", "steps_to_95"],
                             aso_kwargs=FAST_ASO, analysis=Analysis())  # fmt: skip
    assert [(c.arm_a, c.arm_b, c.metric, c.primary) for c in out] == [
        ("depth=5", "depth=6", "test_f1", True),
        ("depth=5", "depth=6", "steps_to_95", False),
    ]
    # one primary comparison: Holm leaves its p as it is
    assert out[0].p_holm == pytest.approx(out[0].p_t) and out[0].outcome == "A better"
    assert out[1].outcome == EXPLORATORY and math.isnan(out[1].p_holm)
    assert out[1].verdict().startswith("exploratory, steps_to_95")


def test_bootstrap_only_from_ten_seeds_and_wilcoxon_floor():
    rng = np.random.default_rng(8)
    b = rng.normal(0.5, 0.01, 12)
    a = b + rng.normal(0.01, 0.01, 12)
    five = compare(seeded(a[:5]), seeded(b[:5]))
    assert math.isnan(five.boot_low) and five.wilcoxon_min_p == pytest.approx(0.0625)
    twelve = compare(seeded(a), seeded(b))
    assert twelve.boot_low < twelve.diff < twelve.boot_high
    assert twelve.wilcoxon_min_p == pytest.approx(2 / 2**12)
    # the floor is what scipy's exact test gives when every difference has one sign
    assert sps.wilcoxon(np.arange(1, 6)).pvalue == pytest.approx(stats.wilcoxon_min_p(5))


def test_aso_uses_an_explicit_bonferroni_confidence_level():
    import warnings

    from deepsig import aso as deepsig_aso

    rng = np.random.default_rng(9)
    b = rng.normal(0.5, 0.02, 6)
    a = b + rng.normal(0.01, 0.01, 6)
    result = compare(seeded(a), seeded(b), aso_comparisons=4, seed=3)
    assert result.aso_confidence == pytest.approx(1 - 0.05 / 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = deepsig_aso(a, b, confidence_level=1 - 0.05 / 4, seed=3,
                               show_progress=False, **FAST_ASO)  # fmt: skip
    assert result.eps_min == expected


def test_sequential_comparison_is_reported_at_the_look_that_decided_it():
    rng = np.random.default_rng(10)
    b = rng.normal(0.5, 0.01, 20)
    a = b + 0.05 + rng.normal(0, 0.005, 20)
    seeds = tuple(range(100, 120))
    analysis = Analysis(looks=(5, 10, 15, 20), seed_order=seeds)
    result = primary(dict(zip(seeds, a, strict=True)), dict(zip(seeds, b, strict=True)), analysis)
    decision = sequential.decide(a - b, (5, 10, 15, 20), 0.05, 0.01, more_can_come=False)
    assert result.outcome == decision.verdict == "A better"
    assert result.look == decision.look and result.n == decision.n < 20
    assert result.level == pytest.approx(decision.level_two_sided)
    assert result.ci_low > 0  # at the look's nominal level, agreeing with the test


def test_arm_pairs_differ_in_one_factor_later_minus_earlier():
    grid = {"depth": [6, 5], "data_fraction": [0.1, 1.0]}
    factors = [
        {"depth": d, "data_fraction": f} for d in grid["depth"] for f in grid["data_fraction"]
    ]
    pairs = stats.arm_pairs(factors, grid)
    assert sorted(pairs) == sorted([(2, 0, "depth"), (3, 1, "depth"), (1, 0, "data_fraction"),
                                    (3, 2, "data_fraction")])  # fmt: skip
    heads = [{"reinit_heads": []}, {"reinit_heads": [[0, 1]]}, {"reinit_heads": [[5, 2]]}]
    assert stats.arm_pairs(heads, {}, baseline={"reinit_heads": []}) == [
        (1, 0, "reinit_heads"),
        (2, 0, "reinit_heads"),
    ]
    reinit = [{"reinit_from": k, "data_fraction": f} for k in (4, 5, 6) for f in (0.5, 1.0)]
    assert stats.arm_pairs(reinit, {}, baseline={"reinit_from": 6}) == [
        (0, 4, "reinit_from"), (1, 5, "reinit_from"), (2, 4, "reinit_from"),
        (3, 5, "reinit_from"),
    ]  # fmt: skip
    with pytest.raises(ValueError, match="no arm matches the baseline"):
        stats.arm_pairs(heads, {}, baseline={"reinit_heads": [[9, 9]]})


@pytest.mark.parametrize(
    "n_a,n_b",
    [
        (3, 3),
        pytest.param(5, 5, marks=pytest.mark.slow),
        pytest.param(10, 7, marks=pytest.mark.slow),
    ],
)  # deepsig's own loop takes ~3 s a case: the default tier keeps one
def test_array_quantile_aso_is_deepsigs_to_the_last_bit(n_a, n_b):
    """The report's ASO replaces deepsig's per-point quantile function for speed; every
    eps_min must stay exactly what deepsig alone gives, ties and unequal sizes included."""
    import warnings

    from deepsig import aso as deepsig_aso

    from study.stats._aso import aso as fast_aso

    rng = np.random.default_rng(n_a * 100 + n_b)
    a, b = rng.normal(0.50, 0.02, n_a), rng.normal(0.51, 0.02, n_b)
    b[0] = a[1]  # a tie across the arms
    kwargs = {"seed": 1234, "num_bootstrap_iterations": 200, "show_progress": False}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x, y in ((a, b), (b, a)):
            assert fast_aso(x, y, **kwargs) == deepsig_aso(x, y, **kwargs)
    # and deepsig is left as it was
    import importlib

    module = importlib.import_module("deepsig.aso")
    assert module.get_quantile_function.__module__ == "deepsig.aso"


@pytest.mark.slow  # over ~7 s: the slow tier
def test_aso_over_worker_processes_gives_the_numbers_of_one_process():
    """A report with hundreds of comparisons computes its ASO in worker processes: each call is
    seeded by its own job, so the numbers must be those of the calls made one by one."""
    from study.stats._aso import aso_both_ways_many

    rng = np.random.default_rng(7)
    jobs = [(rng.normal(0.5, 0.02, 5), rng.normal(0.51, 0.02, 5), 0.99, 0, FAST_ASO)
            for _ in range(6)]  # fmt: skip
    jobs.append((jobs[0][0], jobs[0][0].copy(), 0.99, 0, FAST_ASO))  # no order: 1.0 both ways
    one_by_one = aso_both_ways_many(jobs, workers=1)
    assert aso_both_ways_many(jobs, workers=2) == one_by_one
    assert one_by_one[-1] == (1.0, 1.0) and len(set(one_by_one)) == len(jobs)


@pytest.mark.slow  # over ~7 s: the slow tier
def test_only_the_primary_metric_gets_almost_stochastic_order():
    """ASO is computed for the declared primary metric's comparisons, at 1 - alpha/k; the
    exploratory metrics keep their t interval and signed-rank test, and no ASO (NaN)."""
    rng = np.random.default_rng(3)
    scores = {arm: {m: {s: float(rng.normal(0.5 + 0.02 * i, 0.01)) for s in range(5)}
                    for m in ("dev_f1", "test_f1")}
              for i, arm in enumerate(("depth=6", "depth=5", "depth=4"))}  # fmt: skip
    arms = {arm: {"depth": int(arm[-1])} for arm in scores}
    out = stats.compare_arms(scores, arms, {"depth": [6, 5, 4]}, ["dev_f1", "test_f1"],
                             aso_kwargs=FAST_ASO, analysis=Analysis(primary="test_f1"))  # fmt: skip
    primary = [c for c in out if c.primary]
    exploratory = [c for c in out if not c.primary]
    assert len(primary) == len(exploratory) == 3
    assert all(0 <= c.eps_min <= 1 and c.aso_confidence == pytest.approx(1 - 0.05 / 3)
               for c in primary)  # fmt: skip
    assert all(math.isnan(c.eps_min) and math.isnan(c.eps_min_reverse) for c in exploratory)
    assert all(c.n == 5 and c.p_t < 1 for c in exploratory)
    for c in primary:  # as `compare` computes it for one comparison alone
        one = stats.compare(scores[c.arm_a]["test_f1"], scores[c.arm_b]["test_f1"],
                            metric="test_f1", arm_a=c.arm_a, arm_b=c.arm_b, aso_comparisons=3,
                            aso_kwargs=FAST_ASO)  # fmt: skip
        assert (c.eps_min, c.eps_min_reverse) == (one.eps_min, one.eps_min_reverse)
