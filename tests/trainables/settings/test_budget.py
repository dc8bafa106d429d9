"""Budgets on the tiny model (trainables/settings/budget.py): `steps` runs exactly N optimizer steps
whatever the data fraction; `until_plateau` stops when dev stops improving, reports test on
the best evaluation's weights and resumes exactly; every trial reports what it spent and its
final gain; bad budgets are one line."""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest
import yaml

from trainables import __main__ as command_line
from trainables.errors import ConfigError
from trainables.settings.budget import (
    BudgetError,
    Plateau,
    PlateauWatch,
    evaluations_per_epoch,
)
from trainables.settings.config import TrialConfig
from trainables.settings.stage_config import StageError
from trainables.training.curves import final_gain
from trainables.training.metrics import is_wall_clock
from trainables.training.train import Trial

PLATEAU = {"until_plateau": {"patience": 2, "min_delta": 0.02, "max_epochs": 10}}


def run_all(trial: Trial) -> list[dict]:
    return [{k: v for k, v in m.items() if not is_wall_clock(k)} for m in trial.run()]


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a
    )


@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_a_step_budget_runs_exactly_its_steps_at_any_data_fraction(trial_settings, fraction):
    settings = trial_settings | {"budget": {"steps": 30}, "data_fraction": fraction}
    trial = Trial(TrialConfig.from_dict(settings | {"eval_every": None}))
    history = run_all(trial)
    final = history[-1]
    assert final["steps_run"] == final["step"] == trial.step == 30
    per_epoch = trial.batches_per_epoch  # 12 or 6: the data cycles through further epochs
    assert [m["step"] for m in history] == [*range(per_epoch, 30, per_epoch), 30]
    assert final["lr"] == 0.0  # the linear schedule spans the 30 steps
    assert final["tokens_seen"] > 0


def test_without_a_budget_a_trial_reports_what_it_spent(trial_settings):
    trial = Trial(TrialConfig.from_dict(trial_settings))
    history = run_all(trial)
    final = history[-1]
    assert final["steps_run"] == trial.total_steps == 24  # 2 epochs of 12 batches
    windows = trial.train_split.windows
    assert final["tokens_seen"] == 2 * sum(len(w) for w in windows)  # no padding counted
    assert final["final_gain"] == final_gain([m["dev_f1"] for m in history])
    assert final["plateau_stopped"] == 0.0  # no until_plateau: it ran its epochs


def test_final_gain_follows_the_study_metric_and_its_mode(trial_settings):
    settings = trial_settings | {"metric": {"name": "dev_loss", "mode": "min"}}
    history = run_all(Trial(TrialConfig.from_dict(settings)))
    losses = [m["dev_loss"] for m in history]
    tail = losses[len(losses) - max(2, math.ceil(len(losses) / 3)) :]  # the last third
    slope = np.polyfit(np.arange(len(tail)), tail, 1)[0]  # an independent least-squares line
    expected = -slope * (len(tail) - 1)  # how far the fitted loss came down over the window
    assert history[-1]["final_gain"] == final_gain(losses, "min")
    assert final_gain(losses, "min") == pytest.approx(expected, abs=1e-12)
    assert final_gain(losses, "max") == pytest.approx(-expected, abs=1e-12)


def plateau_settings(trial_settings: dict) -> dict:
    return trial_settings | {"budget": PLATEAU}


def test_until_plateau_stops_and_reports_test_on_the_best_weights(trial_settings, tmp_path):
    trial = Trial(TrialConfig.from_dict(plateau_settings(trial_settings)))
    history = []
    for metrics in trial.run():
        history.append(metrics)
        trial.save(tmp_path / str(int(metrics["evaluation"])))  # each evaluation's weights
    final = history[-1]
    assert final["steps_run"] < trial.total_steps  # stopped before max_epochs
    best = int(final["best_evaluation"])
    curve = trial.eval_f1  # as trained; the final result's dev_f1 is the kept weights'
    # patience 2: the two evaluations after the best gained no more than min_delta
    assert len(history) == best + 2
    assert all(f - curve[best - 1] <= 0.02 for f in curve[best:])
    assert final["dev_f1"] == curve[best - 1]
    # the final test score is that of the weights saved at the best evaluation
    again = Trial(TrialConfig.from_dict(plateau_settings(trial_settings)))
    again.restore(tmp_path / str(best))
    scored = again.score("test")
    assert (final["test_f1"], final["test_loss"]) == (scored["test_f1"], scored["test_loss"])
    assert final["final_gain"] == final_gain(trial.eval_f1)  # the curve as trained
    assert final["plateau_stopped"] == 1.0


def test_until_plateau_resumes_exactly(trial_settings, tmp_path):
    config = TrialConfig.from_dict(plateau_settings(trial_settings))
    expected = run_all(Trial(config))
    first = Trial(config)
    for metrics in first.run():  # stop one evaluation before the end: patience half spent
        if metrics["evaluation"] == len(expected) - 1:
            break
    assert first.watch.waited == 1 and first.best_weights is not None
    first.save(tmp_path)
    resumed = Trial(config)
    resumed.restore(tmp_path)
    assert resumed.watch.state() == first.watch.state()
    assert same(run_all(resumed)[-1], expected[-1])


def test_a_patience_longer_than_the_evaluations_is_refused_when_the_data_is_known(
    trial_settings,
):
    budget = {"until_plateau": {"patience": 30, "max_epochs": 2}}  # 24 steps: 4 evaluations
    with pytest.raises(ConfigError, match=r"budget\.until_plateau\.patience: 30 is not allowed"):
        Trial(TrialConfig.from_dict(trial_settings | {"budget": budget}))


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({"steps": 0}, "budget.steps: 0 is not allowed: an integer >= 1"),
        ({"steps": -5}, "budget.steps: -5 is not allowed"),
        ({"steps": 2.5}, "budget.steps: 2.5 is not allowed"),
        ({"stepz": 5}, "budget.stepz: unknown budget kind 'stepz' (did you mean 'steps'?)"),
        ({"steps": 5, "until_plateau": {}}, "budget: {'steps': 5, 'until_plateau': {}} is not"),
        (100, "budget: 100 is not allowed: one of {steps: 600}"),
        ({"until_plateau": {"patience": 3, "max_epochs": 2}},
         "budget.until_plateau.patience: 3 is not allowed: dev is evaluated once per epoch"),
        ({"until_plateau": {"patience": 0, "max_epochs": 2}},
         "budget.until_plateau.patience: 0 is not allowed"),
        ({"until_plateau": {"patience": 1, "max_epochs": 2, "min_delta": -0.1}},
         "budget.until_plateau.min_delta: -0.1 is not allowed"),
        ({"until_plateau": {"patience": 1}}, "budget.until_plateau.max_epochs: max_epochs is"),
        ({"until_plateau": {"patience": 1, "max_epochs": 2, "patient": 1}},
         "unknown until_plateau key 'patient' (did you mean 'patience'?)"),
    ],
)  # fmt: skip
def test_a_bad_budget_is_one_config_error(budget, message):
    with pytest.raises(ConfigError) as raised:
        TrialConfig.from_dict({"budget": budget})
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_the_command_line_takes_a_budget_and_refuses_a_bad_one(trial_settings, tmp_path, capsys):
    config = tmp_path / "trial.yaml"
    config.write_text(yaml.safe_dump(trial_settings))
    assert command_line.main(["--config", str(config), "--set", "budget={steps: 7}"]) == 0
    assert "steps 7 " in capsys.readouterr().out
    out = tmp_path / "metrics.jsonl"
    argv = ["--config", str(config), "--metrics-out", str(out), "--set", "budget={steps: 0}"]
    assert command_line.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: trial setting budget.steps: 0 is not allowed: an integer >= 1"
    assert not out.exists()  # nothing written


@pytest.mark.parametrize(
    "error",
    [
        BudgetError(("until_plateau", "patience"), "3 is not allowed:\n  more than 2"),
        StageError((0, "budget", "steps"), "0 is not allowed"),
    ],
    ids=["budget", "stage"],
)
def test_a_setting_error_survives_the_copy_and_pickle_that_carry_it_to_the_driver(error):
    """Ray copies a trial's error in the trial's process and unpickles it in the driver's; an
    error rebuilt with the wrong arguments reached the driver as an unrelated TypeError."""
    for rebuilt in (copy.copy(error), pickle.loads(pickle.dumps(error))):
        assert type(rebuilt) is type(error)
        assert (rebuilt.path, rebuilt.reason, str(rebuilt)) == (
            error.path, error.reason, str(error)
        )  # fmt: skip


def _stop_index(values, window, patience, min_delta):
    """Where the smoothed rule stops, computed independently: the trailing means with numpy,
    the first index at which `patience` means in a row failed to beat the best by min_delta."""
    import numpy as np

    means = np.convolve(values, np.ones(window) / window, mode="valid")
    best, waited = -np.inf, 0
    for i, mean in enumerate(means):
        if mean - best > min_delta:
            best, waited = mean, 0
        else:
            waited += 1
            if waited >= patience:
                return i + window - 1
    return None


def test_the_plateau_rule_judges_the_average_over_an_epoch_not_one_evaluation():
    """One dip in an otherwise rising curve stopped the old rule; the averaged rule trains on,
    and stops where its average (computed here with numpy) stops rising."""
    rng = __import__("numpy").random.default_rng(3)
    rising = [0.40 + 0.2 * (1 - 0.7**i) + rng.normal(0, 0.01) for i in range(12)]
    values = [*rising[:4], rising[4] - 0.05, *rising[5:], *([rising[-1]] * 6)]
    plateau = Plateau(patience=2, max_epochs=20, min_delta=0.005)
    for window in (1, 2, 3):
        watch = PlateauWatch(plateau, "max", window)
        stopped_at = None
        for i, value in enumerate(values):
            watch.update(value, step=10 * i, evaluation=i)
            if watch.stop:
                stopped_at = i
                break
        assert stopped_at == _stop_index(values, window, 2, 0.005), window
    single = PlateauWatch(plateau, "max", 1)
    averaged = PlateauWatch(plateau, "max", 3)
    for watch in (single, averaged):
        for i, value in enumerate(values[:7]):
            watch.update(value, 10 * i, i)
    assert averaged.waited < single.waited  # the dip counts against one evaluation at a time


def test_the_smoothed_watch_survives_a_checkpoint():
    plateau = Plateau(patience=3, max_epochs=9, min_delta=0.0)
    watch = PlateauWatch(plateau, "min", 3)
    for i, value in enumerate([1.0, 0.9, 0.8, 0.85]):
        watch.update(value, 5 * i, i)
    again = PlateauWatch(plateau, "min", 1)
    again.load(watch.state())
    assert (again.window, again.recent, again.best, again.waited) == (
        watch.window,
        watch.recent,
        watch.best,
        watch.waited,
    )
    old = PlateauWatch(plateau, "min", 3)
    old.load([0.7, 10.0, 2.0, 1.0])  # a checkpoint written before the average existed
    assert (old.best, old.best_step, old.waited, old.window) == (0.7, 10, 1, 3)


def test_evaluations_per_epoch():
    assert evaluations_per_epoch(105, 53) == 2
    assert evaluations_per_epoch(105, None) == 1
    assert evaluations_per_epoch(10, 53) == 1
