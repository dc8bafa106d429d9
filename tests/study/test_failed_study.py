"""A study that runs but cannot be reported ends in one line and exit code 1, with every
MLflow run it opened closed as FAILED: one whose every trial failed (the line names the first
trial's error), and one that Ray Tune stopped (here Tune's own refusal of a result without
the study metric, which the driver's check of the metric otherwise refuses before any trial:
that check is switched off in the driver's process for this test)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from study.command_line import EXIT_FAILED
from tests.study_helpers import (
    REPO,
    driver_tracebacks,
    runs_by_kind,
    study_command,
    write_synthetic_study,
)

pytestmark = pytest.mark.study

QUICK = {"steps_per_epoch": 4}
TWO_TRIALS = {"seeds": 1, "phases": {"confirm": {"select": [{}], "seeds": 1}}}
# the driver without its check of the metric name (study/spec/build.py), as `python -m study.run`
WITHOUT_METRIC_CHECK = (
    "import sys; import study.spec.build as build; build._check_reported = lambda *a: None; "
    "from study.run import command; sys.argv[0] = 'study.run'; sys.exit(command())"
)


def _run(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)


def _error_lines(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("error: ")]


def _assert_every_run_failed(tmp) -> None:
    runs = runs_by_kind(tmp)
    assert runs["trial"], runs
    for kind in ("study", "arm", "trial"):
        assert {r.info.status for r in runs[kind]} == {"FAILED"}, kind
    assert runs["study"][0].data.tags["state"] == "failed"
    assert not (tmp / "reports").exists()


def test_a_study_whose_every_trial_failed_exits_1_naming_the_first_error(tmp_path):
    fixed = {"epochs": 2, "lr": 5.0e-5, "fail_at_step": 2}
    study = write_synthetic_study(tmp_path, QUICK, fixed=fixed, **TWO_TRIALS)
    done = _run(study_command(study, tmp_path))
    assert done.returncode == EXIT_FAILED, done.stderr[-3000:]
    (line,) = _error_lines(done)
    assert line.startswith("error: the study failed: every trial failed; the first, [confirm] arm ")
    assert "with: RuntimeError: injected failure at step 2 (fail_at_step); no report made" in line
    _assert_every_run_failed(tmp_path)
    study_run = runs_by_kind(tmp_path)["study"][0]
    assert "injected failure at step 2" in study_run.data.tags["error"]


def test_a_study_that_tune_stopped_exits_1_in_one_line_with_its_runs_failed(tmp_path):
    study = write_synthetic_study(
        tmp_path, QUICK, metric={"name": "dev_f1x", "mode": "max"}, **TWO_TRIALS
    )
    command = study_command(study, tmp_path)
    command = [sys.executable, "-c", WITHOUT_METRIC_CHECK, *command[3:]]
    done = _run(command)
    assert done.returncode == EXIT_FAILED, done.stderr[-3000:]
    (line,) = _error_lines(done)
    assert line.startswith(
        "error: the study failed: ValueError: Trial returned a result which did not include "
        "the specified metric(s) `dev_f1x`"
    ), line
    assert not driver_tracebacks(done.stdout + done.stderr)
    _assert_every_run_failed(tmp_path)
