"""Does the search inside each arm earn its keep? Each contender's chosen learning rate, at the
explore budget the study file gives, against a dense learning-rate grid trained out on seeds
no explore uses: its regret (how much worse the chosen lr is than the grid's best) and its
cost (trial-epochs, as a share of the grid's).

    ./with-venv python bench/search_efficiency.py                     # ner_depth, search profile
    ./with-venv python bench/search_efficiency.py --trainable synthetic   # the machinery, ~4 min

The project's promise is that Optuna and ASHA inside each arm find a good configuration at a
fraction of a grid's cost; this measures it, for every arm of the study (`--study`,
`--profile`, by default ner_depth's `search`: the default profile fixes its lr), whose one
searched factor must be a loguniform learning rate.

- The reference: `--grid-lrs` log-spaced learning rates over the study's search range widened
  by `--beyond` decades at each end (or over `--grid-range`), each trained with the profile's
  full budget on `--grid-seeds` (1000-1002) by the study machinery itself
  (bench/search_reference.py). Per arm, its mean dev metric over those seeds, as a curve in
  log lr; the answer is its best.
  Given none of those three flags, a complete cached grid of the same key that holds the
  study's range is the reference, whatever its lrs: a study whose range moved inside the
  grid keeps it. Given them, the bench says when the cache holds this key's grid at other
  lrs.
- The contenders, each run `--repetitions` times (repetition r: explore seeds 100 + n*r ...,
  the samplers' `phases.explore.sampler_seed` 100*r), each repetition one explore-only study
  run at the file's `samples`, seed count and ASHA rungs: the study's own explore
  (`study`: its sampler, TPE here, with ASHA), TPE without ASHA, random search with and
  without ASHA, and a coarse grid (`samples` log-spaced lrs over the study's range, all on
  the explore seeds, never pruned). TPE's first max(2, samples // 2) draws are its random
  start-up, from the same seed as the random sampler's (the same lrs), and it draws at
  random too whenever it is asked before that many samples have ended on all their seeds:
  with ner_depth's 3 samples and two trials at once, Tune asks for an arm's third sample
  while its second is still training, so TPE may try exactly random search's lrs. Such a
  repetition is marked (`same_draws_as`), not skipped: whether the study's own explore ever
  uses TPE's model is part of the finding. The chosen lr per arm is the study's own rule
  (`study.search.confirm.best_per_arm`: the best seed mean among samples whose seeds all
  completed).
- Regret, per repetition and arm, then averaged over arms: on dev, the grid's best mean dev
  metric minus its mean at the chosen lr (linear in log lr between grid points); on test F1
  (the analysis' primary metric), the grid's mean at its dev-best lr (the answer) minus its
  mean at the chosen lr, on the grid's seeds, so the seeds that chose an lr never score it
  and test never selects (below 0: the chosen lr happened to test better than the answer).
  A grid point counts only once every grid seed completed on it; a failed one is trained
  again on the next run. Cost: the trial-epochs a repetition trained (each trial's last
  `epoch`, pruned ones included), and their share of the grid's. Table: mean and standard
  deviation over repetitions; printed, and written with the grid and every repetition (per
  arm too) as CSV files (the table as markdown too), a plot of regret against cost share
  and one of the grid's curves (with the range and every chosen lr marked) into `--out`.

The cache: the grid, and each contender repetition, are paid for once. Their study runs live
in the MLflow store `--cache` (default sqlite under bench/.cache/search_efficiency/, not
committed; Ray's results beside it), tagged with a key of the study, profile, trainable,
model and data fingerprints, precision, metric, fixed settings and grid seeds (a contender's
also with the search range, the explore settings and its overrides; bench/search_reference.py
says what invalidates it). Each tagged run's trials are copied at once into the ledger
(`--ledger`, default bench/search_efficiency_trials.csv, committed; bench/search_ledger.py), so
a fresh clone has the cache without the store: commit the ledger after a sitting that trained.
Every evaluation of those trials goes into a second ledger beside it
(bench/search_efficiency_evaluations.csv; bench/search_evaluations.py): step, epoch, the study
metric and, for the grid, whose trials run with `eval_test_each_time`, the test score at every
evaluation, which bench/search_tabular.py replays. `--test-curves` trains again the grid runs
cached without that score (the key does not change: the setting changes what a trial records,
not what it learns), and leaves the contenders as they are; `--grid-only` stops once the grid is
built (with `--estimate`: says what building it costs).
A rerun trains only the grid points and contender repetitions neither copy has, so with a
full cache it only reads and prints. The grid trains one learning rate per study run
(`--grid-lrs-per-run`), each cached as it ends, so Ctrl-C or a crash loses only the run that
was training, and the cache can be built over several sittings (the contender repetitions
are cached one by one too). `--refresh` retrains everything of this key (after a change to
the training code, which the key does not see), dropping its rows from the ledger.
`--estimate` says what the cache holds and what training the rest costs, and trains nothing;
without a full cache the script says the same before it starts training: at most the
missing trials x the budget's max epochs, at a stated time per trial-epoch (`--epoch-s`, or
this precision's figure from docs/benchmarks.md).

Cost on the real model: ner_depth's search profile (2 arms, until_plateau up to 8 epochs)
with 12 lrs x 3 seeds is 72 trials, at most 576 trial-epochs; on the 2-core machine in bf16
they trained 375.9 in 69 min (fp32 is about 4 times slower). The contenders add 5 x 5
repetitions of 12 trials each (3 samples x 2 seeds x 2 arms), at most 2400 trial-epochs;
docs/benchmarks.md says what the measured ones cost. The ledger holds what has been trained,
so each sitting trains only what is missing, and once all is cached the script reads and
prints in minutes. Every confirm-phase trial keeps its trained tagger in the store's
artifacts, as the study does (study.export reads them): the grid's 72 and the coarse grids'
60 are about 11 GB of MiniLM taggers beside the store (never in the ledger). The
synthetic mode (`--trainable synthetic`: the response surface of trainables/settings/surface.py,
no model; by default 10 grid lrs and 2 repetitions) runs everything in about 4 minutes to test
the machinery; its numbers are never a finding, and everything it prints and writes says so.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import pandas as pd
import search_cost as cost
import search_reference as grid
from search_contenders import CONTENDERS, estimate_missing, run_contenders
from search_ledger import TrialCache
from search_outputs import NOT_A_FINDING, floors, print_table, say, summary, write_outputs
from support import machine_line

from study import StudyStopped, UserInputError, run_study
from study.plan import make_plan
from study.precision import resolved_precision
from study.spec import LogUniform, load_study

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / "bench" / ".cache" / "search_efficiency"
LEDGER = REPO / "bench" / "search_efficiency_trials.csv"  # committed: bench/search_ledger.py
# the synthetic surface standing in for MiniLM on WNUT-16: 6 blocks, 105 steps per epoch
SURFACE = {"synthetic": {"layers": 6, "best_lr": 1.0e-4, "steps_per_epoch": 105}}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--study", default="ner_depth")
    p.add_argument("--profile", default="search")
    p.add_argument("--trainable", choices=("tagger", "synthetic"), default="tagger")
    p.add_argument(
        "--cache", help=f"MLflow store of the runs (default sqlite:///{CACHE}/mlflow.db)"
    )
    p.add_argument(
        "--ledger",
        help=f"the committed copy of the cache's trials (default {LEDGER.relative_to(REPO)}; "
        "synthetic: none); 'none': the store alone",
    )
    p.add_argument("--refresh", action="store_true", help="retrain the cached runs")
    p.add_argument(
        "--grid-only",
        action="store_true",
        help="build (or read) the dense grid and stop: what bench/search_tabular.py replays",
    )
    p.add_argument(
        "--test-curves",
        action="store_true",
        help="retrain the grid runs whose trials did not score test at every evaluation "
        "(trained before eval_test_each_time), for bench/search_tabular.py; the contenders stand",
    )
    p.add_argument(
        "--estimate",
        action="store_true",
        help="say what the cache holds and what training the rest would cost; train nothing",
    )
    p.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "search_efficiency")
    p.add_argument("--grid-lrs", type=int, help="dense grid points (default 12; synthetic 10)")
    p.add_argument("--grid-seeds", type=int, nargs="+", default=[1000, 1001, 1002])
    p.add_argument(
        "--grid-lrs-per-run", type=int,
        help="grid lrs per study run, each cached as it ends (default 1; synthetic: all)",
    )  # fmt: skip
    p.add_argument("--beyond", type=float, help="decades past each end of the range (0.5)")
    p.add_argument(
        "--grid-range", type=float, nargs=2, metavar=("LOW", "HIGH"),
        help="the dense grid's lr range, holding the study's (default: the study's range "
        "widened by --beyond decades at each end)",
    )  # fmt: skip
    p.add_argument("--repetitions", type=int, help="per contender (default 5; synthetic 2)")
    p.add_argument("--contenders", nargs="+", choices=list(CONTENDERS), default=list(CONTENDERS))
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a study override for every run, grid and contenders (in the key)",
    )
    p.add_argument("--num-cpus", type=int, help="Ray's CPUs (default: all)")
    p.add_argument("--epoch-s", type=float, help="seconds per trial-epoch for the estimate")
    args = p.parse_args(argv)
    small = args.trainable == "synthetic"  # a check of the machinery: minutes, not hours
    # none of them given: a complete cached grid of this key is the reference (grid_lrs)
    args.grid_chosen = any(v is not None for v in (args.grid_lrs, args.beyond, args.grid_range))
    args.beyond = 0.5 if args.beyond is None else args.beyond
    args.grid_lrs = (10 if small else 12) if args.grid_lrs is None else args.grid_lrs
    args.repetitions = (2 if small else 5) if args.repetitions is None else args.repetitions
    if args.estimate and args.refresh:
        p.error("--estimate trains nothing, so it cannot --refresh")
    if args.ledger is None:
        args.ledger = None if small else LEDGER
    else:
        args.ledger = None if args.ledger == "none" else Path(args.ledger)
    if args.grid_lrs < 2 or args.repetitions < 1:
        p.error("--grid-lrs must be >= 2 and --repetitions >= 1")
    if args.grid_lrs_per_run is not None and args.grid_lrs_per_run < 1:
        p.error("--grid-lrs-per-run must be >= 1")
    return args


def texts(overrides: dict) -> list[str]:
    """`--set` texts of a mapping, values as JSON (which YAML reads back unchanged)."""
    return [f"{key}={json.dumps(value)}" for key, value in overrides.items()]


def ledger_text(args) -> str:
    return f" and ledger {args.ledger}" if args.ledger else ""


def base_overrides(args) -> list[str]:
    synthetic = {"trainable": SURFACE, "model": None, "data": None}
    return [*texts(synthetic if args.trainable == "synthetic" else {}), *args.set]


def runner(args, uri: str, storage: Path):
    """run(overrides) -> the study run's id: one run of the study, no report, overrides on top
    of the bench's own and `--set`'s."""

    def run(overrides: dict) -> str:
        start_ray(args.num_cpus)
        sets = [*base_overrides(args), *texts(overrides)]
        outcome = run_study(args.study, args.profile, sets, uri, storage=str(storage),
                            reports="none", num_cpus=args.num_cpus)  # fmt: skip
        return outcome.run_id

    return run


def searched_range(spec) -> tuple[float, float]:
    dist = spec.search.get("lr")
    if set(spec.search) != {"lr"} or not isinstance(dist, LogUniform) or spec.explore is None:
        raise UserInputError(f"{spec.path}: search_efficiency needs an explore phase that "
                             f"searches lr alone, loguniform; this study searches "
                             f"{sorted(spec.search) or 'nothing'}")  # fmt: skip
    if spec.explore.asha is None:
        raise UserInputError(f"{spec.path}: phases.explore has no asha; the contenders with "
                             "and without ASHA need its rungs")  # fmt: skip
    return float(dist.low), float(dist.high)


def grid_range(args, spec) -> tuple[float, float]:
    """The dense grid's lr range: `--grid-range`, which must hold the study's range, or the
    study's widened by `--beyond` decades at each end."""
    low, high = args.search_range
    if args.grid_range is None:
        return low / 10**args.beyond, high * 10**args.beyond
    grid_low, grid_high = args.grid_range
    if not (0 < grid_low <= low and high <= grid_high):
        raise UserInputError(f"--grid-range {grid_low:g} {grid_high:g} does not hold "
                             f"{spec.path}'s search range, lr {low:g} to {high:g}")  # fmt: skip
    return grid_low, grid_high


def cached_lrs(cached: pd.DataFrame) -> list[float]:
    return sorted(cached.lr.astype(float).unique())


def grid_lrs(args, arms, cached: pd.DataFrame) -> list[float]:
    """The dense grid's lrs: log-spaced over its range, or, where no grid flag was given, the
    lrs of this key's cached grid if it is complete, has at least `--grid-lrs` points and holds
    the study's range. A study whose range moved inside the grid keeps its reference."""
    spaced = grid.log_spaced(*args.grid_range, args.grid_lrs)
    if args.grid_chosen or args.refresh or not len(cached):
        return spaced
    held = cached_lrs(cached)
    low, high = args.search_range
    complete = not any(grid.missing_points(arms, held, cached, args.grid_seeds).values())
    if complete and len(held) >= args.grid_lrs and held[0] <= low and high <= held[-1]:
        return held
    return spaced


def reference(args, spec, uri: str, cache, key: str) -> pd.DataFrame:
    """The dense grid's curves, from the cache (runs tagged with the grid's `key`), trained
    first where points are missing."""
    if args.refresh:
        say(args, f"--refresh: {cache.forget(key)} cached run(s) set aside")
    arms = make_plan(spec).arms
    cached = grid.cached_trials(cache, key)
    lrs = grid_lrs(args, arms, cached)  # the cached grid's, before --test-curves
    if args.test_curves and not args.refresh and (curveless := cache.runs_without_test_curves(key)):
        if args.estimate:  # what training them again would cost: count them as missing
            gone = {r for run in curveless for r in cache.trials(run).run_id}
            cached = cached[~cached.run_id.isin(gone)] if len(cached) else cached
        else:
            cache.forget_runs(curveless)
            cached = grid.cached_trials(cache, key)
        say(
            args,
            f"--test-curves: {len(curveless)} grid run(s) without a test score at every "
            "evaluation " + ("would be" if args.estimate else "are") + " trained again",
        )
    missing = grid.missing_points(arms, lrs, cached, args.grid_seeds)
    todo = sum(len(v) for v in missing.values())
    points = len(arms) * len(lrs)
    say(args, f"grid cache {uri}{ledger_text(args)} (key {key}): {points - todo} of {points} "
        f"points cached ({len(lrs)} lrs, {lrs[0]:.3g} to {lrs[-1]:.3g}); --refresh retrains "
        "them all")  # fmt: skip
    if todo == points and len(cached):
        held = cached_lrs(cached)
        say(args, f"the cache holds this key's grid at other lrs ({len(held)}, {held[0]:.3g} "
            f"to {held[-1]:.3g}); without --grid-lrs, --beyond and --grid-range the bench "
            "uses it where it is complete and holds the study's range")  # fmt: skip
    elif todo == points and (others := cache.other_grid_keys(key)):
        say(args, f"the ledger has grid runs of other keys only ({', '.join(others)}): another "
            "precision, model, data, profile or seeds than this run's")  # fmt: skip
    if todo:
        cost.estimate_grid(args, spec, todo)
        if args.estimate:
            return None
        started = time.time()
        run = runner(args, uri, args.storage)

        def run_and_cache(overrides: dict) -> str:
            run_id = run(overrides)
            cache.keep(run_id, grid.KEY_TAG, key)
            lrs = [point["lr"] for point in overrides["phases"]["confirm"]["select"]]
            say(args, f"grid: lr {', '.join(f'{lr:g}' for lr in lrs)} cached "
                f"({time.time() - started:.0f} s since the grid started)")  # fmt: skip
            return run_id

        lrs_per_run = args.grid_lrs_per_run or (None if spec.synthetic else 1)
        grid.build_missing(arms, missing, args.grid_seeds, run_and_cache, lrs_per_run)
        say(args, f"grid: {todo} points trained in {time.time() - started:.0f} s")
    trials = grid.cached_trials(cache, key)
    curves = grid.curves(trials, lrs, spec.metric.name, spec.analysis.primary, args.grid_seeds)
    for point in curves[curves.seeds_completed < len(args.grid_seeds)].itertuples():
        say(args, f"grid {point.arm} lr {point.lr:g}: {point.seeds_completed} of "
            f"{len(args.grid_seeds)} seeds completed; left out of the curve")  # fmt: skip
    return curves


def start_ray(num_cpus: int | None) -> None:
    """One Ray for every study run (each run_study would start and stop its own), started at
    the first: a run that finds everything cached starts none."""
    import ray

    from study.progress.quiet import ray_init_options

    if ray.is_initialized():
        return
    ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level=logging.WARNING,
             object_store_memory=256 * 1024**2, **ray_init_options(False))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    uri = args.cache or f"sqlite:///{CACHE / 'mlflow.db'}"
    local = uri.startswith("sqlite:///")
    args.storage = (Path(uri.removeprefix("sqlite:///")).parent if local else CACHE) / "ray_results"
    try:
        spec = load_study(args.study, args.profile, overrides=base_overrides(args))
        args.search_range = searched_range(spec)  # refused before anything is written
        args.grid_range = grid_range(args, spec)
        for folder in (args.out, args.storage.parent):
            folder.mkdir(parents=True, exist_ok=True)
        say(args, machine_line("synthetic" if spec.synthetic else resolved_precision(spec)))
        if spec.synthetic:
            say(args, NOT_A_FINDING)
        cache = TrialCache(uri, args.ledger, spec.name, [spec.metric.name, spec.analysis.primary])
        if copied := cache.sync():
            say(args, f"ledger {args.ledger}: {copied} cached run(s) copied in from {uri}")
        key = grid.cache_key(spec, args.grid_seeds)  # hashes the model and data files: once
        curves = reference(args, spec, uri, cache, key)
        if args.grid_only:
            say(args, f"--grid-only: the grid is {'not ' if curves is None else ''}cached; "
                "no contender trained")  # fmt: skip
            return 0
        if args.estimate:
            estimate_missing(args, spec, cache, key)
            return 0
        reps = run_contenders(args, spec, runner(args, uri, args.storage), cache, key, curves)
    except UserInputError as err:
        print(f"search_efficiency: {err}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, StudyStopped) as err:
        stopped = "interrupted" if isinstance(err, KeyboardInterrupt) else "a study run stopped"
        again = "this same bench command" + (" without --refresh" if args.refresh else "")
        print(f"search_efficiency: {stopped}; run {again} to go on from its "
              "cache. The study run that was training is not in the cache: ignore the study's "
              "resume command above, whose result the bench would not find",
              file=sys.stderr)  # fmt: skip
        return 130
    table, sign = summary(reps, args.trainable), 1.0 if spec.metric.mode == "max" else -1.0
    resolution = floors(args, curves, sign)  # the grid's own floor, a simulation: once
    print_table(args, table, curves, sign, resolution)
    write_outputs(args, table, reps, curves, resolution)
    return 0


if __name__ == "__main__":
    sys.exit(main())
