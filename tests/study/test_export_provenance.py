"""An exported tagger says what it is (study/export/provenance.py): `provenance.json` beside
the weights names its base model, study, arm, seed, trial run, code and labels, and the
tokenizer's `model_max_length` is the trial's `max_length`, so transformers' pipeline
truncates a 400-word sentence where it failed with a tensor-size RuntimeError before. The
command itself writes it against a real store in tests/test_documented_commands.py."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
from transformers import AutoTokenizer, pipeline

from study.export.choose import ChosenTrial
from study.export.provenance import (
    DEFAULT_MAX_LENGTH,
    PROVENANCE_FILE,
    folder_labels,
    provenance,
    write_provenance,
)
from study.tracking.reading import StudyRecord
from tests.tiny import tiny_model_folder
from trainables.data.labels import LabelMap
from trainables.model.export import save_hf_folder
from trainables.model.tagger import build_tagger

LABELS = LabelMap(["O", "B-LOC", "I-LOC", "B-PER", "I-PER"])
ARM = "depth=1,data_fraction=1"
RECORD = StudyRecord(
    name="ner_depth", run_id="study-run-1", tracking_uri="sqlite:///x",
    tags={"model": "tiny", "model_fingerprint": "builtin:tiny", "profile": "smoke",
          "code_version": "0123456789ab", "code_versions": '["0123456789ab", "ba9876543210"]',
          "study_hash": "f" * 64, "precision": "fp32", "data_fingerprint": "wnut16"},
    plan={"grid": {"depth": ["full-1"]}, "metric": {"name": "dev_loss", "mode": "min"}},
    arms={ARM: {"depth": 1, "data_fraction": 1.0}}, arm_runs={}, trials=pd.DataFrame(),
)  # fmt: skip
CHOSEN = ChosenTrial(run_id="trial-run-7", arm=ARM, seed=2, metric="dev_loss", value=0.75)
LONG = " ".join(["john lives in paris"] * 100)  # 400 words


@pytest.fixture
def exported(tmp_path):
    """A tagger saved as a trial saves it (trainables/model/export.py), before the export."""
    base = tiny_model_folder(tmp_path, "bert", layers=2)
    tagger, tokenizer = build_tagger(str(base), len(LABELS.labels),
                                     generator=torch.Generator().manual_seed(0))  # fmt: skip
    folder = tmp_path / "export"
    save_hf_folder(tagger, tokenizer, LABELS, folder)
    return folder


def test_the_provenance_file_names_what_the_tagger_is(exported):
    params = {"model": "/cache/tiny-bert-4", "max_length": "64", "seed": "2", "lr": "1e-3"}
    facts = provenance(RECORD, CHOSEN, params, {"ray_trial_id": "a1b2c_00003"},
                       folder_labels(exported))  # fmt: skip
    write_provenance(exported, facts)
    written = json.loads((exported / PROVENANCE_FILE).read_text())
    assert written["base_model"] == "/cache/tiny-bert-4"
    assert written["base_model_revision"] is None
    assert written["base_model_fingerprint"] == "builtin:tiny"
    assert (written["study"], written["profile"], written["study_run"]) == (
        "ner_depth",
        "smoke",
        "study-run-1",
    )
    assert (written["arm"], written["factors"], written["seed"]) == (ARM, RECORD.arms[ARM], 2)
    assert (written["trial_run"], written["ray_trial_id"]) == ("trial-run-7", "a1b2c_00003")
    assert written["metric"] == {"name": "dev_loss", "mode": "min", "value": 0.75}
    assert written["code_version"] == "0123456789ab"
    assert written["code_versions"] == ["0123456789ab", "ba9876543210"]
    assert written["exported_by"]
    assert written["max_length"] == 64
    assert written["id2label"] == {str(i): label for i, label in enumerate(LABELS.labels)}
    assert AutoTokenizer.from_pretrained(exported).model_max_length == 64


def test_a_trial_without_max_length_gets_the_default(exported):
    facts = provenance(RECORD, CHOSEN, {"model_revision": "v1.2"}, {}, folder_labels(exported))
    assert facts["max_length"] == DEFAULT_MAX_LENGTH == 128
    assert facts["base_model"] == "tiny" and facts["base_model_revision"] == "v1.2"


def test_a_long_sentence_is_truncated_not_a_runtime_error(exported):
    tagger = pipeline("token-classification", model=str(exported))
    with pytest.raises(RuntimeError, match="size of tensor"):  # the folder as a trial saves it
        tagger(LONG)
    facts = provenance(RECORD, CHOSEN, {"max_length": "64"}, {}, folder_labels(exported))
    write_provenance(exported, facts)
    tagged = pipeline("token-classification", model=str(exported))(LONG)
    assert isinstance(tagged, list)
    assert all(entity["end"] <= len(LONG) for entity in tagged)
    tokenizer = AutoTokenizer.from_pretrained(exported)
    assert len(tokenizer(LONG, truncation=True).input_ids) == 64
