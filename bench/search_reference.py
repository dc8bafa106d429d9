"""The dense learning-rate grid that bench/search_efficiency.py measures each contender against:
its points, its cache in an MLflow store, and each arm's curve of mean metrics over lr.

Every grid point is a trial of the study itself, trained by the study machinery: a confirm-only
run of the study (`run_study`) whose `phases.confirm.select` lists the grid's learning rates
and whose seeds are the grid's own (seeds no explore uses), so each point trains the full
budget of the study's profile and is never pruned. A finished run is tagged with the grid's
cache key (`KEY_TAG`); a later call reads every tagged run's trials back (`load_trials`) and
trains only the (arm, lr) points none of them has. What the key holds (`cache_key`) is what
invalidates it: the study, profile, trainable (and the synthetic surface's options), model
and data fingerprints, precision, metric, fixed settings (budget, batch size, ...) and the
grid's seeds. The code version is not in it: a change to the training code that changes
results needs `--refresh`, which untags the old runs and trains the grid again.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable

import numpy as np
import pandas as pd
from mlflow.tracking import MlflowClient

from study.fingerprint import data_fingerprint, model_fingerprint
from study.names import CONFIRM
from study.plan import Arm
from study.precision import resolved_precision
from study.spec import StudySpec
from study.tracking import reading

KEY_TAG = "bench.search_efficiency.grid_key"
# a contender repetition's run: `<grid key>:<hash of what else it ran with>`
CONTENDER_TAG = "bench.search_efficiency.contender"
# every grid trial also scores test at every evaluation, for the tabular benchmark
# (bench/search_tabular.py); not in the key: it changes what a trial records, not what it learns
RECORDS = {"fixed.eval_test_each_time": True}


def log_spaced(low: float, high: float, count: int) -> list[float]:
    """`count` learning rates evenly spaced in log10 from low to high, to 3 significant digits."""
    return [float(f"{lr:.3g}") for lr in np.geomspace(low, high, count)]


def lr_key(lr: float) -> str:
    """How a learning rate is matched between a run's params and the grid (MLflow keeps text)."""
    return f"{lr:.6g}"


def cache_key(spec: StudySpec, seeds: list[int]) -> str:
    """A hash of everything that changes a grid point's numbers but the lr (module docstring)."""
    synthetic = spec.synthetic
    parts = {
        "study": spec.name, "profile": spec.profile, "trainable": spec.trainable,
        "model": "synthetic" if synthetic else model_fingerprint(spec.model, spec.model_revision),
        "data": "synthetic" if synthetic else data_fingerprint(spec.data),
        "precision": resolved_precision(spec), "metric": [spec.metric.name, spec.metric.mode],
        "fixed": spec.fixed, "seeds": list(seeds),
    }  # fmt: skip
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def tagged_runs(uri: str, study: str, tag: str, value: str) -> list[str]:
    """The study runs whose `tag` is `value` (`value` may hold SQL LIKE's % for any text)."""
    return list(reading.tagged_runs(uri, study, tag, value))


def cached_trials(cache, key: str) -> pd.DataFrame:
    """The confirm trials of every study run tagged with `key` in `cache` (a
    search_ledger.TrialCache), one row per trial."""
    tables = [cache.trials(run_id) for run_id in cache.runs(KEY_TAG, key)]
    tables = [t[t.phase == CONFIRM] for t in tables if len(t)]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def untag(uri: str, study: str, key: str) -> int:
    """`--refresh`: the grid's and the contenders' runs of this key no longer count as the
    cache; how many there were."""
    client = MlflowClient(uri)
    untagged = 0
    for tag, value in ((KEY_TAG, key), (CONTENDER_TAG, f"{key}:%")):
        for run_id in tagged_runs(uri, study, tag, value):
            client.delete_tag(run_id, tag)
            untagged += 1
    return untagged


def untag_runs(uri: str, run_ids: list[str], name: str) -> None:
    """These runs no longer count as the cache (`--test-curves` trains them again)."""
    client = MlflowClient(uri)
    for run_id in run_ids:
        client.delete_tag(run_id, name)


def contender_tag(key: str, spec: StudySpec, overrides: dict, arms: list[Arm], at_once: int) -> str:
    """A contender repetition's cache tag: the grid's key, then a hash of the study's search
    and explore settings, its arms, how many trials ran at once (TPE's draws depend on what
    had finished when it was asked) and the repetition's overrides (sampler, seeds, ASHA)."""
    text = json.dumps([repr(spec.search), repr(spec.explore), [a.id for a in arms], at_once,
                       overrides], sort_keys=True)  # fmt: skip
    return f"{key}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def complete_trials(trials: pd.DataFrame, seeds: list[int]) -> pd.DataFrame:
    """One trial per (arm, lr, grid seed), a completed one where any is (a point trained again
    after a failure has its older, failed trials in the cache too), from these seeds only."""
    if not len(trials):
        return trials
    trials = trials[trials.seed.astype(int).isin(seeds)].assign(lr_key=trials.lr.map(lr_key))
    trials = trials.sort_values("status", key=lambda s: s != "completed", kind="stable")
    return trials.drop_duplicates(["arm", "lr_key", "seed"]).drop(columns="lr_key")


def missing_points(
    arms: list[Arm], lrs: list[float], trials: pd.DataFrame, seeds: list[int]
) -> dict[str, list]:
    """Per arm id, the grid's learning rates not yet completed on every grid seed: a point
    whose trial failed is trained again, never averaged over the seeds that happened to end."""
    have = set()
    if len(trials):
        done = complete_trials(trials, seeds)
        done = done[done.status == "completed"]
        counts = done.groupby(["arm", done.lr.map(lr_key)]).size()
        have = {point for point, count in counts.items() if count == len(seeds)}
    return {a.id: [lr for lr in lrs if (a.id, lr_key(lr)) not in have] for a in arms}


def build_missing(
    arms: list[Arm],
    missing: dict[str, list],
    seeds: list[int],
    run: Callable[[dict], str],
    lrs_per_run: int | None = None,
) -> list[str]:
    """Train the missing points, at most `lrs_per_run` learning rates per study run (None: all
    in one): runs over every arm while all arms miss the same learning rates, else runs per
    arm (its `grid` narrowed to it). `run(overrides)` trains one study run and returns its id;
    the caller caches each run as it returns, so an interruption loses only the run that was
    training. The ids are returned in the order they ran."""
    todo = {a.id: missing[a.id] for a in arms if missing[a.id]}
    if not todo:
        return []
    same = len(todo) == len(arms) and len({tuple(v) for v in todo.values()}) == 1
    groups = [(None, todo[arms[0].id])] if same else [(a, todo[a.id]) for a in arms if a.id in todo]
    run_ids = []
    for arm, lrs in groups:
        size = lrs_per_run or len(lrs)
        for first in range(0, len(lrs), size):
            chunk = lrs[first : first + size]
            overrides = {"phases": {"confirm": {"select": [{"lr": lr} for lr in chunk],
                                                "seeds": list(seeds)}}, **RECORDS}  # fmt: skip
            if arm is not None:
                overrides["grid"] = {name: [value] for name, value in arm.factors.items()}
            run_ids.append(run(overrides))
    return run_ids


def tag(uri: str, run_ids: list[str], value: str, name: str = KEY_TAG) -> None:
    client = MlflowClient(uri)
    for run_id in run_ids:
        client.set_tag(run_id, name, value)


def curves(
    trials: pd.DataFrame, lrs: list[float], metric: str, primary: str, seeds: list[int]
) -> pd.DataFrame:
    """Per arm and grid lr: the mean study metric (and its sd) and mean primary metric over the
    grid seeds (NaN unless every seed completed), the seeds completed and the trial-epochs
    spent."""
    wanted = {lr_key(lr) for lr in lrs}
    trials = complete_trials(trials[trials.lr.map(lr_key).isin(wanted)], seeds)
    rows = []
    for (arm, lr), group in trials.groupby(["arm", "lr"]):
        done = group[group.status == "completed"]
        whole = len(done) == len(seeds)
        rows.append({"arm": arm, "lr": lr, "dev": done[metric].mean() if whole else math.nan,
                     "dev_sd": done[metric].std() if whole else math.nan,
                     "test": done[primary].mean() if whole else math.nan,
                     "seeds_completed": len(done),
                     "trial_epochs": group.epoch.fillna(0).sum()})  # fmt: skip
    return pd.DataFrame(rows).sort_values(["arm", "lr"], ignore_index=True)


def at_lr(curve: pd.DataFrame, column: str, lr: float) -> float:
    """The curve's `column` at `lr`, linear in log10(lr) between its points (NaN points
    skipped; outside the grid its end value)."""
    finite = curve[np.isfinite(curve[column])]
    if not len(finite) or lr is None or not math.isfinite(lr):
        return math.nan
    return float(np.interp(math.log10(lr), np.log10(finite.lr), finite[column]))


def best(curve: pd.DataFrame, column: str, sign: float) -> tuple[float, float]:
    """(lr, value) of the curve's best point in `column` (sign +1: max, -1: min), NaN points
    skipped."""
    row = curve.loc[(sign * curve[column]).dropna().idxmax()]
    return float(row.lr), float(row[column])
