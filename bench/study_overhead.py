"""What does orchestration cost? The same trials, side by side in one run:

  plain:  each trial's config trained by `trainables.training.train.Trial` in a pool of C worker
          processes (no Ray, no MLflow): the pure training time at concurrency C;
  study:  `python -m study.run` on a study file holding exactly those trials (confirm phase
          only unless --explore; never pruned, so no pruning changes the work), with Ray Tune
          and MLflow tracking.

Prints both wall times, their ratio (target <= 1.05) and the extra seconds per trial. The
study's extra time is mostly fixed (driver imports, MLflow store, Ray start, the first wave of
worker processes) plus a second or two per trial (checkpoints, reports), so the ratio depends
on trial length. By default each trial is a trial of the README's first command (`ner_depth`,
default profile: all of WNUT-16, batch 16, an evaluation every 53 steps, 630 optimizer steps;
about 6 trial-epochs, its lr); the options make shorter ones (`--steps`). The study runs
them as confirm trials, which checkpoint at most once a minute (`phases.confirm.
checkpoint_every_s`). Uses the embedded MiniLM + WNUT-16.

This VM's speed drifts by several percent over minutes (plain trials' median tokens/s differed
by 8% between two runs an hour apart), which one plain run and one study run after it cannot
tell from overhead; `--rounds 2` runs plain, study, study, plain and gives the ratio of the
sums, so a steady drift weighs on both sides alike.

    ./with-venv python bench/study_overhead.py [--trials-per-arm 3]
    ./with-venv python bench/study_overhead.py --rounds 2   # plain, study, study, plain
    ./with-venv python bench/study_overhead.py --fraction 0.3 --eval-every 0   # ~70 s trials
    ./with-venv python bench/study_overhead.py --explore --rounds 3   # explore and confirm

`--explore` measures a study of both phases, shaped like `ner_depth`'s searched design at a
reduced budget (issue 51, item 2; issue 47, item 3): explore trains 2 lrs per arm (given as
`start_from`, so the plain side knows them) on 2 seeds without ASHA, confirm the best lr of
each arm on `--trials-per-arm` held-out seeds. The plain side trains the same trials, explore's
and the lrs confirm chose (read from the first study's store). The sides alternate study,
plain, plain, study, study, plain, ...: `--rounds` pairs, each study beside the plain run next
to it, the spread of their ratios printed. It also prints explore's trial-seconds per
trial-epoch over confirm's, from the study's own trials (target <= 1.10).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing import get_context
from pathlib import Path

import yaml
from support import machine_line

from study.names import CONFIRM, EXPLORE, PHASES, TRIAL_CONFIG
from study.plan import make_plan, trial_config
from study.precision import resolved_precision
from study.results import load_trials
from study.search import confirm_configs
from study.spec import StudySpec, load_study

REPO = Path(__file__).resolve().parent.parent


def default_profile_settings(spec: StudySpec) -> dict:
    """The trial settings of the README's first command (`spec`: `ner_depth`, default profile),
    so the benchmark's trials are as long, and evaluate and checkpoint as often, as that
    study's."""
    return {**spec.fixed, "data_fraction": spec.grid["data_fraction"][0]}


EXPLORE_LRS = (1.0e-4, 1.78e-4)  # explore's samples: known, so the plain side trains them too
EXPLORE_SEEDS = 2


def study_file(folder: Path, seeds: int, settings: dict, explore: bool = False) -> Path:
    study = {
        "description": "orchestration overhead benchmark",
        "model": "minilm",
        "data": {"embedded": "wnut16"},
        "grid": {"depth": ["full", "full-1"]},
        "fixed": {"lr": 1.0e-4, **settings},
        "seeds": seeds,
        "phases": {"confirm": {"select": [{}], "seeds": seeds}},
        "resources": {"cpu": 1, "gpu": 0},
    }
    if explore:
        study["fixed"].pop("lr")
        study["search"] = {"lr": {"type": "loguniform", "low": min(EXPLORE_LRS),
                                  "high": max(EXPLORE_LRS)}}  # fmt: skip
        starts = [{"lr": lr} for lr in EXPLORE_LRS]
        study["phases"] = {
            "explore": {"samples": len(starts), "seeds": EXPLORE_SEEDS, "start_from": starts},
            "confirm": {"select": "best", "seeds": seeds},
        }
    path = folder / "overhead.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def train_one(config: dict) -> tuple[float, list[float]]:
    from trainables.settings.config import TrialConfig
    from trainables.training.train import Trial

    started = time.perf_counter()
    trial = Trial(TrialConfig.from_dict(config))
    speeds = [m["train_tokens_per_s"] for m in trial.run()]
    return time.perf_counter() - started, speeds


def plain_wall(configs: list[dict], concurrency: int) -> tuple[float, float]:
    started = time.perf_counter()
    with get_context("spawn").Pool(concurrency) as pool:
        done = pool.map(train_one, configs, chunksize=1)
    wall = time.perf_counter() - started
    print(f"plain trainables: train tokens/s {_spread([v for _, s in done for v in s])}")
    return wall, sum(t for t, _ in done)


def _spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.0f} (range {min(values):.0f}-{max(values):.0f})"


def explore_configs(spec: StudySpec) -> list[dict]:
    """Explore's trials as the study runs them: each arm, each known lr, each explore seed."""
    assert spec.explore is not None
    return [trial_config(spec, arm, {"lr": lr}, seed)
            for arm in make_plan(spec).arms for lr in EXPLORE_LRS
            for seed in spec.explore.seeds]  # fmt: skip


def chosen_lrs(folder: Path, study: str) -> dict[str, list[dict]]:
    """The lr confirm ran for each arm in the study whose store is in `folder`."""
    trials = load_trials(f"sqlite:///{folder / 'mlflow.db'}", study)
    confirm = trials[trials.phase == CONFIRM]
    return {arm: [{"lr": float(rows.lr.iloc[0])}] for arm, rows in confirm.groupby("arm")}


def trial_results(storage: Path) -> list[tuple[str, list[dict]]]:
    """Each trial's results as Tune recorded them (its result.json), with its phase."""
    out = []
    for result in sorted(storage.glob("*/*/*/*/result.json")):
        rows = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
        out.append((result.parent.parent.name, rows))
    return out


def phase_cost(storage: Path) -> dict[str, float]:
    """Per phase, the trial-seconds per trial-epoch inside Ray: the sum of each trial's
    time_total_s over the sum of the epochs it trained (its last result's)."""
    seconds = dict.fromkeys(PHASES, 0.0)
    epochs = dict.fromkeys(PHASES, 0.0)
    for phase, rows in trial_results(storage):
        if rows and phase in seconds:
            seconds[phase] += rows[-1]["time_total_s"]
            epochs[phase] += rows[-1]["epoch"]
    return {phase: seconds[phase] / epochs[phase] for phase in PHASES if epochs[phase]}


def study_wall(path: Path, folder: Path, concurrency: int) -> float:
    """Wall time of `study.run` on the study file, its state and reports under `folder`."""
    folder.mkdir()
    command = [
        sys.executable, "-m", "study.run", str(path), "--storage", str(folder / "ray"),
        "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}", "--num-cpus", str(concurrency),
        "--reports", str(folder / "reports"),
    ]  # fmt: skip
    clock, started = time.time(), time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"the study failed:\n{done.stderr[-3000:]}")
    print(timeline(done.stderr, clock, wall))
    print(f"sum of trial times inside Ray: {trial_time_sum(folder / 'ray'):.1f} s")
    print(f"study.run (Ray Tune + MLflow): wall {wall:.1f} s")
    return wall


def trial_time_sum(storage: Path) -> float:
    """Each trial's own time as Tune measured it (its last result's time_total_s)."""
    total, speeds = 0.0, []
    for _, rows in trial_results(storage):
        total += rows[-1]["time_total_s"] if rows else 0.0
        speeds += [r["train_tokens_per_s"] for r in rows if "train_tokens_per_s" in r]
    if speeds:
        print(f"study.run trials: train tokens/s {_spread(speeds)}")
    return total


def timeline(log: str, clock: float, wall: float) -> str:
    """Where the study's extra time goes, from the driver's own HH:MM:SS log lines: start-up
    until the phase begins, the trials, and the way out after the last trial finished."""
    day = time.localtime(clock)
    launched = day.tm_hour * 3600 + day.tm_min * 60 + day.tm_sec + clock % 1
    stamps = {"phase": None, "last": None}
    for line in log.splitlines():
        found = re.match(r"(\d\d):(\d\d):(\d\d) study[\w.]*: (.*)", line)
        if not found:
            continue
        h, m, sec, text = found.groups()
        at = (int(h) * 3600 + int(m) * 60 + int(sec) - launched) % 86400
        if text.startswith("phase ") and stamps["phase"] is None:
            stamps["phase"] = at
        if text.startswith("trial finished:"):
            stamps["last"] = at
    if None in stamps.values():
        return "study timeline: not found in its log"
    phase, last = stamps["phase"], stamps["last"]
    return (f"study timeline (1 s log resolution): start-up {phase:.0f} s, trials "
            f"{last - phase:.0f} s, after the last trial {wall - last:.0f} s")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials-per-arm", type=int, default=3, help="confirm seeds per arm")
    parser.add_argument("--fraction", type=float, help="training data fraction")
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--steps", type=int, help="optimizer steps per trial (budget: steps)")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--eval-every", type=int, help="steps between evaluations (0: per epoch)")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument(
        "--explore", action="store_true", help="a study of explore (2 lrs, 2 seeds) and confirm"
    )
    parser.add_argument(
        "--rounds", type=int, default=1,
        help="pairs: 2 runs plain, study, study, plain (explore: study first), so a machine "
        "drifting in speed weighs on both alike",
    )  # fmt: skip
    parser.add_argument("--study-only", action="store_true", help="skip the plain run (no ratio)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    spec = load_study("ner_depth", "default")
    print(machine_line(resolved_precision(spec)))
    settings = default_profile_settings(spec)
    given = {"data_fraction": args.fraction, "epochs": args.epochs,
             "batch_size": args.batch_size, "eval_every": args.eval_every}  # fmt: skip
    settings.update({k: v for k, v in given.items() if v is not None})
    if args.steps:
        settings["budget"] = {"steps": args.steps}
    if not settings["eval_every"]:
        settings.pop("eval_every")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = study_file(folder, args.trials_per_arm, settings, args.explore)
        spec = load_study(str(path), "default")
        plan = make_plan(spec)
        chosen = {arm.id: [{}] for arm in plan.arms}
        explored = explore_configs(spec) if args.explore else []
        configs = explored + [c[TRIAL_CONFIG] for c in confirm_configs(spec, plan.arms, chosen)]
        searched = {"lr"} if args.explore else set()
        shown = ", ".join(f"{k} {v}" for k, v in sorted(settings.items()) if k not in searched)
        phases = f"{len(explored)} explore + " if explored else ""
        print(f"{phases}{len(configs) - len(explored)} confirm trials of MiniLM on WNUT-16 "
              f"({shown}), {args.concurrency} at a time")  # fmt: skip
        if args.study_only:
            study_wall(path, folder / "study", args.concurrency)
            cost = phase_cost(folder / "study" / "ray")
            summarize({"plain": [], "study": []}, len(configs), [cost])
            return
        order = sides(args.rounds, study_first=args.explore)
        walls: dict[str, list[float]] = {"plain": [], "study": []}
        costs: list[dict[str, float]] = []
        for n, side in enumerate(order):
            if side == "plain":
                wall, trial_sum = plain_wall(configs, args.concurrency)
                print(f"plain trainables: wall {wall:.1f} s (sum of trial times {trial_sum:.1f} s)")
            else:
                wall = study_wall(path, folder / f"study{n}", args.concurrency)
                costs.append(phase_cost(folder / f"study{n}" / "ray"))
                if explored:
                    picked = chosen_lrs(folder / f"study{n}", path.stem)
                    if n == 0:
                        confirmed = confirm_configs(spec, plan.arms, picked)
                        configs = explored + [c[TRIAL_CONFIG] for c in confirmed]
                        chosen = picked
                    elif picked != chosen:
                        print(f"this study chose {picked}, the first {chosen}: not the same work")
            walls[side].append(wall)
        summarize(walls, len(configs), costs)


def sides(rounds: int, study_first: bool) -> list[str]:
    """The order of the runs: pairs alternating which side comes first (ABBA...), the study
    first when the plain side needs to know what it chose."""
    first, second = ("study", "plain") if study_first else ("plain", "study")
    return [side for n in range(rounds) for side in ((first, second) if n % 2 == 0
                                                      else (second, first))]  # fmt: skip


def summarize(walls: dict[str, list[float]], trials: int, costs: list[dict[str, float]]) -> None:
    """The overhead ratio over all pairs, each pair's, and explore's cost per trial-epoch
    against confirm's in each study (a study-only run: that line alone)."""
    if walls["plain"]:
        plain, study = sum(walls["plain"]), sum(walls["study"])
        extra = (study - plain) / len(walls["study"])
        print(f"study adds {extra:.1f} s a run, {extra / trials:.1f} s per trial")
        ratios = [s / p for s, p in zip(walls["study"], walls["plain"], strict=True)]
        if len(ratios) > 1:
            print(f"study / plain, each study beside the plain run next to it: "
                  f"{', '.join(f'{r:.3f}' for r in ratios)} (range {min(ratios):.3f}-"
                  f"{max(ratios):.3f})")  # fmt: skip
        print(f"overhead ratio study / plain: {study / plain:.3f} (target <= 1.05)")
    both = [c for c in costs if set(PHASES) <= set(c)]
    if both:
        shown = ", ".join(
            f"{c[EXPLORE]:.1f} / {c[CONFIRM]:.1f} s = {c[EXPLORE] / c[CONFIRM]:.3f}" for c in both
        )
        print(f"explore's trial-seconds per trial-epoch over confirm's: {shown} (target <= 1.10)")


if __name__ == "__main__":
    main()
