"""The one bridge between the trainable and Ray Tune (the only module here that imports ray).

Ray passes a plain dict; the study layer puts the trial's settings under `trial` and its own
bookkeeping (arm id, phase, sample id, seed) under `study`, so the tagger never sees study
vocabulary.
"""

from __future__ import annotations

import tempfile
from typing import Any

import ray
from ray import tune

from trainables.config import TrialConfig
from trainables.train import Trial

TRIAL_KEY = "trial"


def train_tagger(config: dict[str, Any]) -> None:
    """Ray Tune function trainable: train, report at every evaluation with a checkpoint.

    A trial restored from its final checkpoint (the driver died after the trial ended but
    before Ray saved that fact) has nothing left to train; it re-reports its final metrics
    so Tune and the tracker see it as completed rather than stopped early.
    """
    trial = Trial(TrialConfig.from_dict(config[TRIAL_KEY]))
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as directory:
            trial.restore(directory)
    node = {"node_id": ray.get_runtime_context().get_node_id()}
    if trial.finished and trial.last_metrics:
        tune.report({**trial.last_metrics, **node, "restored_final": True})
        return
    for metrics in trial.run():
        with tempfile.TemporaryDirectory() as directory:
            trial.save(directory)
            tune.report({**metrics, **node}, checkpoint=tune.Checkpoint.from_directory(directory))
