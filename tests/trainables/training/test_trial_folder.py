"""What a resumed trial takes from its folder when Tune's saved state is behind it: the final
checkpoint it already saved (a finished trial is not trained again) or the checkpoint that
replaced a deleted one; on a local disk and in a real S3-compatible bucket (moto's server)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from servers import S3_ENV, s3_server, s3_unavailable_reason

from trainables.training.trial_folder import FINAL_FILE, TrialFolder

FINAL = {"dev_f1": 0.41, "final": True}


def _write(fs: pafs.FileSystem, path: str, text: str) -> None:
    fs.create_dir(path.rsplit("/", 1)[0])
    with fs.open_output_stream(path) as stream:
        stream.write(text.encode())


def _trial(fs: pafs.FileSystem, root: str, full: list[int], final: int | None = None) -> str:
    """A trial folder with full checkpoints at `full` and the final one at `final`; Tune's own
    files beside them."""
    _write(fs, f"{root}/trial/result.json", "{}")
    _write(fs, f"{root}/trial/params.json", "{}")
    for index in full:
        _write(fs, f"{root}/trial/checkpoint_{index:06d}/weights.pt", "w")
    if final is not None:
        _write(fs, f"{root}/trial/checkpoint_{final:06d}/{FINAL_FILE}", json.dumps(FINAL))
    return f"{root}/trial"


def _cases(fs: pafs.FileSystem, root: str) -> None:
    trial = _trial(fs, f"{root}/finished", full=[3], final=4)
    # the state named the full checkpoint before the final one: the final result is taken
    final = f"{trial}/checkpoint_000004"
    assert TrialFolder(fs, trial, f"{trial}/checkpoint_000003").final_checkpoint() == final
    # ... or one Tune had already deleted, or the final itself
    assert TrialFolder(fs, trial, f"{trial}/checkpoint_000002").final_checkpoint() == final
    assert TrialFolder(fs, trial, final).final_checkpoint() == final

    trial = _trial(fs, f"{root}/running", full=[3, 4])
    named = TrialFolder(fs, trial, f"{trial}/checkpoint_000003")
    assert named.final_checkpoint() is None
    assert named.restore_point() == f"{trial}/checkpoint_000003"  # still there: Tune's choice
    # 3 deleted when 4 was registered; 5 was being uploaded when the driver died: 4 is taken
    fs.delete_dir(f"{trial}/checkpoint_000003")
    _write(fs, f"{trial}/checkpoint_000005/weights.pt", "cut short")
    assert TrialFolder(fs, trial, f"{trial}/checkpoint_000003").restore_point() == (
        f"{trial}/checkpoint_000004"
    )

    trial = _trial(fs, f"{root}/cut", full=[3])
    _write(fs, f"{trial}/checkpoint_000004/{FINAL_FILE}", '{"dev_f1": 0.4')  # cut short
    assert TrialFolder(fs, trial, f"{trial}/checkpoint_000003").final_checkpoint() is None

    # the state named no checkpoint (the trial's first was not yet in it): the final is found
    trial = _trial(fs, f"{root}/unnamed", full=[], final=1)
    assert TrialFolder(fs, trial, None).final_checkpoint() == f"{trial}/checkpoint_000001"
    assert TrialFolder(fs, trial, None).restore_point() is None
    # a fresh trial: nothing there yet
    fresh = TrialFolder(fs, f"{root}/fresh/trial", None)
    assert fresh.final_checkpoint() is None and fresh.restore_point() is None

    gone = TrialFolder(fs, f"{root}/nowhere/trial", f"{root}/nowhere/trial/checkpoint_000001")
    assert gone.final_checkpoint() is None
    assert gone.restore_point() == f"{root}/nowhere/trial/checkpoint_000001"  # Tune's error


def test_a_trial_folder_on_a_local_disk(tmp_path: Path):
    _cases(pafs.LocalFileSystem(), str(tmp_path))


@pytest.mark.skipif(s3_unavailable_reason() is not None, reason=str(s3_unavailable_reason()))
def test_a_trial_folder_in_an_s3_bucket(monkeypatch):
    for key, value in S3_ENV.items():
        monkeypatch.setenv(key, value)
    with s3_server() as server:
        server.create_bucket("studies")
        fs = pafs.S3FileSystem(endpoint_override=server.endpoint, scheme="http", region="us-east-1")
        _cases(fs, "studies/ray")
        server.stop()
        unreachable = TrialFolder(fs, "studies/ray/finished/trial", None)
        assert unreachable.final_checkpoint() is None  # what cannot be listed settles nothing
