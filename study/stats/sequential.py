"""Group-sequential decisions over confirm rounds, and power that holds at every n.

A study that adds seeds until a comparison is clear must not look at the data more often than
its error rate allows. The looks are planned in the study file (seed counts after each round),
and Lan-DeMets alpha spending (O'Brien-Fleming or Pocock type) gives each look a nominal level
such that the chance of a false "better" over all looks stays at alpha. The paired t-test's p
at a look is compared with that nominal level, computed for t statistics (`_t_levels`: the
normal-theory levels would let the t-test's false "better" rate exceed alpha). Equivalence
(TOST) may stop any look, so it spends its alpha the same way, one-sided; non-inferiority is
judged once, at the final look, at its own one-sided level (`Analysis.ni_level`, alpha/2 by
default as in ICH E9): a claim made at one look only needs no spending.
`decide` is the one rule both the driver (after each round) and the report (at the end) apply,
so the report says exactly what the driver did; `simulate` runs the same rule, vectorised, over
simulated studies so that its error rates and seed use can be checked.

The spending and the looks' levels are `_spending`, power for the margin is `_power`; both are
re-exported here, the statistics' one public face for sequential work.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from study.stats._power import paired_power, seeds_for_power
from study.stats._spending import SPENDING_KINDS, checked_looks, nominal_levels, spent_alpha
from study.stats._t_levels import t_levels

__all__ = [
    "SPENDING_KINDS", "VERDICTS", "Decision", "decide", "nominal_levels", "paired_power",
    "seeds_for_power", "simulate", "spent_alpha", "t_levels",
]  # fmt: skip

VERDICTS = ("A better", "B better", "equivalent", "A non-inferior", "B non-inferior",
            "inconclusive", "continue")  # fmt: skip
_CODE = {verdict: code for code, verdict in enumerate(VERDICTS)}


@dataclass(frozen=True)
class Decision:
    """What the rule concluded, at which look, on how many differences, with its p-values."""

    verdict: str  # one of VERDICTS
    look: int  # index of the look that decided (or the last look with data)
    n: int  # differences used at that look
    level_two_sided: float  # nominal two-sided level at that look
    level_one_sided: float  # nominal one-sided level of equivalence (TOST) at that look
    level_noninferior: float  # one-sided level of non-inferiority (final look only)
    p_two_sided: float  # paired t-test, H0: mean difference 0
    p_equivalence: float  # TOST: the larger one-sided p for -margin < mean < +margin
    p_a_noninferior: float  # one-sided, H0: mean difference <= -margin
    p_b_noninferior: float  # one-sided, H0: mean difference >= +margin
    final: bool  # no later look can follow (last planned look, or no more data)


def decide(
    diffs: Sequence[float],
    looks: Sequence[int],
    alpha: float,
    margin: float,
    kind: str = "obrien_fleming",
    *,
    more_can_come: bool = True,
    ni_level: float | None = None,
) -> Decision:
    """Walk the planned looks in order on the differences in seed order (positive = A better),
    the first looks[k] of them at look k. At each look: a two-sided t-test below the look's
    two-sided level decides 'A better' or 'B better'; else TOST below the one-sided level
    decides 'equivalent' (only with a margin > 0); at the final look non-inferiority either
    way (margin > 0) at `ni_level` (alpha / 2 unless given), else 'inconclusive'.

    Only the caller knows whether more seeds can come. While they can, data that end before
    the next look give 'continue' (final=False): the study should run more seeds. When they
    cannot (`more_can_come=False`), the data are judged finally where they end: at their own
    count with the levels of the look not reached, or, if they end exactly at a look, at that
    look. Fewer than 2 differences can show nothing: NaN p-values, 'inconclusive' when final.
    Differences beyond the last look are not used."""
    values = np.asarray(diffs, dtype=float)
    if values.ndim != 1 or not np.isfinite(values).all():
        raise ValueError("diffs is one sequence of finite per-seed differences")
    _check_margin(margin)
    plan = checked_looks(looks)
    ni = _ni_level(alpha, ni_level)
    two = t_levels(plan, alpha, kind, 2)
    one = t_levels(plan, alpha, kind, 1)
    available = len(values)
    latest: Decision | None = None
    for k, planned in enumerate(plan):
        last = k == len(plan) - 1
        if available >= planned:
            latest = _at_look(values[:planned], k, (two[k], one[k], ni), margin, last)
            if latest.verdict != "continue":
                return latest
            continue
        if more_can_come:
            return latest or _waiting(available, (two[0], one[0], ni))
        at = k - 1 if k and available == plan[k - 1] else k  # ended exactly at a look: that one
        return _at_look(values, at, (two[at], one[at], ni), margin, True)
    raise AssertionError("the last planned look always decides")


def _check_margin(margin: float) -> None:
    if not margin >= 0:
        raise ValueError(f"the margin is >= 0 (0: no equivalence margin), got {margin}")


def _ni_level(alpha: float, ni_level: float | None) -> float:
    level = alpha / 2 if ni_level is None else ni_level
    if not 0 < level < 1:
        raise ValueError(f"the non-inferiority level is in (0, 1), got {level}")
    return level


def _waiting(available: int, levels: tuple[float, float, float]) -> Decision:
    """No look reached yet: nothing tested, more seeds to run."""
    return Decision("continue", 0, available, *levels, *[math.nan] * 4, final=False)


def _at_look(
    values: np.ndarray, k: int, levels: tuple[float, float, float], margin: float, final: bool
) -> Decision:
    """The rule at look k; `levels`: two-sided, equivalence's and non-inferiority's."""
    mean, p_values = _statistics(values[None, :], margin)
    code = _verdict_codes(mean, *p_values, levels, margin, final)[0]
    p2, equivalence, a_ok, b_ok = (float(p[0]) for p in p_values)
    return Decision(VERDICTS[code], k, len(values), *levels, p2, equivalence, a_ok, b_ok,
                    final)  # fmt: skip


def _statistics(values: np.ndarray, margin: float) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Per row (one study's first n differences): the mean and the p-values (two-sided of mean
    0, TOST, A non-inferior, B non-inferior), from the t distribution directly, for many rows
    at once. Rows with no spread (all differences equal, c) make every test certain: p 0 where
    the t statistic is infinite in the test's direction, 1 where it is 0/0 or points away."""
    rows, n = values.shape
    if n < 2:
        nan = np.full(rows, math.nan)
        return nan, (nan, nan, nan, nan)
    mean = values.mean(axis=1)
    constant = np.ptp(values, axis=1) == 0
    mean = np.where(constant, values[:, 0], mean)  # c exactly, not c up to rounding
    se = values.std(axis=1, ddof=1) / math.sqrt(n)
    se = np.where(constant, 1.0, se)  # placeholder; constant rows are replaced below
    df = n - 1
    two = 2 * sps.t.sf(np.abs(mean) / se, df)
    a_ok = sps.t.sf((mean + margin) / se, df)  # H0: mean <= -margin
    b_ok = sps.t.cdf((mean - margin) / se, df)  # H0: mean >= +margin
    two = np.where(constant, np.where(mean == 0, 1.0, 0.0), two)
    a_ok = np.where(constant, np.where(mean > -margin, 0.0, 1.0), a_ok)
    b_ok = np.where(constant, np.where(mean < margin, 0.0, 1.0), b_ok)
    return mean, (two, np.maximum(a_ok, b_ok), a_ok, b_ok)


def _verdict_codes(
    mean: np.ndarray,
    two: np.ndarray,
    equivalence: np.ndarray,
    a_ok: np.ndarray,
    b_ok: np.ndarray,
    levels: tuple[float, float, float],
    margin: float,
    final: bool,
) -> np.ndarray:
    """The rule at one look, as indices into VERDICTS, for many rows at once (NaN p-values
    never reject). The first condition that holds wins."""
    level2, level1, ni = levels
    better = two < level2
    with_margin = margin > 0
    conditions = [better & (mean > 0), better & (mean <= 0), with_margin & (equivalence < level1)]
    choices = [_CODE["A better"], _CODE["B better"], _CODE["equivalent"]]
    if final:
        conditions += [with_margin & (a_ok < ni), with_margin & (b_ok < ni)]
        choices += [_CODE["A non-inferior"], _CODE["B non-inferior"]]
    default = _CODE["inconclusive" if final else "continue"]
    return np.select(conditions, choices, default)


def simulate(
    true_diff: float,
    sd: float,
    looks: Sequence[int],
    alpha: float,
    margin: float,
    kind: str,
    studies: int,
    rng: np.random.Generator,
    ni_level: float | None = None,
) -> dict[str, float]:
    """Simulated studies of normal differences under `decide`'s rule, every planned look run
    (no more seeds after the last): the rate of each verdict and the mean number of seeds the
    rule used ('mean_seeds'). For checking the rule's error rates and savings, never for
    findings. Draws rng.normal(true_diff, sd, (studies, looks[-1])), one row per study, and
    decides all studies still open at a look at once."""
    if studies < 1:
        raise ValueError(f"simulate at least one study, got {studies}")
    _check_margin(margin)
    plan = checked_looks(looks)
    ni = _ni_level(alpha, ni_level)
    two = t_levels(plan, alpha, kind, 2)
    one = t_levels(plan, alpha, kind, 1)
    draws = rng.normal(true_diff, sd, (studies, plan[-1]))
    verdicts = np.full(studies, _CODE["continue"])
    used = np.zeros(studies)
    open_rows = np.arange(studies)
    for k, n in enumerate(plan):
        mean, p_values = _statistics(draws[open_rows, :n], margin)
        codes = _verdict_codes(mean, *p_values, (two[k], one[k], ni), margin, k == len(plan) - 1)
        done = codes != _CODE["continue"]
        verdicts[open_rows[done]] = codes[done]
        used[open_rows[done]] = n
        open_rows = open_rows[~done]
    counts = np.bincount(verdicts, minlength=len(VERDICTS))
    out = {verdict: float(counts[code]) / studies for verdict, code in _CODE.items()}
    out["mean_seeds"] = float(used.mean())
    return out
