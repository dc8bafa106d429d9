"""The `intermediate` factor in a study file: lists of stages, each trained before the target.

    grid:
      intermediate:
        - []                                              # arm intermediate=none
        - [{name: spans, data: {embedded: wnut16, untyped: true}, epochs: 1}]   # =spans

A stage is checked by the trial's own check (trainables/settings/stage_config.py), its error
pointed at the line of the stage key at fault; its data paths are relative to the study file like
`data`'s; arms are named by their stages' names, so two lists of stages of one grid must be named
apart. The stages' data are read before anything is written, like the study's own data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from study.spec.document import Doc, FieldPath
from study.spec.paths import data_locations
from trainables.data.sources import load_checked_splits
from trainables.errors import UserInputError
from trainables.settings import INTERMEDIATE, StageError, TrialConfig, stage_label, stage_name

# where a study file may write a list of stages: one per grid value, or one
_LISTS = (("grid", INTERMEDIATE), ("fixed", INTERMEDIATE), ("compare", "baseline", INTERMEDIATE))


def locate_stage_data(doc: Doc, folder: Path) -> None:
    """Make every stage's data paths absolute, in place, before the factors are checked (so a
    grid value and `compare.baseline` name the same files alike)."""
    for path in _LISTS:
        value = _at(doc.data, path)
        lists = value if path[0] == "grid" else [value]
        if not isinstance(lists, list):
            continue
        for i, stages in enumerate(lists):
            where = (*path, i) if path[0] == "grid" else path
            for j, stage in enumerate(stages if isinstance(stages, list) else []):
                if isinstance(stage, dict) and isinstance(stage.get("data"), dict):
                    stage["data"] = data_locations(doc, stage["data"], folder, (*where, j, "data"))


def _at(data: Any, path: FieldPath) -> Any:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def check_stage_list(doc: Doc, path: FieldPath, value: Any) -> Any:
    """One value of the factor, checked as a trial checks it; an error names the stage key."""
    try:
        TrialConfig.from_dict({INTERMEDIATE: value})
    except StageError as err:
        raise doc.fail((*path, *err.path), err.reason) from None
    return value


def check_stage_factor(doc: Doc, sections: dict[str, dict], grid: dict[str, tuple]) -> None:
    """Not searched (Optuna draws plain values), and each grid value named apart."""
    if INTERMEDIATE in sections["search"]:
        raise doc.fail(("search", INTERMEDIATE), "intermediate is not searched: give its lists "
                       "of stages under grid (one arm each) or one under fixed")  # fmt: skip
    labels = [stage_label(stages) for stages in grid.get(INTERMEDIATE, ())]
    for index, label in enumerate(labels):
        earlier = labels.index(label)
        if earlier < index:
            raise doc.fail(
                ("grid", INTERMEDIATE, index),
                f"its stages are named {label!r}, as those of grid.intermediate[{earlier}]: an "
                "arm is named by its stages' names; give the stages names that tell them apart",
            )


def study_stages(grid: dict[str, tuple], fixed: dict[str, Any]) -> list[dict]:
    """Every distinct stage the study's arms run, as written."""
    lists = [*grid.get(INTERMEDIATE, ()), fixed.get(INTERMEDIATE) or []]
    out: list[dict] = []
    for stages in lists:
        out += [stage for stage in stages if stage not in out]
    return out


def check_stage_data(grid: dict[str, tuple], fixed: dict[str, Any]) -> None:
    """Read every stage's data as its trial will, so bad data is one line before anything is
    written, naming the stage."""
    for index, stage in enumerate(study_stages(grid, fixed)):
        try:
            load_checked_splits(stage["data"])
        except UserInputError as err:
            name = stage_name(stage, index)
            raise type(err)(f"intermediate stage {name!r}: {err}") from None
