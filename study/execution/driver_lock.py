"""One driver per study at a time in one storage.

Two drivers of the same study on the same storage and tracking store resumed each other's
Tune experiments, logged evaluations twice and lost trials. So a driver holds a lock file,
`<storage>/<study>/.driver.lock`, from before it writes anything until it exits: a second
driver refuses with one line naming the first (host, pid, since when), or with `--wait`
waits for it. The lock says who holds it and is re-written every `BEAT_S` seconds; it is
*stale*, and taken over, when its holder is a process of this host that no longer runs (a
killed driver, then `--resume`), or when it has not been re-written for `STALE_S` seconds
(a driver on another host that died). On a local disk the lock is made with an exclusive
create; on object storage, which has no such call here, by writing it and reading it back.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from typing import Any

import pyarrow.fs as pafs

from study.execution.storage import StudyStore
from trainables.errors import UserInputError

log = logging.getLogger("study")

LOCK_FILE = ".driver.lock"
BEAT_S = 20.0  # how often the holder re-writes the lock
STALE_S = 120.0  # a lock not re-written for this long is a dead driver's
WAIT_POLL_S = 5.0  # how often a waiting driver looks again
WAIT_SAY_S = 60.0  # how often a waiting driver says it is still waiting


class DriverLock:
    """The lock of `study` in `store`: `acquire` (refuse, or wait) and `release`, also as a
    context manager. The holder's record: host, pid, since, beat (epoch seconds), token."""

    def __init__(self, store: StudyStore, study: str, wait: bool = False):
        self.store, self.study, self.wait = store, study, wait
        self.path = store.fs_path(study, LOCK_FILE)
        self.shown = store.join(study, LOCK_FILE)
        self.local = isinstance(store.fs, pafs.LocalFileSystem)
        now = time.time()
        self.record = {"host": socket.gethostname(), "pid": os.getpid(), "since": now,
                       "beat": now, "token": uuid.uuid4().hex}  # fmt: skip
        self._made: str | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def __enter__(self) -> DriverLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lock, taking over a stale one; else refuse, or with `wait` wait."""
        folder = self.store.fs_path(self.study)
        self._made = self.store._first_missing(folder)  # removed again if left empty
        said = 0.0
        while True:
            # made again on every try: the driver waited for may remove it as it ends
            self.store.fs.create_dir(folder, recursive=True)
            if self._try_create():
                break
            holder = self._read()
            if holder is None:  # it went away between the two calls: try again at once
                continue
            if stale(holder):
                log.info("taking over %s from a driver that no longer runs (%s)", self.shown,
                         describe(holder))  # fmt: skip
                self._remove_stale(holder)
                continue
            if not self.wait:
                raise UserInputError(
                    f"study {self.study} is already being run by another driver "
                    f"({describe(holder)}) on storage {self.store.root}; wait for it with "
                    f"--wait, or stop it (its lock: {self.shown})"
                )
            if time.monotonic() - said >= WAIT_SAY_S:
                log.info("waiting for the driver of study %s (%s) to finish", self.study,
                         describe(holder))  # fmt: skip
                said = time.monotonic()
            time.sleep(WAIT_POLL_S)
        self._beat = threading.Thread(target=self._beating, name="driver-lock", daemon=True)
        self._beat.start()

    def release(self) -> None:
        """Stop re-writing the lock and remove it, if it is still ours."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
            self._beat = None
        holder = self._read()
        if holder is not None and holder.get("token") == self.record["token"]:
            with contextlib.suppress(OSError):
                self.store.fs.delete_file(self.path)
        self._remove_made_folders()

    def _remove_made_folders(self) -> None:
        """The folders `acquire` made, when nothing was written in them: a study refused
        after the lock was taken leaves the storage as it found it."""
        made, path = self._made, self.store.fs_path(self.study)
        while made is not None:
            try:
                if self.local:
                    os.rmdir(path)  # only if empty, in one call: a lock made meanwhile stays
                elif self.store.fs.get_file_info(pafs.FileSelector(path, allow_not_found=True)):
                    return
                else:
                    self.store.fs.delete_dir(path)
            except OSError:
                return
            if path.rstrip("/") == made.rstrip("/"):
                return
            path = path.rstrip("/").rpartition("/")[0]

    def _try_create(self) -> bool:
        data = json.dumps(self.record).encode()
        if self.local:
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            return True
        if self._read() is not None:
            return False
        self._write(data)
        time.sleep(1.0)  # a driver that wrote at the same moment has written by now
        holder = self._read()
        return holder is not None and holder.get("token") == self.record["token"]

    def _remove_stale(self, holder: dict[str, Any]) -> None:
        """Remove the lock only if it is still the stale one read (another driver may have
        taken it over meanwhile); on a local disk, by an atomic rename first."""
        if self.local:
            aside = f"{self.path}.stale-{uuid.uuid4().hex[:8]}"
            try:
                os.rename(self.path, aside)
            except FileNotFoundError:
                return
            try:
                with open(aside, "rb") as src:
                    moved = json.loads(src.read() or b"{}")
            except (OSError, ValueError):
                moved = {}
            if moved.get("token") != holder.get("token"):  # a live one: put it back
                os.rename(aside, self.path)
                return
            os.remove(aside)
            return
        again = self._read()
        if again is not None and again.get("token") == holder.get("token"):
            self.store.fs.delete_file(self.path)

    def _read(self) -> dict[str, Any] | None:
        try:
            with self.store.fs.open_input_stream(self.path) as src:
                text = src.read()
        except (FileNotFoundError, OSError):
            return None
        try:
            holder = json.loads(text)
        except ValueError:  # half written: count it as held now, stale once old
            return {"host": "?", "pid": -1, "since": 0.0, "beat": _mtime(self), "token": "?"}
        return holder if isinstance(holder, dict) else None

    def _write(self, data: bytes) -> None:
        if self.local:
            tmp = f"{self.path}.{self.record['token'][:8]}.tmp"
            with open(tmp, "wb") as out:
                out.write(data)
            os.replace(tmp, self.path)
            return
        with self.store.fs.open_output_stream(self.path) as out:
            out.write(data)

    def _beating(self) -> None:
        while not self._stop.wait(BEAT_S):
            holder = self._read()
            if holder is not None and holder.get("token") != self.record["token"]:
                log.warning("%s was taken over by another driver (%s)", self.shown,
                            describe(holder))  # fmt: skip
                return
            self.record["beat"] = time.time()
            with contextlib.suppress(OSError):  # the storage's failure is said where it writes
                self._write(json.dumps(self.record).encode())


def _mtime(lock: DriverLock) -> float:
    info = lock.store.fs.get_file_info(lock.path)
    return info.mtime.timestamp() if info.mtime is not None else 0.0


def stale(holder: dict[str, Any], now: float | None = None) -> bool:
    """A holder that no longer runs: a process of this host that has ended, or a lock not
    re-written for `STALE_S` seconds."""
    now = time.time() if now is None else now
    if holder.get("host") == socket.gethostname() and isinstance(holder.get("pid"), int):
        if holder["pid"] == os.getpid() and holder.get("token") != "?":
            return False
        if holder["pid"] > 0 and not _running(holder["pid"]):
            return True
    return now - float(holder.get("beat") or 0.0) > STALE_S


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it runs
        return True
    return True


def describe(holder: dict[str, Any]) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(holder.get("since") or 0)))
    return f"host {holder.get('host')}, pid {holder.get('pid')}, since {since}"
