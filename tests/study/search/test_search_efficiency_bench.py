"""bench/search_efficiency.py end to end in its synthetic mode, with tiny counts: a dense grid of
10 lrs x 3 seeds (the synthetic default), the 5 contenders x 2 repetitions, all trained by the
study machinery on the synthetic surface; then the same command again, which must find
everything in its MLflow cache, train nothing and print the same table; then again with a new,
empty MLflow store and only the ledger the first run wrote (a fresh clone's cache), which must
do the same.

The profile's budget is set to a fixed 3 epochs (`fixed.budget=null`), so that the coarse
grid's cost share has an exact value: 6 samples x 2 seeds against 10 lrs x 3 seeds, 0.4.
The run that trains is the bench as its own command, as a person runs it; the runs that must
find everything cached, and the estimates, call its `main` here with Ray forbidden.
"""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest
import search_efficiency  # bench/search_efficiency.py
from mlflow.tracking import MlflowClient

from tests.study_helpers import REPO, in_process

pytestmark = [pytest.mark.slow, pytest.mark.study]

CONTENDERS = {"study", "tpe", "random_asha", "random", "coarse_grid"}


def _bench(tmp_path, store: str = "cache.db", *more: str) -> subprocess.CompletedProcess:
    """The bench as its own command, as a person runs it: the run that trains."""
    command = [sys.executable, "bench/search_efficiency.py", *_argv(tmp_path, store, *more)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done


def _read(
    tmp_path, monkeypatch, store: str = "cache.db", *more: str, code: int = 0
) -> subprocess.CompletedProcess:
    """The bench's `main` in this process, for the runs that must find everything cached (or
    only estimate): Ray may not start, so one that would train fails here rather than passing
    slowly. Saves a fresh interpreter's imports per run."""

    def no_ray(num_cpus):
        raise AssertionError("the bench started Ray: it was to train nothing")

    monkeypatch.setattr(search_efficiency, "start_ray", no_ray)
    monkeypatch.chdir(REPO)
    done = in_process(search_efficiency.main, _argv(tmp_path, store, *more))
    assert done.returncode == code, (done.stdout + done.stderr)[-3000:]
    return done


def _argv(tmp_path, store: str, *more: str) -> list[str]:
    return [
        "--trainable", "synthetic", "--repetitions", "2", "--set", "fixed.budget=null",
        "--cache", f"sqlite:///{tmp_path / store}", "--out", str(tmp_path / "out"),
        "--ledger", str(tmp_path / "ledger.csv"), "--num-cpus", "2", *more,
    ]  # fmt: skip


def _runs(tmp_path, store: str = "cache.db") -> int:
    client = MlflowClient(f"sqlite:///{tmp_path / store}")
    experiment = client.get_experiment_by_name("ner_depth")
    if experiment is None:
        return 0
    return len(client.search_runs([experiment.experiment_id], max_results=10000))


def test_search_efficiency_synthetic_end_to_end_and_cached(tmp_path, monkeypatch):
    estimate = _read(tmp_path, monkeypatch, "cache.db", "--estimate")
    assert "0 of 20 points cached" in estimate.stdout and "trial-epochs" in estimate.stdout
    assert _runs(tmp_path) == 0 and not (tmp_path / "ledger.csv").exists()  # trained nothing
    first = _bench(tmp_path)
    table = pd.read_csv(tmp_path / "out" / "synthetic-search_efficiency.csv")
    reps = pd.read_csv(tmp_path / "out" / "synthetic-repetitions.csv")
    grid = pd.read_csv(tmp_path / "out" / "synthetic-grid.csv")
    assert sorted(table.contender) == sorted(CONTENDERS) and (table.repetitions == 2).all()
    assert len(grid) == 20 and (grid.seeds_completed == 3).all()
    # dev regret is against the grid's best, so never below 0; test regret is against test at
    # the dev-best lr, where a chosen lr may test better
    arms = sorted(grid.arm.unique())
    per_arm = [f"regret_{kind} {arm}" for kind in ("dev", "test") for arm in arms]
    assert (reps[["regret_dev", *per_arm[:2]]] >= -1e-12).all().all(), reps
    assert reps[["regret_test", *per_arm[2:]]].notna().all().all(), reps
    assert reps.regret_test.tolist() == pytest.approx(reps[per_arm[2:]].mean(axis=1).tolist())
    assert (reps.arms_chose_nothing == 0).all() and (table.measured == 2).all()
    assert {"same_draws_as"} <= set(reps.columns) and "same draws" in first.stdout
    coarse = reps[reps.contender == "coarse_grid"].cost_share
    assert coarse.tolist() == pytest.approx([0.4, 0.4], abs=1e-12)
    assert (table.trainable == "synthetic (not a finding)").all()
    assert (tmp_path / "out" / "synthetic-search_efficiency.png").stat().st_size > 0
    assert (tmp_path / "out" / "synthetic-grid.png").stat().st_size > 0
    text = (tmp_path / "out" / "synthetic-search_efficiency.md").read_text()
    assert text.count("\n| ") == len(CONTENDERS) and "SYNTHETIC" in text  # a row each
    assert "The grid's own resolution" in text and first.stdout.count("would show a mean") == 2
    assert (grid.dev_sd > 0).all()  # the sd over the 3 grid seeds the grid plot shades
    assert "SYNTHETIC: a response surface tests the machinery" in first.stdout
    runs = _runs(tmp_path)

    again = _read(tmp_path, monkeypatch)
    assert _runs(tmp_path) == runs  # no grid trial, no contender run trained again
    assert "20 of 20 points cached" in again.stdout
    assert again.stdout.count("(cached)") == 10
    assert "building the grid cache" not in again.stdout
    rerun = pd.read_csv(tmp_path / "out" / "synthetic-search_efficiency.csv")
    pd.testing.assert_frame_equal(rerun, table)

    # a fresh clone: no store, only the committed ledger, which has every run: the grid's one
    # (synthetic: all its lrs in one run), 10 lrs x 2 arms x 3 seeds, and the 10 contender
    # repetitions, 6 lrs x 2 seeds x 2 arms each
    ledger = pd.read_csv(tmp_path / "ledger.csv")
    assert ledger.study_run.nunique() == 1 + 10 and len(ledger) == 60 + 10 * 24, ledger
    # beside it every evaluation of those trials, the grid's with a test score at each
    curves = pd.read_csv(tmp_path / "ledger_evaluations.csv")
    assert set(curves.run_id) == set(ledger.run_id)
    grid_trials = ledger[ledger.cache_tag == "bench.search_efficiency.grid_key"].run_id
    assert curves[curves.run_id.isin(grid_trials)].eval_test_f1.notna().all()
    estimate = _read(tmp_path, monkeypatch, "fresh.db", "--estimate")
    assert "every contender repetition is cached" in estimate.stdout
    # the last --repetitions wins
    more = _read(tmp_path, monkeypatch, "fresh.db", "--estimate", "--repetitions", "3")
    assert "contender repetitions not cached: 5," in more.stdout
    assert "at the 10 cached ones' mean of" in more.stdout
    fresh = _read(tmp_path, monkeypatch, "fresh.db")
    assert _runs(tmp_path, "fresh.db") == 0
    assert "20 of 20 points cached" in fresh.stdout and fresh.stdout.count("(cached)") == 10
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "out" / "synthetic-search_efficiency.csv"), table
    )

    # a grid flag moved the grid's lrs: the bench says the cache holds this key's grid elsewhere
    moved = _read(tmp_path, monkeypatch, "fresh.db", "--estimate", "--beyond", "0.4")
    assert "0 of 20 points cached" in moved.stdout, moved.stdout
    assert "the cache holds this key's grid at other lrs (10," in moved.stdout
    # the study's range narrowed inside the grid, no grid flag given: the cached grid stays
    narrowed = _read(
        tmp_path, monkeypatch, "fresh.db", "--estimate", "--set", "search.lr.low=1.5e-4"
    )
    assert "20 of 20 points cached" in narrowed.stdout, narrowed.stdout
    assert "contender repetitions not cached: 10," in narrowed.stdout  # a new range, new runs


def test_a_grid_range_that_does_not_hold_the_study_range_is_one_line_and_writes_nothing(
    tmp_path, monkeypatch
):
    done = _read(tmp_path, monkeypatch, "c.db", "--grid-range", "5e-4", "1e-3", "--estimate",
                 code=2)  # fmt: skip
    assert done.stderr.strip().splitlines()[-1].startswith("search_efficiency: --grid-range 0.0005")
    assert "does not hold" in done.stderr and not (tmp_path / "out").exists()
