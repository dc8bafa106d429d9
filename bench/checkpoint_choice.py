"""Which checkpoint should score test at the shipped budget (issue 47, item 1): the last
evaluation, or the one of best dev? Measured on a study run whose trials scored test at every
evaluation (`eval_test_each_time`), on seeds that are no study's confirm seeds (1000-1002 are
the dense grid's, which chose the shipped lr):

    ./with-venv python -m study.run ner_depth --set fixed.eval_test_each_time=true \\
        --set 'seeds=[1000,1001,1002,1003,1004,1005]' --set phases.confirm.seeds=6 \\
        --set phases.confirm.max_seeds=6 --reports none
    ./with-venv python bench/checkpoint_choice.py --study ner_depth

The dense grid (bench/search_tabular.py) asks the same question over every lr and budget once
its curves exist; this asks it of one design as shipped, the arms paired by seed as the study
pairs them. Per arm: the mean test F1 of each rule (best minus last is the bias), the sd over
seeds of each, and the sd of the paired differences against the first arm, which sets the
width of the primary interval; each with a bootstrap standard error over the seeds
(bench/tabular_checkpoint.py). The rule to ship gives the smaller paired sd at equal mean.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd
import search_evaluations as evaluations
from tabular_checkpoint import measure_scores
from tabular_grid import signed, trial_values

from study.results import load_trials
from trainables.errors import UserInputError


def say(text: str, error: bool = False) -> None:
    print(f"checkpoint_choice: {text}", file=sys.stderr if error else sys.stdout, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--study", default="ner_depth")
    p.add_argument("--tracking-uri", default="sqlite:///outputs/mlflow.db")
    p.add_argument("--run", help="the study run (default: the newest finished one)")
    p.add_argument("--metric", default="dev_f1", help="the study metric")
    p.add_argument("--mode", choices=("max", "min"), default="max")
    p.add_argument("--primary", default="test_f1")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap draws")
    p.add_argument("--out", help="write the table here as CSV")
    return p.parse_args(argv)


def scores_by_rule(
    joined: pd.DataFrame, metric: str, test: str, sign: float
) -> tuple[list[str], list[float], list[int], dict[str, np.ndarray]]:
    """Arms (in the order of the trials), their lrs, the seeds every arm ran, and per rule the
    [arm, seed] test scores of the checkpoint that rule keeps."""
    arms = list(dict.fromkeys(joined.arm))
    runs = joined.drop_duplicates("run_id")
    if runs.duplicated(["arm", "seed"]).any():
        raise ValueError("an arm ran a seed more than once (data seeds, or several samples per "
                         "arm): no one trial per arm and seed to pair")  # fmt: skip
    seeds = sorted(set.intersection(*(set(runs[runs.arm == a].seed) for a in arms)))
    if len(arms) < 2 or len(seeds) < 2:
        raise ValueError(f"{len(arms)} arm(s) sharing {len(seeds)} seed(s): at least 2 arms on "
                         "2 common seeds are needed")  # fmt: skip
    out = {}
    for rule in ("last", "best"):
        values = trial_values(joined, None, rule, metric, test, sign).set_index(["arm", "seed"])
        out[rule] = np.array([[values.loc[(a, s), "test"] for s in seeds] for a in arms])
    lrs = [float(joined[joined.arm == a].lr.iloc[0]) for a in arms]
    return arms, lrs, [int(s) for s in seeds], out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        trials = load_trials(args.tracking_uri, args.study, args.run)
    except UserInputError as error:
        say(str(error), error=True)
        return 2
    trials = trials[(trials.phase == "confirm") & (trials.status == "completed")]
    names = evaluations.curve_names(args.metric, args.primary)
    rows = evaluations.run_evaluations(args.tracking_uri, args.study, args.run or "", trials, names)
    test = names[-1]
    if test not in rows or rows[test].isna().all():
        say(
            f"the trials of {args.study} scored no {test} at their evaluations; run the study "
            "with --set fixed.eval_test_each_time=true",
            error=True,
        )
        return 2
    joined = evaluations.with_trials(rows, trials)
    sign = signed(args.mode)
    try:
        arms, lrs, seeds, scores = scores_by_rule(joined, args.metric, test, sign)
    except ValueError as error:
        say(str(error), error=True)
        return 2
    say(
        f"{args.study}: {len(arms)} arms x {len(seeds)} seeds {seeds}; test at the last "
        f"evaluation against the one of best {args.metric}; {args.resamples} bootstrap draws"
    )
    rng = np.random.default_rng([47, 1])
    table = measure_scores(arms, lrs, scores["last"], scores["best"], args.resamples, rng)
    shown = table.assign(lr=table.lr.map(lambda lr: f"{lr:.3g}"))
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
