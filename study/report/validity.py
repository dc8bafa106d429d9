"""What a reviewer asks after a verdict: had both arms finished learning, were they tuned alike,
did they get the same compute, and what else the design leaves open.

Each check reads only what the study run recorded (the plan, the trials' factors, the
convergence tag and budget metrics of every trial) and works on the primary comparisons, the
ones that carry verdicts. A check whose inputs were not recorded (a study run before trials
reported their budget) says so instead of passing. The report's threats-to-validity section
(`study/report/sections/threats.py`) lists what these checks find, with the numbers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import pearsonr

from study import stats
from study.names import CONVERGED, EXPLORE, FINAL_GAIN_RULE_TAG, FIXED_FROM_TAG
from study.spec.phases import MIN_ASHA_SAMPLES
from study.tracking.curves import RECOMPUTED
from study.tracking.reading import StudyRecord, budget_columns

COMPUTE_TOLERANCE = 0.1  # arms whose mean steps or tokens differ by more are unequal
# (and, per seed, arms whose median seed's steps differ by more)
# stopping point: the primary metric's paired differences tracking the per-seed step gaps
STOPPING_MIN_SEEDS, STOPPING_P, STOPPING_R = 4, 0.10, 0.5
DEV_DERIVED = ("curve_area", "steps_to_95")  # computed from the dev curve, besides dev_*


def primary_pairs(record: StudyRecord) -> list[tuple[str, str]]:
    """(arm A, arm B) of every primary comparison, as `study.stats` pairs them."""
    base = record.tags.get("compare_baseline")
    ids = list(record.arms)
    try:
        pairs = stats.arm_pairs(
            [record.arms[i] for i in ids], record.grid, json.loads(base) if base else None
        )
    except ValueError:  # no arm matches the baseline: no comparison, nothing to check
        return []
    return [(ids[a], ids[b]) for a, b, _ in pairs]


def confirm_trials(record: StudyRecord) -> pd.DataFrame:
    """Completed confirm trials with the budget columns, whatever the record was built from."""
    return budget_columns(record.confirm_completed(), record.analysis)


def pair_name(pair: tuple[str, str]) -> str:
    return f"`{pair[0]}` vs `{pair[1]}`"


# --- convergence ---------------------------------------------------------------------------


def convergence_table(record: StudyRecord) -> pd.DataFrame:
    """Per arm over its completed confirm trials: how many recorded convergence, how many had
    stopped improving, the largest final gain against the declared plateau, and how many
    final gains the report computed again from the curve (recorded under the earlier rule)."""
    done = confirm_trials(record)
    rows = []
    for arm in record.arms:
        part = done[done.arm == arm]
        known = part[part[CONVERGED].isin(["true", "false"])]
        rows.append(
            {
                "arm": arm,
                "n": len(part),
                "recorded": len(known),
                "converged": int((known[CONVERGED] == "true").sum()),
                "final_gain_max": part.final_gain.max(),
                "plateau": record.analysis.plateau,
                "recomputed": int((part[FINAL_GAIN_RULE_TAG] == RECOMPUTED).sum())
                if FINAL_GAIN_RULE_TAG in part
                else 0,
            }
        )
    return pd.DataFrame(rows)


def converged_text(row: Mapping[str, Any]) -> str:
    """'3/4', or 'not recorded' for an arm whose trials predate convergence tracking."""
    return f"{int(row['converged'])}/{int(row['n'])}" if row["recorded"] else "not recorded"


def still_improving(record: StudyRecord, arm: str) -> pd.DataFrame:
    """The completed confirm trials of `arm` that had not stopped improving: their smoothed
    curve still rose by the plateau or more (`converged` false, judged from `final_gain`)."""
    done = confirm_trials(record)
    return done[(done.arm == arm) & (done[CONVERGED] == "false")]


def late_trials_text(record: StudyRecord, arm: str) -> str:
    """'' when every confirm trial of `arm` had stopped improving, else each one that had
    not, by its seed (seed/data seed when crossed) with its `final_gain`."""
    late = still_improving(record, arm)
    if not len(late):
        return ""
    n = int((confirm_trials(record).arm == arm).sum())
    named = ", ".join(
        f"seed {stats.unit_text(unit)} (final_gain {gain:.3g})"
        for unit, gain in zip(record.units(late), late.final_gain, strict=True)
    )
    return (
        f"`{arm}` still improving in {len(late)}/{n} confirm seeds: {named} "
        f"≥ plateau {record.analysis.plateau:g}"
    )


def budget_note(record: StudyRecord, arm_a: str, arm_b: str) -> str:
    """'' when both arms converged in every confirm seed (or it was not recorded), else what
    makes the verdict budget-sensitive: per arm, each seed still improving and its gain."""
    parts = [text for arm in (arm_a, arm_b) if (text := late_trials_text(record, arm))]
    return "budget-sensitive: " + "; ".join(parts) if parts else ""


def convergence_threats(record: StudyRecord) -> list[str] | None:
    """One threat per budget-sensitive primary comparison, naming every confirm trial of its
    arms still improving, and one per arm in no primary comparison with such trials; None
    when no confirm trial of a primary comparison recorded convergence."""
    pairs = primary_pairs(record)
    done = confirm_trials(record)
    arms = {arm for pair in pairs for arm in pair}
    if done[done.arm.isin(arms)][CONVERGED].isna().all():
        return None
    notes = [(pair, budget_note(record, *pair)) for pair in pairs]
    out = [
        f"{pair_name(pair)} is {note}: the verdict compares arms that had not finished "
        "learning under this budget."
        for pair, note in notes
        if note
    ]
    others = [arm for arm in record.arms if arm not in arms]
    out += [
        f"{text} (an arm in no primary comparison): it had not finished learning under this budget."
        for arm in others
        if (text := late_trials_text(record, arm))
    ]
    return out


def shown_value(value: Any) -> str:
    """A setting's value as a report shows it; None or NaN is the trial default."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "the trial default"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


# --- compute parity ------------------------------------------------------------------------


def relative_gap(a: float, b: float) -> float:
    """How much more one arm ran than the other, as a share of the smaller: symmetric, and
    never below |a - b| / max(a, b). NaN when either was not recorded."""
    if math.isnan(a) or math.isnan(b) or min(a, b) <= 0:
        return math.nan
    return max(a, b) / min(a, b) - 1


def compute_table(record: StudyRecord) -> pd.DataFrame:
    """Per primary comparison: mean optimizer steps and training tokens of each arm's
    completed confirm trials, their relative gap, and whether it exceeds the tolerance; and
    per seed paired in both arms, the median and largest relative gap in optimizer steps,
    and whether the median exceeds the tolerance (arms can agree on average while each seed
    pits a long run against a short one)."""
    done = confirm_trials(record)
    means = done.groupby("arm")[["steps_run", "tokens_seen"]].mean() if len(done) else None
    rows = []
    for a, b in primary_pairs(record):
        row: dict[str, Any] = {"comparison": pair_name((a, b))}
        for name in ("steps_run", "tokens_seen"):
            va, vb = (_mean(means, arm, name) for arm in (a, b))
            row.update({f"{name}_a": va, f"{name}_b": vb, f"{name}_gap": relative_gap(va, vb)})
        gaps = [row["steps_run_gap"], row["tokens_seen_gap"]]
        row["unequal"] = any(g > COMPUTE_TOLERANCE for g in gaps if not math.isnan(g))
        row.update(seed_gaps(record, done, a, b))
        rows.append(row)
    return pd.DataFrame(rows)


def _mean(means: pd.DataFrame | None, arm: str, name: str) -> float:
    if means is None or arm not in means.index or name not in means:
        return math.nan
    return float(means.loc[arm, name])


def paired_by_seed(
    record: StudyRecord, done: pd.DataFrame, a: str, b: str, name: str
) -> tuple[list, Any, Any]:
    """Seeds with a finite `name` in both arms, and each arm's value per seed (its mean over
    the data seeds paired in both arms, when crossed), as the comparisons pair them."""
    if name not in done:
        return [], [], []
    values = []
    for arm in (a, b):
        rows = done[done.arm == arm]
        values.append(dict(zip(record.units(rows), rows[name].astype(float), strict=True)))
    seeds, va, vb, _ = stats.pair_scores(*values)
    return seeds, va, vb


def seed_gaps(record: StudyRecord, done: pd.DataFrame, a: str, b: str) -> dict[str, Any]:
    """Per seed paired in both arms: how many, the median and the largest relative gap in
    `steps_run` (larger / smaller - 1), the seed with the largest, and whether the median
    exceeds the tolerance. NaN gaps when no seed recorded its steps in both arms."""
    seeds, va, vb = paired_by_seed(record, done, a, b, "steps_run")
    gaps = pd.Series([relative_gap(x, y) for x, y in zip(va, vb, strict=True)], dtype=float)
    known = gaps.notna()
    gaps, seeds = gaps[known], [s for s, k in zip(seeds, known, strict=True) if k]
    largest = int(gaps.to_numpy().argmax()) if len(gaps) else None
    median = float(gaps.median()) if len(gaps) else math.nan
    return {
        "steps_run_seeds": len(gaps),
        "steps_run_seed_gap_median": median,
        "steps_run_seed_gap_max": float(gaps.max()) if len(gaps) else math.nan,
        "steps_run_seed_gap_max_seed": seeds[largest] if largest is not None else None,
        "unequal_per_seed": bool(median > COMPUTE_TOLERANCE),
    }


def compute_threats(table: pd.DataFrame) -> list[str] | None:
    """One threat per primary comparison whose arms' mean compute differs by more than the
    tolerance (with its per-seed gaps), or whose median seed's steps differ by more while
    the means agree; None when no comparison recorded its compute."""
    if table.empty or table[["steps_run_gap", "tokens_seen_gap"]].isna().all().all():
        return None
    out = []
    for row in table.itertuples():
        per_seed = _seed_gap_text(row)
        if row.unequal:
            parts = [
                f"{label} {getattr(row, f'{n}_a'):.6g} vs {getattr(row, f'{n}_b'):.6g} "
                f"(+{getattr(row, f'{n}_gap'):.0%})"
                for n, label in (("steps_run", "optimizer steps"),
                                 ("tokens_seen", "training tokens"))
                if getattr(row, f"{n}_gap") > COMPUTE_TOLERANCE
            ]  # fmt: skip
            out.append(
                f"{row.comparison}: unequal compute, mean {'; '.join(parts)}"
                + (f" ({per_seed})" if per_seed else "")
                + ": the difference cannot be told apart from the extra training."
            )
        elif getattr(row, "unequal_per_seed", False):
            out.append(
                f"{row.comparison}: unequal compute per seed: {per_seed}, above "
                f"{COMPUTE_TOLERANCE:.0%}, though the means agree: each seed's difference "
                "compares runs of different lengths."
            )
    return out


def _seed_gap_text(row: Any) -> str:
    """'over 4 paired seeds the optimizer steps differ by a median 56% and at most 100%
    (seed 2)', or '' when no seed recorded its steps in both arms."""
    if not getattr(row, "steps_run_seeds", 0):
        return ""
    return (
        f"over {row.steps_run_seeds} paired seeds the optimizer steps differ by a median "
        f"{row.steps_run_seed_gap_median:.0%} and at most {row.steps_run_seed_gap_max:.0%} "
        f"(seed {row.steps_run_seed_gap_max_seed})"
    )


def stopping_table(record: StudyRecord) -> pd.DataFrame:
    """Per primary comparison, over the seeds with the primary metric and `steps_run` in
    both arms: n, and Pearson's r between the paired difference of the primary metric
    (A - B) and the step gap (steps_run of A - B) with its two-sided p (NaN with fewer than
    3 seeds or when either does not vary); `flagged` when n >= 4 and p < 0.10 or
    |r| >= 0.5."""
    done = confirm_trials(record)
    primary = record.analysis.primary
    rows = []
    for a, b in primary_pairs(record):
        seeds, ma, mb = paired_by_seed(record, done, a, b, primary)
        steps_seeds, sa, sb = paired_by_seed(record, done, a, b, "steps_run")
        diff = dict(zip(seeds, np.subtract(ma, mb), strict=True))
        gap = dict(zip(steps_seeds, np.subtract(sa, sb), strict=True))
        both = [s for s in seeds if s in gap]
        x = np.array([gap[s] for s in both], float)
        y = np.array([diff[s] for s in both], float)
        r = p = math.nan
        if len(both) >= 3 and np.ptp(x) > 0 and np.ptp(y) > 0:
            result = pearsonr(x, y)
            r, p = float(result.statistic), float(result.pvalue)
        flagged = len(both) >= STOPPING_MIN_SEEDS and (p < STOPPING_P or abs(r) >= STOPPING_R)
        rows.append(
            {"comparison": pair_name((a, b)), "metric": primary, "n": len(both),
             "r": r, "p": p, "flagged": bool(flagged), "recorded": bool(gap)}
        )  # fmt: skip
    return pd.DataFrame(rows, columns=["comparison", "metric", "n", "r", "p", "flagged",
                                       "recorded"])  # fmt: skip


def stopping_threats(record: StudyRecord) -> list[str] | None:
    """A *stopping-point* threat per primary comparison whose paired differences of the
    primary metric track the per-seed step gaps (`stopping_table`); None when no comparison
    recorded its steps."""
    table = stopping_table(record)
    if table.empty or not table.recorded.any():
        return None
    return [
        f"{row.comparison}: *stopping-point* threat: over {row.n} seeds the paired "
        f"difference in `{row.metric}` (A − B) tracks the gap in optimizer steps "
        f"(steps_run A − B), Pearson r = {row.r:+.2f}, p = {row.p:.3g} (flagged when "
        f"p < {STOPPING_P:g} or |r| ≥ {STOPPING_R:g} with at least {STOPPING_MIN_SEEDS} "
        "seeds): the verdict may reflect where each seed's trials stopped rather than "
        "the arms."
        for row in table[table.flagged].itertuples()
    ]


# --- the rest of the design ----------------------------------------------------------------


def rank_test_threats(record: StudyRecord) -> list[str]:
    """Primary comparisons with too few seeds for any exact signed-rank test to reach α (its
    smallest two-sided p is 2 / 2^n): their verdict rests on the t-test's normality."""
    done = confirm_trials(record)
    alpha = record.analysis.alpha
    by_n: dict[int, list[str]] = {}
    for a, b in primary_pairs(record):
        seeds = set(done.seed[done.arm == a]) & set(done.seed[done.arm == b])
        if seeds and stats.wilcoxon_min_p(len(seeds)) > alpha:
            by_n.setdefault(len(seeds), []).append(pair_name((a, b)))
    return [
        f"n = {n} seeds in {', '.join(pairs)}: the smallest exact two-sided Wilcoxon p is "
        f"{stats.wilcoxon_min_p(n):.3g} > α = {alpha:g}, so no rank test can confirm the "
        "verdict; it rests on the t-test's normality."
        for n, pairs in by_n.items()
    ]


def dev_derived(metric: str) -> bool:
    """Whether a metric is computed from the dev set (its final score or its curve)."""
    return metric.startswith("dev_") or metric in DEV_DERIVED


def dev_reuse_threats(record: StudyRecord) -> list[str]:
    """Metrics measured on the dev set that explore selected each arm's configuration on:
    the selection biases them upward, most for the arm whose search fit dev best."""
    selection = (record.plan.get("metric") or {}).get("name", "dev_f1")
    t = record.trials
    if not record.searched or not (t.phase == EXPLORE).any() or not dev_derived(selection):
        return []
    reused = [m for m in record.metrics if dev_derived(m)]
    if not reused:
        return []
    primary = record.analysis.primary
    text = (
        f"Explore chose each arm's {', '.join(record.searched)} on `{selection}`, so "
        f"{', '.join(f'`{m}`' for m in reused)} are measured on the dev set the selection "
        "used and are biased upward (read them as exploratory)."
    )
    if primary in reused:
        text += f" **The primary metric `{primary}` is one of them.**"
    return [text]


def fixed_from(record: StudyRecord) -> dict[str, dict[str, Any]]:
    """The declared sources of fixed values (`fixed_from` in the study file)."""
    text = record.tags.get(FIXED_FROM_TAG)
    declared = json.loads(text) if text else record.plan.get("fixed_from")
    return declared if isinstance(declared, dict) else {}


def fixed_from_threats(record: StudyRecord) -> list[str]:
    """Fixed values chosen on another study's seeds; sharper when those seeds are also this
    study's confirm seeds, whose inits and data orders then chose the value they estimate."""
    confirm = set(int(s) for s in confirm_trials(record).seed)
    fixed = record.plan.get("fixed") or {}
    out = []
    for name, source in fixed_from(record).items():
        seeds = sorted(int(s) for s in source.get("seeds") or [])
        text = (
            f"{name} = {shown_value(fixed.get(name))} is fixed for all arms at the value study "
            f"`{source.get('study')}` chose on its seeds {seeds}."
        )
        shared = sorted(confirm & set(seeds))
        if shared:
            text += (
                f" **Seeds {shared} are also confirm seeds here**: the same inits and data "
                "orders chose the value and now estimate it, so the arm it was chosen "
                "for is favoured."
            )
        out.append(text)
    return out


def pruning_threats(record: StudyRecord) -> list[str]:
    """ASHA with too few samples per arm: Ray's asynchronous ASHA promotes the first sample to
    reach each rung with nothing to compare it with, so with few samples it prunes almost
    nothing and what it does prune was judged on a handful of early evaluations."""
    explore = (record.plan.get("phases") or {}).get("explore") or {}
    samples = explore.get("samples")
    if not explore.get("asha") or not isinstance(samples, int) or samples >= MIN_ASHA_SAMPLES:
        return []
    return [
        f"Explore pruned with ASHA at {samples} samples per arm (fewer than {MIN_ASHA_SAMPLES}): "
        "the first sample to reach each rung went on with nothing to compare it with, and a "
        "sample stopped early was judged on its first evaluations only."
    ]
