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

    max_running: int | None = None  # set by the scheduler; None: as many as resources allow
    active_trials: int = 0  # running + pending, refreshed by the scheduler at every step

    def _room(self) -> bool:
        """Tune starts every pending trial that fits the resources without asking the
        scheduler, so a concurrency limit must stop trials from being created at all."""
        return self.max_running is None or self.active_trials < self.max_running

    def _admitted(self, config: dict) -> dict:
        self.active_trials += 1
        return config

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as out:
            pickle.dump(self.__dict__, out)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as src:
            self.__dict__.update(pickle.load(src))
