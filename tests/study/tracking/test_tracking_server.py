"""Studies tracked by an MLflow server on PostgreSQL, as a cluster user deploys it: a
throwaway PostgreSQL cluster and `mlflow server` on 127.0.0.1, both started here. Two studies
share the server, the database restarts under a running study, and a database that refuses
the login is one line, whether it sits behind the server or is given as the tracking URI."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from study.names import STUDY_RUN_ID
from tests import study_helpers as studies
from tests.mlflow_server import mlflow_ui_server
from tests.servers import postgres_cluster, postgres_unavailable_reason

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
def server(postgres, tmp_path):
    """`mlflow server` on the cluster's database; its base URL."""
    backend = postgres.create_database(DATABASE, OWNER, "tracker-secret")
    with mlflow_ui_server(backend, workdir=tmp_path / "server") as url:
        yield url


def _small_study(folder: Path, name: str, tiny_model, tiny_corpus) -> Path:
    folder.mkdir()
    path = studies.write_study(folder, str(tiny_model), tiny_corpus, **studies.SMALL_STUDY)
    return path.rename(folder / f"{name}.yaml")  # the study, and so its experiment, is `name`


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


def test_two_studies_at_once_on_one_server(postgres, server, tmp_path, tiny_model, tiny_corpus):
    names = ("study_a", "study_b")
    drivers = {}
    for name in names:
        study = _small_study(tmp_path / name, name, tiny_model, tiny_corpus)
        extra = ("--tracking-uri", server, "--num-cpus", "1")
        command = studies.study_command(study, tmp_path / name, *extra)
        drivers[name] = subprocess.Popen(
            command, cwd=studies.REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    outputs = {name: driver.communicate(timeout=600)[0] for name, driver in drivers.items()}
    for name in names:
        assert drivers[name].returncode == 0, outputs[name][-3000:]
        studies.assert_every_trial_once(tmp_path / name, 4, experiment=name, uri=server)
        runs = studies.runs_by_kind(tmp_path, name, server)
        (study_run,) = runs["study"]
        assert study_run.data.tags["study"] == name
        for run in runs["arm"] + runs["trial"]:  # nothing from the other study
            assert run.data.tags[STUDY_RUN_ID] == study_run.info.run_id
    assert _runs_per_experiment(postgres) == {"study_a": 7, "study_b": 7}  # 1 + 2 arms + 4


def _trials_finished(n: int):
    return lambda lines: len(studies.finished_trials(lines)) >= n


def test_study_outlives_a_database_restart(postgres, server, tmp_path, tiny_model, tiny_corpus):
    study = _small_study(tmp_path / "s", "teststudy", tiny_model, tiny_corpus)
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
