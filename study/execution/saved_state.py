"""Keep what `--resume` reads whole when the study's disk fills.

Tune writes its experiment state (trial statuses, searcher) to a local staging folder, then
copies it to the study's storage; a copy that meets a full disk leaves a truncated file
there. Tune, finding that file unreadable on resume, silently starts the phase afresh with
the old searcher, which has nothing left to suggest: the study waits forever. Three guards:

- a small reserve file in the study folder, held while the study runs and freed once the
  trials have stopped on a full disk, so the state fits;
- the staging copy, complete on the driver's own disk, written again into that space;
- a check before a phase is restored, which refuses a damaged state in one line instead of
  letting Tune start over.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
from pathlib import Path

import pyarrow.fs as pafs

from study.execution.storage_uri import join_storage
from study.search.tune_internals import (
    EXPERIMENT_STATE_PATTERN,
    staged_experiment,
    wait_for_upload,
)
from trainables.errors import UserInputError

log = logging.getLogger(__name__)

RESERVE_FILE = ".space-reserve"
RESERVE_BYTES = 16 * 1024**2  # Tune's state for hundreds of trials is a few MB


class SpaceReserve:
    """A file of zeros in the study folder (local disks only: object stores do not fill)."""

    def __init__(self, fs: pafs.FileSystem, folder: str, size: int = RESERVE_BYTES):
        local = isinstance(fs, pafs.LocalFileSystem)
        self.path = Path(folder, RESERVE_FILE) if local else None
        self.size = size

    def hold(self) -> None:
        if self.path is None or _size(self.path) == self.size:
            return
        with open(self.path, "wb") as out:
            out.write(bytes(self.size))  # real blocks: a sparse file would reserve nothing
            out.flush()
            os.fsync(out.fileno())

    def release(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return -1


def rewrite_from_staging(storage) -> bool:
    """Copy Tune's staged experiment files (state, searcher, callbacks) over the ones in
    storage; `storage` is a trial's Ray StorageContext. True when the stored state now reads
    back whole."""
    experiment = staged_experiment(storage)
    staging, target, fs = experiment.staging, experiment.target, experiment.fs
    # Tune's own upload may still be running; it ends, or fails on the full disk. This waits
    # for it only where the trial shares the driver's syncer: a trial made by a search
    # generator holds a deep copy with a syncer of its own, whose wait returns at once (a
    # local full disk fails Tune's upload at once too; storage_guard.py says the rest)
    wait_for_upload(storage)
    files = sorted(p for p in staging.glob("*") if p.is_file()) if staging.is_dir() else []
    staged = [p for p in files if fnmatch.fnmatch(p.name, EXPERIMENT_STATE_PATTERN)]
    if not staged or _damage(staged[-1].read_bytes()):
        log.warning("no whole experiment state staged in %s to write again", staging)
        return False
    try:
        for path in files:
            pafs.copy_files(str(path), join_storage(target, path.name), destination_filesystem=fs)
    except OSError as err:  # the reserve was not enough: the check on resume will say so
        log.warning("could not write the experiment state again: %s", err)
        return False
    return damaged_state(fs, target) is None


def _state_files(fs: pafs.FileSystem, experiment: str) -> list[str]:
    selector = pafs.FileSelector(experiment, allow_not_found=True)
    return sorted(
        info.base_name
        for info in fs.get_file_info(selector)
        if fnmatch.fnmatch(info.base_name, EXPERIMENT_STATE_PATTERN)
    )


def has_saved_state(fs: pafs.FileSystem, experiment: str) -> bool:
    """Whether Tune saved the experiment's state at least once. A driver stopped between
    creating a Tuner (which writes `tuner.pkl`) and Tune's first save leaves none, and Tune
    restoring such a folder runs a single trial and never finishes the phase; no trial can
    have reported before that first save, so the phase starts afresh instead."""
    return bool(_state_files(fs, experiment))


def damaged_state(fs: pafs.FileSystem, experiment: str) -> str | None:
    """Why the newest experiment state in `experiment` cannot be read, or None."""
    names = _state_files(fs, experiment)
    if not names:
        return None  # nothing saved yet: Tune's own check says so
    with fs.open_input_stream(join_storage(experiment, names[-1])) as src:
        problem = _damage(src.read())
    return f"{names[-1]}: {problem}" if problem else None


def _damage(data: bytes) -> str | None:
    try:
        json.loads(data)
    except ValueError as err:
        return f"{type(err).__name__}: {err}"
    return None


def check_restorable(fs: pafs.FileSystem, experiment: str, phase: str) -> None:
    problem = damaged_state(fs, experiment)
    if problem:
        raise UserInputError(
            f"cannot resume phase {phase}: its saved state in {experiment} is damaged "
            f"({problem}); run the study again without --resume"
        )
