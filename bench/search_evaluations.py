"""The second ledger of bench/search_efficiency.py's cache: every evaluation of every cached
trial (step, epoch, the study's dev metric, and the test score where the trial recorded one
at every evaluation under `eval_test_each_time`), one CSV row per evaluation, joined to the
trials ledger (bench/search_ledger.py) by the trial's MLflow `run_id`.

Why a second file: the trials ledger holds what a trial ended with, which is all a replay of
today's bench needs; the tabular benchmark (bench/search_tabular.py) replays a contender at any
budget and measures which checkpoint should score test, and for that it needs the whole curve
of every trial. The curves come from the MLflow metric histories through the project's one
reader (study/tracking/curves.py), the dev metric as the evaluations made it (a trial that
kept an earlier evaluation's weights re-logs their dev score at its last step:
`evaluations_as_made` undoes that), the test curve as logged.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from study.tracking.curves import evaluations_as_made, metric_histories
from trainables.settings import each_time_test_name

KEY_COLUMNS = ["study", "study_run", "run_id", "evaluation"]
EVALUATION_COLUMNS = [*KEY_COLUMNS, "step", "epoch"]


def curve_names(metric: str, primary: str) -> list[str]:
    """The ledger's metric columns: the study's dev metric at every evaluation and, where the
    primary metric is a test score, its per-evaluation name (`test_f1` -> `eval_test_f1`)."""
    names = [metric]
    if primary.startswith("test_"):
        names.append(each_time_test_name(primary))
    return names


def path_beside(trials_ledger: Path) -> Path:
    """The evaluations ledger next to a trials ledger: `x_trials.csv` -> `x_evaluations.csv`."""
    stem = trials_ledger.stem.removesuffix("_trials")
    return trials_ledger.with_name(f"{stem}_evaluations.csv")


def read(path: Path | None, names: list[str]) -> pd.DataFrame:
    """The ledger's rows (none where there is no ledger yet)."""
    if path is None or not path.exists():
        return pd.DataFrame(columns=EVALUATION_COLUMNS + names)
    return pd.read_csv(path, dtype={"study_run": str, "run_id": str})


def write(path: Path, rows: pd.DataFrame) -> None:
    """The whole ledger in a stable order, written beside the old one and moved over it (a
    crash leaves one or the other, never half)."""
    rows = rows.sort_values(KEY_COLUMNS, kind="stable", ignore_index=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    rows.to_csv(partial, index=False)
    os.replace(partial, path)


def _number(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def trial_evaluations(uri: str, trial: pd.Series, names: list[str]) -> pd.DataFrame:
    """One row per evaluation of one trial (`trial`: its row of `load_trials`), read from its
    metric histories; a metric the trial did not log at some evaluation is NaN there."""
    logged = metric_histories(uri, trial.run_id, "evaluation", "epoch", *names)
    index, epoch, curves = logged[0], logged[1], logged[2:]
    steps = sorted(epoch)
    if not steps:
        return pd.DataFrame(columns=EVALUATION_COLUMNS[2:] + names)
    best, area = _number(trial.get("best_step")), _number(trial.get("curve_area"))
    out = pd.DataFrame({"run_id": trial.run_id, "step": steps,
                        "evaluation": [int(index.get(s, k + 1)) for k, s in enumerate(steps)],
                        "epoch": [epoch[s] for s in steps]})  # fmt: skip
    for name, history in zip(names, curves, strict=True):
        points = sorted(history.items())
        if name == names[0]:  # the study metric: undo the kept checkpoint's re-score
            points = evaluations_as_made(points, name, best, area)
        values = dict(points)
        out[name] = [values.get(s, math.nan) for s in steps]
    return out[EVALUATION_COLUMNS[2:] + names]


def run_evaluations(
    uri: str, study: str, study_run: str, trials: pd.DataFrame, names: list[str]
) -> pd.DataFrame:
    """Every evaluation of every trial of one study run (`trials`: its `load_trials` rows)."""
    tables = [trial_evaluations(uri, row, names) for _, row in trials.iterrows()]
    tables = [t for t in tables if len(t)]
    if not tables:
        return pd.DataFrame(columns=EVALUATION_COLUMNS + names)
    rows = pd.concat(tables, ignore_index=True)
    return rows.assign(study=study, study_run=study_run)[EVALUATION_COLUMNS + names]


def with_trials(evaluations: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """The evaluations with their trials' arm, seed, lr, status and phase (the trials ledger's
    rows), for a reader that replays curves by arm and lr."""
    keep = ["run_id", "arm", "phase", "seed", "status", "lr"]
    return evaluations.merge(trials[keep], on="run_id", how="inner", validate="many_to_one")
