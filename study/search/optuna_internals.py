"""Every use the search package makes of Optuna beyond its public API.

A sample's seeds are told to Optuna after the fact (study/search/explore.py) and mirrored
into an Optuna storage as they go (study/search/optuna_storage.py). Two things needed for
that have no public form, so they are done here and nowhere else; an Optuna upgrade that
changes either breaks this module only, and tests/study/search/test_optuna_contract.py pins
each against the installed Optuna and fails, naming it, when one no longer holds.

The assumptions:
- a `FrozenTrial` read from a study or its storage carries its storage id as `_trial_id`,
  the id the storage's public `set_trial_*` methods take (`trial_id`);
- `optuna.trial.Trial(study, trial_id)` is a live handle on an existing trial, through which
  `report(value, step)` records an intermediate value before the trial is told (`live_trial`:
  a pruned sample's rung means go in before `study.tell(..., PRUNED)`).
"""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial


def trial_id(trial: FrozenTrial) -> int:
    """The storage id of a trial read back from a study or a storage."""
    return trial._trial_id


def live_trial(study: optuna.Study, trial: FrozenTrial) -> optuna.trial.Trial:
    """A handle on an existing, not yet told trial, to `report` intermediate values to."""
    return optuna.trial.Trial(study, trial_id(trial))
