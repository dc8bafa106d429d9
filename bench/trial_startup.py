"""What does a trial pay before it trains? Three figures, side by side in one run:

  cold worker:   a fresh interpreter doing what a Ray worker does for a trial (import ray, Ray
                 Tune and `trainables.tune_adapter`, build the trial `new_trial` builds) up to
                 the end of its first optimizer step, by stage: Ray's imports (with the
                 trainable's module), the trainer's (torch, transformers), the trial's build
                 (the model, its lazy imports, the data), the step. Wall and CPU seconds
                 (CPU: what the wall would be alone on a core), least of `--rounds`.
  warm worker:   on a local Ray of one CPU, `--trials` trials of one experiment run one after
                 another with `reuse_actors` as a study's phase runs them (study/execution/
                 tuner.py): the seconds from one trial's end to the next one's first report,
                 for each trial that ran in the worker process (pid) before it.
  phase change:  a second experiment after the first, as a study's next phase: the seconds
                 from the first experiment's last trial's end to the second's first report
                 (the first one's end, a new Tuner, a new worker process and its imports).

Beside them, the first experiment's own cold start (from `Tuner.fit` to its first report)
and the ratios warm / cold and phase change / cold, each measured in this run. A first
report is one step and one dev evaluation (`eval_every: 1`); on the default tiny model and
corpus both take milliseconds, so it is the start that is measured. Targets (issue 51): warm
start and phase change each <= 5 s on the CI machine.

    ./with-venv python bench/trial_startup.py [--trials 3] [--rounds 3]
    ./with-venv python bench/trial_startup.py --model minilm   # the study's encoder

It prints the CPU and the precision it ran with first. On a machine shared with other work
only the CPU seconds and the ratios mean anything, and those only roughly.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from support import trial_machine_line

REPO = Path(__file__).resolve().parent.parent

# the cold worker's script: argv[1] the trial settings, argv[2] the time its parent started it
COLD_WORKER = """
import json, sys, time
spawned = float(sys.argv[2])
cpu = time.process_time
import ray
from ray import tune
import trainables.tune_adapter
from trainables.settings.config import TrialConfig
from trainables.training.trials import new_trial
ray_done, ray_cpu = time.time(), cpu()
import trainables.training.train  # what new_trial imports first for the tagger
imported, imported_cpu = time.time(), cpu()
trial = new_trial(TrialConfig.from_dict(json.loads(sys.argv[1])))
built, built_cpu = time.time(), cpu()
try:
    next(iter(trial.run()))  # fail_at_step 2 stops it as the second step begins
except RuntimeError as err:
    assert "fail_at_step" in str(err), err
stepped, stepped_cpu = time.time(), cpu()
print(json.dumps({
    "Ray imports": [ray_done - spawned, ray_cpu],
    "trainer imports": [imported - ray_done, imported_cpu - ray_cpu],
    "build": [built - imported, built_cpu - imported_cpu],
    "first step": [stepped - built, stepped_cpu - built_cpu],
    "to first step": [stepped - spawned, stepped_cpu],
}))
"""

SENTENCES = [
    [("john", "B-PER"), ("smith", "I-PER"), ("lives", "O"), ("in", "O"), ("paris", "B-LOC")],
    [("the", "O"), ("united", "B-ORG"), ("nations", "I-ORG"), ("met", "O"), (".", "O")],
    [("mary", "B-PER"), ("visited", "O"), ("new", "B-LOC"), ("york", "I-LOC")],
]


def tiny_corpus(folder: Path, sentences: int = 48) -> dict[str, str]:
    """A small CoNLL corpus: a trial's data load here is milliseconds, as its evaluation is."""
    text = "\n\n".join(
        "\n".join(f"{w}\t{t}" for w, t in SENTENCES[i % len(SENTENCES)]) for i in range(sentences)
    )
    out = {}
    for split in ("train", "dev", "test"):
        (folder / f"{split}.txt").write_text(text + "\n")
        out[split] = str(folder / f"{split}.txt")
    return out


def cold_worker(config: dict, rounds: int) -> dict[str, tuple[float, float]]:
    """Each stage's least wall and CPU seconds over `rounds` fresh interpreters."""
    settings = json.dumps(config | {"fail_at_step": 2, "eval_every": 10**6})
    runs = []
    for _ in range(rounds):
        started = time.time()
        done = subprocess.run(
            [sys.executable, "-c", COLD_WORKER, settings, repr(started)],
            cwd=REPO, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            sys.exit(f"the cold worker failed:\n{done.stderr[-3000:]}")
        runs.append(json.loads(done.stdout.splitlines()[-1]))
    return {
        stage: (min(r[stage][0] for r in runs), min(r[stage][1] for r in runs)) for stage in runs[0]
    }


class Timeline:
    """Driver-side times of one experiment: when `fit` began, each trial's first report, end
    and worker pid. A Tune callback (made by `callback`, which imports Ray)."""

    def __init__(self) -> None:
        self.fit_started = 0.0
        self.first: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.pid: dict[str, int] = {}

    def callback(self):
        from ray import tune

        timeline = self

        class Recorder(tune.Callback):
            def on_trial_result(self, iteration, trials, trial, result, **info):
                timeline.first.setdefault(trial.trial_id, time.monotonic())
                timeline.pid.setdefault(trial.trial_id, int(result["pid"]))

            def on_trial_complete(self, iteration, trials, trial, **info):
                timeline.ended[trial.trial_id] = time.monotonic()

        return Recorder()

    def order(self) -> list[str]:
        return sorted(self.first, key=self.first.get)


def experiment(config: dict, trials: int, storage: Path, name: str) -> Timeline:
    """`trials` trials (seeds 1..trials) of `config` through the study's trainable, one at a
    time in reused workers, as a study's phase runs them."""
    from ray import tune

    from trainables.settings import TRIAL_CONFIG
    from trainables.tune_adapter import train_tagger

    timeline = Timeline()
    seeds = [config | {"seed": seed} for seed in range(1, trials + 1)]
    tuner = tune.Tuner(
        train_tagger,
        param_space={TRIAL_CONFIG: tune.grid_search(seeds)},
        tune_config=tune.TuneConfig(reuse_actors=True, max_concurrent_trials=1),
        run_config=tune.RunConfig(
            name=name, storage_path=str(storage), callbacks=[timeline.callback()], verbose=0
        ),
    )
    timeline.fit_started = time.monotonic()
    results = tuner.fit()
    if results.errors:
        sys.exit(f"{name}: a trial failed: {results.errors[0]}")
    return timeline


def warm_starts(timeline: Timeline) -> list[float]:
    """Seconds from a trial's end to the next one's first report, where the next one ran in a
    worker process that had run a trial before."""
    order, seen, out = timeline.order(), set(), []
    for before, trial in zip(order, order[1:], strict=False):
        seen.add(timeline.pid[before])
        if timeline.pid[trial] in seen:
            out.append(timeline.first[trial] - timeline.ended[before])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3, help="trials per experiment (>= 2)")
    parser.add_argument("--rounds", type=int, default=3, help="cold-worker interpreters")
    parser.add_argument("--model", default="tiny", help="the trials' model (default tiny)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trial_startup_") as scratch:
        folder = Path(scratch)
        config = {
            "model": args.model, "data": tiny_corpus(folder), "epochs": 1, "batch_size": 8,
            "max_length": 32, "eval_every": 1, "threads": 1, "dynamics": "off", "precision": "auto",
        }  # fmt: skip
        print(trial_machine_line(config), flush=True)
        started = time.process_time() + _children_cpu()
        cold = cold_worker(config, args.rounds)
        print(f"cold worker, least of {args.rounds} fresh interpreters (wall s, CPU s):")
        for stage, (wall, cpu) in cold.items():
            print(f"  {stage:16s} {wall:7.2f} {cpu:7.2f}")

        import ray

        from study.progress.quiet import quiet_driver, quiet_ray_start, ray_init_options

        quiet_driver(verbose=False)  # as a study's driver and workers run: Tune's plain output
        with quiet_ray_start(verbose=False):
            ray.init(num_cpus=1, include_dashboard=False, **ray_init_options(verbose=False))
        try:
            first = experiment(config, args.trials, folder / "ray", "first")
            second = experiment(config, args.trials, folder / "ray", "second")
        finally:
            ray.shutdown()
        used = time.process_time() + _children_cpu() - started
    report(first, second, used)


def report(first: Timeline, second: Timeline, cpu: float) -> None:
    cold = first.first[first.order()[0]] - first.fit_started
    warm = warm_starts(first) + warm_starts(second)
    change = second.first[second.order()[0]] - max(first.ended.values())
    pids = [len(set(t.pid.values())) for t in (first, second)]
    print(f"workers: {pids[0]} and {pids[1]} pid(s) ran the two experiments' trials")
    print(f"cold start (Tuner.fit to first report):    {cold:7.2f} s")
    if not warm:
        print("warm start: no trial ran in a worker that had run one (reuse_actors did not apply)")
    else:
        median, each = statistics.median(warm), ", ".join(f"{w:.2f}" for w in warm)
        print(f"warm start (end to next first report):      {median:7.2f} s median of "
              f"{len(warm)} ({each}); warm / cold {median / cold:.3f}")  # fmt: skip
    print(f"phase change (last end to next first report): {change:7.2f} s; "
          f"phase change / cold {change / cold:.3f}")  # fmt: skip
    print(f"this process and its children used {cpu:.1f} CPU s (Ray's own processes not counted)")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
