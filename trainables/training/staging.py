"""Staging folders whose owner can be told apart from the dead, so none is left behind.

A trial writes each checkpoint to a staging folder before Ray copies it into the study's
storage. A trial stopped while it writes one (pruned by ASHA, the end of a phase, Ctrl-C, a
killed worker) never removes it, and in memory (tmpfs, where trainables/tune_adapter.py
stages) such a folder holds RAM until the machine restarts: a day of studies and benchmarks
on the 2-core machine left 38 of them in /dev/shm, 1.2 GB, some from an uninterrupted study
whose explore phase ended with a trial mid-write.

Each folder here has a lock file beside it that its writer holds (`flock`) while it lives;
the kernel releases the lock when the process ends, however it ends. Before making a folder,
a process removes every folder whose lock it can take. A lock works across all processes
that share the filesystem, containers with their own process ids included, which a pid
written in a name would not.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

PREFIX = "ner-depth-staging-"
LOCK_SUFFIX = ".lock"
# a lock file this young may sit between its creation and its writer's flock
SETTLE_SECONDS = 60.0


@contextmanager
def owned_directory(where: str | None = None) -> Iterator[str]:
    """A new empty folder in `where` (None: the default temporary folder), removed on exit,
    and removable by any later caller once this process has ended without removing it."""
    folder = Path(where or tempfile.gettempdir())
    remove_abandoned(folder)
    handle, lock_name = tempfile.mkstemp(prefix=PREFIX, suffix=LOCK_SUFFIX, dir=folder)
    directory = Path(lock_name.removesuffix(LOCK_SUFFIX))
    try:
        with suppress(OSError):  # a filesystem without locks: the folder is just not swept
            fcntl.flock(handle, fcntl.LOCK_EX)
        shutil.rmtree(directory, ignore_errors=True)  # the name is this lock's: any such is stale
        directory.mkdir()
        try:
            yield str(directory)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    finally:
        with suppress(OSError):
            os.unlink(lock_name)
        os.close(handle)


def remove_abandoned(folder: Path, settle_seconds: float = SETTLE_SECONDS) -> list[Path]:
    """Remove the staging folders in `folder` whose writer has ended; returns them. A lock
    another process holds, or one younger than `settle_seconds`, is left alone."""
    removed = []
    now = time.time()
    for lock in sorted(folder.glob(f"{PREFIX}*{LOCK_SUFFIX}")):
        try:
            if now - lock.stat().st_mtime < settle_seconds:
                continue
            handle = os.open(lock, os.O_RDWR)
        except OSError:  # gone meanwhile, or not ours to open
            continue
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # its writer is alive
            os.close(handle)
            continue
        try:
            directory = Path(str(lock).removesuffix(LOCK_SUFFIX))
            shutil.rmtree(directory, ignore_errors=True)
            if directory.exists():  # keep its lock, so a later sweep tries again
                continue
            with suppress(OSError):
                lock.unlink(missing_ok=True)
            removed.append(directory)
        finally:
            os.close(handle)
    return removed
