"""The explore searcher's book of one sample: its seeds, what each reported, its rungs.

A sample is judged as a whole (the mean over its seeds), so its seeds' reports are kept side
by side until each has reached an evaluation; the record is plain data because Tune saves it,
pickled with the searcher, in every experiment's state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SampleRecord:
    """One Optuna sample of one arm, replicated over seeds."""

    arm: str
    index: int
    params: dict[str, Any]
    optuna_number: int
    seeds: tuple[int, ...]
    # seed -> evaluation index -> (epoch, metric)
    reports: dict[int, dict[int, tuple[float, float]]] = field(default_factory=dict)
    fed_steps: list[int] = field(default_factory=list)  # evaluation indices put to ASHA
    rung_means: list[tuple[float, float]] = field(default_factory=list)  # (epoch, mean)
    stopped_at: float | None = None  # epoch at which ASHA stopped the sample
    abandoned: bool = False  # a seed errored: the sample can no longer be judged
    outcome: dict[int, str] = field(default_factory=dict)  # seed -> completed/pruned/errored
    final: dict[int, float] = field(default_factory=dict)  # seed -> final metric
    told: bool = False
    drawn_by: str = ""  # the sampler's model ("tpe", "gp") or "random" (study.spec.samplers)

    @property
    def key(self) -> str:
        return f"{self.arm}#{self.index}"

    @property
    def closed(self) -> bool:
        """Stopped by ASHA or abandoned after an error: no seed of it trains on."""
        return self.stopped_at is not None or self.abandoned
