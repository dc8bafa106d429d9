"""Effect sizes a reader can weigh without a p-value: the standardised paired effect d_z and
the probability that A beats B on a new seed."""

from __future__ import annotations

import math

import numpy as np
from statsmodels.stats.proportion import proportion_confint


def cohens_dz(diffs: np.ndarray) -> float:
    """Standardised paired effect: mean difference over the std of the differences."""
    spread = float(np.std(diffs, ddof=1))
    if spread == 0:
        return 0.0 if float(np.mean(diffs)) == 0 else math.copysign(math.inf, np.mean(diffs))
    return float(np.mean(diffs)) / spread


def win_probability(better_diffs: np.ndarray, alpha: float) -> tuple[float, float, float]:
    """P(A beats B on a new seed): the share of seeds where A was better (a tie counts half),
    with a Clopper-Pearson interval at 1 - alpha (statsmodels). Half-wins are rounded down
    for the lower bound and up for the upper, so the interval never claims more than the
    seeds show."""
    n = len(better_diffs)
    wins = float(np.sum(better_diffs > 0) + 0.5 * np.sum(better_diffs == 0))
    low = proportion_confint(math.floor(wins), n, alpha=alpha, method="beta")[0]
    high = proportion_confint(math.ceil(wins), n, alpha=alpha, method="beta")[1]
    return wins / n, float(low), float(high)
