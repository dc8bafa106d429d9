"""The paired units of a comparison, and the seed as the unit of analysis.

With `confirm: {data_seeds: k}` every seed is crossed with k data seeds, and a score is kept
per (seed, data seed) unit. Those units are not independent: the k units of one seed share its
initialisation, so an arm x seed interaction moves all of them together, and a t-test over
the units as if independent pairs would be far too liberal (about 0.2 for a nominal 0.05 with 5
seeds x 3 data seeds). Seeds are the independent replicates, so each arm's score is first
averaged over the data seeds paired within a seed, and the tests, intervals and sequential
looks count seeds. The data seeds are the same in every seed (crossed), so the inference is
about these data orders: it generalises over initialisations, not over data orders drawn
afresh (that would need the data seeds as a random factor, and more of them).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np


def pair_scores(
    a: Mapping[Any, float], b: Mapping[Any, float]
) -> tuple[list, np.ndarray, np.ndarray, list]:
    """Seeds with a finite score in both arms (sorted), each arm's score per seed (its mean
    over the data seeds paired in both arms, when crossed), and the units left unpaired."""
    finite = {u for u in a if _finite(a[u])} & {u for u in b if _finite(b[u])}
    unpaired = sorted((set(a) | set(b)) - finite)
    by_seed: dict[Any, list] = {}
    for unit in sorted(finite):
        by_seed.setdefault(seed_of(unit), []).append(unit)
    seeds = sorted(by_seed)
    return (
        seeds,
        np.array([np.mean([a[u] for u in by_seed[s]]) for s in seeds], float),
        np.array([np.mean([b[u] for u in by_seed[s]]) for s in seeds], float),
        unpaired,
    )


def seed_of(unit: Any) -> Any:
    """The seed of a unit: the unit itself, or the seed of a (seed, data seed) unit."""
    return unit[0] if isinstance(unit, tuple) else unit


def of_seeds(scores: Mapping[Any, float], seeds: Iterable[Any]) -> dict[Any, float]:
    """The units of `scores` that belong to the given seeds."""
    keep = set(seeds)
    return {u: v for u, v in scores.items() if seed_of(u) in keep}


def _finite(value: Any) -> bool:
    return value is not None and math.isfinite(float(value))
