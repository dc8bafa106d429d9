"""Where the files and folders a study names are: relative to the study file's own folder.

A study file travels with its data (`data: {train: train.txt}` beside `s.yaml`), so a relative
path means the same whatever folder the study is run from. Absolute and `~` paths are taken as
given. A path written by a command-line override (`--set data.train=...`) is relative to the
folder the command was typed in, where the user looked when typing it. Every path is made
absolute here, so an error names the file it looked for.

Names that may be a hub id or a local folder (`model`, a dataset's `hf`) are a local folder
when they can only be a path (`./x`, `a/b/c`) or when that folder exists; otherwise they stay
the hub id or dataset name they were written as.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from study.spec.document import Doc, FieldPath
from trainables.data.sources import SPLITS
from trainables.data.sources.conll import ConllSource
from trainables.data.sources.huggingface import HuggingFaceSource
from trainables.settings import EMBEDDED_MODEL, TINY_MODEL, looks_like_path


def model_location(doc: Doc, model: str, study_folder: Path) -> str:
    """`model` with a local folder made absolute; aliases and hub ids as written."""
    if model in (EMBEDDED_MODEL, TINY_MODEL):
        return model
    return _local_or_name(doc, ("model",), model, _base(doc, ("model",), study_folder))


def data_locations(doc: Doc, data: dict, study_folder: Path, at: FieldPath = ("data",)) -> dict:
    """The `data` mapping (written at `at`: `data`, or a stage's) with every file and local
    dataset folder made absolute."""
    out = dict(data)
    for split in SPLITS:
        if split in out:
            out[split] = _entry(doc, (*at, split), out[split], study_folder)
    extra = out.get("extra")
    if isinstance(extra, dict):
        out["extra"] = {
            name: _entry(doc, (*at, "extra", str(name)), entry, study_folder)
            for name, entry in extra.items()
        }
    return out


def _entry(doc: Doc, path: FieldPath, entry: Any, study_folder: Path) -> Any:
    """One split's source: a CoNLL path (bare or `{conll: PATH}`), or `{hf: NAME_OR_FOLDER}`."""
    conll, hf = ConllSource.key, HuggingFaceSource.key
    if isinstance(entry, str):
        return _path(entry, _base(doc, path, study_folder))
    if isinstance(entry, dict) and isinstance(entry.get(conll), str):
        return {**entry, conll: _path(entry[conll], _base(doc, (*path, conll), study_folder))}
    if isinstance(entry, dict) and isinstance(entry.get(hf), str):
        at = (*path, hf)
        return {**entry, hf: _local_or_name(doc, at, entry[hf], _base(doc, at, study_folder))}
    return entry  # not a source: the data checks say so with the field's line


def _base(doc: Doc, path: FieldPath, study_folder: Path) -> Path:
    """Where a relative path at `path` starts: the study's folder, or for a value given on
    the command line, the current folder."""
    return Path.cwd() if doc.override_of(path) is not None else study_folder


def _path(written: str, base: Path) -> str:
    return os.path.normpath(base / Path(written).expanduser())


def _local_or_name(doc: Doc, at: FieldPath, written: str, base: Path) -> str:
    name = written.strip()
    if Path(name).expanduser().is_absolute():
        local = os.path.normpath(Path(name).expanduser())
    elif looks_like_path(name) or _exists(doc, at, base / name):
        local = _path(name, base)
    else:
        return written
    _exists(doc, at, Path(local))  # a path the file system cannot look up is refused here
    return local


def _exists(doc: Doc, at: FieldPath, path: Path) -> bool:
    """Whether `path` exists; a name the file system cannot even look up (longer than its
    limit, a NUL byte) is refused at its field instead of raising from `stat`."""
    try:
        return path.exists()
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise doc.bad(at, path.name, f"a local folder or a hub name ({reason})") from None
