"""MLflow records of a study, written only from the driver (so a sqlite store is safe).

Tree: experiment = study name; one *study run* per invocation of `study.run`; under it one
*arm run* per arm (issue: the report adds the arm's summary statistics there); under each arm
run one *trial run* per trial, with every factor as a param, a metric per evaluation (step =
optimizer step), the final metrics, and tags for arm, phase, sample, seed, status
(completed / pruned / errored) and Ray's trial id.

Every run is found by a stable key before it is created, so `--resume` (a new driver, a
restored Tune experiment) writes into the same runs and never duplicates one; metrics at
steps already logged are not logged again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME
from ray.tune import Callback

from study.names import (
    ARM_KIND,
    RUN_KIND,
    STUDY_KIND,
    STUDY_RUN_ID,
    STUDY_TAGS,
    TRIAL_CONFIG,
    TRIAL_KIND,
)
from study.plan import trial_key
from trainables.errors import first_line

log = logging.getLogger(__name__)

# What Ray adds to every result; not metrics of the trial.
RAY_KEYS = {
    "time_this_iter_s", "time_total_s", "timestamp", "training_iteration", "pid", "hostname",
    "node_ip", "time_since_restore", "iterations_since_restore", "checkpoint_dir_name",
    "date", "trial_id", "experiment_tag", "done", "should_checkpoint", "config",
}  # fmt: skip
STATUS_RUN = {
    "completed": RunStatus.to_string(RunStatus.FINISHED),
    "pruned": RunStatus.to_string(RunStatus.KILLED),
    "errored": RunStatus.to_string(RunStatus.FAILED),
}
MAX_PARAM = 6000  # MLflow's limit on a param value
RETRY_S = 10  # seconds between tries while the tracking server is down
DRAIN_S = 600  # at the end of a phase, how long to wait for it to come back


def artifact_location(tracking_uri: str) -> str | None:
    """A sqlite store keeps artifacts in `mlartifacts/` beside the database file,
    not in `./mlruns` under whatever folder the driver happened to start in. A server
    decides for itself (None)."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    database = Path(tracking_uri.removeprefix("sqlite:///")).resolve()
    return (database.parent / "mlartifacts").as_uri()


def digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:20]


def numeric_metrics(result: dict[str, Any]) -> dict[str, float]:
    return {
        key: float(value)
        for key, value in result.items()
        if key not in RAY_KEYS and isinstance(value, int | float) and not isinstance(value, bool)
    }


def split_layer_metrics(
    metrics: dict[str, float],
) -> tuple[dict[str, float], dict[str, dict[int, float]]]:
    """The trainable reports layer dynamics as `dyn/<name>/<layer>`; MLflow gets them as one
    metric `dyn_<name>` whose step is the layer index, so its chart is a per-layer profile."""
    plain: dict[str, float] = {}
    layers: dict[str, dict[int, float]] = {}
    for key, value in metrics.items():
        parts = key.split("/")
        if len(parts) == 3 and parts[0] == "dyn" and parts[2].isdigit():
            layers.setdefault(f"dyn_{parts[1]}", {})[int(parts[2])] = value
        else:
            plain[key] = value
    return plain, layers


def trial_status(result: dict[str, Any] | None, errored: bool) -> str:
    """`final` is the trainable's own end marker; Ray's `done` is also set for stopped trials."""
    if errored:
        return "errored"
    return "completed" if result and result.get("final") else "pruned"


MAX_BATCH = 1000  # MLflow's limit on the metrics and tags of one log_batch


def result_batches(
    result: dict[str, Any], step: int, node: str | None = None
) -> list[tuple[list[Metric], list[RunTag]]]:
    """One reported result as MLflow batches: its metrics at `step`, layer dynamics with step =
    layer index (final result) or as one series per layer (every evaluation), and the node
    tag. Usually one batch, so the store applies the result whole or not at all."""
    plain, layers = split_layer_metrics(numeric_metrics(result))
    if not result.get("final"):
        plain.update({f"{name}_L{i}": v for name, vs in layers.items() for i, v in vs.items()})
        layers = {}
    now = int(time.time() * 1000)
    items = [Metric(k, v, now, step) for k, v in sorted(plain.items())]
    items += [
        Metric(n, v, now, i) for n, vs in sorted(layers.items()) for i, v in sorted(vs.items())
    ]
    items = [m for m in items if math.isfinite(m.value)]
    tags = [RunTag("ray_node_id", str(node))] if node is not None else []
    size = MAX_BATCH - len(tags)
    chunks = [items[i : i + size] for i in range(0, len(items), size)] or [[]]
    batches = [(chunk, tags if i == 0 else []) for i, chunk in enumerate(chunks)]
    return [(metrics, tags) for metrics, tags in batches if metrics or tags]


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text[:MAX_PARAM]


class StudyTracker:
    """Find-or-create access to the study's runs; no Ray here, so it is testable alone."""

    def __init__(self, tracking_uri: str, experiment: str):
        self.tracking_uri = tracking_uri
        self.client = MlflowClient(tracking_uri)
        found = self.client.get_experiment_by_name(experiment)
        self.experiment_id = (
            found.experiment_id
            if found
            else self.client.create_experiment(experiment, artifact_location(tracking_uri))
        )

    def _find(self, **tags: str) -> str | None:
        """Search by tags whose values are hex digests or ids: MLflow's filter grammar cannot
        match a value that contains a quote, and arm ids are free text."""
        where = " and ".join(f"tags.{k} = '{v}'" for k, v in tags.items())
        runs = self.client.search_runs([self.experiment_id], filter_string=where, max_results=2)
        return runs[0].info.run_id if runs else None

    def _create(self, name: str, parent: str | None, tags: dict[str, str]) -> str:
        all_tags = {MLFLOW_RUN_NAME: name, **tags}
        if parent:
            all_tags[MLFLOW_PARENT_RUN_ID] = parent
        return self.client.create_run(self.experiment_id, tags=all_tags, run_name=name).info.run_id

    def study_run(self, invocation: str, name: str, tags: dict[str, str], params: dict) -> str:
        run_id = self._find(study_invocation=invocation, **{RUN_KIND: STUDY_KIND})
        if run_id is None:
            run_id = self._create(
                name, None, {**tags, "study_invocation": invocation, RUN_KIND: STUDY_KIND}
            )
            self.log_params(run_id, params)
        else:
            self.client.update_run(run_id, status="RUNNING")
        return run_id

    def arm_run(self, study_run: str, arm_id: str, factors: dict[str, Any]) -> str:
        key = digest(arm_id)
        run_id = self._find(**{STUDY_RUN_ID: study_run, RUN_KIND: ARM_KIND}, arm_key=key)
        if run_id is None:
            run_id = self._create(
                arm_id,
                study_run,
                {STUDY_RUN_ID: study_run, RUN_KIND: ARM_KIND, "arm": arm_id, "arm_key": key},
            )
            self.log_params(run_id, factors)
        else:
            self.client.update_run(run_id, status="RUNNING")
        return run_id

    def trial_run(self, study_run: str, arm_run: str, key: str, tags: dict[str, str]) -> str:
        hashed = digest(key)
        run_id = self._find(**{STUDY_RUN_ID: study_run, RUN_KIND: TRIAL_KIND}, trial_hash=hashed)
        if run_id is None:
            extra = {RUN_KIND: TRIAL_KIND, "trial_key": key, "trial_hash": hashed}
            run_id = self._create(key, arm_run, {**tags, STUDY_RUN_ID: study_run, **extra})
        return run_id

    def log_params(self, run_id: str, params: dict[str, Any]) -> None:
        items = [Param(k, _param_value(v)) for k, v in sorted(params.items())]
        for start in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[start : start + 100])

    def log_batch(
        self, run_id: str, metrics: list[Metric], tags: list[RunTag], look_first: bool = False
    ) -> None:
        """One request, which the store applies whole. MLflow appends metrics, so a batch sent
        twice shows its evaluation twice: with `look_first` (an earlier try's answer was lost,
        and the server may have stored it before it stopped) it is sent only if its first
        metric is not there yet."""
        if look_first and metrics and self.has_metric(run_id, metrics[0]):
            return
        self.client.log_batch(run_id, metrics=metrics, tags=tags)

    def has_metric(self, run_id: str, metric: Metric) -> bool:
        history = self.client.get_metric_history(run_id, metric.key)
        return any(m.step == metric.step for m in history)

    def set_tags(self, run_id: str, tags: dict[str, Any]) -> None:
        self.client.log_batch(run_id, tags=[RunTag(k, str(v)[:5000]) for k, v in tags.items()])

    def last_step(self, run_id: str, metric: str = "step") -> int:
        history = self.client.get_metric_history(run_id, metric)
        return max((int(m.step) for m in history), default=-1)

    def end(self, run_id: str, status: str) -> None:
        self.client.set_terminated(run_id, status)

    def end_study(self, study_run: str, arm_runs: dict[str, str], status: str) -> None:
        """Close the study run and its arm runs (FINISHED, or KILLED when interrupted; a
        resumed study sets them RUNNING again)."""
        for run_id in arm_runs.values():
            self.end(run_id, status)
        self.end(study_run, status)


class MlflowTrackingCallback(Callback):
    """Ray Tune callback on the driver: one MLflow trial run per Tune trial.

    Pickled with the Tuner (and restored on `--resume`), so the MLflow client is made lazily
    and never pickled; which runs exist is found again from their tags.
    """

    def __init__(
        self,
        tracking_uri: str,
        experiment: str,
        study_run: str,
        arm_runs: dict,
        metric: str = "dev_f1",
    ):
        self.tracking_uri = tracking_uri
        self.metric = metric
        self.experiment = experiment
        self.study_run = study_run
        self.arm_runs = dict(arm_runs)
        self._tracker: StudyTracker | None = None
        self._runs: dict[str, str] = {}  # Tune trial id -> MLflow run id
        self._logged_step: dict[str, int] = {}  # MLflow run id -> last step logged
        self.finished: list[dict[str, Any]] = []  # one line per finished trial, for the CLI
        self._pending: list[Callable[[], Any]] = []  # writes not yet accepted, in order
        self._retry_at = 0.0  # after a failed write, wait before trying the server again

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_tracker"] = None
        state["_pending"] = []  # closures over live trials; a resumed study re-reports
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
        self._flush()

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
        """The trial's MLflow run, found or created, with its params. Every step is safe to
        repeat, and the run is remembered only once all of them went through, so a retry after
        a failed write finishes what the failed one began."""
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
            last = self.tracker.last_step(run_id)
            if last < 0:  # same values again are accepted by MLflow
                self.tracker.log_params(run_id, {**trial.config[TRIAL_CONFIG], **tags})
            self._logged_step[run_id] = last
        self._runs[trial.trial_id] = run_id
        return run_id

    def on_trial_start(self, iteration, trials, trial, **info) -> None:
        self._write(lambda: self._run_of(trial))

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        self._write(_ResultWrite(self, trial, dict(result)))

    def _finish(self, trial, errored: bool) -> None:
        result = dict(trial.last_result or {})
        status = trial_status(result, errored)
        tags: dict[str, Any] = {"status": status}
        if errored:  # the error of the last attempt, and how often Ray ran it in all
            tags["error"] = _error_text(trial)
            tags["failures"] = int(getattr(trial, "num_failures", 0))
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
            "%s: [%s] arm %s sample %s seed %s: %s %.4f at epoch %s (%s)",
            what, study["phase"], study["arm"], study["sample"], study["seed"], self.metric,
            value, f"{result.get('epoch', float('nan')):.2f}", status,
        )  # fmt: skip

    def _record_end(self, trial, tags: dict[str, Any], run_status: str) -> None:
        run_id = self._run_of(trial)
        self.tracker.set_tags(run_id, tags)
        self.tracker.end(run_id, run_status)

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        self._finish(trial, errored=False)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        self._finish(trial, errored=True)


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
            look_first, self.in_doubt = self.in_doubt, True
            callback.tracker.log_batch(run_id, metrics, tags, look_first=look_first)
            self.batches.pop(0)
            self.in_doubt = False
        callback._logged_step[run_id] = max(self.step, callback._logged_step.get(run_id, -1))


def trial_error_text(trial) -> str:
    """The whole error Ray recorded for a failed trial (its error file, else its message)."""
    path = getattr(trial, "error_file", None)
    text = Path(path).read_text(errors="replace") if path and Path(path).is_file() else ""
    return text or str(getattr(trial, "error_msg", "") or "")


def _error_text(trial) -> str:
    """The last line of the trial's error, which names the failure, for the MLflow tag."""
    lines = [line.strip() for line in trial_error_text(trial).splitlines() if line.strip()]
    return lines[-1] if lines else "unknown error"
