"""`python -m study.export` on a real study: the folder a confirm trial kept reloads with
AutoModelForTokenClassification and scores the test set exactly as the trial did (its MLflow
`test_f1`); bad names are refused in one line.

The study is the shared finished study (tests/conftest.py), whose results this test only reads;
`--register` writes a model into a store, so the test works on its own copy of that store."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from mlflow.tracking import MlflowClient
from transformers import AutoModelForTokenClassification, AutoTokenizer

from tests.study_helpers import REPO, in_process, runs_by_kind, tracking_uri
from trainables.data.batching import collate, eval_batches
from trainables.data.encoding import decode, encode
from trainables.data.labels import LabelMap
from trainables.data.sources import load_checked_splits
from trainables.model.device import autocast
from trainables.settings.config import TrialConfig
from trainables.training.metrics import entity_scores

pytestmark = [pytest.mark.slow, pytest.mark.study]


def export(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """The command in its own process: for refusals, whose one line is what a person sees."""
    command = [sys.executable, "-m", "study.export", "teststudy",
               "--tracking-uri", tracking_uri(tmp_path), *args]  # fmt: skip
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)


def exported(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """The command's `main` in this process, for the exports that succeed: the same code
    without a fresh interpreter's seconds of imports (MLflow, torch, transformers) per export."""
    from study.export.__main__ import main

    return in_process(main, ["teststudy", "--tracking-uri", tracking_uri(tmp_path), *args])


def trial_config(params: dict[str, str]) -> TrialConfig:
    """The trial's settings as its run's params hold them (those it was given), the rest at
    their defaults."""
    names = {f.name for f in dataclasses.fields(TrialConfig)}
    return TrialConfig.from_dict({k: yaml.safe_load(v) for k, v in params.items() if k in names})


def test_f1_from_the_reloaded_folder(folder, corpus: dict[str, str], params: dict) -> float:
    """Test-set F1 of an exported folder, encoded, batched, decoded and scored by the
    trainable's own code, in the trial's precision."""
    cfg = trial_config(params)
    model = AutoModelForTokenClassification.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    labels = LabelMap.from_labels([model.config.id2label[i] for i in range(model.num_labels)])
    splits, trial_labels = load_checked_splits(dict(corpus))
    assert labels.labels == trial_labels.labels
    split = encode(splits.test, tokenizer, labels, max_length=cfg.max_length,
                   label_all_subwords=cfg.label_all_subwords)  # fmt: skip
    predictions = [None] * len(split.windows)
    lengths = [len(w) for w in split.windows]
    with torch.no_grad():
        for ids in eval_batches(lengths, cfg.eval_batch_tokens):
            batch = collate([split.windows[i] for i in ids], tokenizer.pad_token_id)
            with autocast(torch.device("cpu"), cfg.precision):
                logits = model(input_ids=batch["input_ids"],
                               attention_mask=batch["attention_mask"]).logits  # fmt: skip
            for row, i in enumerate(ids):
                predictions[i] = logits[row].argmax(-1).numpy()
    return entity_scores(split.gold, decode(split, predictions, labels)).f1


test_f1_from_the_reloaded_folder.__test__ = False  # a helper, not a test


def registered_model_is_the_folder(tmp_path, name: str, run_id: str, folder) -> None:
    """Version 1 of `name` names the trial run, and MLflow's transformers flavour loads from
    it the exported folder's weights and tokenizer, unchanged."""
    import mlflow.transformers

    client = MlflowClient(tracking_uri(tmp_path))
    assert client.get_model_version(name, "1").run_id == run_id
    assert client.get_run(run_id).info.status == "FINISHED"  # the trial run was not reopened
    mlflow.set_tracking_uri(tracking_uri(tmp_path))
    mlflow.set_registry_uri(tracking_uri(tmp_path))
    parts = mlflow.transformers.load_model(f"models:/{name}/1", return_type="components")
    exported = AutoModelForTokenClassification.from_pretrained(folder).state_dict()
    loaded = parts["model"].state_dict()
    assert exported.keys() == loaded.keys()
    assert all(torch.equal(exported[k], loaded[k]) for k in exported)
    assert parts["tokenizer"]("john lives in paris").input_ids == (
        AutoTokenizer.from_pretrained(folder)("john lives in paris").input_ids
    )


def copy_of_the_store(study: Path, folder: Path) -> None:
    """The study's MLflow store (its database and artifacts) copied into `folder`, each
    artifact location moved to the copy's, so that what a command writes there (a registered
    model, its files in the trial run) stays out of the shared study."""
    with (
        sqlite3.connect(study / "mlflow.db") as source,
        sqlite3.connect(folder / "mlflow.db") as copy,
    ):
        source.backup(copy)  # whole, write-ahead log included (the store runs in WAL mode)
    source.close()
    copy.close()
    shutil.copytree(study / "mlartifacts", folder / "mlartifacts")
    old, new = (study / "mlartifacts").as_uri(), (folder / "mlartifacts").as_uri()
    with sqlite3.connect(folder / "mlflow.db") as db:
        for table, column in (("experiments", "artifact_location"), ("runs", "artifact_uri"),
                              ("logged_models", "artifact_location")):  # fmt: skip
            db.execute(f"UPDATE {table} SET {column} = replace({column}, ?, ?)", (old, new))
    db.close()


def test_an_exported_confirm_trial_tags_the_test_set_as_the_trial_did(
    tmp_path, finished_study, tiny_corpus
):
    copy_of_the_store(finished_study[0], tmp_path)
    trials = {(r.data.tags["arm"], int(r.data.tags["seed"])): r
              for r in runs_by_kind(tmp_path)["trial"]
              if r.data.tags["phase"] == "confirm"}  # fmt: skip
    assert len(trials) == 4
    for (arm, seed), run in sorted(trials.items()):
        out = tmp_path / "exported" / f"{arm}-{seed}"
        result = exported(tmp_path, "--arm", arm, "--seed", str(seed), "--out", str(out))
        assert result.returncode == 0, result.stderr
        assert f"exported arm {arm} seed {seed} " in result.stdout
        config = json.loads((out / "config.json").read_text())
        # the tiny model's 3 blocks, less the last in arm depth=2
        assert f"depth={config['num_hidden_layers']}" == arm
        assert config["architectures"] == ["BertForTokenClassification"]
        f1 = test_f1_from_the_reloaded_folder(out, tiny_corpus, run.data.params)
        logged = run.data.metrics["test_f1"]
        print(f"{arm} seed {seed}: test_f1 from the exported folder {f1!r}, logged {logged!r}")
        assert f1 == pytest.approx(logged, abs=1e-6)
    arm, run = "depth=2", trials[("depth=2", 3)]
    out = tmp_path / "exported" / f"{arm}-3"
    # the best confirm trial by the study metric (dev_loss, min), never by test
    best = min(
        trials.values(), key=lambda r: (r.data.metrics["dev_loss"], int(r.data.tags["seed"]))
    )
    chosen = exported(tmp_path, "--best", "--out", str(tmp_path / "best"), "--register", "tagger")
    assert chosen.returncode == 0, chosen.stderr
    assert f"exported arm {best.data.tags['arm']} seed {best.data.tags['seed']} " in chosen.stdout
    assert (tmp_path / "best" / "model.safetensors").is_file()
    assert "registered as models:/tagger/1" in chosen.stdout
    registered_model_is_the_folder(tmp_path, "tagger", best.info.run_id, tmp_path / "best")
    # the folder the driver logged to the trial run
    client = MlflowClient(tracking_uri(tmp_path))
    assert {f.path for f in client.list_artifacts(run.info.run_id, "model")} >= {
        "model/config.json",
        "model/model.safetensors",
        "model/tokenizer.json",
    }

    # bad names: one line, exit 2, nothing written
    wrong_arm = export(tmp_path, "--arm", "depth=22", "--seed", "3", "--out", str(tmp_path / "x"))
    assert wrong_arm.returncode == 2
    assert "did you mean 'depth=2'?" in wrong_arm.stderr
    wrong_seed = export(tmp_path, "--arm", arm, "--seed", "9", "--out", str(tmp_path / "x"))
    assert wrong_seed.returncode == 2 and "its seeds: 2, 3" in wrong_seed.stderr
    wrong_study = subprocess.run(
        [sys.executable, "-m", "study.export", "nostudy", "--best",
         "--tracking-uri", tracking_uri(tmp_path)], cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert (
        wrong_study.returncode == 2 and "no MLflow experiment named 'nostudy'" in wrong_study.stderr
    )
    taken = export(tmp_path, "--arm", arm, "--seed", "3", "--out", str(out))
    assert taken.returncode == 2 and "is not an empty folder" in taken.stderr
    for failed in (wrong_arm, wrong_seed, wrong_study, taken):
        assert len(failed.stderr.strip().splitlines()) == 1, failed.stderr
    assert not (tmp_path / "x").exists()
