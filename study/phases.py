"""Run the study's phases as Ray Tune experiments: start or join Ray, build or restore a Tuner
for each phase, pick the confirm samples, and summarise the confirm phase from MLflow."""

from __future__ import annotations

import logging
import os
import socket
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import ray
from ray import tune

from study.names import (
    CONFIRM,
    EXPLORE,
    STUDY_RUN_ID,
    STUDY_TAGS,
    TRIAL_CONFIG,
)
from study.plan import StudyPlan
from study.saved_state import check_restorable
from study.scheduling import (
    ArmAwareASHA,
    ArmSearcher,
    LimitedFIFO,
    PlannedSearcher,
    best_per_arm,
    confirm_configs,
)
from study.spec import StudySpec
from study.storage import StudyStore, drop_checkpoints, is_uri
from study.storage_guard import StorageGuard
from study.storage_outage import OutageGuard
from study.tracking import MlflowTrackingCallback, StudyTracker
from study.tracking.probe import probe_database, probe_server_store, shown_uri
from trainables.errors import UserInputError, first_line
from trainables.tune_adapter import train_tagger

log = logging.getLogger(__name__)

LIVE = {"PENDING", "RUNNING"}
FINISHED = {"TERMINATED", "ERROR"}


@dataclass
class PhaseContext:
    spec: StudySpec
    plan: StudyPlan
    store: StudyStore
    study_dir: str
    tracking_uri: str
    study_run: str
    arm_runs: dict[str, str]
    max_concurrent: int | None = None
    reuse_workers: bool = True


def probe_tracking(uri: str) -> None:
    """Fail fast with one line when a tracking server does not answer, before Ray starts:
    MLflow's own client retries an unreachable server for minutes before it gives up. A
    server that answers, or a database, is then tried for real (see study/tracking/probe.py)."""
    if not uri.startswith(("http://", "https://")):
        probe_database(uri)
        return
    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=5).read()
    except (urllib.error.URLError, OSError) as err:
        raise UserInputError(f"MLflow tracking server {uri} is not reachable: {err}") from err
    probe_server_store(uri)


def connect_tracking(uri: str, experiment: str) -> StudyTracker:
    """Open the tracking store; any error there is the user's URI or server, said in one line."""
    try:
        return StudyTracker(uri, experiment)
    except Exception as err:  # noqa: BLE001 - see the docstring
        raise UserInputError(
            f"MLflow tracking URI {shown_uri(uri)} cannot be used: {first_line(err)}"
        ) from err


def check_address(address: str | None, timeout_s: float = 5.0) -> None:
    """Refuse an unreachable `--address` in seconds, before anything is written: `ray.init`
    itself keeps retrying a dead head node for minutes before it gives up."""
    if not address or address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise UserInputError(f"--address {address}: expected 'auto' or HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise UserInputError(
            f"cannot start or reach --address {address}: nothing answers there ({err}); "
            "is the head node up (ray start --head) and the port open?"
        ) from err


def start_ray(address: str | None, num_cpus: int | None, store: StudyStore) -> None:
    """Start a local Ray, or join a cluster; refuse local-only storage on several hosts."""
    if ray.is_initialized():
        return
    quiet = {"include_dashboard": False, "logging_level": logging.WARNING}
    try:
        if address:
            ray.init(address=address, **quiet)
        else:
            ray.init(num_cpus=num_cpus, object_store_memory=256 * 1024**2, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as err:
        where = f"--address {address}" if address else "a local Ray"
        raise UserInputError(f"cannot start or reach {where}: {first_line(err)}") from err
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    log.info(
        "Ray: %d node(s) on %d host(s), resources %s",
        len(nodes), len({n["NodeManagerAddress"] for n in nodes}), ray.cluster_resources(),
    )  # fmt: skip
    problem = storage_problem(nodes, store)
    if problem:
        ray.shutdown()
        raise UserInputError(problem)


def stop_ray() -> None:
    """Stop Ray before the driver's last words on a full disk: its log monitor otherwise goes on
    printing the workers' buffered lines after them, and the line the user needs is no longer
    the last."""
    if ray.is_initialized():
        ray.shutdown()


def storage_problem(nodes: list[dict], store: StudyStore) -> str | None:
    """Checkpoints written on one host must be readable where a trial resumes: a plain local
    path is only safe when every node is on this one host."""
    hosts = {n["NodeManagerAddress"] for n in nodes if n.get("Alive")}
    if len(hosts) <= 1 or is_uri(store.root):
        return None
    return (
        f"the Ray cluster spans {len(hosts)} hosts but --storage {store.root} is a local "
        "path that the other hosts cannot see; give shared storage as a URI "
        "(s3://..., gs://..., or file:///path/on/a/shared/filesystem)"
    )


def _tuner(context: PhaseContext, name: str, searcher, scheduler, n_trials: int) -> tune.Tuner:
    spec = context.spec
    trainable = tune.with_resources(train_tagger, dict(spec.resources))
    path = context.store.join(context.study_dir, name)
    if tune.Tuner.can_restore(path):
        log.info("%s: restoring the Ray experiment at %s", name, path)
        # Tune would start a damaged phase afresh with its old searcher, and wait forever
        check_restorable(context.store.fs, context.store.fs_path(context.study_dir, name), name)
        return tune.Tuner.restore(path, trainable=trainable, resume_unfinished=True)
    callback = MlflowTrackingCallback(
        context.tracking_uri, spec.name, context.study_run, context.arm_runs, spec.metric.name
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
            callbacks=[StorageGuard(), OutageGuard(), callback],  # guards first: see them
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
            failure_config=tune.FailureConfig(max_failures=spec.max_failures),
            verbose=1,
        ),
    )


def trials_at_once(
    resources: Mapping[str, float], cluster: Mapping[str, float], max_concurrent: int | None
) -> int:
    """How many of the study's trials the cluster can run side by side (at least 1)."""
    fits = [int(cluster.get(name.upper(), 0) // need) for name, need in resources.items() if need]
    n = min(fits, default=1)
    if max_concurrent:
        n = min(n, max_concurrent)
    return max(1, n)


PENDING_ENV = "TUNE_MAX_PENDING_TRIALS_PG"


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


def _run_phase(context: PhaseContext, name: str, searcher, scheduler, n_trials: int) -> bool:
    """True when every trial of the phase reached a terminal state (not interrupted)."""
    log.info("phase %s: %d trials", name, n_trials)
    # Tune lets a custom searcher have one trial pending at a time, so the second trial would
    # start only once the first one's worker is up (~10 s later on 2 cores)
    at_once = trials_at_once(
        context.spec.resources, ray.cluster_resources(), context.max_concurrent
    )
    with _pending_trials(at_once):
        results = _tuner(context, name, searcher, scheduler, n_trials).fit()
    saved = saved_trials(context.store.join(context.study_dir, name))
    log.info("phase %s: trial states %s", name, dict(Counter(t.status for t in saved)))
    stopped_live = any(t.status in LIVE for t in saved)
    done = results.num_terminated + results.num_errors >= n_trials and not stopped_live
    _drop_checkpoints(name, [t for t in saved if done or t.status in FINISHED])
    return done


def saved_trials(experiment: str) -> list:
    """The phase's trials as Tune saved them last, which is what `--resume` restores.

    Tune's own trials after `fit` can say otherwise. On Ctrl-C it saves the running and
    starting trials as such, then stops them and marks them TERMINATED in memory only:
    trusting that would count an interrupted phase as done and delete checkpoints the
    resume needs. The saved file can lag too, the other way: a paused trial that is then
    stopped stays PAUSED there (Tune refreshes a trial's saved state only when it has a
    live worker), so a phase is done when Tune finished every trial in memory and none was
    saved running or starting."""
    quiet = logging.getLogger("ray.tune.analysis.experiment_analysis")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # trials that never reported are fine here
    try:
        return tune.ExperimentAnalysis(experiment).trials
    except ValueError:  # interrupted before Tune saved anything: nothing finished
        return []
    finally:
        quiet.setLevel(level)


def _drop_checkpoints(phase: str, trials: list) -> None:
    """Trials that will not run again need no checkpoint: a finished study keeps none."""
    freed = 0
    for trial in trials:
        try:
            freed += drop_checkpoints(trial.storage.storage_filesystem, trial.path)
        except OSError as err:  # worth a line, never worth stopping the study
            log.warning("could not remove the checkpoints of %s: %s", trial.path, err)
    if freed:
        log.info("phase %s: removed finished trials' checkpoints (%.1f MB)", phase, freed / 1e6)


def run_explore(context: PhaseContext) -> bool:
    searcher = ArmSearcher(context.spec, context.plan.arms)
    scheduler = ArmAwareASHA(searcher, context.max_concurrent)
    phase = next(p for p in context.plan.phases if p.name == EXPLORE)
    return _run_phase(context, EXPLORE, searcher, scheduler, phase.trials)


def run_confirm(
    context: PhaseContext,
    chosen: dict[str, list[dict[str, Any]]],
    name: str = CONFIRM,
    arms: list | None = None,
    seeds: tuple[int, ...] | None = None,
    skip: frozenset[tuple[str, int]] = frozenset(),
) -> bool:
    """One confirm round (a Ray experiment of its own): the given arms on the given seeds."""
    arms = context.plan.arms if arms is None else arms
    configs = confirm_configs(context.spec, arms, chosen, seeds, skip)
    if not configs:
        return True
    searcher = PlannedSearcher(context.spec, configs)
    scheduler = LimitedFIFO(searcher, context.max_concurrent)
    return _run_phase(context, name, searcher, scheduler, len(configs))


def completed_explore_trials(
    context: PhaseContext, chosen: dict[str, list[dict[str, Any]]]
) -> list[tuple[str, int, int]]:
    """(arm, sample, seed) of explore trials that ran a chosen sample on a confirm seed to
    their end: with reuse_explore_seeds they stand in for the confirm trial."""
    confirm_seeds = set(context.spec.confirm.seeds)
    analysis = tune.ExperimentAnalysis(context.store.join(context.study_dir, EXPLORE))
    found = []
    for trial in analysis.trials:
        tags, config = trial.config[STUDY_TAGS], trial.config[TRIAL_CONFIG]
        params = {k: config[k] for k in context.spec.search}
        finished = (trial.last_result or {}).get("final")
        if finished and tags["seed"] in confirm_seeds and params in chosen[tags["arm"]]:
            found.append((tags["arm"], int(tags["sample"]), int(tags["seed"])))
    return sorted(found)


def tag_trial_runs(
    context: PhaseContext, trials: list[tuple[str, int, int]], tags: dict[str, str]
) -> None:
    """Tag the MLflow runs of explore trials given as (arm, sample, seed)."""
    tracker = StudyTracker(context.tracking_uri, context.spec.name)
    for arm, sample, seed in trials:
        runs = tracker.client.search_runs(
            [tracker.experiment_id],
            filter_string=f"tags.{STUDY_RUN_ID} = '{context.study_run}' and tags.phase = "
            f"'{EXPLORE}' and tags.sample = '{sample}' and tags.seed = '{seed}'",
            max_results=100,
        )
        for run in runs:
            if run.data.tags.get("arm") == arm:
                tracker.set_tags(run.info.run_id, tags)


def choose_samples(context: PhaseContext) -> dict[str, list[dict[str, Any]]]:
    """The samples each arm runs in the confirm phase: a fixed list, or the explore sample
    whose seeds all completed with the best mean metric (read from Ray's experiment)."""
    spec = context.spec
    if spec.confirm.select != "best":
        return {arm.id: [dict(s) for s in spec.confirm.select] for arm in context.plan.arms}
    analysis = tune.ExperimentAnalysis(context.store.join(context.study_dir, EXPLORE))
    by_sample: dict[tuple[str, int], list] = defaultdict(list)
    for trial in analysis.trials:
        tags = trial.config[STUDY_TAGS]
        by_sample[(tags["arm"], tags["sample"])].append(trial)
    candidates = []
    for (arm, _), trials in by_sample.items():
        results = [t.last_result or {} for t in trials]
        if len(trials) < len(spec.explore.seeds) or not all(r.get("final") for r in results):
            continue
        params = {k: trials[0].config[TRIAL_CONFIG][k] for k in spec.search}
        candidates.append((arm, [r[spec.metric.name] for r in results], params))
    best = best_per_arm(candidates, spec.metric.mode)
    missing = [arm.id for arm in context.plan.arms if arm.id not in best]
    if missing:
        raise UserInputError(
            f"explore finished without a sample whose seeds all completed for arm(s) "
            f"{missing}; see the errored trials in MLflow, or give confirm.select a fixed list"
        )
    for arm, (score, params) in best.items():
        log.info("confirm: arm %s runs %s (explore mean %s %.4f)", arm, params,
                 spec.metric.name, score)  # fmt: skip
    return {arm: [params] for arm, (_, params) in best.items()}
