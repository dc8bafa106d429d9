"""The MLflow UI, in a real headless browser, shows a study's arm runs and their summaries,
and renders its report.

The store a real (tiny-model) study and its report filled is copied to `outputs/mlflow.db` of
a folder and served there by the README's own `mlflow ui` line (a free port for its 5000), on
loopback; the runs table is screenshotted (tmp_path/runs.png) and its text checked against
the arm runs' metrics; the study run's `report/report.html` is opened in the artifact view
and what its frame shows is checked against the report's Markdown. The browser tests skip,
with the reason, without chromium or playwright; the server's check does not.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from mlflow_server import LOOPBACK_OPENER, stop_group, wait_answering  # bench/mlflow_server.py
from servers import free_port  # bench/servers.py

from tests.mlflow_artifact_view import capture_html_artifact
from tests.mlflow_ui import SUMMARY_METRICS, browser_unavailable_reason, capture_runs_table
from tests.study_helpers import REPO, runs_by_kind

pytestmark = pytest.mark.study


def parse_table(text: str) -> tuple[list[str], dict[str, dict[str, str]]]:
    header, *lines = text.splitlines()
    columns = header.split("\t")
    rows = {}
    for line in lines:
        cells = dict(zip(columns, line.split("\t"), strict=False))
        rows[cells["Run Name"]] = cells
    return columns, rows


def readme_ui_line() -> str:
    """The README's `mlflow ui` command as a person types it, less `./with-venv`."""
    lines = (REPO / "README.md").read_text().splitlines()
    (line,) = [x for x in lines if x.startswith("./with-venv mlflow ui ")]
    return line.removeprefix("./with-venv ")


@pytest.fixture(scope="module")
def readme_ui(finished_study, tmp_path_factory):
    """The finished study's folder and the README's `mlflow ui` line serving a copy of its
    store from `outputs/mlflow.db` (where a study keeps it), for every test here: they only
    read it. Yields once the UI answers HTTP; its whole session is stopped after."""
    study, _ = finished_study
    folder = tmp_path_factory.mktemp("readme")
    (folder / "outputs").mkdir()
    shutil.copy(study / "mlflow.db", folder / "outputs" / "mlflow.db")
    port = free_port()
    argv = shlex.split(readme_ui_line().replace("--port 5000", f"--port {port}"))
    assert argv[0] == "mlflow" and f"--port {port}" in " ".join(argv), argv
    argv[0] = str(Path(sys.executable).parent / "mlflow")
    with open(folder / "ui.log", "wb") as log:
        server = subprocess.Popen(argv, cwd=folder, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)  # fmt: skip
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_answering(server, f"{base_url}/", folder / "ui.log", timeout=180)
        yield study, base_url
    finally:  # `mlflow ui` and its server's workers stop together
        stop_group(server, grace=60)


def test_the_readme_command_serves_the_study(readme_ui):
    """The README's line, run as written in a folder with the study's store at
    `outputs/mlflow.db`, serves it: its REST API lists the study's experiment and its runs."""
    study, base_url = readme_ui
    request = urllib.request.Request(
        f"{base_url}/api/2.0/mlflow/experiments/get-by-name?experiment_name=teststudy"
    )
    with LOOPBACK_OPENER.open(request, timeout=30) as answer:
        experiment = json.load(answer)["experiment"]
    body = json.dumps({"experiment_ids": [experiment["experiment_id"]], "max_results": 1000})
    search = urllib.request.Request(f"{base_url}/api/2.0/mlflow/runs/search", body.encode(),
                                    headers={"Content-Type": "application/json"})  # fmt: skip
    with LOOPBACK_OPENER.open(search, timeout=30) as answer:
        served = {run["info"]["run_id"] for run in json.load(answer)["runs"]}
    stored = {run.info.run_id for runs in runs_by_kind(study).values() for run in runs}
    assert served == stored and stored


@pytest.fixture(scope="module")
def ui(readme_ui):
    """The README's UI, for the tests that drive it in a headless browser."""
    reason = browser_unavailable_reason()
    if reason:
        pytest.skip(f"no headless browser for the MLflow UI check: {reason}")
    return readme_ui


def test_runs_table_shows_arm_summary_runs_and_metrics(ui, tmp_path):
    study, base_url = ui
    arms = {r.data.tags["arm"]: r.data.metrics for r in runs_by_kind(study)["arm"]}
    cmp = "cmp/depth_2_vs_3/dev_loss/diff"  # written by the report on arm A's run
    assert cmp in arms["depth=2"]
    shot = tmp_path / "runs.png"
    text = capture_runs_table(base_url, "teststudy", shot, metrics=(*SUMMARY_METRICS, cmp))

    assert shot.stat().st_size > 10_000, "screenshot missing or blank"
    columns, rows = parse_table(text)
    for metric in (*SUMMARY_METRICS, cmp):
        assert metric in columns, f"column {metric} not shown:\n{text}"
    assert "teststudy/default" in rows, text  # the study run, expanded over its arm runs
    for arm, metrics in arms.items():
        assert arm in rows, f"arm run {arm} not shown:\n{text}"
        for metric in SUMMARY_METRICS:  # the UI rounds to three decimals
            assert float(rows[arm][metric]) == pytest.approx(metrics[metric], abs=1e-3), text
    assert float(rows["depth=2"][cmp]) == pytest.approx(arms["depth=2"][cmp], abs=1e-3), text
    assert not any("seed" in name for name in rows), text  # trial runs stay folded


def test_the_report_renders_as_a_page_in_the_artifact_view(ui, tmp_path):
    study, base_url = ui
    run = runs_by_kind(study)["study"][0].info
    page = (study / "reports" / "teststudy" / "README.md").read_text()
    shot = tmp_path / "report_html.png"
    artifact = "report/report.html"
    view = capture_html_artifact(base_url, run.experiment_id, run.run_id, artifact, shot)

    assert shot.stat().st_size > 10_000, "screenshot missing or blank"
    assert view.text.startswith("Study report: teststudy (profile default)"), view.text[:300]
    for heading in ("Declared analysis", "What the data show", "Per-arm results",
                    "Extra evaluation sets (zero-shot transfer)", "Plots"):  # fmt: skip
        assert f"\n{heading}" in view.text, heading
    # rendered, not shown as source: each Markdown table a table, each figure a picture
    assert view.tables == page.count("\n|---") > 3
    assert view.images == page.count("![") == view.drawn > 3
    assert "|---|" not in view.text and "![" not in view.text and "**" not in view.text
