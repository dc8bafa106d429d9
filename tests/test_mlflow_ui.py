"""The MLflow UI, in a real headless browser, shows a study's arm runs and their summaries.

A small real sqlite store (study run > 2 arm runs > 2 trial runs each, tagged as
study/tracking.py tags them) is served by `mlflow server` on loopback; the runs table is
screenshotted (tmp_path/runs.png) and its text checked. Skipped without chromium/playwright.
"""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

from tests.mlflow_ui import (
    SUMMARY_METRICS,
    browser_unavailable_reason,
    capture_runs_table,
    mlflow_ui_server,
)

EXPERIMENT = "ner_depth"
CMP = "cmp/depth_5_vs_6/test_f1/diff"
# arm id -> metrics; three decimals, as the UI prints them
ARMS = {
    "depth=5,data_fraction=1": {"f1_mean": 0.812, "f1_std": 0.011, "n_seeds": 2, CMP: -0.022},
    "depth=6,data_fraction=1": {"f1_mean": 0.834, "f1_std": 0.009, "n_seeds": 2, CMP: -0.022},
}


def build_store(uri: str) -> None:
    client = MlflowClient(uri)
    exp = client.create_experiment(EXPERIMENT)
    study = client.create_run(exp, run_name="ner_depth", tags={"run_kind": "study"}).info.run_id
    for arm_id, metrics in ARMS.items():
        tags = {"run_kind": "arm", "arm": arm_id, MLFLOW_PARENT_RUN_ID: study}
        arm = client.create_run(exp, run_name=arm_id, tags=tags).info.run_id
        for key, value in metrics.items():
            client.log_metric(arm, key, value)
        for seed in range(2):
            tags = {
                "run_kind": "trial",
                "arm": arm_id,
                "seed": str(seed),
                MLFLOW_PARENT_RUN_ID: arm,
            }
            trial = client.create_run(exp, run_name=f"{arm_id}/seed={seed}", tags=tags)
            client.log_metric(trial.info.run_id, "test_f1", metrics["f1_mean"] + 0.01 * seed)
            client.set_terminated(trial.info.run_id)
        client.set_terminated(arm)
    client.set_terminated(study)


def parse_table(text: str) -> tuple[list[str], dict[str, dict[str, str]]]:
    header, *lines = text.splitlines()
    columns = header.split("\t")
    rows = {}
    for line in lines:
        cells = dict(zip(columns, line.split("\t"), strict=False))
        rows[cells["Run Name"]] = cells
    return columns, rows


def test_runs_table_shows_arm_summary_runs_and_metrics(tmp_path):
    reason = browser_unavailable_reason()
    if reason:
        pytest.skip(f"no headless browser for the MLflow UI check: {reason}")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    build_store(uri)
    shot = tmp_path / "runs.png"
    with mlflow_ui_server(uri, workdir=tmp_path / "server") as base_url:
        assert base_url.startswith("http://127.0.0.1:")
        text = capture_runs_table(base_url, EXPERIMENT, shot, metrics=(*SUMMARY_METRICS, CMP))

    assert shot.stat().st_size > 10_000, "screenshot missing or blank"
    columns, rows = parse_table(text)
    for metric in (*SUMMARY_METRICS, CMP):
        assert metric in columns, f"column {metric} not shown:\n{text}"
    assert "ner_depth" in rows, text  # the study run, expanded ...
    for arm_id, metrics in ARMS.items():  # ... over its arm runs
        assert arm_id in rows, f"arm run {arm_id} not shown:\n{text}"
        for key, value in metrics.items():
            assert rows[arm_id][key] == f"{value:g}", f"{arm_id} {key}:\n{text}"
    assert not any("seed=" in name for name in rows), f"trial rows should stay collapsed:\n{text}"
