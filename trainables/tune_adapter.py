"""The one bridge between the trainable and Ray Tune (the only module here that imports ray).

Ray passes a plain dict; the study layer puts the trial's settings under `trial` and its own
bookkeeping (arm id, phase, sample id, seed) under `study`, so the tagger never sees study
vocabulary.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from ray import tune

from trainables.errors import ModelError
from trainables.measures.fingerprints import FILE_NAME as FINGERPRINT_FILE
from trainables.settings import CHECKPOINT_EVERY_S, TRIAL_CONFIG
from trainables.settings.config import TrialConfig
from trainables.settings.precision import FP32
from trainables.training.staging import owned_directory
from trainables.training.trial_folder import FINAL_FILE, MODEL_FOLDER, TrialFolder

if TYPE_CHECKING:
    from trainables.training.stages import StagedTrial
    from trainables.training.synthetic import SyntheticTrial
    from trainables.training.train import Trial

log = logging.getLogger(__name__)

# A study driver puts its one resolved precision in every trial config (study/precision.py).
# A config without one was made before that, when a trial's default was fp32; a study saved
# then and resumed now goes on in fp32 rather than mixing precisions.
PRECISION_BEFORE_RECORDED = {"precision": FP32}
MEMORY_FOLDER = Path("/dev/shm")


def staging_folder(checkpoint_bytes: int, memory: Path = MEMORY_FOLDER) -> str | None:
    """Where a checkpoint is written before Ray copies it into the study's storage.

    Every evaluation writes one (weights and Adam moments, ~270 MB for MiniLM) and Ray copies
    it at once, so the first write is only a staging copy: in memory (tmpfs) it costs no disk
    write and no journal, and leaves the disk to the copy that stays. Falls back to the
    default temporary folder (None) where there is no tmpfs or it has not twice that room.
    """
    try:
        free = shutil.disk_usage(memory).free
    except OSError:
        return None
    return str(memory) if free >= 2 * checkpoint_bytes and _writable(memory) else None


def _writable(folder: Path) -> bool:
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def train_tagger(config: dict[str, Any]) -> None:
    """Ray Tune function trainable: train, report at every evaluation, with a checkpoint as
    often as the driver asks (`CheckpointClock`).

    It trains what the trial's `trainable` setting names: the tagger, or the synthetic
    response surface (`trainables.settings.surface`); the name stays `train_tagger` because Tune
    saves it by name with every experiment.

    The checkpoint of the final report holds only the final metrics, the layer fingerprint
    and the trained tagger as a Hugging Face folder (weights as scored, no optimizer state),
    which the driver's tracking callback logs to MLflow (the model of confirm trials only,
    for study.export): a finished trial needs nothing else, and with
    `num_to_keep=1` Ray then drops the trial's last full checkpoint, so a study's storage
    holds full checkpoints only for trials still running or paused. A restored trial whose
    folder holds that final checkpoint (the driver died, or the storage went away, after the
    trial ended but before Tune's saved state said so: trainables/training/trial_folder.py)
    re-reports its result without training, and says so with `restored_final`.
    """
    # the trial's worker imports what it trains (torch for the tagger), never the driver
    from trainables.training.trials import new_trial

    # what every report of this attempt carries beside the trial's metrics
    stamp = {"node_id": ray.get_runtime_context().get_node_id()}
    trial = None
    checkpoint = tune.get_checkpoint()
    folder = _trial_folder(checkpoint)
    final = folder.final_checkpoint()
    if final is not None:
        _report_again(tune.Checkpoint(final, folder.filesystem), stamp)
        return
    if checkpoint is not None:
        checkpoint = tune.Checkpoint(folder.restore_point(), folder.filesystem)
        with checkpoint.as_directory() as directory:
            trial = new_trial(_trial_config(config))
            trial.restore(directory)
        if trial.finished and trial.last_metrics:  # a full final checkpoint of older versions
            tune.report({**trial.last_metrics, **stamp, "restored_final": True})
            return
        # every later result says where this attempt began (a retry, or --resume)
        stamp["resumed_from_step"] = float(trial.step)
    trial = trial or new_trial(_trial_config(config))
    due = CheckpointClock(config.get(CHECKPOINT_EVERY_S))
    for metrics in trial.run():
        if not (metrics.get("final") or due()):
            tune.report({**metrics, **stamp})
            continue
        with staged_checkpoint(trial, metrics) as directory:
            tune.report({**metrics, **stamp}, checkpoint=tune.Checkpoint.from_directory(directory))
        due.reset()


class CheckpointClock:
    """Whether an evaluation's report carries a checkpoint: every one (`every_s` None or 0:
    explore's trials under ASHA, where a paused seed resumes from its last), or the first at
    least `every_s` seconds after the attempt began or its last checkpoint (trials never
    paused, where a checkpoint only bounds what a crash retrains; `study.plan.
    checkpoint_every_s` says which). The final report always carries one: the driver reads
    the fingerprint and the model from it."""

    def __init__(self, every_s: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s, self.clock = every_s or 0.0, clock
        self.last = clock()

    def __call__(self) -> bool:
        return self.clock() - self.last >= self.every_s

    def reset(self) -> None:
        self.last = self.clock()


def _save_model(trial: Trial | StagedTrial | SyntheticTrial, folder: Path) -> None:
    """The trained tagger for the driver to log to a confirm trial's run (study.export); a
    family that cannot be saved as a token classifier keeps none, and says so."""
    try:
        trial.save_model(folder)
    except ModelError as err:
        shutil.rmtree(folder, ignore_errors=True)
        log.warning("the trial keeps no model: %s", err)


def _report_again(final: tune.Checkpoint, stamp: dict[str, Any]) -> None:
    """Re-report a finished trial's result with its final checkpoint, so that the driver finds
    the layer fingerprint in the checkpoint Tune registers last, whichever one its state had."""
    with final.as_directory() as directory:
        metrics = json.loads((Path(directory) / FINAL_FILE).read_text())
        tune.report(
            {**metrics, **stamp, "restored_final": True},
            checkpoint=tune.Checkpoint.from_directory(directory),
        )


def _trial_folder(checkpoint: tune.Checkpoint | None) -> TrialFolder:
    """This trial's folder in the study's storage (Ray's developer API: no public one names
    it), with the checkpoint Tune's state named for it."""
    storage = tune.get_context().get_storage()
    named = checkpoint.path if checkpoint is not None else None
    return TrialFolder(storage.storage_filesystem, storage.trial_fs_path, named)


def _trial_config(config: dict[str, Any]) -> TrialConfig:
    return TrialConfig.from_dict(PRECISION_BEFORE_RECORDED | config[TRIAL_CONFIG])


@contextmanager
def staged_checkpoint(
    trial: Trial | StagedTrial | SyntheticTrial, metrics: dict[str, Any]
) -> Iterator[str]:
    """The evaluation's checkpoint in a temporary folder, in memory where it has room. A
    memory folder that fills while it is written (other trials staging theirs at the same
    moment) gives way to the default temporary folder rather than failing the trial. A trial
    stopped while it writes leaves its folder to the next one staged there
    (trainables/training/staging.py)."""
    for where in dict.fromkeys([staging_folder(trial.checkpoint_bytes()), None]):
        with owned_directory(where) as directory:
            try:
                if metrics.get("final"):
                    (Path(directory) / FINAL_FILE).write_text(json.dumps(metrics))
                    if trial.fingerprint is not None:  # the driver logs it to MLflow
                        trial.fingerprint.save(Path(directory) / FINGERPRINT_FILE)
                    _save_model(trial, Path(directory) / MODEL_FOLDER)
                else:
                    trial.save(directory)
            except OSError:
                if where is None:
                    raise
                continue
            yield directory
            return
