"""A finished trial's layer fingerprint, from its final checkpoint to an artifact of its MLflow
trial run (`fingerprint/fingerprint.safetensors`), and back from there for the report
(`read_fingerprints`); likewise a confirm trial's trained tagger (`model/`, a Hugging Face
folder), which study.export downloads.

The trial writes the file into its final checkpoint (trials never talk to MLflow); the driver
copies it out when the trial completes, while the checkpoint still exists (a finished phase
deletes its trials' checkpoints, study/execution/tuner.py), and logs the copy, queued like
every other write while the store is down. The checkpoint may live on remote storage, so it
is read through its own filesystem, never as a local path. A trial restored after a restart
completes again with the same final checkpoint: its artifact is logged only when the run does
not hold it already, whole.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow.fs as pafs
from mlflow.environment_variables import MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from study.names import FINGERPRINT_ARTIFACT, MODEL_ARTIFACT
from study.tracking.store import StudyTracker
from trainables.measures.fingerprints import FILE_NAME, LayerFingerprint
from trainables.training.trial_folder import MODEL_FOLDER

log = logging.getLogger(__name__)


def _copy_out(checkpoint, name: str, kind: pafs.FileType) -> Path | None:
    """The file or folder `name` of a Ray checkpoint copied into a new local temporary folder,
    or None when the checkpoint holds none."""
    if checkpoint is None:
        return None
    source = f"{checkpoint.path.rstrip('/')}/{name}"
    if checkpoint.filesystem.get_file_info(source).type != kind:
        return None
    local = Path(tempfile.mkdtemp(prefix=f"{Path(name).stem}-")) / name
    if kind == pafs.FileType.Directory:
        local.mkdir()  # copy_files writes into a folder that is there
    pafs.copy_files(source, str(local), source_filesystem=checkpoint.filesystem,
                    destination_filesystem=pafs.LocalFileSystem())  # fmt: skip
    return local


def copy_fingerprint(checkpoint) -> Path | None:
    """The fingerprint file of a Ray checkpoint, copied out (None when it holds none)."""
    return _copy_out(checkpoint, FILE_NAME, pafs.FileType.File)


def log_fingerprint(tracker: StudyTracker, run_id: str, local: Path) -> None:
    """Log the copied file to the trial run unless the run holds it whole already, then
    remove the copy."""
    size = local.stat().st_size
    logged = tracker.client.list_artifacts(run_id, FINGERPRINT_ARTIFACT)
    if not any(f.path == f"{FINGERPRINT_ARTIFACT}/{local.name}" and f.file_size == size
               for f in logged):  # fmt: skip
        tracker.client.log_artifact(run_id, str(local), FINGERPRINT_ARTIFACT)
    shutil.rmtree(local.parent, ignore_errors=True)


def copy_model(checkpoint) -> Path | None:
    """The Hugging Face folder of a Ray checkpoint, copied out (None when it holds none: a
    synthetic trial's)."""
    return _copy_out(checkpoint, MODEL_FOLDER, pafs.FileType.Directory)


def log_model(tracker: StudyTracker, run_id: str, local: Path) -> None:
    """Log the copied folder to the trial run as `model/` (again after a restart: the same
    files are written over), then remove the copy."""
    tracker.client.log_artifacts(run_id, str(local), MODEL_ARTIFACT)
    shutil.rmtree(local.parent, ignore_errors=True)


def read_fingerprints(
    tracking_uri: str, runs: list[str], folder: Path
) -> dict[str, LayerFingerprint]:
    """Each run's fingerprint, downloaded into `folder`; a run whose artifact is missing (its
    upload was lost while the store was down) is left out, and the report counts what it
    compared."""
    client, out = MlflowClient(tracking_uri), {}
    with no_progress_bars():
        for run in runs:
            fingerprint = _download(client, run, folder)
            if fingerprint is not None:
                out[run] = fingerprint
    return out


@contextlib.contextmanager
def no_progress_bars() -> Iterator[None]:
    """MLflow draws a progress bar on stderr for every file it downloads."""
    name = MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR.name
    before = os.environ.get(name)
    os.environ[name] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def download_model(tracking_uri: str, run_id: str, folder: Path) -> Path:
    """A trial run's model folder (its `model/` artifact) downloaded into `folder`, without
    progress bars; its local path. MlflowException or OSError when the run kept none."""
    with no_progress_bars():
        client = MlflowClient(tracking_uri)
        return Path(client.download_artifacts(run_id, MODEL_ARTIFACT, str(folder)))


def _download(client: MlflowClient, run: str, folder: Path) -> LayerFingerprint | None:
    (folder / run).mkdir()
    try:
        path = client.download_artifacts(run, f"{FINGERPRINT_ARTIFACT}/{FILE_NAME}",
                                         str(folder / run))  # fmt: skip
        return LayerFingerprint.load(path)
    except (MlflowException, OSError, ValueError):  # missing, or not a fingerprint
        return None
