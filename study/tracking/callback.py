"""The Ray Tune callback that writes every trial's results to MLflow from the driver (so a
sqlite store is safe: one writer), queueing and resending writes while the store is down."""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from ray.tune import Callback

from study.analysis import Analysis
from study.names import (
    CONFIRM,
    CONVERGED,
    FINAL_GAIN_RULE_TAG,
    STUDY_TAGS,
    TRIAL_CONFIG,
)
from study.plan import trial_key
from study.search.tune_internals import reported_result
from study.tracking.artifacts import copy_fingerprint, copy_model, log_fingerprint, log_model
from study.tracking.start import DriverTime
from study.tracking.store import (
    DRAIN_S,
    MAX_BATCH,
    MAX_PARAMS,
    NON_FINITE_TAG,
    RETRY_S,
    STATUS_RUN,
    StudyTracker,
    non_finite,
    param_list,
    result_batches,
    trial_status,
)
from trainables.errors import first_line
from trainables.training.curves import FINAL_GAIN_RULE

log = logging.getLogger(__name__)

FINAL_GAIN = "final_gain"  # the trial's metric that decides it (trainables/training/curves.py)
WALL_EVERY_S = 60.0  # how often the study run's wall time is written while trials run


class MlflowTrackingCallback(Callback):
    """Ray Tune callback on the driver: one MLflow trial run per Tune trial.

    Pickled with the Tuner (and restored on `--resume`), so the MLflow client is made lazily
    and never pickled; which runs exist is found again from their tags.
    """

    # this driver's clock, set by each driver (study.execution.tuner), never pickled: the
    # study run's wall time, written every WALL_EVERY_S so that a killed driver's counts. On
    # the class too, for a callback pickled before it had them (a study resumed with newer code)
    driver_time: DriverTime | None = None
    _wall_at = -math.inf

    def __init__(
        self,
        tracking_uri: str,
        experiment: str,
        study_run: str,
        arm_runs: dict,
        metric: str = "dev_f1",
        analysis: Analysis | None = None,
    ):
        self.tracking_uri = tracking_uri
        self.metric = metric
        self.analysis = analysis or Analysis()  # its plateau decides the `converged` tag
        self.experiment = experiment
        self.study_run = study_run
        self.arm_runs = dict(arm_runs)
        self._tracker: StudyTracker | None = None
        self._runs: dict[str, str] = {}  # Tune trial id -> MLflow run id
        self._logged_step: dict[str, int] = {}  # MLflow run id -> last step logged
        # MLflow run id -> params not yet sent, which go with the run's next write (its first
        # result, or its end tags): a call fewer per trial
        self._params_due: dict[str, list[Param]] = {}
        self.finished: list[dict[str, Any]] = []  # one line per finished trial, for the CLI
        self._pending: list[Callable[[], Any]] = []  # writes not yet accepted, in order
        self._retry_at = 0.0  # after a failed write, wait before trying the server again

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_tracker"] = None
        state["_pending"] = []  # closures over live trials; a resumed study re-reports
        for clock in ("driver_time", "_wall_at"):  # the next driver sets its own
            state.pop(clock, None)
        return state

    # --- writes that survive a tracking server going away ---------------------------------
    def _write(self, action: Callable[[], Any]) -> None:
        """Queue one MLflow write and try to send everything queued, oldest first. A server
        that is down must not stop the study: writes wait and are back-filled, in order, as
        soon as it answers again."""
        self._pending.append(action)
        self._flush()

    def _flush(self, force: bool = False) -> None:
        if not self._pending or (not force and time.monotonic() < self._retry_at):
            return
        was_down = self._retry_at > 0
        while self._pending:
            try:
                self._pending[0]()
            except Exception as err:  # noqa: BLE001 - any store error: keep the write queued
                if not was_down:
                    log.warning("MLflow at %s is not answering (%s); %d write(s) queued, "
                                "retrying every %d s while the study goes on", self.tracking_uri,
                                first_line(err, 300), len(self._pending), RETRY_S)  # fmt: skip
                self._retry_at = time.monotonic() + RETRY_S
                return
            self._pending.pop(0)
        if was_down:
            log.info("MLflow at %s answers again: queued writes back-filled", self.tracking_uri)
        self._retry_at = 0.0

    def on_step_end(self, iteration, trials, **info) -> None:
        self._record_wall_time()
        self._flush()

    def _record_wall_time(self) -> None:
        """The study run's wall time and driver count so far, once every WALL_EVERY_S: a
        driver that is killed (SIGKILL, a lost machine) leaves its time counted up to its
        last write, and the next driver adds its own to that."""
        clock = self.driver_time
        if clock is None or time.monotonic() - self._wall_at < WALL_EVERY_S:
            return
        self._wall_at = time.monotonic()
        self._write(lambda: self.tracker.set_tags(self.study_run, clock.tags()))

    def on_experiment_end(self, trials, **info) -> None:
        """Wait (bounded) for a missing server, so the phase's records are complete."""
        deadline = time.monotonic() + DRAIN_S
        while self._pending and time.monotonic() < deadline:
            self._flush(force=True)
            if self._pending:
                time.sleep(RETRY_S)
        if self._pending:
            log.error("MLflow at %s did not come back within %d s: %d write(s) of this phase "
                      "are lost", self.tracking_uri, DRAIN_S, len(self._pending))  # fmt: skip

    @property
    def tracker(self) -> StudyTracker:
        if self._tracker is None:
            self._tracker = StudyTracker(self.tracking_uri, self.experiment)
        return self._tracker

    def _run_of(self, trial) -> str:
        """The trial's MLflow run, found or created; its params are due with its next write
        when none were logged (`_params_due`). Every step is safe to repeat, and the run is
        remembered only once all of them went through, so a retry after a failed write
        finishes what the failed one began."""
        if trial.trial_id in self._runs:
            return self._runs[trial.trial_id]
        tags = trial.config[STUDY_TAGS]
        run_id = self.tracker.trial_run(
            self.study_run,
            self.arm_runs[tags["arm"]],
            trial_key(tags),
            {
                "arm": tags["arm"],
                "phase": tags["phase"],
                "sample": str(tags["sample"]),
                "seed": str(tags["seed"]),
                **({"data_seed": str(tags["data_seed"])} if "data_seed" in tags else {}),
                "ray_trial_id": trial.trial_id,
                "status": "running",
            },
        )
        if run_id not in self._logged_step:
            # a run made just now holds nothing yet: no need to ask the store (a call per trial)
            last = -1 if run_id in self.tracker.created else self.tracker.last_step(run_id)
            if last < 0:  # same values again are accepted by MLflow
                params = param_list({**trial.config[TRIAL_CONFIG], **tags})
                if len(params) > MAX_PARAMS:
                    self.tracker.log_param_list(run_id, params)
                else:
                    self._params_due[run_id] = params
            self._logged_step[run_id] = last
        self._runs[trial.trial_id] = run_id
        return run_id

    def on_trial_start(self, iteration, trials, trial, **info) -> None:
        self._write(lambda: self._run_of(trial))

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        self._write(_ResultWrite(self, trial, dict(result)))

    def _finish(self, trial, errored: bool) -> None:
        result = dict(reported_result(trial))
        status = trial_status(result, errored)
        failures = int(getattr(trial, "num_failures", 0))
        # how often Ray started the trial again after a failure (a lost node, a crash), each
        # time from its last checkpoint; the trial is still one run
        tags: dict[str, Any] = {"status": status, "retries": failures - int(errored)}
        if status == "completed":
            tags[CONVERGED] = str(converged(self, result)).lower()
            if non_finite(result):  # what the run's metrics cannot say (the driver reads it)
                tags[NON_FINITE_TAG] = ",".join(non_finite(result))
            tags[FINAL_GAIN_RULE_TAG] = FINAL_GAIN_RULE  # the report trusts its final_gain
        if errored:  # the error of the last attempt, and how often Ray ran it in all
            tags["error"] = trial_error_line(trial)
            tags["failures"] = failures
        if status == "completed" and result.get("fingerprint_bytes"):
            self._keep_fingerprint(trial)
        if status == "completed" and trial.config[STUDY_TAGS].get("phase") == CONFIRM:
            self._keep_model(trial)
        self._write(lambda: self._record_end(trial, tags, STATUS_RUN[status]))
        study = trial.config[STUDY_TAGS]
        value = result.get(self.metric, float("nan"))
        line = {**study, "status": status, self.metric: value, "epoch": result.get("epoch")}
        self.finished.append(line)
        # a trial that ended just before the driver died is restored from its final
        # checkpoint and only re-reports its result: say so, it was not trained again
        what = "trial already finished before the restart" if result.get("restored_final") else (
            "trial finished"
        )  # fmt: skip
        log.info(
            "%s: [%s] arm %s sample %s seed %s: %s %.4f at epoch %s (%s%s)",
            what, study["phase"], study["arm"], study["sample"], study["seed"], self.metric,
            value, f"{result.get('epoch', float('nan')):.2f}", status,
            f": {error_said(tags['error'])}" if errored else "",
        )  # fmt: skip

    def _keep_fingerprint(self, trial) -> None:
        """Copy the trial's layer fingerprint out of its final checkpoint now (the phase
        deletes checkpoints when it ends), and queue the copy's upload."""
        try:
            local = copy_fingerprint(getattr(trial, "checkpoint", None))
        except OSError as err:  # the trial's results stand without it; say so
            log.warning("trial %s: could not read its fingerprint: %s", trial.trial_id,
                        first_line(err, 300))  # fmt: skip
            return
        if local is None:
            log.warning("trial %s reported a fingerprint its final checkpoint does not hold",
                        trial.trial_id)  # fmt: skip
            return
        self._write(lambda: log_fingerprint(self.tracker, self._run_of(trial), local))

    def _keep_model(self, trial) -> None:
        """Copy a confirm trial's trained tagger out of its final checkpoint now (the phase
        deletes checkpoints when it ends), and queue its upload: study.export reads it."""
        try:
            local = copy_model(getattr(trial, "checkpoint", None))
        except OSError as err:  # the trial's results stand without it; say so
            log.warning("trial %s: could not read its model: %s", trial.trial_id,
                        first_line(err, 300))  # fmt: skip
            return
        if local is not None:
            self._write(lambda: log_model(self.tracker, self._run_of(trial), local))

    def _record_end(self, trial, tags: dict[str, Any], run_status: str) -> None:
        run_id = self._run_of(trial)
        self.tracker.set_tags(run_id, tags, params=self._params_due.get(run_id, []))
        self._params_due.pop(run_id, None)
        self.tracker.end(run_id, run_status)

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        self._finish(trial, errored=False)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        self._finish(trial, errored=True)


def converged(callback: MlflowTrackingCallback, result: dict[str, Any]) -> bool:
    """Whether a completed trial had stopped improving: the study's declared plateau rule on
    the trial's `final_gain`, its smoothed curve's rise over its last third (a trial without
    one, from before it was reported, or with too few evaluations to tell, counts as not
    converged), whether or not `until_plateau` stopped it. A callback pickled before the
    analysis was kept on it uses the default rule."""
    analysis = getattr(callback, "analysis", None) or Analysis()
    return analysis.converged(float(result.get(FINAL_GAIN, float("nan"))))


class _ResultWrite:
    """One result of one trial, written to its MLflow run. When a try fails it stays queued,
    and the next try sends only the batches the server has not confirmed: a batch whose answer
    never came is looked for first, since the server may have stored it before it stopped."""

    def __init__(self, callback: MlflowTrackingCallback, trial, result: dict[str, Any]):
        self.callback, self.trial, self.result = callback, trial, result
        self.step = int(result.get("step", result.get("training_iteration", 0)))
        self.batches: list[tuple[list[Metric], list[RunTag]]] | None = None
        self.in_doubt = False  # the first batch was sent and no answer came

    def __call__(self) -> None:
        callback = self.callback
        run_id = callback._run_of(self.trial)
        if self.batches is None:
            # a restored trial re-reports what was logged before the restart: nothing to send
            fresh = self.step > callback._logged_step.get(run_id, -1)
            node = self.result.get("node_id")
            self.batches = result_batches(self.result, self.step, node) if fresh else []
        while self.batches:
            metrics, tags = self.batches[0]
            params = callback._params_due.get(run_id, [])
            if len(metrics) + len(tags) + len(params) > MAX_BATCH:  # no room: on their own
                callback.tracker.log_param_list(run_id, params)
                callback._params_due.pop(run_id, None)
                params = []
            look_first, self.in_doubt = self.in_doubt, True
            callback.tracker.log_batch(run_id, metrics, tags, params, look_first=look_first)
            callback._params_due.pop(run_id, None)  # the store applies a batch whole
            self.batches.pop(0)
            self.in_doubt = False
        callback._logged_step[run_id] = max(self.step, callback._logged_step.get(run_id, -1))


def trial_error_text(trial) -> str:
    """The whole error Ray recorded for a failed trial (its error file, else its message)."""
    path = getattr(trial, "error_file", None)
    text = Path(path).read_text(errors="replace") if path and Path(path).is_file() else ""
    return text or str(getattr(trial, "error_msg", "") or "")


def trial_error_line(trial) -> str:
    """The last line of the trial's error, which names the failure, for the MLflow tag."""
    lines = [line.strip() for line in trial_error_text(trial).splitlines() if line.strip()]
    return lines[-1] if lines else "unknown error"


def error_said(error: str) -> str:
    """An error's last line as the terminal says it: without the module path of the study's
    own exception classes (`trainables.errors.TrainingDiverged: loss became nan ...` says
    `loss became nan ...`; `RuntimeError: ...` and `KeyError: 'dev_f1'` stay whole), which
    the MLflow tag keeps."""
    return re.sub(r"^(?:[A-Za-z_]\w*\.)+[A-Za-z_]\w*: ", "", error, count=1) or error
