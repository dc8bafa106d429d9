"""Where the Tune adapter stages a checkpoint before Ray copies it into the study's storage."""

import errno
import os
import tempfile
from pathlib import Path

import pytest

from trainables.settings.config import TrialConfig
from trainables.training.train import Trial
from trainables.tune_adapter import MEMORY_FOLDER, staged_checkpoint, staging_folder


def test_a_checkpoint_is_staged_in_memory_when_there_is_twice_its_room(tmp_path):
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    assert staging_folder(1024, memory=tmp_path) == str(tmp_path)
    assert staging_folder(free // 2 + 1024**2, memory=tmp_path) is None  # not twice the room


def test_no_memory_folder_falls_back_to_the_default_temporary_folder(tmp_path):
    assert staging_folder(1024, memory=tmp_path / "absent") is None
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    assert staging_folder(1024, memory=a_file) is None  # exists, but holds no files


def test_the_estimate_is_what_a_trained_trial_writes(trial_settings, tmp_path):
    """The room asked for follows the real checkpoint: weights plus two Adam moments (the
    files' own headers, a few tens of kB, are what it leaves out; it asks for twice)."""
    trial = Trial(TrialConfig.from_dict(trial_settings))
    next(iter(trial.run()))
    trial.save(tmp_path)
    written = sum(f.stat().st_size for f in tmp_path.iterdir())
    assert 0.8 * written <= trial.checkpoint_bytes() <= written


needs_memory_folder = pytest.mark.skipif(
    staging_folder(1024) is None, reason="no writable tmpfs at /dev/shm on this machine"
)


@needs_memory_folder
def test_an_evaluation_checkpoint_is_staged_in_memory_and_removed_after(trial_settings):
    trial = Trial(TrialConfig.from_dict(trial_settings))
    metrics = next(iter(trial.run()))
    with staged_checkpoint(trial, metrics) as directory:
        assert Path(directory).parent == MEMORY_FOLDER
        resumed = Trial(TrialConfig.from_dict(trial_settings))
        resumed.restore(directory)
        assert resumed.step == metrics["step"]
    assert not Path(directory).exists()


class _FillsMemory:
    """A trial whose save finds the memory folder full, as when other trials stage theirs."""

    def __init__(self) -> None:
        self.tried: list[Path] = []

    def checkpoint_bytes(self) -> int:
        return 1024

    def save(self, directory: str) -> None:
        self.tried.append(Path(directory).parent)
        if Path(directory).parent == MEMORY_FOLDER:
            raise OSError(errno.ENOSPC, "No space left on device")
        (Path(directory) / "model.safetensors").write_bytes(b"weights")


@needs_memory_folder
def test_a_memory_folder_that_fills_gives_way_to_the_disk():
    trial = _FillsMemory()
    with staged_checkpoint(trial, {"step": 5}) as directory:
        assert (Path(directory) / "model.safetensors").read_bytes() == b"weights"
    assert trial.tried == [MEMORY_FOLDER, Path(tempfile.gettempdir())]
