"""The Python API (`from study import run_study, load_trials, load_verdicts`): the tables read
back against what MLflow and the report hold, bad input raised rather than exited, and the
caller's process left as it was. Its page's code runs as it stands on a real smoke study in
tests/test_install.py, from the installed package."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from study import UserInputError, load_trials, load_verdicts, run_study
from study.run import main
from tests.study_helpers import import_stages, runs_by_kind, tracking_uri


@pytest.mark.study
def test_the_tables_are_the_trials_in_mlflow_and_the_reports_comparisons(finished_study):
    tmp, _ = finished_study
    trials = load_trials(tracking_uri(tmp), "teststudy")
    runs = runs_by_kind(tmp)
    assert sorted(trials.run_id) == sorted(r.info.run_id for r in runs["trial"])
    assert {"arm", "phase", "sample", "seed", "status", "lr", "depth", "dev_f1"} <= set(trials)
    verdicts = load_verdicts(tracking_uri(tmp), "teststudy", runs["study"][0].info.run_id)
    written = pd.read_csv(tmp / "reports" / "teststudy" / "comparisons.csv")
    assert len(verdicts) == len(written) > 0
    shown = ["metric", "arm_a", "arm_b", "primary", "outcome", "verdict"]
    assert verdicts[shown].astype(str).values.tolist() == written[shown].astype(str).values.tolist()
    assert verdicts["diff"].tolist() == pytest.approx(written["diff"].tolist(), nan_ok=True)


def test_bad_input_raises_and_leaves_the_process_as_it_was(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = dict(os.environ)
    with pytest.raises(UserInputError, match="did you mean 'epochs'"):
        run_study("ner_depth", "smoke", {"fixed.epochz": 2})
    with pytest.raises(UserInputError, match="drop --resume"):
        run_study("ner_depth", resume=True, dry_run=True)
    assert dict(os.environ) == before  # the driver's settings were put back
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_overrides_as_a_mapping_are_the_commands_set_options(capsys):
    sets = ["fixed.epochs=2", "grid.depth=[full, full-2]", "seeds=3"]
    main(["ner_depth", "--profile", "smoke", "--dry-run", *(f"--set={text}" for text in sets)])
    typed = capsys.readouterr().out
    overrides = {"fixed.epochs": 2, "grid.depth": ["full", "full-2"], "seeds": 3}
    outcome = run_study("ner_depth", "smoke", overrides, dry_run=True)
    assert capsys.readouterr().out == typed and "depth=2" in typed
    assert (outcome.study, outcome.run_id) == ("ner_depth", None)


def test_import_study_loads_nothing_and_the_readers_load_no_ray():
    """A notebook that only reads a study never pays for Ray (nor torch, until ASO runs)."""
    stages = import_stages()
    assert stages["import study"]["ours"] == ["study"], stages["import study"]
    readers = stages["readers"]["heavy"]
    assert [m for m in ("ray", "torch") if m in readers] == [], readers
