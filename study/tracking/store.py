"""The MLflow records of a study, without Ray: the run tree and how each run is found again.

Tree: experiment = study name; one *study run* per invocation of `study.run`; under it one
*arm run* per arm (the driver adds the report's summary statistics there); under each arm run one
*trial run* per trial, with every factor as a param, a metric per evaluation (step =
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
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from mlflow.entities import Metric, Param, Run, RunStatus, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

from study.names import (
    ARM_KIND,
    RUN_KIND,
    STUDY_KIND,
    STUDY_RUN_ID,
    TRIAL_KIND,
)
from study.tracking.sqlite_journal import write_ahead
from study.tracking.timing import timed
from trainables.errors import first_line

log = logging.getLogger(__name__)
Answer = TypeVar("Answer")

RETRY_S = 10  # seconds between tries while the tracking server is down
DRAIN_S = 600  # at the end of a phase or study, how long to wait for it to come back

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
# on a trial run, the final metrics it reported as NaN or inf (comma-separated): MLflow stores
# no such value, so without it the run's latest value of such a metric would be an earlier one
NON_FINITE_TAG = "non_finite"
MAX_PARAMS = 100  # MLflow's limit on the params of one log_batch


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


def non_finite(result: dict[str, Any]) -> list[str]:
    """The metrics of `result` whose value is NaN or inf, by name."""
    return sorted(k for k, v in numeric_metrics(result).items() if not math.isfinite(v))


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


def param_list(params: dict[str, Any]) -> list[Param]:
    """Params as MLflow stores them (JSON text, cut to its limit), sorted by name."""
    return [Param(k, _param_value(v)) for k, v in sorted(params.items())]


class StudyTracker:
    """Find-or-create access to the study's runs; no Ray here, so it is testable alone."""

    def __init__(self, tracking_uri: str, experiment: str):
        self.tracking_uri = tracking_uri
        write_ahead(tracking_uri)  # a sqlite store: commits without waiting for the disk
        self.client = timed(MlflowClient(tracking_uri))  # timed only for bench/scale.py
        self._trial_runs: dict[str, dict[str, str]] = {}  # study run -> trial hash -> run id
        self.created: set[str] = set()  # trial runs this tracker made: nothing logged before
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
        """The trial's run, found in the study run's index of trial runs or created. A run
        whose creation failed may still have been stored (its answer lost), so the index is
        read again from the store after any failure."""
        hashed = digest(key)
        known = self._trial_index(study_run)
        if hashed not in known:
            extra = {RUN_KIND: TRIAL_KIND, "trial_key": key, "trial_hash": hashed}
            try:
                known[hashed] = self._create(
                    key, arm_run, {**tags, STUDY_RUN_ID: study_run, **extra}
                )
            except Exception:
                self._trial_runs.pop(study_run, None)
                raise
            self.created.add(known[hashed])
        return known[hashed]

    def _trial_index(self, study_run: str) -> dict[str, str]:
        """Trial hash -> run id of the study run's trial runs, read once: finding each trial
        by a tag search instead cost time in proportion to the runs already in the store
        (bench/scale.py)."""
        if study_run not in self._trial_runs:
            runs = self._trial_runs_where(study_run)
            self._trial_runs[study_run] = {r.data.tags["trial_hash"]: r.info.run_id for r in runs}
        return self._trial_runs[study_run]

    def _trial_runs_where(self, study_run: str, also: str = "") -> Iterator[Run]:
        """The study run's trial runs (that also match `also`, a search filter), page by page."""
        where = f"tags.{STUDY_RUN_ID} = '{study_run}' and tags.{RUN_KIND} = '{TRIAL_KIND}'"
        where += f" and {also}" if also else ""
        token = None
        while True:
            page = self.client.search_runs(
                [self.experiment_id], where, max_results=1000, page_token=token
            )
            yield from page
            token = page.token
            if not token:
                return

    def log_params(self, run_id: str, params: dict[str, Any]) -> None:
        self.log_param_list(run_id, param_list(params))

    def log_param_list(self, run_id: str, items: list[Param]) -> None:
        """Params already in MLflow's form (`param_list`), as many requests as its limit asks."""
        for start in range(0, len(items), MAX_PARAMS):
            self.client.log_batch(run_id, params=items[start : start + MAX_PARAMS])

    def log_batch(
        self,
        run_id: str,
        metrics: list[Metric],
        tags: list[RunTag],
        params: list[Param] | None = None,
        look_first: bool = False,
    ) -> None:
        """One request, which the store applies whole. MLflow appends metrics, so a batch sent
        twice shows its evaluation twice: with `look_first` (an earlier try's answer was lost,
        and the server may have stored it before it stopped) it is sent only if its first
        metric is not there yet."""
        if look_first and metrics and self.has_metric(run_id, metrics[0]):
            return
        self.client.log_batch(run_id, metrics=metrics, params=params or [], tags=tags)

    def has_metric(self, run_id: str, metric: Metric) -> bool:
        history = self.client.get_metric_history(run_id, metric.key)
        return any(m.step == metric.step for m in history)

    def set_tags(self, run_id: str, tags: dict[str, Any], params: list[Param] = ()) -> None:
        """Tags (and params still due, in the same request)."""
        items = [RunTag(k, str(v)[:5000]) for k, v in tags.items()]
        self.client.log_batch(run_id, params=list(params), tags=items)

    def tags(self, run_id: str) -> dict[str, str]:
        return dict(self.client.get_run(run_id).data.tags)

    def log_text(self, run_id: str, text: str, name: str) -> None:
        """A small text artifact (written again with the same name on `--resume`)."""
        self.client.log_text(run_id, text, name)

    def last_step(self, run_id: str, metric: str = "step") -> int:
        history = self.client.get_metric_history(run_id, metric)
        return max((int(m.step) for m in history), default=-1)

    def end(self, run_id: str, status: str) -> None:
        self.client.set_terminated(run_id, status)

    def tag_trial_runs(
        self,
        study_run: str,
        phase: str,
        trials: Iterable[tuple[str, int, int]],
        tags: dict[str, str],
    ) -> None:
        """Tag the study run's trial runs of `phase` given as (arm, sample, seed), every data
        seed of each; one search, whatever the trials."""
        wanted = {(arm, int(sample), int(seed)) for arm, sample, seed in trials}
        for run in self._trial_runs_where(study_run, f"tags.phase = '{phase}'"):
            found = run.data.tags
            if (found.get("arm"), int(found["sample"]), int(found["seed"])) in wanted:
                self.set_tags(run.info.run_id, tags)

    def first_trial_if_all_errored(self, study_run: str) -> dict[str, str] | None:
        """The tags of the study run's first trial run to start, when it has trial runs and
        every one of them errored; None otherwise. Two queries, whatever the trials."""
        trials = f"tags.{STUDY_RUN_ID} = '{study_run}' and tags.{RUN_KIND} = '{TRIAL_KIND}'"
        search, where = self.client.search_runs, [self.experiment_id]
        if search(where, f"{trials} and tags.status != 'errored'", max_results=1):
            return None
        first = search(where, trials, max_results=1, order_by=["attributes.start_time ASC"])
        return dict(first[0].data.tags) if first else None

    def end_running_trials(
        self,
        study_run: str,
        status: str,
        key: str | None = None,
        tags: dict[str, Any] | None = None,
    ) -> int:
        """End the study run's trial runs still marked running (trials stopped with the
        study, which no resume will continue; only the trial `key`, if given) with `status`,
        and `tags` set first; how many there were."""
        where = "attributes.status = 'RUNNING'"
        if key is not None:  # by its hash, as trial_run indexes it: a key may hold any character
            where += f" and tags.trial_hash = '{digest(key)}'"
        running = list(self._trial_runs_where(study_run, where))
        for run in running:
            if tags:
                self.set_tags(run.info.run_id, tags)
            self.end(run.info.run_id, status)
        return len(running)

    def log_report(
        self,
        study_run: str,
        per_run: dict[str, dict[str, float]],
        counts: dict[str, float],
        folder: Path,
    ) -> None:
        """The study's report on the runs it summarises, by the driver that owns them: summary
        metrics on each arm run (non-finite values left out: MLflow cannot sort on them), the
        verdict counts on the study run, and the report folder as its `report` artifacts."""
        for run_id, values in per_run.items():
            items = [Metric(k, float(v), 0, 0) for k, v in values.items() if _finite(v)]
            for start in range(0, len(items), 500):
                self.client.log_batch(run_id, metrics=items[start : start + 500])
        totals = [Metric(k, float(v), 0, 0) for k, v in counts.items()]
        self.client.log_batch(study_run, metrics=totals)
        self.client.log_artifacts(study_run, str(folder), artifact_path="report")

    def end_study(self, study_run: str, arm_runs: dict[str, str], status: str) -> None:
        """Close the study run and its arm runs (FINISHED, or KILLED when interrupted; a
        resumed study sets them RUNNING again)."""
        for run_id in arm_runs.values():
            self.end(run_id, status)
        self.end(study_run, status)


def patiently(action: Callable[[], Answer], tracking_uri: str) -> Answer:
    """`action` (reads, or writes that are safe to repeat), tried again every RETRY_S for up to
    DRAIN_S while the store does not answer, as the tracking callback waits at a phase's end.
    For the driver's own calls after the trials: the driver's client does not retry by itself
    (study/run.py says why), so without this a server restarting as the study ends, or one
    that closes an idle connection just as the driver reuses it, ended the study in a traceback."""
    deadline = time.monotonic() + DRAIN_S
    failed = False
    while True:
        try:
            answer = action()
        except (MlflowException, OSError) as err:  # no answer, or a refused one
            if time.monotonic() + RETRY_S > deadline:
                raise
            if not failed:
                log.warning("MLflow at %s did not answer (%s); trying again every %d s",
                            tracking_uri, first_line(err, 300), RETRY_S)  # fmt: skip
            failed = True
            time.sleep(RETRY_S)
            continue
        if failed:
            log.info("MLflow at %s answered again", tracking_uri)
        return answer


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
