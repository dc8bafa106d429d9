"""How bench/search_reference.py splits the dense grid's missing points into study runs: one
run per chunk of learning rates, over every arm while the arms miss the same ones, else per
arm; each run handed over as it ends, so the bench caches it before the next one trains.
(The bench end to end: tests/study/search/test_search_efficiency_bench.py.)"""

from __future__ import annotations

import math

import pandas as pd
import pytest
import search_reference

from study.plan import Arm


@pytest.fixture(scope="module")
def reference():
    return search_reference


ARMS = [Arm(0, {"depth": 5}), Arm(1, {"depth": 6})]
LRS = [1e-5, 3e-5, 1e-4, 3e-4, 1e-3]


def _build(reference, missing, lrs_per_run):
    """The runs build_missing asks for, as (grid override or None, lrs), in order."""
    asked = []

    def run(overrides: dict) -> str:
        lrs = [point["lr"] for point in overrides["phases"]["confirm"]["select"]]
        assert overrides["phases"]["confirm"]["seeds"] == [1000, 1001]
        asked.append((overrides.get("grid"), lrs))
        return f"run{len(asked)}"

    ids = reference.build_missing(ARMS, missing, [1000, 1001], run, lrs_per_run)
    assert ids == [f"run{k + 1}" for k in range(len(asked))]
    return asked


def test_one_lr_per_run_over_every_arm(reference):
    asked = _build(reference, {"depth=5": LRS, "depth=6": LRS}, 1)
    assert asked == [(None, [lr]) for lr in LRS]


def test_chunks_of_lrs_and_all_in_one_run(reference):
    both = {"depth=5": LRS, "depth=6": LRS}
    assert _build(reference, both, 2) == [(None, LRS[:2]), (None, LRS[2:4]), (None, LRS[4:])]
    assert _build(reference, both, None) == [(None, LRS)]


def test_arms_missing_different_lrs_run_apart(reference):
    """After an interruption one arm may have more cached than the other."""
    asked = _build(reference, {"depth=5": LRS[3:], "depth=6": LRS[4:]}, 1)
    assert asked == [
        ({"depth": [5]}, [LRS[3]]),
        ({"depth": [5]}, [LRS[4]]),
        ({"depth": [6]}, [LRS[4]]),
    ]
    assert _build(reference, {"depth=5": [], "depth=6": []}, 1) == []


def _trials(*rows):
    """Cached grid trials: (arm, lr, seed, status, dev_f1)."""
    names = ["arm", "lr", "seed", "status", "dev_f1"]
    table = pd.DataFrame([dict(zip(names, row, strict=True)) for row in rows])
    return table.assign(test_f1=table.dev_f1 - 0.1, epoch=2.0)


def test_a_point_with_a_failed_seed_is_missing_until_trained_again(reference):
    seeds = [1000, 1001]
    first = _trials(
        ("depth=5", 1e-4, 1000, "completed", 0.5), ("depth=5", 1e-4, 1001, "error", None),
        ("depth=6", 1e-4, 1000, "completed", 0.6), ("depth=6", 1e-4, 1001, "completed", 0.62),
    )  # fmt: skip
    missing = reference.missing_points(ARMS, [1e-4], first, seeds)
    assert missing == {"depth=5": [1e-4], "depth=6": []}
    curve = reference.curves(first, [1e-4], "dev_f1", "test_f1", seeds)
    five = curve[curve.arm == "depth=5"].iloc[0]
    assert five.seeds_completed == 1 and math.isnan(five.dev) and math.isnan(five.test)
    assert curve[curve.arm == "depth=6"].iloc[0].dev == pytest.approx(0.61)

    again = pd.concat([first, _trials(("depth=5", 1e-4, 1000, "completed", 0.5),
                                      ("depth=5", 1e-4, 1001, "completed", 0.54))])  # fmt: skip
    assert reference.missing_points(ARMS, [1e-4], again, seeds) == {"depth=5": [], "depth=6": []}
    curve = reference.curves(again, [1e-4], "dev_f1", "test_f1", seeds)
    five = curve[curve.arm == "depth=5"].iloc[0]
    # one trial per seed: the retrained seed's completed trial, the first seed counted once
    assert five.seeds_completed == 2 and five.dev == pytest.approx(0.52)
    assert five.trial_epochs == pytest.approx(4.0)


def test_trials_of_other_seeds_never_count(reference):
    trials = _trials(
        ("depth=5", 1e-4, 7, "completed", 0.9), ("depth=5", 1e-4, 1000, "completed", 0.5)
    )
    assert reference.missing_points(ARMS[:1], [1e-4], trials, [1000, 1001]) == {"depth=5": [1e-4]}
