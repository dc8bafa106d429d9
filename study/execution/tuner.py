"""Run one Ray Tune experiment (a phase, or a confirm round): build its Tuner or restore the
interrupted one, run it, and tell from what Tune saved whether it finished.

What Tune saved is the truth here, not what it holds in memory after `fit`: `--resume` reads
the saved state, and a phase counted as done by mistake would delete checkpoints the resume
needs (see `saved_trials`).
"""

from __future__ import annotations

import gc
import logging
import os
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import pyarrow.fs as pafs
import ray
from ray import tune
from ray.tune.logger import JsonLoggerCallback

from study.execution.context import PhaseContext
from study.execution.saved_state import check_restorable, has_saved_state
from study.execution.settings_guard import SettingsGuard, hide_refused_tracebacks
from study.execution.storage import drop_checkpoints, trial_folders
from study.execution.storage_guard import StorageGuard
from study.execution.storage_outage import OutageGuard
from study.progress.callback import ProgressCallback
from study.progress.quiet import logger_level, tune_verbosity
from study.search.tune_internals import run_config_of, trial_folder
from study.spec import StudySpec
from study.tracking.callback import MlflowTrackingCallback
from trainables.tune_adapter import train_tagger

log = logging.getLogger(__name__)

# Tune's default loggers also write a TensorBoard event file per trial, synced to disk at
# every result (8 of 114 driver seconds at 600 quick trials, bench/scale.py); nothing here
# reads it, and MLflow is the study's record
os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
LIVE = {"PENDING", "RUNNING"}
FINISHED = {"TERMINATED", "ERROR"}
PENDING_ENV = "TUNE_MAX_PENDING_TRIALS_PG"


def make_tuner(context: PhaseContext, name: str, searcher, scheduler, n_trials: int) -> tune.Tuner:
    """A new Tuner for experiment `name`, or the saved one when it exists (`--resume`): Tune
    then restores the searcher, scheduler and callbacks it pickled, and the ones given here
    go unused."""
    trainable = tune.with_resources(train_tagger, dict(context.spec.resources))
    path = context.store.join(context.study_dir, name)
    fs, fs_path = context.store.fs, context.store.fs_path(context.study_dir, name)
    if tune.Tuner.can_restore(path) and has_saved_state(fs, fs_path):
        log.info("%s: restoring the Ray experiment at %s", name, path)
        # Tune would start a damaged phase afresh with its old searcher, and wait forever
        check_restorable(fs, fs_path, name)
        tuner = tune.Tuner.restore(path, trainable=trainable, resume_unfinished=True)
    else:
        if tune.Tuner.can_restore(path):
            log.info("%s: stopped before Ray saved it; starting it afresh", name)
        tuner = _new_tuner(context, name, trainable, searcher, scheduler, n_trials)
    _set_output(tuner, context)
    return tuner


def _new_tuner(
    context: PhaseContext, name: str, trainable, searcher, scheduler, n_trials: int
) -> tune.Tuner:
    spec = context.spec
    callback = MlflowTrackingCallback(
        context.tracking_uri,
        spec.name,
        context.study_run,
        context.arm_runs,
        spec.metric.name,
        spec.analysis,
    )
    return tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            scheduler=scheduler,
            num_samples=n_trials,
            # on a local Ray a trial's worker keeps torch/transformers imported for the next
            # trial: seconds saved on every trial of a laptop study. On a cluster each trial
            # gets a fresh process: GPU memory is freed between trials, and trials spread over
            # the nodes instead of queueing on the first warm worker
            reuse_actors=context.reuse_workers,
        ),
        run_config=tune.RunConfig(
            name=name,
            storage_path=context.store.join(context.study_dir),
            # storage guards first: see them; the settings guard after the trial's MLflow
            # record; then each trial's result.json (ExperimentAnalysis and
            # bench/study_overhead.py read it) but not Tune's TensorBoard and CSV files
            callbacks=[
                StorageGuard(),
                OutageGuard(),
                callback,
                SettingsGuard(),
                JsonLoggerCallback(),
            ],
            checkpoint_config=tune.CheckpointConfig(num_to_keep=kept_checkpoints(spec)),
            failure_config=tune.FailureConfig(max_failures=spec.max_failures),
            verbose=tune_verbosity(context.verbose),
        ),
    )


def _set_output(tuner: tune.Tuner, context: PhaseContext) -> None:
    """Tune's own output as this invocation asks (a restored experiment was saved with its
    first invocation's), the study's progress line fed from Tune's loop, and this driver's
    clock on the tracking callback."""
    run_config = run_config_of(tuner)
    if run_config is None:  # Ray Client: Tune runs on the cluster
        return
    run_config.verbose = tune_verbosity(context.verbose)
    kept = [c for c in run_config.callbacks or [] if not isinstance(c, ProgressCallback)]
    for callback in kept:  # the restored one too: it writes this driver's wall time
        if isinstance(callback, MlflowTrackingCallback):
            callback.driver_time = context.driver_time
    run_config.callbacks = kept + ([ProgressCallback(context.progress)] if context.progress else [])


def kept_checkpoints(spec: StudySpec) -> int | None:
    """Checkpoints Tune keeps per trial while it runs: the tagger's last one only (each is the
    weights and optimizer state, hundreds of MB), for which Tune saves its whole experiment
    state at every checkpoint so that the state never names one it deleted. That save grows
    with the trials in the experiment; at thousands of quick trials it was most of the
    driver's time (bench/scale.py, docs/scale.md). A synthetic trial's checkpoints are a few
    kB, so all are kept (until the phase ends) and Tune saves its state every few seconds."""
    return None if spec.synthetic else 1


def trials_at_once(
    resources: Mapping[str, float], cluster: Mapping[str, float], max_concurrent: int | None
) -> int:
    """How many of the study's trials the cluster can run side by side (at least 1)."""
    fits = [int(cluster.get(name.upper(), 0) // need) for name, need in resources.items() if need]
    n = min(fits, default=1)
    if max_concurrent:
        n = min(n, max_concurrent)
    return max(1, n)


@contextmanager
def _pending_trials(n: int) -> Iterator[None]:
    """Let Tune start as many trials at once as can run; a value the user set wins."""
    if PENDING_ENV in os.environ:
        yield
        return
    os.environ[PENDING_ENV] = str(n)
    try:
        yield
    finally:
        os.environ.pop(PENDING_ENV, None)


def run_experiment(context: PhaseContext, name: str, searcher, scheduler, n_trials: int) -> bool:
    """True when every trial of the experiment reached a terminal state (not interrupted)."""
    log.info("phase %s: %d trials", name, n_trials)
    # Tune lets a custom searcher have one trial pending at a time, so the second trial would
    # start only once the first one's worker is up (~10 s later on 2 cores)
    at_once = trials_at_once(
        context.spec.resources, ray.cluster_resources(), context.max_concurrent
    )
    searcher.slots = at_once  # a trial, and its sample, is created only for a free slot
    progress = context.progress
    if progress is not None:
        progress.experiment_started(at_once)
    try:
        with _pending_trials(at_once):
            ended = _ended_trials(make_tuner(context, name, searcher, scheduler, n_trials))
    finally:
        if progress is not None:
            progress.experiment_ended()
    saved = saved_trials(context.store.join(context.study_dir, name))
    log.info("phase %s: trial states %s", name, dict(Counter(t.status for t in saved)))
    stopped_live = any(t.status in LIVE for t in saved)
    done = ended >= n_trials and not stopped_live
    if done:  # every trial folder, also one Tune made after its last save (a full disk)
        store = context.store
        _drop_checkpoints(name, trial_folders(store.fs, store.fs_path(context.study_dir, name)))
    else:
        _drop_checkpoints(name, [trial_folder(t) for t in saved if t.status in FINISHED])
    return done


def _ended_trials(tuner: tune.Tuner) -> int:
    """Run the experiment; how many of its trials ended (terminated or errored). Tune's
    results hold every trial of the experiment, about 0.13 MB each: they are let go here,
    before `saved_trials` loads the saved copy, or both would be held at once (the driver's
    peak memory at 10,000 trials, bench/scale.py, docs/scale.md)."""
    hide_refused_tracebacks()  # the driver says it in one line
    results = tuner.fit()
    ended = results.num_terminated + results.num_errors
    del results, tuner
    gc.collect()  # Ray's trial objects hold reference cycles
    return ended


def saved_trials(experiment: str) -> list:
    """The experiment's trials as Tune saved them last, which is what `--resume` restores.

    Tune's own trials after `fit` can say otherwise. On Ctrl-C it saves the running and
    starting trials as such, then stops them and marks them TERMINATED in memory only:
    trusting that would count an interrupted phase as done and delete checkpoints the
    resume needs. The saved file can lag too, the other way: a paused trial that is then
    stopped stays PAUSED there (Tune refreshes a trial's saved state only when it has a
    live worker), so a phase is done when Tune finished every trial in memory and none was
    saved running or starting."""
    # trials that never reported are fine here
    with logger_level("ray.tune.analysis.experiment_analysis", logging.ERROR):
        try:
            return tune.ExperimentAnalysis(experiment).trials
        except ValueError:  # interrupted before Tune saved anything: nothing finished
            return []


def _drop_checkpoints(phase: str, folders: list[tuple[pafs.FileSystem, str]]) -> None:
    """Trials that will not run again need no checkpoint: a finished study keeps none."""
    freed = 0
    for fs, path in folders:
        try:
            freed += drop_checkpoints(fs, path)
        except OSError as err:  # worth a line, never worth stopping the study
            log.warning("could not remove the checkpoints of %s: %s", path, err)
    if freed:
        log.info("phase %s: removed finished trials' checkpoints (%.1f MB)", phase, freed / 1e6)
