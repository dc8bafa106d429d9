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
PLATEAU = 0.005  # default: a trial whose smoothed study metric rose less than this over its
# last third of evaluations had stopped improving (in the study metric's units)

# Metrics measured in the same units, so that one margin means the same thing for each:
# every F1 (and the learning-curve area, a mean of dev F1s), and every loss.
_UNIT_FAMILIES = (("_f1", "curve_area"), ("_loss",))


def same_units(metric: str, other: str) -> bool:
    """Whether two metrics are in the same units (F1 with F1, loss with loss, else itself)."""
    return metric == other or _family(metric) is not None and _family(metric) == _family(other)


def _family(metric: str) -> int | None:
    for index, markers in enumerate(_UNIT_FAMILIES):
        if any(metric.endswith(marker) for marker in markers):
            return index
    return None


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
    plateau: float = PLATEAU  # convergence: the smoothed rise over the last third
    ni_alpha: float | None = None  # one-sided non-inferiority level; None: alpha / 2
    margins: tuple[tuple[str, float], ...] = ()  # other metrics' own margins, in their units

    @property
    def ni_level(self) -> float:
        """The one-sided level of a non-inferiority test: alpha / 2 unless declared (ICH E9)."""
        return self.alpha / 2 if self.ni_alpha is None else self.ni_alpha

    def margin_for(self, metric: str) -> float | None:
        """The margin in `metric`'s units: its own if declared, the primary's when the two
        share units, else None (power, TOST and non-inferiority then do not apply)."""
        own = dict(self.margins)
        if metric in own:
            return own[metric]
        return self.margin if same_units(metric, self.primary) else None

    def converged(self, final_gain: float) -> bool:
        """A trial had stopped improving: its smoothed curve (the least-squares line through
        its last third of evaluations, trainables/training/curves.py) rose by less than
        `plateau` over that third (`final_gain`, in the metric's better direction). Judged
        from the curve alone, whatever stopped the trial: `until_plateau`'s patience can run out
        on a noisy curve that is still rising, so its stop is recorded (`plateau_stopped`)
        but is not convergence. NaN (too few evaluations to tell) is not converged."""
        return final_gain < self.plateau

    @property
    def sequential(self) -> bool:
        return len(self.looks) > 1

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
        values["margins"] = tuple(tuple(pair) for pair in values.get("margins") or ())
        return cls(**{k: v for k, v in values.items() if k in cls.__dataclass_fields__})
