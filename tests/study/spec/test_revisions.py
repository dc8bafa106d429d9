"""`model: {hf: ID, revision: REV}`: accepted, checked in one line, recorded in the model
fingerprint and handed to every trial, whose loader passes it to from_pretrained; a local
folder (the only kind offline) is read as it is whatever the revision says."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel

from study.fingerprint import model_fingerprint
from study.plan import make_plan, trial_config
from study.spec import load_study
from tests.study.spec.study_files import one_line_error_test, write
from trainables.model.tagger import build_tagger

pytestmark = pytest.mark.usefixtures("offline")

BAD = [
    ("revision not text", {"model": {"hf": "owner/name", "revision": 3}},
     "model.revision: 3 is not allowed: a commit, tag or branch of the model, as text",
     "revision: 3"),
    ("unknown model key", {"model": {"hf": "owner/name", "revison": "main"}},
     "model.revison: unknown key 'revison' (did you mean 'revision'?)", "revison: main"),
    ("no hf", {"model": {"revision": "main"}}, "model.hf is missing", None),
]  # fmt: skip

test_bad_model_mappings_are_refused_in_one_line = one_line_error_test(BAD)


def test_a_pinned_revision_reaches_the_trials_the_fingerprint_and_from_pretrained(
    tmp_path, study, tiny_model, monkeypatch
):
    study["model"] = {"hf": str(tiny_model), "revision": "abc123"}
    spec = load_study(str(write(tmp_path, study)))
    assert (spec.model, spec.model_revision) == (str(tiny_model), "abc123")
    plan = make_plan(spec)
    config = trial_config(spec, plan.arms[0], {"lr": 1e-4}, 0)
    assert config["model_revision"] == "abc123"
    # a hub id is recorded with its revision; a local folder by its files' hash alone
    assert model_fingerprint("owner/name", "abc123") == "hub:owner/name@abc123"
    assert model_fingerprint(str(tiny_model), "abc123") == model_fingerprint(str(tiny_model))
    calls, real = [], AutoModel.from_pretrained
    monkeypatch.setattr(AutoModel, "from_pretrained",
                        lambda *a, **k: calls.append(k) or real(*a, **k))  # fmt: skip
    tagger, _ = build_tagger(config["model"], 3, generator=torch.Generator().manual_seed(0),
                             revision=config["model_revision"])  # fmt: skip
    assert calls[-1]["revision"] == "abc123"
    assert tagger.encoder.config.num_hidden_layers == 3  # the local folder, read as it is
