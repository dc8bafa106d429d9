"""A kill soak: a synthetic study of thousands of trials whose driver is killed again and again
(SIGKILL to its whole process group, at random moments) and resumed with `--resume` after
each kill, while one worker node of its Ray runtime dies once; at the end the MLflow store
must hold every planned trial exactly once with its final metrics, no run still RUNNING,
and a report whose tables equal those of the same study run once without interruption.

    ./with-venv python bench/kill_soak.py --nodes 2 --epochs 1 --step-s 0   # docs/reliability.md
    ./with-venv python bench/kill_soak.py --trials 300 --kills 3 --nodes 2  # the test's version

The study is `trainable: synthetic` (trainables/settings/surface.py), confirm only: every arm
(`--arms` depths) on the same seeds at a fixed learning rate, `--epochs` evaluations of 10
steps per trial, each with a checkpoint, so the plan is a fixed list of trials and a trial
reports the same numbers however often it restarts. A searched explore phase would not do
here: Optuna's samples and ASHA's stops depend on the order results arrive in, which no two
runs share, killed or not.

The soak's Ray runtime is `ray start --head` (no CPUs: the driver's node) and `--nodes`
worker nodes of 2 CPUs each (bench/ray_nodes.py); the uninterrupted reference runs at the
same time beside it on its own head and one worker node, so that the node loss is the
soak's alone. Where each driver dies is drawn from `--seed` (`kill_points`): the first
once it has finished some trials, a later one either in its first seconds (start-up,
Tune's restore) or a fraction of a second after it finished a drawn number of trials, few
enough that the study is still unfinished at the last kill. The node dies during one of
the killed drivers, after a drawn number of its trials; the trials running there fail and
Ray runs them again on the other nodes (`max_failures`).

Prints the counts (kills, resumes, node losses, trials planned, trials in MLflow,
duplicates, lost, RUNNING left, report equal), the CPU and Ray node setup and the wall time;
exits 1 when a driver that was not killed exits with a status other than 0 (it crashed: a
driver the node loss or a kill leaves running must carry on), a trial is lost or duplicated,
an evaluation is logged twice, a run is left RUNNING or the reports differ.
tests/study/execution/test_kill_soak.py runs a short version, and checks that a crash fails.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import ray_nodes
import yaml
from soak_audit import NAMES, STUDY, audit, planned_trials, table_differences
from support import SYNTHETIC, machine_line

REPO = Path(__file__).resolve().parent.parent

DEPTHS = [12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]  # one arm each
FINISHED_LINE = b"study.tracking.callback: trial finished: "


def study_file(trials: int, arms: int, folder: Path, step_s: float, epochs: int) -> Path:
    """`arms` depths, each on `trials / arms` seeds (rounded up), confirm only."""
    if not 2 <= arms <= len(DEPTHS):
        sys.exit(f"--arms {arms}: expected 2..{len(DEPTHS)}")
    seeds = -(-trials // arms)
    study = {
        "description": f"kill soak: {arms * seeds} synthetic trials over {arms} arms",
        "trainable": {"synthetic": {"steps_per_epoch": 10, "step_s": step_s}},
        "metric": {"name": "dev_f1", "mode": "max"},
        "grid": {"depth": DEPTHS[:arms]},
        # each arm against the full depth: fewer comparisons than all pairs, a shorter report
        "compare": {"baseline": {"depth": DEPTHS[0]}},
        "fixed": {"epochs": epochs, "lr": 5.0e-5},
        "seeds": seeds,
        "phases": {"confirm": {"select": [{}], "seeds": seeds}},
        "resources": {"cpu": 1},
        "max_failures": 3,  # the trials of the lost node run again elsewhere
    }
    path = folder / f"{STUDY}.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


@dataclass
class Attempt:
    """One driver process: how it ended, after how long, and how many trials it finished."""

    killed: bool
    exit_code: int | None
    seconds: float
    finished: int


@dataclass(frozen=True)
class KillPoint:
    """When a driver is killed: `early_s` seconds after its start (in start-up or Tune's
    restore), or `jitter_s` after it finished `trials` more trials."""

    early_s: float | None = None
    trials: int = 0
    jitter_s: float = 0.0

    def __str__(self) -> str:
        if self.early_s is not None:
            return f"{self.early_s:.1f} s in"
        return f"{self.trials} trials + {self.jitter_s:.2f} s in"


@dataclass
class NodeLoss:
    node: object  # ray_nodes.Node
    attempt: int
    trials: int  # finished trials into that attempt
    done: bool = False


@dataclass
class Driver:
    """Runs `python -m study.run` on a cluster into one folder; its output goes to a log."""

    study: Path
    folder: Path
    cluster: object  # ray_nodes.RayCluster
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def log(self) -> Path:
        return self.folder / "driver.log"

    @property
    def uri(self) -> str:
        return f"sqlite:///{self.folder / 'mlflow.db'}"

    def command(self, resume: bool) -> list[str]:
        return [
            sys.executable, "-m", "study.run", str(self.study),
            "--address", self.cluster.address, "--storage", str(self.folder / "ray"),
            "--tracking-uri", self.uri, "--reports", str(self.folder / "reports"),
            *(["--resume"] if resume else []),
        ]  # fmt: skip

    def run(self, kill: KillPoint | None = None, loss: NodeLoss | None = None) -> Attempt:
        """One driver (with `--resume` after the first), SIGKILLed with its whole process
        group at `kill` unless it ends first; the node of `loss` dies on the way."""
        env = {**self.cluster.env, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        resume = bool(self.attempts)
        with self.log.open("a") as out:
            out.write(f"\n===== attempt {len(self.attempts)}{' (--resume)' * resume}\n")
            out.flush()
            progress = LogProgress(self.log, self.log.stat().st_size)
            started = time.monotonic()
            process = subprocess.Popen(
                self.command(resume), cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, killed whole
            )  # fmt: skip
        reached_at = None  # when the trial count of `kill` was reached
        killed = False
        try:
            while process.poll() is None:
                finished = progress.finished()
                if loss and not loss.done and finished >= loss.trials:
                    self.cluster.kill(loss.node)
                    loss.done = True
                    print(f"  node {loss.node.name} killed after {finished} trials of attempt "
                          f"{len(self.attempts)}", flush=True)  # fmt: skip
                now = time.monotonic()
                if kill is not None and kill.early_s is None and reached_at is None:
                    reached_at = now if finished >= kill.trials else None
                due = kill is not None and (
                    now - started >= kill.early_s
                    if kill.early_s is not None
                    else reached_at is not None and now - reached_at >= kill.jitter_s
                )
                if due:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                    killed = True
                    ray_nodes.kill_session(process.pid)  # anything that left its group
                    break
                time.sleep(0.05)
        finally:  # the bench itself stopped (Ctrl-C): its driver goes with it
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        attempt = Attempt(
            killed=killed,
            exit_code=process.returncode,
            seconds=time.monotonic() - started,
            finished=progress.finished(),
        )
        self.attempts.append(attempt)
        return attempt

    def report_folder(self) -> Path:
        return self.folder / "reports" / STUDY


class LogProgress:
    """The trials a driver finished, counted from its log as it grows (a trial that had
    finished before a restart and is only re-reported is not counted)."""

    def __init__(self, log: Path, offset: int):
        self.log, self.offset, self.count, self.rest = log, offset, 0, b""

    def finished(self) -> int:
        with self.log.open("rb") as text:
            text.seek(self.offset)
            chunk = text.read()
        self.offset += len(chunk)
        lines = (self.rest + chunk).split(b"\n")
        self.rest = lines.pop()
        self.count += sum(FINISHED_LINE in line for line in lines)
        return self.count


def kill_points(rng: random.Random, kills: int, planned: int) -> list[KillPoint]:
    """Where each driver dies. The first only once trials finish (before its first save,
    `--resume` has nothing to resume); a later one in its first seconds one time in four (in
    start-up or Tune's restore), else after a number of newly finished trials drawn up to
    `planned / (kills + 1)` and a fraction of a second more, so that the kills together
    leave the study unfinished (on average a third of it done) until the last resume."""
    points = []
    for index in range(kills):
        if index and rng.random() < 0.25:
            points.append(KillPoint(early_s=rng.uniform(0.5, 20.0)))
        else:
            points.append(KillPoint(trials=rng.randint(int(not index), planned // (kills + 1)),
                                    jitter_s=rng.uniform(0.0, 1.0)))  # fmt: skip
    return points


@dataclass
class Soak:
    kills: int = 0
    resumes: int = 0
    node_losses: int = 0
    wall_s: float = 0.0
    failed: str = ""


def soak(driver: Driver, points: list[KillPoint], loss: NodeLoss | None, resumes: int) -> Soak:
    """Kill the driver at each point and resume it, then resume until it ends by itself. A
    driver that ends by itself with a status other than 0 fails the soak at once: nothing but
    the kills may interrupt it (a lost node's trials run again elsewhere)."""
    result = Soak()
    started = time.monotonic()
    for index in range(len(points) + resumes):
        point = points[index] if index < len(points) else None
        here = loss if loss and loss.attempt == index else None
        attempt = driver.run(point, here)
        result.resumes += index > 0
        what = "killed" if attempt.killed else f"exit {attempt.exit_code}"
        print(f"  attempt {index}: {what} after {attempt.seconds:.1f} s, {attempt.finished} "
              f"trials finished", flush=True)  # fmt: skip
        if attempt.killed:
            result.kills += 1
        elif attempt.exit_code == 0:
            if index < len(points):
                result.failed = f"the study finished after {result.kills} of {len(points)} kills"
            break
        else:  # ended by itself, and not well: a crash between kills is what the soak looks for
            result.failed = (f"attempt {index} exited {attempt.exit_code} without being killed "
                             f"(a crash, not an interruption; see {driver.log})")  # fmt: skip
            break
    else:
        result.failed = f"the study did not finish in {resumes} resumes after the kills"
    result.node_losses = int(bool(loss and loss.done))
    result.wall_s = time.monotonic() - started
    return result


def run_reference(driver: Driver, outcome: dict) -> None:
    """The uninterrupted run, in a thread beside the soak (on its own Ray nodes)."""
    started = time.monotonic()
    attempt = driver.run()
    outcome.update(exit_code=attempt.exit_code, wall_s=time.monotonic() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=2000, help="trials (rounded up to arms)")
    parser.add_argument("--arms", type=int, default=10, help=f"arms, 2..{len(DEPTHS)}")
    parser.add_argument("--kills", type=int, default=8, help="driver kills, each resumed")
    parser.add_argument("--seed", type=int, default=0, help="seeds the kill moments")
    parser.add_argument("--nodes", type=int, default=3, help="worker nodes of 2 CPUs each")
    parser.add_argument("--no-node-loss", action="store_true", help="kill no worker node")
    parser.add_argument("--epochs", type=int, default=2,
                        help="evaluations per trial, each with a checkpoint")  # fmt: skip
    parser.add_argument("--step-s", type=float, default=0.01, help="seconds per trial step")
    parser.add_argument("--max-resumes", type=int, default=3,
                        help="resumes after the last kill before giving up")  # fmt: skip
    parser.add_argument("--worker-nice", type=int,
                        help="niceness of Ray's worker processes (Ray's default: 15)")  # fmt: skip
    parser.add_argument("--keep", help="keep the runs' folders here (default: removed)")
    parser.add_argument("--check", metavar="FOLDER",
                        help="only count and compare what a --keep run left there")  # fmt: skip
    args = parser.parse_args(argv)
    if args.kills < 1 or args.nodes < 1 + (not args.no_node_loss):
        parser.error("need --kills >= 1 and a node left after the node loss")
    print(machine_line(SYNTHETIC), flush=True)
    if args.check:
        root = Path(args.check)
        planned = planned_trials(root / "soak" / f"{STUDY}.yaml")
        return check(root, planned, Soak(), "(--check)", 0.0, time.monotonic())
    root = Path(args.keep or tempfile.mkdtemp(prefix="kill-soak-"))
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    started = time.monotonic()
    nice = {} if args.worker_nice is None else {"RAY_worker_niceness": str(args.worker_nice)}
    try:
        with contextlib.ExitStack() as stack:
            clusters = {}
            for name in ("reference", "soak"):
                (root / name).mkdir()
                clusters[name] = stack.enter_context(ray_nodes.ray_cluster(root / name, nice))
            workers = clusters["soak"].start_head_and_workers(args.nodes, num_cpus=2)
            clusters["reference"].start_head_and_workers(1, num_cpus=2)
            setup = (f"{os.cpu_count()} cores; soak on Ray: a head node of 0 CPUs (the "
                     f"driver's) and {args.nodes} worker nodes of 2 CPUs; the uninterrupted "
                     "reference beside it on its own head and 1 worker node of 2 CPUs")  # fmt: skip
            print(setup, flush=True)
            size = (args.trials, args.arms)
            drivers = {
                name: Driver(study_file(*size, root / name, args.step_s, args.epochs),
                             root / name, clusters[name])
                for name in clusters
            }  # fmt: skip
            planned = planned_trials(drivers["soak"].study)
            points = kill_points(rng, args.kills, len(planned))
            loss = None
            if not args.no_node_loss:
                during = [i for i, p in enumerate(points) if p.early_s is None]
                attempt = rng.choice(during)
                upto = max(1, points[attempt].trials)
                loss = NodeLoss(workers[-1], attempt, rng.randint(0, upto))
            print(f"kill points: {'; '.join(map(str, points))}; node loss: "
                  f"{f'{loss.trials} trials into attempt {loss.attempt}' if loss else 'none'}",
                  flush=True)  # fmt: skip
            reference: dict = {}
            thread = threading.Thread(target=run_reference, args=(drivers["reference"], reference))
            thread.start()
            outcome = soak(drivers["soak"], points, loss, args.max_resumes)
            thread.join()
        if reference.get("exit_code") != 0:
            print(f"the reference run failed (exit {reference.get('exit_code')}); see "
                  f"{drivers['reference'].log}")  # fmt: skip
            return 1
        return check(root, planned, outcome, setup, reference["wall_s"], started)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def check(root: Path, planned: set[str], outcome: Soak, setup: str, reference_s: float,
          started: float) -> int:  # fmt: skip
    """Print the counts; 0 when nothing is lost, duplicated or left RUNNING and the report
    equals the reference's."""
    soak_uri, reference_uri = (f"sqlite:///{root / name / 'mlflow.db'}" for name in NAMES)
    found = audit(soak_uri, planned)
    expected = audit(reference_uri, planned)
    differences = table_differences(*(root / name / "reports" / STUDY for name in NAMES))
    finals_differ = sum(
        1 for key, value in found.finals.items()
        if not np.allclose(value, expected.finals.get(key, (np.nan, np.nan)), rtol=1e-9)
    )  # fmt: skip
    equal = not differences and not finals_differ and not expected.lost
    total = time.monotonic() - started
    print(f"\nkills: {outcome.kills}\nresumes: {outcome.resumes}\n"
          f"node losses: {outcome.node_losses}\ntrials planned: {found.planned}\n"
          f"trials in MLflow: {found.in_mlflow}\nduplicates: {found.duplicates}\n"
          f"lost: {found.lost}\nRUNNING left: {found.running}\n"
          f"evaluations logged twice: {found.doubled_evaluations}\n"
          f"final metrics unlike the reference's: {finals_differ}\n"
          f"report equal: {'yes' if equal else 'no'}\nsetup: {setup}\n"
          f"wall time: soak {outcome.wall_s:.0f} s, reference {reference_s:.0f} s, "
          f"in all {total:.0f} s")  # fmt: skip
    for line in differences:
        print(f"  report difference: {line}")
    if outcome.failed:
        print(f"soak failed: {outcome.failed}")
    ok = not outcome.failed and equal and found.lost == found.duplicates == found.running == 0
    ok = ok and found.doubled_evaluations == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
