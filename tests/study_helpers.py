"""Helpers for tests that run whole studies: a study file on the tiny model, the driver as a
real subprocess, and readers of the MLflow store it wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml
from mlflow.tracking import MlflowClient

REPO = Path(__file__).resolve().parent.parent


def write_study(folder: Path, model: str, corpus: dict[str, str], **overrides: Any) -> Path:
    """A 2-arm study on the tiny model: explore 2 samples x 2 seeds with ASHA, confirm 2 seeds."""
    study = {
        "description": "test study",
        "model": model,
        "data": dict(corpus),
        "grid": {"depth": ["full", "full-1"]},
        # Each arm draws 3e-3 first, then 1e-6 (no arm runs one sample twice), so its second
        # sample is clearly worse at the first rung and ASHA must stop it.
        "search": {"lr": {"type": "categorical", "choices": [1.0e-6, 3.0e-3]}},
        "metric": {"name": "dev_loss", "mode": "min"},
        "fixed": {"epochs": 4, "batch_size": 16, "max_length": 32},
        "seeds": 2,
        "phases": {
            "explore": {
                "samples": 2,
                "seeds": 2,
                "asha": {"grace_period": 1, "reduction_factor": 2},
            },
            "confirm": {"select": "best", "seeds": 2},
        },
        "resources": {"cpu": 1, "gpu": 0},
        "max_failures": 0,
    }
    study.update(overrides)
    path = folder / "teststudy.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def study_command(study: Path, tmp: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "study.run", str(study), "--profile", "default",
        "--storage", str(tmp / "ray_results"), "--tracking-uri", tracking_uri(tmp),
        "--num-cpus", "2", "--reports", str(tmp / "reports"), *extra,
    ]  # fmt: skip


def tracking_uri(tmp: Path) -> str:
    return f"sqlite:///{tmp / 'mlflow.db'}"


def run_study(
    study: Path, tmp: Path, *extra: str, timeout: int = 600
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_DEDUP_LOGS": "0"}
    return subprocess.run(
        study_command(study, tmp, *extra),
        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def runs_by_kind(tmp: Path, experiment: str = "teststudy") -> dict[str, list]:
    client = MlflowClient(tracking_uri(tmp))
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=10000)
    out: dict[str, list] = defaultdict(list)
    for run in runs:
        out[run.data.tags.get("run_kind", "?")].append(run)
    return out


def metric_steps(tmp: Path, run_id: str, key: str) -> list[int]:
    client = MlflowClient(tracking_uri(tmp))
    return [m.step for m in client.get_metric_history(run_id, key)]


def optuna_trials(tmp: Path) -> dict[str, list]:
    """Each Optuna study in the storage beside the MLflow store, by name: its trials."""
    import optuna

    url = f"sqlite:///{tmp / 'optuna.db'}"
    return {
        name: optuna.load_study(study_name=name, storage=url).trials
        for name in optuna.get_all_study_names(url)
    }
