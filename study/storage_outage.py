"""Stop a study cleanly when its object storage stops answering; `--resume` once it is back.

A storage server that went away fails every trial's next checkpoint the same way: left alone,
Tune records each of those trials as errored, and the study ends without the samples it
needs. So, as for a full disk (study/storage_guard.py), the first trial failure that says the
storage cannot be reached stops the whole Tune run before it is recorded anywhere. Tune then
stops without writing its experiment state again, so what storage holds is the last state
written whole (an object store replaces an object whole or not at all, and a checkpoint cut
short is never recorded in it; docs/cluster.md names the one window Tune leaves). The driver
says so in one line and `--resume` carries on from there once the storage answers again.
"""

from __future__ import annotations

import logging
import sys

import ray

from study.storage_guard import StorageGuard, _chain
from study.tracking import trial_error_text

log = logging.getLogger(__name__)

# what pyarrow's S3 client says when it gets no answer (refused, reset, timed out)
UNREACHABLE = ("AWS Error NETWORK_CONNECTION",)
STATE_TAG = "storage_unreachable"
EXIT_CODE = 3  # as for a full disk: the study is whole, and resumes


class StorageUnreachable(RuntimeError):
    """The study's storage did not answer a trial's read or write."""


def unreachable_line(text: str) -> str | None:
    """The part of the first line of `text` that says the storage did not answer."""
    for line in text.splitlines():
        at = min((line.find(m) for m in UNREACHABLE if m in line), default=-1)
        if at >= 0:
            return line[at:].strip()[:300]
    return None


def is_storage_unreachable(err: BaseException | None) -> bool:
    """True when `err`, or anything that caused it, says the storage did not answer."""
    return any(isinstance(e, StorageUnreachable) or unreachable_line(str(e)) for e in _chain(err))


def unreachable_reason(err: BaseException) -> str:
    return next(filter(None, (unreachable_line(str(e)) for e in _chain(err))), str(err)[:300])


class OutageGuard(StorageGuard):
    """Listed before the tracking callback, so a trial that failed only because the storage
    was away is never written to MLflow as errored: it stays running and resumes."""

    def _check(self, trial) -> None:
        line = unreachable_line(trial_error_text(trial))
        if line:
            raise StorageUnreachable(line)


def end_stopped_study(tracker, context, state: str) -> None:
    """Mark the study run in MLflow as stopped by its storage (`state`), then stop Ray, whose
    log monitor would otherwise go on printing workers' lines after the driver's last one."""
    try:  # the tracking store may be down too, or on the same full disk
        tracker.set_tags(context.study_run, {"state": state})
        tracker.end_study(context.study_run, context.arm_runs, "KILLED")
    except Exception as mlflow_err:  # noqa: BLE001 - the driver's last line matters more
        log.warning("could not mark the study run in MLflow: %s", mlflow_err)
    if ray.is_initialized():
        ray.shutdown()


def storage_unreachable(tracker, context, profile: str, err: BaseException) -> int:
    end_stopped_study(tracker, context, STATE_TAG)
    print(
        f"error: the study's storage {context.store.root} cannot be reached "
        f"({unreachable_reason(err)}); once it answers again, resume with: python -m "
        f"study.run {context.spec.name} --profile {profile} --resume",
        file=sys.stderr,
    )
    return EXIT_CODE
