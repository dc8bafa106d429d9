"""Names that become folders, and paths that must stay inside the folder they were given.

A study's name (its file's stem) and a profile's name are joined into paths under
`--reports`, `--storage` and `models/`, and the report writer replaces the folder it lands
on. A name such as `..` or `/../../victim` would put those writes, and that replacement,
outside the folder the user gave. So every such name is checked as a *name* before anything
runs, and every derived path is resolved and checked to lie under its root.
"""

from __future__ import annotations

import re
from pathlib import Path

from trainables.errors import UserInputError

MAX_NAME = 100  # characters: with a timestamp and a staging prefix, well under a file
# system's 255-byte name limit
_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_NAME - 1}}}")
RULE = (
    f"letters, digits, '_', '-' and '.', starting with a letter or digit, at most {MAX_NAME} "
    "characters"
)


def name_problem(name: object) -> str | None:
    """Why `name` cannot be one folder's name, or None when it can."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return f"it must be a plain folder name: {RULE}"
    return None


def check_name(kind: str, name: object, where: str = "") -> str:
    """`name` itself when it is a safe folder name, else one line naming `kind` (`study name`,
    `profile name`) and `where` it came from."""
    problem = name_problem(name)
    if problem is None:
        return str(name)
    shown = repr(name) if len(repr(name)) <= 60 else repr(name)[:57] + "..."
    prefix = f"{where}: " if where else ""
    raise UserInputError(f"{prefix}{kind} {shown} cannot be used: {problem}")


def inside(root: Path | str, path: Path | str, what: str) -> Path:
    """`path` resolved, when it lies under `root` (resolved too); else one line naming `what`
    and the folder it escapes. Symbolic links are followed, so a link out of the root counts
    as outside."""
    base = Path(root).resolve()
    resolved = Path(path).resolve()
    if resolved != base and base not in resolved.parents:
        raise UserInputError(f"{what} {resolved} would lie outside {base}; refusing to write it")
    return resolved


# in every report folder: the proof that the folder is a report, which a later report may
# replace; a folder without it is never replaced
MARKER = ".study-report"
MARKER_TEXT = "written by study.report; a newer report of this study may replace this folder\n"


def report_folder(root: Path | str, study: str, profile: str | None) -> Path:
    """`reports/<study>/` for the default profile; other profiles get their own folder so a
    smoke run never overwrites the published example."""
    check_name("study name", study)
    suffix = "" if profile in (None, "", "default") else f"-{check_name('profile name', profile)}"
    folder = Path(root) / f"{study}{suffix}"
    inside(root, folder, "the report folder")
    return folder


def check_replaceable(folder: Path) -> None:
    """A report replaces only what a report wrote: an existing `folder` must be a folder that
    holds the marker file every report writes, or an empty one. Anything else (a file, a
    folder of the user's) is refused with one line before the study runs and again before
    the report moves into place."""
    for above in Path(folder).absolute().parents:
        if above.exists():
            if not above.is_dir():
                raise UserInputError(f"cannot write the report: {above} is not a folder")
            break
    if not folder.exists() and not folder.is_symlink():
        return
    if folder.is_symlink() or not folder.is_dir():
        raise UserInputError(f"cannot write the report: {folder} exists and is not a folder")
    if not (folder / MARKER).is_file() and any(folder.iterdir()):
        raise UserInputError(
            f"cannot write the report: {folder} exists and is not a report (it has no {MARKER} "
            "file); move it away or give another --reports or --out"
        )


def folder_problem(folder: Path) -> str | None:
    """What keeps a new file from being made in `folder` ("is not a folder", "does not
    exist"), or None: the tracking store's and Optuna's sqlite files are refused alike."""
    if folder.is_dir():
        return None
    return "is not a folder" if folder.exists() else "does not exist"
