"""A study's phases in order: explore, then confirm in rounds; a phase the study's state file
records as done is not run again, which is what lets `--resume` skip it.

The state file is written after every step, so an interruption at any point resumes inside
the step that was running, with the samples already chosen.
"""

from __future__ import annotations

from study.execution.context import PhaseContext
from study.execution.rounds import run_confirm_rounds
from study.execution.state import StudyState, write_state
from study.execution.tuner import run_experiment
from study.names import CONFIRM, EXPLORE
from study.search import ArmAwareASHA, ArmSearcher, choose_samples
from study.tracking.reading import trial_results


def run_phases(context: PhaseContext, state: StudyState) -> bool:
    """Run explore then confirm; True once both are done, False when interrupted."""
    done = set(state.phases_done)
    spec = context.spec
    if spec.explore is not None and EXPLORE not in done:
        if not run_explore(context):
            return False
        state.phases_done.append(EXPLORE)
        write_state(context.store, context.study_dir, state)
    if spec.confirm is not None and CONFIRM not in done:
        if state.chosen is None:
            explore = trial_results(context.tracking_uri, context.study_run, EXPLORE)
            state.chosen = choose_samples(spec, context.plan.arms, explore)
            write_state(context.store, context.study_dir, state)
        if not run_confirm_rounds(context, state, state.chosen):
            return False
        state.phases_done.append(CONFIRM)
        write_state(context.store, context.study_dir, state)
    return True


def run_explore(context: PhaseContext) -> bool:
    searcher = ArmSearcher(
        context.spec,
        context.plan.arms,
        optuna_storage=context.optuna_storage,
        optuna_prefix=context.study_dir,
    )
    scheduler = ArmAwareASHA(searcher, context.max_concurrent)
    phase = next(p for p in context.plan.phases if p.name == EXPLORE)
    return run_experiment(context, EXPLORE, searcher, scheduler, phase.trials)
