"""What the study's search relies on in Optuna beyond its public API, checked against the
installed Optuna: each assumption listed in study/search/optuna_internals.py has a test here,
so an Optuna upgrade that breaks one fails by name instead of mirroring samples wrongly."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from study.search.optuna_internals import live_trial, trial_id

LR = {"lr": FloatDistribution(1e-5, 1e-3, log=True)}


@pytest.fixture
def storage() -> optuna.storages.BaseStorage:
    return optuna.storages.InMemoryStorage()


@pytest.fixture
def study(storage) -> optuna.Study:
    return optuna.create_study(storage=storage, direction="maximize")


def test_a_frozen_trial_names_its_storage_id(study, storage):
    """`FrozenTrial._trial_id` is what the storage's public setters take."""
    study.ask(LR)
    study.ask(LR)
    frozen = study.trials[1]
    try:
        ident = trial_id(frozen)
    except AttributeError:
        pytest.fail("optuna's FrozenTrial no longer has _trial_id: update optuna_internals")
    stored = storage.get_trial(ident)
    assert stored.number == frozen.number, "FrozenTrial._trial_id no longer is its storage id"
    storage.set_trial_user_attr(ident, "seen", True)
    assert study.trials[1].user_attrs == {"seen": True}


def test_a_live_handle_reports_to_an_existing_trial_before_it_is_told(study):
    """`Trial(study, trial_id)` binds an existing trial; `report` records intermediate values
    that stay once the trial is told pruned."""
    study.ask(LR)
    try:
        handle = live_trial(study, study.trials[0])
    except TypeError as err:
        pytest.fail(f"optuna.trial.Trial(study, trial_id) no longer works: {err}")
    handle.report(0.4, 0)
    handle.report(0.5, 1)
    study.tell(0, state=TrialState.PRUNED)
    (told,) = study.trials
    assert told.state == TrialState.PRUNED
    assert told.intermediate_values == {0: 0.4, 1: 0.5}, (
        "Trial(study, trial_id).report no longer records on the existing trial"
    )
