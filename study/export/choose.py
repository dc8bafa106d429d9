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
from trainables.errors import UserInputError


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
    """The study's metric name and mode, as its file declared them (`StudyRecord.study_metric`)."""
    return record.study_metric


def resolve_arm(record: StudyRecord, text: str) -> str:
    """The arm `text` names, in the forms a reader types: the arm's id (`depth=5,
    data_fraction=1`), a value as the study file wrote it (`depth=full-1`) or as the report
    shows it (`depth=5`, `data_fraction=1.0`), and any subset of the factors that names one
    arm (`depth=full-1` in a study whose only other factor has one value). Ambiguous or
    unknown names are one line listing the matches or the arms."""
    if text in record.arms:
        return text
    wanted = _pairs(text)
    factors = {key for values in record.arms.values() for key in values}
    for key in wanted:
        if key not in factors:
            hint = _did_you_mean(key, sorted(factors))
            raise UserInputError(
                f"--arm {text!r}: study {record.name} has no factor {key!r}{hint}; its arm "
                f"factors: {', '.join(sorted(factors))}"
            )
    matches = [
        arm
        for arm, values in record.arms.items()
        if all(_same(record, key, want, values.get(key)) for key, want in wanted.items())
    ]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        hint = _did_you_mean(text, list(record.arms))
        raise UserInputError(f"--arm {text!r}: study {record.name} has no such arm{hint}; its "
                             f"arms: {', '.join(record.arms)}")  # fmt: skip
    raise UserInputError(f"--arm {text!r} names {len(matches)} arms of study {record.name}: "
                         f"{'; '.join(matches)}; give more factors")  # fmt: skip


def _pairs(text: str) -> dict[str, str]:
    pairs = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise UserInputError(
                f"--arm {text!r}: an arm is named by FACTOR=VALUE pairs joined by commas, "
                "such as depth=full-1 or depth=5,data_fraction=1"
            )
        pairs[key.strip()] = value.strip()
    return pairs


def _same(record: StudyRecord, key: str, wanted: str, value: object) -> bool:
    """Whether `wanted` (as typed) names `value` (as the arm recorded it): the same text, the
    same number, or the value written in the study file's grid at the same position."""
    if value is None:
        return False
    if wanted == str(value):
        return True
    try:
        if float(wanted) == float(value):  # type: ignore[arg-type]
            return True
    except (TypeError, ValueError):
        pass
    written = ((record.plan.get("grid") or {}).get(key)) or []
    resolved = record.grid.get(key, [])
    if isinstance(written, list) and len(written) == len(resolved):
        return any(str(w) == wanted and r == value for w, r in zip(written, resolved, strict=True))
    return False


def _rows_of_arm(record: StudyRecord, done: pd.DataFrame, arm: str | None) -> pd.DataFrame:
    if arm is None:
        return done
    return done[done.arm == resolve_arm(record, arm)]


def choose_trial(record: StudyRecord, arm: str | None, seed: int | None, best: bool) -> ChosenTrial:
    """The completed confirm trial of `arm` and `seed`, or with `best` the best one (of `arm`
    when given). Only confirm trials: explore runs several samples on one seed."""
    metric, mode = study_metric(record)
    done = record.trials[(record.trials.phase == "confirm") & (record.trials.status == "completed")]
    arm = resolve_arm(record, arm) if arm is not None else None
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
