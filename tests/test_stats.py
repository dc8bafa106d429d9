"""Statistics of paired seed comparisons, against scipy and constructed known cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from study import stats

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


def test_clear_win_is_significant_in_every_statistic():
    rng = np.random.default_rng(1)
    b = rng.normal(0.50, 0.01, 10)
    a = b + 0.05 + rng.normal(0, 0.005, 10)
    result = stats.with_holm([compare(seeded(a), seeded(b))])[0]
    assert result.a_better and result.significant
    assert 0 < result.ci_low < result.diff < result.ci_high
    assert result.p_t < 1e-6 and result.p_wilcoxon < 0.01
    assert result.eps_min < stats.ASO_TAU < result.eps_min_reverse
    assert 2 <= result.seeds_for_power <= 3
    assert result.verdict().startswith("A beats B on test_f1: +0.049")


def test_tie_is_not_significant_and_says_so():
    rng = np.random.default_rng(2)
    b = rng.normal(0.50, 0.01, 6)
    a = b + np.array([0.01, -0.01, 0.012, -0.008, 0.004, -0.006])
    result = stats.with_holm([compare(seeded(a), seeded(b))])[0]
    assert not result.significant
    assert result.ci_low < 0 < result.ci_high
    assert result.p_holm > 0.5
    assert result.verdict().startswith("no significant difference between A and B on test_f1")
    assert "seeds would detect a difference this size" in result.verdict()


def test_identical_arms_are_tested_with_p_one():
    values = seeded([0.5, 0.6, 0.55])
    result = compare(values, values)
    assert result.p_t == 1.0 and result.p_wilcoxon == 1.0
    assert (result.ci_low, result.ci_high) == (0.0, 0.0)
    assert result.seeds_for_power is None and result.cohens_d == 0.0


def test_lower_is_better_metric_flips_the_winner():
    b = seeded([300, 310, 305, 320, 315, 300])
    a = seeded([200, 215, 205, 212, 220, 198])
    result = stats.with_holm([compare(a, b, metric="steps_to_95", higher_is_better=False)])[0]
    assert result.diff < 0 and result.a_better and result.significant
    assert result.eps_min < stats.ASO_TAU
    assert result.verdict().startswith("A beats B on steps_to_95")


def test_missing_pairs_and_nan_are_stated_not_dropped_silently():
    a = {0: 0.5, 1: 0.52, 2: 0.51, 3: float("nan")}
    b = {0: 0.49, 1: 0.50, 2: 0.50, 3: 0.5, 4: 0.51}
    result = compare(a, b)
    assert result.seeds == (0, 1, 2) and result.unpaired == (3, 4)
    assert "seeds 3, 4 unpaired or not finite" in result.note


def test_fewer_than_two_pairs_is_not_tested():
    result = compare({0: 0.5, 1: 0.6}, {1: 0.55, 2: 0.4})
    assert result.n == 1 and math.isnan(result.p_t)
    assert "1 paired seed(s); at least 2 are needed" in result.note
    assert "not tested" in result.verdict()
    assert math.isnan(stats.with_holm([result])[0].p_holm)


def test_holm_matches_a_worked_example_and_keeps_order():
    # sorted: 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1=0.04 -> monotone 0.06
    adjusted = stats.holm([0.01, 0.04, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    with_nan = stats.holm([0.01, float("nan"), 0.04])  # NaN is not a test: m = 2
    assert with_nan[0] == pytest.approx(0.02) and math.isnan(with_nan[1])
    assert with_nan[2] == pytest.approx(0.04)
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_power_is_the_smallest_sufficient_number_of_seeds():
    n = stats.seeds_for_power(0.5)
    assert n == 34  # the textbook figure for a paired t-test, d_z = 0.5, alpha .05, 80%
    assert stats.paired_power(0.5, n) >= 0.8 > stats.paired_power(0.5, n - 1)
    assert stats.seeds_for_power(-0.5) == n
    assert stats.seeds_for_power(0.0) is None
    assert stats.seeds_for_power(1e-4) == 100_000


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


def test_compare_arms_corrects_over_every_comparison():
    rng = np.random.default_rng(3)
    arms = {"depth=6": {"depth": 6}, "depth=5": {"depth": 5}}
    base = rng.normal(0.5, 0.01, 6)
    scores = {
        "depth=6": {"test_f1": seeded(base), "steps_to_95": seeded([300] * 6)},
        "depth=5": {"test_f1": seeded(base + 0.03), "steps_to_95": seeded([300] * 6)},
    }
    out = stats.compare_arms(
        scores, arms, {"depth": [6, 5]}, ["test_f1", "steps_to_95"], aso_kwargs=FAST_ASO
    )
    assert [(c.arm_a, c.arm_b, c.metric) for c in out] == [
        ("depth=5", "depth=6", "test_f1"),
        ("depth=5", "depth=6", "steps_to_95"),
    ]
    first = out[0]
    assert first.p_holm == pytest.approx(min(1.0, 2 * min(first.p_t, 1.0)))
    assert out[1].p_t == 1.0 and not out[1].significant


@pytest.mark.parametrize("n_a,n_b", [(3, 3), (5, 5), (10, 7)])
def test_array_quantile_aso_is_deepsigs_to_the_last_bit(n_a, n_b):
    """The report's ASO replaces deepsig's per-point quantile function for speed; every
    eps_min must stay exactly what deepsig alone gives, ties and unequal sizes included."""
    import warnings

    from deepsig import aso as deepsig_aso

    from study.aso_speedup import aso as fast_aso

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
