"""Where a study keeps its Ray experiments and its own small state file.

Layout: `<storage>/<study>/<profile>-<YYYYmmdd-HHMMSS>-<random>/{study.json, explore/,
confirm/}`, and `<storage>/<study>/.driver.lock` while a driver runs it (driver_lock.py). A new
invocation gets a new folder; `--resume` continues the newest folder of the same study and
profile. `storage` is a local path or a URI Ray understands (s3://, gs://, file://); small
files go through pyarrow's filesystem layer, as Ray's own do. `study.json`, the driver's state,
is read and written by study/execution/state.py alone.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from pathlib import Path

import pyarrow.fs as pafs

from study.execution.storage_uri import join_storage
from study.folder_names import check_name
from trainables.errors import UserInputError


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


def trial_folders(fs: pafs.FileSystem, experiment: str) -> list[tuple[pafs.FileSystem, str]]:
    """An experiment's trial folders as they are on its storage, whether or not Tune's saved
    state names them: a trial Tune created after the state's last save (the save that a full
    disk refused) has a folder, and maybe a checkpoint, that no saved trial points to."""
    listing = fs.get_file_info(pafs.FileSelector(experiment, allow_not_found=True))
    return [(fs, info.path) for info in listing if info.type == pafs.FileType.Directory]


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
