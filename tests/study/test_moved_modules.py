"""Studies saved before the driver's modules moved still resume.

Ray Tune pickles a phase's searcher, scheduler and callbacks by module path into the
experiment (`tuner.pkl`, `searcher-state-*.pkl`). A study started before study/search/ and
study/execution/ existed names `study.scheduling.ArmSearcher` there, and so on; these tests
save objects under those names the way Tune does and load them in a fresh interpreter."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest
import ray.cloudpickle

from study._moved import MOVED
from study.execution import SpaceReserve, StudyStore
from study.execution.context import PhaseContext
from study.execution.rounds import run_confirm_rounds
from study.execution.storage_guard import StorageGuard
from study.execution.tuner import trials_at_once
from study.plan import make_plan
from study.search import ArmAwareASHA, ArmSearcher, LimitedFIFO, PlannedSearcher, SampleRecord
from study.spec import load_study
from tests.study_helpers import REPO, write_study

# every class of ours in the saved state of a smoke study run by the code before the move
SAVED_BY_OLD_CODE = [
    ("study.scheduling", ArmSearcher),
    ("study.scheduling", ArmAwareASHA),
    ("study.scheduling", PlannedSearcher),
    ("study.scheduling", LimitedFIFO),
    ("study.scheduling", SampleRecord),
    ("study.storage_guard", StorageGuard),
]


@pytest.fixture
def spec(tmp_path, tiny_model, tiny_corpus):
    return load_study(str(write_study(tmp_path, str(tiny_model), tiny_corpus)), "default")


@pytest.mark.parametrize(("old", "cls"), SAVED_BY_OLD_CODE, ids=lambda v: getattr(v, "__name__", v))
def test_an_old_name_is_the_moved_class(old, cls):
    assert getattr(importlib.import_module(old), cls.__name__) is cls


def test_the_other_old_modules_answer_with_their_new_code():
    assert importlib.import_module("study.phases").PhaseContext is PhaseContext
    assert importlib.import_module("study.phases").trials_at_once is trials_at_once
    assert importlib.import_module("study.rounds").run_confirm_rounds is run_confirm_rounds
    assert importlib.import_module("study.storage").StudyStore is StudyStore
    assert importlib.import_module("study.saved_state").SpaceReserve is SpaceReserve
    with pytest.raises(AttributeError, match="moved"):
        importlib.import_module("study.scheduling").NoSuchThing  # noqa: B018


def test_every_new_module_an_old_name_points_at_exists_and_no_old_file_is_left():
    for old, targets in MOVED.items():
        assert not REPO.joinpath(*old.split(".")).with_suffix(".py").exists(), old
        for target in targets:
            importlib.import_module(target)


def test_an_old_name_is_imported_only_when_asked_for():
    """`import study` costs nothing; even `import study.scheduling` waits for an attribute."""
    code = (
        "import sys, study.scheduling\n"
        "print(sorted(m for m in ('ray', 'torch', 'optuna', 'study.search') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


LOAD = """
import json, pickle, sys
with open(sys.argv[1], "rb") as src:
    saved = pickle.load(src)  # what Tune's restore does with tuner.pkl (cloudpickle output)
searcher, scheduler, guard = saved["search_alg"], saved["scheduler"], saved["callbacks"][0]
searcher.restore(sys.argv[2])  # what Tune does with searcher-state-*.pkl
sample = searcher.samples["depth=3#0"]
print(json.dumps({
    "types": [f"{type(o).__module__}.{type(o).__name__}"
              for o in (searcher, scheduler, guard, sample)],
    "shared": scheduler._searcher is searcher,
    "reports": {str(k): v for k, v in sample.reports.items()},
    "next": searcher.suggest("t9")["study"],
}))
"""


def test_state_saved_under_the_old_names_resumes(spec, tmp_path, monkeypatch):
    searcher = ArmSearcher(spec, make_plan(spec).arms)
    scheduler = ArmAwareASHA(searcher)
    first = [searcher.suggest(f"t{i}") for i in range(3)]
    searcher.decide(first[0]["study"], {"step": 10, "epoch": 1.0, "dev_loss": 0.5})
    for old, cls in SAVED_BY_OLD_CODE:  # as the code before the move defined them
        importlib.import_module(old)  # a class pickles by reference only from a loaded module
        monkeypatch.setattr(cls, "__module__", old)
    tuner_pkl, state_pkl = tmp_path / "tuner.pkl", tmp_path / "searcher-state.pkl"
    tuner_pkl.write_bytes(
        ray.cloudpickle.dumps(
            {"search_alg": searcher, "scheduler": scheduler, "callbacks": [StorageGuard()]}
        )
    )
    searcher.save(str(state_pkl))
    monkeypatch.undo()
    for saved in (tuner_pkl.read_bytes(), state_pkl.read_bytes()):
        assert b"study.scheduling" in saved and b"study.search" not in saved

    done = subprocess.run(
        [sys.executable, "-c", LOAD, str(tuner_pkl), str(state_pkl)],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["types"] == [
        "study.search.explore.ArmSearcher",
        "study.search.schedulers.ArmAwareASHA",
        "study.execution.storage_guard.StorageGuard",
        "study.search.record.SampleRecord",
    ]
    assert loaded["shared"]  # the scheduler still asks the restored searcher's book
    assert loaded["reports"] == {"0": {"10": [1.0, 0.5]}}
    assert loaded["next"] == searcher.suggest("t9")["study"]  # goes on where it stopped
