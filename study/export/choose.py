"""Which confirm trial run a command line names: by arm and seed, or the best one.

The best is decided by the study's own metric (its `metric:` name and mode, `dev_f1` and max
when the study declares none), a dev-set metric by design: choosing by test F1 would report
a test score that chose itself. Ties go to the lower seed, then the arm first in the plan.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

import pandas as pd

from study.tracking.reading import StudyRecord
from trainables.settings import UserInputError

DEFAULT_METRIC = {"name": "dev_f1", "mode": "max"}


@dataclass(frozen=True)
class ChosenTrial:
    """One completed confirm trial run and what names it."""

    run_id: str
    arm: str
    seed: int
    metric: str
    value: float


def _did_you_mean(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def study_metric(record: StudyRecord) -> tuple[str, str]:
    """The study's metric name and mode, as its file declared them."""
    declared = {**DEFAULT_METRIC, **(record.plan.get("metric") or {})}
    return str(declared["name"]), str(declared["mode"])


def _rows_of_arm(record: StudyRecord, done: pd.DataFrame, arm: str | None) -> pd.DataFrame:
    if arm is None:
        return done
    if arm not in record.arms:
        known = list(record.arms)
        hint = _did_you_mean(arm, known)
        raise UserInputError(f"--arm {arm!r}: study {record.name} has no such arm{hint}; "
                             f"its arms: {', '.join(known)}")  # fmt: skip
    return done[done.arm == arm]


def choose_trial(record: StudyRecord, arm: str | None, seed: int | None, best: bool) -> ChosenTrial:
    """The completed confirm trial of `arm` and `seed`, or with `best` the best one (of `arm`
    when given). Only confirm trials: explore runs several samples on one seed."""
    metric, mode = study_metric(record)
    done = record.trials[(record.trials.phase == "confirm") & (record.trials.status == "completed")]
    rows = _rows_of_arm(record, done, arm)
    if best:
        if rows.empty:
            raise UserInputError(f"study {record.name}: no completed confirm trial"
                                 + (f" in arm {arm!r}" if arm else ""))  # fmt: skip
        values = rows[metric] if metric in rows else pd.Series(math.nan, index=rows.index)
        order = rows.assign(_value=values if mode == "min" else -values,
                            _arm=[list(record.arms).index(a) for a in rows.arm])  # fmt: skip
        row = order.sort_values(["_value", "seed", "_arm"], kind="stable").iloc[0]
    else:
        if arm is None or seed is None:
            raise UserInputError("name the trial with --arm ARM --seed N, or use --best")
        chosen = rows[rows.seed == seed]
        if chosen.empty:
            seeds = sorted(int(s) for s in rows.seed)
            raise UserInputError(f"--seed {seed}: arm {arm} of study {record.name} has no "
                                 f"completed confirm trial of that seed; its seeds: "
                                 f"{', '.join(map(str, seeds)) or 'none'}")  # fmt: skip
        if len(chosen) > 1:
            raise UserInputError(f"--seed {seed}: arm {arm} has {len(chosen)} confirm trials of "
                                 "that seed (data seeds crossed); exporting one of them by "
                                 "data seed is not supported")  # fmt: skip
        row = chosen.iloc[0]
    value = float(row[metric]) if metric in row else math.nan
    return ChosenTrial(str(row.run_id), str(row.arm), int(row.seed), metric, value)
