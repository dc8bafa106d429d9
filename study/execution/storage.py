"""Where a study keeps its Ray experiments and its own small state file.

Layout: `<storage>/<study>/<profile>-<YYYYmmdd-HHMMSS>-<random>/{study.json, explore/,
confirm/}`, and `<storage>/<study>/.driver.lock` while a driver runs it (driver_lock.py). A new
invocation gets a new folder; `--resume` continues the newest folder of the same study and
profile. `storage` is a local path or a URI Ray understands (s3://, gs://, file://); small
files go through pyarrow's filesystem layer, as Ray's own do.

Tune pickles each experiment's searcher, scheduler and callbacks by module path, so a study
saved by code whose modules were laid out otherwise cannot be resumed: the state records
`LAYOUT_VERSION`, and `--resume` of a state without it or with another one is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from study.execution.storage_uri import join_storage
from study.folder_names import check_name
from trainables.settings import UserInputError

STATE_FILE = "study.json"
# the module layout of what Tune pickles into a study's folder: raise it whenever a pickled
# class (searcher, scheduler, callback, trainable) moves or changes its attributes, so older
# studies are refused (2: the explore searcher's sample book became its own class)
LAYOUT_VERSION = 2
LAYOUT_KEY = "layout"


def is_uri(path: str) -> bool:
    return "://" in path


class StudyStore:
    def __init__(self, storage: str):
        self.root = storage if is_uri(storage) else str(Path(storage).expanduser().resolve())
        try:
            self.fs, self.base = (
                pafs.FileSystem.from_uri(self.root)
                if is_uri(storage)
                else (pafs.LocalFileSystem(), self.root)
            )
        except Exception as err:  # pyarrow's error names the scheme it cannot handle
            raise UserInputError(f"--storage {storage}: {err}") from err

    def join(self, *parts: str) -> str:
        return join_storage(self.root, *parts)

    def fs_path(self, *parts: str) -> str:
        """The path of `parts` inside `self.fs` (no scheme), for pyarrow calls."""
        return join_storage(self.base, *parts)

    def check_writable(self) -> None:
        """Fail before Ray starts rather than when the first checkpoint is written. The folders
        the probe made are removed again: a check refused later (a `--resume` with nothing to
        resume) leaves nothing behind, and the run makes them when it writes its state."""
        probe = self.fs_path(f".write-test-{uuid.uuid4().hex[:8]}")
        made = None
        try:
            made = self._first_missing(self.base)
            self.fs.create_dir(self.base, recursive=True)
            with self.fs.open_output_stream(probe) as out:
                out.write(b"ok")
            self.fs.delete_file(probe)
        except OSError as err:
            raise UserInputError(f"--storage {self.root} is not writable: {err}") from err
        finally:  # also when the probe failed: a folder that fits while its probe does not
            if made is not None:
                with contextlib.suppress(OSError):
                    self.fs.delete_dir(made)

    def _first_missing(self, path: str) -> str | None:
        """The outermost folder of `path` that does not exist yet; None when it exists."""
        missing = None
        while path and self.fs.get_file_info(path).type == pafs.FileType.NotFound:
            missing, parent = path, path.rstrip("/").rpartition("/")[0]
            if parent == path:
                break
            path = parent
        return missing

    def new_study_dir(self, study: str, profile: str) -> str:
        check_name("study name", study)
        check_name("profile name", profile)
        # the second and a random tail: two drivers started in the same second (on two
        # storages that later merge, or before the study's lock existed) never share a folder
        return f"{study}/{profile}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"

    def latest_study_dir(self, study: str, profile: str) -> str | None:
        check_name("study name", study)
        check_name("profile name", profile)
        selector = pafs.FileSelector(self.fs_path(study), allow_not_found=True)
        names = sorted(
            info.base_name
            for info in self.fs.get_file_info(selector)
            if info.type == pafs.FileType.Directory and info.base_name.startswith(f"{profile}-")
        )
        return f"{study}/{names[-1]}" if names else None

    def read_state(self, study_dir: str) -> dict[str, Any] | None:
        path = self.fs_path(study_dir, STATE_FILE)
        if self.fs.get_file_info(path).type != pafs.FileType.File:
            return None
        with self.fs.open_input_stream(path) as src:
            return json.loads(src.read().decode())

    def write_state(self, study_dir: str, state: dict[str, Any]) -> None:
        """Write-then-rename on local disks, so a crash never leaves half a state file."""
        folder = self.fs_path(study_dir)
        self.fs.create_dir(folder, recursive=True)
        text = json.dumps(state, indent=2, sort_keys=True).encode()
        if isinstance(self.fs, pafs.LocalFileSystem):
            tmp = Path(folder) / f".{STATE_FILE}.tmp"
            tmp.write_bytes(text)
            os.replace(tmp, Path(folder) / STATE_FILE)
        else:
            with self.fs.open_output_stream(self.fs_path(study_dir, STATE_FILE)) as out:
                out.write(text)


def drop_checkpoints(fs: pafs.FileSystem, trial_dir: str) -> int:
    """Delete a finished trial's checkpoint folders; the bytes freed. Checkpoints exist only
    to resume a trial, and its results live in MLflow and in the trial's result files."""
    selector = pafs.FileSelector(trial_dir, allow_not_found=True)
    freed = 0
    for info in fs.get_file_info(selector):
        if info.type == pafs.FileType.Directory and info.base_name.startswith("checkpoint_"):
            inside = pafs.FileSelector(info.path, recursive=True)
            freed += sum(
                f.size or 0 for f in fs.get_file_info(inside) if f.type == pafs.FileType.File
            )
            fs.delete_dir(info.path)
    return freed


def study_folder(
    store: StudyStore, study: str, profile: str, resume: bool
) -> tuple[str, dict[str, Any]]:
    """The folder of this invocation and the study's state: a new folder and a new invocation
    id, or with `resume` the newest folder of this study and profile and the state saved
    there (the invocation id in it finds the same MLflow runs again)."""
    if not resume:
        state = {"invocation": uuid.uuid4().hex, LAYOUT_KEY: LAYOUT_VERSION}
        return store.new_study_dir(study, profile), state
    latest = store.latest_study_dir(study, profile)
    state = store.read_state(latest) if latest else None
    if state is None:
        raise UserInputError(
            f"--resume: no earlier run of study {study} (profile {profile}) in {store.root}; "
            "run it once without --resume"
        )
    if state.get(LAYOUT_KEY) != LAYOUT_VERSION:
        raise UserInputError(
            f"--resume: {store.join(latest, STATE_FILE)} was saved by code with another module "
            f"layout (layout {state.get(LAYOUT_KEY, 'unrecorded')}, this code: {LAYOUT_VERSION})"
            "; it cannot be resumed: run the study again without --resume"
        )
    return latest, state
