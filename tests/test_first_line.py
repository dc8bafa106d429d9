"""The first line of a command that trains comes within 2 s (issue 49, item 7): `python -m
trainables` printed nothing for minutes (torch, the model and the data load, then a whole
epoch before its first evaluation), and a study's run nothing for its first 27 s (Ray, MLflow
and the checks before anything is written).

Each command runs in a fresh interpreter, and the time is the child's CPU time (user +
system, from /proc/PID/stat) when its first line arrives, not wall time: the 2-core CI machine
runs other tests meanwhile. The child is then stopped (its session, so nothing it started
stays)."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.study_helpers import REPO, study_command, write_study
from trainables.__main__ import first_line, read_settings

MOST_CPU_S = 2.0
WAIT_S = 240  # wall time allowed for the first line on a loaded machine


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _first_line(command: list[str], stream: str) -> tuple[str, float]:
    """The first line `command` writes to `stream` ("stdout" or "stderr"), and the CPU
    seconds it had used by then."""
    child = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)  # fmt: skip
    try:
        watched = getattr(child, stream)
        selector = selectors.DefaultSelector()
        selector.register(watched, selectors.EVENT_READ)
        deadline = time.monotonic() + WAIT_S
        while not selector.select(timeout=1.0):
            assert child.poll() is None, child.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, f"no line on {stream} in {WAIT_S} s"
        cpu = _cpu_seconds(child.pid)
        return watched.readline().decode(), cpu
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc/PID/stat")
def test_a_single_trial_says_what_it_trains_at_once(tmp_path):
    command = [sys.executable, "-m", "trainables", "--set", "lr=3e-4", "--set", "epochs=1"]
    line, cpu = _first_line(command, "stderr")
    assert "one trial: model minilm, lr 0.0003, 1 epoch, seed 0; loading torch" in line, line
    assert cpu <= MOST_CPU_S, f"{cpu:.2f} CPU seconds before: {line}"


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc/PID/stat")
def test_a_study_run_says_what_it_does_at_once(tmp_path, tiny_model, tiny_corpus):
    study = write_study(tmp_path, str(tiny_model), tiny_corpus)
    line, cpu = _first_line(study_command(study, tmp_path), "stdout")
    assert line.startswith("study teststudy (profile default): checking the data"), line
    assert cpu <= MOST_CPU_S, f"{cpu:.2f} CPU seconds before: {line}"
    assert not (tmp_path / "mlflow.db").exists()  # stopped before it wrote anything


@pytest.mark.parametrize(
    "sets, words",
    [
        (["epochs=1"], "lr 5e-05, 1 epoch, seed 0"),
        (["lr=1.78e-4", "budget={steps: 630}", "eval_every=53"], "lr 0.000178, 630 steps"),
        (["budget={until_plateau: {patience: 2, max_epochs: 8}}", "seed=3"],
         "until dev plateaus, at most 8 epochs, seed 3"),
    ],
)  # fmt: skip
def test_the_single_trials_first_line_names_its_budget(sets, words):
    line = first_line(read_settings(None, sets))
    assert line.startswith("one trial: model minilm, ") and words in line, line
    assert ("every 53 steps" if "eval_every=53" in sets else "at each epoch's end") in line
