"""The paired units of a comparison: the seeds (or seed, data seed units) with a finite score
in both arms."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np


def pair_scores(
    a: Mapping[Any, float], b: Mapping[Any, float]
) -> tuple[list, np.ndarray, np.ndarray, list]:
    """Units with a finite score in both arms (sorted), their scores, and the other units."""
    finite = {s for s in a if _finite(a[s])} & {s for s in b if _finite(b[s])}
    seeds = sorted(finite)
    unpaired = sorted((set(a) | set(b)) - finite)
    return (
        seeds,
        np.array([a[s] for s in seeds], float),
        np.array([b[s] for s in seeds], float),
        unpaired,
    )


def _finite(value: Any) -> bool:
    return value is not None and math.isfinite(float(value))
