"""`load_study`: read a study file, apply the profile and the command-line overrides, check
every section and build the `StudySpec`; also the top-level settings (description, model,
data, metric, resources) and the model's shape, read from its config alone."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from study.spec.arms import check_arms
from study.spec.distributions import search_space
from study.spec.document import Doc, FieldPath, is_int, suggest
from study.spec.factors import (
    Shape,
    compare_baseline,
    factor_sections,
    fixed_factors,
    grid_factors,
)
from study.spec.limits import check_plan_size
from study.spec.overrides import apply_overrides, parse_overrides
from study.spec.paths import data_locations, model_location
from study.spec.phases import check_first_rung, declared_analysis, study_phases, study_seeds
from study.spec.profiles import apply_profile
from study.spec.provenance import fixed_provenance
from study.spec.reading import find_study, read_study
from study.spec.stages import check_stage_factor, locate_stage_data
from study.spec.trainable import SYNTHETIC_MODEL, surface_shape, trainable_setting
from study.spec.validated import Metric, StudySpec
from trainables.data.sources import CORPUS_KINDS, SPLITS, UNTYPED, data_inputs
from trainables.errors import ConfigError, ModelError
from trainables.hub import cache_only_if_unreachable, load_failure
from trainables.settings import (
    LAYOUTS,
    MAX_SEED,
    TINY_CONFIG,
    TINY_MODEL,
    TrialConfig,
    evaluation_metrics,
    layout_of,
    longest_window,
    read_config_json,
    resolve_model,
)

METRIC_MODES = ("max", "min")
# The keys of `metric` and `resources`, with what they take and are for (docs/study-keys.md).
METRIC_KEYS = {
    "name": "a metric every evaluation reports (default `dev_f1`)",
    "mode": "`max` (default) or `min`: whether larger values of it are better",
}
RESOURCE_KEYS = {
    "cpu": "a number > 0 (default 1): CPUs one trial holds",
    "gpu": "a number >= 0 (default 0): GPUs one trial holds; fractions share a GPU",
}


def load_study(
    name_or_path: str,
    profile: str | None = "default",
    folder: Path | None = None,
    *,
    overrides: Sequence[str] = (),
    resolve_model_layers: bool = True,
    download: bool = False,
) -> StudySpec:
    """Read, merge and validate a study, so that a bad file fails here and not hours into a run.

    `name_or_path` is a path to a YAML file or a study name: `folder/NAME.yaml`, or without
    `folder`, `./search_spaces/NAME.yaml` then the shipped study (`reading.study_folders`).
    `profile` names an entry of the file's `profiles`, deep-merged onto the base (mappings
    merged key by key, anything else replaced; a search factor whose `type` changes is replaced
    whole); None uses the base, and "default" falls back to the base when the file has none.
    A null phase, `search` or `asha` counts as absent, so a profile can switch one off. A missing
    `data` is the trial default; a missing `confirm.select` is 'best' with an explore phase, and
    a single empty sample (each arm runs once) when there is neither explore nor `search`.

    The model's layer and head counts are read from its config (never its weights), to resolve
    'full'/'full-N' depths and check layer indices. Local folders and 'minilm' must be readable.
    A hub id is read from the local Hugging Face cache only (from the hub too if `download`);
    when it is not there, or when `resolve_model_layers` is False, layer counts are unknown:
    `model_layers` and `model_heads` are 0, depths stay as written and only their form is checked.

    `overrides` are `KEY=VALUE` texts (`fixed.epochs=5`), applied after the profile and checked
    like the file (see `study.spec.overrides`). Paths resolve against the study file's folder,
    those given in an override against the current folder (see `study.spec.paths`).
    """
    parsed = parse_overrides(overrides)
    path = find_study(name_or_path, folder)
    base = read_study(path)
    doc = apply_overrides(apply_profile(base, profile), parsed)
    return _build(doc, path, resolve_model_layers, download)


def study_field_error(
    spec: StudySpec,
    overrides: Sequence[str],
    setting: str,
    path: tuple[str | int, ...],
    reason: str,
    value: Any = None,
) -> str:
    """The one-line error, at its `file:line: field`, for a trial setting's `path` inside its
    `value` (`until_plateau`, `patience`) as the study file writes it (in `fixed`, else as
    one of the `grid` values), with the spec's profile and the `overrides` it ran with: for
    what only a trial can find, once it has read its data."""
    doc = _read_again(spec, overrides)
    if setting in (doc.data.get("fixed") or {}):
        return str(doc.fail(("fixed", setting, *path), reason))
    values = (doc.data.get("grid") or {}).get(setting) or []
    index = next((i for i, v in enumerate(values) if v == value), None)
    where = ("grid", setting) if index is None else ("grid", setting, index, *path)
    return str(doc.fail(where, reason))


_AS_WRITTEN = object()


def study_error(
    spec: StudySpec,
    overrides: Sequence[str],
    path: FieldPath,
    allowed: str,
    value: Any = _AS_WRITTEN,
) -> str:
    """The one-line error `file:line: field: value is not allowed: ...` for the field at
    `path` of the study as `spec` read it (its profile, and the `overrides` it ran with), the
    value as written unless `value` is given (a key of the mapping at `path`, say): for what
    the driver judges against the machine it runs on, or the data once read, not the file
    alone."""
    doc = _read_again(spec, overrides)
    if value is _AS_WRITTEN:
        value = doc.data
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
    return str(doc.bad(path, value, allowed))


def _read_again(spec: StudySpec, overrides: Sequence[str]) -> Doc:
    base = read_study(spec.path)
    return apply_overrides(apply_profile(base, spec.profile), parse_overrides(overrides))


def _build(doc: Doc, path: Path, resolve_layers: bool, download: bool) -> StudySpec:
    description = _description(doc)
    folder = path.resolve().parent
    trainable, surface = trainable_setting(doc)
    name, model_revision = (SYNTHETIC_MODEL, None) if surface else _model_name(doc)
    model = SYNTHETIC_MODEL if surface else model_location(doc, name, folder)
    data = {} if surface else _data(doc, folder)
    metric = _metric(doc)
    shape = (
        surface_shape(surface) if surface else _model_shape(doc, model, resolve_layers, download)
    )
    locate_stage_data(doc, folder)
    sections = factor_sections(doc)
    fixed = fixed_factors(doc, sections["fixed"], shape)
    fixed_from = fixed_provenance(doc, fixed)
    grid = grid_factors(doc, sections["grid"], shape)
    check_stage_factor(doc, sections, grid)
    search = search_space(doc, sections["search"], shape)
    _check_reported(doc, metric, trainable, data, fixed, grid)
    seeds = study_seeds(doc)
    explore, confirm = study_phases(doc, seeds, search, shape)
    check_first_rung(doc, explore, fixed)
    _check_seed_range(doc)
    check_plan_size(doc, grid, explore, confirm)  # before check_arms expands the arms
    analysis = declared_analysis(doc, confirm)
    resources = _resources(doc)
    max_failures = doc.integer(
        ("max_failures",), doc.data.get("max_failures", 0), 0, "retries per trial, >= 0"
    )
    check_arms(doc, grid, fixed, search, confirm, shape, {"model": model, "data": data})
    baseline = compare_baseline(doc, grid, shape)
    return StudySpec(
        name=path.stem,
        path=path.resolve(),
        profile=doc.profile,
        description=description,
        model=model,
        model_revision=model_revision,
        data=data,
        model_layers=shape.layers,
        model_heads=shape.heads,
        grid=grid,
        search=search,
        fixed=fixed,
        fixed_from=fixed_from,
        seeds=seeds,
        explore=explore,
        confirm=confirm,
        metric=metric,
        resources=resources,
        max_failures=max_failures,
        raw=doc.data,
        compare_baseline=baseline,
        analysis=analysis,
        trainable=trainable,
    )


def _description(doc: Doc) -> str:
    value = doc.data.get("description")
    allowed = "one line saying which question the study answers"
    if value is None:
        raise doc.missing(("description",), allowed)
    if not isinstance(value, str) or not value.strip() or "\n" in value.strip():
        raise doc.bad(("description",), value, allowed)
    return value.strip()


# The keys of `model` as a mapping, with what they take and are for (docs/study-keys.md).
MODEL_KEYS = {
    "hf": "a hub id or a local folder: the model (the mapping form of `model: ID`)",
    "revision": "a commit, tag or branch, as text: the hub revision every trial loads "
    "(recorded in the fingerprint; a local folder is read as it is)",
}


def _model_name(doc: Doc) -> tuple[str, str | None]:
    """The model's name or folder, and its hub revision where `{hf: ID, revision: REV}` gives
    one (passed to from_pretrained; a local folder is read as it is, whatever it says)."""
    value = doc.data.get("model")
    allowed = "'minilm', a local Hugging Face model folder, a hub id or {hf: ID, revision: REV}"
    if value is None:
        raise doc.missing(("model",), allowed)
    revision = None
    if isinstance(value, dict):
        doc.check_keys(("model",), value, tuple(MODEL_KEYS))
        revision = value.get("revision")
        if revision is not None and (not isinstance(revision, str) or not revision.strip()):
            raise doc.bad(("model", "revision"), revision, "a commit, tag or branch of the "
                          "model, as text (quote a number)")  # fmt: skip
        value = value.get("hf")
        if value is None:
            raise doc.missing(("model", "hf"), "the hub id or folder of the model")
    if not isinstance(value, str) or not value.strip():
        raise doc.bad(("model",), value, allowed)
    return value.strip(), revision.strip() if revision else None


def _data(doc: Doc, folder: Path) -> dict:
    """The data sources, checked without reading them, their paths made absolute."""
    value = doc.data.get("data")
    if value is None:
        return copy.deepcopy(TrialConfig().data)
    if not isinstance(value, dict):
        raise doc.bad(("data",), value, "a mapping such as {embedded: wnut16}")
    doc.check_keys(("data",), value, (*CORPUS_KINDS, *SPLITS, "extra", UNTYPED), "data")
    located = data_locations(doc, value, folder)
    try:
        data_inputs(located)
    except ConfigError as err:
        raise doc.fail(*_field_and_text(str(err))) from None
    return located


def _field_and_text(message: str) -> tuple[FieldPath, str]:
    """A data error's field and what it says: its message starts with the field
    (`data.train: ...`), which the study's error names with its line instead."""
    field, _, text = message.partition(": ")
    if field.startswith("data") and text:
        return tuple(field.split(".")), text
    return ("data",), message


def _metric(doc: Doc) -> Metric:
    value = doc.data.get("metric")
    if value is None:
        return Metric()
    doc.mapping(("metric",), value, "a mapping {name: dev_f1, mode: max}")
    doc.check_keys(("metric",), value, tuple(METRIC_KEYS))
    name, mode = value.get("name", Metric.name), value.get("mode", Metric.mode)
    if not isinstance(name, str) or not name.strip():
        raise doc.bad(("metric", "name"), name, "a reported metric name such as dev_f1")
    if mode not in METRIC_MODES:
        raise doc.bad(("metric", "mode"), mode, "'max' or 'min'")
    return Metric(name.strip(), mode)


def _check_reported(
    doc: Doc, metric: Metric, trainable: str | dict, data: dict, fixed: dict, grid: dict
) -> None:
    """The study metric must be in every evaluation's result (trainables/settings/reported.py):
    Tune, the search and ASHA read it there, and a study that names another fails at its
    first trial's first report. An extra set counts when every arm scores it each time."""
    name = "eval_extra_each_time"
    every_time = fixed.get(name) is True or grid.get(name) == (True,)
    extra = list((data.get("extra") or {}) if every_time else ())
    reported = evaluation_metrics(trainable, extra)
    if metric.name in reported:
        return
    kind = "synthetic trainable" if isinstance(trainable, dict) else "tagger"
    raise doc.fail(("metric", "name"), f"no evaluation reports {metric.name!r}"
                   f"{suggest(metric.name, reported)}; every evaluation of the {kind} reports "
                   f"{', '.join(reported)}")  # fmt: skip


# where a study file writes lists of seeds (the pool, a phase's own, the data seeds)
_SEED_LISTS = (
    ("seeds",),
    ("phases", "explore", "seeds"),
    ("phases", "confirm", "seeds"),
    ("phases", "confirm", "data_seeds"),
)


def _check_seed_range(doc: Doc) -> None:
    """Every written seed within what a trial seeds torch with (MAX_SEED, trainables/settings/
    config.py): past it, every trial of it fails in torch.manual_seed. After the phases' own
    checks, so each seed here is already an integer >= 0."""
    for path in _SEED_LISTS:
        written: Any = doc.data
        for key in path:
            written = written.get(key) if isinstance(written, dict) else None
        for index, seed in enumerate(written if isinstance(written, list) else []):
            if is_int(seed) and seed > MAX_SEED:
                raise doc.bad((*path, index), seed, f"a seed: an integer in 0..{MAX_SEED} "
                              "(2**63 - 1), the seeds torch takes")  # fmt: skip


def _resources(doc: Doc) -> dict[str, float]:
    value = doc.data.get("resources")
    value = {} if value is None else value
    doc.mapping(("resources",), value, "a mapping {cpu: 1, gpu: 0}")
    doc.check_keys(("resources",), value, tuple(RESOURCE_KEYS))
    cpu = doc.number(("resources", "cpu"), value.get("cpu", 1), lambda x: x > 0, "cpus > 0")
    gpu = doc.number(("resources", "gpu"), value.get("gpu", 0), lambda x: x >= 0, "gpus >= 0")
    return {"cpu": float(cpu), "gpu": float(gpu)}


def _model_shape(doc: Doc, model: str, resolve_layers: bool, download: bool) -> Shape:
    """Layer and head counts, and the longest window its positions allow, from the model's
    config alone (no weights are read)."""
    if not resolve_layers:
        return Shape(0, 0)
    if model == TINY_MODEL:  # the trial builds it, with torch; its shape is known without
        return _shape(doc, model, TINY_CONFIG)
    try:
        resolved = resolve_model(model)
    except ModelError as err:
        raise doc.bad(("model",), model, str(err)) from None
    hub_only = not Path(resolved).is_dir() and not download
    unreachable = None
    try:  # where the hub cannot answer, its cache at once rather than half a minute of retries
        with cache_only_if_unreachable(resolved) as unreachable:
            config = model_config(resolved, hub_only)
    except Exception as err:  # transformers raises many kinds; each becomes one line
        if hub_only:
            return Shape(0, 0)
        reason = load_failure(err, unreachable)
        raise doc.fail(("model",), f"cannot read the config of {model!r}: {reason}") from None
    return _shape(doc, model, config)


def _shape(doc: Doc, model: str, config: dict[str, Any]) -> Shape:
    try:
        layout = layout_of(config["model_type"])
    except ModelError as err:
        raise doc.bad(("model",), model, str(err)) from None
    window = longest_window(config) or 0
    return Shape(int(config[layout.layers_field]), int(config[layout.heads_field]), window)


def model_config(resolved: str, hub_only: bool) -> dict[str, Any]:
    """The model type and its layer/head fields: straight from the config.json (a local
    folder's, or a hub model's through huggingface_hub) when it has them, so that checking a
    study imports no torch; else through transformers, which knows each family's defaults."""
    if Path(resolved).is_dir():
        local = read_config_json(resolved)
    else:
        from huggingface_hub import hf_hub_download  # torch-free; raises when not cached

        downloaded = hf_hub_download(resolved, "config.json", local_files_only=hub_only)
        local = read_config_json(str(Path(downloaded).parent))
    layout = LAYOUTS.get(local.get("model_type")) if local else None
    if layout and all(name in local for name in layout.fields()):
        return local
    from transformers import AutoConfig  # imports torch: only when config.json falls short

    config = AutoConfig.from_pretrained(resolved, local_files_only=hub_only)
    names = {name for lay in LAYOUTS.values() for name in (*lay.fields(), *lay.position_fields())}
    return {"model_type": config.model_type, **{n: getattr(config, n, None) for n in names}}
