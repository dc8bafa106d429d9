"""`confirm.select: model`: each arm's value of the one searched real factor (the learning
rate) read off a model of every explore result, instead of the best of a few noisy draws.

The best of three draws picks whichever draw had the luckiest seeds: with a paired seed sd
of 0.04 and regrets near 0.01 between lrs, the noise is larger than what is being chosen.
A curve fitted through all of them pools that noise. The model, in x = log10(value):

    metric = a_arm + b_arm * x + c * x^2      (c shared by every arm, c < 0 for a peak)

one intercept and slope per arm and one curvature for all, fitted by least squares
(statsmodels OLS) over every finished explore trial, seed by seed. Sharing the curvature
lets arms of few samples borrow the curve's shape from the others, while each arm keeps a
peak of its own, -b_arm / (2c). The peak is clamped to the searched range; where the fitted
curve has no peak (c >= 0, or fewer distinct values than the model needs), an arm falls
back to its best seed-mean sample, and the log says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PeakFit:
    """The fitted model: per arm its chosen value and whether it came from the curve."""

    chosen: dict[str, float]  # arm -> value (not log)
    from_curve: dict[str, bool]  # arm -> True: the curve's peak; False: the best sample
    curvature: float  # c, per log10 unit squared (nan when not fitted)


def fit_peaks(
    points: Sequence[tuple[str, float, float]],
    low: float,
    high: float,
    mode: str,
    fallback: Mapping[str, float],
) -> PeakFit:
    """`points`: (arm, value, metric) per finished explore trial. `low`/`high`: the searched
    range. `fallback`: each arm's best seed-mean sample, used where the curve has no peak."""
    import statsmodels.api as sm

    sign = 1.0 if mode == "max" else -1.0
    rows = [(arm, math.log10(v), sign * m) for arm, v, m in points if math.isfinite(m) and v > 0]
    arms = sorted({arm for arm, _, _ in rows})
    lo, hi = math.log10(low), math.log10(high)
    chosen, curved = dict(fallback), dict.fromkeys(fallback, False)
    distinct = {arm: len({x for a, x, _ in rows if a == arm}) for arm in arms}
    # two parameters per arm and one shared: at least 2 distinct values per arm and 3 overall
    if not arms or min(distinct.values()) < 2 or len({x for _, x, _ in rows}) < 3:
        return PeakFit(chosen, curved, math.nan)
    centre = (lo + hi) / 2  # centred, so the columns are not nearly collinear
    design, target = [], []
    for arm, x, y in rows:
        row = np.zeros(2 * len(arms) + 1)
        i = arms.index(arm)
        row[2 * i], row[2 * i + 1], row[-1] = 1.0, x - centre, (x - centre) ** 2
        design.append(row)
        target.append(y)
    params = sm.OLS(np.asarray(target), np.asarray(design)).fit().params
    c = float(params[-1])
    if not c < 0:
        return PeakFit(chosen, curved, c)
    for i, arm in enumerate(arms):
        peak = centre - float(params[2 * i + 1]) / (2 * c)
        chosen[arm] = 10 ** min(max(peak, lo), hi)
        curved[arm] = True
    return PeakFit(chosen, curved, c)
