"""Studies whose `--storage` is an S3 bucket on a real S3-compatible server (moto's, on
127.0.0.1), with the endpoint given both ways a cluster user gives it: `AWS_ENDPOINT_URL`, or
in the URI's query as pyarrow documents it. Checkpoints land in the bucket, a killed driver
resumes from there, the server going away mid-study is one line and a clean `--resume`, and a
bucket that does not exist is refused before anything is written."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

import psutil
import pyarrow.fs as pafs
import pytest
from ray_nodes import kill_session
from servers import S3_ENV, s3_server, s3_unavailable_reason

from study.execution.saved_state import damaged_state
from study.names import DRIVERS_TAG, WALL_TAG
from study.search.tune_internals import EXPERIMENT_STATE_PATTERN
from tests.study_helpers import (
    SMALL_STUDY,
    TWIN_SURFACE,
    assert_each_trial_ended_once,
    assert_every_trial_once,
    finished_trials,
    kill_driver,
    paced,
    read_until,
    run_study,
    runs_by_kind,
    start_driver,
    write_study,
    write_synthetic_twin,
)

pytestmark = [
    pytest.mark.study,
    pytest.mark.skipif(s3_unavailable_reason() is not None, reason=str(s3_unavailable_reason())),
]
BUCKET = "studies"


@pytest.fixture
def s3(monkeypatch):
    """The server, an empty bucket, and a client environment the driver inherits."""
    for key, value in S3_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with s3_server() as server:
        server.create_bucket(BUCKET)
        yield server


@pytest.fixture
def drivers():
    """The drivers a test starts: any still running when it ends (a failed assertion before
    the test ended it) is killed with everything it started, its held trials included."""
    started: list[subprocess.Popen] = []
    yield started
    for driver in started:
        kill_session(driver.pid)  # it leads its session: it and everything it started
        driver.wait()


HELD_STEP_S = 0.2  # 24 steps a trial (SMALL_STUDY's 4 epochs of the twin's 6): 4.8 s


def _storage(s3, monkeypatch, endpoint_in_uri: bool) -> str:
    if endpoint_in_uri:
        return s3.uri(BUCKET, "ray")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.url)
    return f"s3://{BUCKET}/ray"


def _saved_states(s3) -> list[str]:
    """Tune's experiment states in the bucket, each checked to read back whole."""
    fs = pafs.S3FileSystem(endpoint_override=s3.endpoint, scheme="http", region="us-east-1")
    keys = [Path(key) for key in s3.keys(BUCKET)]
    folders = {str(key.parent) for key in keys if key.match(EXPERIMENT_STATE_PATTERN)}
    for folder in folders:
        assert damaged_state(fs, f"{BUCKET}/{folder}") is None, folder
    return sorted(folders)


def _first_pair_done(s3, tmp: Path, storage: str, drivers: list):
    """A small study started on `storage`, read until the first pair of trials (the two its 2
    CPUs run together) finished, and then held still (see `_hold_trials`): (its file, the
    running driver, its output so far, the held trial processes, the pace file). The study is
    SMALL_STUDY on the synthetic twin of the tiny model (its trials checkpoint through the same
    trial folders and keep a stand-in layer fingerprint): these tests are about where the
    study's state lives, not about a model. Its steps take `HELD_STEP_S` (4.8 s a trial), so
    the next pair has just begun when it is held, on a fast machine too, while the pace file
    exists (`paced`): a test removes it before it resumes the study, which then runs at once.

    Not the first trial alone: its sibling ends within the same second, and a sibling held
    while it uploads its final checkpoint, then cut off by the storage going away, can lose
    that checkpoint although Tune saw the upload succeed (pyarrow ignores the failed part
    upload when it destroys the stream: "Error ignored when destroying file"). The driver
    then says the trial finished, the next driver trains it again, and no test can tell that
    apart from a trial trained twice for nothing."""
    surface, pace = paced({**TWIN_SURFACE, "step_s": HELD_STEP_S}, tmp)
    study = write_synthetic_twin(tmp, **SMALL_STUDY, trainable={"synthetic": surface})
    seen: list[str] = []
    driver = start_driver(study, tmp, "--storage", storage)
    drivers.append(driver)
    assert read_until(driver, lambda lines: len(finished_trials(lines)) >= 2, seen)
    return study, driver, seen, _hold_trials(driver, s3, len(finished_trials(seen))), pace


def _hold_trials(driver, s3, finished: int) -> list[psutil.Process]:
    """Stop the trials' processes (SIGSTOP) and wait until Tune's experiment state in the
    bucket records the `finished` trials the driver announced as ended and has stopped
    changing, so that it records every checkpoint already taken.

    Tune deletes a trial's previous checkpoint as soon as it registers the next one, and
    uploads the experiment state that names the new one only afterwards, in the background
    (Ray 2.60's experiment state manager says as much); a trial's end reaches the bucket with
    the next periodic save, up to 10 s later. A driver that dies in between leaves a state
    naming a checkpoint that is gone, or one from before the trial ended or began, and the
    next driver trains that trial again (it ends twice). On a local disk the upload takes
    milliseconds; to a bucket, a good part of a second. These tests are about where the state
    lives, not about that window, so they stop the driver outside it."""
    held = [proc for proc in psutil.process_iter(["cmdline"]) if _ray_worker(proc, driver.pid)]
    assert held, "no Ray worker found in the driver's session"
    for proc in held:
        with contextlib.suppress(psutil.Error):
            proc.suspend()
    last, stable_since, deadline = None, time.time(), time.time() + 60
    while time.time() < deadline:
        now = _state_versions(s3)
        if now != last:
            last, stable_since = now, time.time()
        elif time.time() - stable_since >= 2 and _ended_in_state(s3, now) >= finished:
            return held
        time.sleep(0.25)
    ended = _ended_in_state(s3, last or {})
    raise AssertionError(f"in 60 s the bucket's state recorded {ended} of {finished} ended trials")


def _ended_in_state(s3, versions: dict[str, str]) -> int:
    """How many trials the bucket's experiment states record as ended (Tune's TERMINATED)."""
    client, ended = s3.client(), 0
    for key in versions:
        state = json.loads(client.get_object(Bucket=BUCKET, Key=key)["Body"].read())
        trials = [json.loads(trial) for trial, _ in state["trial_data"]]
        ended += sum(trial["status"] == "TERMINATED" for trial in trials)
    return ended


def _ray_worker(proc: psutil.Process, session: int) -> bool:
    """A Ray worker (its title starts `ray::`) that the driver of `session` started."""
    try:
        title = " ".join(proc.info["cmdline"] or [])
        return title.startswith("ray::") and os.getsid(proc.pid) == session
    except OSError:
        return False


def _state_versions(s3) -> dict[str, str]:
    listing = s3.client().list_objects_v2(Bucket=BUCKET)
    return {
        item["Key"]: item["ETag"]
        for item in listing.get("Contents", [])
        if Path(item["Key"]).match(EXPERIMENT_STATE_PATTERN)
    }


def test_checkpoints_land_in_the_bucket_and_a_killed_driver_resumes_from_it(
    s3, drivers, monkeypatch, tmp_path
):
    storage = _storage(s3, monkeypatch, endpoint_in_uri=True)
    study, driver, first, _, pace = _first_pair_done(s3, tmp_path, storage, drivers)
    keys = s3.keys(BUCKET)
    assert any("/checkpoint_" in key for key in keys), keys
    (state,) = [key for key in keys if key.endswith("/study.json")]
    assert state.startswith("ray/teststudy/default-")
    kill_driver(driver, first)

    pace.unlink()
    resumed = run_study(study, tmp_path, "--storage", storage, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    study_dir = state.removesuffix("/study.json")  # ray/teststudy/default-...
    resuming = f"resuming s3://{BUCKET}/{study_dir}?endpoint_override={s3.endpoint}&scheme=http"
    assert resuming in resumed.stderr  # the sub-path went on the path, the query stayed last
    assert_each_trial_ended_once([first, resumed.stderr.splitlines()], 4)
    assert_every_trial_once(tmp_path, 4)
    assert not (tmp_path / "ray_results").exists()  # all of it went to the bucket
    keys = s3.keys(BUCKET)
    assert not [key for key in keys if "/checkpoint_" in key]  # a finished study keeps none
    assert _saved_states(s3) == [f"{study_dir}/confirm"]


def test_storage_going_away_is_one_line_then_a_clean_resume(s3, drivers, monkeypatch, tmp_path):
    storage = _storage(s3, monkeypatch, endpoint_in_uri=False)
    study, driver, seen, held, pace = _first_pair_done(s3, tmp_path, storage, drivers)
    s3.stop()
    for proc in held:  # their next checkpoint finds the storage gone
        with contextlib.suppress(psutil.Error):
            proc.resume()
    try:
        seen += driver.stdout.read().splitlines(keepends=True)
        code = driver.wait(timeout=300)
    finally:
        if driver.poll() is None:
            kill_driver(driver, seen)
    output = "".join(seen)
    assert code == 3, output[-3000:]
    last = output.strip().splitlines()[-1]
    assert last.startswith(
        f"error: the study's storage {storage} cannot be reached (AWS Error NETWORK_CONNECTION"
    ), output[-6000:]
    assert last.endswith(
        "once it answers again, resume with: python -m study.run teststudy --profile default "
        "--resume"
    ), last
    runs = runs_by_kind(tmp_path)
    stopped = runs["study"][0].data.tags
    assert stopped["state"] == "storage_unreachable"
    assert float(stopped[WALL_TAG]) > 0 and stopped[DRIVERS_TAG] == "1"  # its time counts
    assert "errored" not in {r.data.tags.get("status") for r in runs["trial"]}  # none blamed

    s3.start()
    assert _saved_states(s3)  # what the bucket holds reads back whole
    pace.unlink()
    resumed = run_study(study, tmp_path, "--storage", storage, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_each_trial_ended_once([seen, resumed.stderr.splitlines()], 4)
    assert_every_trial_once(tmp_path, 4)
    finished = runs_by_kind(tmp_path)["study"][0].data.tags
    assert finished[DRIVERS_TAG] == "2"
    assert float(finished[WALL_TAG]) > float(stopped[WALL_TAG])


@pytest.mark.parametrize("endpoint_in_uri", [True, False], ids=["in-uri", "from-env"])
def test_a_missing_bucket_is_one_line_and_writes_nothing(
    s3, monkeypatch, tmp_path, tiny_model, tiny_corpus, endpoint_in_uri
):
    storage = _storage(s3, monkeypatch, endpoint_in_uri).replace(BUCKET, "no-such-bucket")
    study = write_study(tmp_path, str(tiny_model), tiny_corpus, **SMALL_STUDY)
    done = run_study(study, tmp_path, "--storage", storage, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith(f"error: --storage {storage} is not writable: "), lines[0]
    assert "Bucket 'no-such-bucket' not found" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["teststudy.yaml"]  # nothing written
    buckets = s3.client().list_buckets()["Buckets"]
    assert [b["Name"] for b in buckets] == [BUCKET] and s3.keys(BUCKET) == []
