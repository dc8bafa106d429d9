"""Every use the study makes of Ray Tune beyond its public API: the search package's, beyond
the public Searcher/Scheduler API, and the execution package's, in Ray's storage of an
experiment.

Arm-aware pruning needs three things Tune does not offer publicly: Ray's ASHA judging a
whole *sample* (several trials) as if it were one trial, a scheduler that looks at and stops
other trials than the one reporting, and a scheduler that names the metric it follows. Each is
done here and nowhere else, so a Ray upgrade that changes any of them breaks this module
only; tests/study/search/test_ray_contract.py pins each assumption against the installed Ray
and fails, naming it, when one no longer holds.

The assumptions:
- `AsyncHyperBandScheduler.on_trial_add/on_trial_result` read nothing of the trial but its
  `trial_id` and nothing of the controller, so a stand-in handle and no controller do;
- its rungs are `grace_period * reduction_factor**k` below `max_t` (`asha_milestones`);
- `TuneController.get_live_trials()` is the set of the experiment's trials not terminated
  (allowed to schedulers by the wrapper Tune hands them), `stop_trial(trial)` stops one, and
  a scheduler's `on_trial_add` sees every trial as Tune adds it, restored ones included;
- a trial's `status` is one of `Trial.PENDING/RUNNING/PAUSED/...` and its `config` is the
  dict the searcher suggested;
- a trial's `run_metadata.last_result` is its last reported result ({} or its `trial_id`
  alone before the first), read without a call to its worker: Tune's `last_result` property
  instead waits (`ray.get`) for a trial without results on its worker's default metrics, which
  stalls the driver's whole loop while that worker is busy or stopped (`reported_result`);
- Tune reads the metric a scheduler follows from its private `_metric` (checking results for
  it), and `set_search_properties` keeps one that is already set;
- a Tuner's `_local_tuner.get_run_config()` is the RunConfig its `fit` runs with, also for a
  restored Tuner (whose RunConfig Tune unpickled), so the driver can set the output of a
  restored experiment (`run_config_of`);
- Tune saves an experiment's state as `experiment_state-<time>.json` in its folder
  (`EXPERIMENT_STATE_PATTERN`, from `TuneController.CKPT_FILE_TMPL`);
- a trial's `storage` is Ray's `StorageContext`, whose `experiment_driver_staging_path` is the
  driver's local copy of the experiment's files, `experiment_fs_path` and `storage_filesystem`
  where they are uploaded, and `syncer.wait()` waits for an upload under way
  (`staged_experiment`, `wait_for_upload`); a trial's `path` is its folder in that filesystem
  (`trial_folder`);
- Ray's storage layer logs a failed upload on the logger `ray.train._internal.storage`
  (`RAY_STORAGE_LOGGER`).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
from ray.tune.experiment import Trial
from ray.tune.schedulers import AsyncHyperBandScheduler, TrialScheduler

from study.names import STUDY_TAGS

TIME_ATTR = "epoch"  # every trial reports `epoch`; rungs are in epochs
ASHA_METRIC = "seed_mean"  # what a sample reports to its arm's ASHA

PENDING, RUNNING, PAUSED = Trial.PENDING, Trial.RUNNING, Trial.PAUSED
FINISHED_STATES = (Trial.TERMINATED, Trial.ERROR)


# --- Ray's ASHA, judging samples ----------------------------------------------------------
@dataclass
class _SampleHandle:
    """Stands in for a Tune trial when a whole sample is put before Ray's ASHA."""

    trial_id: str


def new_asha(mode: str, max_t: float, grace_period: float, reduction_factor: float):
    """One arm's ASHA (a single bracket). It never stops at max_t: the last evaluation is the
    sample's result, not a reason to prune it."""
    return AsyncHyperBandScheduler(
        time_attr=TIME_ATTR, metric=ASHA_METRIC, mode=mode, max_t=max_t,
        grace_period=grace_period, reduction_factor=reduction_factor, stop_last_trials=False,
    )  # fmt: skip


def enter_sample(asha: AsyncHyperBandScheduler, key: str) -> None:
    """Put a new sample before its arm's ASHA."""
    asha.on_trial_add(None, _SampleHandle(key))


def asha_stops(asha: AsyncHyperBandScheduler, key: str, epoch: float, mean: float) -> bool:
    """Report a sample's seed-mean at `epoch`; True when ASHA stops the sample there."""
    decision = asha.on_trial_result(None, _SampleHandle(key), {TIME_ATTR: epoch, ASHA_METRIC: mean})
    return decision == TrialScheduler.STOP


def asha_milestones(grace_period: float, reduction_factor: float, max_t: float) -> list[float]:
    """The epochs at which Ray's ASHA (one bracket) decides, computed as Ray does rather than
    read from its private state; tests/study/search/test_scheduling.py and
    tests/study/search/test_ray_contract.py pin the two together, so a Ray upgrade that changes
    the rungs fails there, loudly."""
    count = int(math.log(max_t / grace_period) / math.log(reduction_factor) + 1)
    return sorted(grace_period * reduction_factor**k for k in range(max(count, 0)))


# --- the controller and its trials, as a scheduler sees them ------------------------------
def live_trials_of(tune_controller) -> set:
    """The trials not terminated yet (pending, running, paused), in no order: what choosing
    the next trial needs to look at. Looking at every trial would make each of Tune's steps
    cost time in proportion to the experiment's size (bench/scale.py)."""
    return tune_controller.get_live_trials()


def stop_trial(tune_controller, trial) -> None:
    """Stop another trial than the one reporting (a paused seed of a stopped sample)."""
    tune_controller.stop_trial(trial)


def status_of(trial) -> str:
    return trial.status


def reported_result(trial) -> dict[str, Any]:
    """The trial's last reported result, {} before its first, never waiting on its worker:
    the driver's callbacks read it at every step, and Tune's loop must not stall on a trial
    whose worker is still importing torch, or is stopped or lost."""
    return trial.run_metadata.last_result or {}


def study_tags_of(trial) -> dict[str, Any]:
    """The study's bookkeeping (arm, sample, seed, phase) the searcher put in the config."""
    return trial.config.get(STUDY_TAGS) or {}


def follow_metric(scheduler: TrialScheduler, metric: str, mode: str) -> None:
    """Name the metric a scheduler follows, as Ray's own schedulers do in their constructor:
    Tune then checks every result for it, and leaves it alone in `set_search_properties`."""
    scheduler._metric, scheduler._mode = metric, mode


# --- the Tuner ----------------------------------------------------------------------------
def run_config_of(tuner):
    """The RunConfig a Tuner's `fit` will use, new or restored; None under Ray Client, where
    Tune runs on the cluster and the driver cannot change it."""
    local = getattr(tuner, "_local_tuner", None)
    return local.get_run_config() if local is not None else None


# --- Ray's storage of an experiment -------------------------------------------------------
EXPERIMENT_STATE_PATTERN = "experiment_state-*.json"  # Tune's saved state of an experiment
RAY_STORAGE_LOGGER = "ray.train._internal.storage"  # where Ray logs a failed upload


@dataclass(frozen=True)
class StagedExperiment:
    """Where Tune writes an experiment's files before it uploads them, and where to."""

    staging: Path  # on the driver's own disk
    target: str  # the experiment's folder, a path in `fs`
    fs: pafs.FileSystem


def trial_storage(trial) -> Any:
    """A trial's Ray StorageContext (None for an object that is no Tune trial)."""
    return getattr(trial, "storage", None)


def staged_experiment(storage) -> StagedExperiment:
    """The staging folder and storage of the experiment that `storage` (a trial's Ray
    StorageContext) belongs to."""
    return StagedExperiment(
        Path(storage.experiment_driver_staging_path),
        storage.experiment_fs_path,
        storage.storage_filesystem,
    )


def wait_for_upload(storage) -> None:
    """Wait for an upload of the experiment's files under way through `storage`'s syncer; any
    failure of it (the full disk it met) is for the caller's check of the files to find."""
    with contextlib.suppress(Exception):
        storage.syncer.wait()


def trial_folder(trial) -> tuple[pafs.FileSystem, str]:
    """The filesystem a Tune trial's folder is in, and its path there."""
    return trial.storage.storage_filesystem, trial.path
