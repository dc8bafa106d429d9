"""Stop a study cleanly when its storage fills, instead of letting every trial fail.

A full disk is not a property of a trial: once one checkpoint cannot be written, every trial
after it would fail the same way and be recorded as errored, and the study would "finish"
with nothing to compare. So the first trial failure that says the device is full stops the
whole Tune run before that failure is recorded anywhere; `settle_full_storage` leaves what
`--resume` reads whole, the driver says so in one line, and `--resume` carries on once space
is freed.
"""

from __future__ import annotations

import errno
import logging

from ray.tune import Callback

from study.execution.runtime import stop_ray
from study.execution.saved_state import SpaceReserve, rewrite_from_staging
from study.search.tune_internals import RAY_STORAGE_LOGGER, trial_storage
from study.tracking import StudyTracker
from study.tracking.callback import trial_error_text

log = logging.getLogger(__name__)

NO_SPACE = ("No space left on device", f"[Errno {errno.ENOSPC}]", "Disk quota exceeded")


class StorageFull(RuntimeError):
    """The study's storage (or the disk under it) has no space left. `storage` is the Ray
    StorageContext of the trial that found it, which tells where Tune staged its state."""

    def __init__(self, message: str, storage=None):
        super().__init__(message)
        self.storage = storage


def says_no_space(text: str) -> bool:
    return any(marker in text for marker in NO_SPACE)


def error_chain(err: BaseException | None) -> list[BaseException]:
    """`err` and what caused it, outermost first (each error once)."""
    out: list[BaseException] = []
    while err is not None and all(err is not e for e in out):
        out.append(err)
        err = err.__cause__ or err.__context__
    return out


def is_storage_full(err: BaseException | None) -> bool:
    """True when `err`, or anything that caused it, is a full-device error."""
    return any(
        isinstance(e, StorageFull)
        or (isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT))
        or says_no_space(str(e))
        for e in error_chain(err)
    )


def storage_context(err: BaseException | None):
    """The Ray StorageContext a StorageFull in `err`'s chain carries, if any."""
    return next((e.storage for e in error_chain(err) if isinstance(e, StorageFull)), None)


def no_space_reason(err: BaseException) -> str:
    """The one line that says the device is full, out of whatever traceback text carries it."""
    for e in error_chain(err):
        line = _no_space_line(str(e))
        if line:
            return line
    return " ".join(str(err).split())[:300]


def _no_space_line(text: str) -> str | None:
    return next((ln.strip()[:300] for ln in text.splitlines() if says_no_space(ln)), None)


class StorageGuard(Callback):
    """Listed before the tracking callback, so a trial that failed only because the disk is
    full is never written to MLflow as errored: it stays running and resumes."""

    def _check(self, trial) -> None:
        line = _no_space_line(trial_error_text(trial))
        if line:
            raise StorageFull(line, storage=trial_storage(trial))

    def on_trial_recover(self, iteration, trials, trial, **info) -> None:
        self._check(trial)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        self._check(trial)


def settle_full_storage(
    err: BaseException,
    reserve: SpaceReserve,
    tracker: StudyTracker,
    study_run: str,
    arm_runs: dict[str, str],
    tags: dict[str, str],
) -> str:
    """After the trials stopped on a full disk: free the reserve and write Tune's last state
    into it (its own copy may have been cut short by the full disk), so `--resume` can read
    it; mark the study run (its state, and `tags`) and stop Ray. The line that says the
    device is full."""
    reserve.release()
    storage = storage_context(err)
    if storage is not None and not rewrite_from_staging(storage):
        log.warning("the saved state of this phase may not be whole; --resume will say so")
    end_stopped_study(tracker, study_run, arm_runs, {"state": "storage_full", **tags})
    return no_space_reason(err)


def end_stopped_study(
    tracker: StudyTracker, study_run: str, arm_runs: dict[str, str], tags: dict[str, str]
) -> None:
    """Mark the study run as stopped by its storage (`tags`: its state, full or unreachable,
    and its wall time so far), then stop Ray, whose log monitor would otherwise go on
    printing after the driver's last line.

    Tune's last upload of its state may still be running in a thread of the driver that no
    caller can wait for (each trial holds a copy of the storage context, with a syncer of its
    own). Against a server that went away, its S3 client retries for seconds, then Ray logs
    the failure with a traceback: after the driver's last line, and saying nothing that line
    does not. So Ray's storage logger is quietened here, once the storage has stopped the
    study."""
    logging.getLogger(RAY_STORAGE_LOGGER).setLevel(logging.CRITICAL)
    try:  # the tracking store may be down too, or live on the same full disk
        tracker.set_tags(study_run, tags)
        tracker.end_study(study_run, arm_runs, "KILLED")
    except Exception as mlflow_err:  # noqa: BLE001 - the driver's own line matters more
        log.warning("could not mark the study run in MLflow: %s", mlflow_err)
    stop_ray()
