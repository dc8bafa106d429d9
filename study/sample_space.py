"""A study's search space as Optuna sees it: one Optuna distribution per searched factor, and
every point of a space that is finite, so a searcher can avoid drawing one sample twice.

Each search kind now carries its own Optuna form and points (`study/spec/distributions.py`);
what is left here serves callers that still hold Optuna distributions rather than the spec's."""

from __future__ import annotations

import itertools
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

from study.spec import Distribution


def optuna_distribution(dist: Distribution) -> BaseDistribution:
    return dist.to_optuna()


def finite_points(distributions: dict[str, BaseDistribution]) -> list[dict[str, Any]]:
    """Every point of a space of categorical and int factors, in order; [] if any is real.
    Reads Optuna's distributions, which do not carry the spec kind's `points()`; for the spec's
    own, `study.spec.finite_points(spec.search)` gives the same points."""
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
