"""Load and validate a study file from `search_spaces/` into a `StudySpec`.

A study runs for hours, possibly on a cluster, so every mistake that can be found by reading
the file (an unknown factor, a depth the model does not have, a confirm phase selecting from an
explore phase that does not exist) is reported before anything starts, as one line naming the
file, the line, the field, the bad value and what is allowed. The README's study-file section
lists the keys; `load_study` sums up how they combine. No Ray here: the spec is plain data
that `study.plan` expands.
"""

from __future__ import annotations

import copy
import difflib
import itertools
import math
import os
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import yaml

from study.analysis import SPENDING, Analysis
from trainables import layouts
from trainables.config import TrialConfig
from trainables.errors import ConfigError, ModelError, joined
from trainables.layouts import DEPTH_FORMS, RELATIVE_DEPTH
from trainables.model_source import read_config_json, resolve_model

SEARCH_SPACES = Path(__file__).resolve().parent.parent / "search_spaces"

FieldPath = tuple[str | int, ...]

TOP_LEVEL_KEYS = (
    "description",
    "model",
    "data",
    "metric",
    "grid",
    "search",
    "fixed",
    "seeds",
    "phases",
    "resources",
    "max_failures",
    "compare",
    "analysis",
    "profiles",
)
# Trial settings that are not factors, and the top-level key that sets each instead.
SET_AT_TOP = {
    "model": "model",
    "data": "data",
    "seed": "seeds",
    "data_seed": "phases.confirm.data_seeds",
}
FACTORS = tuple(name for name in TrialConfig.field_names() if name not in SET_AT_TOP)
SECTIONS = ("grid", "search", "fixed")
DISTRIBUTION_KEYS = {
    "loguniform": ("low", "high"),
    "uniform": ("low", "high"),
    "int": ("low", "high", "step"),
    "categorical": ("choices",),
}
# Settings whose valid range depends on how many blocks the (truncated) encoder has.
LAYER_FIELDS = ("reinit_from", "freeze", "reinit_heads")
METRIC_MODES = ("max", "min")

_FIELD_TYPES = typing.get_type_hints(TrialConfig)
_TEXT_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


class SpecError(ConfigError):
    """A study file that cannot be run; the message is one line starting with the file."""


@dataclass(frozen=True)
class Distribution:
    """How Optuna samples one searched factor inside an arm."""

    kind: str  # loguniform | uniform | int | categorical
    low: float | int | None = None
    high: float | int | None = None
    step: int | None = None
    choices: tuple | None = None


@dataclass(frozen=True)
class AshaSettings:
    """Per-arm ASHA pruning; times are in epochs."""

    grace_period: float
    reduction_factor: float


@dataclass(frozen=True)
class ExplorePhase:
    samples: int
    seeds: tuple[int, ...]
    asha: AshaSettings | None


@dataclass(frozen=True)
class ConfirmPhase:
    """The held-out seeds that estimate each arm's chosen configuration.

    `seeds` are all the seeds the phase may run, in order: the first `first` run in round 0,
    then `step` more per round while a comparison is undecided (group-sequential), up to all of
    them. `data_seeds`, when given, are crossed with every seed (`data_seed` of the trial)."""

    select: str | tuple[dict, ...]  # "best", or the samples to run in every arm
    seeds: tuple[int, ...]
    first: int = 0  # seeds in the first round; 0: all of them
    step: int = 0  # seeds added per later round
    reuse_explore_seeds: bool = False
    data_seeds: tuple[int, ...] | None = None

    @property
    def looks(self) -> tuple[int, ...]:
        """Seed counts after each round: the planned looks of the sequential analysis."""
        first = self.first or len(self.seeds)
        if not self.step:
            return (len(self.seeds),)
        return tuple(range(first, len(self.seeds), self.step)) + (len(self.seeds),)

    def round_seeds(self, round_index: int) -> tuple[int, ...]:
        looks = (0, *self.looks)
        return self.seeds[looks[round_index] : looks[round_index + 1]]


@dataclass(frozen=True)
class Metric:
    name: str = "dev_f1"
    mode: str = "max"


@dataclass(frozen=True)
class StudySpec:
    """A validated study. `model_layers` is 0 when the layer count could not be read (see
    `load_study`); depths are then kept as written ('full', 'full-N' or an int). `raw` is the
    merged mapping after the profile, without `profiles`, to log as the plan."""

    name: str
    path: Path
    profile: str | None  # the profile applied; None when the base was used as is
    description: str
    model: str
    data: dict
    model_layers: int
    model_heads: int
    grid: dict[str, tuple]
    search: dict[str, Distribution]
    fixed: dict[str, Any]
    seeds: tuple[int, ...]
    explore: ExplorePhase | None
    confirm: ConfirmPhase | None
    metric: Metric
    resources: dict[str, float]
    max_failures: int
    raw: dict = field(repr=False)
    compare_baseline: dict | None = None  # compare each arm with this arm only (report)
    analysis: Analysis = field(default_factory=Analysis)


@dataclass(frozen=True)
class _Shape:
    layers: int  # 0: unknown
    heads: int


# ----------------------------------------------------------------------------- public API


def known_studies(folder: Path = SEARCH_SPACES) -> list[str]:
    """Study names (file stems) in `folder`, for listings and 'unknown study' messages."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(path.stem for path in folder.glob("*.yaml") if path.is_file())


def load_study(
    name_or_path: str,
    profile: str | None = "default",
    folder: Path = SEARCH_SPACES,
    *,
    resolve_model_layers: bool = True,
    download: bool = False,
) -> StudySpec:
    """Read, merge and validate a study, so that a bad file fails here and not hours into a run.

    `name_or_path` is a study name (`folder/NAME.yaml`) or a path to a YAML file. `profile`
    names an entry of the file's `profiles`, deep-merged onto the base (mappings merged key by
    key, anything else replaced; a search factor whose `type` changes is replaced whole);
    None uses the base, and "default" falls back to the base when the file has no such profile.
    A null phase, `search` or `asha` counts as absent, so a profile can switch one off. A missing
    `data` is the trial default; a missing `confirm.select` is 'best' with an explore phase, and
    a single empty sample (each arm runs once) when there is neither explore nor `search`.

    The model's layer and head counts are read from its config (never its weights), to resolve
    'full'/'full-N' depths and check layer indices. Local folders and 'minilm' must be readable.
    A hub id is read from the local Hugging Face cache only (from the hub too if `download`);
    when it is not there, or when `resolve_model_layers` is False, layer counts are unknown:
    `model_layers` and `model_heads` are 0, depths stay as written and only their form is checked.
    """
    path = _find_study(name_or_path, Path(folder))
    base = _read(path)
    doc = _apply_profile(base, profile)
    return _build(doc, path, resolve_model_layers, download)


# ----------------------------------------------------------------------------- reading


@dataclass
class _Doc:
    """Study data plus where each field is written, so errors can point at a line."""

    display: str
    data: dict
    lines: dict[FieldPath, int]
    profile: str | None = None

    def locate(self, path: FieldPath) -> tuple[int, str]:
        """Line and shown name of `path`: where the applied profile writes it (or the nearest
        field around it that the profile writes), else where the base does; a missing field gets
        the line of the nearest field around it."""
        for cut in range(len(path), -1, -1):
            prefix = path[:cut]
            in_profile = ("profiles", self.profile, *prefix)
            if self.profile is not None and cut and in_profile in self.lines:
                return self.lines[in_profile], _dotted(("profiles", self.profile, *path))
            if prefix in self.lines:
                return self.lines[prefix], _dotted(path)
        return 1, _dotted(path)


def _find_study(name_or_path: str, folder: Path) -> Path:
    if name_or_path.endswith((".yaml", ".yml")) or os.sep in name_or_path or "/" in name_or_path:
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise SpecError(f"{name_or_path}: no such study file")
        return path
    path = folder / f"{name_or_path}.yaml"
    if path.is_file():
        return path
    known = ", ".join(known_studies(folder)) or "(none)"
    raise SpecError(f"unknown study {name_or_path!r}; known studies in {_display(folder)}: {known}")


def _display(path: Path) -> str:
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(resolved)


def _read(path: Path) -> _Doc:
    display = _display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"{display}: cannot read the study file: {joined(str(err))}") from None
    data, lines = _parse_yaml(text, display)
    doc = _Doc(display, data, lines)
    if not isinstance(data, dict):
        raise _bad(doc, (), data, "a mapping of study settings (description, model, grid, ...)")
    _check_keys(doc, (), data, TOP_LEVEL_KEYS)
    _check_profiles(doc)
    return doc


def _parse_yaml(text: str, display: str) -> tuple[Any, dict[FieldPath, int]]:
    """Safe-load the text keeping its node tree, whose marks give each field's line."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise SpecError(f"{display}:1: the file is empty; expected a study mapping")
        _check_duplicate_keys(node, display, ())
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as err:
        raise SpecError(_syntax_message(err, display)) from None
    except yaml.YAMLError as err:
        raise SpecError(f"{display}:1: YAML syntax error: {joined(str(err))}") from None
    finally:
        loader.dispose()
    return data, _node_lines(node, (), {}, set())


def _syntax_message(err: yaml.MarkedYAMLError, display: str) -> str:
    mark = err.problem_mark or err.context_mark
    where = f"{mark.line + 1}:{mark.column + 1}" if mark else "1"
    problem = ": ".join(part for part in (err.context, err.problem) if part)
    return f"{display}:{where}: YAML syntax error: {joined(problem or str(err))}"


def _check_duplicate_keys(node: yaml.Node, display: str, path: FieldPath) -> None:
    # PyYAML silently keeps the last of two equal keys; a repeated `fixed:` would lose settings.
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key, value in node.value:
            if key.tag == "tag:yaml.org,2002:merge" or not isinstance(key, yaml.ScalarNode):
                continue
            line = key.start_mark.line + 1
            if key.value in first:
                name = _dotted((*path, key.value))
                raise SpecError(
                    f"{display}:{line}: {name}: duplicate key (first written at line "
                    f"{first[key.value]}); write each key once"
                )
            first[key.value] = line
            _check_duplicate_keys(value, display, (*path, key.value))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _check_duplicate_keys(item, display, (*path, index))


def _node_lines(
    node: yaml.Node, path: FieldPath, out: dict[FieldPath, int], stack: set[int]
) -> dict[FieldPath, int]:
    """Map each field path to its 1-based line: a key's line for mapping entries, the item's
    line for list items. `stack` guards against recursive YAML aliases."""
    out.setdefault(path, node.start_mark.line + 1)
    if id(node) in stack:
        return out
    stack.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = (*path, str(key.value))
            out[child] = key.start_mark.line + 1
            _node_lines(value, child, out, stack)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _node_lines(item, (*path, index), out, stack)
    stack.discard(id(node))
    return out


# ----------------------------------------------------------------------------- profiles


def _check_profiles(doc: _Doc) -> None:
    profiles = doc.data.get("profiles")
    if profiles is None:
        return
    if not isinstance(profiles, dict):
        raise _bad(doc, ("profiles",), profiles, "a mapping of profile name: settings to override")
    allowed = tuple(key for key in TOP_LEVEL_KEYS if key != "profiles")
    for name, override in profiles.items():
        path = ("profiles", str(name))
        if override is not None and not isinstance(override, dict):
            raise _bad(doc, path, override, "a mapping of settings to override, e.g. {seeds: 2}")
        _check_keys(doc, path, override or {}, allowed)


def _apply_profile(doc: _Doc, profile: str | None) -> _Doc:
    profiles = doc.data.get("profiles") or {}
    base = {key: value for key, value in doc.data.items() if key != "profiles"}
    if profile is None or (profile == "default" and "default" not in profiles):
        return _Doc(doc.display, copy.deepcopy(base), doc.lines)
    if profile not in profiles:
        names = ", ".join(map(str, profiles)) or "(none)"
        raise _fail(doc, ("profiles",), f"no profile {profile!r} in this file; profiles: {names}")
    override = profiles[profile] or {}
    merged = _merge(base, override)
    _replace_retyped_distributions(merged, base, override)
    return _Doc(doc.display, merged, doc.lines, profile)


def _merge(base: Any, override: Any) -> Any:
    if not (isinstance(base, dict) and isinstance(override, dict)):
        return copy.deepcopy(override)
    merged = copy.deepcopy(base)
    for key, value in override.items():
        merged[key] = _merge(base[key], value) if key in base else copy.deepcopy(value)
    return merged


def _replace_retyped_distributions(merged: dict, base: dict, override: dict) -> None:
    # Merging {type: categorical, choices: [...]} onto {type: loguniform, low, high} key by key
    # would leave low/high beside choices; a changed type means a new distribution.
    old, new = base.get("search"), override.get("search")
    if not (isinstance(old, dict) and isinstance(new, dict) and isinstance(merged["search"], dict)):
        return
    for name, dist in new.items():
        before = old.get(name)
        retyped = isinstance(dist, dict) and isinstance(before, dict)
        if retyped and dist.get("type", before.get("type")) != before.get("type"):
            merged["search"][name] = copy.deepcopy(dist)


# ----------------------------------------------------------------------------- building


def _build(doc: _Doc, path: Path, resolve_layers: bool, download: bool) -> StudySpec:
    description = _description(doc)
    model = _model_name(doc)
    data = _data(doc)
    metric = _metric(doc)
    shape = _model_shape(doc, model, resolve_layers, download)
    sections = _sections(doc)
    fixed = _fixed(doc, sections["fixed"], shape)
    grid = _grid(doc, sections["grid"], shape)
    search = _search(doc, sections["search"], shape)
    seeds = _seeds(doc)
    explore, confirm = _phases(doc, seeds, search, shape)
    analysis = _analysis(doc, confirm)
    resources = _resources(doc)
    max_failures = _integer(
        doc, ("max_failures",), doc.data.get("max_failures", 0), 0, "retries per trial, >= 0"
    )
    _check_arms(doc, grid, fixed, search, confirm, shape, {"model": model, "data": data})
    baseline = _compare_baseline(doc, grid, shape)
    return StudySpec(
        name=path.stem,
        path=path.resolve(),
        profile=doc.profile,
        description=description,
        model=model,
        data=data,
        model_layers=shape.layers,
        model_heads=shape.heads,
        grid=grid,
        search=search,
        fixed=fixed,
        seeds=seeds,
        explore=explore,
        confirm=confirm,
        metric=metric,
        resources=resources,
        max_failures=max_failures,
        raw=doc.data,
        compare_baseline=baseline,
        analysis=analysis,
    )


def _description(doc: _Doc) -> str:
    value = doc.data.get("description")
    allowed = "one line saying which question the study answers"
    if value is None:
        raise _missing(doc, ("description",), allowed)
    if not isinstance(value, str) or not value.strip() or "\n" in value.strip():
        raise _bad(doc, ("description",), value, allowed)
    return value.strip()


def _model_name(doc: _Doc) -> str:
    value = doc.data.get("model")
    allowed = "'minilm', a local Hugging Face model folder or a hub id"
    if value is None:
        raise _missing(doc, ("model",), allowed)
    if not isinstance(value, str) or not value.strip():
        raise _bad(doc, ("model",), value, allowed)
    return value.strip()


def _data(doc: _Doc) -> dict:
    value = doc.data.get("data")
    if value is None:
        return copy.deepcopy(TrialConfig().data)
    if not isinstance(value, dict):
        raise _bad(doc, ("data",), value, "a mapping such as {embedded: wnut16}")
    return value


def _metric(doc: _Doc) -> Metric:
    value = doc.data.get("metric")
    if value is None:
        return Metric()
    _mapping(doc, ("metric",), value, "a mapping {name: dev_f1, mode: max}")
    _check_keys(doc, ("metric",), value, ("name", "mode"))
    name, mode = value.get("name", Metric.name), value.get("mode", Metric.mode)
    if not isinstance(name, str) or not name.strip():
        raise _bad(doc, ("metric", "name"), name, "a reported metric name such as dev_f1")
    if mode not in METRIC_MODES:
        raise _bad(doc, ("metric", "mode"), mode, "'max' or 'min'")
    return Metric(name.strip(), mode)


def _model_shape(doc: _Doc, model: str, resolve_layers: bool, download: bool) -> _Shape:
    """Layer and head counts from the model's config alone (no weights are read)."""
    if not resolve_layers:
        return _Shape(0, 0)
    try:
        resolved = resolve_model(model)
    except ModelError as err:
        raise _bad(doc, ("model",), model, str(err)) from None
    hub_only = not Path(resolved).is_dir() and not download
    try:
        config = _model_config(resolved, hub_only)
    except Exception as err:  # transformers raises many kinds; each becomes one line
        if hub_only:
            return _Shape(0, 0)
        raise _fail(doc, ("model",), f"cannot read the config of {model!r}: {err}") from None
    try:
        layout = layouts.layout_of(config["model_type"])
    except ModelError as err:
        raise _bad(doc, ("model",), model, str(err)) from None
    return _Shape(int(config[layout.layers_field]), int(config[layout.heads_field]))


def _model_config(resolved: str, hub_only: bool) -> dict[str, Any]:
    """The model type and its layer/head fields: straight from a local config.json when it
    has them, so that checking a study imports no torch; else through transformers, which
    knows each family's defaults and downloads hub configs."""
    local = read_config_json(resolved) if Path(resolved).is_dir() else None
    layout = layouts.LAYOUTS.get(local.get("model_type")) if local else None
    if layout and all(name in local for name in layout.fields()):
        return local
    from transformers import AutoConfig  # imports torch: only when config.json falls short

    config = AutoConfig.from_pretrained(resolved, local_files_only=hub_only)
    names = {name for lay in layouts.LAYOUTS.values() for name in lay.fields()}
    return {"model_type": config.model_type, **{n: getattr(config, n, None) for n in names}}


# ----------------------------------------------------------------------------- factors


def _sections(doc: _Doc) -> dict[str, dict]:
    """The grid, search and fixed mappings, each factor known and in one section only."""
    sections: dict[str, dict] = {}
    owner: dict[str, str] = {}
    for section in SECTIONS:
        value = doc.data.get(section)
        value = {} if value is None else value
        _mapping(doc, (section,), value, "a mapping of factor: setting")
        for name in value:
            _check_factor_name(doc, section, name)
            if name in owner:
                line, other = doc.locate((owner[name], name))
                raise _fail(
                    doc,
                    (section, name),
                    f"factor {name!r} is also set in {other} (line {line}); "
                    "a factor belongs to one of grid, search, fixed",
                )
            owner[name] = section
        sections[section] = value
    return sections


def _check_factor_name(doc: _Doc, section: str, name: Any) -> None:
    path = (section, str(name))
    if name in SET_AT_TOP:
        raise _fail(
            doc, path, f"{name!r} is not a factor: set it with the top-level `{SET_AT_TOP[name]}`"
        )
    if name not in FACTORS:
        raise _fail(
            doc,
            path,
            f"unknown factor {name!r}{_suggest(name, FACTORS)}; factors: {', '.join(FACTORS)}",
        )


def _check_value(doc: _Doc, path: FieldPath, name: str, value: Any, shape: _Shape) -> Any:
    """Check one setting of factor `name` as the trainable would, against the full model; return
    it with 'full'/'full-N' depths resolved."""
    if name == "depth":
        return _resolve_depth(doc, path, value, shape)
    if not _fits(value, _FIELD_TYPES[name]):
        expected = _describe_field(name) + _text_number_hint(value)
        raise _bad(doc, path, value, f"{name} takes {expected}")
    try:
        TrialConfig.from_dict({name: value})
    except (ConfigError, TypeError, ValueError) as err:
        raise _bad(doc, path, value, _allowed_part(err)) from None
    if name in LAYER_FIELDS:
        _check_layers(doc, path, name, value, shape.layers, shape.heads, _has_layers(shape.layers))
    return value


def _resolve_depth(doc: _Doc, path: FieldPath, value: Any, shape: _Shape) -> int | str:
    layers = shape.layers
    if layers:
        allowed = f"{_has_layers(layers)}; use 1..{layers}, {DEPTH_FORMS}"
    else:
        allowed = f"use a block count >= 1, {DEPTH_FORMS} (N >= 1)"
    match = RELATIVE_DEPTH.fullmatch(value.strip()) if isinstance(value, str) else None
    if match:
        cut = int(match.group(1) or 0)
        if match.group(1) is not None and cut < 1:
            raise _bad(doc, path, value, allowed)
        if not layers:
            return f"full-{cut}" if cut else "full"
        if layers - cut < 1:
            raise _bad(doc, path, value, f"it leaves {_count(layers - cut, 'layer')}: {allowed}")
        return layers - cut
    if not _is_int(value) or value < 1 or (layers and value > layers):
        raise _bad(doc, path, value, allowed)
    return value


def _check_layers(
    doc: _Doc, path: FieldPath, name: str, value: Any, limit: int, heads: int, why: str
) -> None:
    """Block indices must exist in the encoder the setting acts on (0 bounds: unknown)."""
    if name == "reinit_heads":
        for index, pair in enumerate(value):
            _check_head(doc, (*path, index), pair, limit, heads, why)
        return
    if not _is_int(value):  # None, or freeze: embeddings
        return
    if value < 0 or (limit and value > limit):
        raise _bad(doc, path, value, f"{why}; use 0..{limit}" if limit else "use 0 or more")


def _check_head(doc: _Doc, path: FieldPath, pair: list, limit: int, heads: int, why: str) -> None:
    layer, head = pair
    if layer < 0 or (limit and layer >= limit):
        allowed = f"{why}; layers are 0..{limit - 1}" if limit else "a layer index >= 0"
        raise _bad(doc, (*path, 0), layer, allowed)
    if head < 0 or (heads and head >= heads):
        allowed = f"the model has {_count(heads, 'head')}; use 0..{heads - 1}"
        allowed = allowed if heads else "a head index >= 0"
        raise _bad(doc, (*path, 1), head, allowed)


def _fixed(doc: _Doc, fixed: dict, shape: _Shape) -> dict[str, Any]:
    return {
        name: _check_value(doc, ("fixed", name), name, value, shape)
        for name, value in fixed.items()
    }


def _grid(doc: _Doc, grid: dict, shape: _Shape) -> dict[str, tuple]:
    """Arm factors: the cross product of their value lists is the set of arms."""
    if not grid:
        raise _fail(
            doc,
            ("grid",),
            "empty grid: give at least one factor with a list of "
            "values, e.g. depth: [full, full-1]",
        )
    out: dict[str, tuple] = {}
    for name, values in grid.items():
        path = ("grid", name)
        if name == "reinit_heads" and isinstance(values, dict):
            values = _each_head(doc, path, values, shape)
        if not isinstance(values, list):
            raise _bad(doc, path, values, "a list of values, one arm each, e.g. [full, full-1]")
        if not values:
            raise _fail(doc, path, "empty grid: this factor has no values; give a list of values")
        checked = [_check_value(doc, (*path, i), name, v, shape) for i, v in enumerate(values)]
        _check_distinct(doc, path, values, checked)
        out[name] = tuple(checked)
    return out


HEADS_SHORTHAND = ("one_head_in_blocks", "baseline", "heads")


def _each_head(doc: _Doc, path: FieldPath, value: dict, shape: _Shape) -> list:
    """`reinit_heads: {one_head_in_blocks: [0, 1, -2, -1], baseline: true}`: one arm per head
    of each listed block (negative = from the top), plus the no-reinit arm `[]`."""
    _check_keys(doc, path, value, HEADS_SHORTHAND, "the one-head-at-a-time shorthand")
    blocks = value.get("one_head_in_blocks")
    if not isinstance(blocks, list) or not blocks or not all(_is_int(b) for b in blocks):
        raise _bad(doc, (*path, "one_head_in_blocks"), blocks, "a list of block indices")
    heads = shape.heads or value.get("heads")  # `heads`: for a hub model not in the cache
    if not heads or (not shape.layers and any(b < 0 for b in blocks)):
        why = "the model's layer and head counts could not be read: give `heads: N` and "
        raise _fail(doc, path, why + "non-negative blocks, or list the [[layer, head]] arms")
    resolved = [b + shape.layers if b < 0 else b for b in blocks]
    for index, block in enumerate(resolved):
        if block < 0 or (shape.layers and block >= shape.layers):
            allowed = (
                f"{_has_layers(shape.layers)}; use 0..{shape.layers - 1} or -1..-{shape.layers}"
            )
            raise _bad(doc, (*path, "one_head_in_blocks", index), blocks[index], allowed)
    arms = [[[block, head]] for block in dict.fromkeys(resolved) for head in range(heads)]
    return ([[]] if value.get("baseline", True) else []) + arms


def _compare_baseline(doc: _Doc, grid: dict[str, tuple], shape: _Shape) -> dict | None:
    """`compare: {baseline: {reinit_from: 6}}`: the report compares every arm with the
    baseline arm that equals it in the other factors, instead of all one-factor pairs."""
    value = doc.data.get("compare")
    if value is None:
        return None
    _mapping(doc, ("compare",), value, "a mapping like {baseline: {reinit_from: 6}}")
    _check_keys(doc, ("compare",), value, ("baseline",), "compare")
    baseline = value.get("baseline")
    path = ("compare", "baseline")
    _mapping(doc, path, baseline, "a mapping of grid factors to one of their grid values")
    out = {}
    for name, written in baseline.items():
        if name not in grid:
            raise _fail(doc, (*path, str(name)), f"{name!r} is not a grid factor; grid "
                        f"factors: {', '.join(grid)}")  # fmt: skip
        checked = _check_value(doc, (*path, name), name, written, shape)
        if checked not in grid[name]:
            shown = ", ".join(_show(v) for v in grid[name])
            raise _bad(doc, (*path, name), written, f"one of the grid's values: {shown}")
        out[name] = checked
    return out


def _check_distinct(doc: _Doc, path: FieldPath, written: list, values: list) -> None:
    for index, value in enumerate(values):
        earlier = values.index(value)
        if earlier < index:
            _, other = doc.locate((*path, earlier))
            raise _bad(
                doc,
                (*path, index),
                written[index],
                f"it repeats {other} ({_show(value)}); each value must be different",
            )


# ----------------------------------------------------------------------------- search


def _search(doc: _Doc, search: dict, shape: _Shape) -> dict[str, Distribution]:
    return {
        name: _distribution(doc, ("search", name), name, spec, shape)
        for name, spec in search.items()
    }


def _distribution(doc: _Doc, path: FieldPath, name: str, spec: Any, shape: _Shape) -> Distribution:
    kinds = ", ".join(DISTRIBUTION_KEYS)
    _mapping(
        doc,
        path,
        spec,
        "a distribution mapping, e.g. {type: loguniform, low: 1.0e-5, high: 3.0e-4}",
    )
    kind = spec.get("type")
    if kind is None:
        raise _missing(doc, (*path, "type"), f"one of {kinds}")
    if kind not in DISTRIBUTION_KEYS:
        raise _bad(doc, (*path, "type"), kind, f"one of {kinds}")
    _check_keys(doc, path, spec, ("type", *DISTRIBUTION_KEYS[kind]), f"a {kind} distribution")
    if kind == "categorical":
        return _categorical(doc, path, name, spec, shape)
    if kind != "int" and not _fits(0.5, _FIELD_TYPES.get(name, float)):
        raise _bad(
            doc,
            (*path, "type"),
            kind,
            f"{name} takes {_describe_field(name)}; use int or categorical",
        )
    return _numeric(doc, path, name, kind, spec, shape)


def _categorical(doc: _Doc, path: FieldPath, name: str, spec: dict, shape: _Shape) -> Distribution:
    choices = spec.get("choices")
    allowed = "a non-empty list of values"
    if choices is None:
        raise _missing(doc, (*path, "choices"), allowed)
    if not isinstance(choices, list) or not choices:
        raise _bad(doc, (*path, "choices"), choices, allowed)
    where = (*path, "choices")
    checked = [_check_value(doc, (*where, i), name, v, shape) for i, v in enumerate(choices)]
    _check_distinct(doc, where, choices, checked)
    return Distribution("categorical", choices=tuple(checked))


def _numeric(
    doc: _Doc, path: FieldPath, name: str, kind: str, spec: dict, shape: _Shape
) -> Distribution:
    """Bounds are checked as a range first, then each as a setting the trainable must accept
    (Optuna may draw either end)."""
    low, high = (_bound(doc, (*path, key), kind, spec.get(key)) for key in ("low", "high"))
    if low >= high:
        raise _bad(doc, (*path, "low"), low, f"low must be below high ({_show(high)})")
    if kind == "loguniform" and low <= 0:
        raise _bad(doc, (*path, "low"), low, "a loguniform low must be > 0")
    step = spec.get("step")
    if step is not None:
        _integer(doc, (*path, "step"), step, 1, "an integer step >= 1")
    low, high = (_check_value(doc, (*path, k), name, spec[k], shape) for k in ("low", "high"))
    return Distribution(kind, low=low, high=high, step=step)


def _bound(doc: _Doc, path: FieldPath, kind: str, value: Any) -> float | int:
    if value is None:
        raise _missing(doc, path, f"the {path[-1]} bound of the {kind} distribution")
    if kind == "int":
        return _integer(doc, path, value, None, "an integer bound")
    return _number(doc, path, value, lambda _: True, "a number")


# ----------------------------------------------------------------------------- seeds, phases


def _seeds(doc: _Doc) -> tuple[int, ...] | int:
    """A count n (each phase takes n fresh seeds unless it says otherwise; seeds are numbered
    0, 1, ... across phases) or a list (the pool the phases take their seeds from, in order)."""
    value = doc.data.get("seeds")
    allowed = "a count n (seeds per phase) or a list of different integers >= 0"
    if value is None:
        raise _missing(doc, ("seeds",), allowed)
    if _is_int(value):
        return _integer(doc, ("seeds",), value, 1, allowed)
    if not isinstance(value, list) or not value:
        raise _bad(doc, ("seeds",), value, allowed)
    for index, seed in enumerate(value):
        _integer(doc, ("seeds", index), seed, 0, "a seed: an integer >= 0")
    _check_distinct(doc, ("seeds",), value, value)
    return tuple(value)


def _phase_seeds(
    doc: _Doc, path: FieldPath, value: Any, pool: tuple[int, ...] | int, offset: int
) -> tuple[int, ...]:
    """A count takes the next n seeds of the pool after `offset` (the seeds earlier phases
    hold), so phases never share a seed by default; a list is taken as given."""
    if value is None:
        value = pool if _is_int(pool) else len(pool) - offset
        if value < 1:
            raise _missing(doc, path, f"the pool `seeds` has no seed left after {offset}")
    if _is_int(value):
        _integer(doc, path, value, 1, "a count >= 1 or a list of seeds")
        if _is_int(pool):
            return tuple(range(offset, offset + value))
        if offset + value > len(pool):
            left = _count(len(pool) - offset, "seed")
            raise _bad(doc, path, value, f"the pool `seeds` {_show(pool)} has {left} left "
                       f"after the {offset} that earlier phases take; list more seeds, or give "
                       "`seeds` as a count")  # fmt: skip
        return pool[offset : offset + value]
    if not isinstance(value, list) or not value:
        raise _bad(doc, path, value, "a count >= 1 or a non-empty list of seeds")
    for index, seed in enumerate(value):
        if _is_int(pool):
            _integer(doc, (*path, index), seed, 0, "a seed: an integer >= 0")
        elif not _is_int(seed) or seed not in pool:
            raise _bad(doc, (*path, index), seed, f"one of the study's seeds {_show(pool)}")
    _check_distinct(doc, path, value, value)
    return tuple(value)


def _phases(
    doc: _Doc, seeds: tuple[int, ...] | int, search: dict, shape: _Shape
) -> tuple[ExplorePhase | None, ConfirmPhase | None]:
    path = ("phases",)
    phases = doc.data.get("phases")
    if phases is None:
        raise _missing(doc, path, "an explore phase, a confirm phase, or both")
    _mapping(doc, path, phases, "a mapping with explore and/or confirm")
    _check_keys(doc, path, phases, ("explore", "confirm"))
    explore = _explore(doc, phases.get("explore"), seeds, search)
    confirm = _confirm(doc, phases.get("confirm"), seeds, search, explore, shape)
    if explore is None and confirm is None:
        raise _fail(doc, path, "no phase: give explore, confirm, or both")
    return explore, confirm


def _explore(
    doc: _Doc, value: Any, seeds: tuple[int, ...] | int, search: dict
) -> ExplorePhase | None:
    if value is None:
        return None
    path = ("phases", "explore")
    _mapping(doc, path, value, "a mapping with samples, seeds and asha")
    _check_keys(doc, path, value, ("samples", "seeds", "asha"))
    if not search:
        raise _fail(
            doc,
            path,
            "the explore phase samples the `search` factors, but `search` "
            "is empty; add search factors or drop the explore phase",
        )
    samples = value.get("samples")
    if samples is None:
        raise _missing(doc, (*path, "samples"), "the number of Optuna samples per arm (>= 1)")
    _integer(doc, (*path, "samples"), samples, 1, "Optuna samples per arm, >= 1")
    distinct = _distinct_samples(search)
    if distinct is not None and samples > distinct:
        raise _bad(doc, (*path, "samples"), samples, f"at most {distinct}: the searched factors "
                   f"have {distinct} distinct values, and a sample drawn twice would only "
                   "repeat trials")  # fmt: skip
    phase_seeds = _phase_seeds(doc, (*path, "seeds"), value.get("seeds"), seeds, 0)
    return ExplorePhase(samples, phase_seeds, _asha(doc, value.get("asha")))


def _distinct_samples(search: dict[str, Distribution]) -> int | None:
    """How many different samples a space of categorical and int factors holds; None when a
    factor is real-valued (no limit)."""
    count = 1
    for dist in search.values():
        if dist.kind == "categorical":
            count *= len(dist.choices or ())
        elif dist.kind == "int":
            count *= (int(dist.high) - int(dist.low)) // (dist.step or 1) + 1
        else:
            return None
    return count


def _asha(doc: _Doc, value: Any) -> AshaSettings | None:
    if value is None:
        return None
    path = ("phases", "explore", "asha")
    _mapping(doc, path, value, "a mapping {grace_period: 1, reduction_factor: 2}")
    _check_keys(doc, path, value, ("grace_period", "reduction_factor"))
    settings = {
        "grace_period": (lambda x: x > 0, "epochs before the first pruning decision, > 0"),
        "reduction_factor": (lambda x: x > 1, "the fraction kept at each rung is 1/this; > 1"),
    }
    numbers = {}
    for key, (ok, allowed) in settings.items():
        if value.get(key) is None:
            raise _missing(doc, (*path, key), allowed)
        numbers[key] = float(_number(doc, (*path, key), value[key], ok, allowed))
    return AshaSettings(**numbers)


CONFIRM_KEYS = ("select", "seeds", "max_seeds", "step", "reuse_explore_seeds", "data_seeds")


def _confirm(
    doc: _Doc,
    value: Any,
    seeds: tuple[int, ...] | int,
    search: dict,
    explore: ExplorePhase | None,
    shape: _Shape,
) -> ConfirmPhase | None:
    if value is None:
        return None
    path = ("phases", "confirm")
    _mapping(doc, path, value, "a mapping with select and seeds")
    _check_keys(doc, path, value, CONFIRM_KEYS)
    select = _select(doc, value.get("select"), search, explore is not None, shape)
    reuse = value.get("reuse_explore_seeds", False)
    if not isinstance(reuse, bool):
        raise _bad(doc, (*path, "reuse_explore_seeds"), reuse, "true or false")
    held_by_explore = len(explore.seeds) if explore and not reuse else 0
    first, step, total = _rounds(doc, value, seeds)
    count = value.get("seeds") if total is None else total
    confirm_seeds = _phase_seeds(doc, (*path, "seeds"), count, seeds, held_by_explore)
    if explore and not reuse:
        _check_disjoint(doc, (*path, "seeds"), confirm_seeds, explore.seeds)
    data_seeds = value.get("data_seeds")
    if data_seeds is not None:
        data_seeds = _phase_seeds(doc, (*path, "data_seeds"), data_seeds, 1, 0)
    return ConfirmPhase(select, confirm_seeds, first, step, reuse, data_seeds)


def _rounds(doc: _Doc, value: dict, pool: tuple[int, ...] | int) -> tuple[int, int, int | None]:
    """`seeds: 5, max_seeds: 20, step: 5`: 5 seeds, then 5 more per round up to 20 while a
    comparison is undecided. Returns (first, step, total), total None without rounds."""
    path = ("phases", "confirm")
    max_seeds, step = value.get("max_seeds"), value.get("step")
    if max_seeds is None and step is None:
        return 0, 0, None
    first = value.get("seeds", pool if _is_int(pool) else None)
    if not _is_int(first):
        raise _bad(doc, (*path, "seeds"), first, "a count of seeds for the first round when "
                   "max_seeds and step are given")  # fmt: skip
    if max_seeds is None:
        raise _missing(doc, (*path, "max_seeds"), "the most seeds the rounds may reach")
    _integer(doc, (*path, "max_seeds"), max_seeds, first, f"a count >= seeds ({first})")
    step = max_seeds - first if step is None else step
    if max_seeds > first:
        _integer(doc, (*path, "step"), step, 1, "seeds added per round, >= 1")
    return first, (step if max_seeds > first else 0), max_seeds


def _check_disjoint(
    doc: _Doc, path: FieldPath, confirm: tuple[int, ...], explore: tuple[int, ...]
) -> None:
    shared = sorted(set(confirm) & set(explore))
    if shared:
        raise _bad(doc, path, list(confirm), f"seeds {_show(shared)} also ran in explore, where "
                   "they chose the configuration; a seed that chooses must not also estimate "
                   "(give other seeds, or set confirm.reuse_explore_seeds: true)")  # fmt: skip


def _analysis(doc: _Doc, confirm: ConfirmPhase | None) -> Analysis:
    """`analysis: {primary, margin, alpha, spending}`, declared before the data are seen."""
    path = ("analysis",)
    value = doc.data.get("analysis")
    value = {} if value is None else value
    _mapping(doc, path, value, "a mapping {primary: test_f1, margin: 0.01, alpha: 0.05}")
    _check_keys(doc, path, value, ("primary", "margin", "alpha", "spending"))
    primary = value.get("primary", Analysis.primary)
    known = _primary_metrics(doc)
    if primary not in known:
        raise _bad(doc, (*path, "primary"), primary, f"one of {', '.join(known)}"
                   f"{_suggest(primary, tuple(known))}")  # fmt: skip
    margin = _number(doc, (*path, "margin"), value.get("margin", Analysis.margin),
                     lambda x: x >= 0, "a margin >= 0 in the primary metric's units")  # fmt: skip
    alpha = _number(doc, (*path, "alpha"), value.get("alpha", Analysis.alpha),
                    lambda x: 0 < x < 0.5, "a level in (0, 0.5)")  # fmt: skip
    spending = value.get("spending", Analysis.spending)
    if spending not in SPENDING:
        raise _bad(doc, (*path, "spending"), spending, f"one of {', '.join(SPENDING)}")
    looks = confirm.looks if confirm else ()
    seed_order = confirm.seeds if confirm else ()
    data_seeds = len(confirm.data_seeds) if confirm and confirm.data_seeds else 1
    return Analysis(primary, float(margin), float(alpha), spending, looks, seed_order, data_seeds)


def _primary_metrics(doc: _Doc) -> list[str]:
    """Metrics every trial reports at its end: the comparable ones."""
    extra = (doc.data.get("data") or {}).get("extra") or {}
    names = ["test_f1", "dev_f1", "curve_area", "steps_to_95", "dev_loss", "test_loss"]
    names += [f"{name}_f1" for name in extra if isinstance(extra, dict)]
    metric = (doc.data.get("metric") or {}).get("name")
    return names + ([metric] if isinstance(metric, str) and metric not in names else [])


def _select(
    doc: _Doc, value: Any, search: dict, has_explore: bool, shape: _Shape
) -> str | tuple[dict, ...]:
    """'best' (of each arm's explore samples) or the samples every arm runs. Without an explore
    phase and without search factors, each arm runs once: a single empty sample."""
    path = ("phases", "confirm", "select")
    if value is None:
        if has_explore:
            return "best"
        if not search:
            return ({},)
        raise _missing(doc, path, "with no explore phase, list the samples to run")
    if value == "best":
        if not has_explore:
            raise _bad(
                doc,
                path,
                value,
                "'best' picks each arm's best explore sample, but there "
                "is no explore phase; add phases.explore or list the samples",
            )
        return "best"
    if not isinstance(value, list) or not value:
        raise _bad(doc, path, value, "'best' or a non-empty list of samples of the search factors")
    samples = [_sample(doc, (*path, i), item, search, shape) for i, item in enumerate(value)]
    _check_distinct(doc, path, value, samples)
    return tuple(samples)


def _sample(doc: _Doc, path: FieldPath, item: Any, search: dict, shape: _Shape) -> dict:
    names = ", ".join(search) or "(none)"
    if not isinstance(item, dict):
        raise _bad(doc, path, item, f"a mapping of the search factors ({names})")
    if set(item) != set(search):
        missing = ", ".join(name for name in search if name not in item) or "none"
        extra = ", ".join(str(name) for name in item if name not in search) or "none"
        raise _bad(
            doc,
            path,
            item,
            f"keys must be exactly the search factors ({names}); "
            f"missing: {missing}; not searched: {extra}",
        )
    return {name: _check_value(doc, (*path, name), name, item[name], shape) for name in search}


def _resources(doc: _Doc) -> dict[str, float]:
    value = doc.data.get("resources")
    value = {} if value is None else value
    _mapping(doc, ("resources",), value, "a mapping {cpu: 1, gpu: 0}")
    _check_keys(doc, ("resources",), value, ("cpu", "gpu"))
    cpu = _number(doc, ("resources", "cpu"), value.get("cpu", 1), lambda x: x > 0, "cpus > 0")
    gpu = _number(doc, ("resources", "gpu"), value.get("gpu", 0), lambda x: x >= 0, "gpus >= 0")
    return {"cpu": float(cpu), "gpu": float(gpu)}


# ----------------------------------------------------------------------------- arms


def _check_arms(
    doc: _Doc,
    grid: dict[str, tuple],
    fixed: dict,
    search: dict[str, Distribution],
    confirm: ConfirmPhase | None,
    shape: _Shape,
    top: dict,
) -> None:
    """Check each arm as a whole: layer indices against the arm's own depth (surgery happens
    after truncation) and one TrialConfig built from the arm's settings."""
    names = list(grid)
    samples = confirm.select if confirm and not isinstance(confirm.select, str) else ()
    for picks in itertools.product(*(range(len(grid[name])) for name in names)):
        arm = {name: grid[name][i] for name, i in zip(names, picks, strict=True)}
        where = {name: ("grid", name, i) for name, i in zip(names, picks, strict=True)}
        where.update({name: ("fixed", name) for name in fixed})
        settings = {**fixed, **arm}
        _check_arm_layers(doc, settings, where, search, samples, shape)
        try:
            TrialConfig.from_dict({**settings, **top, "seed": 0})
        except (ConfigError, TypeError, ValueError) as err:
            raise _fail(
                doc, ("grid",), f"the arm {_show(arm)} is not allowed: {_allowed_part(err)}"
            ) from None


def _check_arm_layers(
    doc: _Doc, settings: dict, where: dict, search: dict, samples: tuple, shape: _Shape
) -> None:
    depth = settings.get("depth")
    if not _is_int(depth) or depth == shape.layers:
        return  # already checked against the full model
    _, depth_name = doc.locate(where["depth"])
    why = f"arms with depth {depth} ({depth_name}) keep {_count(depth, 'layer')}"
    for name in LAYER_FIELDS:
        found = [(where[name], settings[name])] if name in settings else []
        found += _searched_values(search, name)
        found += [
            (("phases", "confirm", "select", i, name), s[name])
            for i, s in enumerate(samples)
            if name in s
        ]
        for path, value in found:
            _check_layers(doc, path, name, value, depth, shape.heads, why)


def _searched_values(search: dict[str, Distribution], name: str) -> list[tuple[FieldPath, Any]]:
    dist = search.get(name)
    if dist is None:
        return []
    if dist.kind == "categorical":
        return [(("search", name, "choices", i), c) for i, c in enumerate(dist.choices or ())]
    return [(("search", name, "low"), dist.low), (("search", name, "high"), dist.high)]


# ----------------------------------------------------------------------------- small helpers


def _fail(doc: _Doc, path: FieldPath, text: str) -> SpecError:
    line, name = doc.locate(path)
    return SpecError(f"{doc.display}:{line}: {name or '(top level)'}: {joined(text)}")


def _bad(doc: _Doc, path: FieldPath, value: Any, allowed: str) -> SpecError:
    return _fail(doc, path, f"{_show(value)} is not allowed: {allowed}")


def _missing(doc: _Doc, path: FieldPath, allowed: str) -> SpecError:
    line, name = doc.locate(path)
    return SpecError(f"{doc.display}:{line}: {name} is missing: {joined(allowed)}")


def _mapping(doc: _Doc, path: FieldPath, value: Any, allowed: str) -> None:
    if not isinstance(value, dict):
        raise _bad(doc, path, value, allowed)


def _check_keys(
    doc: _Doc, path: FieldPath, mapping: dict, allowed: tuple[str, ...], what: str = ""
) -> None:
    for key in mapping:
        if key not in allowed:
            where = f" for {what}" if what else ""
            if key in FACTORS and "fixed" in allowed:
                where += " (factors go under grid, search or fixed)"
            raise _fail(
                doc,
                (*path, str(key)),
                f"unknown key {key!r}{where}{_suggest(key, allowed)}; known keys: "
                f"{', '.join(allowed)}",
            )


def _integer(doc: _Doc, path: FieldPath, value: Any, minimum: int | None, allowed: str) -> int:
    if not _is_int(value) or (minimum is not None and value < minimum):
        raise _bad(doc, path, value, allowed + _text_number_hint(value))
    return value


def _number(
    doc: _Doc, path: FieldPath, value: Any, ok: Callable[[float], bool], allowed: str
) -> float | int:
    is_number = isinstance(value, float | int) and not isinstance(value, bool)
    if not is_number or not math.isfinite(value) or not ok(value):
        raise _bad(doc, path, value, allowed + _text_number_hint(value))
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
        int: _is_int(value),
        float: isinstance(value, float | int) and not isinstance(value, bool),
        str: isinstance(value, str),
    }
    return simple.get(hint, True)


def _describe_field(name: str) -> str:
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


def _text_number_hint(value: Any) -> str:
    if isinstance(value, str) and _TEXT_FLOAT.fullmatch(value.strip()):
        return f" (YAML reads {value} as text: write the number with a dot, e.g. 1.0e-5)"
    return ""


def _allowed_part(err: Exception) -> str:
    text = joined(str(err))
    return text.split(" is not allowed: ", 1)[-1]


def _has_layers(layers: int) -> str:
    return f"the model has {_count(layers, 'layer')}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _suggest(name: Any, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(str(name), known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _show(value: Any, limit: int = 80) -> str:
    text = repr(list(value) if isinstance(value, tuple) else value)
    return joined(text if len(text) <= limit else text[: limit - 3] + "...")


def _dotted(path: FieldPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
