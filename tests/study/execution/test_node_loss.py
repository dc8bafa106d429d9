"""A Ray node that dies mid-study (bench/ray_nodes.py: a head that the driver attaches to and one
worker node, on this machine). The worker node's raylet is killed (its trial workers die a
moment later) while a trial on it is between checkpoints: that trial starts again from its last
checkpoint on the surviving node, the study finishes, and MLflow holds each trial once, the
retried one with its retry count.

The trials are synthetic (trainables/settings/surface.py) and sleep per step, so a trial is
mid-flight for seconds with a checkpoint at every evaluation, and a resumed one reports what an
uninterrupted one would.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from ray_nodes import head_and_worker

from tests.study_helpers import (
    kill_driver,
    paced,
    runs_by_kind,
    start_driver,
    tracking_uri,
    write_synthetic_study,
)

pytestmark = pytest.mark.study

EVAL_EVERY, STEPS = 5, 30  # steps_per_epoch 10 x 3 epochs; a checkpoint at every evaluation
EVALUATIONS = list(range(EVAL_EVERY, STEPS + 1, EVAL_EVERY))
# 1.5 s between checkpoints, 9 s a trial, until the driver says the victim runs again: then
# the rest take no time (step_s_while)
SURFACE = {"steps_per_epoch": 10, "step_s": 0.3}
RUNS_AGAIN = "failed, running it again from its last checkpoint"  # study/progress/callback.py


def _drain(driver) -> list[str]:
    """The driver's output, read as it comes so its pipe never fills."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(driver.stdout), daemon=True)
    reader.start()
    return lines


def _said_as(run) -> str:
    """How the driver's lines name the trial of an MLflow trial run (study/progress)."""
    tags = run.data.tags
    return f"arm {tags['arm']} sample {tags['sample']} seed {tags['seed']}"


def _wait_for_line(lines: list[str], *texts: str, driver, timeout: float = 120) -> None:
    """Until the driver has said a line holding all `texts` (or ended, or the time is up: the
    asserts then say what went wrong)."""
    deadline = time.time() + timeout
    while time.time() < deadline and driver.poll() is None:
        if any(all(text in line for text in texts) for line in lines):
            return
        time.sleep(0.2)


def _trial_mid_flight_on(tmp: Path, node_id: str, driver, timeout: float = 120):
    """A trial run on `node_id` that has reported (so checkpointed) and has evaluations to go."""
    client = MlflowClient(tracking_uri(tmp))
    query = f"tags.ray_node_id = '{node_id}' and tags.status = 'running'"
    deadline = time.time() + timeout
    while time.time() < deadline and driver.poll() is None:
        experiment = client.get_experiment_by_name("teststudy")
        runs = client.search_runs([experiment.experiment_id], query) if experiment else []
        for run in runs:
            if EVAL_EVERY <= run.data.metrics.get("step", 0) <= STEPS - 3 * EVAL_EVERY:
                return run
        time.sleep(0.3)
    return None


def test_a_lost_node_s_trials_resume_from_checkpoints_on_a_survivor(tmp_path, monkeypatch):
    with head_and_worker(tmp_path, worker_cpus=2) as (cluster, doomed, node_ids):
        for key, value in cluster.auth_env.items():
            monkeypatch.setenv(key, value)
        surface, pace = paced(SURFACE, tmp_path)
        study = write_synthetic_study(
            tmp_path, surface,
            fixed={"epochs": 3, "lr": 5.0e-5, "eval_every": EVAL_EVERY},
            seeds=3, phases={"confirm": {"select": [{}], "seeds": 3, "checkpoint_every_s": 0}},
            max_failures=3,
        )  # fmt: skip
        driver = start_driver(study, tmp_path, "--address", cluster.address)
        lines = _drain(driver)
        try:
            victim = _trial_mid_flight_on(tmp_path, node_ids[doomed.name], driver)
            assert victim is not None, "".join(lines[-40:])
            cluster.kill(doomed)
            _wait_for_line(lines, RUNS_AGAIN, _said_as(victim), driver=driver)
            pace.unlink()
            driver.wait(timeout=240)
        finally:
            if driver.poll() is None:
                kill_driver(driver, lines)
    assert driver.returncode == 0, "".join(lines[-60:])
    _assert_resumed_once(tmp_path, victim, node_ids["h"])


def _assert_resumed_once(tmp: Path, victim, survivor: str) -> None:
    client = MlflowClient(tracking_uri(tmp))
    trials = runs_by_kind(tmp)["trial"]
    keys = Counter(r.data.tags["trial_key"] for r in trials)
    assert len(keys) == 6 and set(keys.values()) == {1}, keys  # each trial one run
    assert {r.data.tags["status"] for r in trials} == {"completed"}
    retried = [r for r in trials if int(r.data.tags["retries"]) > 0]
    assert victim.info.run_id in {r.info.run_id for r in retried}, [
        (r.data.tags["trial_key"], r.data.tags["retries"]) for r in trials
    ]
    for run in trials:
        run_id = run.info.run_id
        steps = [m.step for m in client.get_metric_history(run_id, "dev_f1")]
        assert sorted(steps) == EVALUATIONS, (run.data.tags["trial_key"], steps)  # none twice
        resumed = client.get_metric_history(run_id, "resumed_from_step")
        if run not in retried:
            assert resumed == [], run.data.tags["trial_key"]
            continue
        # every result after the restart says where it began: a checkpoint, never step 0
        starts = {m.value for m in resumed}
        assert len(starts) == 1 and starts.pop() in EVALUATIONS[:-1], resumed
        assert run.data.tags["ray_node_id"] == survivor  # finished on the surviving node
    victim_start = client.get_metric_history(victim.info.run_id, "resumed_from_step")[0].value
    assert victim_start >= victim.data.metrics["step"]  # from its last checkpoint, not before
