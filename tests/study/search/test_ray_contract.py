"""What the study's search relies on in Ray Tune beyond its public API, checked against the
installed Ray: each assumption listed in study/search/tune_internals.py has a test here, so a
Ray upgrade that breaks one fails by name instead of pruning the wrong samples. (The ASHA
rungs themselves are pinned in tests/study/search/test_scheduling.py.)"""

from __future__ import annotations

import inspect

import pytest
from ray.tune.execution.tune_controller import TuneController
from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from study.search import LimitedFIFO, PlannedSearcher
from study.search.tune_internals import (
    PAUSED,
    PENDING,
    RUNNING,
    asha_stops,
    enter_sample,
    follow_metric,
    new_asha,
    reported_result,
    status_of,
    study_tags_of,
)
from study.spec import load_study
from tests.study_helpers import write_study


@pytest.fixture
def spec(tmp_path, tiny_model, tiny_corpus):
    return load_study(str(write_study(tmp_path, str(tiny_model), tiny_corpus)), "default")


def test_ray_asha_judges_a_stand_in_handle_without_a_controller():
    """A sample is put before ASHA as a handle with only `trial_id`, and no controller."""
    asha = new_asha("max", max_t=4, grace_period=1, reduction_factor=2)
    enter_sample(asha, "arm#0")
    enter_sample(asha, "arm#1")
    assert not asha_stops(asha, "arm#0", 1.0, 0.9)  # the first at a rung sets the bar
    assert asha_stops(asha, "arm#1", 1.0, 0.1)  # below it: stopped
    assert not asha_stops(asha, "arm#0", 4.0, 0.9)  # reaching max_t stops nothing by itself


def test_ray_asha_minimises_when_told_to():
    asha = new_asha("min", max_t=4, grace_period=1, reduction_factor=2)
    for key in ("a", "b"):
        enter_sample(asha, key)
    assert not asha_stops(asha, "a", 1.0, 0.2)
    assert asha_stops(asha, "b", 1.0, 0.9)  # a higher loss than the bar


def test_the_controller_lists_and_stops_trials_as_the_schedulers_call_it():
    """A scheduler is handed a wrapper of Ray's TuneController; ours list its live trials and
    stop a paused one through these two methods, which the wrapper lets schedulers call, and
    number trials as `on_trial_add` sees them."""
    assert list(inspect.signature(TuneController.get_live_trials).parameters) == ["self"]
    assert list(inspect.signature(TuneController.stop_trial).parameters) == ["self", "trial"]
    allowed = inspect.getsource(TuneController._wrapped)
    assert '"get_live_trials"' in allowed and '"stop_trial"' in allowed
    added = inspect.signature(FIFOScheduler.on_trial_add).parameters
    assert list(added) == ["self", "tune_controller", "trial"]
    assert "self._scheduler_alg.on_trial_add(" in inspect.getsource(TuneController.add_trial)
    called = inspect.signature(FIFOScheduler.choose_trial_to_run).parameters
    assert list(called) == ["self", "tune_controller"]


def test_a_trial_carries_its_status_and_the_suggested_config():
    tags = {"arm": "depth=3", "sample": 0, "seed": 1, "phase": "explore"}
    trial = Trial("train_tagger", config={"trial": {"lr": 1e-3}, "study": tags}, stub=True)
    assert status_of(trial) == PENDING == "PENDING"
    assert (RUNNING, PAUSED) == ("RUNNING", "PAUSED")
    assert study_tags_of(trial) == tags
    assert study_tags_of(Trial("train_tagger", config={}, stub=True)) == {}


def test_a_trials_reported_result_is_read_without_asking_its_worker(monkeypatch):
    """Tune's `last_result` of a trial without results waits on its worker's default metrics
    (a stopped or busy worker stalls the driver's loop); `reported_result` reads what the
    trial reported, {} before its first result, and never asks the worker."""

    def waits_on_the_worker(trial):
        raise AssertionError("asked the trial's worker")

    monkeypatch.setattr(Trial, "_get_default_result_or_future", waits_on_the_worker)
    trial = Trial("train_tagger", config={}, stub=True)
    with pytest.raises(AssertionError, match="worker"):
        trial.last_result  # noqa: B018  (what the driver's callbacks read before)
    assert reported_result(trial) == {}
    trial.update_last_result({"dev_f1": 0.5, "epoch": 1.0})
    assert reported_result(trial)["dev_f1"] == 0.5


def test_a_scheduler_that_follows_a_metric_keeps_it():
    """Tune checks every result for the metric a scheduler names (its `metric`), and leaves a
    named one alone when the run itself names none."""
    scheduler = FIFOScheduler()
    follow_metric(scheduler, "dev_f1", "max")
    assert scheduler.metric == "dev_f1"
    assert scheduler.set_search_properties(None, None) is True
    assert scheduler.metric == "dev_f1"
    assert scheduler.set_search_properties("dev_loss", "min") is False  # named twice: refused


def test_tune_saves_and_restores_a_searcher_through_its_save_and_restore(tmp_path, spec):
    """What makes a resumed phase continue: Tune's `save_to_dir` / `restore_from_dir` call the
    searcher's own `save` / `restore`."""
    configs = [{"trial": {"seed": s}, "study": {"seed": s}} for s in range(3)]
    searcher = PlannedSearcher(spec, configs)
    LimitedFIFO(searcher, max_running=2)
    searcher.suggest("t0")
    searcher.save_to_dir(str(tmp_path), session_str="s")
    fresh = PlannedSearcher(spec, [])
    fresh.restore_from_dir(str(tmp_path))
    assert fresh.__dict__ == searcher.__dict__
    assert fresh.suggest("t1") == configs[1]
    assert TrialScheduler.CONTINUE != TrialScheduler.STOP != TrialScheduler.PAUSE


@pytest.mark.slow  # over ~7 s: the slow tier
def test_a_restored_tuner_runs_with_the_run_config_the_driver_changed(tmp_path):
    """A resumed phase gets this invocation's output settings and progress callback: changes
    to `run_config_of(tuner)` of a restored Tuner reach its `fit`."""
    import ray
    from ray import tune

    from study.search.tune_internals import run_config_of

    class Seen(tune.Callback):
        def __init__(self):
            self.trials = []

        def on_experiment_end(self, trials, **info):
            self.trials = list(trials)

    def trainable(config):
        tune.report({"score": 1.0})

    ray.init(num_cpus=1, include_dashboard=False, object_store_memory=128 * 1024**2)
    try:
        config = tune.RunConfig(name="exp", storage_path=str(tmp_path), verbose=1)
        tune.Tuner(trainable, run_config=config).fit()
        restored = tune.Tuner.restore(str(tmp_path / "exp"), trainable=trainable)
        run_config = run_config_of(restored)
        assert run_config.verbose == 1  # as saved
        seen = Seen()
        run_config.verbose, run_config.callbacks = 0, [seen]
        restored.fit()
    finally:
        ray.shutdown()
    assert len(seen.trials) == 1  # the callback set after restoring ran


# --- Ray's storage of an experiment (study/execution/saved_state.py, storage_guard.py) ------
def test_tune_names_its_saved_experiment_state_as_the_pattern_says():
    import fnmatch

    from study.search.tune_internals import EXPERIMENT_STATE_PATTERN

    name = TuneController.CKPT_FILE_TMPL.format("2026-01-01_00-00-00")
    assert fnmatch.fnmatch(name, EXPERIMENT_STATE_PATTERN), TuneController.CKPT_FILE_TMPL


def test_a_trials_storage_context_says_where_its_experiment_is_staged_and_stored(tmp_path):
    """`staged_experiment` and `wait_for_upload` read a trial's StorageContext; the staging
    folder needs a running Ray, so only that it is still a property is checked for it."""
    from ray.train._internal.storage import StorageContext

    from study.search.tune_internals import trial_folder, trial_storage, wait_for_upload

    staging = inspect.getattr_static(StorageContext, "experiment_driver_staging_path", None)
    assert isinstance(staging, property), "StorageContext.experiment_driver_staging_path"
    storage = StorageContext(storage_path=str(tmp_path), experiment_dir_name="exp")
    assert storage.experiment_fs_path == str(tmp_path / "exp")
    assert callable(storage.syncer.wait), "StorageContext.syncer.wait"
    wait_for_upload(storage)
    trial = Trial("__fake", config={}, storage=storage, stub=True)
    assert trial_storage(trial) is trial.storage
    trial.storage.trial_dir_name = "trial_0"
    fs, path = trial_folder(trial)
    assert fs is storage.storage_filesystem and path == str(tmp_path / "exp" / "trial_0")


def test_ray_logs_a_failed_upload_on_the_quietened_logger():
    import importlib

    from study.search.tune_internals import RAY_STORAGE_LOGGER

    module = importlib.import_module(RAY_STORAGE_LOGGER)  # the logger is named after it
    assert module.logger.name == RAY_STORAGE_LOGGER, "Ray's storage module logs elsewhere"
    assert hasattr(module, "StorageContext"), "Ray's storage layer moved"
