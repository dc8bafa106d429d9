"""The MLflow UI, in a real headless browser, shows a study's arm runs and their summaries,
and renders its report.

The store a real (tiny-model) study and its report filled is served by `mlflow server` on
loopback; the runs table is screenshotted (tmp_path/runs.png) and its text checked against
the arm runs' metrics; the study run's `report/report.html` is opened in the artifact view
and what its frame shows is checked against the report's Markdown. Skipped, with the reason,
without chromium or playwright.
"""

from __future__ import annotations

import pytest
from mlflow_server import mlflow_ui_server

from tests.mlflow_artifact_view import capture_html_artifact
from tests.mlflow_ui import SUMMARY_METRICS, browser_unavailable_reason, capture_runs_table
from tests.study_helpers import runs_by_kind, tracking_uri

pytestmark = pytest.mark.study


def parse_table(text: str) -> tuple[list[str], dict[str, dict[str, str]]]:
    header, *lines = text.splitlines()
    columns = header.split("\t")
    rows = {}
    for line in lines:
        cells = dict(zip(columns, line.split("\t"), strict=False))
        rows[cells["Run Name"]] = cells
    return columns, rows


@pytest.fixture(scope="module")
def ui(finished_study, tmp_path_factory):
    """The finished study's folder and one `mlflow server` on its store, for both tests: they
    only read it."""
    reason = browser_unavailable_reason()
    if reason:
        pytest.skip(f"no headless browser for the MLflow UI check: {reason}")
    study, _ = finished_study
    workdir = tmp_path_factory.mktemp("server")
    with mlflow_ui_server(tracking_uri(study), workdir=workdir) as base_url:
        assert base_url.startswith("http://127.0.0.1:")
        yield study, base_url


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
