"""Faults inside a real study: a trial that raises, and one whose loss diverges. Each is
retried `max_failures` times, then recorded as errored with its reason; the study goes on,
its report lists them, and no NaN reaches the statistics.

On the synthetic twin of the tiny model (docs/testing.md): these are the study's machinery
(Ray's retries, the tracking callback's records, the report), and the synthetic trainable
raises the tagger's two errors (`fail_at_step`, and a TrainingDiverged above `diverge_above`);
that the tagger itself raises them on a real model is tests/trainables/training/test_train.py's
`test_exploding_loss_ends_the_trial_with_a_clear_error` and
`test_injected_failure_raises_at_that_step`."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from tests.study_helpers import TWIN_SURFACE, run_study, runs_by_kind, write_synthetic_twin

pytestmark = pytest.mark.study


@pytest.fixture(scope="module")
def faulty_study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faulty")
    study = write_synthetic_twin(
        tmp,
        # lr 1e30 is far above the twin's optimum: its trials diverge, as the tiny model's do
        trainable={"synthetic": {**TWIN_SURFACE, "diverge_above": 3.0}},
        grid={"fail_at_step": [None, 5], "lr": [1.0e-3, 1.0e30]},
        search=None,
        metric={"name": "dev_f1", "mode": "max"},
        fixed={"epochs": 2, "batch_size": 16, "max_length": 32},
        phases={"confirm": {"select": [{}], "seeds": 2}},
        max_failures=1,
    )
    done = run_study(study, tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp, done


def _by_arm(tmp) -> dict[str, list]:
    out: dict[str, list] = {}
    for run in runs_by_kind(tmp)["trial"]:
        out.setdefault(run.data.tags["arm"], []).append(run)
    return out


def test_failing_trials_are_retried_then_errored_with_their_reason(faulty_study):
    tmp, _ = faulty_study
    arms = _by_arm(tmp)
    assert {r.data.tags["status"] for r in arms["fail_at_step=None,lr=0.001"]} == {"completed"}
    injected = arms["fail_at_step=5,lr=0.001"]
    assert len(injected) == 2
    for run in injected:
        assert run.data.tags["status"] == "errored" and run.info.status == "FAILED"
        assert "injected failure at step 5 (fail_at_step)" in run.data.tags["error"]
        assert run.data.tags["failures"] == "2"  # the first attempt and max_failures = 1 retry
    for run in arms["fail_at_step=None,lr=1e+30"]:
        assert run.data.tags["status"] == "errored"
        assert "loss became" in run.data.tags["error"]
        assert "the trial's results are invalid" in run.data.tags["error"]
    study_run = runs_by_kind(tmp)["study"][0]
    assert study_run.data.tags["state"] == "finished"  # the study went on to the end


def test_each_failed_attempt_is_one_line_without_a_traceback(faulty_study):
    """Tune would log each failed attempt with the worker's whole traceback: the study says
    it in one line, and the trial's end names its error's message."""
    _, done = faulty_study
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "Trials did not complete" not in done.stderr  # Tune's list, in its own trial ids
    assert "TrainingDiverged" not in done.stderr  # the message; its class is in MLflow's tag
    retried = [line for line in done.stderr.splitlines() if "trial attempt 1 of at most 2" in line]
    assert len(retried) == 6, done.stderr[-3000:]  # the 6 failing trials' first attempts
    assert all("running it again from its last checkpoint" in line for line in retried)
    # the lr 1e30 arms diverge at their first step, before a failure injected at step 5
    assert sum("injected failure at step 5" in line for line in retried) == 2
    assert sum("loss became nan" in line for line in retried) == 4
    errored = [line for line in done.stderr.splitlines() if "(errored: " in line]
    assert len(errored) == 6 and sum("loss became nan" in line for line in errored) == 4


def test_report_lists_errored_trials_and_keeps_nan_out_of_statistics(faulty_study):
    tmp, _ = faulty_study
    folder = tmp / "reports" / "teststudy"
    text = (folder / "README.md").read_text()
    assert "Errored trials (retried up to `max_failures`, then recorded):" in text
    assert text.count("injected failure at step 5") >= 2 and "loss became" in text
    comparisons = pd.read_csv(folder / "comparisons.csv")
    assert len(comparisons) and (comparisons.n == 0).all()  # every pair has an errored arm
    for row in comparisons.itertuples():
        assert math.isnan(row.diff) and "0 paired seed(s)" in row.note
    arms = pd.read_csv(folder / "arms.csv").set_index("arm")
    assert arms.loc["fail_at_step=5,lr=0.001", "n_seeds"] == 0
    assert arms.loc["fail_at_step=None,lr=0.001", "n_seeds"] == 2
