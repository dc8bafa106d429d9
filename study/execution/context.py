"""What every phase of one study invocation shares: the study, where its results go, and the
MLflow runs its trials report under. Built once by the CLI, passed to each phase, so no phase
reads the command line or opens the store again."""

from __future__ import annotations

from dataclasses import dataclass

from study.execution.storage import StudyStore
from study.plan import StudyPlan
from study.progress.line import StudyProgress
from study.spec import StudySpec
from study.tracking.start import DriverTime


@dataclass
class PhaseContext:
    spec: StudySpec
    plan: StudyPlan
    store: StudyStore
    study_dir: str  # inside the store: <study>/<profile>-<time>
    tracking_uri: str
    study_run: str  # MLflow run id of this invocation's study run
    arm_runs: dict[str, str]  # arm id -> MLflow run id
    max_concurrent: int | None = None
    # a trial's worker runs the next trial: on a local Ray, and for synthetic trials on any
    # (no GPU memory to free, and a worker takes longer to start than such a trial)
    reuse_workers: bool = True
    verbose: bool = False  # Ray's own tables and lines as well as the study's
    progress: StudyProgress | None = None  # the study's progress line
    optuna_storage: str | None = None  # RDB URL the explore samples are copied to
    # this driver's share of the study's wall time, which the tracking callback writes
    driver_time: DriverTime | None = None
