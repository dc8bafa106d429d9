"""Tuning parity, the reviewer's second question after a verdict: was each arm's setting tuned
for it (by its explore samples, and by whom they were drawn), fixed for all arms, or left at
the trial default, and did the chosen value land at the edge of what was searched. The
threats-to-validity section (`study/report/sections/threats.py`) lists what these find; the
other checks are in `study/report/validity.py`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from study.names import DRAWN_BY, EXPLORE
from study.report.validity import (
    confirm_trials,
    fixed_from,
    pair_name,
    primary_pairs,
    shown_value,
)
from study.spec import DEFAULT_SAMPLER, RANDOM_DRAW, START_FROM
from study.tracking.reading import StudyRecord
from trainables.settings import TUNABLE

EDGE_SHARE = 0.1  # a chosen value in the outer 10% of its range (log scale for a log range)


def edge_flag(chosen: Any, sampled: Sequence[Any], dist: Mapping[str, Any]) -> str:
    """Why a chosen value sits at the edge of what was searched ('' if it does not): the
    smallest or largest value sampled, or in the outer `EDGE_SHARE` of the range (log scale
    for a log distribution). The optimum may lie beyond it."""
    numbers = [v for v in sampled if _is_number(v)]
    if not _is_number(chosen) or not numbers:
        return ""
    out = []
    if len(set(numbers)) > 1 and chosen >= max(numbers):
        out.append(f"the largest of {len(numbers)} sampled")
    elif len(set(numbers)) > 1 and chosen <= min(numbers):
        out.append(f"the smallest of {len(numbers)} sampled")
    share = range_position(chosen, dist)
    if share is not None and share > 1 - EDGE_SHARE:
        out.append(f"in the top {EDGE_SHARE:.0%} of its range")
    elif share is not None and share < EDGE_SHARE:
        out.append(f"in the bottom {EDGE_SHARE:.0%} of its range")
    return ", ".join(out)


def range_position(value: float, dist: Mapping[str, Any]) -> float | None:
    """Where `value` lies in the distribution's range, 0 at low and 1 at high, on a log scale
    for a log distribution; None without a numeric range."""
    low, high = _bounds(dist)
    if low is None or high is None or high <= low:
        return None
    if dist.get("type") == "loguniform" or dist.get("log"):
        if low <= 0 or value <= 0:
            return None
        return float((math.log(value) - math.log(low)) / (math.log(high) - math.log(low)))
    return float((value - low) / (high - low))


def _bounds(dist: Mapping[str, Any]) -> tuple[float | None, float | None]:
    if dist.get("type") == "categorical":
        choices = [c for c in dist.get("choices") or [] if _is_number(c)]
        return (min(choices), max(choices)) if choices else (None, None)
    low, high = dist.get("low"), dist.get("high")
    return (low, high) if _is_number(low) and _is_number(high) else (None, None)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.number) and not isinstance(value, bool)


def settings(record: StudyRecord) -> list[str]:
    """The settings whose tuning is compared: every searched one and every fixed optimisation
    setting (the trial settings marked `tunable`, whose value favours some arms over others
    when it is not tuned per arm); the learning rate always, even when the trial default was
    left in place."""
    fixed = record.plan.get("fixed") or {}
    names = [*record.searched, *(n for n in TUNABLE if n in fixed)]
    return list(dict.fromkeys(names)) or ["lr"]


def tuning_table(record: StudyRecord) -> pd.DataFrame:
    """Per primary comparison, arm and setting: how its value was set (tuned for the arm by
    explore, fixed for all arms, or neither), the value confirm ran, the values sampled and
    the edge flag."""
    rows = []
    for pair in primary_pairs(record):
        for arm in pair:
            rows += [
                {
                    "comparison": pair_name(pair),
                    "arm": arm,
                    "setting": name,
                    **_tuning(record, arm, name),
                }
                for name in settings(record)
            ]
    return pd.DataFrame(rows)


def _tuning(record: StudyRecord, arm: str, name: str) -> dict[str, Any]:
    t = record.trials
    explored = t[(t.phase == EXPLORE) & (t.arm == arm)]
    confirm = confirm_trials(record)
    chosen = confirm[confirm.arm == arm].get(name, pd.Series(dtype=object)).dropna()
    value = chosen.iloc[0] if len(chosen) else (record.plan.get("fixed") or {}).get(name)
    if name not in record.searched:
        how = "fixed for all arms" if name in (record.plan.get("fixed") or {}) else "default"
        source = fixed_from(record).get(name)
        if source:
            how += f" (chosen by {source.get('study')} on seeds {source.get('seeds')})"
        return {"how": how, "chosen": value, "sampled": "", "edge": ""}
    if explored.empty or name not in explored:
        return {"how": "searched, not explored", "chosen": value, "sampled": "", "edge": ""}
    sampled = sorted(explored[name].dropna().unique().tolist())
    dist = record.plan["search"][name]
    return {
        "how": f"tuned for the arm ({len(sampled)} explore samples{_drawn(explored, record.plan)})",
        "chosen": value,
        "sampled": ", ".join(f"{v:.3g}" if _is_number(v) else str(v) for v in sampled),
        "edge": edge_flag(value, sampled, dist),
    }


def _drawn(explored: pd.DataFrame, plan: dict) -> str:
    """How an arm's explore samples were drawn, where the study recorded it: by the sampler's
    model, or at random (its start-up draws, and any asked before enough samples had ended:
    a model sampler that drew none ran a random search)."""
    drawn = explored.get(DRAWN_BY, pd.Series(dtype=object)).replace("", None)
    if drawn.isna().all():
        return ""
    sampler = ((plan.get("phases") or {}).get("explore") or {}).get("sampler") or DEFAULT_SAMPLER
    counts = drawn[~explored["sample"].duplicated()].fillna("?").value_counts()
    at_random = int(counts.get(RANDOM_DRAW, 0))
    given = int(counts.get(START_FROM, 0))
    start = f", {given} given by explore.start_from" if given else ""
    if sampler == RANDOM_DRAW:
        return f", random search{start}"
    by_model = int(counts.get(sampler, 0))
    if not by_model:
        return f", all drawn at random: {sampler.upper()}'s model drew none{start}"
    return f", {by_model} drawn by {sampler.upper()}'s model, {at_random} at random{start}"


def edge_threats(table: pd.DataFrame) -> list[str]:
    """One threat per arm and setting whose chosen value is at the edge of its search."""
    if table.empty:
        return []
    flagged = table[table.edge != ""].drop_duplicates(["arm", "setting"])
    return [
        f"`{r.arm}`: {r.setting} = {shown_value(r.chosen)} is {r.edge} (sampled: {r.sampled}); "
        "the best value may lie outside what was searched."
        for r in flagged.itertuples()
    ]


def parity_threats(record: StudyRecord, table: pd.DataFrame) -> list[str]:
    """Settings tuned for one arm of a primary comparison and not the other, and a study
    that tuned nothing for any arm: its verdicts hold at the fixed values only."""
    if table.empty:
        return []
    out = []
    tuned = table.how.str.startswith("tuned")
    for (comparison, name), rows in table.groupby(["comparison", "setting"], sort=False):
        kinds = rows.how.str.startswith("tuned")
        if kinds.any() and not kinds.all():
            arms = ", ".join(f"`{a}`" for a in rows.arm[kinds])
            out.append(f"{comparison}: {name} was tuned for {arms} only.")
    if not tuned.any():
        values = table.drop_duplicates("setting")
        shown = ", ".join(
            f"{r.setting} = {shown_value(r.chosen)} ({r.how})" for r in values.itertuples()
        )
        out.append(
            f"Tuned for no arm: {shown}. Each verdict holds at these values only; an "
            "arm they suit less is handicapped."
        )
    return out
