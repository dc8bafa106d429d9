"""`python -m trainables` trains one trial end to end in its own process, and its older name
`python -m trainables` is the same command: same output files, same numbers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.study_helpers import REPO


def run_command(module: str, config, folder) -> tuple[subprocess.CompletedProcess, list[dict]]:
    folder.mkdir()
    metrics = folder / "metrics.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", module, "--config", str(config), "--set", "max_steps=12",
         "--checkpoint-dir", str(folder / "ckpt"), "--metrics-out", str(metrics)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = metrics.read_text().splitlines() if metrics.exists() else []
    return done, [json.loads(line) for line in lines]


@pytest.mark.slow  # over ~7 s: the slow tier
def test_python_m_trainables_runs_a_trial(trial_settings, tmp_path):
    config = tmp_path / "trial.yaml"
    config.write_text(yaml.safe_dump(trial_settings))
    new = tmp_path / "new"
    done, history = run_command("trainables", config, new)
    assert done.returncode == 0, done.stderr
    assert "dev F1" in done.stdout and "steps 12" in done.stdout
    assert [m["step"] for m in history] == [6, 12] and history[-1]["final"] == 1.0


@pytest.mark.slow  # over ~7 s: the slow tier
def test_python_m_trainables_refuses_bad_input_in_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "trainables", "--set", "lr"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == "error: --set 'lr': expected KEY=VALUE"
