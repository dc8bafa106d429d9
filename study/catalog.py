"""The studies a name reaches (`./search_spaces/`, then the shipped ones; see
`study.spec.reading.study_folders`), each with its description and profiles: what
`python -m study.run --list` prints and `--help` sums up, so a user finds the studies without
opening the folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from study.spec import SpecError, display_path
from study.spec.reading import read_study, study_files


@dataclass(frozen=True)
class StudyEntry:
    name: str
    path: Path
    description: str
    profiles: tuple[str, ...]
    problem: str = ""  # why the file cannot be read; the study is still listed, with it


def study_entries(folder: Path | None = None) -> list[StudyEntry]:
    """Every study a name resolves to, by name; a broken file is listed with its error, so a
    listing never fails on one bad study."""
    entries = []
    for name, path in study_files(folder).items():
        try:
            data = read_study(path).data
        except SpecError as err:
            entries.append(StudyEntry(name, path, "", (), problem=str(err)))
            continue
        profiles = tuple(str(p) for p in (data.get("profiles") or {}))
        entries.append(StudyEntry(name, path, str(data.get("description", "")), profiles))
    return entries


def _profiles(entry: StudyEntry) -> str:
    return ", ".join(entry.profiles) or "(none: the file as it is)"


def listing(entries: list[StudyEntry]) -> str:
    """`--list`: each study's name, description, profiles and file."""
    if not entries:
        return "no studies found (./search_spaces/ is empty and none are shipped)"
    blocks = []
    for entry in entries:
        about = entry.description or "(no description)"
        if entry.problem:
            about = f"cannot be read: {entry.problem}"
        blocks.append(f"{entry.name}\n  {about}\n  profiles: {_profiles(entry)}\n"
                      f"  file: {display_path(entry.path)}")  # fmt: skip
    return "\n".join(blocks)


def help_table(entries: list[StudyEntry]) -> str:
    """`--help`'s short form: each study's name and profiles."""
    if not entries:
        return "  (none found)"
    width = max(len(entry.name) for entry in entries) + 2
    return "\n".join(
        f"  {entry.name:<{width}}"
        + ("(cannot be read; --list says why)" if entry.problem else _profiles(entry))
        for entry in entries
    )
