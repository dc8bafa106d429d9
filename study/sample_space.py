"""A study's search space as Optuna sees it: one Optuna distribution per searched factor, and
every point of a space that is finite, so a searcher can avoid drawing one sample twice."""

from __future__ import annotations

import itertools
from typing import Any

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from study.spec import Distribution


def optuna_distribution(dist: Distribution) -> BaseDistribution:
    if dist.kind == "loguniform":
        return FloatDistribution(float(dist.low), float(dist.high), log=True)
    if dist.kind == "uniform":
        return FloatDistribution(float(dist.low), float(dist.high))
    if dist.kind == "int":
        return IntDistribution(int(dist.low), int(dist.high), step=dist.step or 1)
    return CategoricalDistribution(list(dist.choices))


def finite_points(distributions: dict[str, BaseDistribution]) -> list[dict[str, Any]]:
    """Every point of a space of categorical and int factors, in order; [] if any is real."""
    values = []
    for dist in distributions.values():
        if isinstance(dist, CategoricalDistribution):
            values.append(list(dist.choices))
        elif isinstance(dist, IntDistribution):
            values.append(list(range(dist.low, dist.high + 1, dist.step)))
        else:
            return []
    names = list(distributions)
    return [dict(zip(names, point, strict=True)) for point in itertools.product(*values)]
