"""Studies tracked by an MLflow server on PostgreSQL, as a cluster user deploys it: a
throwaway PostgreSQL cluster and `mlflow server` on 127.0.0.1, both started here. Two studies
share the server, the database restarts under a running study, and a database that refuses
the login is one line, whether it sits behind the server or is given as the tracking URI; and
the server itself is killed and restarted, twice, under two running studies."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from mlflow_server import MlflowServer, mlflow_server
from ray_nodes import kill_session
from servers import postgres_cluster, postgres_unavailable_reason

from study.names import STUDY_RUN_ID
from tests import study_helpers as studies

pytestmark = [
    pytest.mark.study,
    pytest.mark.skipif(
        postgres_unavailable_reason() is not None, reason=str(postgres_unavailable_reason())
    ),
]
DATABASE, OWNER = "mlflow", "tracker"


@pytest.fixture
def postgres():
    with postgres_cluster() as cluster:
        yield cluster


@pytest.fixture
def tracking_server(postgres, tmp_path):
    """`mlflow server` on the cluster's database, which a test may kill and start again."""
    backend = postgres.create_database(DATABASE, OWNER, "tracker-secret")
    with mlflow_server(backend, workdir=tmp_path / "server") as running:
        yield running


@pytest.fixture
def server(tracking_server):
    """The server's base URL."""
    return tracking_server.url


def _small_study(folder: Path, name: str, tiny_model, tiny_corpus) -> Path:
    folder.mkdir()
    path = studies.write_study(folder, str(tiny_model), tiny_corpus, **studies.SMALL_STUDY)
    return path.rename(folder / f"{name}.yaml")  # the study, and so its experiment, is `name`


def _small_twin(folder: Path, name: str) -> Path:
    """`_small_study` on the synthetic twin of the tiny model (the same 4 trials, each keeping a
    stand-in layer fingerprint): for the tests of the tracking that read nothing of a model."""
    folder.mkdir()
    path = studies.write_synthetic_twin(folder, **studies.SMALL_STUDY)
    return path.rename(folder / f"{name}.yaml")


def _query(postgres, sql: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(postgres.url(DATABASE)) as db:
        return db.execute(sql).fetchall()


def _runs_per_experiment(postgres) -> dict[str, int]:
    """Counted in the database itself: the runs are really in PostgreSQL."""
    rows = _query(
        postgres,
        "SELECT e.name, count(r.run_uuid) FROM experiments e "
        "LEFT JOIN runs r ON r.experiment_id = e.experiment_id GROUP BY e.name",
    )
    return {name: n for name, n in rows if n}


def _trials_finished(n: int):
    return lambda lines: len(studies.finished_trials(lines)) >= n


def test_study_outlives_a_database_restart(postgres, server, tmp_path):
    study = _small_twin(tmp_path / "s", "teststudy")
    seen: list[str] = []
    driver = studies.start_driver(study, tmp_path / "s", "--tracking-uri", server)
    try:
        assert studies.read_until(driver, _trials_finished(1), seen)
        postgres.stop()  # the MLflow server stays up; its every request now fails
        assert studies.read_until(driver, _trials_finished(3), seen)
        postgres.start()
        seen += driver.stdout.readlines()
        assert driver.wait(timeout=600) == 0, "".join(seen)[-3000:]
    finally:
        if driver.poll() is None:
            driver.kill()
    output = "".join(seen)
    assert "is not answering" in output and "write(s) queued" in output, output[-3000:]
    assert "answers again: queued writes back-filled" in output
    studies.assert_every_trial_once(tmp_path, 4, uri=server)
    for run in studies.runs_by_kind(tmp_path, uri=server)["trial"]:  # every evaluation made it
        assert len(studies.metric_steps(tmp_path, run.info.run_id, "dev_f1", server)) == 4
    assert _runs_per_experiment(postgres) == {"teststudy": 7}


def _refused(study: Path, tmp: Path, uri: str) -> str:
    """Run the driver against `uri`; its one line, after checking that nothing was written."""
    done = studies.run_study(study, tmp, "--tracking-uri", uri, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-3000:]
    assert sorted(p.name for p in tmp.iterdir()) == [study.name]  # no results, no reports
    return lines[0]


def test_a_server_whose_database_refuses_the_login_is_one_line(
    postgres, server, monkeypatch, tmp_path, tiny_model, tiny_corpus
):
    """The password was changed under a running server: `/health` still answers, every
    request that needs the database fails after the server's own retries."""
    postgres.execute(
        f"ALTER ROLE {OWNER} PASSWORD 'changed'",
        f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{OWNER}'",
    )
    study = _small_study(tmp_path / "s", "teststudy", tiny_model, tiny_corpus)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")  # the driver's own default is 15
    line = _refused(study, tmp_path / "s", server)
    assert line == (
        f"error: MLflow tracking server {server} answers but cannot use its store (no answer "
        "in 5 s); see the server's log: its database may be down or refuse the login"
    )
    assert _runs_per_experiment(postgres) == {}


def test_a_database_uri_whose_login_is_refused_is_one_line(
    postgres, tmp_path, tiny_model, tiny_corpus
):
    postgres.create_database(DATABASE, OWNER, "tracker-secret")
    study = _small_study(tmp_path / "s", "teststudy", tiny_model, tiny_corpus)
    uri = postgres.url(DATABASE, "baduser", "bad-secret")
    line = _refused(study, tmp_path / "s", uri)
    shown = uri.replace("bad-secret", "***")
    assert line.startswith(f"error: MLflow tracking URI {shown} cannot be used: the database says")
    assert 'password authentication failed for user "baduser"' in line
    assert "bad-secret" not in line
    tables = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    assert _query(postgres, tables) == []  # not even MLflow's schema


# Each study: 2 arms x 20 seeds, 40 trials of 3 evaluations (20 steps each) on the synthetic
# trainable, 4.8 s of sleep per trial while the pace file exists: a study outlasts two outages,
# each of which lasts as long as the server takes to start again (10 s to 60 s on a busy 2-core
# machine). Once both are over the test removes the file, and the trials left take no sleep.
SYNTHETIC = {"steps_per_epoch": 20, "step_s": 0.08, "fingerprint": True}
SEEDS = 20
TRIALS = 2 * SEEDS
DOWN_S = 3  # how long each server stays dead before it is started again
BACK = "answers again: queued writes back-filled"


def _synthetic_study(folder: Path, name: str, surface: dict) -> Path:
    folder.mkdir()
    path = studies.write_synthetic_study(
        folder, surface, seeds=SEEDS, phases={"confirm": {"select": [{}], "seeds": SEEDS}}
    )
    return path.rename(folder / f"{name}.yaml")


def _trial_runs_stored(postgres) -> dict[str, int]:
    """Trial runs per experiment, counted in PostgreSQL: progress seen without the server."""
    rows = _query(
        postgres,
        "SELECT e.name, count(*) FROM runs r JOIN experiments e USING (experiment_id) "
        "JOIN tags t ON t.run_uuid = r.run_uuid AND t.key = 'run_kind' AND t.value = 'trial' "
        "GROUP BY e.name",
    )
    return dict(rows)


def _wait_until(done, drivers: dict, what: str, timeout: float = 600) -> None:
    """Poll `done()` while every driver still runs: a study that ended first fails the test."""
    deadline = time.monotonic() + timeout
    while not done():
        ended = [name for name, driver in drivers.items() if driver.poll() is not None]
        assert not ended, f"{ended} ended before {what}"
        assert time.monotonic() < deadline, f"not {what} within {timeout:.0f} s"
        time.sleep(0.5)


def _more_trial_runs(postgres, stored: dict[str, int], more: int):
    return lambda: all(
        _trial_runs_stored(postgres).get(name, 0) >= n + more for name, n in stored.items()
    )


def _back_filled(outputs: dict[str, Path], times: int):
    return lambda: all(out.read_text().count(BACK) >= times for out in outputs.values())


def _crash_and_restart(server: MlflowServer, postgres, drivers: dict) -> None:
    """SIGKILL the server while both studies run (and still have trials to run), leave it
    dead, start it on the same port."""
    stored = _trial_runs_stored(postgres)
    assert all(driver.poll() is None for driver in drivers.values())
    assert all(stored[name] < TRIALS for name in drivers), stored
    server.kill()
    time.sleep(DOWN_S)
    server.start()


@pytest.mark.slow
def test_two_studies_outlive_two_crashes_of_their_server(postgres, tracking_server, tmp_path):
    """The server is SIGKILLed (no request finished, no commit) and restarted on the same port,
    database and artifact root, twice, while two studies write to it at once: both end with
    exit 0, each planned trial is one FINISHED run with every evaluation, its final metrics and
    its fingerprint, and no run of one study is tagged with the other's."""
    names = ("study_a", "study_b")
    drivers, outputs = {}, {}
    surface, pace = studies.paced(SYNTHETIC, tmp_path)
    try:
        for name in names:
            study = _synthetic_study(tmp_path / name, name, surface)
            extra = ("--tracking-uri", tracking_server.url, "--num-cpus", "1")
            outputs[name] = tmp_path / f"{name}.log"
            with open(outputs[name], "w") as out:
                drivers[name] = subprocess.Popen(
                    studies.study_command(study, tmp_path / name, *extra), cwd=studies.REPO,
                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )  # fmt: skip
        stored = {name: 0 for name in names}
        for outage in (1, 2):
            # each crash waits for a trial run more in each study than before the last one:
            # both are mid-study, writing an evaluation every 1.6 s, so the outage (DOWN_S and
            # the server's start) catches writes of both
            _wait_until(_more_trial_runs(postgres, stored, 1), drivers, "a trial run more")
            _crash_and_restart(tracking_server, postgres, drivers)
            # both drivers saw the outage and back-filled what it held back
            _wait_until(_back_filled(outputs, outage), drivers, f"back-filled after {outage}")
            stored = _trial_runs_stored(postgres)
        pace.unlink()  # the rest of each study at once
        for driver in drivers.values():
            driver.wait(timeout=900)
    finally:
        for driver in drivers.values():
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait()
            kill_session(driver.pid)
    assert tracking_server.starts == 3
    for name in names:
        output = outputs[name].read_text()
        assert drivers[name].returncode == 0, output[-3000:]
        assert not studies.driver_tracebacks(output), output[-3000:]
        # each crash landed mid-study: a write failed, was queued, and went through later
        assert output.count("is not answering") == 2, output[-3000:]
        assert output.count(BACK) == 2, output[-3000:]
        _assert_each_planned_trial_once(tmp_path, name, tracking_server.url)
    assert _runs_per_experiment(postgres) == {name: 1 + 2 + TRIALS for name in names}


def _assert_each_planned_trial_once(tmp_path: Path, name: str, url: str) -> None:
    # one run per trial, none logged twice, each one's layer fingerprint stored through it
    studies.assert_every_trial_once(tmp_path / name, TRIALS, experiment=name, uri=url)
    runs = studies.runs_by_kind(tmp_path, name, url)
    (study_run,) = runs["study"]
    assert study_run.data.tags["state"] == "finished"
    assert study_run.data.tags["study"] == name
    assert len(runs["arm"]) == 2
    for run in runs["arm"]:  # nothing from the other study
        assert run.data.tags[STUDY_RUN_ID] == study_run.info.run_id
    trials = runs["trial"]
    keys = Counter(run.data.tags["trial_key"] for run in trials)
    planned = {(run.data.tags["arm"], run.data.tags["seed"]) for run in trials}
    assert len(keys) == TRIALS and set(keys.values()) == {1}, keys  # none lost, none twice
    assert len(planned) == TRIALS and {seed for _, seed in planned} == {
        str(seed) for seed in range(SEEDS)
    }
    for run in [study_run, *runs["arm"], *trials]:  # nothing left RUNNING
        assert run.info.status == "FINISHED", (run.info.run_name, run.info.status)
    for run in trials:
        assert run.data.tags["status"] == "completed"
        assert run.data.tags[STUDY_RUN_ID] == study_run.info.run_id
        assert {"test_f1", "surface_f1", "curve_area"} <= set(run.data.metrics), run.data.metrics
        steps = studies.metric_steps(tmp_path, run.info.run_id, "dev_f1", url)
        assert sorted(steps) == [20, 40, 60], (run.data.tags["trial_key"], steps)
