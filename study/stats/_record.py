"""One comparison of two arms on one metric, and the line a reader can quote from it.

`study.stats` fills the figures; this record carries them to the report, the CSV and MLflow,
and words the verdict so that "inconclusive" never reads as "as good".
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

EXPLORATORY = "exploratory"


@dataclass(frozen=True)
class Comparison:
    """Arm A against arm B on one metric, paired by seed; `diff` is A − B in metric units."""

    metric: str
    arm_a: str
    arm_b: str
    factor: str  # the one factor in which the two arms differ
    higher_is_better: bool
    seeds: tuple  # seeds with a finite value in both arms (the unit of analysis)
    unpaired: tuple  # units (seed, or (seed, data_seed)) in only one arm, or not finite in one
    primary: bool = False
    margin: float = math.nan  # in the metric's units; NaN: none applies (no TOST, power)
    mean_a: float = math.nan
    mean_b: float = math.nan
    diff: float = math.nan
    sd_diff: float = math.nan
    level: float = math.nan  # two-sided level of the test of record (after multiplicity)
    ci_low: float = math.nan  # t interval at 1 - level: agrees with p_t against `level`
    ci_high: float = math.nan
    tost_low: float = math.nan  # t interval at 1 - 2 x the equivalence test's level
    tost_high: float = math.nan
    equivalence_level: float = math.nan  # one-sided level of each of TOST's two tests
    ni_level: float = math.nan  # one-sided level of the non-inferiority test of record
    decided_low: float = math.nan  # the interval of the test that decided the verdict
    decided_high: float = math.nan  # (one-sided bounds have an infinite other end)
    decided_by: str = ""  # which interval that is, at which level
    rests_on_normality: bool = False  # no exact rank test could reach that level at this n
    boot_low: float = math.nan  # percentile bootstrap, only with BOOTSTRAP_MIN_SEEDS seeds
    boot_high: float = math.nan
    p_t: float = math.nan
    p_wilcoxon: float = math.nan
    wilcoxon_min_p: float = math.nan  # the smallest two-sided p Wilcoxon can give with n
    p_holm: float = math.nan  # adjusted over every test of the primary comparisons (primary)
    p_equivalence: float = math.nan  # TOST: -margin < diff < +margin
    p_equivalence_holm: float = math.nan
    p_a_noninferior: float = math.nan  # H0: diff <= -margin (in the better direction)
    p_a_noninferior_holm: float = math.nan
    p_b_noninferior: float = math.nan
    p_b_noninferior_holm: float = math.nan
    cohens_d: float = math.nan  # d_z: mean difference / std of the differences
    eps_min: float = math.nan  # ASO: A better than B when < ASO_TAU
    eps_min_reverse: float = math.nan  # ASO: B better than A when < ASO_TAU
    aso_confidence: float = math.nan  # 1 - alpha / k, Bonferroni over the k comparisons
    win_rate: float = math.nan  # share of seeds where A beats B (ties half)
    win_low: float = math.nan  # Clopper-Pearson interval of P(A beats B on a new seed)
    win_high: float = math.nan
    power_at_margin: float = math.nan  # of the test of record, true diff = margin
    seeds_for_margin: int | None = None  # seeds for 80% power at diff = margin
    seeds_for_margin_low: int | None = None  # the same over the sd's 80% chi-square interval
    seeds_for_margin_high: int | None = None
    outcome: str = EXPLORATORY  # a sequential.VERDICTS entry for primary comparisons
    look: int = 0  # the look that decided (sequential)
    note: str = ""

    @property
    def n(self) -> int:
        return len(self.seeds)

    @property
    def a_better(self) -> bool:
        return self.diff > 0 if self.higher_is_better else self.diff < 0

    @property
    def significant(self) -> bool:
        """A difference declared (primary) or unadjusted p below the level (exploratory)."""
        if self.primary:
            return self.outcome in ("A better", "B better")
        return self.p_t < self.level  # False for NaN

    @property
    def eps_winner(self) -> float:
        """ASO in the direction the mean points to: how far the better-looking arm is from
        dominating the other (0 = dominates completely, 0.5 = no order)."""
        return self.eps_min if self.a_better else self.eps_min_reverse

    def verdict(self) -> str:
        """One plain-language line a reader can quote, with the figures that support it."""
        a, b, m = self.arm_a, self.arm_b, self.metric
        if self.n < 2:
            return f"{a} vs {b} on {m}: not tested ({self.note})"
        ci = f"{100 * (1 - self.level):.4g}% CI [{self.ci_low:.4g}, {self.ci_high:.4g}]"
        if not self.primary:
            figures = f"{self.diff:+.4g}, {ci}, n = {self.n}"
            return f"exploratory, {m}: {a} − {b} = {figures}, unadjusted p = {self.p_t:.3g}"
        figures = f"{self.diff:+.4g}, {self.decided_by} {self.interval_text()}, n = {self.n}"
        if self.rests_on_normality:
            figures += " (rests on the t-test's normality: no rank test can reach its level)"
        margin = f"±{self.margin:g}"
        words = {
            "A better": f"{a} better than {b} on {m}: {figures}, {self._p_text()}",
            "B better": f"{b} better than {a} on {m}: {figures}, {self._p_text()}",
            "equivalent": f"{a} and {b} equivalent on {m} within {margin}: {figures}, "
            f"TOST p = {self._p(self.p_equivalence_holm, self.p_equivalence)}",
            "A non-inferior": f"{a} non-inferior to {b} on {m} (margin {self.margin:g}): "
            f"{figures}, p = {self._p(self.p_a_noninferior_holm, self.p_a_noninferior)}",
            "B non-inferior": f"{b} non-inferior to {a} on {m} (margin {self.margin:g}): "
            f"{figures}, p = {self._p(self.p_b_noninferior_holm, self.p_b_noninferior)}",
        }
        if self.outcome in words:
            return words[self.outcome]
        need = (
            f"; about {self.seeds_for_margin} seeds ({self.seeds_range_text()} over the sd's 80% "
            f"interval) would give 80% power against a difference of one margin at this spread "
            f"(sd {self.sd_diff:.3g})"
            if self.seeds_for_margin
            else ""
        )
        return (
            f"inconclusive, {a} vs {b} on {m}: neither a difference nor equivalence within "
            f"{margin} is shown: {figures}, {self._p_text()}{need}"
        )

    def interval_text(self) -> str:
        """The deciding interval, `[low, high]`, with ∞ for a one-sided bound's open end."""
        return f"[{_end(self.decided_low)}, {_end(self.decided_high)}]"

    def seeds_range_text(self) -> str:
        """Seeds needed over the sd's 80% interval, `19–386`; `–` without a margin."""
        low, high = self.seeds_for_margin_low, self.seeds_for_margin_high
        return f"{low}–{high}" if low and high else "–"

    def _p_text(self) -> str:
        if math.isnan(self.p_holm):
            return f"p = {self.p_t:.3g} (look {self.look + 1}, level {self.level:.3g})"
        return f"Holm p = {self.p_holm:.3g}"

    @staticmethod
    def _p(adjusted: float, raw: float) -> str:
        return f"{raw if math.isnan(adjusted) else adjusted:.3g}"

    def row(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.update(
            n=self.n,
            seeds=" ".join(map(unit_text, self.seeds)),
            unpaired=" ".join(map(unit_text, self.unpaired)),
            significant=self.significant,
            verdict=self.verdict(),
        )
        return out


def _end(value: float) -> str:
    return ("∞" if value > 0 else "−∞") if math.isinf(value) else f"{value:.4g}"


def unit_text(unit: Any) -> str:
    """A pairing unit as text: `3`, or `3/1` for seed 3 with data seed 1."""
    return "/".join(map(str, unit)) if isinstance(unit, tuple) else str(unit)
