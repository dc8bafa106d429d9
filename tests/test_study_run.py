"""Whole studies on a real Ray runtime and a real MLflow sqlite store, with the tiny model."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections import Counter, defaultdict
from pathlib import Path

import psutil
import pytest
from mlflow.tracking import MlflowClient

from tests.study_helpers import (
    REPO,
    metric_steps,
    run_study,
    runs_by_kind,
    study_command,
    tracking_uri,
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
    # ASHA compared within each arm: each arm's second sample (lr 1e-6, drawn after 3e-3; no
    # arm draws one sample twice) is stopped at the first rung, both seeds together
    for arm in {arm for arm, _ in statuses}:
        assert statuses[(arm, "0")] == {"completed"} and statuses[(arm, "1")] == {"pruned"}
        assert f"ASHA (arm {arm}): stopping sample 1, all 2 seeds, at epoch 1.00" in done.stderr


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
    assert "confirm: 2 arms x 1 samples x 2 seeds [2, 3] = 4 trials" in out.stdout
    assert "total: at most 12 trials" in out.stdout
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "ray_results").exists()


FINISHED = re.compile(
    r"(trial finished|trial already finished before the restart): "
    r"\[(\w+)\] arm (\S+) sample (\S+) seed (\S+): "
)


def _start_driver(study: Path, tmp: Path, *extra: str) -> subprocess.Popen:
    """The driver in its own process group, as a terminal runs it (Ctrl-C reaches the group)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        study_command(study, tmp, *extra), cwd=REPO, env=env, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _read_until(driver: subprocess.Popen, done, seen: list[str], timeout: float = 300) -> bool:
    """Read the driver's output into `seen` until `done(seen)` holds; False on exit or timeout."""
    deadline = time.time() + timeout
    for line in driver.stdout:
        seen.append(line)
        if done(seen):
            return True
        if time.time() > deadline:
            break
    return False


def _finished(
    lines: list[str], phase: str | None = None, kept: bool = False
) -> list[tuple[str, ...]]:
    """(phase, arm, sample, seed) of each trial that finished, or with `kept`, of each trial a
    restarted driver found already finished."""
    wanted = "trial already finished before the restart" if kept else "trial finished"
    keys = [m.groups() for m in map(FINISHED.search, lines) if m and m[1] == wanted]
    return [k[1:] for k in keys if phase is None or k[1] == phase]


def _assert_each_trial_ended_once(drivers: list[list[str]], n_trials: int) -> None:
    """Over the drivers' outputs, in order, every trial ended exactly once and none was trained
    again. A trial says `trial finished` in one driver and never later. One that ended in the
    instant before a kill (Tune had saved its final checkpoint, the driver not yet said so) is
    restored from that checkpoint by the next driver, which only re-reports its result and says
    `trial already finished before the restart`."""
    ended: dict[tuple[str, ...], int] = {}
    for i, lines in enumerate(drivers):
        for key in _finished(lines):
            assert key not in ended, (
                f"{key} finished in driver {ended[key] + 1} and again in {i + 1}"
            )
            ended[key] = i
        for key in _finished(lines, kept=True):
            assert i > 0, key  # the first driver restores nothing
            ended.setdefault(key, i)
    assert len(ended) == n_trials, sorted(ended)


def _kill(driver: subprocess.Popen, seen: list[str]) -> None:
    os.killpg(driver.pid, signal.SIGKILL)
    seen += driver.stdout.read().splitlines(keepends=True)  # what was already in the pipe
    driver.wait()
    _kill_session(driver.pid)


def _kill_session(session: int) -> None:
    """Whatever the killed driver started that outlived it, and nothing else: `ray stop` would
    also stop every other Ray on this machine."""
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getsid(proc.pid) == session:
                proc.kill()


def _assert_every_trial_once(tmp: Path, n_trials: int) -> None:
    runs = runs_by_kind(tmp)
    assert len(runs["study"]) == 1 and len(runs["arm"]) == 2
    keys = Counter(r.data.tags["trial_key"] for r in runs["trial"])
    assert len(keys) == n_trials and set(keys.values()) == {1}, keys  # one MLflow run each
    assert {r.data.tags["status"] for r in runs["trial"]} <= {"completed", "pruned"}
    client = MlflowClient(tracking_uri(tmp))
    for run in runs["trial"]:  # no evaluation logged twice after a restart
        steps = metric_steps(tmp, run.info.run_id, "dev_f1")
        assert len(steps) == len(set(steps))
        # a completed trial's layer fingerprint reached its run, whichever driver ended it
        fingerprints = [f.path for f in client.list_artifacts(run.info.run_id, "fingerprint")]
        completed = run.data.tags["status"] == "completed"
        assert fingerprints == (["fingerprint/fingerprint.safetensors"] if completed else [])
    assert runs["study"][0].data.tags["state"] == "finished"


def test_resume_after_two_sigkills_finishes_without_reruns_or_duplicates(
    tmp_path, tiny_model, tiny_corpus
):
    """12 trials; the driver and its Ray are killed mid-explore, then again mid-confirm."""
    study = write_study(tmp_path, str(tiny_model), tiny_corpus)
    first: list[str] = []
    driver = _start_driver(study, tmp_path)
    assert _read_until(driver, lambda seen: len(_finished(seen)) >= 3, first)
    _kill(driver, first)
    assert not _finished(first, "confirm")  # the first kill came during explore

    second: list[str] = []
    driver = _start_driver(study, tmp_path, "--resume")
    assert _read_until(driver, lambda seen: len(_finished(seen, "confirm")) >= 1, second)
    _kill(driver, second)
    assert any("resuming" in line for line in second)

    resumed = run_study(study, tmp_path, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    third = resumed.stderr.splitlines()
    _assert_each_trial_ended_once([first, second, third], 12)
    assert len(_finished(third, "confirm")) >= 1 and not _finished(third, "explore")
    _assert_every_trial_once(tmp_path, 12)


def test_ctrl_c_stops_saves_and_says_how_to_resume(tmp_path, tiny_model, tiny_corpus):
    study = write_study(tmp_path, str(tiny_model), tiny_corpus)
    seen: list[str] = []
    driver = _start_driver(study, tmp_path)
    assert _read_until(driver, lambda lines: len(_finished(lines)) >= 2, seen)
    os.killpg(driver.pid, signal.SIGINT)  # what Ctrl-C in the terminal sends
    try:
        seen += driver.stdout.read().splitlines(keepends=True)
        code = driver.wait(timeout=120)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    output = "".join(seen)
    assert code == 130, output[-3000:]
    assert f"python -m study.run {study.stem} --profile default --resume" in output
    assert "Traceback" not in output
    (state,) = (tmp_path / "ray_results" / "teststudy").glob("default-*/study.json")
    assert json.loads(state.read_text())["study_run"]
    (study_run,) = runs_by_kind(tmp_path)["study"]
    assert study_run.data.tags["state"] == "interrupted"

    resumed = run_study(study, tmp_path, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    _assert_each_trial_ended_once([seen, resumed.stderr.splitlines()], 12)
    _assert_every_trial_once(tmp_path, 12)


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


def test_confirm_rounds_add_seeds_and_survive_a_sigkill(tmp_path, tiny_model, tiny_corpus):
    """Sequential confirm: 2 held-out seeds, then 2 more while the comparison is open (margin
    0 rules out equivalence; 2 seeds cannot pass O'Brien-Fleming's first look). The driver is
    killed as round 1 starts; the resumed driver runs round 1 only, each trial once."""
    confirm = {"select": "best", "seeds": 2, "max_seeds": 4, "step": 2}
    phases = {"explore": {"samples": 2, "seeds": 2}, "confirm": confirm}
    analysis = {"primary": "dev_loss", "margin": 0.0}
    study = write_study(tmp_path, str(tiny_model), tiny_corpus, phases=phases, analysis=analysis)
    first: list[str] = []
    driver = _start_driver(study, tmp_path)
    assert _read_until(driver, lambda seen: "confirm round 1" in "".join(seen[-3:]), first)
    _kill(driver, first)
    assert any("confirm round 0: seeds [2, 3]" in line for line in first)
    assert any("after 2 units: continue" in line for line in first)

    resumed = run_study(study, tmp_path, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    second = resumed.stderr.splitlines()
    assert not any("confirm round 0" in line for line in second)
    assert any("confirm round 1: seeds [4, 5]" in line for line in second)
    _assert_each_trial_ended_once([first, second], 16)
    _assert_every_trial_once(tmp_path, 16)
    confirm_seeds = {
        r.data.tags["seed"] for r in runs_by_kind(tmp_path)["trial"]
        if r.data.tags["phase"] == "confirm"
    }  # fmt: skip
    assert confirm_seeds == {"2", "3", "4", "5"}  # held out: explore ran 0 and 1
    (state,) = (tmp_path / "ray_results" / "teststudy").glob("default-*/study.json")
    assert len(json.loads(state.read_text())["confirm_rounds"]) == 2
    report = (tmp_path / "reports" / "teststudy" / "README.md").read_text()
    assert "seeds after each look [2, 4]" in report and "## Verdicts (primary metric)" in report


def test_reused_explore_seeds_run_once_and_the_report_says_so(tmp_path, tiny_model, tiny_corpus):
    phases = {"explore": {"samples": 2, "seeds": 2},
              "confirm": {"select": "best", "seeds": 3, "reuse_explore_seeds": True}}  # fmt: skip
    study = write_study(tmp_path, str(tiny_model), tiny_corpus, phases=phases)
    done = run_study(study, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    trials = runs_by_kind(tmp_path)["trial"]
    confirm = [r for r in trials if r.data.tags["phase"] == "confirm"]
    assert {r.data.tags["seed"] for r in confirm} == {"2"}  # seeds 0 and 1 are not run again
    reused = [r for r in trials if r.data.tags.get("confirm_reused") == "true"]
    assert len(reused) == 4 and {r.data.tags["seed"] for r in reused} == {"0", "1"}
    assert {r.data.tags["phase"] for r in reused} == {"explore"}
    folder = tmp_path / "reports" / "teststudy"
    assert "**Confirm reuses explore seeds [0, 1]**" in (folder / "README.md").read_text()
    arms = (folder / "arms.csv").read_text().splitlines()
    assert all(",3," in row for row in arms[1:])  # n_seeds: 2 reused + 1 run


def test_data_seeds_cross_every_confirm_seed_and_split_the_variance(
    tmp_path, tiny_model, tiny_corpus
):
    phases = {"explore": {"samples": 2, "seeds": 2},
              "confirm": {"select": "best", "seeds": 2, "data_seeds": 2}}  # fmt: skip
    analysis = {"primary": "dev_loss", "margin": 0.01}
    study = write_study(tmp_path, str(tiny_model), tiny_corpus, phases=phases, analysis=analysis,
                        fixed={"epochs": 2, "batch_size": 16, "max_length": 32,
                               "data_fraction": 0.5})  # fmt: skip
    done = run_study(study, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    confirm = [r for r in runs_by_kind(tmp_path)["trial"] if r.data.tags["phase"] == "confirm"]
    units = Counter((r.data.tags["arm"], r.data.tags["seed"], r.data.tags["data_seed"])
                    for r in confirm)  # fmt: skip
    assert len(units) == 8 and set(units.values()) == {1}  # 2 arms x seeds 2-3 x data 0-1
    assert {r.data.params["data_seed"] for r in confirm} == {"0", "1"}
    folder = tmp_path / "reports" / "teststudy"
    text = (folder / "README.md").read_text()
    assert "crossed with 2 data seeds" in text and "Seed variance split" in text
    split = (folder / "variance_split.csv").read_text()
    assert "init_share" in split and "depth=3" in split
    comparisons = (folder / "comparisons.csv").read_text()
    assert "2/0 2/1 3/0 3/1" in comparisons  # the paired units are (seed, data seed)


def test_confirm_rounds_stop_once_every_comparison_is_decided(tmp_path, tiny_model, tiny_corpus):
    """A margin far wider than the arms' difference: equivalence is shown at the first look,
    so the second round never runs and the report gives the verdict of that look."""
    confirm = {"select": "best", "seeds": 2, "max_seeds": 4, "step": 2}
    phases = {"explore": {"samples": 2, "seeds": 2}, "confirm": confirm}
    analysis = {"primary": "dev_loss", "margin": 10.0}
    study = write_study(tmp_path, str(tiny_model), tiny_corpus, phases=phases, analysis=analysis)
    done = run_study(study, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "after 2 units: equivalent" in done.stderr
    assert "confirm round 1" not in done.stderr
    confirm_seeds = {
        r.data.tags["seed"] for r in runs_by_kind(tmp_path)["trial"]
        if r.data.tags["phase"] == "confirm"
    }  # fmt: skip
    assert confirm_seeds == {"2", "3"}
    assert "(1 primary comparison(s) on dev_loss: depth=2 vs depth=3: equivalent)" in done.stdout
