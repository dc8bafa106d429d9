"""Factors: the grid (one arm per combination of values), fixed settings, and the checks every
written factor value passes: its type and range as the trainable would check them, and layer
and head indices against the model (or, for a truncated arm, against its own depth).
Also the one-head-at-a-time shorthand of `reinit_heads` and `compare.baseline`."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any, Union

from study.spec.document import Doc, FieldPath, count, is_int, show, suggest, text_number_hint
from study.spec.keys import FACTORS, SECTIONS, SET_AT_TOP
from study.spec.limits import MAX_TRIALS
from study.spec.stages import check_stage_list
from trainables.errors import ConfigError, joined
from trainables.settings import (
    BUDGET,
    DEPTH_FORMS,
    FIXED_ONLY,
    INTERMEDIATE,
    LAYER_FIELDS,
    BudgetError,
    DepthError,
    TrialConfig,
    budget_shape,
    depth_cut,
    normalized,
)
from trainables.yaml_reading import bool_word

_FIELD_TYPES = typing.get_type_hints(TrialConfig)
# `grid: {reinit_heads: {...}}`, one arm per head: its keys, what each takes and is for
HEADS_SHORTHAND = {
    "one_head_in_blocks": "a list of block indices (negative: from the top): one arm per head "
    "of each",
    "baseline": "true (default) or false: also the arm `[]`, no head re-initialised",
    "heads": "an integer: heads per block, where the model's config cannot be read offline",
}
COMPARE_KEYS = {
    "baseline": "a mapping of grid factor: value: the arm every other arm is compared with "
    "(the one equal to it in the other factors), instead of all one-factor pairs",
}
MAX_HEADS = 1024  # attention heads per block that `heads: N` may declare (encoders have <= 64)


@dataclass(frozen=True)
class Shape:
    """The model's block and attention-head counts, and the most sub-words its table of
    absolute positions lets one window hold; 0 layers: unknown (not read); 0 window: no limit
    known (relative or rotary positions, a synthetic study, or a config not read)."""

    layers: int
    heads: int
    window: int = 0


def factor_sections(doc: Doc) -> dict[str, dict]:
    """The grid, search and fixed mappings, each factor known and in one section only."""
    sections: dict[str, dict] = {}
    owner: dict[str, str] = {}
    for section in SECTIONS:
        value = doc.data.get(section)
        value = {} if value is None else value
        doc.mapping((section,), value, "a mapping of factor: setting")
        for name in value:
            _check_factor_name(doc, section, name)
            if name in owner:
                line, other = doc.locate((owner[name], name))
                raise doc.fail(
                    (section, name),
                    f"factor {name!r} is also set in {other} (line {line}); "
                    "a factor belongs to one of grid, search, fixed",
                )
            owner[name] = section
        sections[section] = value
    return sections


def _check_factor_name(doc: Doc, section: str, name: Any) -> None:
    path = (section, str(name))
    if name in SET_AT_TOP:
        raise doc.fail(path, f"{name!r} is not a factor: set it with the top-level "
                       f"`{SET_AT_TOP[name]}`")  # fmt: skip
    if name not in FACTORS:
        raise doc.fail(
            path, f"unknown factor {name!r}{suggest(name, FACTORS)}; factors: {', '.join(FACTORS)}"
        )
    if name in FIXED_ONLY and section != "fixed":
        raise doc.fail(path, f"{name!r} is one per study: set it under fixed ({FIXED_ONLY[name]})")


def check_value(doc: Doc, path: FieldPath, name: str, value: Any, shape: Shape) -> Any:
    """Check one setting of factor `name` as the trainable would, against the full model; return
    it with 'full'/'full-N' depths resolved."""
    if name == "depth":
        return _resolve_depth(doc, path, value, shape)
    if name == INTERMEDIATE:  # a list of stages, each checked key by key
        check_stage_list(doc, path, value)
        for index, stage in enumerate(value):  # a stage's windows go through the same encoder
            if isinstance(stage, dict) and "max_length" in stage:
                _check_window(doc, (*path, index, "max_length"), stage["max_length"], shape)
        return value
    if name == BUDGET:  # its error names the sub-key; with eval_every in check_arms
        try:
            budget_shape(value)
        except BudgetError as err:
            raise doc.fail((*path, *err.path), err.reason) from None
        return value
    value = normalized(name, value)  # a boolean setting also takes yes/no/on/off
    if not _fits(value, _FIELD_TYPES[name]):
        expected = describe_field(name) + text_number_hint(value)
        raise doc.bad(path, value, f"{name} takes {expected}")
    try:
        TrialConfig.from_dict({name: value})
    except (ConfigError, TypeError, ValueError) as err:
        raise doc.bad(path, value, allowed_part(err)) from None
    if name in LAYER_FIELDS:
        check_layers(doc, path, name, value, shape.layers, shape.heads, _has_layers(shape.layers))
    if name == "max_length":
        _check_window(doc, path, value, shape)
    return value


def _check_window(doc: Doc, path: FieldPath, value: Any, shape: Shape) -> None:
    """A window longer than the model's position table fails in its embeddings, in every
    trial; where the limit is unknown (0), the trial finds out."""
    if shape.window and is_int(value) and value > shape.window:
        raise doc.bad(path, value, f"the model reads at most {shape.window} sub-words at once "
                      f"(its table of positions); use 8..{shape.window}")  # fmt: skip


def _resolve_depth(doc: Doc, path: FieldPath, value: Any, shape: Shape) -> int | str:
    layers = shape.layers
    if layers:
        allowed = f"{_has_layers(layers)}; use 1..{layers}, {DEPTH_FORMS}"
    else:
        allowed = f"use a block count >= 1, {DEPTH_FORMS} (N >= 1)"
    if isinstance(value, str):
        try:
            cut = depth_cut(value)
        except DepthError:
            raise doc.bad(path, value, allowed) from None
        if not layers:
            return f"full-{cut}" if cut else "full"
        if layers - cut < 1:
            raise doc.bad(path, value, f"it leaves {count(layers - cut, 'layer')}: {allowed}")
        return layers - cut
    if not is_int(value) or value < 1 or (layers and value > layers):
        raise doc.bad(path, value, allowed)
    return value


def check_layers(
    doc: Doc, path: FieldPath, name: str, value: Any, limit: int, heads: int, why: str
) -> None:
    """Block indices must exist in the encoder the setting acts on (0 bounds: unknown)."""
    if name == "reinit_heads":
        for index, pair in enumerate(value):
            _check_head(doc, (*path, index), pair, limit, heads, why)
        return
    if not is_int(value):  # None, or freeze: embeddings
        return
    if value < 0 or (limit and value > limit):
        raise doc.bad(path, value, f"{why}; use 0..{limit}" if limit else "use 0 or more")


def _check_head(doc: Doc, path: FieldPath, pair: list, limit: int, heads: int, why: str) -> None:
    layer, head = pair
    if layer < 0 or (limit and layer >= limit):
        allowed = f"{why}; layers are 0..{limit - 1}" if limit else "a layer index >= 0"
        raise doc.bad((*path, 0), layer, allowed)
    if head < 0 or (heads and head >= heads):
        allowed = f"the model has {count(heads, 'head')}; use 0..{heads - 1}"
        allowed = allowed if heads else "a head index >= 0"
        raise doc.bad((*path, 1), head, allowed)


def fixed_factors(doc: Doc, fixed: dict, shape: Shape) -> dict[str, Any]:
    checked = {
        name: check_value(doc, ("fixed", name), name, value, shape) for name, value in fixed.items()
    }
    _check_epochs_beside_budget(doc, checked)
    return checked


def _check_epochs_beside_budget(doc: Doc, fixed: dict[str, Any]) -> None:
    """`--set fixed.epochs=N` where a budget decides how long each trial trains would change
    nothing (`epochs` counts only without one): refused, naming the budget, rather than run as
    if it had. A file may write both (a profile adding a budget to a base's `epochs`)."""
    budget = fixed.get(BUDGET)
    if budget and "epochs" in fixed and doc.override_of(("fixed", "epochs")) is not None:
        raise doc.fail(("fixed", "epochs"), (
            f"{show(fixed['epochs'])} has no effect: the budget {show(budget)} decides how long "
            "each trial trains (epochs counts only without one); set fixed.budget instead, or "
            "fixed.budget=null to train by epochs"))  # fmt: skip


def grid_factors(doc: Doc, grid: dict, shape: Shape) -> dict[str, tuple]:
    """Arm factors: the cross product of their value lists is the set of arms."""
    if not grid:
        raise doc.fail(("grid",), "empty grid: give at least one factor with a list of "
                       "values, e.g. depth: [full, full-1]")  # fmt: skip
    out: dict[str, tuple] = {}
    for name, values in grid.items():
        path = ("grid", name)
        if name == "reinit_heads" and isinstance(values, dict):
            values = _each_head(doc, path, values, shape)
        if not isinstance(values, list):
            raise doc.bad(path, values, "a list of values, one arm each, e.g. [full, full-1]")
        if not values:
            raise doc.fail(path, "empty grid: this factor has no values; give a list of values")
        checked = [check_value(doc, (*path, i), name, v, shape) for i, v in enumerate(values)]
        doc.distinct(path, values, checked)
        out[name] = tuple(checked)
    return out


def _each_head(doc: Doc, path: FieldPath, value: dict, shape: Shape) -> list:
    """`reinit_heads: {one_head_in_blocks: [0, 1, -2, -1], baseline: true}`: one arm per head
    of each listed block (negative = from the top), plus the no-reinit arm `[]`."""
    doc.check_keys(path, value, tuple(HEADS_SHORTHAND), "the one-head-at-a-time shorthand")
    blocks = value.get("one_head_in_blocks")
    if not isinstance(blocks, list) or not blocks or not all(is_int(b) for b in blocks):
        raise doc.bad((*path, "one_head_in_blocks"), blocks, "a list of block indices")
    written = value.get("heads")  # `heads`: for a hub model not in the cache
    if written is not None and (not is_int(written) or not 1 <= written <= MAX_HEADS):
        raise doc.bad((*path, "heads"), written, f"the heads per block, 1..{MAX_HEADS}")
    heads = shape.heads or written
    if not heads or (not shape.layers and any(b < 0 for b in blocks)):
        why = "the model's layer and head counts could not be read: give `heads: N` and "
        raise doc.fail(path, why + "non-negative blocks, or list the [[layer, head]] arms")
    resolved = [b + shape.layers if b < 0 else b for b in blocks]
    for index, block in enumerate(resolved):
        if block < 0 or (shape.layers and block >= shape.layers):
            allowed = (
                f"{_has_layers(shape.layers)}; use 0..{shape.layers - 1} or -1..-{shape.layers}"
            )
            raise doc.bad((*path, "one_head_in_blocks", index), blocks[index], allowed)
    if len(set(resolved)) * heads > MAX_TRIALS:  # refused before its arms are listed
        raise doc.fail(path, f"{len(set(resolved))} blocks x {heads} heads is more arms than "
                       f"the {MAX_TRIALS:,} trials a study may plan")  # fmt: skip
    arms = [[[block, head]] for block in dict.fromkeys(resolved) for head in range(heads)]
    baseline = bool_word(value.get("baseline", True))
    if baseline is None:
        raise doc.bad((*path, "baseline"), value["baseline"], "true or false (or yes/no)")
    return ([[]] if baseline else []) + arms


def compare_baseline(doc: Doc, grid: dict[str, tuple], shape: Shape) -> dict | None:
    """`compare: {baseline: {depth: full}}`: the report compares every arm with the
    baseline arm that equals it in the other factors, instead of all one-factor pairs."""
    value = doc.data.get("compare")
    if value is None:
        return None
    doc.mapping(("compare",), value, "a mapping like {baseline: {depth: full}}")
    doc.check_keys(("compare",), value, tuple(COMPARE_KEYS), "compare")
    baseline = value.get("baseline")
    path = ("compare", "baseline")
    doc.mapping(path, baseline, "a mapping of grid factors to one of their grid values")
    out = {}
    for name, written in baseline.items():
        if name not in grid:
            raise doc.fail((*path, str(name)), f"{name!r} is not a grid factor; grid "
                           f"factors: {', '.join(grid)}")  # fmt: skip
        checked = check_value(doc, (*path, name), name, written, shape)
        if checked not in grid[name]:
            shown = ", ".join(show(v) for v in grid[name])
            raise doc.bad((*path, name), written, f"one of the grid's values: {shown}")
        out[name] = checked
    return out


def takes_real(name: str) -> bool:
    """Whether factor `name` accepts a real number, so a real-valued distribution may draw it."""
    return _fits(0.5, _FIELD_TYPES.get(name, float))


def _fits(value: Any, hint: Any) -> bool:
    """Whether a YAML value has a type the TrialConfig field declares."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return any(_fits(value, arg) for arg in args)
    if origin is list:
        return isinstance(value, list) and all(_fits(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict)
    simple = {
        type(None): value is None,
        bool: isinstance(value, bool),
        int: is_int(value),
        float: isinstance(value, float | int) and not isinstance(value, bool),
        str: isinstance(value, str),
    }
    return simple.get(hint, True)


def describe_field(name: str) -> str:
    """What factor `name` takes, in words ('an integer or null')."""
    if name == "reinit_heads":
        return "a list of [layer, head] pairs"
    return _describe(_FIELD_TYPES[name])


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) in (Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in typing.get_args(hint))
    if typing.get_origin(hint) is list:
        return "a list"
    names = {
        type(None): "null",
        bool: "true or false",
        int: "an integer",
        float: "a number",
        str: "text",
    }
    return names.get(hint, "a value")


def allowed_part(err: Exception) -> str:
    """What a TrialConfig error says is allowed, to follow our own 'is not allowed: '."""
    text = joined(str(err))
    return text.split(" is not allowed: ", 1)[-1]


def _has_layers(layers: int) -> str:
    return f"the model has {count(layers, 'layer')}"
