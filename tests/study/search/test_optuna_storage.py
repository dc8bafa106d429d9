"""Each arm's explore samples in an Optuna RDB storage, readable with `optuna.load_study`: one
trial per sample with its curve, updated in place as the sample runs, never added twice when
the same state is written again (a resumed driver). A whole study's storage is checked in
tests/study/test_study_run.py."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from study.search import optuna_storage
from study.search.optuna_storage import check_storage, default_storage, write_arm
from study.search.record import SampleRecord
from trainables.errors import UserInputError

LR = {"lr": CategoricalDistribution([1e-6, 3e-3])}


def sample(index: int, lr: float) -> SampleRecord:
    return SampleRecord("depth=3", index, {"lr": lr}, index, (0, 1))


def write(url: str, *samples: SampleRecord) -> list:
    write_arm(url, "s/default-1/explore/depth=3", "minimize", samples, LR)
    return optuna.load_study(study_name="s/default-1/explore/depth=3", storage=url).trials


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path}/optuna.db"


def restart() -> None:
    """What a new driver process starts with: nothing remembered of earlier writes."""
    optuna_storage._written.clear()


def test_samples_become_trials_with_their_curves(url):
    first, second = sample(0, 3e-3), sample(1, 1e-6)
    (trial,) = write(url, first)
    assert trial.state == TrialState.RUNNING and trial.params == {"lr": 3e-3}
    first.rung_means += [(1.0, 1.2), (2.0, 0.9)]
    first.outcome, first.final, first.told = (
        {0: "completed", 1: "completed"},
        {0: 0.8, 1: 1.0},
        True,
    )
    second.rung_means.append((1.0, 1.9))
    second.outcome, second.told, second.stopped_at = {0: "pruned", 1: "pruned"}, True, 1.0
    done, pruned = write(url, first, second)
    assert done.state == TrialState.COMPLETE and done.value == pytest.approx(0.9)
    assert done.intermediate_values == {0: 1.2, 1: 0.9}
    assert done.user_attrs["seed_outcomes"] == {"0": "completed", "1": "completed"}
    assert pruned.state == TrialState.PRUNED and pruned.intermediate_values == {0: 1.9}


def test_writing_the_same_state_again_adds_nothing(url):
    first = sample(0, 3e-3)
    write(url, first)
    restart()
    first.rung_means.append((1.0, 1.2))
    assert len(write(url, first)) == 1
    restart()
    trials = write(url, first, sample(1, 1e-6))
    assert [t.user_attrs["sample"] for t in trials] == [0, 1]
    assert trials[0].intermediate_values == {0: 1.2}


def test_a_sample_asked_again_with_other_values_supersedes_the_stale_trial(url):
    write(url, sample(0, 3e-3))
    restart()
    stale, fresh = write(url, sample(0, 1e-6))
    assert stale.state == TrialState.FAIL and stale.user_attrs["superseded"] is True
    assert fresh.state == TrialState.RUNNING and fresh.params == {"lr": 1e-6}


def test_where_the_storage_goes_by_default():
    assert default_storage("sqlite:////data/mlflow.db", "/r") == "sqlite:////data/optuna.db"
    assert default_storage("http://host:5000", "/r/ray_results") == (
        "sqlite:////r/ray_results/optuna.db"
    )
    assert default_storage("http://host:5000", "s3://bucket/x") is None


def test_a_storage_url_that_cannot_work_is_refused(tmp_path):
    check_storage(f"sqlite:///{tmp_path}/optuna.db")
    with pytest.raises(UserInputError, match="not a database URL"):
        check_storage("optuna.db")
    with pytest.raises(UserInputError, match="does not exist"):
        check_storage(f"sqlite:///{tmp_path}/missing/optuna.db")
