"""The analysis a study declares before any data is seen, shared by the driver and the report.

A reviewer trusts a comparison only if the metric that decides it, the margin that counts as
"as good", the error rate and the stopping rule were fixed in advance. The study file declares
them (`analysis:`), the driver records them on the study run in MLflow, and the report reads
them back from there: the report never chooses its own analysis after seeing the data.
Plain data only, so the driver can import it without the statistics stack.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

SPENDING = ("obrien_fleming", "pocock")


@dataclass(frozen=True)
class Analysis:
    """The primary metric (its comparisons carry the verdicts), the equivalence and
    non-inferiority margin in its units, the family-wise alpha, the alpha-spending rule, and
    the confirm phase's looks: seed counts after each round (one look without rounds), the
    seeds in the order the rounds run them, and how many data seeds each seed is crossed with."""

    primary: str = "test_f1"
    margin: float = 0.01
    alpha: float = 0.05
    spending: str = "obrien_fleming"
    looks: tuple[int, ...] = ()
    seed_order: tuple[int, ...] = ()
    data_seeds: int = 1

    @property
    def sequential(self) -> bool:
        return len(self.looks) > 1

    @property
    def unit_looks(self) -> tuple[int, ...]:
        """Looks counted in paired units: (seed, data seed) pairs when they are crossed."""
        return tuple(n * self.data_seeds for n in self.looks)

    def ordered(self, units: Iterable[Any]) -> list[Any]:
        """Units in the order the rounds ran them (plan seed order, then data seed)."""
        rank = {seed: i for i, seed in enumerate(self.seed_order)}

        def key(unit: Any) -> tuple:
            seed = unit[0] if isinstance(unit, tuple) else unit
            return (rank.get(seed, len(rank) + seed), unit)

        return sorted(units, key=key)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str | None) -> Analysis:
        """The recorded analysis; a study recorded before analyses were declared gets the
        defaults (one look), which is what it was run under."""
        if not text:
            return cls()
        values = json.loads(text)
        for key in ("looks", "seed_order"):
            values[key] = tuple(values.get(key) or ())
        return cls(**{k: v for k, v in values.items() if k in cls.__dataclass_fields__})
