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

from study.execution.storage_guard import StorageGuard, end_stopped_study, error_chain
from study.tracking import StudyTracker
from study.tracking.callback import trial_error_text

# what pyarrow's S3 client says when it gets no answer (refused, reset, timed out)
UNREACHABLE = ("AWS Error NETWORK_CONNECTION",)
STATE_TAG = "storage_unreachable"


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
    return any(
        isinstance(e, StorageUnreachable) or unreachable_line(str(e)) for e in error_chain(err)
    )


def unreachable_reason(err: BaseException) -> str:
    return next(filter(None, (unreachable_line(str(e)) for e in error_chain(err))), str(err)[:300])


class OutageGuard(StorageGuard):
    """Listed before the tracking callback, so a trial that failed only because the storage
    was away is never written to MLflow as errored: it stays running and resumes."""

    def _check(self, trial) -> None:
        line = unreachable_line(trial_error_text(trial))
        if line:
            raise StorageUnreachable(line)


def settle_unreachable_storage(
    err: BaseException,
    tracker: StudyTracker,
    study_run: str,
    arm_runs: dict[str, str],
    tags: dict[str, str],
) -> str:
    """After the trials stopped because the storage went away: mark the study run (its state,
    and `tags`) and stop Ray. The line that says what did not answer."""
    end_stopped_study(tracker, study_run, arm_runs, {"state": STATE_TAG, **tags})
    return unreachable_reason(err)
