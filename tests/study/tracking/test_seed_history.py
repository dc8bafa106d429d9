"""The design a study run declared and the study runs that ran the same confirm seeds, read
back from a tracking store written by hand: the study run records the sha256 of its
`study.yaml` as `study_hash`, an older run without it is hashed from its artifact, and only
the runs whose confirm trials (or explore trials standing in for one) share a seed count."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import pytest
from mlflow.tracking import MlflowClient

from study.names import (
    REUSED_TAG,
    RUN_KIND,
    STUDY_ARTIFACT,
    STUDY_HASH_TAG,
    STUDY_KIND,
    STUDY_RUN_ID,
    TRIAL_KIND,
)
from study.spec import load_study
from study.tracking.seed_history import FROM_ARTIFACT, FROM_TAG, confirm_seed_uses
from study.tracking.start import open_study_runs
from study.tracking.store import StudyTracker
from tests.study_helpers import write_synthetic_study

DAY = 86_400_000  # ms


def add_study_run(
    client: MlflowClient,
    experiment: str,
    start: int,
    trials: list[tuple[str, int]],
    study_hash: str | None = None,
    artifact: str | None = None,
    reused: tuple[int, ...] = (),
) -> str:
    """A study run started at `start` (ms) with one trial run per (phase, seed), each started
    a minute after the one before, its `study_hash` tag and/or `study.yaml` artifact;
    explore trials on `reused` seeds stand in for confirm trials."""
    tags = {RUN_KIND: STUDY_KIND, **({STUDY_HASH_TAG: study_hash} if study_hash else {})}
    run = client.create_run(experiment, start_time=start, tags=tags).info.run_id
    if artifact is not None:
        client.log_text(run, artifact, STUDY_ARTIFACT)
    for i, (phase, seed) in enumerate(trials):
        own = {RUN_KIND: TRIAL_KIND, STUDY_RUN_ID: run, "phase": phase, "seed": str(seed)}
        if phase == "explore" and seed in reused:
            own[REUSED_TAG] = "true"
        client.create_run(experiment, start_time=start + 60_000 * (i + 1), tags=own)
    return run


def confirm(*seeds: int) -> list[tuple[str, int]]:
    return [("confirm", seed) for seed in seeds]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One sqlite store for the module (making one costs seconds), an experiment a test."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('seeds') / 'mlflow.db'}"
    client = MlflowClient(uri)
    return uri, client


def test_the_study_run_records_the_hash_of_the_study_it_ran(store, tmp_path):
    spec = load_study(str(write_synthetic_study(tmp_path, {"steps_per_epoch": 20})))
    tracker = StudyTracker(store[0], spec.name)
    plan = SimpleNamespace(summary=lambda: "plan", arms=[])
    run, _ = open_study_runs(tracker, spec, plan, "i", "default")
    recorded = tracker.client.get_run(run).data.tags[STUDY_HASH_TAG]
    artifact = tracker.client.download_artifacts(run, STUDY_ARTIFACT, str(tmp_path))
    with open(artifact, "rb") as logged:  # what `sha256sum study.yaml` reads
        assert recorded == hashlib.sha256(logged.read()).hexdigest()
    # a resume keeps the hash of the study as it started
    tracker.client.set_tag(run, STUDY_HASH_TAG, "kept")
    again, _ = open_study_runs(tracker, spec, plan, "i", "default")
    assert again == run and tracker.client.get_run(run).data.tags[STUDY_HASH_TAG] == "kept"


def test_the_runs_that_shared_a_confirm_seed_oldest_first_with_their_design(store):
    uri, client = store
    experiment = client.create_experiment("shared")
    old = add_study_run(client, experiment, 1 * DAY, confirm(200, 201), artifact="old: 1\n")
    tagged = add_study_run(client, experiment, 2 * DAY, confirm(201, 300), study_hash="a" * 64)
    add_study_run(client, experiment, 3 * DAY, confirm(0, 1), study_hash="b" * 64)  # apart
    # an explore trial that stood in for a confirm trial used its seed; one that did not, not
    stand_in = add_study_run(client, experiment, 4 * DAY, [("explore", 202), ("explore", 203)],
                             study_hash="c" * 64, reused=(202,))  # fmt: skip
    bare = add_study_run(client, experiment, 5 * DAY, confirm(203))  # no tag, no artifact
    trials = [("explore", 9), *confirm(200, 201, 202, 203)]
    this = add_study_run(client, experiment, 6 * DAY, trials, study_hash="d" * 64)
    uses = confirm_seed_uses(uri, this)
    assert [u.run_id for u in uses] == [old, tagged, stand_in, bare, this]
    assert [u.seeds for u in uses] == [(200, 201), (201,), (202,), (203,), (200, 201, 202, 203)]
    assert (uses[0].study_hash, uses[0].hash_from) == (
        hashlib.sha256(b"old: 1\n").hexdigest(),
        FROM_ARTIFACT,
    )
    assert (uses[1].study_hash, uses[1].hash_from) == ("a" * 64, FROM_TAG)
    assert (uses[3].study_hash, uses[3].hash_from) == ("", "")
    # the first trial of a run, whatever its phase
    assert uses[0].first_trial_ms == 1 * DAY + 60_000
    assert uses[-1].started_ms == 6 * DAY and uses[-1].first_trial_ms == 6 * DAY + 60_000


def test_a_run_without_confirm_trials_has_no_seed_history(store):
    uri, client = store
    experiment = client.create_experiment("none yet")
    add_study_run(client, experiment, DAY, confirm(1), study_hash="a" * 64)
    this = add_study_run(client, experiment, 2 * DAY, [("explore", 1)], study_hash="b" * 64)
    assert confirm_seed_uses(uri, this) == []
