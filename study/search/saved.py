"""The base of the study's searchers: state Tune saves with the experiment, and a gate on how
many trials run at once."""

from __future__ import annotations

import pickle

from ray.tune.search import Searcher


class SavedSearcher(Searcher):
    """Tune checkpoints a searcher with the experiment by calling save/restore; the whole
    state is pickled. The file is our own, written by `save` inside the experiment's folder,
    never user input. Restoring updates the object in place, so the scheduler that holds a
    reference to it sees the restored state."""

    max_running: int | None = None  # set by the scheduler from --max-concurrent
    active_trials: int = 0  # running + pending, refreshed by the scheduler at every step
    # how many trials the cluster runs side by side, set by the phase as it starts (never
    # saved: a resumed phase sets it for the cluster it resumes on); None: no such limit
    slots: int | None = None

    def _room(self) -> bool:
        """Tune starts every pending trial that fits the resources without asking the
        scheduler, so a concurrency limit must stop trials from being created at all. The
        limit is also the cluster's free slots: a trial created while every slot is taken
        only waits, and a searcher that draws its sample then (explore's Optuna) draws it
        before the results of the trials still running can inform it."""
        limits = [n for n in (self.max_running, self.slots) if n]
        return not limits or self.active_trials < min(limits)

    def _admitted(self, config: dict) -> dict:
        self.active_trials += 1
        return config

    def _released(self) -> None:
        """A trial ended: its slot is free. The scheduler recounts at its next step, but
        when no trial is left running, pending or paused, Tune waits on `suggest` without
        taking a step, so a count left at the limit would hold the study forever. (Should the
        scheduler have recounted first, the count is one low until its next step: one trial
        too many is created, and waits for resources.)"""
        self.active_trials = max(0, self.active_trials - 1)

    def save(self, checkpoint_path: str) -> None:
        state = {key: value for key, value in self.__dict__.items() if key != "slots"}
        with open(checkpoint_path, "wb") as out:
            pickle.dump(state, out)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as src:
            self.__dict__.update(pickle.load(src))
