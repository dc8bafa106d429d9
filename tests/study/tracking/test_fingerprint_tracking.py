"""A completed trial's layer fingerprint goes from its final Ray checkpoint to an artifact of
its MLflow trial run, through the real tracking callback and a real sqlite store: read back
from MLflow it compares exactly as in memory; it is logged once when a restored trial
completes again, and once when the store was down while the checkpoint went away."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from ray import tune

from study.names import FINGERPRINT_ARTIFACT
from tests.study.tracking import test_tracking
from tests.study_helpers import TrialStandIn
from tests.trainables.measures.test_dynamics import batches, pretrained, reinitialised
from trainables.measures.fingerprints import FILE_NAME, LayerFingerprint
from trainables.measures.fingerprints.capture import capture
from trainables.measures.fingerprints.compare import compare
from trainables.tune_adapter import FINAL_FILE

ARTIFACT = f"{FINGERPRINT_ARTIFACT}/{FILE_NAME}"
callback = test_tracking.callback  # the fixture: a callback on a real store, its client flaky


def _completed(tmp_path: Path, trial_id: str, seed: int, fingerprint: LayerFingerprint):
    """A trial as Tune hands it to the callback at its end: final result, final checkpoint
    (the final metrics and the fingerprint, as trainables/tune_adapter.py writes it)."""
    folder = tmp_path / trial_id / "checkpoint_000003"
    folder.mkdir(parents=True)
    (folder / FINAL_FILE).write_text("{}")
    fingerprint.save(folder / FILE_NAME)
    result = {"final": 1.0, "step": 30, "dev_f1": 0.5, "epoch": 2.0,
              "fingerprint_bytes": float(fingerprint.nbytes)}  # fmt: skip
    study = {"arm": "depth=2", "phase": "confirm", "sample": 0, "seed": seed}
    checkpoint = tune.Checkpoint.from_directory(folder)
    config = {"study": study, "trial": {"seed": seed}}
    return TrialStandIn(trial_id=trial_id, config=config, last_result=result, checkpoint=checkpoint)


def _downloaded(cb, trial, folder: Path) -> LayerFingerprint:
    folder.mkdir()
    client = MlflowClient(cb.tracking_uri)
    path = client.download_artifacts(cb._runs[trial.trial_id], ARTIFACT, str(folder))
    return LayerFingerprint.load(path)


def test_a_fingerprint_read_back_from_mlflow_compares_as_in_memory(callback, tmp_path):
    cb, _ = callback
    encoder, sample = pretrained(), batches()
    a, b = capture(encoder, sample), capture(reinitialised(encoder, 2), sample)
    trials = [_completed(tmp_path, "t1", 2, a), _completed(tmp_path, "t2", 3, b)]
    for trial in trials:
        cb.on_trial_complete(0, [], trial)
    assert not cb._pending
    read = [_downloaded(cb, t, tmp_path / f"down-{t.trial_id}") for t in trials]
    in_memory = compare(a, b)
    assert compare(*read) == in_memory
    assert in_memory["cka"][:3] == [1.0] * 3 and in_memory["cka"][3] < 1.0


def test_a_trial_completing_again_after_a_restart_logs_its_fingerprint_once(callback, tmp_path):
    cb, _ = callback
    trial = _completed(tmp_path, "t1", 2, capture(pretrained(), batches()))
    cb.on_trial_complete(0, [], trial)
    # a new driver unpickles the callback and restores the trial from the same final
    # checkpoint; the trial reports again and completes again
    again = pickle.loads(pickle.dumps(cb))
    calls: list[str] = []
    again.tracker.client = _Counting(again.tracker.client, calls)
    again.on_trial_complete(0, [], trial)
    run = again._runs[trial.trial_id]
    assert run == cb._runs[trial.trial_id]
    assert [f.path for f in MlflowClient(cb.tracking_uri).list_artifacts(run, "fingerprint")] == [
        ARTIFACT
    ]
    assert "list_artifacts" in calls and "log_artifact" not in calls


@pytest.mark.parametrize("kind", ["lost", "refused"])
def test_an_upload_that_failed_is_sent_once_the_store_answers(callback, tmp_path, kind):
    cb, flaky = callback
    fingerprint = capture(pretrained(), batches())
    trial = _completed(tmp_path, "t1", 2, fingerprint)
    flaky.faults = [("log_artifact", kind)]
    cb.on_trial_complete(0, [], trial)
    assert cb._pending  # queued behind the failed upload
    shutil.rmtree(tmp_path / "t1")  # the phase ends and deletes its trials' checkpoints
    cb._flush(force=True)
    assert not cb._pending
    read = _downloaded(cb, trial, tmp_path / "down")
    assert read.nbytes == fingerprint.nbytes
    assert compare(read, fingerprint)["attn_js"] == [0.0] * fingerprint.blocks


def test_a_trial_without_a_fingerprint_logs_none(callback, tmp_path):
    cb, _ = callback
    trial = _completed(tmp_path, "t1", 2, capture(pretrained(), batches()))
    trial.last_result["fingerprint_bytes"] = 0.0  # kept none: dynamics or fingerprint off
    cb.on_trial_complete(0, [], trial)
    run = cb._runs[trial.trial_id]
    assert MlflowClient(cb.tracking_uri).list_artifacts(run, "fingerprint") == []


class _Counting:
    """A client that records the names of the methods called on it."""

    def __init__(self, client, calls: list[str]):
        self.client, self.calls = client, calls

    def __getattr__(self, name: str):
        self.calls.append(name)
        return getattr(self.client, name)
