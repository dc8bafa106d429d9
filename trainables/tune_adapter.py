"""The one bridge between the trainable and Ray Tune (the only module here that imports ray).

Ray passes a plain dict; the study layer puts the trial's settings under `trial` and its own
bookkeeping (arm id, phase, sample id, seed) under `study`, so the tagger never sees study
vocabulary.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import ray
from ray import tune

from trainables.config import TrialConfig

TRIAL_KEY = "trial"
FINAL_FILE = "final_result.json"


def train_tagger(config: dict[str, Any]) -> None:
    """Ray Tune function trainable: train, report at every evaluation with a checkpoint.

    The checkpoint of the final report holds only the final metrics (a few kB, not the
    weights and optimizer state): a finished trial needs nothing else, and with
    `num_to_keep=1` Ray then drops the trial's last full checkpoint, so a study's storage
    holds full checkpoints only for trials still running or paused. A trial restored from
    that final checkpoint (the driver died after the trial ended but before Ray saved that
    fact) re-reports its result without training, and says so with `restored_final`.
    """
    from trainables.train import Trial  # torch: imported in the trial's worker, not the driver

    node = {"node_id": ray.get_runtime_context().get_node_id()}
    trial = None
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as directory:
            final = Path(directory) / FINAL_FILE
            if final.is_file():
                tune.report({**json.loads(final.read_text()), **node, "restored_final": True})
                return
            trial = Trial(TrialConfig.from_dict(config[TRIAL_KEY]))
            trial.restore(directory)
        if trial.finished and trial.last_metrics:  # a full final checkpoint of older versions
            tune.report({**trial.last_metrics, **node, "restored_final": True})
            return
    trial = trial or Trial(TrialConfig.from_dict(config[TRIAL_KEY]))
    for metrics in trial.run():
        with tempfile.TemporaryDirectory() as directory:
            if metrics.get("final"):
                (Path(directory) / FINAL_FILE).write_text(json.dumps(metrics))
            else:
                trial.save(directory)
            tune.report({**metrics, **node}, checkpoint=tune.Checkpoint.from_directory(directory))
