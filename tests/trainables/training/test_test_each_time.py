"""`eval_test_each_time` (issue 47, items 1 and 4): a trial also scores test at every evaluation,
as `eval_test_<score>`, and changes nothing else it reports. Scored at the kept weights, the
per-evaluation test F1 is the final `test_f1`: the tabular benchmark and the checkpoint
measurement (bench/search_tabular.py) read the curve as if either checkpoint had been kept."""

from __future__ import annotations

import math

import pytest

from trainables.settings import SYNTHETIC, TAGGER, TrialConfig, evaluation_metrics
from trainables.training.trials import new_trial

SURFACE = {SYNTHETIC: {"steps_per_epoch": 10, "noise": 0.02}}


def _evaluations(settings: dict) -> list[dict]:
    return list(new_trial(TrialConfig.from_dict(settings)).run())


def _same_except_test_curve(off: list[dict], on: list[dict]) -> None:
    """Everything the trial reported without the setting, it reports with it, unchanged."""
    assert len(off) == len(on)
    for plain, with_test in zip(off, on, strict=True):
        assert not any(k.startswith("eval_test_") for k in plain)
        timing = {"train_tokens_per_s", "dynamics_s"}
        for key, value in plain.items():
            if key not in timing and not key.endswith("_s"):
                assert with_test[key] == pytest.approx(value, abs=0, nan_ok=True), key


def test_the_tagger_scores_test_at_every_evaluation(trial_settings):
    settings = trial_settings | {"dynamics": "off"}
    off = _evaluations(settings)
    on = _evaluations(settings | {"eval_test_each_time": True})
    _same_except_test_curve(off, on)
    assert len(on) >= 2
    assert all({"eval_test_f1", "eval_test_loss"} <= set(m) for m in on)
    # the last evaluation's weights are the kept ones (no until_plateau): the same score
    assert on[-1]["eval_test_f1"] == on[-1]["test_f1"]
    assert on[-1]["eval_test_loss"] == on[-1]["test_loss"]
    assert len({m["eval_test_f1"] for m in on}) > 1  # a curve, not one value repeated


def test_the_synthetic_trial_scores_test_at_every_evaluation_and_at_the_kept_step():
    plateau = {"until_plateau": {"patience": 2, "min_delta": 0.5, "max_epochs": 4}}
    settings = {"trainable": SURFACE, "lr": 3e-5, "eval_every": 5, "seed": 7, "budget": plateau}
    off = _evaluations(settings)
    on = _evaluations(settings | {"eval_test_each_time": True})
    _same_except_test_curve(off, on)
    final = on[-1]
    kept = [m for m in on if m["step"] == final["best_step"]]
    assert len(kept) == 1 and kept[0] is not final  # stopped after its kept evaluation
    assert kept[0]["eval_test_f1"] == final["test_f1"]
    assert final["eval_test_f1"] != final["test_f1"]
    # F rises along the curve, the test draw is one per trial: the curve rises with F
    steps = [m["eval_test_f1"] for m in on]
    assert steps == sorted(steps) and steps[0] < steps[-1]
    assert all(math.isclose(m["eval_test_loss"], 1 - m["eval_test_f1"]) for m in on)


@pytest.mark.parametrize("trainable", [TAGGER, SYNTHETIC])
def test_no_study_metric_can_be_a_test_score(trainable):
    assert not [m for m in evaluation_metrics(trainable, ["other"]) if "test" in m]


def test_the_setting_is_one_value_per_study():
    from trainables.settings import FIXED_ONLY

    assert "records" in FIXED_ONLY["eval_test_each_time"]
