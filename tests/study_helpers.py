"""Helpers for tests that run whole studies: a study file on the tiny model, the driver as a
real subprocess (run to its end, or started, read, and killed) or in this process (for a
command that ends before anything starts), and readers of the MLflow store it wrote."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml
from mlflow.tracking import MlflowClient
from ray_nodes import kill_session

REPO = Path(__file__).resolve().parent.parent


def write_study(folder: Path, model: str, corpus: dict[str, str], **overrides: Any) -> Path:
    """A 2-arm study on the tiny model: explore 2 samples x 2 seeds with ASHA, confirm 2 seeds."""
    return _write_two_arm_study(folder, {"model": model, "data": dict(corpus)}, overrides)


# write_study's study on the synthetic trainable, for the tests of the driver that read nothing
# of a model (docs/testing.md names them): 3 blocks give the same arms (depth=3 and
# depth=2), lr 3e-3 is its optimum and 1e-6 three decades below it (so explore's choice and
# ASHA's stop are the tiny model's), never diverging; a trial is 6 steps an epoch of 0.05 s
# each, and its worker skips the seconds of torch and transformers imports a tiny trial pays.
# Like a tiny trial, a completed one keeps a layer fingerprint (a stand-in), which the driver
# logs to its MLflow run (assert_every_trial_once checks it).
TWIN_SURFACE = {
    "layers": 3,
    "best_lr": 3.0e-3,
    "diverge_above": None,
    "steps_per_epoch": 6,
    "step_s": 0.05,
    "fingerprint": True,
}


def write_synthetic_twin(folder: Path, **overrides: Any) -> Path:
    """write_study's study (the same arms, search, metric, phases and seeds) on the synthetic
    trainable's TWIN_SURFACE instead of the tiny model and corpus."""
    return _write_two_arm_study(folder, {"trainable": {"synthetic": TWIN_SURFACE}}, overrides)


def _write_two_arm_study(folder: Path, source: dict[str, Any], overrides: dict[str, Any]) -> Path:
    study = {
        "description": "test study",
        **source,
        "grid": {"depth": ["full", "full-1"]},
        # Each arm draws 3e-3 first, then 1e-6 (no arm runs one sample twice), so its second
        # sample is clearly worse at the first rung and ASHA must stop it.
        "search": {"lr": {"type": "categorical", "choices": [1.0e-6, 3.0e-3]}},
        "metric": {"name": "dev_loss", "mode": "min"},
        "fixed": {"epochs": 4, "batch_size": 16, "max_length": 32},
        "seeds": 2,
        "phases": {
            "explore": {
                "samples": 2,
                "seeds": 2,
                "asha": {"grace_period": 1, "reduction_factor": 2},
            },
            "confirm": {"select": "best", "seeds": 2},
        },
        "resources": {"cpu": 1, "gpu": 0},
        "max_failures": 0,
    }
    study.update(overrides)
    path = folder / "teststudy.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def write_synthetic_study(folder: Path, surface: dict[str, Any], **overrides: Any) -> Path:
    """A study of the synthetic trainable (trainables/settings/surface.py): no model and no data, so
    a test of the machinery runs in seconds. Two depths, confirm only, unless overridden."""
    study = {
        "description": "synthetic test study",
        "trainable": {"synthetic": surface},
        "grid": {"depth": ["full", 6]},
        "metric": {"name": "dev_f1", "mode": "max"},
        "fixed": {"epochs": 3, "lr": 5.0e-5},
        "seeds": 2,
        "phases": {"confirm": {"select": [{}], "seeds": 2}},
        "resources": {"cpu": 1, "gpu": 0},
        "max_failures": 0,
        **overrides,
    }
    path = folder / "teststudy.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def paced(surface: dict[str, Any], folder: Path) -> tuple[dict[str, Any], Path]:
    """`surface` whose steps sleep its `step_s` only while the returned file (made here, in
    `folder`) exists: a test that needs trials still running through an event (a server down,
    a node lost, a driver held) removes the file once the event is over, and the rest of the
    study runs at once."""
    pace = folder / "pace"
    pace.touch()
    return {**surface, "step_s_while": str(pace)}, pace


# 2 arms x 2 seeds, confirm only: 4 trials of 4 evaluations (about 40 s on 2 cores), for tests
# of what surrounds a study (servers, storage) rather than of its phases
SMALL_STUDY = {
    "search": None,
    "fixed": {"epochs": 4, "batch_size": 16, "max_length": 32, "lr": 3.0e-3},
    "phases": {"confirm": {"select": [{}], "seeds": 2}},
}


def study_command(study: Path, tmp: Path, *extra: str) -> list[str]:
    """The driver's command line; a local Ray of 2 CPUs unless `extra` joins a cluster (whose
    CPUs --num-cpus cannot set: the driver refuses the two together)."""
    cpus = [] if "--address" in extra else ["--num-cpus", "2"]
    return [
        sys.executable, "-m", "study.run", str(study), "--profile", "default",
        "--storage", str(tmp / "ray_results"), "--tracking-uri", tracking_uri(tmp),
        *cpus, "--reports", str(tmp / "reports"), *extra,
    ]  # fmt: skip


def run_in_process(command: list[str]) -> tuple[int, str, str]:
    """`study.run.main` on the arguments of `command` (a `study_command` line), with stdout and
    stderr captured. For commands that end before a study starts (a dry run, a refusal); an
    exception that escapes is the traceback a user would see, and fails the test."""
    from study.run import main

    done = in_process(main, command[command.index("study.run") + 1 :])
    return done.returncode, done.stdout, done.stderr


def in_process(main: Callable[[list[str]], int], argv: list[str]) -> subprocess.CompletedProcess:
    """A command's `main` on `argv` in this process, stdout and stderr captured: the command's
    own code without a process's start, which is seconds of imports (MLflow, pandas, torch).
    argparse's exits (--help, a refused flag) are the exit code. Not for a check that a
    refusal is one line on the terminal: what a library writes straight to file descriptor 2
    escapes the capture, so those stay processes."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


# a line Ray forwards from a worker process: `(train_tagger pid=123)` or `(name pid=1, ip=..)`,
# after an optional colour code
_WORKER_LINE = re.compile(r"^(\x1b\[[0-9;]*m)?\(\S+ pid=\d+(, ip=[^)]*)?\)")


def driver_tracebacks(output: str) -> list[str]:
    """The lines of a driver's output that start a traceback of its own. Ray also forwards
    what its workers print, and a worker that Ray stops with SIGTERM as the study shuts down
    can print Python's "Exception ignored in ..." traceback there, after the study ended well;
    that one is Ray's, not the driver's."""
    return [
        line
        for line in output.splitlines()
        if "Traceback (most recent call last)" in line and not _WORKER_LINE.match(line)
    ]


def tracking_uri(tmp: Path) -> str:
    return f"sqlite:///{tmp / 'mlflow.db'}"


def run_study(
    study: Path, tmp: Path, *extra: str, timeout: int = 600
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_DEDUP_LOGS": "0"}
    return subprocess.run(
        study_command(study, tmp, *extra),
        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def runs_by_kind(
    tmp: Path, experiment: str = "teststudy", uri: str | None = None
) -> dict[str, list]:
    """The experiment's runs by kind, from the study's sqlite store or the server at `uri`."""
    client = MlflowClient(uri or tracking_uri(tmp))
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=10000)
    out: dict[str, list] = defaultdict(list)
    for run in runs:
        out[run.data.tags.get("run_kind", "?")].append(run)
    return out


def metric_steps(tmp: Path, run_id: str, key: str, uri: str | None = None) -> list[int]:
    client = MlflowClient(uri or tracking_uri(tmp))
    return [m.step for m in client.get_metric_history(run_id, key)]


FINISHED = re.compile(
    r"(trial finished|trial already finished before the restart): "
    r"\[(\w+)\] arm (\S+) sample (\S+) seed (\S+): "
)


def start_driver(study: Path, tmp: Path, *extra: str) -> subprocess.Popen:
    """The driver in its own process group, as a terminal runs it (Ctrl-C reaches the group)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        study_command(study, tmp, *extra), cwd=REPO, env=env, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def read_until(driver: subprocess.Popen, done, seen: list[str], timeout: float = 300) -> bool:
    """Read the driver's output into `seen` until `done(seen)` holds; False on exit or timeout."""
    deadline = time.time() + timeout
    for line in driver.stdout:
        seen.append(line)
        if done(seen):
            return True
        if time.time() > deadline:
            break
    return False


def finished_trials(
    lines: list[str], phase: str | None = None, kept: bool = False
) -> list[tuple[str, ...]]:
    """(phase, arm, sample, seed) of each trial that finished, or with `kept`, of each trial a
    restarted driver found already finished."""
    wanted = "trial already finished before the restart" if kept else "trial finished"
    keys = [m.groups() for m in map(FINISHED.search, lines) if m and m[1] == wanted]
    return [k[1:] for k in keys if phase is None or k[1] == phase]


def assert_each_trial_ended_once(drivers: list[list[str]], n_trials: int) -> None:
    """Over the drivers' outputs, in order, every trial ended exactly once and none was trained
    again. A trial says `trial finished` in one driver and never later. One that ended in the
    instant before a kill (Tune had saved its final checkpoint, the driver not yet said so) is
    restored from that checkpoint by the next driver, which only re-reports its result and says
    `trial already finished before the restart`."""
    ended: dict[tuple[str, ...], int] = {}
    for i, lines in enumerate(drivers):
        for key in finished_trials(lines):
            assert key not in ended, (
                f"{key} finished in driver {ended[key] + 1} and again in {i + 1}"
            )
            ended[key] = i
        for key in finished_trials(lines, kept=True):
            assert i > 0, key  # the first driver restores nothing
            ended.setdefault(key, i)
    assert len(ended) == n_trials, sorted(ended)


def kill_driver(driver: subprocess.Popen, seen: list[str]) -> None:
    os.killpg(driver.pid, signal.SIGKILL)
    seen += driver.stdout.read().splitlines(keepends=True)  # what was already in the pipe
    driver.wait()
    kill_session(driver.pid)


def assert_every_trial_once(
    tmp: Path, n_trials: int, experiment: str = "teststudy", uri: str | None = None
) -> None:
    runs = runs_by_kind(tmp, experiment, uri)
    assert len(runs["study"]) == 1 and len(runs["arm"]) == 2
    keys = Counter(r.data.tags["trial_key"] for r in runs["trial"])
    assert len(keys) == n_trials and set(keys.values()) == {1}, keys  # one MLflow run each
    assert {r.data.tags["status"] for r in runs["trial"]} <= {"completed", "pruned"}
    client = MlflowClient(uri or tracking_uri(tmp))
    for run in runs["trial"]:  # no evaluation logged twice after a restart
        steps = metric_steps(tmp, run.info.run_id, "dev_f1", uri)
        assert len(steps) == len(set(steps))
        # a completed trial's layer fingerprint reached its run, whichever driver ended it
        fingerprints = [f.path for f in client.list_artifacts(run.info.run_id, "fingerprint")]
        completed = run.data.tags["status"] == "completed"
        assert fingerprints == (["fingerprint/fingerprint.safetensors"] if completed else [])
    assert runs["study"][0].data.tags["state"] == "finished"


def optuna_trials(tmp: Path) -> dict[str, list]:
    """Each Optuna study in the storage beside the MLflow store, by name: its trials."""
    import optuna

    url = f"sqlite:///{tmp / 'optuna.db'}"
    return {
        name: optuna.load_study(study_name=name, storage=url).trials
        for name in optuna.get_all_study_names(url)
    }


# One fresh interpreter imports the study package step by step, as a notebook, the report and
# the driver do, and notes after each step which of our modules and which heavy libraries are
# loaded. Each step only adds imports, so a heavy library first seen at a step was loaded by it.
_IMPORT_STAGES = """
import json, sys
HEAVY = ("ray", "torch", "transformers", "seqeval", "sklearn")
seen = {}
def note(stage):
    ours = sorted(m for m in sys.modules if m.startswith(("study", "trainables")))
    seen[stage] = {"ours": ours, "heavy": [m for m in HEAVY if m in sys.modules]}
import study
note("import study")
from study import load_trials, load_verdicts
note("readers")
import study.report.build
note("report")
import study.run
from study.spec import load_study
load_study("ner_depth", "default")
note("driver")
print(json.dumps(seen))
"""


@functools.cache
def import_stages() -> dict[str, dict[str, list[str]]]:
    """What is loaded after each step of `_IMPORT_STAGES` (import study; the notebook readers;
    the report; the driver's start-up with a study checked): one interpreter for the tests of
    all four, seconds of imports each."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_STAGES], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


class TrialStandIn(SimpleNamespace):
    """A Tune trial as the driver's callbacks read it, its fields given by name. Its last
    reported result lives where Ray keeps it, in `run_metadata.last_result` (the callbacks read
    it there: study.search.tune_internals.reported_result); `last_result` reads and sets it, as
    Ray's property does once a trial has reported."""

    def __init__(self, last_result: dict | None = None, **fields: Any) -> None:
        super().__init__(run_metadata=SimpleNamespace(last_result=last_result or {}), **fields)

    @property
    def last_result(self) -> dict:
        return self.run_metadata.last_result

    @last_result.setter
    def last_result(self, value: dict) -> None:
        self.run_metadata.last_result = value
