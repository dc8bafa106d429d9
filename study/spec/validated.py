"""A validated study as plain data: what `study.spec.load_study` returns and `study.plan`
expands. No Ray here, and nothing that cannot be pickled: the spec travels inside the searcher
that Tune saves with each experiment."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from study.analysis import Analysis
from study.spec.distributions import Distribution
from trainables.settings import TAGGER

# a confirm trial's checkpoint (weights, best weights, Adam moments: ~360 MB for MiniLM) took
# about 3% of its time when written at every evaluation of the default profile (every ~8 s,
# ~0.26 s each); once a minute, a crash retrains at most a minute (docs/running.md)
CHECKPOINT_EVERY_S_DEFAULT = 60.0


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
    sampler: str = "tpe"  # an Optuna sampler's name in study/spec/samplers.py
    sampler_seed: int = 0  # arm i's sampler is seeded with this + i
    start_from: tuple[dict, ...] = ()  # samples every arm's Optuna study starts from


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
    checkpoint_every_s: float = CHECKPOINT_EVERY_S_DEFAULT  # least seconds between checkpoints

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
    trainable: str | dict = TAGGER  # or {synthetic: {every surface option}}
    fixed_from: dict = field(default_factory=dict)  # fixed setting -> {study, seeds} chose it
    model_revision: str | None = None  # `model: {hf: ID, revision: REV}`

    @property
    def synthetic(self) -> bool:
        """Trials train the synthetic surface: the study tests the machinery, no finding."""
        return self.trainable != TAGGER
