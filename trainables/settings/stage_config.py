"""What an intermediate stage is, checked, and how its results are named (no torch here).

A trial's `intermediate` setting lists stages trained before the target, each a mapping:

    intermediate:
      - name: spans                                # how arm ids, MLflow and the report call it
        data: {embedded: wnut16, untyped: true}    # any `data` form; its own label set
        epochs: 1                                  # the trial settings marked `in_a_stage`:
        budget: {steps: 200}                       # the trial's if unset (STAGE_SETS), or
                                                   # none if unset (STAGE_OWNS: the budget)

A stage's keys beyond `name` and `data` are the `TrialConfig` fields marked `in_a_stage`
(trainables/settings/config.py), with their types, bounds and help lines, so a setting a stage
may set is described once, on its field: config.py derives the `StageRules` this module checks
a stage by, and the stage keys of docs/study-keys.md (`STAGE_KEYS` there).

Layer surgery (depth, re-initialisation) applies once, before the first stage; freeze and probe
apply to the target only; every other trial setting is shared by all stages. The trial setting
itself is checked here, so the trial command line and the study spec refuse the same stages
with the same words (`StageError` carries where in the list the problem is). Running them is
`trainables.training.stages`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainables.data.sources import data_inputs
from trainables.errors import ConfigError, SettingError
from trainables.settings.budget import BUDGET, BudgetError, parse_budget

INTERMEDIATE = "intermediate"  # the trial setting and grid factor
# A stage's own keys, with what each takes and is for (docs/study-keys.md); the trial settings
# it may set follow them, described by their fields
STAGE_OWN_KEYS = {
    "name": "a word of letters, digits, _ . or - (default `stage<i>`): names the arm "
    "(`intermediate=spans`), the report's stage column and its metrics",
    "data": "any form `data` takes (required): the stage's corpus, with its own label set",
}
# what a stage that leaves out a setting it may set trains with: the trial's value, or none
STAGE_SETS = "the trial's value where the stage leaves it out"
STAGE_OWNS = "the stage's own: none where the stage leaves it out, never the trial's"
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
EXAMPLE = "{name: spans, data: {embedded: wnut16, untyped: true}, epochs: 1}"

# how the results of stage i are named, shared by the trainable, the tracking and the report
STAGE_KEY = "stage"  # on an intermediate stage's results: its index
INTERMEDIATE_STEPS = "intermediate_steps"  # on the target's final result: steps before it
HEAD_KEPT = "head_kept"  # 1 where a stage (or the target) kept the previous stage's head


def stage_prefix(index: int) -> str:
    """`stage0_`: what an intermediate stage's metrics start with (`stage0_dev_f1`)."""
    return f"{STAGE_KEY}{index}_"


class StageError(SettingError):
    """A stage that cannot run; `path` is where in the `intermediate` list (index, key, ...)
    and `reason` what is wrong there, so a study file's error can point at the line."""

    setting = INTERMEDIATE


@dataclass(frozen=True)
class StageRules:
    """What the trial's fields say about a stage (derived from them in
    trainables/settings/config.py): the settings it may set (`STAGE_SETS` or `STAGE_OWNS`),
    those it may not and why, every trial setting's name, and `wrong`: what a setting's value
    must be, in words, where it is not (None where it fits)."""

    settings: Mapping[str, str]
    refused: Mapping[str, str]
    trial_fields: Sequence[str]
    wrong: Callable[[str, Any], str | None]


@dataclass(frozen=True)
class Stage:
    """One checked stage: its name, its data, and the trial settings it trains with instead of
    the trial's (those it sets, and its own value, None where it has none, of each setting it
    owns)."""

    name: str
    data: dict[str, Any]
    settings: dict[str, Any]


def stage_settings(stage: Stage) -> dict[str, Any]:
    """The trial settings a checked stage trains with instead of the trial's, its data first."""
    return {"data": stage.data, **stage.settings}


def stage_name(stage: Any, index: int) -> str:
    """A stage's name as written, else `stage<index>`."""
    name = stage.get("name") if isinstance(stage, dict) else None
    return name if isinstance(name, str) and name else f"{STAGE_KEY}{index}"


def stage_label(stages: Sequence[Any] | None) -> str:
    """How an arm id and the report name a list of stages: `spans`, `conll+spans`, `none`."""
    return "+".join(stage_name(s, i) for i, s in enumerate(stages or ())) or "none"


def check_stages(value: Any, rules: StageRules) -> list[Stage]:
    """The stages of `value` (the `intermediate` setting), each checked by the `rules` the
    trial's fields give; a trial setting written in a stage gets the reason its field gives."""
    if not isinstance(value, list):
        raise StageError((), f"{value!r} is not allowed: a list of stages, e.g. [{EXAMPLE}]")
    stages = [_check_stage(stage, i, rules) for i, stage in enumerate(value)]
    seen: dict[str, int] = {}
    for i, stage in enumerate(stages):
        if stage.name in seen:
            raise StageError((i, "name"), f"{stage.name!r} is not allowed: it names stage "
                             f"{seen[stage.name]} too; give each stage its own name")  # fmt: skip
        seen[stage.name] = i
    return stages


def _check_stage(stage: Any, index: int, rules: StageRules) -> Stage:
    if not isinstance(stage, dict):
        raise StageError((index,), f"{stage!r} is not allowed: a stage is a mapping such as "
                         f"{EXAMPLE}")  # fmt: skip
    for key in stage:
        _check_key(key, index, rules)
    if stage.get("data") is None:
        raise StageError(
            (index,),
            "data is missing: each stage trains on its own data, e.g. "
            "{embedded: wnut16, untyped: true} or {train: ..., dev: ..., test: ...}",
        )
    _check_data(stage["data"], index)
    name = stage_name(stage, index)
    if not isinstance(stage.get("name", name), str) or not _NAME.fullmatch(name):
        raise StageError(
            (index, "name"),
            f"{stage.get('name')!r} is not allowed: a word of "
            "letters, digits, _ . or - (it names the arm and the metrics)",
        )
    for key in rules.settings:
        value = stage.get(key)
        allowed = None if value is None else rules.wrong(key, value)
        if allowed is not None:
            raise StageError((index, key), f"{value!r} is not allowed: {allowed}")
    try:
        parse_budget(stage.get(BUDGET), stage.get("eval_every"))
    except BudgetError as err:
        raise StageError((index, BUDGET, *err.path), err.reason) from None
    settings = {
        key: stage.get(key)
        for key, rule in rules.settings.items()
        if stage.get(key) is not None or rule == STAGE_OWNS
    }
    return Stage(name, dict(stage["data"]), settings)


def _check_key(key: Any, index: int, rules: StageRules) -> None:
    keys = (*STAGE_OWN_KEYS, *rules.settings)
    if key in keys:
        return
    if key in rules.refused:
        raise StageError((index, key), f"not allowed in a stage: {key} {rules.refused[key]}")
    if key in rules.trial_fields:
        raise StageError((index, key), f"not allowed in a stage: {key} is a trial setting "
                         "that every stage shares; set it on the trial")  # fmt: skip
    close = difflib.get_close_matches(str(key), keys, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise StageError((index, str(key)), f"unknown stage key {key!r}{hint}; stage keys: "
                     f"{', '.join(keys)}")  # fmt: skip


def _check_data(data: Any, index: int) -> None:
    """The stage's data in the form `data` takes, checked without reading it."""
    if not isinstance(data, dict):
        raise StageError((index, "data"), f"{data!r} is not allowed: a mapping such as "
                         "{embedded: wnut16, untyped: true}")  # fmt: skip
    try:
        data_inputs(data)
    except ConfigError as err:
        field, _, text = str(err).partition(": ")
        if field.startswith("data") and text:  # `data.train: ...`: point at that field
            raise StageError((index, *field.split(".")), text) from None
        raise StageError((index, "data"), str(err)) from None
