"""Wilcoxon's signed-rank test of the paired differences, and the smallest p it can reach:
at a few seeds no exact rank test can reject, which a reader must be told."""

from __future__ import annotations

import warnings

import numpy as np
from scipy import stats


def wilcoxon_p(diffs: np.ndarray) -> float:
    """scipy's signed-rank p (exact at small n); 1 when there is no difference at all."""
    if np.all(diffs == 0):
        return 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.wilcoxon(diffs).pvalue)


def wilcoxon_min_p(n: int) -> float:
    """The smallest two-sided p of the exact signed-rank test with n non-zero differences: all
    of one sign, 2 / 2^n (0.0625 for 5 seeds, so it can never reject at 0.05 below 6)."""
    return min(1.0, 2.0 / 2**n) if n else 1.0
