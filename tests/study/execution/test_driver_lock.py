"""One driver per study at a time (study/execution/driver_lock.py): a second driver of the
same study on the same storage refuses with one line naming the first, or waits with
--wait; a killed driver's lock is taken over; a refused study leaves the storage as it was."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from study.execution import driver_lock
from study.execution.driver_lock import LOCK_FILE, DriverLock, stale
from study.execution.storage import StudyStore
from study.tracking import start
from tests.study_helpers import (
    REPO,
    run_in_process,
    runs_by_kind,
    study_command,
    write_synthetic_study,
)
from trainables.errors import UserInputError

SURFACE = {"peak_f1": 0.8}


def _holder(pid: int, beat: float, host: str | None = None) -> dict:
    return {"host": host or socket.gethostname(), "pid": pid, "since": beat - 10, "beat": beat,
            "token": "t" * 32}  # fmt: skip


@pytest.fixture
def sleeper():
    """A live process of this host other than the test's own."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_second_driver_refuses_while_the_first_holds_the_lock(tmp_path: Path) -> None:
    store = StudyStore(str(tmp_path / "ray_results"))
    first = DriverLock(store, "s")
    first.acquire()
    try:
        held = json.loads((tmp_path / "ray_results" / "s" / LOCK_FILE).read_text())
        assert held["pid"] == os.getpid()
        with pytest.raises(UserInputError, match=rf"another driver \(host .*, pid {os.getpid()}"):
            DriverLock(store, "s").acquire()
        DriverLock(store, "other").acquire()  # another study: its own lock
    finally:
        first.release()
    assert not (tmp_path / "ray_results" / "s" / LOCK_FILE).exists()
    again = DriverLock(store, "s")
    again.acquire()
    again.release()


def test_a_killed_drivers_lock_is_taken_over(tmp_path: Path, sleeper) -> None:
    store = StudyStore(str(tmp_path))
    (tmp_path / "s").mkdir()
    lock_file = tmp_path / "s" / LOCK_FILE
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    lock_file.write_text(json.dumps(_holder(int(dead.stdout), time.time())))
    with DriverLock(store, "s"):  # its holder has ended: taken over at once
        assert json.loads(lock_file.read_text())["pid"] == os.getpid()
    lock_file.write_text(json.dumps(_holder(sleeper.pid, time.time())))
    with pytest.raises(UserInputError, match=f"pid {sleeper.pid}"):
        DriverLock(store, "s").acquire()
    far = _holder(12345, time.time() - driver_lock.STALE_S - 5, host="another-host")
    lock_file.write_text(json.dumps(far))
    with DriverLock(store, "s"):  # another host's lock, not re-written for too long
        pass
    near = _holder(12345, time.time(), host="another-host")
    assert not stale(near) and stale(far)


def test_wait_waits_for_the_first_driver(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(driver_lock, "WAIT_POLL_S", 0.05)
    store = StudyStore(str(tmp_path))
    first = DriverLock(store, "s")
    first.acquire()
    got = []

    def second() -> None:
        with DriverLock(store, "s", wait=True):
            got.append(time.monotonic())

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(0.5)
    assert not got  # still waiting
    released = time.monotonic()
    first.release()
    thread.join(timeout=10)
    assert got and got[0] >= released


def test_the_object_storage_path_reads_its_write_back(tmp_path: Path) -> None:
    """Where there is no exclusive create (S3), the lock is written and read back."""
    store = StudyStore(str(tmp_path))
    first = DriverLock(store, "s")
    first.local = False
    first.acquire()
    second = DriverLock(store, "s")
    second.local = False
    with pytest.raises(UserInputError, match="another driver"):
        second.acquire()
    first.release()
    assert not (tmp_path / "s").exists()  # the folder it made held nothing else


def test_the_heartbeat_rewrites_the_lock(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(driver_lock, "BEAT_S", 0.05)
    store = StudyStore(str(tmp_path))
    with DriverLock(store, "s") as lock:
        before = lock.record["beat"]
        time.sleep(0.3)
        beat = json.loads((tmp_path / "s" / LOCK_FILE).read_text())["beat"]
        assert beat > before


def test_the_command_refuses_a_second_driver_and_writes_nothing(tmp_path: Path, sleeper) -> None:
    study = write_synthetic_study(tmp_path, SURFACE)
    lock_file = tmp_path / "ray_results" / "teststudy" / LOCK_FILE
    lock_file.parent.mkdir(parents=True)
    lock_file.write_text(json.dumps(_holder(sleeper.pid, time.time())))
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code, _, err = run_in_process(study_command(study, tmp_path))
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert f"pid {sleeper.pid}" in lines[0] and "--wait" in lines[0]
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_a_refused_study_leaves_no_lock_folder(tmp_path: Path) -> None:
    study = write_synthetic_study(tmp_path, SURFACE)
    code, _, err = run_in_process(study_command(study, tmp_path, "--resume"))
    assert code == 2 and "--resume" in err
    assert not (tmp_path / "ray_results").exists()


def test_a_schema_race_is_retried_not_reported_as_a_bad_uri(monkeypatch) -> None:
    calls = []

    class Racing:
        def __init__(self, uri: str, experiment: str):
            calls.append(uri)
            if len(calls) == 1:
                raise RuntimeError("Online migration expected to match one row when updating "
                                   "'x' to 'y' in 'alembic_version'; 0 found")  # fmt: skip

    monkeypatch.setattr(start, "StudyTracker", Racing)
    monkeypatch.setattr(start.time, "sleep", lambda s: None)
    assert isinstance(start.connect_tracking("sqlite:///x.db", "s"), Racing)
    assert len(calls) == 2
    monkeypatch.setattr(start, "StudyTracker", lambda *a: (_ for _ in ()).throw(OSError("no")))
    with pytest.raises(UserInputError, match="cannot be used: no"):
        start.connect_tracking("sqlite:///x.db", "s")


@pytest.mark.slow
def test_two_drivers_started_together_run_every_trial_once(tmp_path: Path) -> None:
    """The issue's case: two drivers of one study, one storage, one fresh tracking store,
    started in the same second. One runs the study; the other waits (--wait) and then runs it
    again as a study run of its own: every study run holds each of its trials exactly once."""
    study = write_synthetic_study(tmp_path, SURFACE)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    drivers = [
        subprocess.Popen(study_command(study, tmp_path, "--wait", "--reports", "none"), cwd=REPO,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(2)
    ]  # fmt: skip
    outputs = [d.communicate(timeout=600)[0] for d in drivers]
    assert [d.returncode for d in drivers] == [0, 0], outputs
    assert any("waiting for the driver" in out for out in outputs), outputs
    runs = runs_by_kind(tmp_path)
    studies = runs["study"]
    assert len(studies) == 2
    for study_run in studies:
        trials = [
            r for r in runs["trial"] if r.data.tags.get("study_run_id") == study_run.info.run_id
        ]
        keys = [(r.data.tags.get("arm"), r.data.tags.get("seed")) for r in trials]
        assert len(keys) == 4 and len(set(keys)) == 4, keys
    folders = list((tmp_path / "ray_results" / "teststudy").glob("default-*"))
    assert len(folders) == 2
