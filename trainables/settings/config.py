"""The plain trial configuration: every knob of one training run, validated once.

Configuration flows one way (docs/design.md): study YAML → validated spec → a plain dict per
trial → `TrialConfig.from_dict`. Unknown keys are an error rather than silently ignored,
because a misspelt factor would otherwise run a whole study at the default value.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from trainables.errors import ConfigError
from trainables.settings.budget import Budget, parse_budget
from trainables.settings.precision import AUTO, PRECISIONS
from trainables.settings.sizes import parse_size
from trainables.settings.stage_config import check_stages
from trainables.settings.surface import TAGGER, surface_of
from trainables.yaml_reading import bool_word

SCHEDULES = ("linear", "cosine", "constant")
DEVICES = ("auto", "cpu", "cuda")
DYNAMICS_MODES = ("off", "end", "each_eval")


@dataclass
class TrialConfig:
    # what is trained
    model: str = "minilm"
    data: dict[str, Any] = field(default_factory=lambda: {"embedded": "wnut16"})
    depth: int | str | None = None  # keep the first blocks: n, 'full' or 'full-N'; None all
    reinit_from: int | None = None  # re-initialise blocks >= k; None leaves all pretrained
    reinit_heads: list[list[int]] = field(default_factory=list)  # [[layer, head], ...]
    reinit_std: float = 0.02
    freeze: str | int | None = None  # "embeddings" or n = embeddings + first n blocks
    probe: bool = False  # freeze the whole encoder, train only the head
    dropout: float = 0.1
    # stages trained before the target, each with its own data and head
    # (trainables/training/stages.py; checked by trainables/settings/stage_config.py); [] trains
    # the target from the pretrained encoder
    intermediate: list[dict[str, Any]] = field(default_factory=list)
    # optimisation
    lr: float = 5e-5
    head_lr: float | None = None  # None: same as lr
    epochs: int = 3
    max_steps: int | None = None  # cap on optimizer steps, for smoke runs
    # how long to train instead of `epochs`: {steps: N} or {until_plateau: {patience,
    # min_delta, max_epochs}}; None trains `epochs` (trainables/settings/budget.py)
    budget: dict[str, Any] | None = None
    batch_size: int = 16
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    schedule: str = "linear"
    max_grad_norm: float = 1.0
    # data handling
    seed: int = 0  # weight draws (head, re-initialised blocks/heads) and dropout
    data_seed: int | None = None  # data subset and order; None: the same as `seed`
    data_fraction: float = 1.0
    label_all_subwords: bool = False
    max_length: int = 128
    # evaluation
    eval_every: int | None = None  # steps; None evaluates at the end of each epoch
    eval_extra_each_time: bool = False  # also score extra eval sets at every evaluation
    eval_batch_tokens: int = 8192
    # the study metric, reported at every evaluation: what `until_plateau` watches and what
    # `final_gain` (trainables/training/curves.py) is measured on; a study sets its own `metric`
    metric: dict[str, str] = field(default_factory=lambda: {"name": "dev_f1", "mode": "max"})
    # how far each layer moved from the pretrained encoder (trainables.measures.dynamics),
    # measured on the first `dynamics_sentences` dev windows: after the last step, at every
    # evaluation, or off
    dynamics: str = "end"
    dynamics_sentences: int = 64
    # with dynamics on, the final encoder's layer fingerprint on that sample
    # (trainables/measures/fingerprints), for comparing trials with each other; capped in size
    # (e.g. "20MB": the sample's last sentences are dropped until it fits), or off
    fingerprint: bool = True
    fingerprint_max_bytes: int | float | str | None = None
    # hardware
    device: str = "auto"
    precision: str = AUTO  # bf16 on CUDA and on CPUs with native bf16, else fp32
    threads: int | None = None
    # fault injection for tests of the orchestration: raise at this step
    fail_at_step: int | None = None
    # what trains: the tagger, or the synthetic response surface of trainables/settings/surface.py
    # ('synthetic' or {synthetic: {option: value}}), which tests the machinery, never a finding
    trainable: str | dict[str, Any] = TAGGER

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
        for name in _BOOL_FIELDS:
            value = getattr(self, name)
            _check(isinstance(value, bool), name, value, "true or false (or yes/no, on/off)")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def validate(self) -> None:
        surface_of(self.trainable)  # a ConfigError naming the option at fault
        _check(self.lr > 0, "lr", self.lr, "a positive number")
        _check(self.head_lr is None or self.head_lr > 0, "head_lr", self.head_lr, "positive")
        _check(isinstance(self.epochs, int) and self.epochs >= 1, "epochs", self.epochs, ">= 1")
        _check(self.max_steps is None or self.max_steps >= 1, "max_steps", self.max_steps, ">= 1")
        _check(self.batch_size >= 1, "batch_size", self.batch_size, ">= 1")
        _check(0 <= self.warmup_ratio < 1, "warmup_ratio", self.warmup_ratio, "in [0, 1)")
        _check(self.weight_decay >= 0, "weight_decay", self.weight_decay, ">= 0")
        _check(self.schedule in SCHEDULES, "schedule", self.schedule, f"one of {SCHEDULES}")
        _check(0 < self.data_fraction <= 1, "data_fraction", self.data_fraction, "in (0, 1]")
        _check(self.max_length >= 8, "max_length", self.max_length, ">= 8")
        _check(
            self.eval_every is None or self.eval_every >= 1, "eval_every", self.eval_every, ">=1"
        )
        _check(self.device in DEVICES, "device", self.device, f"one of {DEVICES}")
        _check(
            self.dynamics in DYNAMICS_MODES, "dynamics", self.dynamics, f"one of {DYNAMICS_MODES}"
        )
        _check(self.dynamics_sentences >= 1, "dynamics_sentences", self.dynamics_sentences, ">= 1")
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
        check_stages(self.intermediate, self.field_names())
        self.parsed_budget()
        _check_metric(self.metric)

    def parsed_budget(self) -> Budget | None:
        """The checked `budget` (None: train `epochs`); a BudgetError names the sub-key."""
        return parse_budget(self.budget, self.eval_every)

    @property
    def metric_name(self) -> str:
        return self.metric["name"]

    @property
    def metric_mode(self) -> str:
        return self.metric["mode"]


_NUMERIC_FIELDS: dict[str, type | tuple[type, ...]] = {
    **{
        name: (int, float)
        for name in (
            "lr", "head_lr", "reinit_std", "dropout", "warmup_ratio", "weight_decay",
            "max_grad_norm", "data_fraction",
        )
    },
    **{
        name: int
        for name in (
            "epochs", "max_steps", "batch_size", "seed", "data_seed", "max_length", "eval_every",
            "eval_batch_tokens", "threads", "fail_at_step", "dynamics_sentences",
        )
    },
}  # fmt: skip


_OPTIONAL = {f.name: f.default is None for f in dataclasses.fields(TrialConfig)}
_BOOL_FIELDS = tuple(f.name for f in dataclasses.fields(TrialConfig) if f.type == "bool")


def normalized(name: str, value: Any) -> Any:
    """A setting as the trial takes it: a boolean setting also takes yes/no/on/off, which
    YAML 1.1 read as booleans (trainables/yaml_reading.py), so older files keep their meaning."""
    word = bool_word(value) if name in _BOOL_FIELDS else None
    return value if word is None else word


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
