"""The tracking server dies mid-study and comes back: the study goes on, and what it could
not write meanwhile is back-filled, with no run duplicated and no evaluation missing."""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from collections import Counter

import pytest
from mlflow.tracking import MlflowClient
from mlflow_server import mlflow_server, mlflow_ui_server
from servers import free_port

from study.tracking import store
from study.tracking.store import StudyTracker, patiently
from tests.study_helpers import (
    REPO,
    TWIN_SURFACE,
    paced,
    study_command,
    write_synthetic_twin,
)

pytestmark = pytest.mark.study


def _read_until(driver: subprocess.Popen, lines: list[str], finished: int, limit_s: float):
    """Read the driver's output until `finished` trials have finished in all (or it ends)."""
    deadline = time.time() + limit_s
    for line in driver.stdout:
        lines.append(line)
        if sum("trial finished:" in x for x in lines) >= finished or time.time() > deadline:
            return


def test_study_outlives_a_tracking_server_outage(tmp_path):
    """The driver's tracking, on the synthetic twin of the tiny study (the same 12 trials of 4
    evaluations), each trial slowed to 6 s (24 steps of 0.25 s) so that several still end
    while the server is down; once it is back, the rest run at once (`step_s_while`)."""
    surface, pace = paced({**TWIN_SURFACE, "step_s": 0.25}, tmp_path)
    study = write_synthetic_twin(tmp_path, trainable={"synthetic": surface})
    backend = f"sqlite:///{tmp_path / 'server.db'}"
    port, workdir = free_port(), tmp_path / "server"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    lines: list[str] = []
    with mlflow_ui_server(backend, port=port, workdir=workdir) as url:
        command = [*study_command(study, tmp_path), "--tracking-uri", url]
        driver = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True,
        )  # fmt: skip
        _read_until(driver, lines, finished=2, limit_s=300)
    _read_until(driver, lines, finished=6, limit_s=300)  # trials go on with the server down
    down_log = "".join(lines)
    assert "is not answering" in down_log and "write(s) queued" in down_log, down_log[-3000:]
    with mlflow_ui_server(backend, port=port, workdir=workdir) as url:
        pace.unlink()
        lines += driver.stdout.readlines()
        assert driver.wait(timeout=600) == 0, "".join(lines)[-3000:]
        client = MlflowClient(url)
        experiment = client.get_experiment_by_name("teststudy")
        runs = client.search_runs([experiment.experiment_id], max_results=1000)
        history = {
            r.info.run_id: [m.step for m in client.get_metric_history(r.info.run_id, "dev_f1")]
            for r in runs
        }
    assert "answers again: queued writes back-filled" in "".join(lines)
    kinds = Counter(r.data.tags["run_kind"] for r in runs)
    assert kinds == {"study": 1, "arm": 2, "trial": 12}, kinds
    trials = [r for r in runs if r.data.tags["run_kind"] == "trial"]
    assert len({r.data.tags["trial_key"] for r in trials}) == 12  # none duplicated
    for run in trials:
        status = run.data.tags["status"]
        assert status in {"completed", "pruned"}, status
        steps = history[run.info.run_id]
        assert len(steps) == len(set(steps))
        if status == "completed":  # every evaluation made it, including those while down
            assert len(steps) == 4, (run.data.tags["trial_key"], steps)


@pytest.mark.slow
def test_the_driver_waits_for_a_server_that_is_down_as_the_study_ends(
    tmp_path, monkeypatch, caplog
):
    """The driver's own calls after the trials (summary, study state, closing the runs) wait
    for a server that went away, as the callback's queued writes do, instead of ending the
    study in a traceback."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # as study/run.py sets it
    monkeypatch.setattr(store, "RETRY_S", 1)
    caplog.set_level(logging.INFO, logger=store.__name__)
    with mlflow_server(f"sqlite:///{tmp_path / 'server.db'}", workdir=tmp_path / "srv") as server:
        tracker = StudyTracker(server.url, "teststudy")
        run_id = tracker.study_run("invocation", "teststudy", {}, {})
        server.kill()
        answers = []
        summary = threading.Thread(
            target=lambda: answers.append(
                patiently(lambda: tracker.client.get_run(run_id).info.status, server.url)
            )
        )
        summary.start()
        time.sleep(3)
        assert summary.is_alive() and answers == []  # waiting, not failed
        server.start()
        summary.join(timeout=120)
    assert answers == ["RUNNING"]
    assert f"MLflow at {server.url} did not answer" in caplog.text
    assert f"MLflow at {server.url} answered again" in caplog.text
