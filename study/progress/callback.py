"""The Tune callback that feeds the study's progress line from the driver's loop.

It is attached to each experiment as it starts, new or restored, and holds nothing Tune would
save: a restored experiment gets the running driver's line, not a copy from when it was made.
"""

from __future__ import annotations

from ray.tune import Callback

from study.progress.line import StudyProgress, TrialView
from study.search.tune_internals import FINISHED_STATES, RUNNING, status_of, study_tags_of

TIME_KEY = "time_total_s"  # Ray's training time of a trial, kept across restarts


class ProgressCallback(Callback):
    def __init__(self, progress: StudyProgress | None):
        self.progress = progress

    def __getstate__(self) -> dict:
        return {"progress": None}  # the line belongs to the running driver

    def on_step_end(self, iteration, trials, **info) -> None:
        self._update(trials)

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        self._update(trials)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        self._update(trials)

    def _update(self, trials) -> None:
        if self.progress is not None:
            self.progress.update([view for view in map(self._view, trials) if view])

    def _view(self, trial) -> TrialView | None:
        tags = study_tags_of(trial)
        if "phase" not in tags:
            return None
        status = status_of(trial)
        state = "finished" if status in FINISHED_STATES else (
            "running" if status == RUNNING else "waiting"
        )  # fmt: skip
        result = trial.last_result or {}
        value = result.get(self.progress.metric)
        return TrialView(
            key=trial.trial_id,
            phase=tags["phase"],
            arm=str(tags["arm"]),
            sample=int(tags["sample"]),
            state=state,
            completed=state == "finished" and bool(result.get("final")),
            value=float(value) if isinstance(value, int | float) else None,
            seconds=float(result.get(TIME_KEY, 0.0)),
        )
