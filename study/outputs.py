"""Where a study's outputs go: one folder, `outputs/` in the working folder, unless a flag
moves a part of it, and the line a study starts with that says where.

    outputs/mlflow.db       the MLflow store (every run, param, metric and tag)
    outputs/mlartifacts/    its artifacts (reports, fingerprints, taggers)
    outputs/optuna.db       the explore samples, for Optuna's own tools
    outputs/ray_results/    Ray Tune's experiments and checkpoints (what --resume reads)
    outputs/reports/        the reports, one folder a study (and profile)

`--tracking-uri` moves the first two (artifacts stay beside a sqlite file), `--optuna-storage`
the third, `--storage` the fourth and `--reports` the last; the committed example reports of
this repository are in `reports/`, written with `--reports reports`. The tiny model of the
smoke profiles is a cache, not an output (docs/install.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

OUTPUTS = Path("outputs")
DEFAULT_STORAGE = str(OUTPUTS / "ray_results")
DEFAULT_REPORTS = str(OUTPUTS / "reports")
NO_REPORT = "none"  # --reports none: the study ends without its report (bench/scale.py)
DEFAULT_TRACKING = f"sqlite:///{OUTPUTS / 'mlflow.db'}"  # as the commands' help says it
# what a finished study leaves in the outputs folder; nothing else is left behind
LEFT_BEHIND = ("mlflow.db", "mlartifacts", "optuna.db", "ray_results", "reports")


def wants_report(reports: str) -> bool:
    """Whether `--reports` asks for a report (a folder), not `none` in any case."""
    return reports.lower() != NO_REPORT


def outputs_line(tracking: str, storage: str, reports: str, optuna: str | None) -> str:
    """The study's first line: where its outputs go, as one folder when they all go to the
    default one, else each by itself. `tracking` is the MLflow URI as it may be shown."""
    folder = OUTPUTS.resolve()
    default = (
        tracking == f"sqlite:///{folder / 'mlflow.db'}"
        and Path(storage).resolve() == folder / "ray_results"
        and Path(reports).resolve() == folder / "reports"
        and optuna in (None, f"sqlite:///{folder / 'optuna.db'}")
    )
    if default:
        return f"outputs in {folder}/ (MLflow store, Optuna samples, Ray results, report)"
    report = f"no report (--reports {NO_REPORT})"
    if wants_report(reports):
        report = f"report in {reports}"
    return (f"outputs: MLflow {tracking}; Ray results {storage}; {report}"
            + (f"; Optuna samples {optuna}" if optuna else ""))  # fmt: skip


def stores_closed(code: int) -> int:
    """`code`, once the sqlite stores this process opened are closed, so that no `-wal` or
    `-shm` file stays beside them (study/tracking/sqlite_journal.py). Each command calls it
    as it returns; one that never opened a store never imported the journal, and pays
    nothing."""
    journal = sys.modules.get("study.tracking.sqlite_journal")
    if journal is not None:
        journal.close_sqlite_stores()
    return code
