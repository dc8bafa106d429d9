"""The plain trial configuration: every knob of one training run, validated once.

Configuration flows one way (docs/design.md): study YAML → validated spec → a plain dict per
trial → `TrialConfig.from_dict`. Unknown keys are an error rather than silently ignored,
because a misspelt factor would otherwise run a whole study at the default value.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from trainables.errors import ConfigError
from trainables.settings.budget import Budget, parse_budget
from trainables.settings.precision import AUTO, PRECISIONS
from trainables.settings.sizes import parse_size
from trainables.settings.stage_config import (
    STAGE_OWN_KEYS,
    STAGE_OWNS,
    STAGE_SETS,
    Stage,
    StageRules,
    check_stages,
)
from trainables.settings.surface import SYNTHETIC, TAGGER, surface_of
from trainables.yaml_reading import as_flag

SCHEDULES = ("linear", "cosine", "constant")
DEVICES = ("auto", "cpu", "cuda")
DYNAMICS_MODES = ("off", "end", "each_eval")
# The largest `seed` and `data_seed`: torch.manual_seed takes at most 2**64 - 1 (the batch
# order mixes the data seed with the epoch modulo 2**64, trainables/data/batching.py), and
# the report reads seeds back as 64-bit signed integers
MAX_SEED = 2**63 - 1

# the YAML types the type check knows (`check_types`); any other is a description for the docs
NUMBER, INTEGER, BOOLEAN = "number", "integer", "boolean"
# a field's traits, the keys of its metadata (`setting`)
HELP, YAML = "help", "yaml"
BOUND = "bound"  # the least value, as the check and the docs say it: `> 0`, `>= 1`
MODEL = "model"  # the model is built from it: a field of `Architecture`
TUNABLE_TRAIT = "tunable"  # an optimisation setting that favours some arms when not tuned
LAYER = "layer"  # its valid range depends on how many blocks the (truncated) encoder has
FIXED_ONLY_WHY = "fixed_only"  # one value per study, under `fixed` only: why
NOT_IN_A_STAGE_WHY = "not_in_a_stage"  # an intermediate stage cannot set it: why
IN_A_STAGE = "in_a_stage"  # an intermediate stage may set it: STAGE_SETS or STAGE_OWNS
STAGE_RUNS_TRAIT = "stage_runs"  # the value every intermediate stage trains with
DRAWS = "draws"  # the synthetic surface draws a trial's own noise from it
_SHARED = object()  # `stage_runs` unset: a stage trains with the trial's value
# why an intermediate stage cannot set a setting (trainables/settings/stage_config.py)
_TARGET_ONLY = (
    "applies to the target stage only (an intermediate stage fine-tunes the whole encoder)"
)
_BEFORE_FIRST = "applies once, before the first stage: set it on the trial"
_OWN_DRAWS = "each stage draws its own from the trial's seed and data seed"
_RECORDS = "it changes what a trial records, not what it learns"


def setting(
    default: Any,
    yaml: str,
    help: str,
    *,
    bound: str | None = None,
    model: bool = False,
    tunable: bool = False,
    layer: bool = False,
    fixed_only: str | None = None,
    not_in_a_stage: str | None = None,
    in_a_stage: str | None = None,
    stage_runs: Any = _SHARED,
    draws: bool = False,
) -> Any:
    """A `TrialConfig` field and its traits, so each is written once, next to the field (a
    list or mapping default is copied for each config). `bound` is the least value (`> 0`,
    `>= 1`; null passes where it is the default); `model`: `build_tagger` builds the model
    from it; `tunable`: the report's tuning-parity table shows it when a study fixes it;
    `in_a_stage`: an intermediate stage may set it (`STAGE_SETS`: the trial's value where the
    stage leaves it out; `STAGE_OWNS`: the stage's own, none where left out); `stage_runs`:
    the value every stage trains with, whatever the trial's."""
    metadata = {HELP: help, YAML: yaml, BOUND: bound, MODEL: model, TUNABLE_TRAIT: tunable,
                LAYER: layer, DRAWS: draws, FIXED_ONLY_WHY: fixed_only,
                NOT_IN_A_STAGE_WHY: not_in_a_stage, IN_A_STAGE: in_a_stage,
                STAGE_RUNS_TRAIT: stage_runs}  # fmt: skip
    if isinstance(default, list | dict):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass
class TrialConfig:
    """Every setting of one trial, each described once in its field's metadata (`setting`):
    the traits the checks, the study spec, the stages and the synthetic surface read, and the
    help line of docs/trial-settings.md (`python -m trainables.settings.reference`)."""

    # what is trained
    model: str = setting(
        "minilm", "text", "the encoder: a known name (`minilm`, `tiny`, ...), a hub id or a folder"
    )
    model_revision: str | None = setting(
        None,
        "text",
        "the hub revision (commit, tag or branch) of `model`, from the study's `model: {hf: ID, "
        "revision: REV}`; a local folder is read as it is",
    )
    data: dict[str, Any] = setting(
        {"embedded": "wnut16"},
        "mapping",
        "the corpus (trainables/data/sources): `{embedded: "
        "wnut16}`, `{train: ..., dev: ..., test: ...}`, ...",
    )
    depth: int | str | None = setting(
        None,
        "integer, `full` or `full-N`",
        "keep the first blocks: n, `full` or `full-N`; null keeps all",
        model=True,
        not_in_a_stage=_BEFORE_FIRST,
        draws=True,
    )
    reinit_from: int | None = setting(
        None,
        "block index",
        "re-initialise blocks >= k; null leaves all pretrained",
        model=True,
        layer=True,
        not_in_a_stage=_BEFORE_FIRST,
        stage_runs=None,
        draws=True,
    )
    reinit_heads: list[list[int]] = setting(
        [],
        "list of [layer, head]",
        "attention heads to re-initialise, as [[layer, head], ...]",
        model=True,
        layer=True,
        not_in_a_stage=_BEFORE_FIRST,
        stage_runs=[],
        draws=True,
    )
    reinit_std: float = setting(
        0.02,
        NUMBER,
        "standard deviation of re-initialised weights",
        model=True,
        not_in_a_stage=_BEFORE_FIRST,
    )
    freeze: str | int | None = setting(
        None,
        "`embeddings` or integer",
        "`embeddings`, or n: the embeddings and the first n blocks are not trained",
        model=True,
        layer=True,
        not_in_a_stage=_TARGET_ONLY,
        stage_runs=None,
    )
    probe: bool = setting(
        False,
        BOOLEAN,
        "freeze the whole encoder and train only the head",
        model=True,
        not_in_a_stage=_TARGET_ONLY,
        stage_runs=False,
    )
    dropout: float = setting(
        0.1, NUMBER, "dropout of the encoder and the head", model=True, tunable=True
    )
    # stages trained before the target (trainables/training/stages.py); [] trains the target
    # from the pretrained encoder
    intermediate: list[dict[str, Any]] = setting(
        [],
        "list of stages",
        "stages trained before the target, each with its own data and "
        "head (trainables/settings/stage_config.py); [] trains the target from the pretrained "
        "encoder",
        not_in_a_stage="stages do not nest: list every stage in the trial's own list",
        stage_runs=[],
    )
    # optimisation
    lr: float = setting(
        5e-5,
        NUMBER,
        "peak learning rate of the encoder",
        bound="> 0",
        tunable=True,
        in_a_stage=STAGE_SETS,
        draws=True,
    )
    head_lr: float | None = setting(
        None,
        NUMBER,
        "peak learning rate of the head; null: `lr`",
        bound="> 0",
        tunable=True,
        in_a_stage=STAGE_SETS,
    )
    epochs: int = setting(
        3,
        INTEGER,
        "epochs to train when there is no `budget`",
        bound=">= 1",
        in_a_stage=STAGE_SETS,
        draws=True,
    )
    max_steps: int | None = setting(
        None, INTEGER, "cap on optimizer steps, for smoke runs", bound=">= 1", in_a_stage=STAGE_SETS
    )
    budget: dict[str, Any] | None = setting(
        None,
        "mapping",
        "how long to train instead of `epochs`: `{steps: N}` or "
        "`{until_plateau: {patience, min_delta, max_epochs}}` (trainables/settings/budget.py)",
        in_a_stage=STAGE_OWNS,
    )
    batch_size: int = setting(
        16,
        INTEGER,
        "sentence windows per optimizer step",
        bound=">= 1",
        tunable=True,
        in_a_stage=STAGE_SETS,
    )
    warmup_ratio: float = setting(
        0.1, NUMBER, "share of the steps the learning rate warms up", tunable=True
    )
    weight_decay: float = setting(
        0.01, NUMBER, "AdamW weight decay (not on biases and norms)", bound=">= 0", tunable=True
    )
    schedule: str = setting(
        "linear", f"one of {', '.join(SCHEDULES)}", "learning-rate decay", tunable=True
    )
    max_grad_norm: float = setting(1.0, NUMBER, "gradients are clipped to this norm", tunable=True)
    # data handling
    seed: int = setting(
        0,
        INTEGER,
        "weight draws (head, re-initialised blocks and heads) and dropout",
        not_in_a_stage=_OWN_DRAWS,
    )
    data_seed: int | None = setting(
        None, INTEGER, "data subset and order; null: the same as `seed`", not_in_a_stage=_OWN_DRAWS
    )
    data_fraction: float = setting(
        1.0,
        NUMBER,
        "share of the training sentences used (nested across fractions)",
        not_in_a_stage="applies to the target's data only",
        stage_runs=1.0,
        draws=True,
    )
    label_all_subwords: bool = setting(
        False, BOOLEAN, "train on every sub-word's label, not only the first"
    )
    max_length: int = setting(128, INTEGER, "sub-words per window", bound=">= 8")
    # evaluation
    eval_every: int | None = setting(
        None,
        INTEGER,
        "evaluate every n steps; null: at the end of each epoch",
        bound=">= 1",
        in_a_stage=STAGE_SETS,
    )
    eval_extra_each_time: bool = setting(
        False, BOOLEAN, "also score the extra evaluation sets at every evaluation"
    )
    eval_test_each_time: bool = setting(
        False,
        BOOLEAN,
        "also score the test set at every evaluation, reported as `eval_test_<score>` "
        "(never `test_<score>`: that stays the kept weights' score at the end); for benchmarks "
        "that replay a trial's whole curve (bench/search_tabular.py)",
        fixed_only=_RECORDS,
        stage_runs=False,  # only the target's test set is the study's
    )
    # about a training batch's size: larger ones leave the cache (on one CPU core, WNUT-16's
    # dev set took 0.92 s at 1024 and 1.34 s at 8192; bench/eval_batches.py)
    eval_batch_tokens: int = setting(1024, INTEGER, "padded sub-words per evaluation batch")
    metric: dict[str, str] = setting(
        {"name": "dev_f1", "mode": "max"},
        "`{name, mode}`",
        "the study metric, reported at "
        "every evaluation: what `until_plateau` watches and `final_gain` is measured on",
    )
    dynamics: str = setting(
        "end",
        f"one of {', '.join(DYNAMICS_MODES)}",
        "how far each layer moved from the "
        "pretrained encoder (trainables/measures/dynamics.py): after the last step, at every "
        "evaluation, or off",
    )
    dynamics_sentences: int = setting(
        64, INTEGER, "dev windows the dynamics are measured on", bound=">= 1"
    )
    fingerprint: bool = setting(
        True,
        BOOLEAN,
        "with dynamics on, keep the final encoder's layer fingerprint "
        "(trainables/measures/fingerprints) for comparing trials",
        fixed_only=_RECORDS,
        stage_runs=False,  # only the final encoder's is compared with other trials'
    )
    fingerprint_max_bytes: int | float | str | None = setting(
        None,
        "size (e.g. `20MB`)",
        "cap on the fingerprint's size: the sample's last sentences are dropped until it fits",
        fixed_only=_RECORDS,
    )
    # hardware
    device: str = setting("auto", f"one of {', '.join(DEVICES)}", "where the trial trains")
    precision: str = setting(
        AUTO,
        f"one of {', '.join(PRECISIONS)}",
        "bf16 on CUDA and on CPUs with native bf16, else fp32",
        fixed_only="a study never mixes precisions across its arms or trials",
    )
    threads: int | None = setting(None, INTEGER, "CPU threads of torch and BLAS; null: all")
    fail_at_step: int | None = setting(
        None,
        INTEGER,
        "raise at this step: fault injection for tests of the orchestration",
        stage_runs=None,
    )
    trainable: str | dict[str, Any] = setting(
        TAGGER,
        f"`{TAGGER}`, `{SYNTHETIC}` or `{{{SYNTHETIC}: {{option: value}}}}`",
        "what trains: the tagger, or the synthetic response surface "
        "(trainables/settings/surface.py), which tests the machinery, never a finding",
    )

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrialConfig:
        unknown = sorted(set(values) - set(cls.field_names()))
        if unknown:
            raise ConfigError(
                f"unknown trial setting(s) {', '.join(unknown)}; "
                f"known: {', '.join(cls.field_names())}"
            )
        config = cls(**{name: normalized(name, value) for name, value in values.items()})
        config.check_types()
        config.validate()
        return config

    def check_types(self) -> None:
        """Numbers must be numbers before the range checks compare them (`lr: 3e-3` in YAML
        1.1 is a string, and would otherwise fail deep inside the optimizer)."""
        for name, kind in _NUMERIC_FIELDS.items():
            value = getattr(self, name)
            optional = value is None and _OPTIONAL[name]  # null only where it is the default
            ok = optional or (isinstance(value, kind) and not isinstance(value, bool))
            _check(ok, name, value, "a number" if kind is not int else "an integer")
            # inf, nan and 1e400 (read as inf) are numbers that no optimizer or range takes
            _check(optional or kind is int or _finite(value), name, value, "a finite number")
        for name in _BOOL_FIELDS:
            value = getattr(self, name)
            _check(isinstance(value, bool), name, value, "true or false (or yes/no, on/off)")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def architecture(self) -> Architecture:
        """What the model is built from: one value, not a keyword argument per setting (its
        lists made tuples, so two architectures compare and hash by value)."""
        return Architecture(**{name: _frozen(getattr(self, name)) for name in MODEL_FIELDS})

    def stages(self) -> list[Stage]:
        """The checked intermediate stages; a StageError says where one is wrong."""
        return check_stages(self.intermediate, STAGE_RULES)

    def validate(self) -> None:
        surface_of(self.trainable)  # a ConfigError naming the option at fault
        for name, bound in BOUNDS.items():
            value = getattr(self, name)
            ok = (value is None and _OPTIONAL[name]) or within_bound(value, bound)
            _check(ok, name, value, bound)
        _check(0 <= self.warmup_ratio < 1, "warmup_ratio", self.warmup_ratio, "in [0, 1)")
        _check(self.schedule in SCHEDULES, "schedule", self.schedule, f"one of {SCHEDULES}")
        _check(0 < self.data_fraction <= 1, "data_fraction", self.data_fraction, "in (0, 1]")
        seeds = f"an integer in 0..{MAX_SEED} (2**63 - 1)"
        _check(0 <= self.seed <= MAX_SEED, "seed", self.seed, seeds)
        _check(
            self.data_seed is None or 0 <= self.data_seed <= MAX_SEED,
            "data_seed",
            self.data_seed,
            seeds,
        )
        _check(self.device in DEVICES, "device", self.device, f"one of {DEVICES}")
        _check(
            self.dynamics in DYNAMICS_MODES, "dynamics", self.dynamics, f"one of {DYNAMICS_MODES}"
        )
        _check_fingerprint(self.fingerprint, self.fingerprint_max_bytes)
        _check(self.precision in PRECISIONS, "precision", self.precision, f"one of {PRECISIONS}")
        _check(0 <= self.dropout < 1, "dropout", self.dropout, "in [0, 1)")
        _check(
            self.freeze is None or self.freeze == "embeddings" or isinstance(self.freeze, int),
            "freeze",
            self.freeze,
            "'embeddings' or a number of blocks",
        )
        _check(
            isinstance(self.reinit_heads, list | tuple)
            and all(
                isinstance(pair, list | tuple) and len(pair) == 2 for pair in self.reinit_heads
            ),
            "reinit_heads",
            self.reinit_heads,
            "a list of [layer, head] pairs",
        )
        self.stages()
        self.parsed_budget()
        _check_metric(self.metric)

    def parsed_budget(self) -> Budget | None:
        """The checked `budget` (None: train `epochs`); a BudgetError names the sub-key."""
        return parse_budget(self.budget, self.eval_every)

    def planned_steps(self, batches_per_epoch: int) -> int:
        """Optimizer steps at most (what the lr schedule spans) at `batches_per_epoch`:
        `epochs` of them, or the `budget`'s steps, or its `until_plateau.max_epochs`, capped by
        `max_steps` (trainables/settings/budget.py). The trial trains this many; the study's
        progress line counts a running trial's epochs against it."""
        total = self.epochs * batches_per_epoch
        budget = self.parsed_budget()
        if budget is not None and budget.steps is not None:
            total = budget.steps
        elif budget is not None and budget.until_plateau is not None:
            total = budget.until_plateau.max_epochs * batches_per_epoch
        return min(total, self.max_steps) if self.max_steps else total

    @property
    def metric_name(self) -> str:
        return self.metric["name"]

    @property
    def metric_mode(self) -> str:
        return self.metric["mode"]

    @property
    def keeps_fingerprint(self) -> bool:
        """Whether the trial keeps a layer fingerprint at its end: taken on the dynamics
        sample, so never with `dynamics: off`."""
        return self.dynamics != "off" and self.fingerprint


def _traits(name: str) -> dict[str, Any]:
    """Each field's value of the trait `name` (metadata key), where it has one."""
    return {f.name: f.metadata[name] for f in dataclasses.fields(TrialConfig) if f.metadata[name]}


HELP_LINES: dict[str, str] = _traits(HELP)
YAML_TYPES: dict[str, str] = _traits(YAML)
BOUNDS: dict[str, str] = _traits(BOUND)  # the least value: `> 0`, `>= 1`
# settings whose valid range depends on how many blocks the (truncated) encoder has
LAYER_FIELDS = tuple(_traits(LAYER))
FIXED_ONLY: dict[str, str] = _traits(FIXED_ONLY_WHY)  # one value per study: why
NOT_IN_A_STAGE: dict[str, str] = _traits(NOT_IN_A_STAGE_WHY)  # not in a stage: why
IN_A_STAGE: dict[str, str] = _traits(IN_A_STAGE)  # a stage may set it: STAGE_SETS or _OWNS
STAGE_RUNS: dict[str, Any] = {  # what every stage trains with instead of the trial's value
    f.name: f.metadata[STAGE_RUNS_TRAIT]
    for f in dataclasses.fields(TrialConfig)
    if f.metadata[STAGE_RUNS_TRAIT] is not _SHARED
}
SURFACE_DRAWS = tuple(_traits(DRAWS))  # what the synthetic surface's own draws depend on
MODEL_FIELDS = tuple(_traits(MODEL))  # what the model is built from
TUNABLE = tuple(_traits(TUNABLE_TRAIT))  # optimisation settings the tuning table weighs
# What the model is built from (trainables/model/tagger.py `build_tagger`): the fields marked
# `model`, frozen; `TrialConfig.architecture` fills it
Architecture = dataclasses.make_dataclass(
    "Architecture",
    [(f.name, f.type) for f in dataclasses.fields(TrialConfig) if f.name in MODEL_FIELDS],
    frozen=True,
    namespace={"__module__": __name__},
)
_NUMERIC_FIELDS: dict[str, type | tuple[type, ...]] = {
    **{name: (int, float) for name, kind in YAML_TYPES.items() if kind == NUMBER},
    **{name: int for name, kind in YAML_TYPES.items() if kind == INTEGER},
}
_OPTIONAL = {f.name: f.default is None for f in dataclasses.fields(TrialConfig)}
_BOOL_FIELDS = tuple(name for name, kind in YAML_TYPES.items() if kind == BOOLEAN)


def within_bound(value: Any, bound: str) -> bool:
    """Whether a number meets a bound written `> 0` or `>= 1`."""
    operator, _, least = bound.partition(" ")
    return value > float(least) if operator == ">" else value >= float(least)


def bound_words(name: str) -> str:
    """What setting `name` takes, in the words of a stage key's description: `an integer >= 1`."""
    kind = {NUMBER: "a number", INTEGER: "an integer", BOOLEAN: "true or false"}
    words = kind.get(YAML_TYPES[name], f"a {YAML_TYPES[name]}")
    return f"{words} {BOUNDS[name]}" if name in BOUNDS else words


def _stage_value_wrong(name: str, value: Any) -> str | None:
    """What a stage's value of setting `name` must be, where its type or bound refuses it."""
    kind = {NUMBER: (int, float), INTEGER: int}.get(YAML_TYPES[name])
    if kind is None:
        return None
    fits = isinstance(value, kind) and not isinstance(value, bool)
    ok = fits and (name not in BOUNDS or within_bound(value, BOUNDS[name]))
    return None if ok else bound_words(name)


# What a stage may hold, and the keys docs/study-keys.md lists under `intermediate[]`: its own,
# then each setting it may set, described by its field
STAGE_RULES = StageRules(
    IN_A_STAGE, NOT_IN_A_STAGE, tuple(TrialConfig.field_names()), _stage_value_wrong
)
STAGE_KEYS: dict[str, str] = {
    **STAGE_OWN_KEYS,
    **{n: f"{bound_words(n)}: {HELP_LINES[n]}; {rule}" for n, rule in IN_A_STAGE.items()},
}


def _frozen(value: Any) -> Any:
    """Lists as tuples, all the way down."""
    return tuple(_frozen(item) for item in value) if isinstance(value, list | tuple) else value


def normalized(name: str, value: Any) -> Any:
    """A setting as the trial takes it: a boolean setting also takes yes/no/on/off, which
    YAML 1.1 read as booleans (trainables/yaml_reading.py), so older files keep their meaning."""
    return as_flag(value) if name in _BOOL_FIELDS else value


def _finite(value: float | int) -> bool:
    """A number a float holds that is not inf or nan (an int beyond a float's range is not)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _check_fingerprint(keep: Any, max_bytes: Any) -> None:
    _check(isinstance(keep, bool), "fingerprint", keep, "true or false (off / on in YAML)")
    if max_bytes is not None:
        try:
            parse_size(max_bytes)
        except ValueError as err:
            _check(False, "fingerprint_max_bytes", max_bytes, str(err).removeprefix("expected "))


def _check_metric(metric: Any) -> None:
    ok = (
        isinstance(metric, dict)
        and set(metric) == {"name", "mode"}
        and isinstance(metric["name"], str)
        and bool(metric["name"])
        and metric["mode"] in ("max", "min")
    )
    _check(ok, "metric", metric, "{name: <a metric of every evaluation>, mode: max or min}")


def _check(ok: bool, name: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"trial setting {name}={value!r} is not allowed: expected {allowed}")
