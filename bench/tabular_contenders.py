"""The contenders bench/search_tabular.py replays on the dense grid's table, each a way to spend
one study's trial-epochs on choosing each arm's lr and then confirming the arms' difference:

- `explore`: today's explore: TPE (Optuna, its first max(2, samples // 2) draws at random) over
  the grid's lrs in the searched range as a categorical space, `samples` draws per arm, each
  trained on `explore_seeds` seeds; the arm's lr is the sample of best mean dev. Replayed one
  sample after the other, so the model draws once the start-up has ended, which a study's
  trials at once mostly prevent (bench/search_efficiency.py's docstring);
- `random_lr`: one lr per arm drawn at random from the space, no explore;
- `peak_model`: `samples` random lrs per arm on the explore seeds, the lr read off the study's
  peak model (`select: model`, study/search/_peak_model.py) fitted through every explore trial;
- `more_seeds`: no explore; a random lr per arm, and the trial-epochs today's explore would
  spend on average go to confirm seeds instead;
- `grid_lr`: what `ner_depth`'s default profile ships: no explore, one lr for every arm fixed
  at the grid's own best (pooled over the arms, inside the space), and explore's trial-epochs
  go to confirm seeds as in `more_seeds`. Its regret is in-sample (the grid chose the lr on the
  seeds that score it), so it is a floor, and the grid it needs is paid once, not per study.

A repetition draws every seed anew from the grid's seeds, with replacement (explore seeds per
sample, confirm seeds once for all arms, so confirm stays paired), from a random stream of its
own per contender and repetition: no two contenders share a sampler seed. Regret is measured
on the grid's own means over all its seeds (the grid's answer per arm is its lr of best mean
dev; regret is its mean test there less the mean test at the chosen lr, linear in log lr
between grid points), so with few grid seeds the seeds that chose an lr also score it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats
from tabular_grid import Grid, at_lr

from study.search._peak_model import fit_peaks

NAMES = ("explore", "random_lr", "peak_model", "more_seeds", "grid_lr")


@dataclass(frozen=True)
class Design:
    """What one study run spends: lr samples per arm, seeds per sample, confirm seeds, and the
    grid lrs the search may choose among (indices into `Grid.lrs`)."""

    samples: int
    explore_seeds: int
    confirm_seeds: int
    space: np.ndarray


@dataclass(frozen=True)
class Choice:
    """One repetition's choice: the lr per arm and the trial-epochs explore spent."""

    lrs: np.ndarray
    explore_epochs: float
    extra_seeds: int = 0


def answers(grid: Grid) -> np.ndarray:
    """Per arm, the index of the grid's lr of best mean dev: what a choice is measured against."""
    return grid.mean_dev().argmax(axis=1)


def regrets(grid: Grid, lrs: np.ndarray) -> np.ndarray:
    """Per arm, the grid's mean test at its answer less its mean test at the chosen lr."""
    test, best = grid.mean_test(), answers(grid)
    return np.array([test[i, best[i]] - at_lr(test[i], grid.lrs, lr) for i, lr in enumerate(lrs)])


def _explore_trials(grid: Grid, design: Design, rng: np.random.Generator, arm: int, lr: int):
    """One explore sample: the dev of each of its seeds (drawn anew) and its trial-epochs."""
    seeds = rng.integers(len(grid.seeds), size=design.explore_seeds)
    return grid.dev[arm, lr, seeds], float(grid.epochs[arm, lr, seeds].sum())


def explore(grid: Grid, design: Design, rng: np.random.Generator) -> Choice:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = [int(j) for j in design.space]
    chosen, spent = [], 0.0
    for arm in range(len(grid.arms)):
        sampler = optuna.samplers.TPESampler(
            seed=int(rng.integers(2**31)), n_startup_trials=max(2, design.samples // 2)
        )
        search = optuna.create_study(direction="maximize", sampler=sampler)
        means: dict[int, list[float]] = {}
        for _ in range(design.samples):
            trial = search.ask({"lr": optuna.distributions.CategoricalDistribution(space)})
            lr = int(trial.params["lr"])
            devs, epochs = _explore_trials(grid, design, rng, arm, lr)
            spent += epochs
            search.tell(trial, float(devs.mean()))
            means.setdefault(lr, []).append(float(devs.mean()))
        best = max(means, key=lambda j: np.mean(means[j]))
        chosen.append(grid.lrs[best])
    return Choice(np.asarray(chosen), spent)


def random_lr(grid: Grid, design: Design, rng: np.random.Generator) -> Choice:
    return Choice(grid.lrs[rng.choice(design.space, size=len(grid.arms))], 0.0)


def peak_model(grid: Grid, design: Design, rng: np.random.Generator) -> Choice:
    points, fallback, spent = [], {}, 0.0
    for arm, name in enumerate(grid.arms):
        replace = design.samples > len(design.space)
        drawn = rng.choice(design.space, size=design.samples, replace=replace)
        means = {}
        for lr in drawn:
            devs, epochs = _explore_trials(grid, design, rng, arm, int(lr))
            spent += epochs
            points += [(name, float(grid.lrs[lr]), float(d)) for d in devs]
            means[float(grid.lrs[lr])] = float(devs.mean())
        fallback[name] = max(means, key=means.get)
    low, high = grid.lrs[design.space.min()], grid.lrs[design.space.max()]
    fit = fit_peaks(points, float(low), float(high), "max", fallback)  # dev is signed: max
    return Choice(np.array([fit.chosen[name] for name in grid.arms]), spent)


def explore_cost(grid: Grid, design: Design) -> float:
    """The trial-epochs today's explore spends on average: samples x seeds x arms trials at the
    space's mean trial-epochs."""
    per_trial = float(grid.epochs[:, design.space, :].mean())
    return design.samples * design.explore_seeds * len(grid.arms) * per_trial


def _bought_seeds(grid: Grid, design: Design) -> int:
    """The confirm seeds today's explore's trial-epochs would buy instead."""
    per_seed = len(grid.arms) * float(grid.epochs[:, design.space, :].mean())
    return int(explore_cost(grid, design) // per_seed)


def more_seeds(grid: Grid, design: Design, rng: np.random.Generator) -> Choice:
    return Choice(random_lr(grid, design, rng).lrs, 0.0, _bought_seeds(grid, design))


def grid_lr(grid: Grid, design: Design, rng: np.random.Generator) -> Choice:
    pooled = design.space[grid.mean_dev()[:, design.space].mean(axis=0).argmax()]
    lrs = np.full(len(grid.arms), grid.lrs[pooled])
    return Choice(lrs, 0.0, _bought_seeds(grid, design))


CONTENDERS: dict[str, Callable[[Grid, Design, np.random.Generator], Choice]] = {
    "explore": explore,
    "random_lr": random_lr,
    "peak_model": peak_model,
    "more_seeds": more_seeds,
    "grid_lr": grid_lr,
}


def half_width(differences: np.ndarray, level: float = 0.95) -> float:
    """The half-width of the t interval of a mean of paired differences (NaN below 2)."""
    n = len(differences)
    if n < 2:
        return math.nan
    spread = float(np.std(differences, ddof=1)) / math.sqrt(n)
    return float(stats.t.ppf(0.5 + level / 2, n - 1)) * spread


def confirm(grid: Grid, design: Design, choice: Choice, rng: np.random.Generator) -> dict:
    """Confirm at the chosen lrs on seeds drawn anew (the same for every arm: paired): the
    trial-epochs spent and the primary interval's half-width, averaged over each arm's pair
    with the first arm."""
    n = design.confirm_seeds + choice.extra_seeds
    seeds = rng.integers(len(grid.seeds), size=n)
    tests = np.array([[at_lr(grid.test[i, :, s], grid.lrs, lr) for s in seeds]
                      for i, lr in enumerate(choice.lrs)])  # fmt: skip
    epochs = sum(at_lr(grid.epochs[i, :, s], grid.lrs, lr)
                 for i, lr in enumerate(choice.lrs) for s in seeds)  # fmt: skip
    widths = [half_width(tests[i] - tests[0]) for i in range(1, len(grid.arms))]
    return {"confirm_seeds": n, "confirm_epochs": float(epochs),
            "half_width": float(np.mean(widths)) if widths else math.nan}  # fmt: skip
