"""Every verdict row's interval lies on the side of -margin / 0 / +margin its verdict claims,
over many random studies, at one look (Holm) and in rounds (sequential); seeds-needed over
the sd's interval; no margin, TOST or power for a metric in other units; and the mark of a
verdict no rank test could have reached."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest
from scipy import stats as sps

from study import stats
from study.analysis import Analysis
from study.stats import _compare, _intervals, sequential

MARGIN = 0.01
KINDS = ("A better", "B better", "equivalent", "A non-inferior", "B non-inferior", "inconclusive")


@pytest.fixture
def no_aso(monkeypatch):
    """ASO plays no part in the verdicts or intervals; it is left out for speed."""
    monkeypatch.setattr(_compare, "with_family_aso", lambda family, *args: family)


@pytest.fixture
def fast(no_aso, monkeypatch):
    """Many families quickly: no power (it plays no part in the verdicts either), and no full
    garbage collection in each of statsmodels' `multipletests` calls (0.3 s each here)."""
    monkeypatch.setattr(_intervals, "_with_power", lambda c, n, level: c)
    monkeypatch.setattr(gc, "collect", lambda *args: 0)


def random_family(rng: np.random.Generator, metric: str, analysis: Analysis):
    """Up to 3 arms against a baseline, with differences around 0, ±margin and beyond."""
    n = int(rng.integers(3, 13)) if not analysis.sequential else analysis.looks[-1]
    arms = {f"k={k}": {"k": k} for k in range(int(rng.integers(2, 5)))}
    base = rng.normal(0.5, 0.01, n)
    scores = {"k=0": {metric: dict(enumerate(base))}}
    for arm in list(arms)[1:]:
        shift = rng.choice([0.0, MARGIN, -MARGIN, 0.5 * MARGIN, -0.5 * MARGIN, 3 * MARGIN])
        noise = rng.normal(shift, rng.choice([0.002, 0.005, 0.01, 0.02]), n)
        scores[arm] = {metric: dict(enumerate(base + noise))}
    return stats.compare_arms(scores, arms, {}, [metric], baseline={"k": 0}, analysis=analysis)


def claim_holds(c: stats.Comparison) -> bool:
    """The shown interval, turned to point the better way (a loss: lower is better)."""
    sign = 1.0 if c.higher_is_better else -1.0
    low, high = sorted((sign * c.decided_low, sign * c.decided_high))
    m = c.margin
    return {
        "A better": low > 0,
        "B better": high < 0,
        "equivalent": -m < low and high < m,
        "A non-inferior": low > -m and high == math.inf,
        "B non-inferior": high < m and low == -math.inf,
        # none established: 0 inside, and both margins (neither side is non-inferior)
        "inconclusive": low <= 0 <= high and low <= -m and high >= m,
    }[c.outcome]


@pytest.mark.parametrize("metric", ["test_f1", "dev_loss"])
@pytest.mark.parametrize("looks", [(), (4, 8, 12)])
def test_every_verdict_shows_an_interval_on_its_claimed_side(fast, metric, looks):
    analysis = Analysis(primary=metric, margin=MARGIN, looks=looks,
                        seed_order=tuple(range(12)) if looks else ())  # fmt: skip
    rng = np.random.default_rng(len(looks) + len(metric))
    seen: set[str] = set()
    for _ in range(80):
        for c in random_family(rng, metric, analysis):
            assert claim_holds(c), (c.outcome, c.decided_low, c.decided_high, c.decided_by)
            assert c.decided_by
            seen.add(c.outcome)
    assert seen == set(KINDS)


def test_the_interval_names_its_test_and_level(fast):
    rng = np.random.default_rng(5)
    by: dict[str, str] = {}
    for _ in range(80):
        for c in random_family(rng, "test_f1", Analysis()):
            if c.arm_b == "k=0" and len(c.seeds) and c.outcome not in by:
                by[c.outcome] = c.decided_by
    assert by["A non-inferior"].startswith("one-sided") and "lower bound" in by["A non-inferior"]
    assert "upper bound" in by["B non-inferior"] and "TOST" in by["equivalent"]
    assert by["A better"].startswith("two-sided") and by["inconclusive"].startswith("two-sided")


@pytest.mark.slow  # over ~7 s: the slow tier
def test_non_inferiority_is_tested_at_half_alpha_unless_declared(no_aso):
    b = dict(enumerate(np.full(8, 0.5)))
    x = np.sin(np.arange(1, 9) * 1.7)
    # one-sided p of A's non-inferiority between 0.025 and 0.05; not better, not equivalent
    diffs = 0.006 + 0.0076 * math.sqrt(8) * (x - x.mean()) / x.std(ddof=1)
    a = {s: 0.5 + d for s, d in enumerate(diffs)}
    arms = {"A": {"k": 1}, "B": {"k": 0}}
    scores = {"A": {"test_f1": a}, "B": {"test_f1": b}}
    strict = stats.compare_arms(scores, arms, {"k": [0, 1]}, ["test_f1"], analysis=Analysis())[0]
    assert (strict.arm_a, strict.arm_b) == ("A", "B")
    assert 0.025 < strict.p_a_noninferior < 0.05 and strict.outcome == "inconclusive"
    assert strict.ni_level == 0.025
    loose = stats.compare_arms(scores, arms, {"k": [0, 1]}, ["test_f1"],
                               analysis=Analysis(ni_alpha=0.05))[0]  # fmt: skip
    assert loose.outcome == "A non-inferior" and loose.decided_by == "one-sided 95% lower bound"


def test_seeds_needed_over_the_sds_interval():
    rng = np.random.default_rng(2)
    b = rng.normal(0.5, 0.01, 5)
    a = b + rng.normal(0.0, 0.02, 5)
    c = stats.compare(dict(enumerate(a)), dict(enumerate(b)), metric="test_f1", arm_a="A",
                      arm_b="B", with_aso=False)  # fmt: skip
    sd = np.std(a - b, ddof=1)
    sd_low = sd * math.sqrt(4 / sps.chi2.ppf(0.9, 4))
    sd_high = sd * math.sqrt(4 / sps.chi2.ppf(0.1, 4))
    assert c.seeds_for_margin_low == sequential.seeds_for_power(MARGIN / sd_low, 0.8, 0.05)
    assert c.seeds_for_margin_high == sequential.seeds_for_power(MARGIN / sd_high, 0.8, 0.05)
    assert c.seeds_for_margin_low < c.seeds_for_margin < c.seeds_for_margin_high


def test_no_margin_power_or_tost_for_a_metric_in_other_units():
    rng = np.random.default_rng(3)
    a, b = rng.normal(300, 20, 5), rng.normal(310, 20, 5)
    kwargs = dict(metric="steps_to_95", arm_a="A", arm_b="B", higher_is_better=False,
                  with_aso=False)  # fmt: skip
    steps = stats.compare(dict(enumerate(a)), dict(enumerate(b)), **kwargs)
    assert math.isnan(steps.margin) and math.isnan(steps.power_at_margin)
    assert steps.seeds_for_margin is None and math.isnan(steps.tost_low)
    assert math.isnan(steps.p_equivalence) and math.isnan(steps.p_a_noninferior)
    assert "seeds would give" not in steps.verdict()
    own = stats.compare(
        dict(enumerate(a)),
        dict(enumerate(b)),
        analysis=Analysis(margins=(("steps_to_95", 25.0),)),
        **kwargs,
    )
    assert own.margin == 25.0 and 0 < own.power_at_margin < 1 and own.seeds_for_margin


@pytest.mark.parametrize(("n", "rests"), [(4, True), (5, True), (6, False), (10, False)])
def test_a_verdict_no_rank_test_could_reach_rests_on_normality(no_aso, n, rests):
    """Two-sided exact signed-rank p is at least 2 / 2^n: 0.0625 at 5 seeds, 0.031 at 6."""
    rng = np.random.default_rng(n)
    b = rng.normal(0.5, 0.01, n)
    a = b + 0.05 + rng.normal(0, 0.002, n)
    arms = {"A": {"k": 1}, "B": {"k": 0}}
    scores = {"A": {"test_f1": dict(enumerate(a))}, "B": {"test_f1": dict(enumerate(b))}}
    c = stats.compare_arms(scores, arms, {"k": [0, 1]}, ["test_f1"], analysis=Analysis())[0]
    assert c.outcome == "A better" and c.rests_on_normality == rests
    assert ("rests on the t-test's normality" in c.verdict()) == rests
