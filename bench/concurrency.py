"""On 2 cores, should trials run one at a time on 2 threads, or two at once on 1 thread each?

The study's default resources (`resources: {cpu: 1}` in search_spaces/ner_depth.yaml) make Ray
run 2 trials at once on a 2-core machine, each with threads = its cpu reservation = 1
(`study.plan.trial_config`). That should be the faster of the two: a MiniLM step is a chain of
small matrix products (rows = batch x padded width, a few hundred) that gain little from a
second thread, separated by element-wise ops, the optimizer and Python that mostly run on
one; two single-thread trials keep both cores busy all the time. This benchmark checks it on
the same work, side by side in one run:

  sequential  trial A, then trial B, each with threads=2
  parallel    trials A and B at once in two processes, threads=1 each

A and B are default-profile `ner_depth` trials (embedded MiniLM + WNUT-16, full data, depth
full, batch 16, max_length 128, eval_every 53, the profile's other fixed settings; seeds 0 and
1; lr --lr), cut at --max-steps so the benchmark takes minutes. Each trial is a fresh
`python -m trainables` process, so its wall time holds what a trial's does in a study:
start-up (imports, reading and encoding the data, loading the model), training, the dev
evaluations every eval_every steps, and the final dev/test scoring and layer dynamics.
Prints wall seconds per variant, trials per hour and the ratio.

`threads` bounds torch only; numpy's OpenBLAS (the SVDs of the layer dynamics) sizes its own
pool to all cores. Ray sets OMP_NUM_THREADS = a trial's cpu reservation in its workers, which
OpenBLAS also reads, so by default each trial process here gets OMP_NUM_THREADS and
OPENBLAS_NUM_THREADS = its threads, as in a study; `--blas-threads all` leaves them unset, as a
plain `python -m trainables` runs (two such trials at once oversubscribe the cores).

    ./with-venv python bench/concurrency.py [--max-steps 106] [--lr 1e-4] [--blas-threads trial]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from support import trial_machine_line

REPO = Path(__file__).resolve().parent.parent
STUDY = REPO / "search_spaces" / "ner_depth.yaml"
SEEDS = (0, 1)
CORES = 2


def default_trial(args, seed: int, threads: int) -> dict:
    """A default-profile trial of the study file: base `fixed` under the profile's `fixed`,
    the first value of each grid factor as the profile leaves it (full depth, full data)."""
    study = yaml.safe_load(STUDY.read_text())
    profile = study["profiles"]["default"]
    grid = study["grid"] | profile.get("grid", {})
    return {
        "model": args.model or study["model"],
        "data": study["data"],
        **study["fixed"],
        **profile.get("fixed", {}),
        **{factor: values[0] for factor, values in grid.items()},
        "lr": args.lr,
        "seed": seed,
        "threads": threads,
        "max_steps": args.max_steps,
        "budget": None,  # a fixed number of steps is the question, not a trial trained out
    }


def trial_env(threads: int, blas_threads: str) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        if blas_threads == "trial":
            env[name] = str(threads)
        else:
            env.pop(name, None)
    return env


def start_trial(
    config: dict, folder: Path, name: str, blas_threads: str
) -> tuple[subprocess.Popen, Path]:
    path, metrics = folder / f"{name}.yaml", folder / f"{name}.jsonl"
    path.write_text(yaml.safe_dump(config))
    command = [sys.executable, "-m", "trainables", "--config", str(path),
               "--metrics-out", str(metrics)]  # fmt: skip
    env = trial_env(config["threads"], blas_threads)
    with (folder / f"{name}.log").open("w") as log:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    return process, metrics


def wait_all(running: list[tuple[subprocess.Popen, Path]], started: float) -> list[dict]:
    """Each trial's wall seconds from `started` to its own exit (polled, so a trial that ends
    first is not charged for waiting on the other), and its final dev F1."""
    ended: dict[int, float] = {}
    try:
        while len(ended) < len(running):
            for i, (process, _) in enumerate(running):
                if i not in ended and process.poll() is not None:
                    ended[i] = time.perf_counter() - started
            time.sleep(0.05)
    finally:  # interrupted: end the trials this benchmark started, not leave them running
        for process, _ in running:
            if process.poll() is None:
                process.kill()
                process.wait()
    results = []
    for i, (process, metrics) in enumerate(running):
        if process.returncode != 0:
            log = metrics.with_suffix(".log").read_text()
            sys.exit(f"bench: a trial failed (exit {process.returncode}):\n{log[-2000:]}")
        final = json.loads(metrics.read_text().splitlines()[-1])
        results.append({"wall": ended[i], "dev_f1": final["dev_f1"]})
    return results


def run_variant(name: str, args, folder: Path) -> tuple[float, list[dict]]:
    """Wall seconds for both trials, and each trial's own wall and final dev F1."""
    threads = CORES if name == "sequential" else 1
    configs = {seed: default_trial(args, seed, threads) for seed in SEEDS}
    started = time.perf_counter()
    if name == "sequential":
        trials = []
        for seed, config in configs.items():
            began = time.perf_counter()
            running = [start_trial(config, folder, f"{name}-{seed}", args.blas_threads)]
            trials += wait_all(running, began)
    else:
        running = [
            start_trial(config, folder, f"{name}-{seed}", args.blas_threads)
            for seed, config in configs.items()
        ]
        trials = wait_all(running, started)
    return time.perf_counter() - started, trials


def warm_caches(model: str) -> None:
    """Import everything and read the model once, untimed, so neither variant pays for a cold
    page cache."""
    code = f"from trainables.model.tagger import load_encoder; load_encoder({model!r})"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-steps", type=int, default=106, help="per trial (2 evaluations)")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument(
        "--blas-threads",
        choices=("trial", "all"),
        default="trial",
        help="numpy/OpenBLAS threads of each trial: its `threads` (as under Ray) or all cores",
    )
    parser.add_argument("--model", help="instead of the study's (e.g. tiny, for a smoke check)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so wait_all ends the trials
    if os.cpu_count() != CORES:
        print(f"note: this machine has {os.cpu_count()} cores; the question is asked for {CORES}")
    config = default_trial(args, SEEDS[0], 1)
    print(trial_machine_line(config))
    print(f"{len(SEEDS)} default-profile ner_depth trials: {config['model']} on "
          f"{config['data']}, batch {config['batch_size']}, lr {args.lr:g}, eval_every "
          f"{config['eval_every']}, {args.max_steps} steps each, on {CORES} cores; "
          f"numpy/OpenBLAS threads: {args.blas_threads}")  # fmt: skip
    warm_caches(config["model"])
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("sequential", "parallel"):
            results[name] = run_variant(name, args, Path(tmp))
    labels = {"sequential": "1 at a time x 2 threads", "parallel": "2 at once x 1 thread"}
    print(f"{'variant':<26}{'wall s':>8}{'trials/hour':>13}   per trial: wall s, dev F1")
    for name, (wall, trials) in results.items():
        each = ", ".join(f"{t['wall']:.1f} s F1 {t['dev_f1']:.3f}" for t in trials)
        print(f"{labels[name]:<26}{wall:>8.1f}{len(trials) * 3600 / wall:>13.1f}   {each}")
    ratio = results["sequential"][0] / results["parallel"][0]
    faster = "2 at once x 1 thread" if ratio > 1 else "1 at a time x 2 threads"
    print(f"ratio wall sequential / parallel: {ratio:.2f} (> 1: the study's default, 2 at once "
          f"x 1 thread, is faster); faster here: {faster}")  # fmt: skip


if __name__ == "__main__":
    main()
