"""The confirm phase in rounds: held-out seeds added until every comparison is decided.

Round 0 runs the first `seeds` confirm seeds of every arm. After each round the driver reads
the primary metric back from MLflow and applies the group-sequential rule declared in the study
file (`study.stats.sequential_decision`): an arm runs the next round only while one of its
comparisons is undecided, up to `max_seeds`. Each round is its own Ray experiment, and the
rounds done and the arms still running are in the study's state file, so `--resume` continues
inside the round that was interrupted with the same arms.
"""

from __future__ import annotations

import logging
from typing import Any

from study.execution.context import PhaseContext
from study.execution.state import StudyState, write_state
from study.execution.tuner import run_experiment
from study.names import EXPLORE, REUSED_TAG
from study.plan import round_name
from study.search import LimitedFIFO, PlannedSearcher, completed_explore_trials, confirm_configs
from study.tracking import StudyTracker
from study.tracking.reading import load_study_record, trial_results

log = logging.getLogger(__name__)


def run_confirm_rounds(
    context: PhaseContext, state: StudyState, chosen: dict[str, list[dict]]
) -> bool:
    """True once the last needed round finished; False when interrupted."""
    confirm = context.spec.confirm
    done = state.confirm_rounds
    # the arms still in the rounds; [] once every comparison is decided
    arms = state.confirm_arms
    if arms is None:
        arms = [arm.id for arm in context.plan.arms]
    skip = _reused(context, state, chosen)
    for index in range(len(done), len(confirm.looks)):
        if index and not arms:
            break
        active = [arm for arm in context.plan.arms if arm.id in arms]
        seeds = confirm.round_seeds(index)
        log.info("confirm round %d: seeds %s, arms %s", index, list(seeds), arms)
        if not run_confirm(context, chosen, round_name(index), active, seeds, skip):
            return False
        done.append(list(arms))
        if index + 1 < len(confirm.looks):
            arms = undecided_arms(context, arms)
            state.confirm_arms = arms
        write_state(context.store, context.study_dir, state)
    return True


def run_confirm(
    context: PhaseContext,
    chosen: dict[str, list[dict[str, Any]]],
    name: str,
    arms: list,
    seeds: tuple[int, ...],
    skip: frozenset[tuple[str, int]] = frozenset(),
) -> bool:
    """One confirm round (a Ray experiment of its own): the given arms on the given seeds."""
    configs = confirm_configs(context.spec, arms, chosen, seeds, skip)
    if not configs:
        return True
    searcher = PlannedSearcher(context.spec, configs)
    scheduler = LimitedFIFO(searcher, context.max_concurrent)
    return run_experiment(context, name, searcher, scheduler, len(configs))


def undecided_arms(context: PhaseContext, arms: list[str]) -> list[str]:
    """The arms with at least one primary comparison the sequential rule leaves open."""
    from study import stats  # the statistics stack loads once trials have stopped

    spec = context.spec
    record = load_study_record(context.tracking_uri, spec.name, context.study_run)
    scores = record.scores()
    ids = [arm.id for arm in context.plan.arms]
    factors = [arm.factors for arm in context.plan.arms]
    pairs = stats.arm_pairs(factors, spec.grid, spec.compare_baseline)
    metric = spec.analysis.primary
    higher = stats.direction(metric) == "max"
    still: set[str] = set()
    for a, b, _ in pairs:
        if ids[a] not in arms and ids[b] not in arms:
            continue
        decision, _ = stats.sequential_decision(
            scores.get(ids[a], {}).get(metric, {}),
            scores.get(ids[b], {}).get(metric, {}),
            spec.analysis,
            len(pairs),
            higher,
            more_can_come=True,
        )
        log.info("confirm: %s vs %s on %s after %d units: %s", ids[a], ids[b], metric,
                 decision.n, decision.verdict)  # fmt: skip
        if decision.verdict == "continue":
            still |= {ids[a], ids[b]}
    return [arm for arm in ids if arm in still]


def _reused(
    context: PhaseContext, state: StudyState, chosen: dict[str, list[dict]]
) -> frozenset[tuple[str, int]]:
    """With `reuse_explore_seeds`, the (arm, seed) pairs whose explore trial of the chosen
    sample completed: they are not run again, and their MLflow runs are tagged to count as
    confirm trials (no trial with the same config and seed runs twice in one study)."""
    if not context.spec.confirm.reuse_explore_seeds or context.spec.explore is None:
        return frozenset()
    if state.reused is None:
        explore = trial_results(context.tracking_uri, context.study_run, EXPLORE)
        state.reused = completed_explore_trials(context.spec, chosen, explore)
        tracker = StudyTracker(context.tracking_uri, context.spec.name)
        tracker.tag_trial_runs(context.study_run, EXPLORE, state.reused, {REUSED_TAG: "true"})
        write_state(context.store, context.study_dir, state)
    return frozenset((arm, seed) for arm, _, seed in state.reused)
