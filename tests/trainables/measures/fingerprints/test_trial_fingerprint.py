"""A trial keeps a layer fingerprint of its final encoder: deterministic given its seed, in its
saved state and its final Tune checkpoint, capped or switched off by its settings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trainables.errors import ConfigError
from trainables.measures.fingerprints import FILE_NAME, LayerFingerprint
from trainables.measures.fingerprints.compare import compare
from trainables.settings.config import TrialConfig
from trainables.training.train import Trial
from trainables.training.trial_folder import MODEL_FOLDER
from trainables.tune_adapter import FINAL_FILE, staged_checkpoint

BLOCKS = 3  # the tiny model of conftest


def finished(settings: dict) -> tuple[Trial, dict]:
    trial = Trial(TrialConfig.from_dict(settings))
    return trial, list(trial.run())[-1]


def test_two_trials_with_the_same_seed_keep_identical_fingerprints(trial_settings):
    (a, final), (b, _) = finished(trial_settings), finished(trial_settings)
    assert a.fingerprint.shapes() == b.fingerprint.shapes()
    for name in a.fingerprint.tensors:
        assert np.array_equal(a.fingerprint.tensors[name], b.fingerprint.tensors[name]), name
    assert compare(a.fingerprint, b.fingerprint) == {
        "cka": [1.0] * (BLOCKS + 1), "svcca": [0.0] * (BLOCKS + 1), "attn_js": [0.0] * BLOCKS
    }  # fmt: skip
    # its size and sentences are stated with the final metrics; the dev set has 24
    assert final["fingerprint_bytes"] == a.fingerprint.nbytes > 0
    assert final["fingerprint_sentences"] == a.fingerprint.sentences == 24
    assert final["fingerprint_s"] > 0
    other, _ = finished(trial_settings | {"seed": 4})
    moved = compare(a.fingerprint, other.fingerprint)
    assert moved["cka"][-1] < 1.0 and moved["attn_js"][-1] > 0.0


def test_the_final_state_and_the_final_tune_checkpoint_hold_it(trial_settings, tmp_path):
    trial, final = finished(trial_settings)
    trial.save(tmp_path)
    saved = LayerFingerprint.load(tmp_path / FILE_NAME)
    assert compare(saved, trial.fingerprint)["cka"] == [1.0] * (BLOCKS + 1)
    with staged_checkpoint(trial, final) as directory:
        files = {p.name for p in Path(directory).iterdir()}
        # no optimizer state, which a finished trial needs no more; its model for study.export
        assert files == {FINAL_FILE, FILE_NAME, MODEL_FOLDER}
        assert LayerFingerprint.load(Path(directory) / FILE_NAME).nbytes == trial.fingerprint.nbytes


def test_a_cap_keeps_fewer_sentences_and_off_keeps_none(trial_settings):
    capped, final = finished(trial_settings | {"fingerprint_max_bytes": "40kB"})
    assert 0 < capped.fingerprint.sentences < 24
    assert final["fingerprint_bytes"] <= 40_000
    assert capped.fingerprint.meta["sample_sentences"] == "24"
    for off in ({"fingerprint": False}, {"fingerprint": "off"}, {"dynamics": "off"}):
        trial, final = finished(trial_settings | off)
        assert trial.fingerprint is None and "fingerprint_bytes" not in final
    tiny_cap, final = finished(trial_settings | {"fingerprint_max_bytes": 100})
    assert tiny_cap.fingerprint is None and final["fingerprint_bytes"] == 0


@pytest.mark.parametrize(
    ("settings", "message"),
    [({"fingerprint_max_bytes": "20 parsecs"}, "fingerprint_max_bytes='20 parsecs' is not "
      "allowed: expected a size such as 20MB"),
     ({"fingerprint": "sometimes"},
      "fingerprint='sometimes' is not allowed: expected true or false")],
)  # fmt: skip
def test_bad_fingerprint_settings_are_one_line(settings, message):
    with pytest.raises(ConfigError, match=message):
        TrialConfig.from_dict(settings)
