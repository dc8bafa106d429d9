"""The one bridge between the trainable and Ray Tune (the only module here that imports ray).

Ray passes a plain dict; the study layer puts the trial's settings under `trial` and its own
bookkeeping (arm id, phase, sample id) beside it, so the tagger never sees study vocabulary.
"""

from __future__ import annotations

import tempfile
from typing import Any

from ray import tune

from trainables.config import TrialConfig
from trainables.train import Trial

TRIAL_KEY = "trial"


def train_tagger(config: dict[str, Any]) -> None:
    """Ray Tune function trainable: train, report at every evaluation with a checkpoint."""
    trial = Trial(TrialConfig.from_dict(config[TRIAL_KEY]))
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as directory:
            trial.restore(directory)
    for metrics in trial.run():
        with tempfile.TemporaryDirectory() as directory:
            trial.save(directory)
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(directory))
