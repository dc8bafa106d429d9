"""Whole studies on a real Ray runtime and a real MLflow sqlite store, with the tiny model."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tests.study_helpers import (
    REPO,
    metric_steps,
    run_study,
    runs_by_kind,
    study_command,
    write_study,
)

pytestmark = pytest.mark.study


def _trials(runs):
    return [r for r in runs["trial"]]


def test_mlflow_tree_is_study_then_arms_then_trials(finished_study):
    tmp, _ = finished_study
    runs = runs_by_kind(tmp)
    (study_run,) = runs["study"]
    arms = {r.info.run_id: r for r in runs["arm"]}
    assert len(arms) == 2
    assert all(r.data.tags["mlflow.parentRunId"] == study_run.info.run_id for r in arms.values())
    trials = _trials(runs)
    # explore: 2 arms x 2 samples x 2 seeds; confirm: 2 arms x 1 sample x 2 seeds
    phases = Counter(r.data.tags["phase"] for r in trials)
    assert phases == {"explore": 8, "confirm": 4}
    for run in trials:
        parent = arms[run.data.tags["mlflow.parentRunId"]]
        assert parent.data.tags["arm"] == run.data.tags["arm"]
    assert study_run.data.tags["state"] == "finished"
    for tag in ("code_version", "model_fingerprint", "data_fingerprint", "plan", "profile"):
        assert study_run.data.tags[tag]


def test_trial_runs_carry_factors_steps_and_status(finished_study):
    tmp, _ = finished_study
    for run in _trials(runs_by_kind(tmp)):
        params, tags = run.data.params, run.data.tags
        for factor in ("lr", "depth", "seed", "epochs", "arm", "phase"):
            assert factor in params, factor
        assert tags["ray_trial_id"] and tags["seed"] == params["seed"]
        assert tags["status"] in {"completed", "pruned"}
        steps = metric_steps(tmp, run.info.run_id, "dev_f1")
        assert steps == sorted(set(steps)) and len(steps) >= 1  # one point per evaluation
        if tags["status"] == "completed":
            assert len(steps) == 4 and "test_f1" in run.data.metrics
        else:
            assert run.data.tags["phase"] == "explore" and len(steps) < 4


def test_confirm_phase_is_never_pruned_and_uses_best_explore_lr(finished_study):
    tmp, _ = finished_study
    trials = _trials(runs_by_kind(tmp))
    confirm = [r for r in trials if r.data.tags["phase"] == "confirm"]
    assert {r.data.tags["status"] for r in confirm} == {"completed"}
    explore_lrs = defaultdict(set)
    for r in trials:
        if r.data.tags["phase"] == "explore":
            explore_lrs[r.data.tags["arm"]].add(r.data.params["lr"])
    for r in confirm:
        assert r.data.params["lr"] in explore_lrs[r.data.tags["arm"]]
    # paired: every confirm seed ran in every arm
    seeds_per_arm = defaultdict(set)
    for r in confirm:
        seeds_per_arm[r.data.tags["arm"]].add(r.data.tags["seed"])
    assert len(set(map(frozenset, seeds_per_arm.values()))) == 1


def test_pruning_keeps_seeds_together_and_inside_arms(finished_study):
    tmp, done = finished_study
    explore = [r for r in _trials(runs_by_kind(tmp)) if r.data.tags["phase"] == "explore"]
    by_sample = defaultdict(list)
    for r in explore:
        by_sample[(r.data.tags["arm"], r.data.tags["sample"])].append(r)
    statuses = {key: {r.data.tags["status"] for r in rs} for key, rs in by_sample.items()}
    assert all(len(s) == 1 for s in statuses.values()), statuses  # never split
    # every sample's seeds share one lr, and each sample lives in one arm
    assert all(len({r.data.params["lr"] for r in rs}) == 1 for rs in by_sample.values())
    # ASHA compared within each arm: arm 0's second sample (lr 1e-6) is stopped, both seeds;
    # arm 1's two samples tie (same lr) and both complete. Across arms nothing is compared.
    arm0, arm1 = sorted({arm for arm, _ in statuses}, key=lambda a: a != "depth=3")
    assert statuses[(arm0, "0")] == {"completed"} and statuses[(arm0, "1")] == {"pruned"}
    assert statuses[(arm1, "0")] == statuses[(arm1, "1")] == {"completed"}
    assert f"ASHA (arm {arm0}): stopping sample 1, all 2 seeds, at epoch 1.00" in done.stderr


def test_progress_lines_and_summary_are_printed(finished_study):
    _, done = finished_study
    finished_lines = [line for line in done.stderr.splitlines() if "trial finished:" in line]
    assert len(finished_lines) == 12
    assert "confirm phase, mean ± std over seeds" in done.stdout
    arm_lines = [line for line in done.stdout.splitlines() if line.startswith("  depth=")]
    assert len(arm_lines) == 2  # the study metric (dev_loss) is shown beside dev/test F1
    assert all("dev_f1 " in line and "dev_loss " in line and "(n=2)" in line for line in arm_lines)


def test_dry_run_prints_the_plan_without_running(tmp_path, tiny_model, tiny_corpus):
    study = write_study(tmp_path, str(tiny_model), tiny_corpus)
    out = subprocess.run(
        study_command(study, tmp_path, "--dry-run"), cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "explore: 2 arms x 2 samples x 2 seeds [0, 1] = 8 trials" in out.stdout
    assert "confirm: 2 arms x 1 samples x 2 seeds [0, 1] = 4 trials" in out.stdout
    assert "total: 12 trials" in out.stdout
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "ray_results").exists()


def test_resume_after_sigkill_finishes_without_duplicates(tmp_path, tiny_model, tiny_corpus):
    study = write_study(tmp_path, str(tiny_model), tiny_corpus)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    driver = subprocess.Popen(
        study_command(study, tmp_path), cwd=REPO, env=env, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    finished = 0
    deadline = time.time() + 300
    for line in driver.stdout:  # kill once a few trials have finished, mid-explore
        finished += "trial finished:" in line
        if finished >= 3 or time.time() > deadline:
            break
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    assert finished >= 3
    subprocess.run(["ray", "stop", "--force"], capture_output=True)  # leftovers of the kill
    resumed = run_study(study, tmp_path, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    runs = runs_by_kind(tmp_path)
    assert len(runs["study"]) == 1 and len(runs["arm"]) == 2
    keys = Counter(r.data.tags["trial_key"] for r in runs["trial"])
    assert len(keys) == 12 and set(keys.values()) == {1}, keys  # every trial once
    assert {r.data.tags["status"] for r in runs["trial"]} <= {"completed", "pruned"}
    for run in runs["trial"]:  # no evaluation logged twice after the restart
        steps = metric_steps(tmp_path, run.info.run_id, "dev_f1")
        assert len(steps) == len(set(steps))
    assert runs["study"][0].data.tags["state"] == "finished"


def test_resume_without_an_earlier_run_is_a_clear_error(tmp_path, tiny_model, tiny_corpus):
    study = write_study(tmp_path, str(tiny_model), tiny_corpus)
    out = run_study(study, tmp_path, "--resume")
    assert out.returncode == 2
    assert out.stderr.strip().startswith("error: --resume: no earlier run of study teststudy")
    assert not (tmp_path / "mlflow.db").exists()  # refused before anything was written


def test_unknown_study_lists_known_ones(tmp_path):
    out = subprocess.run(
        study_command(Path("no_such_study"), tmp_path), cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 2
    assert "ner_depth" in out.stderr and len(out.stderr.strip().splitlines()) == 1
