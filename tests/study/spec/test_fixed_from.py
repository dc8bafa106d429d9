"""`fixed_from`: a study declares which study, on which seeds, chose one of its fixed values;
every mistake in it is one line naming the file, the line and the field."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from study.names import FIXED_FROM_TAG
from study.spec import load_study
from study.tracking.start import open_study_runs
from study.tracking.store import StudyTracker
from tests.study.spec.study_files import one_line_error_test, write

pytestmark = pytest.mark.usefixtures("offline")

SOURCE = {"study": "ner_depth", "seeds": [0, 1]}

BAD = [
    ("not a mapping", {"fixed_from": ["lr"]}, "fixed_from: ['lr'] is not allowed: a mapping",
     "fixed_from:"),
    ("not a fixed setting", {"fixed_from": {"batch_sise": SOURCE}},
     "fixed_from.batch_sise: 'batch_sise' is not a setting under fixed (did you mean "
     "'batch_size'?); fixed settings: epochs, batch_size", "batch_sise:"),
    ("unknown key", {"fixed_from": {"epochs": {**SOURCE, "seed": [0]}}},
     "fixed_from.epochs.seed: unknown key 'seed' for fixed_from (did you mean 'seeds'?)",
     "seed:"),
    ("no study", {"fixed_from": {"epochs": {"seeds": [0]}}},
     "fixed_from.epochs.study: None is not allowed: the name of the study", "epochs:"),
    ("no seeds", {"fixed_from": {"epochs": {"study": "ner_depth", "seeds": []}}},
     "fixed_from.epochs.seeds: [] is not allowed: a list of the seeds", "seeds: []"),
    ("negative seed", {"fixed_from": {"epochs": {"study": "x", "seeds": [0, -1]}}},
     "fixed_from.epochs.seeds[1]: -1 is not allowed: a seed, >= 0", "- -1"),
    ("repeated seed", {"fixed_from": {"epochs": {"study": "x", "seeds": [1, 1]}}},
     "fixed_from.epochs.seeds[1]: 1 is not allowed: it repeats", "- 1"),
]  # fmt: skip

test_fixed_from_errors_are_one_line = one_line_error_test(BAD)


def test_fixed_from_is_read_and_a_profile_can_remove_it(tmp_path, study):
    study["fixed_from"] = {"batch_size": SOURCE}
    study["profiles"]["smoke"].update(fixed_from=None)
    path = str(write(tmp_path, study))
    assert load_study(path).fixed_from == {"batch_size": SOURCE}
    assert load_study(path, "smoke").fixed_from == {}


def test_the_shipped_ner_intermediate_declares_where_its_lr_came_from():
    spec = load_study("ner_intermediate", resolve_model_layers=False)
    assert spec.fixed_from == {"lr": {"study": "ner_depth", "seeds": [0, 1]}}
    assert set(spec.fixed_from["lr"]["seeds"]) <= set(spec.confirm.seeds)


def test_the_study_run_records_fixed_from_for_the_report(tmp_path, study):
    study["fixed_from"] = {"batch_size": SOURCE}
    spec = load_study(str(write(tmp_path, study)))
    tracker = StudyTracker(f"sqlite:///{tmp_path / 'mlflow.db'}", spec.name)
    plan = SimpleNamespace(summary=lambda: "plan", arms=[])
    run, _ = open_study_runs(tracker, spec, plan, "i", "default")
    tags = tracker.client.get_run(run).data.tags
    assert json.loads(tags[FIXED_FROM_TAG]) == {"batch_size": SOURCE}
