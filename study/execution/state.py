"""The driver's state of one study invocation, `study.json` in its results folder: what is
done and what was decided, so that `--resume` goes on where it stopped.

`StudyState` is the file's whole content, typed; this module is the only one that opens the
file (tests/study/execution/test_state.py checks that), so a key is named in one place. The
file is written after every step that changes it (a phase done, the samples chosen, a
confirm round), write-then-rename on local disks, so a crash never leaves half of it.

Tune pickles each experiment's searcher, scheduler and callbacks by module path, so a study
saved by code whose modules were laid out otherwise cannot be resumed: the state records
`LAYOUT_VERSION`, and `--resume` of a state without it or with another one is refused in one
line. A file this code cannot read (not JSON, a key it does not know, a value of the wrong
kind) is refused the same way, before anything is written.
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from study.execution.storage import StudyStore
from trainables.errors import UserInputError

STATE_FILE = "study.json"
# the module layout of what Tune pickles into a study's folder: raise it whenever a pickled
# class (searcher, scheduler, callback, trainable) moves or changes its attributes, so older
# studies are refused (2: the explore searcher's sample book became its own class)
LAYOUT_VERSION = 2
LAYOUT_KEY = "layout"
AGAIN = "; it cannot be resumed: run the study again without --resume"


def _is(kind: type) -> Any:
    return lambda value: isinstance(value, kind) and not isinstance(value, bool)


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _trial(value: Any) -> bool:
    """(arm, sample, seed), as JSON writes it: a list."""
    return (
        isinstance(value, list)
        and len(value) == 3
        and isinstance(value[0], str)
        and all(_is(int)(v) for v in value[1:])
    )


def _samples(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(samples, list) and all(isinstance(s, dict) for s in samples)
        for samples in value.values()
    )


def _saved(check: Any, default: Any = None, factory: Any = None) -> Any:
    """A field of the file, with what a value read back for it must pass."""
    if factory is not None:
        return field(default_factory=factory, metadata={"check": check})
    return field(default=default, metadata={"check": check})


@dataclass
class StudyState:
    """What `study.json` holds. A field that is None was not decided yet and is not written,
    so the file has the keys the driver's earlier code wrote, and reads back the same."""

    invocation: str = _saved(_is(str), "")  # finds the invocation's MLflow runs again
    layout: int = _saved(_is(int), LAYOUT_VERSION)  # LAYOUT_VERSION of the code that began it
    profile: str = _saved(_is(str), "")
    overrides: list[str] = _saved(_texts, factory=list)  # the --set options it started with
    precision: str | None = _saved(_is(str))  # the one of every trial (study/precision.py)
    study_run: str | None = _saved(_is(str))  # the MLflow study run's id, for people and tests
    phases_done: list[str] = _saved(_texts, factory=list)
    chosen: dict[str, list[dict[str, Any]]] | None = _saved(_samples)  # arm -> its samples
    confirm_rounds: list[list[str]] = _saved(
        lambda v: isinstance(v, list) and all(_texts(arms) for arms in v), factory=list
    )  # the arms of each round done
    confirm_arms: list[str] | None = _saved(_texts)  # arms still in the rounds; None: all
    # explore trials (arm, sample, seed) that stand in for confirm trials
    reused: list[tuple[str, int, int]] | None = _saved(
        lambda v: isinstance(v, list) and all(_trial(t) for t in v)
    )

    @classmethod
    def new(cls) -> StudyState:
        return cls(invocation=uuid.uuid4().hex)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, saved: Any, where: str) -> StudyState:
        """The state a file held, or one line (at `where`, the file) saying why it cannot
        be resumed."""
        if not isinstance(saved, dict):
            raise UserInputError(f"--resume: {where} holds no study state{AGAIN}")
        if saved.get(LAYOUT_KEY) != LAYOUT_VERSION:
            raise UserInputError(
                f"--resume: {where} was saved by code with another module layout (layout "
                f"{saved.get(LAYOUT_KEY, 'unrecorded')}, this code: {LAYOUT_VERSION}){AGAIN}"
            )
        unknown = sorted(set(saved) - set(_CHECKS))
        if unknown:
            raise UserInputError(
                f"--resume: {where} holds {', '.join(map(repr, unknown))}, which this code "
                f"does not know (saved by other code){AGAIN}"
            )
        for key, value in saved.items():
            if value is not None and not _CHECKS[key](value):
                raise UserInputError(
                    f"--resume: {where}: {key} is {json.dumps(value)[:80]}, not what the "
                    f"driver writes there{AGAIN}"
                )
        if not saved.get("invocation"):
            raise UserInputError(f"--resume: {where} has no invocation{AGAIN}")
        state = cls(**saved)
        if state.reused is not None:
            state.reused = [(arm, sample, seed) for arm, sample, seed in state.reused]
        return state


_CHECKS = {f.name: f.metadata["check"] for f in dataclasses.fields(StudyState)}


def read_state(store: StudyStore, study_dir: str) -> StudyState | None:
    """The state saved in `study_dir`; None when there is none."""
    path = store.fs_path(study_dir, STATE_FILE)
    if store.fs.get_file_info(path).type != pafs.FileType.File:
        return None
    with store.fs.open_input_stream(path) as src:
        text = src.read().decode(errors="replace")
    where = store.join(study_dir, STATE_FILE)
    try:
        saved = json.loads(text)
    except ValueError as err:
        raise UserInputError(f"--resume: {where} is not whole JSON ({err}){AGAIN}") from err
    return StudyState.from_json(saved, where)


def write_state(store: StudyStore, study_dir: str, state: StudyState) -> None:
    """Write-then-rename on local disks, so a crash never leaves half a state file."""
    folder = store.fs_path(study_dir)
    store.fs.create_dir(folder, recursive=True)
    text = json.dumps(state.to_json(), indent=2, sort_keys=True).encode()
    if isinstance(store.fs, pafs.LocalFileSystem):
        tmp = Path(folder) / f".{STATE_FILE}.tmp"
        tmp.write_bytes(text)
        os.replace(tmp, Path(folder) / STATE_FILE)
    else:
        with store.fs.open_output_stream(store.fs_path(study_dir, STATE_FILE)) as out:
            out.write(text)


def study_folder(
    store: StudyStore, study: str, profile: str, resume: bool
) -> tuple[str, StudyState]:
    """The folder of this invocation and the study's state: a new folder and a new invocation
    id, or with `resume` the newest folder of this study and profile and the state saved
    there (the invocation id in it finds the same MLflow runs again)."""
    if not resume:
        return store.new_study_dir(study, profile), StudyState.new()
    latest = store.latest_study_dir(study, profile)
    state = read_state(store, latest) if latest else None
    if state is None:
        raise UserInputError(
            f"--resume: no earlier run of study {study} (profile {profile}) in {store.root}; "
            "run it once without --resume"
        )
    return latest, state
