"""The dense grid as a table a replay can index: for each arm, grid lr and grid seed, the dev
metric and the test score of the checkpoint a rule keeps at a budget, and the trial-epochs the
trial spent up to it. Built from the per-evaluation ledger (bench/search_evaluations.py), so
that any budget up to the grid's own can be replayed without training: a trial cut at `budget`
epochs is its evaluations up to that epoch (the lr schedule still decays over the grid's
budget, which a trial trained for `budget` epochs would not: an approximation the report of
bench/search_tabular.py states).

Two rules choose a trial's checkpoint (issue 47, item 1): `last`, its last evaluation within
the budget, and `best`, its evaluation of best dev metric within the budget.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

RULES = ("last", "best")


@dataclass(frozen=True)
class Grid:
    """Arrays indexed [arm, lr, seed]; `lrs` ascending, shared by every arm."""

    arms: list[str]
    lrs: np.ndarray
    seeds: list[int]
    dev: np.ndarray  # the study metric at the kept checkpoint, signed so larger is better
    test: np.ndarray  # the test score at the kept checkpoint
    epochs: np.ndarray  # trial-epochs the trial spent up to the budget

    def mean_dev(self) -> np.ndarray:
        """[arm, lr]: the grid's mean dev over its seeds (signed: larger is better)."""
        return self.dev.mean(axis=2)

    def mean_test(self) -> np.ndarray:
        return self.test.mean(axis=2)


def signed(mode: str) -> float:
    """The sign that makes the study metric larger-is-better (`mode`: max or min), as the
    grid's `dev` holds it."""
    return 1.0 if mode == "max" else -1.0


def kept(curve: pd.DataFrame, budget: float | None, rule: str, dev: str, sign: float) -> pd.Series:
    """The evaluation a rule keeps of one trial's `curve` (rows by evaluation), cut at `budget`
    epochs (None: all of it); the first where dev ties under `best`."""
    if rule not in RULES:
        raise ValueError(f"checkpoint rule {rule!r}: one of {', '.join(RULES)}")
    inside = curve if budget is None else curve[curve.epoch <= budget + 1e-9]
    if not len(inside):  # its first evaluation lies past the budget: keep that one
        inside = curve.iloc[:1]
    if rule == "last":
        return inside.iloc[-1]
    return inside.loc[(sign * inside[dev]).idxmax()]


def trial_values(
    evaluations: pd.DataFrame, budget: float | None, rule: str, dev: str, test: str, sign: float
) -> pd.DataFrame:
    """One row per trial (arm, lr, seed): the kept checkpoint's dev (signed) and test, and the
    epochs spent (the budget, or less where the trial ended sooner). `evaluations`: the
    ledger's rows with their trials' arm, lr and seed (`search_evaluations.with_trials`)."""
    rows = []
    ordered = evaluations.sort_values(["run_id", "evaluation"], kind="stable")
    for (arm, lr, seed), curve in ordered.groupby(["arm", "lr", "seed"], sort=True):
        point = kept(curve, budget, rule, dev, sign)
        spent = curve.epoch.iloc[-1] if budget is None else min(budget, curve.epoch.iloc[-1])
        rows.append((arm, float(lr), int(seed), sign * float(point[dev]), float(point[test]),
                     float(spent)))  # fmt: skip
    return pd.DataFrame(rows, columns=["arm", "lr", "seed", "dev", "test", "epochs"])


class IncompleteGrid(ValueError):
    """The ledger holds no grid of at least 2 lrs complete on its seeds (yet: a grid can be
    trained over several sittings)."""


def as_grid(values: pd.DataFrame) -> Grid:
    """The values as arrays; only lrs every arm has on every seed, only seeds every point has
    (a replay indexes them all alike). Raises IncompleteGrid when nothing is left."""
    seeds = sorted(set.intersection(*(set(g.seed) for _, g in values.groupby(["arm", "lr"]))))
    values = values[values.seed.isin(seeds)]
    counts = values.groupby(["arm", "lr"]).seed.nunique()
    complete = counts[counts == len(seeds)].reset_index()
    arms = sorted(complete.arm.unique())
    lrs = sorted(set.intersection(*(set(complete[complete.arm == a].lr) for a in arms)))
    if len(arms) < 1 or len(lrs) < 2 or not seeds:
        raise IncompleteGrid("the ledger holds no grid of at least 2 lrs complete on its seeds")
    table = values.set_index(["arm", "lr", "seed"]).sort_index()
    shape = (len(arms), len(lrs), len(seeds))
    arrays = {name: np.empty(shape) for name in ("dev", "test", "epochs")}
    for i, arm in enumerate(arms):
        for j, lr in enumerate(lrs):
            for k, seed in enumerate(seeds):
                row = table.loc[(arm, lr, seed)]
                row = row.iloc[0] if isinstance(row, pd.DataFrame) else row
                for name, array in arrays.items():
                    array[i, j, k] = row[name]
    return Grid(arms, np.asarray(lrs), seeds, **arrays)


def at_lr(values: np.ndarray, lrs: np.ndarray, lr: float) -> float:
    """`values` (one per grid lr) at `lr`, linear in log10(lr) between grid points."""
    return float(np.interp(np.log10(lr), np.log10(lrs), values))
