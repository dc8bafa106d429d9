"""Checkpoint storage: bounded while a study runs, empty of checkpoints once it is done, and a
disk that fills mid-study stops it with one line and a state that `--resume` finishes.

The full disk is real: a 64 MB tmpfs mounted in a private mount namespace (`unshare`), that
the test fills with `dd` once the first trial has finished, cutting Tune's saved experiment
state short as a copy onto a full disk does."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections import Counter

import pyarrow.fs as pafs
import pytest

from study.execution.saved_state import (
    RESERVE_FILE,
    SpaceReserve,
    check_restorable,
    damaged_state,
    has_saved_state,
)
from study.execution.storage import trial_folders
from study.execution.storage_guard import (
    StorageFull,
    is_storage_full,
    no_space_reason,
    says_no_space,
)
from study.execution.tuner import _drop_checkpoints
from study.names import DRIVERS_TAG
from tests.study_helpers import REPO, runs_by_kind, study_command, write_synthetic_twin
from trainables.errors import UserInputError

SCENARIO = r"""
set -u
mount -t tmpfs -o size=64m tmpfs "$MNT" || exit 90
"$@" > "$LOG1" 2>&1 &
pid=$!
i=0
until grep -q "trial finished:" "$LOG1" || [ $i -gt 1200 ]; do sleep 0.25; i=$((i+1)); done
dd if=/dev/zero of="$MNT/filler" bs=1M 2>/dev/null
df -k "$MNT" > "$DF"
# what a copy cut short by the full disk leaves of Tune's experiment state (seen in CI: the
# resume then restarted the phase with nothing to suggest and waited forever)
for f in "$MNT"/ray_results/*/*/*/experiment_state-*.json; do truncate -s 100 "$f"; done
wait $pid; echo $? > "$RC1"
rm -f "$MNT/filler"
"$@" --resume > "$LOG2" 2>&1; echo $? > "$RC2"
find "$MNT" \( -name "checkpoint_*" -o -name .space-reserve \) > "$LEFT"
"""


def test_full_device_errors_are_recognised_through_their_causes():
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("experiment state could not be written") from inner
    except RuntimeError as outer:
        assert is_storage_full(outer)
        assert no_space_reason(outer) == "[Errno 28] No space left on device"
    assert is_storage_full(StorageFull("x"))
    assert says_no_space("pyarrow: IOError: [Errno 28] Error writing bytes to file")
    assert not is_storage_full(RuntimeError("loss is NaN")) and not is_storage_full(None)


def test_a_finished_phase_drops_the_checkpoints_of_trials_its_saved_state_never_named(tmp_path):
    """A trial Tune created after its last state save (the save a full disk refused) has a
    folder and a checkpoint that no saved trial points to: a finished phase keeps neither
    checkpoint, and keeps the trials' results."""
    phase = tmp_path / "explore"
    for trial in ("saved_00000", "after_the_last_save_00001"):
        (phase / trial / "checkpoint_000000").mkdir(parents=True)
        (phase / trial / "checkpoint_000000" / "state.pt").write_bytes(b"x" * 1000)
        (phase / trial / "result.json").write_text("{}")
    (phase / "experiment_state-2026-01-01_00-00-00.json").write_text("{}")
    folders = trial_folders(pafs.LocalFileSystem(), str(phase))
    assert sorted(os.path.basename(path) for _, path in folders) == [
        "after_the_last_save_00001", "saved_00000"
    ]  # fmt: skip
    _drop_checkpoints("explore", folders)
    assert sorted(p.relative_to(phase).as_posix() for p in phase.rglob("*")) == [
        "after_the_last_save_00001", "after_the_last_save_00001/result.json",
        "experiment_state-2026-01-01_00-00-00.json", "saved_00000", "saved_00000/result.json",
    ]  # fmt: skip
    assert trial_folders(pafs.LocalFileSystem(), str(tmp_path / "never_started")) == []


def test_a_damaged_experiment_state_is_refused_in_one_line_not_restarted(tmp_path):
    fs, phase = pafs.LocalFileSystem(), tmp_path / "explore"
    phase.mkdir()
    assert damaged_state(fs, str(phase)) is None  # nothing saved yet is Tune's to say
    (phase / "experiment_state-2026-01-01_00-00-00.json").write_text('{"trial_data": []}')
    check_restorable(fs, str(phase), "explore")
    (phase / "experiment_state-2026-01-02_00-00-00.json").write_text('{"trial_data": [["x')
    with pytest.raises(UserInputError) as refused:  # the newest one is what Tune would read
        check_restorable(fs, str(phase), "explore")
    line = str(refused.value)
    assert "\n" not in line and "cannot resume phase explore" in line
    assert "experiment_state-2026-01-02_00-00-00.json" in line and "without --resume" in line


def test_a_phase_stopped_before_its_first_save_starts_afresh(tmp_path):
    """A Tuner writes `tuner.pkl` when it is made; a driver killed before Tune's first save
    leaves only that, and such a phase is made anew rather than restored (Tune would run one
    trial of it and never finish). Seen when a kill came as a confirm round started."""
    fs, phase = pafs.LocalFileSystem(), tmp_path / "confirm-round1"
    phase.mkdir()
    (phase / "tuner.pkl").write_bytes(b"...")
    assert not has_saved_state(fs, str(phase))
    (phase / "experiment_state-2026-01-01_00-00-00.json").write_text('{"trial_data": []}')
    assert has_saved_state(fs, str(phase))


def test_space_reserve_holds_real_blocks_and_frees_them(tmp_path):
    reserve = SpaceReserve(pafs.LocalFileSystem(), str(tmp_path), size=2 * 1024**2)
    reserve.hold()
    held = (tmp_path / RESERVE_FILE).stat()
    assert held.st_size == 2 * 1024**2 and held.st_blocks * 512 >= held.st_size  # not sparse
    reserve.hold()  # a resumed study holds the same file again
    reserve.release()
    assert not (tmp_path / RESERVE_FILE).exists()
    reserve.release()


@pytest.mark.study
def test_finished_study_keeps_no_checkpoints(finished_study):
    tmp, done = finished_study
    assert not list((tmp / "ray_results").rglob("checkpoint_*"))
    assert "removed finished trials' checkpoints" in done.stderr


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"], capture_output=True
    )
    return probe.returncode == 0


@pytest.mark.study
@pytest.mark.skipif(not _can_unshare(), reason="needs `unshare -rm` to mount a small tmpfs")
def test_full_disk_stops_with_one_line_and_resumes(tmp_path):
    """The driver's and Tune's writes meeting a full disk, on the synthetic twin of the tiny
    study (tests/study_helpers.py: the same 12 trials, checkpointed through the same trial
    folders, a small state file where a tagger saves weights; `dd` fills the disk either way)."""
    study = write_synthetic_twin(tmp_path)
    mnt = tmp_path / "small_disk"
    mnt.mkdir()
    files = {name: tmp_path / name for name in ("LOG1", "LOG2", "RC1", "RC2", "DF", "LEFT")}
    command = study_command(study, tmp_path, "--storage", str(mnt / "ray_results"))
    env = {"MNT": str(mnt), **{k: str(v) for k, v in files.items()}, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", SCENARIO, "scenario", *command],
        cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    first, second = files["LOG1"].read_text(), files["LOG2"].read_text()
    # really full: dd took every block; a trial may free a checkpoint's few hundred kB just
    # after it, when two run at once
    assert int(files["DF"].read_text().split()[-3]) < 1024, files["DF"].read_text()

    assert files["RC1"].read_text().strip() == "3", first[-3000:]
    last = first.strip().splitlines()[-1]
    assert last.startswith(f"error: the study's storage {mnt / 'ray_results'} is full ("), last
    assert "[Errno 28]" in last and "No space left on device" in last, last
    assert last.endswith(
        "then resume with: python -m study.run teststudy --profile default --resume"
    )

    assert files["RC2"].read_text().strip() == "0", second[-3000:]
    runs = runs_by_kind(tmp_path)
    assert len(runs["study"]) == 1 and runs["study"][0].data.tags["state"] == "finished"
    assert runs["study"][0].data.tags[DRIVERS_TAG] == "2"  # the driver the disk stopped counts
    keys = Counter(r.data.tags["trial_key"] for r in runs["trial"])
    assert len(keys) == 12 and set(keys.values()) == {1}, keys
    statuses = {r.data.tags["status"] for r in runs["trial"]}
    assert statuses <= {"completed", "pruned"}, statuses  # no trial blamed for the disk
    # and the finished study keeps no checkpoints, nor its space reserve
    assert files["LEFT"].read_text() == ""
