"""Which arms a study compares: arms that differ in exactly one factor, or each arm against
the baseline arm equal to it in every other factor, and which direction of a metric is better.
Plain data, so the driver can ask which comparisons are open between confirm rounds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# Metrics compared, and which direction is better. Extra eval sets add `<name>_f1` (max).
DIRECTIONS = {"dev_f1": "max", "test_f1": "max", "curve_area": "max", "steps_to_95": "min"}


def arm_pairs(
    factors: Sequence[Mapping[str, Any]],
    grid: Mapping[str, Sequence[Any]],
    baseline: Mapping[str, Any] | None = None,
) -> list[tuple[int, int, str]]:
    """(a, b, factor) for every pair of arms that differ in exactly one factor; A holds the
    value listed later in the grid, so `diff` reads 'later minus earlier' (depth full-1 minus
    full). With a baseline (e.g. {depth: full}), each other arm is compared only with the
    baseline arm that equals it in every other factor."""
    if baseline is not None:
        return _baseline_pairs(factors, baseline)
    pairs = []
    for i, j in _index_pairs(len(factors)):
        factor = _differing(factors[i], factors[j])
        if factor is None:
            continue
        values = list(grid[factor])
        later_i = values.index(factors[i][factor]) > values.index(factors[j][factor])
        pairs.append((i, j, factor) if later_i else (j, i, factor))
    return pairs


def _baseline_pairs(
    factors: Sequence[Mapping[str, Any]], baseline: Mapping[str, Any]
) -> list[tuple[int, int, str]]:
    def is_base(f: Mapping[str, Any]) -> bool:
        return all(f.get(k) == v for k, v in baseline.items())

    bases = [i for i, f in enumerate(factors) if is_base(f)]
    if not bases:
        raise ValueError(f"no arm matches the baseline {dict(baseline)}")
    pairs = []
    for i, arm in enumerate(factors):
        if is_base(arm):
            continue
        rest = {k: v for k, v in arm.items() if k not in baseline}
        match = [b for b in bases if all(factors[b].get(k) == v for k, v in rest.items())]
        if match:
            pairs.append((i, match[0], ",".join(k for k in baseline if arm.get(k) != baseline[k])))
    return pairs


def _index_pairs(n: int) -> Iterable[tuple[int, int]]:
    return ((i, j) for i in range(n) for j in range(i + 1, n))


def _differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """The one factor in which two arms differ, else None."""
    diff = [k for k in a if a[k] != b.get(k)]
    return diff[0] if len(diff) == 1 else None


def direction(metric: str) -> str:
    return DIRECTIONS.get(metric, "min" if metric.endswith("_loss") else "max")
