"""The Tune schedulers of the study's phases: first in, first out under a concurrency gate
(`LimitedFIFO`, confirm), and the same with arm-aware pruning (`ArmAwareASHA`, explore).

They hold no pruning state of their own: Tune does not save scheduler state with the
experiment, so the decisions live in the explore searcher's sample book and the scheduler
only asks it. What they read of Tune's controller and trials goes through
`study.search.tune_internals`. Their attribute names are part of every experiment's saved
state (Tune pickles the scheduler), so a study saved by older code resumes only while they
stay the same.
"""

from __future__ import annotations

from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from study.names import EXPLORE
from study.search.saved import SavedSearcher
from study.search.tune_internals import (
    PAUSED,
    PENDING,
    RUNNING,
    follow_metric,
    live_trials_of,
    status_of,
    stop_trial,
    study_tags_of,
)


class LimitedFIFO(FIFOScheduler):
    """First in, first out, with at most `max_running` trials running or pending at once.

    Tune starts any pending trial that fits the resources without asking the scheduler, and
    its own `max_concurrent_trials` counts paused trials as live (a seed paused to wait for a
    sibling would then keep that sibling from ever starting). So the limit is a gate on the
    searcher: it creates a trial only while running + pending trials are below the limit,
    and this scheduler refreshes that count at every step.
    """

    def __init__(self, searcher: SavedSearcher, max_running: int | None = None):
        super().__init__()
        follow_metric(self, searcher.metric, searcher.mode)
        self._searcher = searcher
        searcher.max_running = max_running
        self.stopped_trials = 0

    @property
    def max_running(self) -> int | None:
        return self._searcher.max_running

    def _may_resume(self, trial) -> bool:
        return True

    def _tidy_paused(self, tune_controller, trials) -> None:
        """Hook: deal with paused trials that must not run again."""

    def on_trial_add(self, tune_controller, trial) -> None:
        arrival = self._arrival()
        arrival.setdefault(trial.trial_id, len(arrival))

    def _arrival(self) -> dict[str, int]:
        """Trial id -> the order Tune added it (restored trials are added again, in order);
        kept as an attribute that schedulers saved before it existed lack."""
        return self.__dict__.setdefault("arrival", {})

    def live_trials(self, tune_controller) -> list:
        """The trials not terminated, in the order they were created (first in, first out)."""
        order = self._arrival()
        live = live_trials_of(tune_controller)
        return sorted(live, key=lambda trial: order.get(trial.trial_id, len(order)))

    def choose_trial_to_run(self, tune_controller):
        trials = self.live_trials(tune_controller)
        self._tidy_paused(tune_controller, trials)
        running = sum(1 for t in trials if status_of(t) == RUNNING)
        pending = [t for t in trials if status_of(t) == PENDING]
        self._searcher.active_trials = running + len(pending)
        # a paused seed that may go on first: finishing started samples tells Optuna sooner
        if self.max_running is None or running + len(pending) < self.max_running:
            for trial in trials:
                if status_of(trial) == PAUSED and self._may_resume(trial):
                    return trial
        return pending[0] if pending else None

    def debug_string(self) -> str:
        limit = self.max_running or "any number of"
        return f"FIFO, at most {limit} trials at once; {self.stopped_trials} stopped early"


class ArmAwareASHA(LimitedFIFO):
    """Tune scheduler that prunes a sample's seeds together, comparing samples of one arm only.

    Trials run first-in first-out (seeds of a sample are suggested back to back, so they run
    side by side when concurrency allows); each result goes to the searcher's sample book,
    whose per-arm Ray ASHA decides for the whole sample.
    """

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        tags = study_tags_of(trial)
        if tags.get("phase") != EXPLORE:
            return TrialScheduler.CONTINUE
        decision = self._searcher.decide(tags, result)
        if decision == TrialScheduler.STOP:
            self.stopped_trials += 1
            # the sample is now stopped: its seeds paused at the rung go with it at once
            self._tidy_paused(tune_controller, self.live_trials(tune_controller))
        return decision

    def _tidy_paused(self, tune_controller, trials) -> None:
        """A seed paused while its sample was stopped (a pause in flight, or an errored
        sibling) is stopped rather than resumed."""
        for trial in trials:
            if status_of(trial) == PAUSED and self._searcher.is_stopped(study_tags_of(trial)):
                self.stopped_trials += 1
                stop_trial(tune_controller, trial)

    def _may_resume(self, trial) -> bool:
        """A paused seed runs again only once its sample's last rung is decided."""
        return not self._searcher.waiting_at_last_rung(study_tags_of(trial))
