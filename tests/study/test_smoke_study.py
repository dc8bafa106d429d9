"""The one whole study the default test tier keeps: the shipped `ner_depth` study at its
`smoke` profile, through the real command line, a local Ray runtime and an MLflow sqlite store,
from an empty working folder (the store, the Ray results and the report land there).

Every other whole study is in the slow tier (`pytest -m slow`; tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from mlflow import MlflowClient

from study.plan import make_plan
from study.spec import load_study

pytestmark = [pytest.mark.study, pytest.mark.smoke]


def test_the_smoke_profile_runs_end_to_end(tmp_path):
    plan = make_plan(load_study("ner_depth", "smoke"))
    done = subprocess.run(
        [sys.executable, "-m", "study.run", "ner_depth", "--profile", "smoke", "--num-cpus", "2"],
        cwd=tmp_path, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "primary comparison(s) on dev_loss" in done.stdout
    assert (tmp_path / "reports" / "ner_depth-smoke" / "comparisons.csv").is_file()
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ner_depth")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    kinds = [run.data.tags.get("run_kind") for run in runs]
    assert kinds.count("study") == 1 and kinds.count("trial") == plan.trials
    assert {run.info.status for run in runs} == {"FINISHED"}
    trials = [run for run in runs if run.data.tags.get("run_kind") == "trial"]
    assert all("dev_loss" in run.data.metrics for run in trials)
