"""The one whole study the default test tier keeps: the shipped `ner_depth` study at its
`smoke` profile, through the real command line, a local Ray runtime and an MLflow sqlite store,
from an empty working folder (the store, the Ray results and the report land in its
`outputs/`, and nothing else is left there). The
study starts as soon as collection ends, beside the other tests, and this test runs last
(tests/background_study.py).

Every other whole study is in the slow tier (`pytest -m slow`; tests/conftest.py)."""

from __future__ import annotations

import pytest
from mlflow import MlflowClient

from study.outputs import LEFT_BEHIND
from study.plan import make_plan
from study.spec import load_study
from tests import background_study

pytestmark = [pytest.mark.study, pytest.mark.smoke]


def test_the_smoke_profile_runs_end_to_end(request):
    plan = make_plan(load_study("ner_depth", "smoke"))
    study = background_study.started(request.config)
    done = study.wait(timeout=900)
    tmp_path = study.folder
    assert done.returncode == 0, done.stderr[-3000:]
    assert "primary comparison(s) on dev_loss" in done.stdout
    outputs = tmp_path / "outputs"
    assert (outputs / "reports" / "ner_depth-smoke" / "comparisons.csv").is_file()
    # one folder, named in the driver's first line; nothing but the documented outputs left
    first = done.stderr.splitlines()[0]
    assert f"study: outputs in {outputs}/ (" in first, done.stderr[:2000]
    assert f"; outputs in {outputs}/ (" in done.stdout.splitlines()[0], done.stdout[:2000]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outputs", "stderr.txt", "stdout.txt"]
    left = sorted(p.name for p in outputs.iterdir())
    assert set(left) <= set(LEFT_BEHIND) and {"mlflow.db", "ray_results", "reports"} <= set(left)
    client = MlflowClient(f"sqlite:///{outputs / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ner_depth")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    kinds = [run.data.tags.get("run_kind") for run in runs]
    assert kinds.count("study") == 1 and kinds.count("trial") == plan.trials
    assert {run.info.status for run in runs} == {"FINISHED"}
    trials = [run for run in runs if run.data.tags.get("run_kind") == "trial"]
    assert all("dev_loss" in run.data.metrics for run in trials)
