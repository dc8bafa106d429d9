"""A study that stopped for a reason other than its input, its storage or the user: Tune
raised (a result it cannot take, a searcher's or scheduler's error), or every trial failed.
The driver ends every MLflow run the study opened as FAILED (the study run, its arm runs and
any trial run still marked running), stops Ray and says why in one line; what ran stays in
MLflow, and no report is made of it.
"""

from __future__ import annotations

import logging

from study.execution.runtime import stop_ray
from study.execution.storage_guard import error_chain
from study.tracking import StudyTracker
from trainables.errors import first_line

log = logging.getLogger(__name__)

REASON_CHARS = 300  # of the error's first line: Tune's can hold a whole result


def failure_reason(err: BaseException) -> str:
    """What stopped the study, in a few words: the innermost error of `err`'s chain (Tune's
    TuneError wraps the error that a trial's result or Tune's own loop raised, and its text is
    that error's traceback), its class and first line."""
    inner = error_chain(err)[-1]
    lines = [line.strip() for line in str(inner).splitlines() if line.strip()]
    if lines and lines[0].startswith("Traceback"):  # a traceback as text: its last line
        return lines[-1][:REASON_CHARS]
    return f"{type(inner).__name__}: {first_line(inner, REASON_CHARS)}"


def every_trial_failed(tracker: StudyTracker, study_run: str) -> tuple[str, str] | None:
    """When the study run has trial runs and every one of them errored: the first to start,
    as the driver's `trial finished` lines name it, and its error (its run's `error` tag, the
    last line of the trial's error); None otherwise."""
    tags = tracker.first_trial_if_all_errored(study_run)
    if tags is None:
        return None
    trial = (f"[{tags.get('phase')}] arm {tags.get('arm')} sample {tags.get('sample')} seed "
             f"{tags.get('seed')}")  # fmt: skip
    return trial, tags.get("error", "no error recorded")


def settle_failed_study(
    tracker: StudyTracker, study_run: str, arm_runs: dict[str, str], tags: dict[str, str]
) -> None:
    """Mark the study run as failed (`tags`: why, and its wall time so far), end its trial
    runs still running and its arm runs and itself as FAILED, then stop Ray, whose other
    trials would otherwise go on after the driver's last line."""
    try:  # the store may be what failed: the driver's line matters more
        tracker.set_tags(study_run, {"state": "failed", **tags})
        tracker.end_running_trials(study_run, "FAILED")
        tracker.end_study(study_run, arm_runs, "FAILED")
    except Exception as mlflow_err:  # noqa: BLE001
        log.warning("could not mark the study run in MLflow: %s", mlflow_err)
    stop_ray()
