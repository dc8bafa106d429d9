"""What an intermediate stage is, checked, and how its results are named (no torch here).

A trial's `intermediate` setting lists stages trained before the target, each a mapping:

    intermediate:
      - name: spans                                # how arm ids, MLflow and the report call it
        data: {embedded: wnut16, untyped: true}    # any `data` form; its own label set
        epochs: 1                                  # epochs, lr, head_lr, batch_size,
                                                   # max_steps, eval_every: the trial's if unset
        budget: {steps: 200}                       # its own budget (trainables/settings/budget.py);
                                                   # not the trial's: none if unset

Layer surgery (depth, re-initialisation) applies once, before the first stage; freeze and probe
apply to the target only; every other trial setting is shared by all stages. The trial setting
itself is checked here, so the trial command line and the study spec refuse the same stages
with the same words (`StageError` carries where in the list the problem is). Running them is
`trainables.training.stages`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainables.data.sources import data_inputs
from trainables.errors import ConfigError, SettingError
from trainables.settings.budget import BUDGET, BudgetError, parse_budget

INTERMEDIATE = "intermediate"  # the trial setting and grid factor
# A stage's keys, with what each takes and is for (docs/study-keys.md): a stage that leaves
# one of the last seven out takes the trial's value.
STAGE_KEYS = {
    "name": "a word of letters, digits, _ . or - (default `stage<i>`): names the arm "
    "(`intermediate=spans`), the report's stage column and its metrics",
    "data": "any form `data` takes (required): the stage's corpus, with its own label set",
    "epochs": "an integer >= 1: epochs the stage trains, when it has no budget",
    "lr": "a number > 0: the stage's peak learning rate of the encoder",
    "head_lr": "a number > 0: the stage's peak learning rate of its head",
    "batch_size": "an integer >= 1: sentence windows per optimizer step",
    "max_steps": "an integer >= 1: cap on the stage's optimizer steps",
    "eval_every": "an integer >= 1: evaluate the stage's dev set every n steps",
    BUDGET: "a budget (below): the stage's own; without one it trains its `epochs`, never "
    "the target's budget",
}
_INTEGER_KEYS = ("epochs", "batch_size", "max_steps", "eval_every")
_NUMBER_KEYS = ("lr", "head_lr")
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
class Stage:
    """One checked stage; None: the trial's value."""

    name: str
    data: dict[str, Any]
    epochs: int | None = None
    lr: float | None = None
    head_lr: float | None = None
    batch_size: int | None = None
    max_steps: int | None = None
    eval_every: int | None = None
    budget: dict[str, Any] | None = None


def stage_name(stage: Any, index: int) -> str:
    """A stage's name as written, else `stage<index>`."""
    name = stage.get("name") if isinstance(stage, dict) else None
    return name if isinstance(name, str) and name else f"{STAGE_KEY}{index}"


def stage_label(stages: Sequence[Any] | None) -> str:
    """How an arm id and the report name a list of stages: `spans`, `conll+spans`, `none`."""
    return "+".join(stage_name(s, i) for i, s in enumerate(stages or ())) or "none"


def check_stages(
    value: Any, trial_fields: Sequence[str], not_in_a_stage: Mapping[str, str]
) -> list[Stage]:
    """The stages of `value` (the `intermediate` setting), each checked; `trial_fields` are the
    trial's setting names and `not_in_a_stage` says why a stage cannot set some of them (both
    from `TrialConfig`, whose fields carry that reason), so a trial setting written in a stage
    gets its reason."""
    if not isinstance(value, list):
        raise StageError((), f"{value!r} is not allowed: a list of stages, e.g. [{EXAMPLE}]")
    stages = [_check_stage(stage, i, trial_fields, not_in_a_stage) for i, stage in enumerate(value)]
    seen: dict[str, int] = {}
    for i, stage in enumerate(stages):
        if stage.name in seen:
            raise StageError((i, "name"), f"{stage.name!r} is not allowed: it names stage "
                             f"{seen[stage.name]} too; give each stage its own name")  # fmt: skip
        seen[stage.name] = i
    return stages


def _check_stage(
    stage: Any, index: int, trial_fields: Sequence[str], not_in_a_stage: Mapping[str, str]
) -> Stage:
    if not isinstance(stage, dict):
        raise StageError((index,), f"{stage!r} is not allowed: a stage is a mapping such as "
                         f"{EXAMPLE}")  # fmt: skip
    for key in stage:
        _check_key(key, index, trial_fields, not_in_a_stage)
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
    for key in _INTEGER_KEYS:
        _check_number(stage, index, key, int, 1, "an integer >= 1")
    for key in _NUMBER_KEYS:
        _check_number(stage, index, key, (int, float), 0, "a number > 0", strict=True)
    try:
        parse_budget(stage.get(BUDGET), stage.get("eval_every"))
    except BudgetError as err:
        raise StageError((index, BUDGET, *err.path), err.reason) from None
    values = {key: stage.get(key) for key in STAGE_KEYS if key not in ("name", "data")}
    return Stage(name, dict(stage["data"]), **values)


def _check_key(
    key: Any, index: int, trial_fields: Sequence[str], not_in_a_stage: Mapping[str, str]
) -> None:
    if key in STAGE_KEYS:
        return
    if key in not_in_a_stage:
        raise StageError((index, key), f"not allowed in a stage: {key} {not_in_a_stage[key]}")
    if key in trial_fields:
        raise StageError((index, key), f"not allowed in a stage: {key} is a trial setting "
                         "that every stage shares; set it on the trial")  # fmt: skip
    close = difflib.get_close_matches(str(key), tuple(STAGE_KEYS), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise StageError((index, str(key)), f"unknown stage key {key!r}{hint}; stage keys: "
                     f"{', '.join(STAGE_KEYS)}")  # fmt: skip


def _check_number(
    stage: dict, index: int, key: str, kind: Any, low: float, allowed: str, strict: bool = False
) -> None:
    value = stage.get(key)
    if value is None:
        return
    ok = isinstance(value, kind) and not isinstance(value, bool)
    if not ok or value < low or (strict and value <= low):
        raise StageError((index, key), f"{value!r} is not allowed: {allowed}")


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
