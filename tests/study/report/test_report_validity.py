"""The report's convergence, parity and threats sections from a real MLflow store written by
hand: an arm under-trained on purpose is marked not converged and its verdict
budget-sensitive; a study where everything is in order says which checks ran; a study
recorded before trials reported their budget says "not recorded" and still reports."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from mlflow.entities import Metric

from study.analysis import Analysis
from study.names import FINAL_GAIN_RULE_TAG
from study.report import validity, write_report
from study.report.sections import convergence
from study.tracking.reading import load_study_record
from study.tracking.store import StudyTracker
from trainables.training.curves import FINAL_GAIN_RULE, final_gain

SEEDS = range(2, 8)  # 6 confirm seeds: an exact signed-rank test can reach 0.05
LRS = (4e-5, 1e-4, 2e-4)  # explore samples; both arms choose 1e-4, the middle one
ARMS = ({"depth": "full"}, {"depth": "full-1"})


def write_study(
    uri: str,
    name: str,
    gains: dict[str, float] | None,
    steps=(100.0, 100.0),
    metric: str = "train_loss",
) -> None:
    """Explore (3 lr per arm, seeds 0-1) and confirm (6 seeds) of two arms. `gains`: each
    arm's final_gain, recorded with steps_run, tokens_seen and the driver's converged tag;
    None for a study recorded before trials reported them. Explore selects on `metric`."""
    tracker = StudyTracker(uri, name)
    plan = {
        "description": "validity",
        "metric": {"name": metric, "mode": "min"},
        "search": {"lr": {"type": "loguniform", "low": 3e-5, "high": 3e-4}},
        "fixed": {"epochs": 3},
    }
    tags = {"state": "finished", "profile": "default", "analysis": Analysis().to_json()}
    study_run = tracker.study_run(name, name, tags, {"plan": json.dumps(plan)})
    rng = np.random.default_rng(0)
    for index, factors in enumerate(ARMS):
        arm = f"depth={factors['depth']}"
        arm_run = tracker.arm_run(study_run, arm, factors)
        trials = [("explore", seed, lr) for lr in LRS for seed in (0, 1)]
        trials += [("confirm", seed, 1e-4) for seed in SEEDS]
        for sample, (phase, seed, lr) in enumerate(trials):
            own = {
                "arm": arm,
                "phase": phase,
                "sample": str(sample),
                "seed": str(seed),
                "status": "completed",
            }
            budget = {}
            if gains is not None:
                gain = gains[arm]
                own["converged"] = str(Analysis().converged(gain)).lower()
                budget = {
                    "final_gain": gain,
                    "steps_run": steps[index],
                    "tokens_seen": 80 * steps[index],
                }
            run = tracker.trial_run(study_run, arm_run, f"{phase}/{arm}/{sample}/{seed}", own)
            tracker.log_params(run, {**factors, "lr": lr, "arm_index": index})
            final = {
                "dev_f1": rng.uniform(0.3, 0.5),
                "test_f1": rng.uniform(0.3, 0.5),
                "curve_area": 0.3,
                "steps_to_95": 90.0,
                "train_loss": 0.5,
                **budget,
            }
            curve = [Metric("dev_f1", v, 0, 30 * (i + 1)) for i, v in enumerate((0.1, 0.2))]
            tracker.client.log_batch(
                run, metrics=[*curve, *(Metric(k, float(v), 0, 90) for k, v in final.items())]
            )
            tracker.end(run, "FINISHED")
    tracker.end_study(study_run, {}, "FINISHED")


def report(tmp_path, name: str, **kwargs):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    write_study(uri, name, **kwargs)
    made = write_report(
        uri,
        name,
        out=tmp_path / name,
        aso={"num_samples": 50, "num_bootstrap_iterations": 50},
    )
    return made.folder, (made.folder / "README.md").read_text()


def section(page: str, title: str) -> str:
    return page.split(title, 1)[1].split("\n## ", 1)[0]


@pytest.mark.slow  # over ~7 s: the slow tier
def test_an_under_trained_arm_is_not_converged_and_its_verdict_budget_sensitive(tmp_path):
    gains = {"depth=full": 0.001, "depth=full-1": 0.09}  # full-1 still climbing at its end
    folder, page = report(tmp_path, "slow", gains=gains)
    trials = pd.read_csv(folder / "trials.csv")
    confirm = trials[trials.phase == "confirm"].set_index("arm")
    converged = confirm.converged.astype(str).str.lower()
    assert (converged["depth=full-1"] == "false").all() and (
        converged["depth=full"] == "true"
    ).all()
    assert {"final_gain", "steps_run", "tokens_seen"} <= set(trials.columns)
    assert "| `depth=full` | 6/6 |" in page and "| `depth=full-1` | 0/6 |" in page
    verdicts = section(page, "## Verdicts (primary metric)")
    assert "— **budget-sensitive**: `depth=full-1` still improving in 6/6 confirm seeds" in verdicts
    named = ", ".join(f"seed {seed} (final_gain 0.09)" for seed in SEEDS)
    assert f"6/6 confirm seeds: {named} ≥ plateau 0.005" in verdicts
    threats = section(page, "## Threats to validity")
    assert "- **convergence**: `depth=full-1` vs `depth=full` is budget-sensitive" in threats
    assert "No threat found" not in threats
    assert "Threats to validity" in (folder / "report.html").read_text()


@pytest.mark.slow  # over ~7 s: the slow tier
def test_a_study_where_everything_is_in_order_says_which_checks_ran(tmp_path):
    gains = {"depth=full": 0.001, "depth=full-1": 0.002}
    folder, page = report(tmp_path, "fine", gains=gains, steps=(100.0, 105.0))
    threats = section(page, "## Threats to validity")
    assert "No threat found. Checks that ran: convergence" in threats
    assert "budget-sensitive" not in page
    assert "| `depth=full-1` vs `depth=full` | 105 | 100 | 0.0500 | 8400 | 8000 |" in page
    compute = pd.read_csv(folder / "compute_parity.csv")
    assert compute.steps_run_gap.iloc[0] == pytest.approx(0.05) and not compute.unequal.iloc[0]
    tuning = pd.read_csv(folder / "tuning_parity.csv")
    assert set(tuning.how) == {"tuned for the arm (3 explore samples)"}
    assert tuning.edge.isna().all()


@pytest.mark.slow  # over ~7 s: the slow tier
def test_unequal_compute_and_dev_selection_are_named(tmp_path):
    gains = {"depth=full": 0.001, "depth=full-1": 0.002}
    _, page = report(tmp_path, "heavy", gains=gains, steps=(100.0, 150.0), metric="dev_f1")
    threats = section(page, "## Threats to validity")
    assert (
        "- **compute**: `depth=full-1` vs `depth=full`: unequal compute, mean optimizer "
        "steps 150 vs 100 (+50%)" in threats
    )
    assert "- **dev reuse**: Explore chose each arm's lr on `dev_f1`" in threats


@pytest.mark.slow  # over ~7 s: the slow tier
def test_a_study_recorded_before_budgets_says_not_recorded(tmp_path):
    folder, page = report(tmp_path, "old", gains=None)
    trials = pd.read_csv(folder / "trials.csv")
    assert trials[["converged", "final_gain", "steps_run", "tokens_seen"]].isna().all().all()
    assert "| `depth=full` | not recorded |" in page
    threats = section(page, "## Threats to validity")
    assert "Not recorded, so not checked: convergence, compute" in threats
    assert "budget-sensitive" not in page
    assert "Steps and tokens: not recorded." in page


def test_a_study_recorded_under_the_earlier_rule_is_judged_from_its_curve_again(tmp_path):
    """Trials recorded before the driver tagged final_gain's rule: their final_gain (best
    against best) and converged tag (until_plateau's stop taken as convergence) are replaced
    by the smoothed rule on the dev curve MLflow holds, the last evaluation's own value
    worked out from curve_area where the kept weights' re-score was logged over it. A trial
    tagged with the rule keeps what it reported."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = StudyTracker(uri, "old")
    plan = {"metric": {"name": "dev_f1", "mode": "max"}}
    tags = {"state": "finished", "analysis": Analysis().to_json()}
    study_run = tracker.study_run("old", "old", tags, {"plan": json.dumps(plan)})
    arm_run = tracker.arm_run(study_run, "depth=full", {"depth": "full"})
    # as evaluated: still rising 0.01 per evaluation at the end; best 0.60 at step 80 is kept
    evaluated = [0.1, 0.3, 0.45, 0.5, 0.55, 0.56, 0.57, 0.60, 0.585, 0.595]
    logged = evaluated[:-1] + [0.60]  # the last step holds the kept weights' re-score
    for seed, extra in enumerate(({}, {FINAL_GAIN_RULE_TAG: FINAL_GAIN_RULE})):  # old, new
        own = {"arm": "depth=full", "phase": "confirm", "sample": "0", "seed": str(seed),
               "status": "completed", "converged": "true", **extra}  # fmt: skip
        run = tracker.trial_run(study_run, arm_run, f"confirm/{seed}", own)
        tracker.log_params(run, {"depth": "full", "arm_index": 0})
        final = {"final_gain": 0.0, "plateau_stopped": 1.0, "best_step": 80.0,
                 "curve_area": float(np.mean(evaluated)), "steps_run": 100.0}  # fmt: skip
        curve = [Metric("dev_f1", v, 0, 10 * (i + 1)) for i, v in enumerate(logged)]
        tracker.client.log_batch(
            run, metrics=[*curve, *(Metric(k, v, 0, 100) for k, v in final.items())]
        )
        tracker.end(run, "FINISHED")
    tracker.end_study(study_run, {}, "FINISHED")
    record = load_study_record(uri, "old")
    trials = record.trials.set_index("seed")
    expected = final_gain(evaluated)
    assert expected > 0.005  # the line through the last 4 as evaluated still rises
    # neither the logged re-score nor the curve without it gives that value
    assert expected != pytest.approx(final_gain(logged))
    assert expected != pytest.approx(final_gain(evaluated[:-1]))
    assert trials.at[0, "final_gain"] == pytest.approx(expected)
    assert trials.at[0, "converged"] == "false" and trials.at[0, "plateau_stopped"] == 1.0
    assert trials.at[0, FINAL_GAIN_RULE_TAG] == "recomputed"
    assert trials.at[1, "final_gain"] == 0.0 and trials.at[1, "converged"] == "true"
    assert trials.at[1, FINAL_GAIN_RULE_TAG] == FINAL_GAIN_RULE
    assert validity.convergence_table(record).recomputed.tolist() == [1]
    text = convergence.SECTION.markdown(record, convergence.SECTION.tables(record))
    assert "1 confirm trial reported `final_gain` under the earlier rule" in text
    assert "| `depth=full` | 1/2 |" in text
