"""The tracking callback against a real MLflow sqlite store whose client fails on purpose at the
worst moments: a write the store kept but whose answer was lost, a write refused outright, and
params refused right after the run was created. Whatever fails is written once, in the end."""

from __future__ import annotations

import pickle
from collections import Counter

import pytest
from mlflow.tracking import MlflowClient

from study.analysis import Analysis
from study.names import DRIVERS_TAG, WALL_TAG
from study.tracking import MAX_BATCH, StudyTracker, result_batches
from study.tracking.callback import WALL_EVERY_S, MlflowTrackingCallback, converged
from study.tracking.start import DriverTime
from tests.study_helpers import TrialStandIn
from trainables.training.curves import FINAL_GAIN_RULE


class FlakyClient:
    """The real client, except that the next calls named in `faults` fail: 'lost' runs the call
    and then raises (the server stored it and died before answering), 'refused' raises first."""

    def __init__(self, client: MlflowClient):
        self.client = client
        self.faults: list[tuple[str, str]] = []  # (method, "lost" | "refused"), in order

    def __getattr__(self, name: str):
        real = getattr(self.client, name)

        def call(*args, **kwargs):
            if self.faults and self.faults[0][0] == name:
                _, kind = self.faults.pop(0)
                if kind == "lost":
                    real(*args, **kwargs)
                raise ConnectionError(f"{name}: connection reset by peer ({kind})")
            return real(*args, **kwargs)

        return call


@pytest.fixture
def callback(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = StudyTracker(uri, "study")
    study_run = tracker.study_run("inv", "study", {}, {})
    arm_run = tracker.arm_run(study_run, "depth=2", {"depth": 2})
    cb = MlflowTrackingCallback(uri, "study", study_run, {"depth=2": arm_run})
    flaky = FlakyClient(tracker.client)
    tracker.client = flaky
    cb._tracker = tracker
    return cb, flaky


def _trial(trial_id: str = "t1") -> TrialStandIn:
    study = {"arm": "depth=2", "phase": "explore", "sample": 0, "seed": 0}
    return TrialStandIn(
        trial_id=trial_id, config={"study": study, "trial": {"lr": 1e-3, "depth": 2}}
    )


def _history(cb, trial, key: str = "dev_f1") -> list[int]:
    run_id = cb._runs[trial.trial_id]
    return [m.step for m in cb.tracker.client.client.get_metric_history(run_id, key)]


def _report(cb, trial, step: int) -> None:
    result = {"step": step, "dev_f1": step / 100, "dev_loss": 1.0, "node_id": "n1"}
    cb.on_trial_result(0, [], trial, result)


def _back_online(cb) -> None:
    cb._flush(force=True)
    assert not cb._pending


@pytest.mark.parametrize("kind", ["lost", "refused"])
def test_a_result_whose_write_failed_is_written_once(callback, kind):
    cb, flaky = callback
    trial = _trial()
    cb.on_trial_start(0, [], trial)
    _report(cb, trial, 6)
    flaky.faults = [("log_batch", kind)]
    _report(cb, trial, 12)
    assert len(cb._pending) == 1  # queued for the next try
    _report(cb, trial, 18)  # the server is still down: waits behind it, in order
    _back_online(cb)
    assert _history(cb, trial) == [6, 12, 18]
    run = cb.tracker.client.get_run(cb._runs[trial.trial_id])
    assert run.data.tags["ray_node_id"] == "n1"


@pytest.mark.parametrize("kind", ["lost", "refused"])
def test_params_sent_with_the_first_result_survive_its_failed_write(callback, kind):
    cb, flaky = callback
    trial = _trial()
    cb.on_trial_start(0, [], trial)
    flaky.faults = [("log_batch", kind)]  # the first log_batch: the params and the first result
    _report(cb, trial, 6)
    assert cb._pending
    _back_online(cb)
    run = cb.tracker.client.get_run(cb._runs[trial.trial_id])
    assert run.data.params["lr"] == "0.001" and run.data.params["arm"] == "depth=2"
    assert _history(cb, trial) == [6]
    runs = cb.tracker.client.search_runs([cb.tracker.experiment_id], "tags.run_kind = 'trial'")
    assert len(runs) == 1  # found again, not created twice


def test_a_trial_ending_before_any_result_gets_its_params_with_its_end(callback):
    cb, flaky = callback
    trial = _trial()
    trial.last_result, trial.num_failures, trial.error_msg = {}, 1, "boom"
    cb.on_trial_start(0, [], trial)
    calls = Counter()
    real = flaky.client.log_batch
    flaky.client.log_batch = lambda *a, **k: (calls.update(["log_batch"]), real(*a, **k))[1]
    cb.on_trial_error(0, [], trial)
    run = cb.tracker.client.get_run(cb._runs[trial.trial_id])
    assert run.data.params["lr"] == "0.001" and run.data.tags["status"] == "errored"
    assert calls["log_batch"] == 1  # params and end tags in one request
    assert run.info.status == "FAILED"


def test_a_restored_trial_re_reporting_logged_steps_adds_nothing(callback):
    cb, _ = callback
    trial = _trial()
    for step in (6, 12):
        _report(cb, trial, step)
    restored = _trial("t1")  # a new driver: no memory of what was logged or made
    cb._runs.clear()
    cb._logged_step.clear()
    cb.tracker.created.clear()
    for step in (6, 12, 18):
        _report(cb, restored, step)
    assert _history(cb, restored) == [6, 12, 18]


def test_result_batches_put_layers_at_their_index_and_fit_mlflow_limits():
    final = {"step": 30, "final": True, "test_f1": 0.5, "dyn/cka/0": 1.0, "dyn/cka/1": 0.9}
    ((metrics, tags),) = result_batches(final, 30, node="n1")
    by_key = Counter((m.key, m.step) for m in metrics)
    assert by_key == {("step", 30): 1, ("test_f1", 30): 1, ("dyn_cka", 0): 1, ("dyn_cka", 1): 1}
    assert [(t.key, t.value) for t in tags] == [("ray_node_id", "n1")]

    middle = {"step": 6, "dev_f1": 0.1, "dyn/cka/1": 0.9, "nan": float("nan")}
    ((metrics, _),) = result_batches(middle, 6)
    assert {m.key for m in metrics} == {"step", "dev_f1", "dyn_cka_L1"}
    assert {m.step for m in metrics} == {6}

    many = {f"m{i:04d}": float(i) for i in range(2 * MAX_BATCH)}
    batches = result_batches(many, 1, node="n1")
    assert all(len(m) + len(t) <= MAX_BATCH for m, t in batches)
    assert sum(len(m) for m, _ in batches) == 2 * MAX_BATCH
    assert [len(t) for _, t in batches] == [1, 0, 0]


def test_a_staged_trials_results_are_logged_under_their_stage_prefixes():
    """An intermediate stage's result carries its metrics as stage<i>_...: logged as they are,
    at the trial's step; the target's final result carries each stage's layer dynamics,
    logged per layer like the target's own."""
    stage = {"stage": 0.0, "step": 12, "stage0_step": 12, "stage0_dev_f1": 0.4,
             "stage0_final": 1.0, "stage0_head_kept": 0.0}  # fmt: skip
    ((metrics, _),) = result_batches(stage, 12)
    assert {(m.key, m.step) for m in metrics} == {(k, 12) for k in stage}
    final = {"step": 30, "final": True, "dev_f1": 0.5, "intermediate_steps": 12.0,
             "dyn/l2_sum/0": 2.0, "dyn/stage0_l2_sum/0": 1.0,
             "dyn/stage0_l2_sum/1": 1.5}  # fmt: skip
    ((metrics, _),) = result_batches(final, 30)
    assert {(m.key, m.step) for m in metrics} >= {
        ("intermediate_steps", 30), ("dyn_l2_sum", 0), ("dyn_stage0_l2_sum", 0),
        ("dyn_stage0_l2_sum", 1),
    }  # fmt: skip


@pytest.mark.parametrize(
    ("gain", "plateau", "tag"),
    [
        (0.004, 0.005, "true"),
        (0.006, 0.005, "false"),
        (0.006, 0.01, "true"),
        (None, 0.005, "false"),
    ],
)
def test_a_completed_trial_is_tagged_converged_by_the_declared_plateau(
    callback, gain, plateau, tag
):
    cb, _ = callback
    cb.analysis = Analysis(plateau=plateau)
    trial = _trial()
    final = {"step": 12, "final": 1.0, "dev_f1": 0.5}
    trial.last_result = final | ({"final_gain": gain} if gain is not None else {})
    trial.num_failures = 0
    cb.on_trial_complete(0, [], trial)
    run = cb.tracker.client.get_run(cb._runs[trial.trial_id])
    assert run.data.tags["converged"] == tag and run.data.tags["status"] == "completed"
    assert run.data.tags["final_gain_rule"] == FINAL_GAIN_RULE  # the report trusts its gain


def test_a_callback_pickled_without_an_analysis_uses_the_default_plateau():
    callback = MlflowTrackingCallback("sqlite:///x.db", "s", "run-1", {"arm": "a1"})
    del callback.analysis  # as one saved with a Tuner before the analysis was kept on it
    assert converged(callback, {"final_gain": 0.004}) and not converged(callback, {})
    # until_plateau's patience ended it: a recorded fact, not convergence; the curve decides
    assert not converged(callback, {"final_gain": 0.2, "plateau_stopped": 1.0})
    assert not converged(callback, {"final_gain": 0.2, "plateau_stopped": 0.0})
    assert converged(callback, {"final_gain": 0.001, "plateau_stopped": 0.0})


def test_the_study_runs_wall_time_is_written_once_a_minute_while_trials_run(callback):
    """A killed driver writes nothing when it dies: what it wrote while trials ran is what
    its time counts. The next driver adds its own to that, and its clock is not pickled."""
    cb, _ = callback
    cb.driver_time = DriverTime({WALL_TAG: "100", DRIVERS_TAG: "1"})  # a killed driver's 100 s

    def recorded() -> tuple[float, str]:
        tags = cb.tracker.tags(cb.study_run)
        return float(tags[WALL_TAG]), tags[DRIVERS_TAG]

    cb.on_step_end(0, [])
    wall, drivers = recorded()
    assert 100 <= wall < 110 and drivers == "2"
    cb.driver_time.started -= 30  # half a minute on
    cb.on_step_end(0, [])
    assert recorded()[0] < 110  # not written again within the minute
    cb._wall_at -= WALL_EVERY_S  # a minute on
    cb.on_step_end(0, [])
    assert 130 <= recorded()[0] < 140
    assert pickle.loads(pickle.dumps(cb)).driver_time is None  # each driver sets its own


def test_a_callback_pickled_before_it_kept_a_clock_writes_the_wall_time(callback):
    """A study resumed with newer code restores a callback pickled without the clock's
    fields: the driver's clock is set on it, and it writes."""
    cb, _ = callback
    cb.driver_time = DriverTime({})
    state = cb.__getstate__()  # as an older callback's pickle: no clock in it
    assert not {"driver_time", "_wall_at"} & state.keys()
    old = MlflowTrackingCallback.__new__(MlflowTrackingCallback)
    old.__dict__.update(state)
    old._tracker = cb.tracker
    old.driver_time = DriverTime({})
    old.on_step_end(0, [])
    assert cb.tracker.tags(cb.study_run)[DRIVERS_TAG] == "1"
