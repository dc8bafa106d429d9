"""What does orchestration cost? The same trials, side by side in one run:

  plain:  each trial's config trained by `trainables.training.train.Trial` in a pool of C worker
          processes (no Ray, no MLflow): the pure training time at concurrency C;
  study:  `python -m study.run` on a study file holding exactly those trials (confirm phase
          only, so no pruning changes the work), with Ray Tune and MLflow tracking.

Prints both wall times, their ratio (target <= 1.05) and the extra seconds per trial. The
study's extra time is mostly fixed (driver imports, MLflow store, Ray start, the first wave of
worker processes) plus a second or two per trial (checkpoints, reports), so the ratio depends
on trial length. By default each trial is a trial of the README's first command (`ner_depth`,
default profile: all of WNUT-16, batch 16, an evaluation every 53 steps, trained until dev F1
levels off; about two and a half minutes here); the options make shorter ones. The study runs
them as confirm trials, which checkpoint at most once a minute (`phases.confirm.
checkpoint_every_s`). Uses the embedded MiniLM + WNUT-16.

This VM's speed drifts by several percent over minutes (plain trials' median tokens/s differed
by 8% between two runs an hour apart), which one plain run and one study run after it cannot
tell from overhead; `--rounds 2` runs plain, study, study, plain and gives the ratio of the
sums, so a steady drift weighs on both sides alike.

    ./with-venv python bench/study_overhead.py [--trials-per-arm 3]
    ./with-venv python bench/study_overhead.py --rounds 2   # plain, study, study, plain
    ./with-venv python bench/study_overhead.py --fraction 0.3 --eval-every 0   # ~70 s trials
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

from study.plan import make_plan
from study.precision import resolved_precision
from study.search import confirm_configs
from study.spec import StudySpec, load_study

REPO = Path(__file__).resolve().parent.parent


def default_profile_settings(spec: StudySpec) -> dict:
    """The trial settings of the README's first command (`spec`: `ner_depth`, default profile),
    so the benchmark's trials are as long, and evaluate and checkpoint as often, as that
    study's."""
    return {**spec.fixed, "data_fraction": spec.grid["data_fraction"][0]}


def study_file(folder: Path, seeds: int, settings: dict) -> Path:
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
    for result in storage.glob("*/*/confirm/*/result.json"):
        rows = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
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
        if text.startswith("phase confirm:") and stamps["phase"] is None:
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
    parser.add_argument("--trials-per-arm", type=int, default=3, help="seeds per arm")
    parser.add_argument("--fraction", type=float, help="training data fraction")
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--eval-every", type=int, help="steps between evaluations (0: per epoch)")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument(
        "--rounds", type=int, choices=[1, 2], default=1,
        help="2: plain, study, study, plain, so a machine drifting in speed weighs on both alike",
    )  # fmt: skip
    parser.add_argument("--study-only", action="store_true", help="skip the plain run (no ratio)")
    args = parser.parse_args()
    spec = load_study("ner_depth", "default")
    print(machine_line(resolved_precision(spec)))
    settings = default_profile_settings(spec)
    given = {"data_fraction": args.fraction, "epochs": args.epochs,
             "batch_size": args.batch_size, "eval_every": args.eval_every}  # fmt: skip
    settings.update({k: v for k, v in given.items() if v is not None})
    if not settings["eval_every"]:
        settings.pop("eval_every")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = study_file(folder, args.trials_per_arm, settings)
        spec = load_study(str(path), "default")
        plan = make_plan(spec)
        chosen = {arm.id: [{}] for arm in plan.arms}
        configs = [c["trial"] for c in confirm_configs(spec, plan.arms, chosen)]
        shown = ", ".join(f"{k} {v}" for k, v in sorted(settings.items()))
        print(f"{len(configs)} trials of MiniLM on WNUT-16 ({shown}), {args.concurrency} at a time")
        if args.study_only:
            study_wall(path, folder / "study", args.concurrency)
            return
        order = ["plain", "study", "study", "plain"] if args.rounds == 2 else ["plain", "study"]
        walls: dict[str, list[float]] = {"plain": [], "study": []}
        for n, side in enumerate(order):
            if side == "plain":
                wall, trial_sum = plain_wall(configs, args.concurrency)
                print(f"plain trainables: wall {wall:.1f} s (sum of trial times {trial_sum:.1f} s)")
            else:
                wall = study_wall(path, folder / f"study{n}", args.concurrency)
            walls[side].append(wall)
        plain, study = sum(walls["plain"]), sum(walls["study"])
        extra = (study - plain) / len(walls["study"])
        print(f"study adds {extra:.1f} s a run, {extra / len(configs):.1f} s per trial")
        if len(walls["plain"]) > 1:
            rounds = ", ".join(
                f"{s / p:.3f}" for s, p in zip(walls["study"], walls["plain"], strict=True)
            )
            print(f"study / plain, each study beside the plain run next to it: {rounds}")
        print(f"overhead ratio study / plain: {study / plain:.3f} (target <= 1.05)")


if __name__ == "__main__":
    main()
