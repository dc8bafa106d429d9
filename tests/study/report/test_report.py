"""The study report, made from the MLflow store a real (tiny-model) study filled."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from study import report
from study.report import plots
from study.report.__main__ import main as report_main
from tests.study_helpers import REPO, in_process, runs_by_kind, tracking_uri

pytestmark = pytest.mark.study
FILES = ["README.md", "report.html", "trials.csv", "arms.csv", "comparisons.csv",
         "learning_curves.csv", "lr_vs_f1.png", "learning_curves.png", "seeds.png",
         "label_maps.csv"]  # fmt: skip
FAST_ASO = {"num_samples": 100, "num_bootstrap_iterations": 100}


def _confirm_values(runs, arm: str, metric: str) -> dict[int, float]:
    return {
        int(r.data.tags["seed"]): r.data.metrics[metric]
        for r in runs["trial"]
        if r.data.tags["arm"] == arm and r.data.tags["phase"] == "confirm"
    }


def test_study_run_writes_the_report_and_logs_it(finished_study):
    tmp, done = finished_study
    folder = tmp / "reports" / "teststudy"
    assert all((folder / name).is_file() for name in FILES)
    assert f"report: {folder / 'README.md'}" in done.stdout
    text = (folder / "README.md").read_text()
    for section in ("## Declared analysis", "## What the data show", "## What ran",
                    "## Per-arm results", "## Verdicts (primary metric)",
                    "## Exploratory comparisons", "## What a reader asks next",
                    "### Reproducibility", "![seeds](seeds.png)",
                    "![expected_max](expected_max.png)"):  # fmt: skip
        assert section in text
    # the analysis the driver recorded before any trial ran is the one the report applies
    assert "primary metric **dev_loss**, margin **±0.01**" in text
    assert "Explore seeds [0, 1]; confirm seeds [2, 3]. No seed that chose" in text
    study_run = runs_by_kind(tmp)["study"][0]
    artifacts = MlflowClient(tracking_uri(tmp)).list_artifacts(study_run.info.run_id, "report")
    assert {f"report/{name}" for name in FILES} <= {a.path for a in artifacts}
    comparisons = pd.read_csv(folder / "comparisons.csv")
    assert study_run.data.metrics["comparisons"] == len(comparisons)
    assert set(comparisons.metric) >= {"dev_f1", "test_f1", "shifted_f1", "curve_area", "dev_loss"}


def test_extra_eval_sets_are_tabulated_per_arm(finished_study):
    tmp, _ = finished_study
    folder = tmp / "reports" / "teststudy"
    text = (folder / "README.md").read_text()
    section = text.split("## Extra evaluation sets (zero-shot transfer)")[1].split("## ")[0]
    assert "| arm | renamed F1 | shifted F1 |" in section
    assert "`depth=3`" in section and "`depth=2`" in section
    arms = pd.read_csv(folder / "arms.csv").set_index("arm")
    runs = runs_by_kind(tmp)
    for arm in ("depth=3", "depth=2"):
        values = _confirm_values(runs, arm, "shifted_f1")
        assert arms.loc[arm, "shifted_f1_mean"] == pytest.approx(statistics.fmean(values.values()))


def test_label_maps_say_what_each_cross_domain_score_was_computed_on(finished_study):
    tmp, _ = finished_study
    text = (tmp / "reports" / "teststudy" / "README.md").read_text()
    section = text.split("## Extra evaluation sets (zero-shot transfer)")[1].split("\n## ")[0]
    completed = [r for r in runs_by_kind(tmp)["trial"] if r.data.tags["status"] == "completed"]
    names = ("renamed_entities", "renamed_entities_mapped", "renamed_entities_dropped")
    counts = {tuple(r.data.metrics[n] for n in names) for r in completed}
    assert len(counts) == 1  # facts of the data: every trial reports the same
    entities, mapped, dropped = (int(v) for v in counts.pop())
    assert mapped > 0 and dropped > 0 and mapped + dropped == entities
    scored = f"{entities - dropped} ({(entities - dropped) / entities:.0%})"
    assert f"| renamed | {entities} | {mapped} | {dropped} | {scored} |" in section
    assert "| shifted |" not in section  # a set without a label map has no row
    assert not any("shifted_entities" in r.data.metrics for r in completed)


def test_the_html_page_is_the_markdown_page_with_its_figures_inside(finished_study):
    tmp, _ = finished_study
    folder = tmp / "reports" / "teststudy"
    text, page = (folder / "README.md").read_text(), (folder / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<h1>Study report: <code>teststudy</code>" in page
    assert page.count("<table>") == text.count("\n|---") > 3
    figures = text.count("![")
    assert page.count('<img src="data:image/png;base64,') == figures > 3
    assert page.count("src=") == figures  # no link to a file the artifact view cannot load


def test_arm_runs_carry_summaries_that_trace_back_to_trial_runs(finished_study):
    tmp, _ = finished_study
    runs = runs_by_kind(tmp)
    arms = {r.data.tags["arm"]: r for r in runs["arm"]}
    assert set(arms) == {"depth=3", "depth=2"}
    for arm, run in arms.items():
        test_f1 = _confirm_values(runs, arm, "test_f1")
        assert run.data.metrics["n_seeds"] == len(test_f1) == 2
        assert run.data.metrics["f1_mean"] == pytest.approx(statistics.fmean(test_f1.values()))
        assert run.data.metrics["f1_std"] == pytest.approx(statistics.stdev(test_f1.values()))
    # depth 2 (listed later in the grid) is A: its run holds the comparison with depth 3
    a, b = (_confirm_values(runs, arm, "dev_loss") for arm in ("depth=2", "depth=3"))
    diff = statistics.fmean(a[s] - b[s] for s in a)
    metrics = arms["depth=2"].data.metrics
    assert metrics["cmp/depth_2_vs_3/dev_loss/diff"] == pytest.approx(diff)
    for name in ("ci_low", "ci_high", "p_holm", "p_equivalence", "eps_min"):
        assert f"cmp/depth_2_vs_3/dev_loss/{name}" in metrics
    recorded = json.loads(runs["study"][0].data.tags["analysis"])
    assert (recorded["primary"], recorded["looks"], recorded["seed_order"]) == (
        "dev_loss", [2], [2, 3])  # fmt: skip
    assert not any(k.startswith("cmp/") for k in arms["depth=3"].data.metrics)


def test_report_command_rebuilds_into_a_chosen_folder(finished_study, tmp_path):
    tmp, _ = finished_study
    argv = ["teststudy", "--tracking-uri", tracking_uri(tmp), "--out", str(tmp_path / "r")]
    out = in_process(report_main, argv)  # the command's main, without a process's imports
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"report: {tmp_path / 'r' / 'README.md'}")
    arms = pd.read_csv(tmp_path / "r" / "arms.csv")
    assert list(arms.arm) == ["depth=3", "depth=2"]  # plan order
    trials = pd.read_csv(tmp_path / "r" / "trials.csv")
    assert set(trials.lr) <= {1.0e-6, 3.0e-3}  # the searched factor, not the lr metric
    # made again once the arm runs carry their summaries: the same trial table as the first
    first = tmp / "reports" / "teststudy" / "trials.csv"
    assert (tmp_path / "r" / "trials.csv").read_bytes() == first.read_bytes()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no_such_study"], "error: no MLflow experiment named 'no_such_study'"),
        (["teststudy", "--run-id", "0" * 32], "error: --run-id 0000"),
    ],
)
def test_report_bad_input_is_one_line(finished_study, tmp_path, args, message):
    tmp, _ = finished_study
    out = subprocess.run(
        [sys.executable, "-m", "study.report", *args, "--tracking-uri", tracking_uri(tmp),
         "--out", str(tmp_path / "r")],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.startswith(message) and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_report_without_a_store_says_so(tmp_path):
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    out = subprocess.run(
        [sys.executable, "-m", "study.report", "x", "--tracking-uri", missing],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 2 and "no MLflow store at" in out.stderr
    assert not (tmp_path / "none.db").exists()


def test_a_failed_report_leaves_the_previous_one_whole(finished_study, tmp_path, monkeypatch):
    tmp, _ = finished_study
    folder = tmp_path / "r"
    uri = tracking_uri(tmp)
    report.write_report(uri, "teststudy", folder, aso=FAST_ASO)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    def broken(*_args, **_kwargs):
        raise RuntimeError("disk full while drawing")

    monkeypatch.setattr(plots, "seed_distributions", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        report.write_report(uri, "teststudy", folder, aso=FAST_ASO)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["r"]  # no staging folder left behind


def test_reading_a_study_leaves_the_process_tracking_uri_alone(finished_study, monkeypatch):
    """MLflow's set_tracking_uri also writes MLFLOW_TRACKING_URI into os.environ; a report
    built in a Python session must not point that session's later studies at its store."""
    from study.tracking.reading import load_study_record

    tmp, _ = finished_study
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    record = load_study_record(tracking_uri(tmp), "teststudy")
    assert len(record.trials) and "MLFLOW_TRACKING_URI" not in os.environ
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////somewhere/else.db")
    load_study_record(tracking_uri(tmp), "teststudy")
    assert os.environ["MLFLOW_TRACKING_URI"] == "sqlite:////somewhere/else.db"
