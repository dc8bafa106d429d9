"""What an exported tagger is, written beside its weights: `provenance.json` (the base model
and its fingerprint, the study, arm, seed and trial it came from, the code that trained it,
its labels and its longest input), and the tokenizer's `model_max_length`.

A folder copied away from MLflow otherwise says none of this: its config names the
architecture and labels, not which encoder it was cut from, on which seed, by which code.
`model_max_length` is the trial's `max_length`, the window it was trained and scored on (never
more than the model's positions; study/spec checks it): without it a tokenizer saved from a
hand-built vocabulary says "no limit", and a 400-word sentence reaches the position embeddings
as one sequence and fails inside the model with a tensor-size RuntimeError. With it,
transformers' token-classification pipeline truncates, and `tokenizer(..., truncation=True)`
does too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from study.export.choose import ChosenTrial, study_metric
from study.fingerprint import code_version
from study.names import CODE_TAG
from study.tracking.reading import StudyRecord, listed_code_versions
from trainables.settings import TrialConfig

PROVENANCE_FILE = "provenance.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
DEFAULT_MAX_LENGTH = TrialConfig.__dataclass_fields__["max_length"].default


def provenance(
    record: StudyRecord,
    chosen: ChosenTrial,
    params: dict[str, str],
    trial_tags: dict[str, str],
    labels: dict[str, str],
) -> dict[str, Any]:
    """The facts of one exported trial: `params` and `trial_tags` are its MLflow run's,
    `labels` the folder's id2label."""
    metric, mode = study_metric(record)
    revision = params.get("model_revision")
    return {
        "base_model": params.get("model") or record.tags.get("model"),
        "base_model_revision": None if revision in (None, "", "None", "null") else revision,
        "base_model_fingerprint": record.tags.get("model_fingerprint"),
        "study": record.name,
        "profile": record.tags.get("profile"),
        "study_run": record.run_id,
        "study_hash": record.tags.get("study_hash"),
        "arm": chosen.arm,
        "factors": record.arms.get(chosen.arm, {}),
        "seed": chosen.seed,
        "trial_run": chosen.run_id,
        "ray_trial_id": trial_tags.get("ray_trial_id"),
        "metric": {"name": metric, "mode": mode, "value": chosen.value},
        # the commit of the checkout that ran the study (+dirty when it had changes), or
        # the package version where the driver ran from an installed package
        "code_version": record.tags.get(CODE_TAG),
        "code_versions": listed_code_versions(record.tags),
        "exported_by": code_version(),
        "max_length": max_length(params),
        "id2label": labels,
        "data_fingerprint": record.tags.get("data_fingerprint"),
        "precision": record.tags.get("precision"),
    }


def max_length(params: dict[str, str]) -> int:
    """The trial's `max_length` (its param, or the trial settings' default it ran with)."""
    given = params.get("max_length")
    return int(float(given)) if given not in (None, "", "None") else DEFAULT_MAX_LENGTH


def write_provenance(folder: Path, facts: dict[str, Any]) -> None:
    """`provenance.json` into the exported folder, and its tokenizer's `model_max_length`
    set to the trial's `max_length`."""
    (folder / PROVENANCE_FILE).write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    config_file = folder / TOKENIZER_CONFIG
    config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    config["model_max_length"] = facts["max_length"]
    config_file.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def folder_labels(folder: Path) -> dict[str, str]:
    """The exported model's id2label, as its config.json holds it."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return {str(key): str(value) for key, value in (config.get("id2label") or {}).items()}
