"""The Tune callback that feeds the study's progress line from the driver's loop.

It is attached to each experiment as it starts, new or restored, and holds nothing Tune would
save: a restored experiment gets the running driver's line, not a copy from when it was made.
"""

from __future__ import annotations

import logging
import time

from ray.tune import Callback

from study.progress.line import StudyProgress, TrialView
from study.search.tune_internals import (
    FINISHED_STATES,
    RUNNING,
    reported_result,
    status_of,
    study_tags_of,
)
from study.tracking.callback import error_said, trial_error_line
from trainables.settings import TRIAL_CONFIG, TrialConfig, stage_prefix

log = logging.getLogger(__name__)

TIME_KEY = "time_total_s"  # Ray's training time of a trial, kept across restarts
UPDATE_EVERY_S = 0.5  # the line is redrawn at most once a second on a terminal


class ProgressCallback(Callback):
    """Hands the line a view of every trial of the running experiment, at most every
    `every_s` from Tune's loop (which steps many times a second) and once more as the
    experiment ends. A finished trial's view is kept, not rebuilt: with thousands of trials,
    rebuilding every view at every step (Ray's `last_result` copies the result each time)
    took three quarters of the driver's time (bench/scale.py, docs/scale.md).

    A trial counts as finished when Tune says it ended (completed, stopped by the scheduler
    or failed), or when it was already finished at this callback's first update (a restored
    experiment's). Trials that Ctrl-C stops are marked TERMINATED by Tune's clean-up too,
    without that event; they run again on `--resume`, so the line does not count them, even
    one the throttled updates had not yet seen."""

    def __init__(self, progress: StudyProgress | None, every_s: float = UPDATE_EVERY_S):
        self.progress = progress
        self.every_s = every_s
        self._updated_at: float | None = None
        self._finished: dict[str, TrialView | None] = {}  # trial id -> its final view
        self._ended: set[str] = set()  # trials Tune reported complete or failed
        self._restored: set[str] | None = None  # finished at the first update
        self._settings: dict[str, TrialConfig | None] = {}  # trial id -> its checked settings

    def __getstate__(self) -> dict:
        return {
            "progress": None,
            "every_s": self.every_s,
            "_updated_at": None,
            "_finished": {},
            "_ended": set(),
            "_restored": None,
            "_settings": {},
        }

    def on_step_end(self, iteration, trials, **info) -> None:
        self._update(trials)

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        self._ended.add(trial.trial_id)
        self._update(trials)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        self._ended.add(trial.trial_id)
        self._update(trials)

    def on_trial_recover(self, iteration, trials, trial, **info) -> None:
        """A failed attempt that Ray runs again from the trial's last checkpoint: one line with
        its error (Tune's own log of it, the worker's whole traceback, is off unless --verbose:
        study.progress.quiet). Listed after the settings guard, which ends the study instead
        when the failure is a refused setting, so that case is not said to run again."""
        tags = study_tags_of(trial)
        log.warning(
            "trial attempt %d of at most %d failed, running it again from its last checkpoint: "
            "[%s] arm %s sample %s seed %s: %s",
            max(1, int(getattr(trial, "num_failures", 1))),
            int(getattr(trial, "max_failures", 0)) + 1,
            tags.get("phase"), tags.get("arm"), tags.get("sample"), tags.get("seed"),
            error_said(trial_error_line(trial)),
        )  # fmt: skip

    def on_experiment_end(self, trials, **info) -> None:
        self._update(trials, now=True)

    def _update(self, trials, now: bool = False) -> None:
        if self.progress is None:
            return
        moment = time.monotonic()
        if not now and self._updated_at is not None and moment - self._updated_at < self.every_s:
            return
        self._updated_at = moment
        if self._restored is None:
            self._restored = {t.trial_id for t in trials if status_of(t) in FINISHED_STATES}
        self.progress.update([view for view in map(self._kept_view, trials) if view])

    def _kept_view(self, trial) -> TrialView | None:
        if trial.trial_id in self._finished:
            return self._finished[trial.trial_id]
        view = self._view(trial)
        if view is None or view.state == "finished":
            self._finished[trial.trial_id] = view
        return view

    def _view(self, trial) -> TrialView | None:
        tags = study_tags_of(trial)
        if "phase" not in tags:
            return None
        state = self._state(trial)
        result = reported_result(trial)
        value = result.get(self.progress.metric)
        settings = self._settings_of(trial)
        epoch, stage = epoch_reached(settings, result)
        return TrialView(
            key=trial.trial_id,
            phase=tags["phase"],
            arm=str(tags["arm"]),
            sample=int(tags["sample"]),
            state=state,
            completed=state == "finished" and bool(result.get("final")),
            value=float(value) if isinstance(value, int | float) else None,
            seconds=float(result.get(TIME_KEY, 0.0)),
            epoch=epoch,
            epochs_planned=epochs_planned(settings, result) if stage is None else None,
            stage=stage,
        )

    def _settings_of(self, trial) -> TrialConfig | None:
        """The trial's settings, checked once (they do not change while it runs)."""
        if trial.trial_id not in self._settings:
            try:
                settings = TrialConfig.from_dict(dict(trial.config.get(TRIAL_CONFIG) or {}))
            except Exception:  # noqa: BLE001 - the line goes on without the trial's bound
                settings = None
            self._settings[trial.trial_id] = settings
        return self._settings[trial.trial_id]

    def _state(self, trial) -> str:
        status = status_of(trial)
        ended = trial.trial_id in self._ended or trial.trial_id in (self._restored or ())
        if status in FINISHED_STATES and ended:
            return "finished"
        return "running" if status == RUNNING else "waiting"


def epoch_reached(settings: TrialConfig | None, result: dict) -> tuple[float | None, int | None]:
    """How far a trial's training is by its last result: the epoch (fractional; None before
    its first evaluation) and, while it trains an intermediate stage, that stage's index
    (None: the target). A stage's results name its epoch `stage<i>_epoch`."""
    if isinstance(result.get("epoch"), int | float):
        return float(result["epoch"]), None
    for index in range(_stages(settings)):
        epoch = result.get(f"{stage_prefix(index)}epoch")
        if isinstance(epoch, int | float):
            return float(epoch), index
    return None, None


def epochs_planned(settings: TrialConfig | None, result: dict) -> float | None:
    """The epochs a trial trains at most (its `epochs`, its step budget or until_plateau's
    max_epochs, capped by max_steps: `TrialConfig.planned_steps`), measured with the batches
    per epoch its last result shows (step / epoch); None before its first evaluation, and for
    a trial with intermediate stages, whose steps count the stages' too."""
    step, epoch = result.get("step"), result.get("epoch")
    if settings is None or _stages(settings) or not step or not epoch:
        return None
    per_epoch = max(1, round(float(step) / float(epoch)))
    return settings.planned_steps(per_epoch) / per_epoch


def _stages(settings: TrialConfig | None) -> int:
    """A trial's intermediate stages (trainables/training/stages.py)."""
    return len(settings.intermediate or []) if settings is not None else 0
