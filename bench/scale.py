"""What the driver and the tracking store cost as a study grows: synthetic studies of ~100,
~1,000 and ~10,000 trials over 10 and 100 arms on a Ray runtime of several nodes on this
machine, tracked into sqlite and into an MLflow server on PostgreSQL.

    ./with-venv python bench/scale.py                            # the default plan, ~14 minutes
    ./with-venv python bench/scale.py --sizes 100x10,1000x10 --stores sqlite

For each store and size it prints the driver's CPU seconds per result and per trial while the
trials ran (from the first phase's start to the last phase's end: imports, start-up and the
report are left out), results per second sustained over that time, the driver's peak memory,
the latency of the tracking store's `log_batch` calls (p50, p99, from the driver's timed
client, study/tracking/timing.py), the time `python -m study.report` takes on the finished
store, and how each grows from one size to the next. Targets: <= 20 ms of driver CPU per
result, growing <= 1.5x from 1,000 to 10,000 trials; a report of 10,000 trials in <= 60 s;
driver memory <= 2 GB. The driver itself makes no report (`--reports none`): the report is
timed on its own, and the driver's peak memory is the driver's.

The trials are `trainable: synthetic` (trainables/settings/surface.py) at 0 s per step: two
evaluations of 10 steps each (`--epochs`) unless ASHA stops them at the first, so the
driver, not the trials, is what is measured. The cluster is `ray start --head` (no CPUs: the
driver's node) and `--nodes` worker nodes of 2 CPUs each (bench/ray_nodes.py); PostgreSQL is
a throwaway cluster behind `mlflow server`, both on 127.0.0.1 (bench/servers.py,
bench/mlflow_server.py).

The default plan (`DEFAULT_PLAN`) is sized to finish within 15 minutes on 2 cores (about 14,
docs/scale.md has the arithmetic): sqlite at 1,000 and 10,000 trials over 10 arms (the growth
the target is about, and the report of 10,000 trials), PostgreSQL at 100 trials over 10 arms
and 1,000 over 100 (a REST call per write, so fewer results per second than sqlite; and the
report of 100 arms compared all-pairs, 900 pairs). The driver handles about 40 results a
second here, so at three evaluations per trial (the shape before 2026-11-25, `--epochs 3`)
10,000 trials alone took 10 minutes; two make about 1.6 results a trial instead of 2.3.
Fewer results per trial carry each trial's own cost (its run's creation, its worker, its
end) over fewer results, so CPU per result reads higher than at three: compare CPU per trial,
printed beside it, or run `--epochs 3`. `--sizes 10000x100 --stores sqlite` measures the
largest report (100 arms at 10,000 trials) on its own.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import mlflow_server
import numpy as np
import psutil
import ray_nodes
import servers
import yaml
from support import SYNTHETIC, machine_line

from study.tracking.timing import ENV as TIMES_ENV
from study.tracking.timing import read_times

REPO = Path(__file__).resolve().parent.parent

STUDY = "scale"
EPOCHS = 2  # evaluations per trial unless ASHA stops it at the first (see the docstring)
PHASE_START = re.compile(r"study\.execution\.tuner: phase explore: \d+ trials")
PHASE_END = re.compile(r"study\.execution\.tuner: phase confirm: trial states")
DEPTHS = [12, 11, 10, 9, 8, 7, 6, 5, 4, 3]
FRACTIONS = [1.0, 0.8, 0.6, 0.5, 0.4, 0.3, 0.2, 0.15, 0.1, 0.05]
RESULTS = """SELECT count(*) FROM metrics m JOIN runs r ON m.run_uuid = r.run_uuid
    JOIN experiments e ON r.experiment_id = e.experiment_id
    WHERE e.name = '{study}' AND m.key = 'dev_f1'"""
TRIALS = """SELECT count(*) FROM tags t JOIN runs r ON t.run_uuid = r.run_uuid
    JOIN experiments e ON r.experiment_id = e.experiment_id
    WHERE e.name = '{study}' AND t.key = 'run_kind' AND t.value = 'trial'"""


@dataclass(frozen=True)
class Size:
    trials: int
    arms: int

    @property
    def label(self) -> str:
        return f"{self.trials}x{self.arms}"


def parse_sizes(text: str) -> list[Size]:
    sizes = []
    for part in text.split(","):
        trials, _, arms = part.strip().partition("x")
        if int(arms) not in (10, 100):
            sys.exit(f"--sizes {part}: arms must be 10 or 100")
        sizes.append(Size(int(trials), int(arms)))
    return sizes


def study_file(size: Size, folder: Path, epochs: int = EPOCHS) -> Path:
    """About `size.trials` trials: 60% explore (samples x 2 seeds per arm, ASHA), 40% confirm;
    an evaluation per epoch."""
    samples = max(2, round(0.3 * size.trials / size.arms))
    confirm = max(2, round(0.4 * size.trials / size.arms))
    grid = {"depth": DEPTHS} if size.arms == 10 else {"depth": DEPTHS, "data_fraction": FRACTIONS}
    study = {
        "description": f"scale benchmark: {size.trials} synthetic trials over {size.arms} arms",
        "trainable": {"synthetic": {"steps_per_epoch": 10, "step_s": 0.0}},
        "metric": {"name": "dev_f1", "mode": "max"},
        "grid": grid,
        "search": {"lr": {"type": "loguniform", "low": 1.0e-5, "high": 1.0e-3}},
        "fixed": {"epochs": epochs},
        "seeds": confirm,
        "phases": {
            "explore": {
                "samples": samples,
                "seeds": 2,
                "asha": {"grace_period": 1, "reduction_factor": 3},
            },
            "confirm": {"select": "best", "seeds": confirm},
        },
        "resources": {"cpu": 1},
    }
    path = folder / f"{STUDY}.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


@dataclass
class Run:
    """What one driver run measured."""

    trials: int = 0
    results: int = 0
    cpu_s: float = 0.0  # driver CPU while the trials ran
    wall_s: float = 0.0
    total_cpu_s: float = 0.0
    peak_rss: int = 0
    writes: list[float] = field(default_factory=list)  # log_batch seconds
    report_s: float = 0.0
    failed: str = ""

    @property
    def cpu_per_result_ms(self) -> float:
        return 1e3 * self.cpu_s / max(1, self.results)

    @property
    def cpu_per_trial_ms(self) -> float:
        return 1e3 * self.cpu_s / max(1, self.trials)

    @property
    def results_per_s(self) -> float:
        return self.results / self.wall_s if self.wall_s else 0.0


class DriverWatch:
    """The driver process's CPU time when the trials start and end, read from its log lines as
    they come; its whole CPU time and peak memory from the kernel when it exits."""

    def __init__(self, process: subprocess.Popen):
        self.process = process
        self.proc = psutil.Process(process.pid)
        self.marks: dict[str, tuple[float, float]] = {}  # start/end -> (cpu s, wall s)
        self.lines: list[str] = []

    def _cpu(self) -> float:
        times = self.proc.cpu_times()
        return times.user + times.system

    def follow(self) -> tuple[int, float, int]:
        """Read the driver to its end: (exit code, CPU seconds, peak resident bytes)."""
        for line in self.process.stdout:
            self.lines.append(line)
            mark = "start" if "start" not in self.marks and PHASE_START.search(line) else None
            mark = "end" if PHASE_END.search(line) else mark
            if mark:
                with contextlib.suppress(psutil.Error):
                    self.marks[mark] = (self._cpu(), time.perf_counter())
        _, status, usage = os.wait4(self.process.pid, 0)
        self.process.returncode = os.waitstatus_to_exitcode(status)
        return self.process.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def run_driver(study: Path, folder: Path, uri: str, cluster_env: dict, address: str) -> Run:
    times = folder / "tracking_times.tsv"
    env = {**cluster_env, TIMES_ENV: str(times), "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    command = [
        sys.executable, "-m", "study.run", str(study), "--address", address,
        "--storage", str(folder / "ray"), "--tracking-uri", uri,
        "--reports", "none",  # the report is timed on its own below
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    watch = DriverWatch(process)
    code, total_cpu, peak = watch.follow()
    (folder / "driver.log").write_text("".join(watch.lines))
    run = Run(peak_rss=peak, total_cpu_s=total_cpu)
    if code != 0 or "start" not in watch.marks or "end" not in watch.marks:
        run.failed = f"driver exit {code}: {''.join(watch.lines[-5:]).strip()}"
        return run
    (cpu0, wall0), (cpu1, wall1) = watch.marks["start"], watch.marks["end"]
    run.cpu_s, run.wall_s = cpu1 - cpu0, wall1 - wall0
    run.writes = read_times(str(times)).get("log_batch", []) if times.is_file() else []
    return run


def count_trials_and_results(uri: str, database: str | None) -> tuple[int, int]:
    """Trial runs and dev_f1 evaluations recorded, counted in the store's database itself."""
    queries = [TRIALS.format(study=STUDY), RESULTS.format(study=STUDY)]
    if database is None:
        with contextlib.closing(sqlite3.connect(uri.removeprefix("sqlite:///"))) as db:
            trials, results = (db.execute(q).fetchone()[0] for q in queries)
    else:
        import psycopg

        with psycopg.connect(database) as db:
            trials, results = (db.execute(q).fetchone()[0] for q in queries)
    return trials, results


def time_report(uri: str, folder: Path, env: dict) -> float:
    env = {**env, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "study.report", STUDY, "--tracking-uri", uri,
               "--out", str(folder / "report")]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the report failed: {done.stderr[-1500:]}")
    return time.perf_counter() - started


@contextlib.contextmanager
def sqlite_store(folder: Path) -> Iterator[tuple[str, str | None]]:
    yield f"sqlite:///{folder / 'mlflow.db'}", None


@contextlib.contextmanager
def postgres_store(folder: Path) -> Iterator[tuple[str, str | None]]:
    with servers.postgres_cluster() as postgres:
        backend = postgres.create_database("mlflow", "tracker", "tracker-secret")
        with mlflow_server.mlflow_ui_server(backend, workdir=folder / "server") as url:
            yield url, backend


STORES = {"sqlite": sqlite_store, "postgres": postgres_store}
# What the default run measures, per store (see the module's docstring for why)
DEFAULT_PLAN = {"sqlite": "1000x10,10000x10", "postgres": "100x10,1000x100"}


def measure(store: str, size: Size, root: Path, cluster, epochs: int = EPOCHS) -> Run:
    folder = root / store / size.label
    folder.mkdir(parents=True)
    study = study_file(size, folder, epochs)
    with STORES[store](folder) as (uri, database):
        run = run_driver(study, folder, uri, cluster.env, cluster.address)
        if run.failed:
            return run
        run.trials, run.results = count_trials_and_results(uri, database)
        run.report_s = time_report(uri, folder, cluster.env)
    return run


def percentile_ms(values: list[float], q: float) -> float:
    return 1e3 * float(np.percentile(values, q)) if values else float("nan")


COLUMNS = [
    ("store", 8), ("trials x arms", 13), ("trials", 7), ("results", 8),
    ("CPU ms/result", 13), ("CPU ms/trial", 12), ("results/s", 9), ("peak MB", 8),
    ("write p50 ms", 12), ("write p99 ms", 12), ("report s", 8),
]  # fmt: skip


def row(store: str, size: Size, run: Run) -> list[str]:
    if run.failed:
        return [store, size.label, run.failed[:120]]
    return [
        store, size.label, str(run.trials), str(run.results),
        f"{run.cpu_per_result_ms:.1f}", f"{run.cpu_per_trial_ms:.1f}",
        f"{run.results_per_s:.1f}", f"{run.peak_rss / 2**20:.0f}",
        f"{percentile_ms(run.writes, 50):.1f}", f"{percentile_ms(run.writes, 99):.1f}",
        f"{run.report_s:.1f}",
    ]  # fmt: skip


def growth_rows(store: str, measured: list[tuple[Size, Run]]) -> list[str]:
    """Each measure's ratio from one size to the next larger one."""
    lines = []
    done = [(s, r) for s, r in measured if not r.failed]
    for (small, a), (large, b) in zip(done, done[1:], strict=False):
        ratios = {
            "CPU/result": b.cpu_per_result_ms / a.cpu_per_result_ms,
            "CPU/trial": b.cpu_per_trial_ms / a.cpu_per_trial_ms,
            "results/s": b.results_per_s / a.results_per_s if a.results_per_s else float("nan"),
            "peak memory": b.peak_rss / a.peak_rss,
            "write p50": percentile_ms(b.writes, 50) / percentile_ms(a.writes, 50),
            "report": b.report_s / a.report_s,
        }
        shown = ", ".join(f"{name} {value:.2f}x" for name, value in ratios.items())
        lines.append(f"{store} {small.label} -> {large.label}: {shown}")
    return lines


def table(rows: list[list[str]]) -> str:
    header = "| " + " | ".join(name for name, _ in COLUMNS) + " |"
    rule = "|" + "|".join("---" for _ in COLUMNS) + "|"
    return "\n".join([header, rule, *("| " + " | ".join(r) + " |" for r in rows)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", help="trials x arms (arms 10 or 100), comma-separated, for "
                        "every store (default: each store's sizes in DEFAULT_PLAN)")  # fmt: skip
    parser.add_argument("--stores", default=",".join(DEFAULT_PLAN),
                        help="sqlite and/or postgres")  # fmt: skip
    parser.add_argument("--epochs", type=int, default=EPOCHS,
                        help="evaluations per trial (3 before 2026-11-25)")  # fmt: skip
    parser.add_argument("--nodes", type=int, default=3, help="worker nodes of 2 CPUs each")
    parser.add_argument("--keep", help="keep the studies' folders here (default: removed)")
    args = parser.parse_args()
    print(machine_line(SYNTHETIC), flush=True)
    stores = [s.strip() for s in args.stores.split(",")]
    if unknown := set(stores) - set(STORES):
        sys.exit(f"--stores: {', '.join(sorted(unknown))} unknown; use sqlite and/or postgres")
    plan = {store: parse_sizes(args.sizes or DEFAULT_PLAN[store]) for store in stores}
    if "postgres" in stores and servers.postgres_unavailable_reason():
        print(f"skipping postgres: {servers.postgres_unavailable_reason()}")
        stores.remove("postgres")
    root = Path(args.keep or tempfile.mkdtemp(prefix="scale-"))
    root.mkdir(parents=True, exist_ok=True)
    rows, growth = [], []
    started = time.perf_counter()
    with ray_nodes.ray_cluster(root) as cluster:
        cluster.start_head_and_workers(args.nodes, num_cpus=2)
        print(f"Ray: head + {args.nodes} worker nodes of 2 CPUs at {cluster.address}")
        for store in stores:
            measured = []
            for size in plan[store]:
                run = measure(store, size, root, cluster, args.epochs)
                measured.append((size, run))
                rows.append(row(store, size, run))
                print(" ".join(rows[-1]), flush=True)
            growth += growth_rows(store, measured)
    print(f"\nall sizes in {time.perf_counter() - started:.0f} s "
          f"({os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f})\n")  # fmt: skip
    print(table(rows))
    print("\ngrowth from one size to the next:")
    print("\n".join(f"- {line}" for line in growth) or "- (one size only)")
    print("\ntargets: CPU <= 20 ms/result, growing <= 1.5x from 1,000 to 10,000 trials; "
          "report of 10,000 trials <= 60 s; peak driver memory <= 2048 MB")  # fmt: skip
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
