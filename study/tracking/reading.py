"""A study, read back from MLflow: the read side of what `study.tracking.store` and the
callback write, for the report, the driver's choices (confirm's samples, the confirm rounds)
and bench/. The driver reads trial results here and nowhere else, so what it decided on and
what the report shows are the same numbers.

The report reads the tracking store, not Ray's result files, so it can be made on any machine
that sees the store, long after the cluster that ran the study is gone. Everything it needs
(the plan, the arms in plan order, every trial's factors, tags, final metrics and metric
histories) is recorded there by `study.tracking`. No Ray here: the report imports this.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import mlflow
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from study.analysis import Analysis
from study.names import (
    ANALYSIS_TAG,
    CODE_VERSIONS_TAG,
    CONFIRM,
    CONVERGED,
    FINAL_GAIN_RULE_TAG,
    REUSED_TAG,
    RUN_KIND,
    STUDY_KIND,
    STUDY_RUN_ID,
    TRIAL_KIND,
)
from study.tracking.curves import curve_final_gains
from study.tracking.store import NON_FINITE_TAG
from trainables.errors import UserInputError
from trainables.settings import INTERMEDIATE, PLATEAU_STOPPED, stage_name

_PER_EVAL = re.compile(r"_L\d+$")  # dynamics logged at every evaluation, one series per layer
_URI_ENV = "MLFLOW_TRACKING_URI"  # what mlflow.set_tracking_uri also writes into os.environ
BASE_METRICS = ["dev_f1", "test_f1", "curve_area", "steps_to_95"]
DEFAULT_METRIC = {"name": "dev_f1", "mode": "max"}  # a study's `metric:` where it declares none
# What a trial reports about its budget at its end (metrics): columns of every trials.csv
# (with the driver's `converged` tag, study/names.py), empty where a study was recorded
# before trials reported them.
BUDGET_METRICS = ("final_gain", PLATEAU_STOPPED, "steps_run", "tokens_seen")


@dataclass
class StudyRecord:
    """What one study run recorded. `trials` has one row per trial: arm, phase, sample, seed,
    status, error, every factor (parsed back from its param) and every final metric."""

    name: str
    run_id: str
    tracking_uri: str
    tags: dict[str, str]
    plan: dict[str, Any]
    arms: dict[str, dict[str, Any]]  # arm id -> factors, in plan order
    arm_runs: dict[str, str]  # arm id -> MLflow run id
    trials: pd.DataFrame
    extra_sets: list[str] = field(default_factory=list)
    dynamics: list[str] = field(default_factory=list)  # per-layer metrics (step = layer)

    @property
    def grid(self) -> dict[str, list[Any]]:
        """Each arm factor's values in grid order (first appearance in plan order)."""
        out: dict[str, list[Any]] = {}
        for factors in self.arms.values():
            for key, value in factors.items():
                if value not in out.setdefault(key, []):
                    out[key].append(value)
        return out

    @property
    def searched(self) -> list[str]:
        return list(self.plan.get("search") or {})

    @property
    def metrics(self) -> list[str]:
        """Metrics compared between arms: final dev/test F1, each extra set's F1, and the
        convergence summaries (the depth claim is about speed as much as final F1)."""
        out = ["dev_f1", "test_f1", *(f"{n}_f1" for n in self.extra_sets), *BASE_METRICS[2:]]
        study_metric = (self.plan.get("metric") or {}).get("name")
        return out + [study_metric] if study_metric and study_metric not in out else out

    @property
    def study_metric(self) -> tuple[str, str]:
        """The metric the study selects and stops on, and its mode (`max` or `min`), as its
        file declared them: what the report's figures plot where they plot "the metric"."""
        declared = self.plan.get("metric") if isinstance(self.plan.get("metric"), dict) else {}
        merged = {**DEFAULT_METRIC, **declared}
        return str(merged["name"]), str(merged["mode"])

    @property
    def stages(self) -> dict[str, list[str]]:
        """Per arm, the names of the intermediate stages its trials ran before the target
        ([] for none); empty when no trial of the study had any."""
        if INTERMEDIATE not in self.trials:
            return {}
        out: dict[str, list[str]] = {}
        for arm, stages in zip(self.trials.arm, self.trials[INTERMEDIATE], strict=True):
            if isinstance(stages, list):
                out.setdefault(arm, [stage_name(s, i) for i, s in enumerate(stages)])
        return out if any(out.values()) else {}

    @property
    def analysis(self) -> Analysis:
        """The analysis the study declared, as the driver recorded it before any trial ran."""
        return Analysis.from_json(self.tags.get(ANALYSIS_TAG))

    @property
    def crossed(self) -> bool:
        """Whether confirm trials cross seeds with separate data seeds."""
        t = self.confirm_completed()
        return "data_seed" in t and t["data_seed"].notna().any()

    def confirm_completed(self) -> pd.DataFrame:
        """Completed confirm trials, and explore trials that stand in for one
        (reuse_explore_seeds): same configuration, same seed, run once."""
        t = self.trials
        reused = t[REUSED_TAG] == "true" if REUSED_TAG in t else False
        return t[((t.phase == CONFIRM) | reused) & (t.status == "completed")]

    def units(self, rows: pd.DataFrame) -> list:
        """The pairing unit of each row: its seed, or (seed, data seed) when crossed."""
        if not self.crossed:
            return [int(s) for s in rows.seed]
        return [(int(s), int(d)) for s, d in zip(rows.seed, rows.data_seed, strict=True)]

    def scores(self) -> dict[str, dict[str, dict]]:
        """scores[arm][metric][unit] over completed confirm trials (one sample per arm)."""
        out: dict[str, dict[str, dict]] = {}
        done = self.confirm_completed()
        for arm, rows in done.groupby("arm", sort=False):
            units = self.units(rows)
            out[arm] = {
                m: dict(zip(units, rows[m], strict=True)) for m in self.metrics if m in rows
            }
        return out


@dataclass(frozen=True)
class TrialResult:
    """One trial of a study run as the tracking store holds it, for the driver's choices: its
    study tags, the settings it ran with (its params, each parsed back to its value), its
    final metrics (NaN where its last result said NaN or inf, which MLflow cannot store: its
    `non_finite` tag names them; a run recorded before that tag shows its last finite value),
    and whether it trained to its end (its status tag `completed`)."""

    tags: dict[str, Any]  # phase and arm (text), sample and seed (and data_seed) as numbers
    settings: dict[str, Any]
    metrics: dict[str, float]
    finished: bool


def trial_results(tracking_uri: str, study_run: str, phase: str) -> list[TrialResult]:
    """The study run's trials of `phase`, ordered by arm, sample, seed and data seed (so a
    tie between samples goes to the one drawn first). Only trials that started have a run."""
    client = MlflowClient(tracking_uri)
    experiment = client.get_run(study_run).info.experiment_id
    where = (f"tags.{STUDY_RUN_ID} = '{study_run}' and tags.{RUN_KIND} = '{TRIAL_KIND}' "
             f"and tags.phase = '{phase}'")  # fmt: skip
    results, token = [], None
    while True:
        page = client.search_runs([experiment], where, max_results=1000, page_token=token)
        results += [_trial_result(run) for run in page]
        token = page.token
        if not token:
            break
    return sorted(results, key=lambda r: (r.tags["arm"], r.tags["sample"], r.tags["seed"],
                                          r.tags.get("data_seed", -1)))  # fmt: skip


def _trial_result(run: Any) -> TrialResult:
    tags = run.data.tags
    study_tags: dict[str, Any] = {"phase": tags["phase"], "arm": tags["arm"]}
    for name in ("sample", "seed", "data_seed"):
        if name in tags:
            study_tags[name] = int(tags[name])
    settings = {k: _parse(v) for k, v in run.data.params.items()}
    metrics = dict(run.data.metrics)
    metrics.update((name, math.nan) for name in tags.get(NON_FINITE_TAG, "").split(",") if name)
    return TrialResult(study_tags, settings, metrics, tags.get("status") == "completed")


def _parse(value: str | None) -> Any:
    """Params are stored as text: JSON where the value was not a string."""
    if value is None:
        return None
    try:
        return json.loads(value)
    except (json.JSONDecodeError, TypeError):
        return value


def listed_code_versions(tags: dict[str, str]) -> list[str]:
    """The study run's `code_versions` tag as a list; [] when absent or not a list of texts
    (a tag edited by hand is not worth a traceback at resume or in the report)."""
    try:
        versions = json.loads(tags.get(CODE_VERSIONS_TAG) or "[]")
    except ValueError:
        return []
    ok = isinstance(versions, list) and all(isinstance(v, str) for v in versions)
    return versions if ok else []


def find_study_run(client: MlflowClient, study: str, run_id: str | None) -> tuple[str, Any]:
    """The study run to report on: the given id, else the newest finished invocation, else the
    newest of any state (a report on an interrupted study is still useful)."""
    experiment = client.get_experiment_by_name(study)
    if experiment is None:
        raise UserInputError(f"no MLflow experiment named {study!r} in this tracking store")
    if run_id:
        try:
            run = client.get_run(run_id)
        except MlflowException as err:
            raise UserInputError(f"--run-id {run_id}: no such run in this tracking store") from err
        if (
            run.info.experiment_id != experiment.experiment_id
            or run.data.tags.get(RUN_KIND) != STUDY_KIND
        ):
            raise UserInputError(f"--run-id {run_id} is not a study run of {study}")
        return experiment.experiment_id, run
    for where in ("and tags.state = 'finished'", ""):
        runs = client.search_runs(
            [experiment.experiment_id],
            filter_string=f"tags.{RUN_KIND} = '{STUDY_KIND}' {where}",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        if runs:
            return experiment.experiment_id, runs[0]
    raise UserInputError(f"experiment {study!r} has no study run yet")


@contextmanager
def _process_tracking_uri(uri: str) -> Iterator[None]:
    """`mlflow.search_runs` reads the process-wide tracking URI, and setting that URI also
    writes MLFLOW_TRACKING_URI into os.environ, where every later subprocess of the caller (a
    study started from the same Python session, a test) would inherit it: set it for the call
    only, then put back what was there."""
    env_before = os.environ.get(_URI_ENV)
    uri_before = mlflow.get_tracking_uri() if mlflow.tracking.is_tracking_uri_set() else None
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(uri_before)
        if env_before is None:
            os.environ.pop(_URI_ENV, None)
        else:
            os.environ[_URI_ENV] = env_before


def load_study_record(tracking_uri: str, study: str, run_id: str | None = None) -> StudyRecord:
    client = MlflowClient(tracking_uri)
    experiment_id, run = find_study_run(client, study, run_id)
    study_run = run.info.run_id
    with _process_tracking_uri(tracking_uri):
        frame = mlflow.search_runs(
            [experiment_id],
            filter_string=f"tags.{STUDY_RUN_ID} = '{study_run}'",
            max_results=50_000,
            output_format="pandas",
        )
    if frame.empty:
        raise UserInputError(f"study run {study_run} of {study} has no arm or trial runs")
    kind = frame[f"tags.{RUN_KIND}"]
    arm_frame, trial_frame = frame[kind == "arm"], _own_columns(frame[kind == "trial"])
    plan = _parse(run.data.params.get("plan")) or {}
    trials = curve_final_gains(client, _trial_table(trial_frame), plan)
    trials = budget_columns(trials, Analysis.from_json(run.data.tags.get(ANALYSIS_TAG)))
    arms = _arms_in_plan_order(arm_frame, trials)
    return StudyRecord(
        name=study,
        run_id=study_run,
        tracking_uri=tracking_uri,
        tags=dict(run.data.tags),
        plan=plan if isinstance(plan, dict) else {},
        arms=arms,
        arm_runs=dict(zip(arm_frame["tags.arm"], arm_frame["run_id"], strict=True)),
        trials=trials.drop(columns=[c for c in trials if c.startswith("dyn_")]),
        extra_sets=_extra_sets(trials),
        dynamics=sorted(c for c in trials if c.startswith("dyn_") and not _PER_EVAL.search(c)),
    )


def _own_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Only the metrics and params the trial runs have. MLflow gives every run the columns of
    all the runs searched, and the arm runs gain summary metrics when a report is made: without
    this, the trial table of a report made again would grow their empty columns."""
    empty = [
        c for c in frame if c.startswith(("metrics.", "params.")) and frame[c].isna().all()
    ]  # fmt: skip
    return frame.drop(columns=empty)


def _trial_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per trial with plain column names; factor params parsed back to values."""
    tags = {"arm": "arm", "phase": "phase", "status": "status", "error": "error",
            REUSED_TAG: REUSED_TAG, CONVERGED: CONVERGED,
            FINAL_GAIN_RULE_TAG: FINAL_GAIN_RULE_TAG}  # fmt: skip
    out = pd.DataFrame({"run_id": frame["run_id"]})
    for column, tag in tags.items():
        out[column] = frame.get(f"tags.{tag}", pd.Series(dtype=object))
    out["sample"] = pd.to_numeric(frame["tags.sample"]).astype(int)
    out["seed"] = pd.to_numeric(frame["tags.seed"]).astype(int)
    out["duration_s"] = _duration_s(frame)
    # factors (params) over same-named metrics: the `lr` metric is the schedule's last value
    parsed = {
        c.removeprefix("metrics."): frame[c].astype(float)
        for c in frame.columns
        if c.startswith("metrics.")
    }
    parsed.update(
        {
            c.removeprefix("params."): frame[c].map(_parse)
            for c in frame.columns
            if c.startswith("params.")
        }  # fmt: skip
    )
    # params repeat the tags; sorted, because MLflow returns columns in no fixed order and a
    # report made twice from one store must be the same bytes
    parsed = {k: parsed[k] for k in sorted(parsed) if k not in out}
    out = pd.concat([out, pd.DataFrame(parsed, index=frame.index)], axis=1)
    order = ["phase", "arm_index", "sample", "seed"] if "arm_index" in out else ["phase", "seed"]
    return out.sort_values(order, kind="stable").reset_index(drop=True)


def budget_columns(trials: pd.DataFrame, analysis: Analysis) -> pd.DataFrame:
    """`converged`, `final_gain`, `plateau_stopped`, `steps_run` and `tokens_seen` on every
    row, NaN where a trial did not record them. A trial with a `final_gain` is judged by the
    declared rule on it (`Analysis.converged`), whatever its `converged` tag says: the tag is
    the driver's verdict under the rule of its day, and a study recorded before convergence
    was judged from the smoothed curve alone has tags that trusted `until_plateau`'s stop.
    The tag stands only where no `final_gain` was recorded."""
    out = trials.copy()
    for name in BUDGET_METRICS:
        out[name] = pd.to_numeric(out[name]) if name in out else math.nan
    tagged = out[CONVERGED] if CONVERGED in out else pd.Series(None, index=out.index)
    tagged = tagged.where(tagged.isin(["true", "false"]), None).astype(object)
    judged = [
        None if math.isnan(gain) else str(analysis.converged(gain)).lower()
        for gain in out.final_gain
    ]
    judged = pd.Series(judged, index=out.index, dtype=object)
    out[CONVERGED] = judged.where(judged.notna(), tagged)
    return out


def _duration_s(frame: pd.DataFrame) -> pd.Series:
    """Wall time of each trial run (created when the trial started, ended when it stopped),
    for trial-hours in the report; NaN for a run that never ended."""
    if "start_time" not in frame or "end_time" not in frame:
        return pd.Series(float("nan"), index=frame.index)
    start = pd.to_datetime(frame["start_time"], utc=True)
    end = pd.to_datetime(frame["end_time"], utc=True)
    return (end - start).dt.total_seconds()


def _arms_in_plan_order(arm_frame: pd.DataFrame, trials: pd.DataFrame) -> dict[str, dict]:
    """Arm factors from the arm runs' params, ordered by the arm index their trials carry."""
    factors = {}
    for _, row in arm_frame.iterrows():
        params = {
            c.removeprefix("params."): _parse(row[c])
            for c in arm_frame.columns
            if c.startswith("params.") and isinstance(row[c], str)
        }
        factors[row["tags.arm"]] = params
    index = trials.groupby("arm")["arm_index"].min().to_dict() if "arm_index" in trials else {}
    return dict(sorted(factors.items(), key=lambda kv: (index.get(kv[0], 1e9), kv[0])))


def _extra_sets(trials: pd.DataFrame) -> list[str]:
    """Names of the extra eval sets the trials were configured with (data.extra)."""
    names: list[str] = []
    for data in trials.get("data", pd.Series(dtype=object)):
        if isinstance(data, dict):
            names += [n for n in (data.get("extra") or {}) if n not in names]
    return names


def tagged_runs(tracking_uri: str, study: str, tag: str, like: str = "%") -> dict[str, str]:
    """The runs of `study`'s experiment whose tag `tag` matches `like` (SQL LIKE: % is any
    text), each run id with the tag's value; {} when there is no such experiment."""
    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(study)
    if experiment is None:
        return {}
    where, found, token = f"tags.`{tag}` LIKE '{like}'", {}, None
    while True:
        page = client.search_runs([experiment.experiment_id], where, page_token=token)
        found.update((run.info.run_id, run.data.tags[tag]) for run in page)
        token = page.token
        if not token:
            return found


def params_and_tags(tracking_uri: str, run_id: str) -> tuple[dict[str, str], dict[str, str]]:
    """One run's params and tags, as MLflow holds them (text)."""
    run = MlflowClient(tracking_uri).get_run(run_id)
    return dict(run.data.params), dict(run.data.tags)
