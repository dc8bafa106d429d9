"""The contenders of bench/search_efficiency.py: what each repetition of each runs with (its
explore seeds, sampler seed, sampler and ASHA, or the coarse grid's lrs), the tag that finds
it in the cache, the lr it chose by the study's own rule, and its regret on the dense grid's
curves (bench/search_reference.py) and cost."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import search_cost as cost
import search_reference as grid
from search_outputs import say

from study.plan import make_plan
from study.search.confirm import best_per_arm
from study.stats import direction

EXPLORE_SEED_BASE, SAMPLER_SEED_STEP = 100, 100
# contender -> what its explore-only run overrides (the coarse grid runs confirm instead)
CONTENDERS = {
    "study": {},
    "tpe": {"phases.explore.sampler": "tpe", "phases.explore.asha": None},
    "random_asha": {"phases.explore.sampler": "random"},
    "random": {"phases.explore.sampler": "random", "phases.explore.asha": None},
    "coarse_grid": None,
}


def contender_cache_tag(args, spec, key: str, name: str, repetition: int) -> str:
    """The tag that finds one contender repetition in the cache: it changes with anything that
    changes what the repetition would draw or cost."""
    overrides = contender_overrides(name, spec, repetition, args.search_range)
    return grid.contender_tag(key, spec, overrides, make_plan(spec).arms, cost.at_once(args, spec))


def estimate_missing(args, spec, cache, key: str) -> None:
    """Say how many contender repetitions the cache lacks and what they cost, at most and at
    the trial-epochs the cached ones took."""
    runs = [cache.runs(grid.CONTENDER_TAG, contender_cache_tag(args, spec, key, name, r))
            for r in range(args.repetitions) for name in args.contenders]  # fmt: skip
    measured = [float(cache.trials(found[0]).epoch.fillna(0).sum()) for found in runs if found]
    cost.estimate_contenders(args, spec, sum(not found for found in runs), measured)


def contender_overrides(name: str, spec, repetition: int, search_range: tuple) -> dict:
    """What repetition `repetition` of contender `name` sets on top of the study: its explore
    seeds and sampler seed (and sampler, ASHA), or, for the coarse grid, its confirm lrs."""
    count = len(spec.explore.seeds)
    seeds = [EXPLORE_SEED_BASE + count * repetition + k for k in range(count)]
    if CONTENDERS[name] is None:  # the coarse grid: every lr on the explore seeds, unpruned
        lrs = grid.log_spaced(*search_range, spec.explore.samples)
        return {"phases": {"confirm": {"select": [{"lr": lr} for lr in lrs], "seeds": seeds}}}
    sampler_seed = SAMPLER_SEED_STEP * repetition
    return {"phases.confirm": None, "phases.explore.seeds": seeds,
            "phases.explore.sampler_seed": sampler_seed, **CONTENDERS[name]}  # fmt: skip


def chosen_lrs(trials: pd.DataFrame, spec, by: str) -> dict[str, float]:
    """Per arm, the lr the study's rule picks: best seed mean among samples (or grid lrs, `by`)
    whose seeds all completed."""
    seeds = len(spec.explore.seeds)
    candidates = [
        (arm, group[spec.metric.name].tolist(), {"lr": float(group.lr.iloc[0])})
        for (arm, _), group in trials.groupby(["arm", by])
        if len(group) == seeds and (group.status == "completed").all()
    ]
    return {arm: p["lr"] for arm, (_, p) in best_per_arm(candidates, spec.metric.mode).items()}


def measure(curves: pd.DataFrame, chosen: dict[str, float], signs: dict[str, float]) -> dict:
    """Regret of the chosen lrs on the grid's curves, per arm and averaged over arms (NaN where
    an arm chose nothing): on dev, the grid's best mean minus its mean at the chosen lr; on
    test, its mean at the dev-best lr (the answer) minus at the chosen lr, so that test never
    selects and a chosen lr that happens to test better than the answer shows below zero."""
    arms = dict(tuple(curves.groupby("arm")))
    answers = {arm: grid.best(curve, "dev", signs["dev"])[0] for arm, curve in arms.items()}
    out = {}
    for column, sign in signs.items():
        regrets = {}
        for arm, curve in arms.items():
            at_chosen = grid.at_lr(curve, column, chosen.get(arm))
            regrets[arm] = sign * (grid.at_lr(curve, column, answers[arm]) - at_chosen)
        out[f"regret_{column}"] = float(np.mean(list(regrets.values())))
        out |= {f"regret_{column} {arm}": value for arm, value in regrets.items()}
    return out


def sampled_lrs(trials: pd.DataFrame, by: str) -> tuple:
    """The learning rates a repetition tried, per arm in order, to tell apart contenders that
    drew the same (TPE asked before its start-up samples had ended draws as random search)."""
    firsts = trials.sort_values(by).drop_duplicates(["arm", by])
    return tuple((arm, tuple(round(float(lr), 12) for lr in group.lr))
                 for arm, group in firsts.groupby("arm"))  # fmt: skip


def contender_run(args, spec, run: Callable[[dict], str], cache, key: str, name: str,
                  repetition: int) -> tuple[pd.DataFrame, bool]:  # fmt: skip
    """The trials of one contender repetition's study run, and whether it was cached; a new
    one is cached for the next call."""
    tag = contender_cache_tag(args, spec, key, name, repetition)
    cached = cache.runs(grid.CONTENDER_TAG, tag)
    if not cached:
        run_id = run(contender_overrides(name, spec, repetition, args.search_range))
        cache.keep(run_id, grid.CONTENDER_TAG, tag)
    return cache.trials(cached[0] if cached else run_id), bool(cached)


def run_contenders(args, spec, run: Callable[[dict], str], cache, key: str,
                   curves: pd.DataFrame) -> pd.DataFrame:  # fmt: skip
    """Every contender's repetitions, from the cache (tagged under the grid's `key`) or trained
    by `run` (one study run of the given overrides, returning its id): one row each, its
    chosen lrs, cost and regret."""
    signs = {"dev": 1.0 if spec.metric.mode == "max" else -1.0,
             "test": 1.0 if direction(spec.analysis.primary) == "max" else -1.0}  # fmt: skip
    grid_epochs = curves.trial_epochs.sum()
    estimate_missing(args, spec, cache, key)
    rows = []
    for repetition in range(args.repetitions):
        drawn: dict[str, tuple] = {}
        for name in args.contenders:
            trials, cached = contender_run(args, spec, run, cache, key, name, repetition)
            by = "lr" if CONTENDERS[name] is None else "sample"
            chosen = chosen_lrs(trials, spec, by)
            epochs = float(trials.epoch.fillna(0).sum())
            drawn[name] = sampled_lrs(trials, by)
            same = [other for other in drawn if other != name and drawn[other] == drawn[name]]
            row = {"contender": name, "repetition": repetition, "trial_epochs": epochs,
                   "cost_share": epochs / grid_epochs, "same_draws_as": " ".join(same),
                   "arms_chose_nothing": curves.arm.nunique() - len(chosen),
                   **measure(curves, chosen, signs)}  # fmt: skip
            rows.append(row | {f"lr {arm}": lr for arm, lr in chosen.items()})
            say(args, f"{name} repetition {repetition}{' (cached)' if cached else ''}: chose "
                f"{ {arm: float(f'{lr:.3g}') for arm, lr in chosen.items()} }, regret dev "
                f"{row['regret_dev']:.4f}, cost share {row['cost_share']:.3f}"
                + (f"; drew the same lrs as {', '.join(same)}" if same else ""))  # fmt: skip
    return pd.DataFrame(rows)
