"""The search measured in seconds (issue 47, item 4): contenders replayed on the dense grid's
recorded learning curves instead of trained, over hundreds of repetitions, so that their mean
test regret and the primary interval each leaves have standard errors small enough to rank
them; and, from the same curves, which checkpoint should score test (issue 47, item 1).

    ./with-venv python bench/search_tabular.py                    # ner_depth's cached grid
    ./with-venv python bench/search_tabular.py --budget 4 6 8 --repetitions 1000
    ./with-venv python bench/search_tabular.py --kept-only --range 1e-4 3e-4   # no test curves

It reads the committed ledgers of bench/search_efficiency.py (the trials,
bench/search_efficiency_trials.csv, and every evaluation of them,
bench/search_efficiency_evaluations.csv) and trains nothing. The grid's trials must have scored
test at every evaluation (`eval_test_each_time`, which the grid sets); a grid cached before that
is trained again by `python bench/search_efficiency.py --grid-only --test-curves` (with a fixed
840-step budget in fp32, docs/benchmarks.md: whole curves to cut at any budget).

Per budget (trial-epochs per trial, default the grid's longest) and contender
(bench/tabular_contenders.py says what each does and how seeds are drawn), `--repetitions`
replays: mean test regret, the primary interval's half-width, the trial-epochs spent, each
with its standard error over repetitions. Then the checkpoint measurement at each arm's grid
answer (bench/tabular_checkpoint.py). A trial cut at a budget below the grid's is its curve up
to there, with the grid's lr schedule (bench/tabular_grid.py): an approximation.

`--kept-only` needs no test curve: it replays at the grid's own budget alone, from the trials
ledger's final dev and test of each grid trial (the checkpoint the trial kept), and measures no
checkpoint rule.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import search_evaluations as evaluations
import search_ledger
import search_reference as reference
import tabular_checkpoint as checkpoint
import tabular_contenders as contenders
from tabular_grid import RULES, Grid, IncompleteGrid, as_grid, signed, trial_values

REPO = Path(__file__).resolve().parent.parent
LEDGER = REPO / "bench" / "search_efficiency_trials.csv"
RETRAIN = (
    "python bench/search_efficiency.py --grid-only --test-curves --set "
    "'fixed.budget={steps: 840}' --set fixed.precision=fp32"
)  # whole 8-epoch curves
STREAM = 47  # the first word of every random stream of this bench


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--study", default="ner_depth")
    p.add_argument("--ledger", type=Path, default=LEDGER, help="the trials ledger")
    p.add_argument("--key", help="the grid's cache key (default: the one grid with test curves)")
    p.add_argument("--metric", default="dev_f1", help="the study metric the ledger holds")
    p.add_argument("--mode", choices=("max", "min"), default="max")
    p.add_argument("--primary", default="test_f1", help="the primary metric (its curve's name)")
    p.add_argument("--budget", type=float, nargs="+", help="epochs per trial (default: all)")
    p.add_argument("--repetitions", type=int, default=200)
    p.add_argument("--samples", type=int, default=3, help="lr samples per arm")
    p.add_argument("--explore-seeds", type=int, default=2)
    p.add_argument("--confirm-seeds", type=int, default=5)
    p.add_argument("--range", type=float, nargs=2, metavar=("LOW", "HIGH"),
                   help="the searched lrs (default: every grid lr)")  # fmt: skip
    p.add_argument("--contenders", nargs="+", choices=contenders.NAMES,
                   default=list(contenders.NAMES))  # fmt: skip
    p.add_argument("--rule", choices=RULES, default="last",
                   help="the checkpoint that scores test in the contenders' replay")  # fmt: skip
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap draws (checkpoint)")
    p.add_argument("--kept-only", action="store_true",
                   help="replay at the grid's own budget from the trials ledger alone: each grid "
                   "trial's kept checkpoint (dev and test as it ended), no test curve needed; "
                   "no budget below the grid's and no checkpoint measurement")  # fmt: skip
    p.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "search_tabular")
    args = p.parse_args(argv)
    if args.repetitions < 2 or args.samples < 1 or args.explore_seeds < 1:
        p.error("--repetitions must be >= 2, --samples and --explore-seeds >= 1")
    if args.confirm_seeds < 2:
        p.error("--confirm-seeds must be >= 2 (an interval needs two paired differences)")
    if args.kept_only and (args.budget or args.rule != "last"):
        p.error("--kept-only replays the grid's own budget and kept checkpoint: no --budget or "
                "--rule")  # fmt: skip
    return args


def say(text: str) -> None:
    print(f"search_tabular: {text}", flush=True)


def one_key(args, held: list[str]) -> tuple[str | None, str]:
    """The grid key to replay: `--key` when the ledger holds it, else the only one held; None
    otherwise, with what to add to the refusal ('; give --key' when several are held)."""
    keys = [args.key] if args.key else held
    if len(keys) == 1 and keys[0] in held:
        return keys[0], ""
    return None, "; give --key" if len(keys) > 1 else ""


def grid_trials(args) -> pd.DataFrame:
    """The grid's completed trials in the trials ledger, one per grid point and key (a point
    trained again keeps its latest row)."""
    trials = search_ledger.read(args.ledger)
    trials = trials[(trials.study == args.study) & (trials.cache_tag == reference.KEY_TAG)]
    trials = trials[(trials.phase == "confirm") & (trials.status == "completed")]
    return trials.drop_duplicates(["cache_value", "arm", "lr", "seed"], keep="last")


def kept_grid(args) -> Grid | None:
    """The grid from its trials alone: each trial's kept checkpoint (its final dev, signed, and
    test) and the epochs it trained; None (said why) when the ledger holds no single complete
    grid (one of at least 2 lrs on all its seeds; a partial one is left out)."""
    trials = grid_trials(args)
    sign = signed(args.mode)
    grids = {}
    for key, rows in trials.groupby("cache_value"):
        values = pd.DataFrame({"arm": rows.arm, "lr": rows.lr.astype(float),
                               "seed": rows.seed.astype(int), "dev": sign * rows[args.metric],
                               "test": rows[args.primary], "epochs": rows.epoch})  # fmt: skip
        try:
            grids[key] = as_grid(values)
        except IncompleteGrid:  # a grid still being built over sittings (docs/benchmarks.md)
            continue
    key, why = one_key(args, sorted(grids))
    if key is None:
        say(f"{args.ledger} holds the complete grids of keys {', '.join(sorted(grids)) or 'none'}"
            f"{why}")  # fmt: skip
        return None
    return grids[key]


def grid_evaluations(args) -> pd.DataFrame | None:
    """The grid's completed trials' evaluations with their arm, lr and seed, or None (said why)
    where the ledgers hold no grid with test curves."""
    trials = grid_trials(args)
    test = evaluations.curve_names(args.metric, args.primary)[-1]
    names = [args.metric, test]
    curves = evaluations.read(evaluations.path_beside(args.ledger), names)
    if test not in curves:
        curves[test] = math.nan
    joined = evaluations.with_trials(curves[curves.study == args.study], trials)
    joined = joined.assign(cache_value=joined.run_id.map(trials.set_index("run_id").cache_value))
    keyed = joined[joined[test].notna()].groupby("cache_value").size()
    key, why = one_key(args, list(keyed.index))
    if key is None:
        held = ", ".join(keyed.index) or "none"
        say(f"{args.ledger}'s evaluations hold no single grid with a test score at every "
            f"evaluation (grid keys with one: {held}{why}): the grid must be trained with "
            f"eval_test_each_time first: {RETRAIN}")  # fmt: skip
        return None
    return joined[joined.cache_value == key]


def space_of(grid: Grid, bounds: list[float] | None) -> np.ndarray:
    """The indices of the grid lrs a search may choose among."""
    if bounds is None:
        return np.arange(len(grid.lrs))
    low, high = bounds
    inside = np.flatnonzero((grid.lrs >= low * (1 - 1e-9)) & (grid.lrs <= high * (1 + 1e-9)))
    if len(inside) < 2:
        raise ValueError(f"--range {low:g} {high:g} holds {len(inside)} grid lr(s); 2 needed")
    return inside


def replay(
    grid: Grid, design: contenders.Design, names: list[str], repetitions: int
) -> pd.DataFrame:
    """One row per contender and repetition: regret (mean over arms), the trial-epochs of
    explore and confirm, the confirm seeds and the primary interval's half-width. Each
    (contender, repetition) draws from its own random stream."""
    rows = []
    for name in names:
        for rep in range(repetitions):
            rng = np.random.default_rng([STREAM, contenders.NAMES.index(name), rep])
            choice = contenders.CONTENDERS[name](grid, design, rng)
            done = contenders.confirm(grid, design, choice, rng)
            rows.append({"contender": name, "repetition": rep,
                         "regret": float(contenders.regrets(grid, choice.lrs).mean()),
                         "explore_epochs": choice.explore_epochs, **done,
                         "lrs": ";".join(f"{lr:.4g}" for lr in choice.lrs)})  # fmt: skip
    out = pd.DataFrame(rows)
    out["trial_epochs"] = out.explore_epochs + out.confirm_epochs
    return out


def summarize(reps: pd.DataFrame) -> pd.DataFrame:
    """Per contender: mean and standard error (sd / sqrt(repetitions)) of each quantity."""
    by = reps.groupby("contender", sort=False)
    rows = []
    for name, group in by:
        row = {"contender": name, "repetitions": len(group)}
        for column in ("regret", "half_width", "trial_epochs", "explore_epochs"):
            values = group[column].dropna()
            row[column] = float(values.mean())
            row[f"{column}_se"] = float(values.std(ddof=1) / math.sqrt(len(values)))
        row["confirm_seeds"] = float(group.confirm_seeds.mean())
        rows.append(row)
    return pd.DataFrame(rows)


def replay_table(args, grid: Grid, label: str, tag: str) -> None:
    """The contenders replayed on `grid`: their table printed, it and the repetitions written
    as `contenders_<tag>.csv` and `repetitions_<tag>.csv`."""
    design = contenders.Design(args.samples, args.explore_seeds, args.confirm_seeds,
                               space_of(grid, args.range))  # fmt: skip
    say(f"{label}: {len(grid.arms)} arms x {len(grid.lrs)} lrs x {len(grid.seeds)} seeds; seeds "
        f"drawn with replacement; {args.repetitions} repetitions")  # fmt: skip
    reps = replay(grid, design, args.contenders, args.repetitions)
    table = summarize(reps)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    args.out.mkdir(parents=True, exist_ok=True)
    reps.to_csv(args.out / f"repetitions_{tag}.csv", index=False)
    table.to_csv(args.out / f"contenders_{tag}.csv", index=False)


def replay_kept(args) -> int:
    """`--kept-only`: the contenders at the grid's own budget, test on each trial's kept
    checkpoint (under until_plateau the best dev evaluation's weights)."""
    grid = kept_grid(args)
    if grid is None:
        return 2
    replay_table(args, grid, "the grid's own budget, each trial's kept checkpoint", "kept")
    say(f"written to {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return replay_kept(args) if args.kept_only else replay_curves(args)
    except ValueError as error:  # no complete grid, or a range holding too few of its lrs
        unfinished = not args.kept_only and isinstance(error, IncompleteGrid)
        more = f"; train the rest of it with: {RETRAIN}" if unfinished else ""
        say(f"{error}{more}")
        return 2


def replay_curves(args) -> int:
    """The contenders and the checkpoint measurement at each budget, on the grid's curves."""
    joined = grid_evaluations(args)
    if joined is None:
        return 2
    sign = signed(args.mode)
    test = evaluations.curve_names(args.metric, args.primary)[-1]
    budgets = args.budget or [None]
    args.out.mkdir(parents=True, exist_ok=True)
    for budget in budgets:
        label = "the grid's whole curves" if budget is None else f"{budget:g} epochs"
        last = as_grid(trial_values(joined, budget, "last", args.metric, test, sign))
        best = as_grid(trial_values(joined, budget, "best", args.metric, test, sign))
        kept = last if args.rule == "last" else best
        tag = "all" if budget is None else f"{budget:g}"
        replay_table(args, kept, f"budget {label}, test on the {args.rule} checkpoint", tag)
        rng = np.random.default_rng([STREAM, 99])
        measured = checkpoint.measure(last, best, contenders.answers(last), args.resamples, rng)
        shown = measured.assign(lr=measured.lr.map(lambda lr: f"{lr:.3g}"))
        print(shown.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
        measured.to_csv(args.out / f"checkpoint_{tag}.csv", index=False)
    say(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
