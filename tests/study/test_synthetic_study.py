"""Studies of the synthetic trainable through the real command line, Ray and MLflow: what they
print and record says "synthetic", and search plus pruning find the surface's known optimum.

The optimum is known because the surface is a formula (trainables/settings/surface.py): for
each arm, `Surface.best_final` is the best noise-free F1 at a trial's last step over the searched
range, and the regret of the explore phase's choice is how far the chosen learning rate's F1 falls
short of it.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.study_helpers import (
    REPO,
    in_process,
    run_in_process,
    run_study,
    runs_by_kind,
    study_command,
    tracking_uri,
    write_synthetic_study,
)
from trainables.settings.surface import Surface

pytestmark = pytest.mark.study

LOW, HIGH = 1.0e-6, 1.0e-3  # three decades around both arms' optima, none diverging
# Converging within a fifth of an epoch, a sample's rank at ASHA's first rung (epoch 1) is
# nearly its final rank: pruning may then cost the search nothing, and any regret is its own.
SURFACE = {"steps_per_epoch": 20, "convergence_epochs": 0.2}
SEARCHING = {
    "grid": {"depth": ["full", 3]},  # optima 0.375 decades apart
    "search": {"lr": {"type": "loguniform", "low": LOW, "high": HIGH}},
    "fixed": {"epochs": 3},
    "phases": {
        "explore": {"samples": 16, "seeds": 1, "asha": {"grace_period": 1, "reduction_factor": 3}},
        "confirm": {"select": "best", "seeds": 2},
    },
}
BOUND = 0.01  # one F1 point of regret per arm


def test_dry_run_says_synthetic(tmp_path):
    study = write_synthetic_study(tmp_path, SURFACE, **SEARCHING)
    code, stdout, stderr = run_in_process(study_command(study, tmp_path, "--dry-run"))
    assert code == 0, stderr[-2000:]
    out = stdout + stderr
    assert "trainable: synthetic surface (no model, no data; no finding)" in out
    assert "'steps_per_epoch': 20" in out  # every option recorded, the given one included
    assert not (tmp_path / "mlflow.db").exists()


def _arm_settings(params: dict[str, str]) -> dict:
    depth = params["depth"]
    return {"depth": int(depth) if depth.isdigit() else depth, "epochs": int(params["epochs"])}


def _regret(surface: Surface, params: dict[str, str]) -> float:
    settings = _arm_settings(params)
    _, best = surface.best_final(settings, LOW, HIGH)
    arm = surface.arm(settings)
    _, steps = surface.trial_steps(arm, settings["epochs"], None)
    return best - surface.mean_f1(arm, float(params["lr"]), steps)


def _random_choice_regret(surface: Surface, params: dict[str, str]) -> float:
    """The mean regret of a learning rate drawn at random from the range: what a search that
    learnt nothing would average."""
    grid = np.geomspace(LOW, HIGH, 200)
    return float(np.mean([_regret(surface, {**params, "lr": str(lr)}) for lr in grid]))


def test_search_and_pruning_find_the_known_optimum_of_each_arm(tmp_path):
    study = write_synthetic_study(tmp_path, SURFACE, **SEARCHING)
    done = run_study(study, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout + done.stderr
    assert "synthetic report: " in out
    readme = (tmp_path / "reports" / "teststudy" / "README.md").read_text()
    assert readme.startswith("# Synthetic study report: `teststudy`")

    runs = runs_by_kind(tmp_path)
    (study_run,) = runs["study"]
    assert study_run.info.run_name.endswith("(synthetic)")
    assert study_run.data.tags["trainable"] == "synthetic"
    trials = runs["trial"]
    explore = [r for r in trials if r.data.tags["phase"] == "explore"]
    status = [r.data.tags["status"] for r in explore]
    assert status.count("pruned") >= 8, status  # ASHA stopped samples

    surface = Surface(**json.loads(trials[0].data.params["trainable"])["synthetic"])
    chosen = {
        r.data.tags["arm"]: r.data.params for r in trials if r.data.tags["phase"] == "confirm"
    }
    assert len(chosen) == 2
    for arm, params in chosen.items():
        regret = _regret(surface, params)
        assert regret <= BOUND, (arm, params["lr"], regret)
        # the bound tells a search from a guess: a random lr averages far more regret
        assert _random_choice_regret(surface, params) > 5 * BOUND, arm
        sampled = [_regret(surface, r.data.params) for r in explore if r.data.tags["arm"] == arm]
        assert regret <= float(np.median(sampled)), (arm, regret, sorted(sampled))
    # who drew each sample: TPE's 8 start-up draws at random (16 samples // 2), its model after
    drawn: dict[str, dict[int, str]] = {}
    for r in explore:
        drawn.setdefault(r.data.tags["arm"], {})[int(r.data.params["sample"])] = r.data.params[
            "drawn_by"
        ]
    for by_sample in drawn.values():
        assert [by_sample[k] for k in range(8)] == ["random"] * 8, by_sample
        assert "tpe" in by_sample.values(), by_sample
    tuning = pd.read_csv(tmp_path / "reports" / "teststudy" / "tuning_parity.csv")
    assert tuning.how.str.contains("drawn by TPE's model").all(), tuning.how


def test_reports_none_ends_the_study_without_a_report_that_study_report_makes_later(tmp_path):
    """Also: a step budget, and the `converged` tag on an arm made to learn 50 times slower
    (the search range is narrow around both optima, so that only the slowdown decides)."""
    phases = {"explore": {"samples": 2, "seeds": 1}, "confirm": {"seeds": 2}}
    search = {"lr": {"type": "loguniform", "low": 8.0e-5, "high": 1.5e-4}}
    fixed = {"epochs": 3, "budget": {"steps": 60}}  # 3 epochs of 20 steps
    quick = {**SEARCHING, "phases": phases, "search": search, "fixed": fixed}
    surface = {**SURFACE, "slow_arm": {"depth": 3}, "slow_by": 50, "noise": 0.001}
    study = write_synthetic_study(tmp_path, surface, **quick)
    done = run_study(study, tmp_path, "--reports", "none")
    assert done.returncode == 0, done.stderr[-3000:]
    runs = runs_by_kind(tmp_path)
    for run in (r for r in runs["trial"] if r.data.tags["phase"] == "confirm"):
        slow = run.data.tags["arm"] == "depth=3"
        assert run.data.tags["converged"] == ("false" if slow else "true"), run.data.metrics
        assert (run.data.metrics["final_gain"] > 0.005) == slow
        assert run.data.metrics["steps_run"] == 60 and run.data.params["budget"] == '{"steps": 60}'
    (study_run,) = runs["study"]
    assert study_run.data.tags["state"] == "finished"
    assert (
        "no report made (--reports none); make it with: python -m study.report teststudy "
        f"--run-id {study_run.info.run_id}"
    ) in done.stdout
    assert not (tmp_path / "reports").exists() and not (REPO / "none").exists()

    from study.report.__main__ import main as report_main

    later = in_process(report_main, ["teststudy", "--run-id", study_run.info.run_id,
                                     "--tracking-uri", tracking_uri(tmp_path),
                                     "--out", str(tmp_path / "later")])  # fmt: skip
    assert later.returncode == 0, later.stderr[-3000:]
    readme = (tmp_path / "later" / "README.md").read_text()
    assert readme.startswith("# Synthetic study report: `teststudy`")
    # the slowed arm: not converged in either confirm seed, its verdict budget-sensitive, and
    # the threats section names it (the validity issue's under-trained-arm check, end to end)
    assert (
        "| `depth=3` | 0/2 |" in readme
        and "budget-sensitive**: `depth=3` still improving" in readme
    )
    threats = readme.split("## Threats to validity", 1)[1].split("\n## ", 1)[0]
    assert "- **convergence**:" in threats and "`depth=3`" in threats


def test_explore_goes_on_when_a_seed_stops_improving_before_the_last_rung(tmp_path):
    """Under `budget: {until_plateau}` a seed can complete before its arm's last ASHA rung
    (epoch 2 here: grace 1, reduction 2, at most 4 epochs) while its sibling reaches it. The
    sample book paused the sibling there until every seed got there, which the completed
    one never would: the study hung (ner_reinit's default profile did). It finishes now."""
    # eval_every 10 on 20 steps an epoch: the plateau rule's smoothing window is 2 evaluations,
    # so its first smoothed value comes at epoch 1 and patience 1 can stop a seed at 1.5
    plateau = {"until_plateau": {"patience": 1, "min_delta": 0.0, "max_epochs": 4}}
    study = write_synthetic_study(
        tmp_path,
        {"steps_per_epoch": 20, "convergence_epochs": 0.1, "noise": 0.05},
        search={"lr": {"type": "categorical", "choices": [1.0e-4]}},
        fixed={"eval_every": 10, "budget": plateau},
        phases={
            "explore": {
                "samples": 1,
                "seeds": 2,
                "asha": {"grace_period": 1, "reduction_factor": 2},
            },
            "confirm": {"select": "best", "seeds": 1},
        },
    )
    done = run_study(study, tmp_path, timeout=180)  # it took 40 s; the hang, forever
    assert done.returncode == 0, done.stderr[-3000:]
    explore = [r for r in runs_by_kind(tmp_path)["trial"] if r.data.tags["phase"] == "explore"]
    ends = {}
    for run in explore:
        ends.setdefault(run.data.tags["arm"], []).append(run.data.metrics["epoch"])
    # the case itself: in some arm one seed ended before epoch 2 and the other reached it
    assert any(min(e) < 2 <= max(e) for e in ends.values()), ends
    assert {r.data.tags["status"] for r in explore} == {"completed"}
