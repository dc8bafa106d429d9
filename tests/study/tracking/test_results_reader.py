"""One source of results: the driver reads trial results from the tracking store through
study/tracking/reading.py, as the report does, and the report writes nothing back.

- `trial_results` gives each trial's study tags, settings and final metrics as they were
  recorded (a value MLflow cannot store, NaN, comes back from the run's `non_finite` tag),
  and confirm's choice made from them picks the sample the numbers say;
- a report made from a store leaves every run of it as it was;
- no module outside study/tracking/ queries MLflow (checked on the source)."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
from mlflow.entities import Metric

from study.names import EXPLORE
from study.plan import make_plan
from study.report import write_report
from study.search import choose_samples, completed_explore_trials
from study.spec import load_study
from study.tracking.reading import trial_results
from study.tracking.store import NON_FINITE_TAG, StudyTracker
from tests.study.report.test_report_validity import write_study as write_validity_study
from tests.study_helpers import REPO, write_study

# MLflow's read API: what a module outside study/tracking/ must not call
QUERIES = {
    "search_runs", "get_run", "get_metric_history", "search_experiments", "get_experiment",
    "get_experiment_by_name", "list_artifacts", "download_artifacts", "get_parent_run",
    "search_registered_models", "search_model_versions", "search_logged_models",
}  # fmt: skip


@pytest.fixture
def spec(tmp_path, tiny_model, tiny_corpus):
    """Two arms, lr searched, explore seeds 0 and 1, chosen on the highest mean dev_f1."""
    metric = {"name": "dev_f1", "mode": "max"}
    study = write_study(tmp_path, str(tiny_model), tiny_corpus, metric=metric)
    return load_study(str(study), "default")


def _record_explore(uri: str, spec, scores: dict[tuple[str, int], list[float]]) -> str:
    """An explore phase as the tracking callback records it: per (arm, sample) one trial run
    per seed, its settings as params, its final dev_f1, status completed; a NaN score is left
    out of the metrics and named in the `non_finite` tag. The study run's id."""
    tracker = StudyTracker(uri, spec.name)
    study_run = tracker.study_run("inv", spec.name, {}, {})
    arms = {arm.id: arm for arm in make_plan(spec).arms}
    for (arm, sample), seeds in scores.items():
        arm_run = tracker.arm_run(study_run, arm, arms[arm].factors)
        for seed, score in zip(spec.explore.seeds, seeds, strict=True):
            tags = {"arm": arm, "phase": EXPLORE, "sample": str(sample), "seed": str(seed),
                    "status": "completed"}  # fmt: skip
            if math.isnan(score):
                tags[NON_FINITE_TAG] = "dev_f1"
            run = tracker.trial_run(study_run, arm_run, f"{arm}/{sample}/{seed}", tags)
            tracker.log_params(run, {**arms[arm].factors, "lr": 1e-5 * (sample + 1) / 3})
            metrics = [Metric("dev_f1", 0.1, 0, 30)]  # an earlier evaluation
            if not math.isnan(score):
                metrics.append(Metric("dev_f1", score, 0, 60))
            tracker.client.log_batch(run, metrics=metrics)
    return study_run


def test_trial_results_are_the_trials_as_recorded(tmp_path, spec):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    arm = make_plan(spec).arms[0].id
    study_run = _record_explore(uri, spec, {(arm, 1): [0.5, math.nan], (arm, 0): [0.4, 0.3]})
    results = trial_results(uri, study_run, EXPLORE)
    assert [(r.tags["sample"], r.tags["seed"]) for r in results] == [(0, 0), (0, 1), (1, 0),
                                                                     (1, 1)]  # fmt: skip
    first = results[0]
    assert first.tags == {"phase": EXPLORE, "arm": arm, "sample": 0, "seed": 0}
    assert first.settings["lr"] == 1e-5 / 3  # the very float, parsed back from its param
    assert first.metrics["dev_f1"] == 0.4 and first.finished
    assert math.isnan(results[3].metrics["dev_f1"])  # not the earlier evaluation's 0.1
    assert trial_results(uri, study_run, "confirm") == []


def test_confirm_chooses_from_the_recorded_results(tmp_path, spec):
    """Sample 1 of each arm has the best mean where every seed has a score; a NaN seed
    rules a sample out, and a sample missing a seed's run is no candidate."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    a, b = (arm.id for arm in make_plan(spec).arms)
    scores = {(a, 0): [0.4, 0.4], (a, 1): [0.6, 0.5], (a, 2): [0.9, math.nan],
              (b, 0): [0.3, 0.2], (b, 1): [0.35, 0.3]}  # fmt: skip
    study_run = _record_explore(uri, spec, scores)
    chosen = choose_samples(spec, make_plan(spec).arms, trial_results(uri, study_run, EXPLORE))
    assert chosen == {a: [{"lr": 2e-5 / 3}], b: [{"lr": 2e-5 / 3}]}
    assert completed_explore_trials(spec, chosen, trial_results(uri, study_run, EXPLORE)) == []


def test_the_tracker_tags_the_explore_trials_it_is_given(tmp_path, spec):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    a = make_plan(spec).arms[0].id
    study_run = _record_explore(uri, spec, {(a, 0): [0.4, 0.3], (a, 1): [0.5, 0.5]})
    tracker = StudyTracker(uri, spec.name)
    tracker.tag_trial_runs(study_run, EXPLORE, [(a, 1, 0)], {"x": "y"})
    runs = tracker.client.search_runs([tracker.experiment_id], "tags.x = 'y'")
    assert [(int(r.data.tags["sample"]), int(r.data.tags["seed"])) for r in runs] == [(1, 0)]


def _snapshot(uri: str, name: str) -> dict:
    tracker = StudyTracker(uri, name)
    runs = tracker.client.search_runs([tracker.experiment_id], "", max_results=1000)
    return {
        r.info.run_id: (
            r.data.metrics, r.data.params, r.data.tags,
            [a.path for a in tracker.client.list_artifacts(r.info.run_id)],
        )
        for r in runs
    }  # fmt: skip


def test_a_report_writes_nothing_to_the_store(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    write_validity_study(uri, "readonly", gains=None)
    before = _snapshot(uri, "readonly")
    write_report(uri, "readonly", out=tmp_path / "report",
                 aso={"num_samples": 50, "num_bootstrap_iterations": 50})  # fmt: skip
    assert (tmp_path / "report" / "README.md").is_file()
    assert _snapshot(uri, "readonly") == before


def _queries(path: Path) -> list[str]:
    """Where a module calls a method of MLflow's read API, as `line: name`."""
    tree = ast.parse(path.read_text(), str(path))
    return [
        f"{node.lineno}: {node.func.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in QUERIES
    ]


def test_no_module_outside_study_tracking_queries_mlflow():
    tracking = REPO / "study" / "tracking"
    found = {
        str(path.relative_to(REPO)): calls
        for package in ("study", "bench", "trainables")
        for path in sorted((REPO / package).rglob("*.py"))
        if tracking not in path.parents and (calls := _queries(path))
    }
    assert found == {}
    assert _queries(tracking / "reading.py")  # the check sees a query where there is one


def test_the_check_finds_a_query_through_the_trackers_client(tmp_path):
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text(
        "def peek(tracker, run):\n    return tracker.client.get_run(run).data.metrics\n"
    )
    assert _queries(sneaky) == ["2: get_run"]
