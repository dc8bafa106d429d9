"""The kill soak's audit (bench/kill_soak.py): what an MLflow sqlite store holds against the
study's plan (trials in it, duplicated, lost, left RUNNING, evaluations logged twice), and
how two reports' tables differ once the columns that name one run's records are left out.
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from study.plan import make_plan, trial_key
from study.spec import load_study

STUDY = "killsoak"
NAMES = ("soak", "reference")  # the folders of the two runs
# the report's tables compared with the reference's, and their columns that name one run's
# records (MLflow and Ray ids, the node, times, the step a trial restarted from after losing
# its node: `resumed_from_step`, trainables/tune_adapter.py) rather than the study's numbers
TABLES = ["arms.csv", "comparisons.csv", "trials.csv", "learning_curves.csv"]
RUN_COLUMNS = {"run_id", "duration_s", "resumed_from_step"}
TRIAL_RUNS = """SELECT r.run_uuid, r.status, t.value FROM runs r
    JOIN experiments e ON r.experiment_id = e.experiment_id
    JOIN tags k ON k.run_uuid = r.run_uuid AND k.key = 'run_kind' AND k.value = 'trial'
    JOIN tags t ON t.run_uuid = r.run_uuid AND t.key = 'trial_key'
    WHERE e.name = ? AND r.lifecycle_stage = 'active'"""
RUNNING = """SELECT count(*) FROM runs r JOIN experiments e ON r.experiment_id = e.experiment_id
    WHERE e.name = ? AND r.status = 'RUNNING'"""
LATEST = """SELECT run_uuid, key, value FROM latest_metrics
    WHERE key IN ('dev_f1', 'test_f1', 'step') AND run_uuid IN
    (SELECT r.run_uuid FROM runs r JOIN experiments e ON r.experiment_id = e.experiment_id
     WHERE e.name = ?)"""
STATUS_TAGS = "SELECT run_uuid, value FROM tags WHERE key = 'status'"
DOUBLED = """SELECT count(*) FROM (SELECT run_uuid, step FROM metrics WHERE key = 'dev_f1'
    GROUP BY run_uuid, step HAVING count(*) > 1)"""


@dataclass
class Audit:
    """What the MLflow store holds against the plan."""

    planned: int
    in_mlflow: int  # distinct planned trials with a run
    duplicates: int  # runs beyond one per trial
    lost: int  # planned trials without a completed run holding its final metrics
    running: int  # runs of any kind still RUNNING
    doubled_evaluations: int  # (run, step) pairs of dev_f1 logged more than once
    finals: dict[str, tuple[float, float]]  # trial key -> final (dev_f1, test_f1)


def audit(uri: str, planned_keys: set[str]) -> Audit:
    with contextlib.closing(sqlite3.connect(uri.removeprefix("sqlite:///"))) as db:
        runs = db.execute(TRIAL_RUNS, (STUDY,)).fetchall()
        running = db.execute(RUNNING, (STUDY,)).fetchone()[0]
        latest: dict[str, dict[str, float]] = {}
        for run_id, key, value in db.execute(LATEST, (STUDY,)):
            latest.setdefault(run_id, {})[key] = value
        status = dict(db.execute(STATUS_TAGS).fetchall())
        doubled = db.execute(DOUBLED).fetchone()[0]
    keys = [key for _, _, key in runs]
    finals = {}
    for run_id, run_status, key in runs:
        metrics = latest.get(run_id, {})
        complete = run_status == "FINISHED" and status.get(run_id) == "completed"
        if complete and {"dev_f1", "test_f1"} <= set(metrics):
            finals[key] = (metrics["dev_f1"], metrics["test_f1"])
    return Audit(
        planned=len(planned_keys),
        in_mlflow=len(set(keys) & planned_keys),
        duplicates=len(keys) - len(set(keys)),
        lost=len(planned_keys - set(finals)),
        running=running,
        doubled_evaluations=doubled,
        finals=finals,
    )


def planned_trials(study: Path) -> set[str]:
    """The trial keys the plan holds (study/plan.py spells them as the tracking does)."""
    plan = make_plan(load_study(str(study)))
    (phase,) = plan.phases  # confirm, one sample per arm
    return {
        trial_key({"phase": phase.name, "arm": arm.id, "sample": 0, "seed": seed})
        for arm in plan.arms
        for seed in phase.seeds
    }


def table_differences(ours: Path, reference: Path) -> list[str]:
    """What differs between two reports' tables: numbers compared to 1e-9 (relative), text
    exactly, rows in a sorted order; columns that name one run's records left out."""
    problems = []
    for name in TABLES:
        a, b = (_table(folder / name) for folder in (ours, reference))
        if a is None or b is None:
            problems.append(f"{name}: missing in {'the soak' if a is None else 'the reference'}")
            continue
        if list(a.columns) != list(b.columns) or len(a) != len(b):
            problems.append(f"{name}: shape {a.shape} vs {b.shape}")
            continue
        for column in a.columns:
            x, y = a[column], b[column]
            if pd.api.types.is_numeric_dtype(x) and pd.api.types.is_numeric_dtype(y):
                same = np.isclose(x.to_numpy(float), y.to_numpy(float), rtol=1e-9, equal_nan=True)
            else:
                same = ((x.astype(str) == y.astype(str)) | (x.isna() & y.isna())).to_numpy()
            if not same.all():
                row = int(np.argmin(same))
                problems.append(f"{name}: {column} differs in {int((~same).sum())} rows, e.g. "
                                f"{x.iloc[row]!r} vs {y.iloc[row]!r}")  # fmt: skip
    return problems


def _table(path: Path) -> pd.DataFrame | None:
    if not path.is_file():
        return None
    table = pd.read_csv(path)
    table = table[[c for c in table.columns if c not in RUN_COLUMNS]]
    order = list(table.columns)
    return table.sort_values(order, key=lambda c: c.astype(str)).reset_index(drop=True)
