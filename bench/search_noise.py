"""The dense grid's seed noise as a model: how small a regret bench/search_efficiency.py can
resolve at all, and what other explore designs would give on the grid's curves. It chooses
which designs are worth measuring; its numbers are a model's, never a measurement.

    ./with-venv python bench/search_noise.py   # after search_efficiency.py wrote its grid.csv

The model takes each arm's grid curve (mean dev metric over lr, linear in log lr between its
points) as the truth, and one seed's dev metric as the curve plus normal noise. The noise's sd
is the grid's per-seed sd pooled over the better half of the arm's points; the dead ends of
the curve, where nothing learns, have almost none. Two things follow from it:
- The floor. Redraw the grid's means with that noise (sd / sqrt(the grid's seeds)) and score
  the true best lr against the redrawn grid, as the bench scores a chosen lr. The mean is the
  regret that an explore always finding the best lr would still show. Smaller regrets cannot
  be told apart.
- Designs. An explore draws `samples` lrs in a range, log-uniform at random or log-spaced. It
  sees each lr as the curve plus the noise of a `seeds`-seed mean, and keeps the best. Its
  regret is on the curve; its cost is the grid's mean epochs at each lr x seeds, as a share of
  the grid's trial-epochs. There is no ASHA in the model: pruning lowers the cost and adds
  errors of its own.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
GRID = REPO / "bench" / "out" / "search_efficiency" / "grid.csv"
DRAWS = 20_000  # redrawn grids or explores per estimate; the mean's error is ~1e-4 F1


def pooled_sd(curve: pd.DataFrame, sign: float = 1.0) -> float:
    """One seed's sd, pooled (root mean variance) over the better half of the curve's points."""
    finite = curve[np.isfinite(curve.dev) & np.isfinite(curve.dev_sd)]
    better = finite.loc[(sign * finite.dev).sort_values(ascending=False).index]
    better = better.head(math.ceil(len(finite) / 2))
    return float(np.sqrt(np.mean(better.dev_sd**2)))


def regret_floor(curve: pd.DataFrame, sd: float, seeds: int, sign: float = 1.0, seed: int = 0):
    """Mean regret of the curve's true best lr scored against grids redrawn with a `seeds`-seed
    mean's noise: the smallest regret the bench can resolve."""
    finite = curve[np.isfinite(curve.dev)]
    truth = sign * finite.dev.to_numpy()
    rng = np.random.default_rng(seed)
    redrawn = truth + rng.normal(0.0, sd / math.sqrt(seeds), (DRAWS, len(truth)))
    return float(np.mean(redrawn.max(axis=1) - redrawn[:, truth.argmax()]))


def design(curve: pd.DataFrame, sd: float, lrs: tuple, samples: int, seeds: int, placement: str,
           sign: float = 1.0, seed: int = 0) -> tuple[float, float]:  # fmt: skip
    """(mean regret on the curve, mean trial-epochs) of an explore that keeps the best of
    `samples` lrs in `lrs` (low, high), each seen as a `seeds`-seed mean."""
    finite = curve[np.isfinite(curve.dev)]
    log_lr, truth = np.log10(finite.lr.to_numpy()), sign * finite.dev.to_numpy()
    epochs = (finite.trial_epochs / finite.seeds_completed).to_numpy()
    low, high = np.log10(lrs)
    rng = np.random.default_rng(seed)
    if placement == "spaced":
        drawn = np.broadcast_to(np.linspace(low, high, samples), (DRAWS, samples))
    else:
        drawn = rng.uniform(low, high, (DRAWS, samples))
    value = np.interp(drawn, log_lr, truth)
    seen = value + rng.normal(0.0, sd / math.sqrt(seeds), value.shape)
    kept = np.take_along_axis(value, seen.argmax(axis=1)[:, None], axis=1)[:, 0]
    cost = np.interp(drawn, log_lr, epochs).sum(axis=1) * seeds
    return float(np.mean(truth.max() - kept)), float(np.mean(cost))


def design_table(curves: pd.DataFrame, ranges: list[tuple], samples: list[int],
                 seeds: list[int], sign: float = 1.0) -> pd.DataFrame:  # fmt: skip
    """Every design's regret averaged over arms and its cost as a share of the grid's."""
    arms = [curve for _, curve in curves.groupby("arm")]
    sds = [pooled_sd(curve, sign) for curve in arms]
    grid_cost = float(curves.trial_epochs.sum())
    rows = []
    for lrs, n, k, placement in itertools.product(ranges, samples, seeds, ("random", "spaced")):
        out = [design(c, sd, lrs, n, k, placement, sign) for c, sd in zip(arms, sds, strict=True)]
        rows.append({"low": lrs[0], "high": lrs[1], "samples": n, "seeds": k,
                     "placement": placement, "regret": np.mean([r for r, _ in out]),
                     "cost_share": sum(c for _, c in out) / grid_cost})  # fmt: skip
    return pd.DataFrame(rows)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--grid", type=Path, default=GRID, help="search_efficiency.py's grid.csv")
    p.add_argument("--grid-seeds", type=int, default=3, help="seeds per grid point")
    p.add_argument("--range", type=float, nargs=2, action="append", dest="ranges",
                   metavar=("LOW", "HIGH"), help="an lr range to model (repeatable; default "
                   "3e-5 3e-4, the study's, and its upper half)")  # fmt: skip
    p.add_argument("--samples", type=int, nargs="+", default=[3, 4, 6, 8])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--max-cost", type=float, default=1 / 3, help="designs up to this cost share")
    p.add_argument("--minimise", action="store_true", help="the metric is minimised")
    args = p.parse_args(argv)
    args.ranges = [tuple(r) for r in args.ranges or [(3e-5, 3e-4), (9.49e-5, 3e-4)]]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.grid.is_file():
        print(f"search_noise: {args.grid} not found; run bench/search_efficiency.py first "
              "(with a full cache it trains nothing)", file=sys.stderr)  # fmt: skip
        return 2
    curves, sign = pd.read_csv(args.grid), -1.0 if args.minimise else 1.0
    print(f"search_noise: a model of {args.grid}'s seed noise, not a measurement")
    for arm, curve in curves.groupby("arm"):
        sd = pooled_sd(curve, sign)
        floor = regret_floor(curve, sd, args.grid_seeds, sign)
        print(f"search_noise: {arm}: one seed's sd {sd:.4f} (better half of the grid); the best "
              f"lr itself would show a mean regret of {floor:.4f} against a {args.grid_seeds}-seed "
              "grid")  # fmt: skip
    table = design_table(curves, args.ranges, args.samples, args.seeds, sign)
    table = table[table.cost_share <= args.max_cost].sort_values("regret")
    print(f"designs at <= {args.max_cost:.3f} of the grid's trial-epochs, best regret first "
          "(no ASHA):")  # fmt: skip
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
