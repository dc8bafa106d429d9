"""bench/search_evaluations.py, the per-evaluation ledger (issue 47, item 4): each trial's
evaluations read back from real MLflow metric histories (a trial that kept an earlier
evaluation logs that checkpoint's dev re-score at its last step: the ledger holds the last
evaluation's own score, worked out from `curve_area`), and the trials ledger's cache reports
which grid runs have no test curve, so `--test-curves` knows what to train again."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import search_evaluations as evaluations
import search_ledger
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient


def _logged_trial(client: MlflowClient, experiment: str, dev: list[float], test: list[float],
                  rescore: float | None) -> str:  # fmt: skip
    """A trial run evaluated at steps 10, 20, ...; `rescore`: the kept checkpoint's dev score,
    logged at the last step over the last evaluation's own (as until_plateau does)."""
    run_id = client.create_run(experiment).info.run_id
    steps = [10 * (k + 1) for k in range(len(dev))]
    logged = [*dev[:-1], dev[-1] if rescore is None else rescore]
    metrics = [Metric("evaluation", k + 1, 0, s) for k, s in enumerate(steps)]
    metrics += [Metric("epoch", s / 20, 0, s) for s in steps]
    metrics += [Metric("dev_f1", v, 0, s) for v, s in zip(logged, steps, strict=True)]
    metrics += [Metric("eval_test_f1", v, 0, s) for v, s in zip(test, steps, strict=True)]
    client.log_batch(run_id, metrics=metrics)
    return run_id


def test_every_evaluation_comes_back_as_made(tmp_path):
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("ner_depth")
    dev, test = [0.30, 0.50, 0.45], [0.28, 0.47, 0.49]
    kept = _logged_trial(client, experiment, dev, test, rescore=0.50)
    plain = _logged_trial(client, experiment, dev, test, rescore=None)
    trials = pd.DataFrame({"run_id": [kept, plain], "best_step": [20.0, math.nan],
                           "curve_area": [sum(dev) / 3, sum(dev) / 3]})  # fmt: skip
    names = evaluations.curve_names("dev_f1", "test_f1")
    assert names == ["dev_f1", "eval_test_f1"]
    rows = evaluations.run_evaluations(uri, "ner_depth", "s1", trials, names)
    assert list(rows.columns) == [*evaluations.EVALUATION_COLUMNS, *names]
    for run_id in (kept, plain):
        mine = rows[rows.run_id == run_id]
        assert mine.step.tolist() == [10, 20, 30] and mine.evaluation.tolist() == [1, 2, 3]
        assert mine.epoch.tolist() == [0.5, 1.0, 1.5]
        assert mine.dev_f1.tolist() == pytest.approx(dev)  # 0.45, not the re-score 0.50
        assert mine.eval_test_f1.tolist() == test
    assert (rows.study_run == "s1").all()


def test_grid_runs_without_a_test_curve_are_named(tmp_path):
    grid_tag = search_ledger.TAGS[0]
    path = tmp_path / "search_trials.csv"
    assert evaluations.path_beside(path).name == "search_evaluations.csv"
    trials = pd.DataFrame({"study": "ner_depth", "cache_tag": grid_tag, "cache_value": "key1",
                           "study_run": ["g1", "g2", "g3"], "run_id": ["t1", "t2", "t3"],
                           "phase": "confirm", "arm": "depth=5", "sample": 0, "seed": 1000,
                           "status": "completed", "lr": [1e-4, 2e-4, 3e-4], "epoch": 2.0,
                           "dev_f1": 0.5, "test_f1": 0.4})  # fmt: skip
    search_ledger.write(path, trials)
    curves = pd.DataFrame(
        {
            "study": "ner_depth",
            "study_run": ["g1", "g1", "g2"],
            "run_id": ["t1", "t1", "t2"],
            "evaluation": [1, 2, 1],
            "step": [10, 20, 10],
            "epoch": [0.5, 1.0, 0.5],
            "dev_f1": [0.3, 0.5, 0.3],
            "eval_test_f1": [0.2, 0.4, math.nan],
        }
    )
    evaluations.write(evaluations.path_beside(path), curves)
    cache = search_ledger.TrialCache(f"sqlite:///{tmp_path / 'empty.db'}", path, "ner_depth",
                                     ["dev_f1", "test_f1"])  # fmt: skip
    assert cache.evaluations("g1").eval_test_f1.tolist() == [0.2, 0.4]
    # g2 recorded no test score, g3 no evaluation at all (and the store does not hold it)
    assert cache.runs_without_test_curves("key1") == ["g2", "g3"]
    cache.forget_runs(["g2"])
    assert pd.read_csv(path).study_run.tolist() == ["g1", "g3"]
    left = pd.read_csv(evaluations.path_beside(path))
    assert left.study_run.tolist() == ["g1", "g1"]
    joined = evaluations.with_trials(left, trials)
    assert joined.lr.tolist() == [1e-4, 1e-4] and joined.arm.tolist() == ["depth=5"] * 2
