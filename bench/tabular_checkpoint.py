"""Which checkpoint should score test (issue 47, item 1): the last evaluation within the budget,
or the one of best dev? Measured on the dense grid's seeds, per arm at one lr each: the mean
test F1 of each choice (its bias against the other), the sd over seeds of each, the sd of
the paired differences between arms under each choice (what sets the width of the study's
primary interval) and its change from last to best (`pairsdchange`, bootstrapped on the same
draws), each with a bootstrap standard error over the grid's seeds.

The rule that gives the smaller paired sd at equal mean is the one to ship; with the grid's few
seeds the standard errors say how far that can be told apart.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from tabular_grid import Grid


def _stats(last: np.ndarray, best: np.ndarray) -> dict[str, float]:
    """[arm, seed] test scores under each rule -> the measured quantities (arm pairs: each arm
    against the first)."""
    out: dict[str, float] = {}
    for name, values in (("last", last), ("best", best)):
        for i in range(values.shape[0]):
            out[f"{name}_mean_{i}"] = float(values[i].mean())
            out[f"{name}_sd_{i}"] = float(values[i].std(ddof=1))
        for i in range(1, values.shape[0]):
            out[f"{name}_pair_sd_{i}"] = float((values[i] - values[0]).std(ddof=1))
    for i in range(last.shape[0]):
        out[f"bias_{i}"] = out[f"best_mean_{i}"] - out[f"last_mean_{i}"]
    for i in range(1, last.shape[0]):  # what keeping the best-dev checkpoint does to the width
        out[f"pairsdchange_{i}"] = out[f"best_pair_sd_{i}"] - out[f"last_pair_sd_{i}"]
    return out


def measure(
    last: Grid, best: Grid, lr_index: np.ndarray, resamples: int, rng: np.random.Generator
) -> pd.DataFrame:
    """One row per arm and quantity: its value on the grid's seeds and its bootstrap standard
    error (seeds drawn with replacement `resamples` times). `lr_index`: the grid lr per arm."""
    arms = range(len(last.arms))
    return measure_scores(
        last.arms,
        [float(last.lrs[lr_index[i]]) for i in arms],
        np.array([last.test[i, lr_index[i]] for i in arms]),
        np.array([best.test[i, lr_index[i]] for i in arms]),
        resamples,
        rng,
    )


def measure_scores(
    arms: list[str],
    lrs: list[float],
    test_last: np.ndarray,
    test_best: np.ndarray,
    resamples: int,
    rng: np.random.Generator,
) -> pd.DataFrame:
    """`measure` on [arm, seed] test scores under each rule, the seeds paired across arms (a
    study's confirm trials as well as a grid's points)."""
    point = _stats(test_last, test_best)
    seeds = test_last.shape[1]
    draws = [_stats(test_last[:, d], test_best[:, d])
             for d in (rng.integers(seeds, size=seeds) for _ in range(resamples))]  # fmt: skip
    rows = []
    for key, value in point.items():
        quantity, _, arm = key.rpartition("_")
        spread = np.nanstd([d[key] for d in draws], ddof=1)
        rows.append({"arm": arms[int(arm)], "lr": lrs[int(arm)], "quantity": quantity,
                     "value": value, "se": float(spread)})  # fmt: skip
    return pd.DataFrame(rows)
