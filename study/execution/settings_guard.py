"""Stop a study at the first trial that refuses its settings, in one line, instead of recording
every trial as errored and reporting on none.

The study file is checked before anything runs (study/spec), but a few settings can only be
judged once a trial has read its data and tokenised it: `until_plateau`'s patience against
the evaluations that `max_epochs` hold at this data size and `eval_every`, say. Every trial of
the arm would fail the same way, so the first such failure, before any retry, ends the study:
the driver marks the study run as failed (and the trials stopped with it as killed), makes no
report and names the setting in one line (`refused_settings_line`); Tune's traceback of that
failure stays out of the terminal (`HideRefusedTraceback`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import cloudpickle
from ray.tune import Callback

from study.execution.runtime import stop_ray
from study.execution.storage_guard import error_chain
from study.names import STUDY_TAGS, TRIAL_CONFIG
from study.plan import trial_key
from study.spec import StudySpec, study_field_error
from study.tracking import StudyTracker
from trainables.errors import ConfigError, SettingError, UserInputError, first_line

# where Tune logs each failed trial's traceback (ray/tune/execution/tune_controller.py)
TUNE_CONTROLLER_LOGGER = "ray.tune.execution.tune_controller"


class SettingsRefused(UserInputError):
    """A trial of `arm` refused its settings (`cause`, the trial's own error; `value`, the
    trial's value of the setting it names, if it names one; `trial`, its key, whose MLflow run
    `settle_refused_settings` records as errored)."""

    def __init__(self, arm: str, cause: ConfigError, value: Any = None, trial: str | None = None):
        super().__init__(f"a trial of arm {arm} refused its settings: {first_line(cause)}")
        self.arm, self.cause, self.value, self.trial = arm, cause, value, trial


def refused_input(err: BaseException | None) -> ConfigError | None:
    """The settings error a trial raised, if `err` is or carries one. The error Tune holds
    for a trial is Ray's task error made an instance of its cause's class, so the class
    survives the trip from the trial's process when the error can be rebuilt there.

    Only a `ConfigError`, a property of the settings that every trial of them would meet. A
    model or data file that a trial cannot read (`ModelError`, `DataError`) can be a matter
    of the node it ran on, where a retry elsewhere may succeed: the driver has read both
    itself before the study started."""
    for e in error_chain(err):
        for candidate in (getattr(e, "cause", None), e):  # the trial's own error first
            if isinstance(candidate, ConfigError):
                return candidate
    return None


def trial_exception(trial) -> BaseException | None:
    """The error Tune pickled for a failed trial, read where the driver keeps it."""
    path = getattr(trial, "pickled_error_file", None)
    if not path or not Path(path).is_file():
        return None
    try:
        return cloudpickle.loads(Path(path).read_bytes())
    except Exception:  # noqa: BLE001 - an error that cannot be read is not a refused setting
        return None


class SettingsGuard(Callback):
    """Raise `SettingsRefused` at a trial's first failure that is a refused setting, on a
    retry as on its last try. Listed after the tracking callback, so that MLflow keeps the
    trial as errored, with the setting it refused."""

    def _check(self, trial) -> None:
        cause = refused_input(trial_exception(trial))
        if cause is not None:
            setting = getattr(cause, "setting", None)
            value = trial.config[TRIAL_CONFIG].get(setting) if setting else None
            tags = trial.config[STUDY_TAGS]
            raise SettingsRefused(tags["arm"], cause, value, trial_key(tags))

    def on_trial_recover(self, iteration, trials, trial, **info) -> None:
        self._check(trial)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        self._check(trial)


class HideRefusedTraceback(logging.Filter):
    """Drop Tune's traceback of a trial that refused its settings: the driver's line says it."""

    def filter(self, record: logging.LogRecord) -> bool:
        err = record.exc_info[1] if record.exc_info else None
        return refused_input(err) is None


def hide_refused_tracebacks() -> None:
    """Install `HideRefusedTraceback` on Tune's controller logger, once per process."""
    logger = logging.getLogger(TUNE_CONTROLLER_LOGGER)
    if not any(isinstance(f, HideRefusedTraceback) for f in logger.filters):
        logger.addFilter(HideRefusedTraceback())


def refused_settings_line(spec: StudySpec, overrides: list[str], err: SettingsRefused) -> str:
    """The study file's line and field of the refused setting when the trial said which
    (`SettingError`), else the study file and the trial's words."""
    cause = err.cause
    if isinstance(cause, SettingError):
        found = f"{cause.reason} (found by a trial of arm {err.arm} once it had read its data)"
        return study_field_error(spec, overrides, cause.setting, cause.path, found, err.value)
    return f"{spec.path}: {err}"


def refused_settings(err: BaseException) -> SettingsRefused | None:
    """The `SettingsRefused` that stopped Tune's run, if that is what `err` carries."""
    return next((e for e in error_chain(err) if isinstance(e, SettingsRefused)), None)


def settle_refused_settings(
    tracker: StudyTracker,
    study_run: str,
    arm_runs: dict[str, str],
    tags: dict[str, str],
    refused: SettingsRefused | None = None,
) -> None:
    """Mark the study run as failed on its settings (`tags`: its wall time so far), the trial
    that found them as errored with the setting it refused (at a first failure that Ray would
    have retried, the tracking callback has not ended its run), the others as stopped with it,
    and stop Ray, whose other trials would otherwise go on after the driver's last line."""
    tracker.set_tags(study_run, {"state": "refused_settings", **tags})
    if refused is not None and refused.trial is not None:
        error = {"status": "errored", "error": first_line(refused.cause)}
        tracker.end_running_trials(study_run, "FAILED", key=refused.trial, tags=error)
    tracker.end_running_trials(study_run, "KILLED")
    tracker.end_study(study_run, arm_runs, "FAILED")
    stop_ray()
