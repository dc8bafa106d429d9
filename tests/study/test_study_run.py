"""Whole studies on a real Ray runtime and a real MLflow sqlite store, with the tiny model (the
driver's bookkeeping that reads nothing of a model, on its synthetic twin)."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from study.names import DRIVERS_TAG, WALL_TAG
from tests.study_helpers import (
    assert_each_trial_ended_once,
    assert_every_trial_once,
    driver_tracebacks,
    finished_trials,
    kill_driver,
    metric_steps,
    optuna_trials,
    read_until,
    run_in_process,
    run_study,
    runs_by_kind,
    start_driver,
    study_command,
    tracking_uri,
    write_study,
    write_synthetic_twin,
)
from trainables.settings.precision import host_has_native_bf16

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
    code = study_run.data.tags["code_version"]
    assert json.loads(study_run.data.tags["code_versions"]) == [code]
    # auto, resolved once by the driver from this host's CPU: every trial ran in it
    assert study_run.data.tags["precision"] == ("bf16" if host_has_native_bf16() else "fp32")
    assert {r.data.params["precision"] for r in trials} == {study_run.data.tags["precision"]}


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
    # not a terminal: the progress line is logged at the end of each phase (and once a
    # minute, so a slow machine logs more lines between: the last is confirm's end), and
    # Ray's own tables, trial names and checkpoint lines stay out (--verbose shows them)
    progress = [line for line in done.stderr.splitlines() if "study.progress: progress:" in line]
    assert len(progress) >= 2, done.stderr[-3000:]
    assert any("explore 8/8 | confirm 0/4 | best depth=" in line for line in progress)
    assert re.search(r"explore 8/8 \| confirm 4/4 \| best depth=\d: dev_loss [\d.]+ \| "
                     r"(\d+m)?\d+s, ETA 0s$", progress[-1]), progress[-1]  # fmt: skip
    output = done.stdout + done.stderr
    for ray_line in ("Checkpoint successfully created", "Trial status", "train_tagger_",
                     "Configuration for experiment", "Token authentication is"):  # fmt: skip
        assert ray_line not in output, ray_line
    assert "confirm phase, mean ± std over seeds" in done.stdout
    arm_lines = [line for line in done.stdout.splitlines() if line.startswith("  depth=")]
    assert len(arm_lines) == 2  # the study metric (dev_loss) is shown beside dev/test F1
    assert all("dev_f1 " in line and "dev_loss " in line and "(n=2)" in line for line in arm_lines)


def test_the_study_run_records_overrides_the_merged_study_and_optuna_studies(finished_study):
    tmp, _ = finished_study
    (study_run,) = runs_by_kind(tmp)["study"]
    tags = study_run.data.tags
    assert json.loads(tags["overrides"]) == ["fixed.max_length=32"]
    (tmp / "downloaded").mkdir(exist_ok=True)
    local = MlflowClient(tracking_uri(tmp)).download_artifacts(
        study_run.info.run_id, "study.yaml", str(tmp / "downloaded")
    )
    merged = yaml.safe_load(Path(local).read_text())
    assert merged["fixed"]["max_length"] == 32 and merged["phases"]["confirm"]["seeds"] == 2
    assert tags["optuna_storage"] == f"sqlite:///{tmp}/optuna.db"
    studies = optuna_trials(tmp)
    assert {name.rsplit("/", 1)[-1] for name in studies} == {"depth=3", "depth=2"}
    for name, trials in studies.items():
        assert name.startswith("teststudy/default-") and "/explore/" in name
        assert tags["optuna_studies"].replace("<arm>", name.rsplit("/", 1)[-1]) == name
        # sample 0 (lr 3e-3) completed, sample 1 (lr 1e-6) pruned at the first rung, as ASHA
        # decided in MLflow; each with the seed-mean dev_loss at each evaluation
        done, pruned = sorted(trials, key=lambda t: t.user_attrs["sample"])
        assert (done.state.name, pruned.state.name) == ("COMPLETE", "PRUNED")
        assert done.params == {"lr": 3e-3} and len(done.intermediate_values) == 4
        assert done.value == pytest.approx(done.intermediate_values[3])
        assert 1 <= len(pruned.intermediate_values) < 4


def test_dry_run_prints_the_plan_without_running(tmp_path, tiny_model, tiny_corpus):
    study = write_study(tmp_path, str(tiny_model), tiny_corpus)
    code, out, err = run_in_process(study_command(study, tmp_path, "--dry-run"))
    assert code == 0, err
    assert "explore: 2 arms x 2 samples x 2 seeds [0, 1] = 8 trials" in out
    assert "confirm: 2 arms x 1 samples x 2 seeds [2, 3] = 4 trials" in out
    assert "total: at most 12 trials" in out
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "ray_results").exists()


def test_resume_after_two_sigkills_finishes_without_reruns_or_duplicates(
    tmp_path, tiny_model, tiny_corpus
):
    """12 trials; the driver and its Ray are killed mid-explore, then again mid-confirm. The
    run was started with an override, and each resume gives the same one.

    On the tiny model, not the synthetic twin: a trial that starts and ends between two saves
    of Tune's experiment state is not in the state the resume reads, so it runs again
    (docs/reliability.md), and "no trial trained twice" fails. Tiny trials outlast the time
    between saves; the twin's did not (trials of 1.2 s and of 6 s, killed right after one
    finished: it ran again after the first resume)."""
    study = write_study(tmp_path, str(tiny_model), tiny_corpus)
    same = ("--set", "max_failures=0")
    first: list[str] = []
    driver = start_driver(study, tmp_path, *same)
    assert read_until(driver, lambda seen: len(finished_trials(seen)) >= 3, first)
    kill_driver(driver, first)
    assert not finished_trials(first, "confirm")  # the first kill came during explore

    second: list[str] = []
    driver = start_driver(study, tmp_path, "--resume", *same)
    assert read_until(driver, lambda seen: len(finished_trials(seen, "confirm")) >= 1, second)
    kill_driver(driver, second)
    assert any("resuming" in line for line in second)

    resumed = run_study(study, tmp_path, "--resume", *same)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    third = resumed.stderr.splitlines()
    assert_each_trial_ended_once([first, second, third], 12)
    assert len(finished_trials(third, "confirm")) >= 1 and not finished_trials(third, "explore")
    assert_every_trial_once(tmp_path, 12)
    assert "Trial status" not in resumed.stdout  # a restored phase is as quiet as a new one
    # the killed drivers wrote their time while their trials ran: it counts, and so do they
    (study_run,) = runs_by_kind(tmp_path)["study"]
    assert study_run.data.tags[DRIVERS_TAG] == "3"
    assert float(study_run.data.tags[WALL_TAG]) > 0
    # each arm's Optuna study holds its two samples once, however often the driver restarted
    for trials in optuna_trials(tmp_path).values():
        current = [t for t in trials if not t.user_attrs.get("superseded")]
        assert sorted(t.user_attrs["sample"] for t in current) == [0, 1]
        assert all(t.state.is_finished() for t in trials)


def _stopped_after_two_trials(
    study: Path, tmp_path: Path, seen: list[str], signum: int, group: bool
) -> tuple[int, str]:
    """Start the driver, send `signum` (to its process group, or to it alone) once two trials
    ended, and read it to its end: its exit code and all it printed (`seen` holds the lines)."""
    driver = start_driver(study, tmp_path)
    assert read_until(driver, lambda lines: len(finished_trials(lines)) >= 2, seen)
    if group:
        os.killpg(driver.pid, signum)
    else:
        driver.send_signal(signum)
    try:
        seen += driver.stdout.read().splitlines(keepends=True)
        code = driver.wait(timeout=120)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    return code, "".join(seen)


def test_ctrl_c_stops_saves_and_says_how_to_resume(tmp_path):
    """The driver's Ctrl-C, its resume and the report's header, on the synthetic twin of the
    tiny study."""
    study = write_synthetic_twin(tmp_path)
    seen: list[str] = []
    # what Ctrl-C in the terminal sends: SIGINT to the driver's process group
    code, output = _stopped_after_two_trials(study, tmp_path, seen, signal.SIGINT, group=True)
    assert code == 130, output[-3000:]
    assert f"python -m study.run {study.stem} --profile default --resume" in output
    assert not driver_tracebacks(output), output[-3000:]
    # the study's words for Tune's stop, and no Tune resume call beside the study's command
    assert "stopping: the running trials end" in output, output[-3000:]
    assert "Stop signal received" not in output and "Tuner.restore" not in output
    # the last progress line counts the trials that ended, not those Ctrl-C stopped
    ended = sum("trial finished: [explore]" in line for line in seen)
    last = [line for line in seen if "study.progress: progress:" in line][-1]
    assert f"explore {ended}/8 |" in last, last
    (state,) = (tmp_path / "ray_results" / "teststudy").glob("default-*/study.json")
    assert json.loads(state.read_text())["study_run"]
    (study_run,) = runs_by_kind(tmp_path)["study"]
    assert study_run.data.tags["state"] == "interrupted"
    first_wall = float(study_run.data.tags[WALL_TAG])
    assert first_wall > 0 and study_run.data.tags[DRIVERS_TAG] == "1"

    started = time.time()
    resumed = run_study(study, tmp_path, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_each_trial_ended_once([seen, resumed.stderr.splitlines()], 12)
    assert_every_trial_once(tmp_path, 12)
    # the study's wall time counts both drivers, and its report says over how many
    (study_run,) = runs_by_kind(tmp_path)["study"]
    wall = float(study_run.data.tags[WALL_TAG])
    assert study_run.data.tags[DRIVERS_TAG] == "2"
    assert first_wall + 1 < wall <= first_wall + time.time() - started + 1
    header = (tmp_path / "reports" / "teststudy" / "README.md").read_text().splitlines()
    # the header's MLflow and model lines (a synthetic study's note stands above them)
    mlflow, model = (next(line for line in header if line.startswith(f"- {what} "))
                     for what in ("MLflow:", "Model"))  # fmt: skip
    minutes, seconds = divmod(int(wall), 60)
    assert f"wall time {minutes} min {seconds} s over 2 runs of the driver" in mlflow, header
    # both drivers ran this checkout: one code version, named once
    code = study_run.data.tags["code_version"]
    assert json.loads(study_run.data.tags["code_versions"]) == [code]
    assert model.endswith(f", code `{code}`"), model


def test_sigterm_stops_and_saves_as_ctrl_c_does(tmp_path):
    """`kill PID` (SIGTERM, what `timeout`, batch schedulers and `docker stop` send) to the
    driver alone, once Ray runs in it: Tune stops and saves as on Ctrl-C, and the resume
    command is printed, not Ray's core's stack dump and an abort (exit 134) as before."""
    study = write_synthetic_twin(tmp_path)
    code, output = _stopped_after_two_trials(study, tmp_path, [], signal.SIGTERM, group=False)
    assert code == 130, output[-3000:]
    assert "SIGTERM received" not in output and not driver_tracebacks(output), output[-3000:]
    assert "stopping: the running trials end" in output and "Tuner.restore" not in output
    assert f"python -m study.run {study.stem} --profile default --resume" in output
    (study_run,) = runs_by_kind(tmp_path)["study"]
    assert study_run.data.tags["state"] == "interrupted"


def test_resume_without_an_earlier_run_is_a_clear_error(tmp_path, tiny_model, tiny_corpus):
    study = write_study(tmp_path, str(tiny_model), tiny_corpus)
    code, _, err = run_in_process(study_command(study, tmp_path, "--resume"))
    assert code == 2
    assert err.strip().startswith("error: --resume: no earlier run of study teststudy")
    assert not (tmp_path / "mlflow.db").exists()  # refused before anything was written


def test_unknown_study_lists_known_ones(tmp_path):
    code, _, err = run_in_process(study_command(Path("no_such_study"), tmp_path))
    assert code == 2
    assert "ner_depth" in err and len(err.strip().splitlines()) == 1


def test_confirm_rounds_add_seeds_and_survive_a_sigkill(tmp_path):
    """Sequential confirm: 2 held-out seeds, then 2 more while the comparison is open (margin
    0 rules out equivalence; 2 seeds cannot pass O'Brien-Fleming's first look). The driver is
    killed as round 1 starts; the resumed driver runs round 1 only, each trial once (the
    driver's rounds and resume, on the synthetic twin of the tiny study)."""
    confirm = {"select": "best", "seeds": 2, "max_seeds": 4, "step": 2}
    phases = {"explore": {"samples": 2, "seeds": 2}, "confirm": confirm}
    analysis = {"primary": "dev_loss", "margin": 0.0}
    study = write_synthetic_twin(tmp_path, phases=phases, analysis=analysis)
    first: list[str] = []
    driver = start_driver(study, tmp_path)
    assert read_until(driver, lambda seen: "confirm round 1" in "".join(seen[-3:]), first)
    kill_driver(driver, first)
    assert any("confirm round 0: seeds [2, 3]" in line for line in first)
    assert any("after 2 units: continue" in line for line in first)

    resumed = run_study(study, tmp_path, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    second = resumed.stderr.splitlines()
    assert not any("confirm round 0" in line for line in second)
    assert any("confirm round 1: seeds [4, 5]" in line for line in second)
    assert_each_trial_ended_once([first, second], 16)
    assert_every_trial_once(tmp_path, 16)
    confirm_seeds = {
        r.data.tags["seed"] for r in runs_by_kind(tmp_path)["trial"]
        if r.data.tags["phase"] == "confirm"
    }  # fmt: skip
    assert confirm_seeds == {"2", "3", "4", "5"}  # held out: explore ran 0 and 1
    (state,) = (tmp_path / "ray_results" / "teststudy").glob("default-*/study.json")
    assert len(json.loads(state.read_text())["confirm_rounds"]) == 2
    report = (tmp_path / "reports" / "teststudy" / "README.md").read_text()
    assert "seeds after each look [2, 4]" in report and "## Verdicts (primary metric)" in report
    assert report.startswith("# Synthetic study report")  # the twin's: never a finding


def test_reused_explore_seeds_run_once_and_the_report_says_so(tmp_path):
    """The driver's seed bookkeeping, on the synthetic twin of the tiny study."""
    phases = {"explore": {"samples": 2, "seeds": 2},
              "confirm": {"select": "best", "seeds": 3, "reuse_explore_seeds": True}}  # fmt: skip
    study = write_synthetic_twin(tmp_path, phases=phases)
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


def test_data_seeds_cross_every_confirm_seed_and_split_the_variance(tmp_path):
    """The driver's and the report's handling of data seeds, on the synthetic twin (whose
    draws depend on the data seed as a trial's data order does)."""
    phases = {"explore": {"samples": 2, "seeds": 2},
              "confirm": {"select": "best", "seeds": 2, "data_seeds": 2}}  # fmt: skip
    analysis = {"primary": "dev_loss", "margin": 0.01}
    study = write_synthetic_twin(tmp_path, phases=phases, analysis=analysis,
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
    comparisons = list(csv.DictReader((folder / "comparisons.csv").open()))
    # the unit of analysis is the seed: each seed's data seeds are averaged before the test
    assert comparisons and {row["seeds"] for row in comparisons} == {"2 3"}


def test_confirm_rounds_stop_once_every_comparison_is_decided(tmp_path):
    """A margin far wider than the arms' difference: equivalence is shown at the first look,
    so the second round never runs and the report gives the verdict of that look (the
    driver's sequential rule, on the synthetic twin of the tiny study)."""
    confirm = {"select": "best", "seeds": 2, "max_seeds": 4, "step": 2}
    phases = {"explore": {"samples": 2, "seeds": 2}, "confirm": confirm}
    analysis = {"primary": "dev_loss", "margin": 10.0}
    study = write_synthetic_twin(tmp_path, phases=phases, analysis=analysis)
    done = run_study(study, tmp_path, "--verbose")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "after 2 units: equivalent" in done.stderr
    # --verbose: Ray's own output as well as the study's
    output = done.stdout + done.stderr
    # Tune's status table (either output engine); workers' log lines reach the driver
    # asynchronously, so they are not waited for here
    assert "Trial status" in output or "== Status ==" in output
    assert "trial finished:" in done.stderr and "study.progress: progress:" in done.stderr
    assert "confirm round 1" not in done.stderr
    confirm_seeds = {
        r.data.tags["seed"] for r in runs_by_kind(tmp_path)["trial"]
        if r.data.tags["phase"] == "confirm"
    }  # fmt: skip
    assert confirm_seeds == {"2", "3"}
    assert "(1 primary comparison(s) on dev_loss: depth=2 vs depth=3: equivalent)" in done.stdout
