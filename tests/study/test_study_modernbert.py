"""A smoke-sized study on a tiny random ModernBERT: the study file's checks read its layer and
head counts from its config.json, every trial cuts, re-draws one head and measures layer
dynamics on it through Ray and MLflow, and the report is made from what they logged. Confirm
only, at SMALL_STUDY's fixed lr: explore's machinery is the same for every model, and is
tested on the tiny BERT and on the synthetic twin."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from tests.study_helpers import SMALL_STUDY, run_study, runs_by_kind, tracking_uri, write_study
from tests.tiny import tiny_model_folder

pytestmark = pytest.mark.study


def test_a_smoke_study_runs_on_modernbert(tmp_path, tiny_corpus):
    model = tiny_model_folder(tmp_path / "model", "modernbert", layers=3)
    fixed = {**SMALL_STUDY["fixed"], "epochs": 2, "reinit_heads": [[1, 3]]}
    study = write_study(tmp_path, str(model), tiny_corpus, **{**SMALL_STUDY, "fixed": fixed})
    done = run_study(study, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]

    trials = runs_by_kind(tmp_path)["trial"]
    completed = [r for r in trials if r.data.tags["status"] == "completed"]
    assert len(completed) == len(trials) == 4  # 2 arms x 2 confirm seeds
    client = MlflowClient(tracking_uri(tmp_path))
    for run in completed:
        depth = int(run.data.tags["arm"].removeprefix("depth="))  # full and full-1: 3 and 2
        per_layer = client.get_metric_history(run.info.run_id, "dyn_l2_query")  # step = block
        assert sorted(m.step for m in per_layer) == list(range(depth))
        assert all(m.value > 0 for m in per_layer)
    report = tmp_path / "reports" / "teststudy" / "README.md"
    assert report.is_file() and "depth" in report.read_text()
