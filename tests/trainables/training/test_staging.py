"""Staging folders left by a process that ended inside one are removed by the next process that
stages there, and only those (trainables/training/staging.py)."""

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.study_helpers import REPO
from trainables.training import staging
from trainables.training.staging import LOCK_SUFFIX, PREFIX, owned_directory, remove_abandoned

# a writer that makes a staging folder, writes into it, says where, and waits to be killed
WRITER = textwrap.dedent(
    """
    import sys, time
    from trainables.training.staging import owned_directory
    with owned_directory(sys.argv[1]) as directory:
        open(directory + "/model.safetensors", "wb").write(b"half a checkpoint")
        print(directory, flush=True)
        time.sleep(600)
    """
)


def _start_writer(folder: Path) -> tuple[subprocess.Popen, Path]:
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(folder)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    directory = Path(writer.stdout.readline().strip())
    writer.stdout.close()
    return writer, directory


def _staged(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_folder_is_removed_with_its_lock_on_a_normal_exit(tmp_path):
    with owned_directory(str(tmp_path)) as directory:
        (Path(directory) / "state.pt").write_bytes(b"x")
        assert Path(directory).name.startswith(PREFIX)
        assert _staged(tmp_path) == sorted(
            [Path(directory).name, Path(directory).name + LOCK_SUFFIX]
        )
    assert _staged(tmp_path) == []


def test_a_killed_writers_folder_goes_and_a_live_writers_stays(tmp_path):
    killed, left = _start_writer(tmp_path)
    alive, kept = _start_writer(tmp_path)
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        assert (left / "model.safetensors").exists()  # what a killed trial leaves behind
        assert remove_abandoned(tmp_path, settle_seconds=0) == [left]
        assert not left.exists() and not Path(str(left) + LOCK_SUFFIX).exists()
        assert (kept / "model.safetensors").exists()
    finally:
        alive.kill()
        alive.wait()
    assert remove_abandoned(tmp_path, settle_seconds=0) == [kept]
    assert _staged(tmp_path) == []


def test_the_next_staging_removes_what_a_dead_writer_left(tmp_path):
    writer, left = _start_writer(tmp_path)
    writer.kill()
    writer.wait()
    lock = Path(str(left) + LOCK_SUFFIX)
    os.utime(lock, (1.0, 1.0))  # older than the settling time
    with owned_directory(str(tmp_path)) as directory:
        assert _staged(tmp_path) == sorted(
            [Path(directory).name, Path(directory).name + LOCK_SUFFIX]
        )


def test_a_young_lock_and_other_folders_are_left_alone(tmp_path):
    writer, left = _start_writer(tmp_path)
    writer.kill()
    writer.wait()
    (tmp_path / "tmpabc123").mkdir()  # not ours: no prefix, no lock
    assert remove_abandoned(tmp_path) == []  # its lock is seconds old
    assert left.exists() and (tmp_path / "tmpabc123").exists()


def test_a_filesystem_without_locks_still_stages(tmp_path, monkeypatch):
    def no_locks(*_args):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(staging.fcntl, "flock", no_locks)
    with owned_directory(str(tmp_path)) as directory:
        (Path(directory) / "state.pt").write_bytes(b"x")
    assert _staged(tmp_path) == []


def test_a_folder_that_cannot_be_removed_keeps_its_lock_for_a_later_sweep(tmp_path, monkeypatch):
    writer, left = _start_writer(tmp_path)
    writer.kill()
    writer.wait()
    monkeypatch.setattr(staging.shutil, "rmtree", lambda *_a, **_k: None)  # as if it failed
    assert remove_abandoned(tmp_path, settle_seconds=0) == []
    assert Path(str(left) + LOCK_SUFFIX).exists()
    monkeypatch.undo()
    assert remove_abandoned(tmp_path, settle_seconds=0) == [left]
