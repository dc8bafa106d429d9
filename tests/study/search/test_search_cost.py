"""bench/search_cost.py: the trial-epochs its estimate counts. A `steps` budget is counted at the
stated figure's steps per epoch, not as the `epochs` setting study.plan stands in for it (the
grid trained to 840 steps was estimated at 3 epochs a trial, 2.9 h instead of 7.6)."""

from __future__ import annotations

import math

import pytest
import search_cost  # bench/search_cost.py

from study.preflight import checked_data
from study.spec import load_study
from tests.study_helpers import REPO

NER_DEPTH = str(REPO / "search_spaces" / "ner_depth.yaml")


@pytest.mark.parametrize(
    ("overrides", "epochs"),
    [
        ([], 8.0),  # the search profile: until_plateau, max_epochs 8
        (["fixed.budget={steps: 840}"], 840 / search_cost.STEPS_PER_EPOCH),
        (["fixed.budget={steps: 210}"], 2.0),
        (["fixed.budget=null", "fixed.epochs=5"], 5.0),
    ],
)
def test_the_longest_trial_in_trial_epochs(overrides, epochs):
    spec = load_study(NER_DEPTH, "search", overrides=overrides)
    assert search_cost.longest_trial(spec) == pytest.approx(epochs)


def test_the_stated_steps_per_epoch_are_the_default_trials():
    """The figure is a default-profile trial's epoch: its training sentences in its batches."""
    spec = load_study(NER_DEPTH, "default")
    train = int(checked_data(spec, []).split()[0])  # "1676 train / 359 dev / ..."
    assert math.ceil(train / spec.fixed["batch_size"]) == search_cost.STEPS_PER_EPOCH
