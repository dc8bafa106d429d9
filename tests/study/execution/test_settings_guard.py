"""A setting that only a trial can judge (it needs the data read and tokenised) stops the
study at its first trial, in one line at the study file's line, with nothing reported
(study/execution/settings_guard.py)."""

from __future__ import annotations

import logging
import sys

import pytest
from ray.exceptions import RayTaskError

from study.execution.settings_guard import (
    TUNE_CONTROLLER_LOGGER,
    HideRefusedTraceback,
    SettingsRefused,
    refused_input,
    refused_settings_line,
)
from study.spec import load_study
from tests.study_helpers import driver_tracebacks, run_study, runs_by_kind, write_study
from trainables.errors import ConfigError, DataError, TrainingDiverged, first_line
from trainables.settings.budget import BudgetError

# patience 2 is within max_epochs 2, so the file passes its checks; at eval_every 1000 the
# tiny corpus's 2 epochs hold 1 evaluation, which only a trial that read the data can count
REFUSED = {"until_plateau": {"patience": 2, "max_epochs": 2}}
REASON = "2 is not allowed: max_epochs (2) hold only 1 dev evaluation(s)"


def _as_ray_delivers(cause: BaseException) -> BaseException:
    """The error Tune holds for a trial that raised `cause`: Ray's task error made an
    instance of the cause's class."""
    try:
        raise cause
    except type(cause):
        traceback = "Traceback (most recent call last): ..."
    return RayTaskError("train_tagger", traceback, cause).as_instanceof_cause()


def test_a_refused_setting_is_found_in_the_error_ray_delivers_and_a_divergence_is_not():
    budget = BudgetError(("until_plateau", "patience"), REASON)
    assert refused_input(_as_ray_delivers(budget)) is not None
    assert refused_input(_as_ray_delivers(TrainingDiverged("loss became nan"))) is None
    assert refused_input(None) is None
    found = refused_input(_as_ray_delivers(ConfigError("trial setting lr=-1 is not allowed")))
    assert type(found) is ConfigError and first_line(found) == "trial setting lr=-1 is not allowed"
    # a file a trial cannot read may be its node's problem: Tune retries it, as before
    assert refused_input(_as_ray_delivers(DataError("extra.conll: no such file"))) is None


def test_tunes_traceback_of_a_refused_setting_is_dropped_and_others_kept():
    def record(err: BaseException) -> logging.LogRecord:
        return logging.LogRecord(TUNE_CONTROLLER_LOGGER, logging.ERROR, __file__, 1,
                                 "Trial task failed", (), (type(err), err, None))  # fmt: skip

    hide = HideRefusedTraceback()
    assert not hide.filter(record(_as_ray_delivers(BudgetError(("until_plateau",), "no"))))
    assert hide.filter(record(_as_ray_delivers(TrainingDiverged("loss became nan"))))


@pytest.mark.parametrize("section", ["fixed", "grid", "profile"])
def test_the_line_points_at_the_budget_where_the_study_file_writes_it(
    section, tmp_path, tiny_model, tiny_corpus
):
    fixed = {"epochs": 4, "batch_size": 16, "max_length": 32, "eval_every": 1000}
    study = {"fixed": {**fixed, "budget": REFUSED}}
    if section == "grid":
        study = {"fixed": fixed, "grid": {"depth": ["full", "full-1"], "budget": [REFUSED]}}
    if section == "profile":
        study = {"fixed": fixed, "profiles": {"default": {"fixed": {"budget": REFUSED}}}}
    path = write_study(tmp_path, str(tiny_model), tiny_corpus, **study)
    spec = load_study(str(path))
    budget = BudgetError(("until_plateau", "patience"), REASON)
    refused = SettingsRefused("depth=3", budget, REFUSED)
    lines = path.read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.strip() == "patience: 2")
    shown = {"fixed": "fixed.budget", "grid": "grid.budget[0]"}.get(
        section, "profiles.default.fixed.budget"
    )
    assert refused_settings_line(spec, [], refused) == (
        f"{path}:{line}: {shown}.until_plateau.patience: {REASON} (found by a trial "
        "of arm depth=3 once it had read its data)"
    )


@pytest.mark.study
def test_a_setting_a_trial_refuses_ends_the_study_in_one_line_and_reports_nothing(
    tmp_path, tiny_model, tiny_corpus
):
    fixed = {"epochs": 4, "batch_size": 16, "max_length": 32, "eval_every": 1000}
    # max_failures 1, as the shipped studies have: the guard ends the study at the first
    # failure, which is not said to run again
    study = write_study(tmp_path, str(tiny_model), tiny_corpus, max_failures=1,
                        fixed={**fixed, "budget": REFUSED})  # fmt: skip
    done = run_study(study, tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    line = study.read_text().splitlines().index("      patience: 2") + 1
    assert last.startswith(f"error: {study}:{line}: fixed.budget.until_plateau.patience: {REASON}")
    output = done.stdout + done.stderr
    assert not driver_tracebacks(output) and "BudgetError" not in output, output[-3000:]
    assert "running it again" not in output, output[-3000:]
    assert not (tmp_path / "reports").exists()
    runs = runs_by_kind(tmp_path)
    (study_run,) = runs["study"]
    assert (study_run.info.status, study_run.data.tags["state"]) == ("FAILED", "refused_settings")
    found = [r for r in runs["trial"] if r.info.status == "FAILED"]  # the trial that found it
    assert len(found) == 1 and found[0].data.tags["status"] == "errored"
    assert "trial setting budget.until_plateau.patience" in found[0].data.tags["error"]
    stopped = [r.info.status for r in runs["trial"] if r not in found]  # stopped with it
    assert stopped and set(stopped) == {"KILLED"}, stopped


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
